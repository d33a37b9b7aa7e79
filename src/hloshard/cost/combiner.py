"""The latency XLA's collective combiners leave: independent collectives share one latency.

**XLA's rule** (``xla/service/all_reduce_combiner.cc``, ``all_gather_combiner.cc``,
``reduce_scatter_combiner.cc``, all through ``collective_combiner_utils.h``
``CombineInstructionsByKey``; read in openxla/xla, not copied): per non-fusion computation, collectives
of one kind with an equal key (all-reduce: the reduction opcode, replica groups, channel mode, element
type, sharding domain; all-gather / reduce-scatter: also the dimension) are merged into one variadic
collective when **neither depends on the other** (no path between them), greedily in post order, until
the merged operands' bytes would pass ``combine_threshold_in_bytes`` or their count
``combine_threshold_count``.  The GPU compiler runs all three after fusion with thresholds from
``xla_gpu_{all_reduce,all_gather,reduce_scatter}_combine_threshold_bytes``, default
``kDefaultAllReduceCombineThreshold`` = 30 MiB + 7 bytes (``collective_utils.h``, the same value for
all-gather and reduce-scatter), and a count limit of 256; the CPU compiler runs the all-reduce combiner
too (``../shared/reference/xla_oracle.md``: XLA's CPU step of the data-parallel MLP has one variadic
gradient all-reduce); the TPU compiler's pipeline is not public and is assumed to combine alike.  A
data-parallel train step's gradient all-reduces are therefore **one** collective (the new user's U-Net:
23 gradient all-reduces in hloshard's plan, 1 in XLA's compiled program), paying one latency, not 23.

**The node-separable approximation** (the cost graph prices each instruction's strategy alone):

* *Height classes.*  In one computation, an instruction's height is 0 when no instruction that may
  carry a collective (:func:`carries_collective`: :data:`BARRIER_OPCODES` less a reduce over extent-1
  dimensions and a pin in its operand's layout) depends on it, else 1 + the largest height of such an
  instruction among its users' descendants (computed in reverse topological order:
  ``height(i) = max over users u of height(u) + [u is a barrier]``).  Two barriers of the same height are
  independent (if ``a`` reached ``b``, ``height(a) >= height(b) + 1``), so XLA may merge the
  collectives they carry.  The weight-gradient dots and bias-gradient reduces of a train step, whose
  results only flow into the elementwise optimizer update, are the class of height 0.
* *Shares.*  An instruction of a class of ``k`` members (:data:`MEMBER_OPCODES`, the opcodes whose
  strategies price an all-reduce, reduce-scatter or all-gather of their own; in a computation that
  writes its collectives, a per-device program, only those: :func:`height_classes`) pays, for each such
  collective of ``B`` bytes per device, the fraction :func:`latency_share` ``= max(1 / min(k, 256),
  min(1, B / T))`` of its latency, ``T`` = :data:`COMBINE_THRESHOLD_BYTES` (the latency its cost
  function charges, :func:`hloshard.cost.collectives.collective_latency`: the axis' alpha, or for a
  group over a fast and a slow link the latency of the schedule its cost function picks for its bytes,
  the ring through the nodes or the levels, :func:`hloshard.cost.collectives.level_schedule`).  Summed over the
  class this is at least ``max(1, sum B / T)``: the ``ceil(sum B / T)`` merged collectives the
  threshold leaves, to within one; the count limit is the ``min(k, 256)``.
* *What it assumes.*  That the class's collectives share one key (the same mesh axes, kind and element
  type: true of a data-parallel gradient set, where every member all-reduces over the batch axes);
  members that choose no collective, or different axes, make the share too small (an optimistic
  latency).  In a program that writes its collectives (a per-device program, a manual region) the class
  is the height and XLA's combiner key (:func:`combine_key`), which the text gives.  Bandwidth (beta)
  and HBM terms are unchanged: combining saves latency only.

**Resharding edges from independent values** (:func:`independent_values`, :func:`edge_savings`): the
all-gathers a resharding edge carries (``cost/reshard.plan``'s steps; an FSDP-style plan's gathering of
a sharded parameter before its dot) are collectives of the partitioned program like any other, so the
same rule merges them.  An edge's collectives run on its producer's value; when that producer depends
on no instruction that may carry a collective (its own opcode and every ancestor in its computation
outside :data:`BARRIER_OPCODES`: a parameter, a ``get-tuple-element`` of a loop body's parameter, a
``convert`` or ``dynamic-slice`` of one), no collective of the computation precedes it, so no path
joins two such edges' collectives: they are mutually independent, which is exactly the combiners'
condition.  They form one class of ``k`` = the array operand uses of such values by the computation's
instructions (every edge that may carry one; as for instruction classes, uses that choose no
collective make the share too small), each combinable collective of a pair paying
:func:`latency_share` of its alpha; the edge's matrix entry drops by ``alpha x (1 - share)`` per
collective (never below 0).  On the TPU this is not what happens (measured, BENCHMARKS.md round 18: the
TPU compiler's program of ``transformer_train_step``'s FSDP-style plan keeps its 86 parameter all-gathers
apart, each in an ``async_collective_fusion`` overlapping compute); its plans priced with the shared
latency were as fast or faster by its own estimate on 18 of 19 sample and held-out modules (one 0.4%
slower).

**Measured against XLA's pipelines** (round 27; jaxlib 0.10.2's CPU compiler, new user 25b's GPT-2 FSDP plan
``gpt2.fsdp.hlo`` at 16 partitions, Shardy): after partitioning 74 all-gathers, 73 all-reduces, 1 all-to-all;
in the final program 74 all-gathers (the CPU pipeline runs no all-gather combiner) and 4 all-reduces (the 69
weight-gradient all-reduces, 39.27 MiB, merged into one variadic all-reduce: the CPU pass's byte threshold is
above 30 MiB; 3 small loss all-reduces apart).  The GPU pipeline (``gpu_compiler.cc``, "post-fusion
optimization") runs ``AllGatherCombiner``, ``AllReduceCombiner`` and ``ReduceScatterCombiner`` with the
thresholds above, so there the 74 parameter all-gathers (45.3 MiB, gathering dims 0 and 1) merge into a few.
hloshard predicts 72 all-gathers and 72 all-reduces for that plan and charges them 4.52 and 6.52 latencies
(the GPU's rule: the all-gathers' shares ~1.5 for 68 of them plus 4 that are not on independent values; the
67 gradient all-reduces one height class of 69 members paying 1.52 -- 39.27 MiB is 1.3 thresholds, the GPU
pass's 30 MiB would make two collectives, the CPU's one -- and 5 forward all-reduces in the called
computations, dependent, one each, where XLA's program has 4 of them apart).  Round 27 charged 6.14 for
the wrong reason: the gradients fell in classes of 69, 25 and 2 (a bias gradient's ``reduce`` followed by a
reduce over the extent-1 dimension of a ``[1, 1, n]`` reshape sat one height higher; round 28:
:func:`carries_collective`) and two dependent forward all-reduces shared a class.  On the CPU, which keeps
all-gathers apart, the all-gather shares under-charge 70 latencies (no device profile prices the CPU).

Applies only to device-priced meshes (``--device``: ``mesh.roofline_prices`` set); the unit model is
XLA's auto-sharding formulas, which charge every collective its alpha, and stays exactly as it was.
"""

from __future__ import annotations

from dataclasses import replace

from .collectives import latency_saving
from .reshard import plan

__all__ = ["COMBINE_THRESHOLD_BYTES", "COMBINE_THRESHOLD_COUNT", "COMBINABLE_KINDS", "BARRIER_OPCODES",
           "MEMBER_OPCODES", "carries_collective", "combine_key", "height_classes", "latency_share",
           "share_latency", "independent_values", "edge_savings"]

#: XLA's ``kDefaultAllReduceCombineThreshold`` (= the all-gather and reduce-scatter defaults), bytes
COMBINE_THRESHOLD_BYTES = 30 * 1024 * 1024 + 7
#: the ``combine_threshold_count`` the GPU compiler passes to each combiner
COMBINE_THRESHOLD_COUNT = 256
#: the collective kinds XLA's combiners merge (collective-permute and all-to-all are left alone here)
COMBINABLE_KINDS = ("all-gather", "reduce-scatter", "all-reduce")

#: instructions whose strategies price a combinable collective of their own (a class's members)
MEMBER_OPCODES = frozenset({
    "dot", "convolution", "reduce", "gather", "scatter", "fusion",
    "all-reduce", "reduce-scatter", "all-gather",
})
#: instructions that may carry (or contain) a collective: a member, a call into other computations, or
#: a collective that is not combined; they raise the height of everything upstream
BARRIER_OPCODES = MEMBER_OPCODES | frozenset({
    "all-to-all", "collective-permute", "collective-broadcast", "ragged-all-to-all",
    "all-reduce-start", "all-gather-start", "collective-permute-start", "reduce-scatter-start",
    "call", "while", "conditional", "custom-call", "async-start", "reduce-window", "select-and-scatter",
    "sort",
})


def carries_collective(instr) -> bool:
    """Whether ``instr`` (an :class:`hloshard.hlo.ir.Instruction`) may carry a collective of its own:
    its opcode is in :data:`BARRIER_OPCODES`, except

    * a ``Sharding`` custom-call whose one operand carries the same written sharding (a pin ``hloshard
      solve`` writes on a value in the layout its producer already has, ``name.tpin``): XLA's SPMD
      partitioner reshards the operand to the custom-call's sharding, which here is no move at all, so
      it is a copy and carries no collective;
    * a ``reduce`` whose reduced dimensions all have extent 1
      (``jnp.sum`` of a ``[1,1,n]`` reshape of a bias gradient).  Such a reduce sums nothing: no mesh
      axis can shard a dimension of extent 1, so no partial sum is left for an all-reduce, and XLA's
      ``AlgebraicSimplifier`` (``HandleReduce``: a reduce whose reduced dimensions are all degenerate is
      a reshape of its operand) removes it before the collective combiners run.

    Counting such a reduce as a barrier put a bias gradient's all-reduce one height above the weight
    gradients' (round 27: GPT-2's 69 gradient all-reduces in height classes of 69, 25 and 2 where XLA's
    CPU pipeline merges them into one variadic all-reduce); counting the pins put the weight gradients
    of a written module that pins them (``cost`` of solve's output) one height above the unpinned bias
    gradients."""
    if instr.opcode not in BARRIER_OPCODES:
        return False
    if (instr.is_sharding_constraint and instr.sharding is not None and len(instr.operands) == 1
            and instr.operands[0].sharding == instr.sharding):
        return False
    if instr.opcode == "reduce" and instr.operands and instr.operands[0].shape.is_array:
        extents = instr.operands[0].shape.dims
        if all(0 <= int(d) < len(extents) and int(extents[int(d)]) == 1 for d in instr.dimensions or ()):
            return False
    return True


def height_classes(computation, written_only: bool | None = None) -> dict:
    """``{id(instruction): k}`` for the members of ``computation`` (an
    :class:`hloshard.hlo.ir.Computation`): ``k`` = the members of the same height (module docstring),
    itself included.  Members: :data:`MEMBER_OPCODES`, or with ``written_only`` only the written
    collectives (:data:`COMBINABLE_KINDS`).  ``None`` (default): ``written_only`` when the computation
    writes such a collective -- a per-device program or a manual (shard_map) region, where nothing else
    carries one; a logical computation that writes a few beside automatic dots counts fewer members
    than it might (a larger, conservative share).  Users outside the computation are ignored.
    O(instructions + edges)."""
    instrs = list(computation.instructions)
    if written_only is None:
        written_only = any(i.opcode in COMBINABLE_KINDS for i in instrs)
    members = frozenset(COMBINABLE_KINDS) if written_only else MEMBER_OPCODES
    height = collective_heights(computation)
    count: dict = {}
    for instr in instrs:
        if instr.opcode in members and carries_collective(instr):
            key = (height[id(instr)], combine_key(instr) if written_only else None)
            count[key] = count.get(key, 0) + 1
    return {id(i): count[(height[id(i)], combine_key(i) if written_only else None)]
            for i in instrs if i.opcode in members and carries_collective(i)}


def collective_heights(computation) -> dict[int, int]:
    """``{id(instruction): height}`` for every instruction of ``computation`` (module docstring: 0 when
    no instruction that may carry a collective, :func:`carries_collective`, depends on it, else 1 + the
    largest height of such an instruction among its users' descendants; users outside the computation
    are ignored).  Two barriers of one height are independent, so XLA's combiners may merge their
    collectives; the class of height 0 is a training step's gradients.  O(instructions + edges)."""
    instrs = list(computation.instructions)
    inside = {id(i) for i in instrs}
    height: dict[int, int] = {}
    for instr in reversed(_topological(instrs, inside)):
        h = 0
        for u in instr.users:
            if id(u) in inside:
                h = max(h, height[id(u)] + (1 if carries_collective(u) else 0))
        height[id(instr)] = h
    return height


def combine_key(instr) -> tuple:
    """What XLA's combiners require two written collectives to share before merging them
    (``all_reduce_key.cc`` / ``all_gather_combiner.cc`` / ``reduce_scatter_combiner.cc``'s key functions,
    read, not copied): the opcode, the replica groups (as device sets), ``channel_id`` present or not,
    ``use_global_device_ids``, the element types of the operands, the reduction computation's root opcode
    (all-reduce, reduce-scatter) and the gathered / scattered dimension (all-gather, reduce-scatter).
    All-reduces over the data axis and over all devices are two keys, never one collective (XLA CPU's
    program of fused_qkv_train_step's solved plan merges its 17 gradient all-reduces into two, of 15 and
    2 operands, by their replica groups; round 28).  Only a program that writes its collectives has a key
    to read: in a logical module the axes are the strategy's, so its classes stay the heights alone (a
    share too small where a class's collectives take different axes)."""
    groups = instr.replica_groups
    groups = None if groups is None else tuple(sorted(tuple(sorted(g)) for g in groups))
    types = tuple(o.shape.element_type for o in instr.operands if o.shape.is_array)
    reducer = tuple(c.root.opcode for c in instr.called_computations if c.root is not None)
    dims = instr.dimensions if instr.opcode in ("all-gather", "reduce-scatter") else None
    glob = str(instr.attrs.get("use_global_device_ids", "")).lower() == "true"
    return (instr.opcode, groups, "channel_id" in instr.attrs, glob, types, reducer,
            None if dims is None else tuple(dims))


def _topological(instrs: list, inside: set) -> list:
    """``instrs`` with every operand before its users (Kahn, ties in text order)."""
    pending = {id(i): sum(1 for o in i.operands if id(o) in inside) for i in instrs}
    ready = [i for i in instrs if pending[id(i)] == 0]
    out = []
    while ready:
        instr = ready.pop()
        out.append(instr)
        for u in instr.users:
            if id(u) in pending:
                pending[id(u)] -= 1
                if pending[id(u)] == 0:
                    ready.append(u)
    if len(out) != len(instrs):   # a cycle (rejected by the parser): leave the rest at height 0
        seen = {id(i) for i in out}
        out.extend(i for i in instrs if id(i) not in seen)
    return out


def latency_share(nbytes: float, members: int) -> float:
    """The fraction of its latency one collective of ``nbytes`` bytes per device pays in a height class
    of ``members`` instructions: ``max(1 / min(members, 256), min(1, nbytes / T))`` with
    ``T`` = :data:`COMBINE_THRESHOLD_BYTES` (module docstring; 1.0 for a class of one).  Raises
    ValueError for ``members < 1``."""
    if members < 1:
        raise ValueError(f"a height class has at least one member, got {members}")
    if members == 1:
        return 1.0
    return max(1.0 / min(members, COMBINE_THRESHOLD_COUNT), min(1.0, float(nbytes) / COMBINE_THRESHOLD_BYTES))


def share_latency(group, mesh, cache: dict) -> None:
    """With a device-priced ``mesh`` (``mesh.roofline_prices`` set), lower the ``comm`` of each strategy
    of ``group`` (a strategy group: ``instr``, ``strategies`` with ``comm`` and ``collectives``) by the
    latency its combinable collectives share with the rest of ``group.instr``'s height class:
    ``alpha x (1 - latency_share)`` each (:func:`hloshard.cost.collectives.latency_saving`).  The
    strategies are replaced by copies.  ``cache``: a dict kept for one build (id(computation) ->
    :func:`height_classes`).  Without a device, or for a class of one, nothing changes."""

    if getattr(mesh, "roofline_prices", None) is None:
        return
    strategies = getattr(group, "strategies", None)
    instr = getattr(group, "instr", None)
    if not strategies or instr is None or instr.opcode not in MEMBER_OPCODES or instr.parent is None:
        return
    comp = instr.parent
    hit = cache.get(id(comp))
    if hit is None or hit[0] is not comp:
        hit = (comp, height_classes(comp))
        cache[id(comp)] = hit
    k = hit[1].get(id(instr), 1)
    if k <= 1:
        return
    out = []
    for st in strategies:
        saved = sum(latency_saving(mesh, col, latency_share(col.nbytes, k))
                    for col in st.collectives if col.kind in COMBINABLE_KINDS and col.mesh_axes)
        out.append(replace(st, comm=max(st.comm - saved, 0.0)) if saved > 0 else st)
    group.strategies = out


def independent_values(computation) -> tuple[frozenset, int]:
    """``(ids, k)`` for ``computation`` (an :class:`hloshard.hlo.ir.Computation`): ``ids`` = the
    instructions that are not in :data:`BARRIER_OPCODES` and have no ancestor in the computation that is
    (collectives on their values are independent of every other collective: module docstring); ``k`` =
    the operand uses of such instructions with an array shape of more than one element by instructions
    of the computation (the class size of their edges).  O(instructions + edges)."""
    instrs = list(computation.instructions)
    inside = {id(i) for i in instrs}
    free: set = set()
    for instr in _topological(instrs, inside):
        if carries_collective(instr):
            continue
        if all(id(o) in free for o in instr.operands if id(o) in inside):
            free.add(id(instr))
    uses = 0
    for instr in instrs:
        for o in instr.operands:
            if id(o) in free and o.shape.is_array and _elements(o.shape) > 1:
                uses += 1
    return frozenset(free), uses


def _elements(shape) -> int:
    n = 1
    for d in shape.dims:
        n *= int(d)
    return n


def edge_savings(mesh, shape, srcs: list, dsts: list, to_sharding, members: int, cache: dict,
                 costs=None) -> "np.ndarray | None":
    """Cost units each pair of a resharding edge saves by its combinable collectives sharing latency
    (module docstring): a ``len(srcs) x len(dsts)`` float array, entry ``(p, q)`` = the sum over the
    collectives of ``cost.reshard.plan(shape, to_sharding(srcs[p]), to_sharding(dsts[q]), mesh)`` of
    kind in :data:`COMBINABLE_KINDS` of ``alpha x (1 - latency_share(bytes, members))``.  ``srcs`` /
    ``dsts``: mesh specs (tuples; anything else, or None, saves nothing); ``to_sharding(spec, rank)``:
    the spec's :class:`~hloshard.hlo.sharding.HloSharding`; ``costs``: the edge's matrix, its zero or
    infinite entries skipped (nothing moves / not allowed), and pairs whose target keeps every mesh axis
    of the source (no gather: a slice, a permute or an all-to-all).  ``cache``: a dict kept for one build
    (``(shape, src, dst, members)`` -> saving, ``(shape, src, dst)`` -> the pair's combinable collectives).  None when nothing is saved (no device prices, a class
    of one, no collective)."""
    import numpy as np


    if getattr(mesh, "roofline_prices", None) is None or members <= 1 or not shape.is_array:
        return None
    rank = len(shape.dims)
    skey = (shape.element_type, tuple(shape.dims))
    inf = float("inf")
    su: dict = {}
    du: dict = {}
    for p, a in enumerate(srcs):
        if type(a) is tuple:
            su.setdefault(a, []).append(p)
    for q, b in enumerate(dsts):
        if type(b) is tuple:
            du.setdefault(b, []).append(q)
    out = None
    axes = {spec: frozenset(x for d in spec for x in d) for spec in list(su) + list(du)}
    moves = None
    if costs is not None and su and du:   # (source spec, target spec) -> some pair of them moves data
        pos = (costs > 0) & (costs < inf)
        by_src = np.stack([pos[rows].any(axis=0) for rows in su.values()])
        moves = np.stack([by_src[:, cols].any(axis=1) for cols in du.values()], axis=1)
    for ai, (a, rows) in enumerate(su.items()):
        for bi, (b, cols) in enumerate(du.items()):
            if a == b or axes[a] <= axes[b]:
                continue   # no mesh axis of the source is dropped: nothing is gathered
            if moves is not None and not moves[ai, bi]:
                continue
            key = (skey, a, b, members)
            saved = cache.get(key)
            if saved is None:
                ckey = (skey, a, b)   # the pair's combinable collectives, whatever the class size
                cols_ = cache.get(ckey)
                if cols_ is None:
                    try:
                        planned = plan(shape, to_sharding(a, rank), to_sharding(b, rank), mesh).predicted_collectives()
                    except Exception:  # noqa: BLE001 - a pair the planner cannot express is priced as a gather-all
                        planned = []
                    cols_ = cache[ckey] = tuple(col for col in planned if col.kind in COMBINABLE_KINDS and col.mesh_axes)
                saved = cache[key] = float(sum(latency_saving(mesh, col, latency_share(col.nbytes, members))
                                               for col in cols_))
            if saved > 0:
                if out is None:
                    out = np.zeros((len(srcs), len(dsts)), dtype=np.float64)
                out[np.ix_(rows, cols)] = saved
    return out
