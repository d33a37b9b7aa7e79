"""Module -> cost graph.

:func:`build_graph` walks the entry computation (and, inlined, every while body / condition, called
computation and conditional branch) in post order, builds one strategy group per instruction
(:mod:`hloshard.strategy`), numbers the nodes, derives

* node costs: ``(compute + communication) * execution count`` per strategy (execution count = product
  of the enclosing while loops' trip counts),
* node usages: bytes per device of the node's value under each strategy,
* edges: for each (operand value, user) pair the matrix of resharding costs from every operand strategy
  to the layout every user strategy requires (:func:`hloshard.cost.reshard.resharding_cost`, cached and
  computed once per distinct (shape, source, target) triple); a follower's edge is diagonal (every other
  pairing forbidden),
* liveness intervals from the schedule position of the definition to the last use (entry parameters
  and outputs live for the whole program),
* ties (``input_output_alias`` pairs, ``module.ties``: :mod:`hloshard.autoshard.aliases`, recorded in
  ``Graph.ties``) and ``shard_as`` groups as alias constraints (same sharding on both sides); a tie in
  ``"pay"`` mode as an edge pricing the resharding back to the parameter's layout,

and packs them into a :class:`hloshard.costgraph.Problem` with integer costs (``cost_scale`` recorded).
The solver receives ``Graph.solver_problem``: the same graph with memory as a tie-breaker
(:mod:`hloshard.autoshard.tiebreak`: costs times ``K`` plus less than ``K`` in all) and every follower
merged into the node it follows (exact; skipped under a memory budget so that memory stays exact per
tensor).
:func:`solve_module` calls :func:`hloshard.solver.solve_problem` and applies the choice to the IR;
:func:`evaluate_module` evaluates the shardings a module already carries.  All costs reported are in
the mesh's cost units (alpha-beta model), memory in bytes per device.
"""

from __future__ import annotations

import math
import time

import numpy as np

from ..costgraph import INFINITY, Problem
from ..errors import SolveFailed
from ..strategy.base import TOKEN, LeafRef, StrategyGroup, is_array, is_mesh_spec, leaf_shapes
from ..cost.combiner import edge_savings, independent_values
from ..cost.group_conv import expansion_bytes
from ..cost.memory import model_limit
from ..cost.tpu_layout import solver_limit, strategy_bytes
from ..cost.reshard import plan
from ..cost.tpu_fusion import TPU_FUSION, moved_element_type
from ..hlo.shape import Shape
from ..cost.liveness import (_memoizing, normalized_indices, BufferIntervals, buffer_intervals, place_in_outputs, in_place_user, is_fused, made_at_entry_start,
                             communicating_pin, relayout_readers,
                             one_buffer_per_reshard, program_schedule, read_until, relayout_intervals,
                             resharded_by_tuple, scatter_destination_copies, select_and_scatter_expansions, set_barriers_kept, set_fusion_backend,
                             widened_invariants, written_layouts, fusion_backend)
from ..hlo.callgraph import flatten_call_graph
from ..hlo.inline import inline_calls
from ..hlo.loops import execution_counts
from ..mesh import coarse_cuts, sharding_cuts
from ..strategy.sharing import GroupSharing
from ..strategy.ties import donated_aliases
from ..strategy.registry import BuildContext
from ..strategy.collectives import charged_collective
from ..strategy.realize import PINNED_OPS
from .aliases import _add_aliases, pay_edges, tie_merges
from .conv_copies import conv_copies, made_at_source, output_copy_bytes
from .graph import Graph, _operand_leaves, chosen_operand_leaves  # noqa: F401  (re-exported)
from .reshard_cache import shared_reshards
from ..solver.followers import follow_conflicts, merge_followers  # the one follower merge (solver/followers.py)
from .resharder import PastDeadline, PastWorkLimit, _PairCount, _Resharder
from .tiebreak import with_memory_tie_break
from ..strategy.user_shardings import user_shardings


#: formerly the module size (instructions) up to which dot / convolution strategies that leave a mesh
#: axis idle were enumerated.  Every module now gets that full space (the search space no longer
#: depends on module size; presolve prunes dominated strategies): measured on
#: ``scripts/make_transformer.py --layers 12`` (2x4 mesh), build 4.1 s full vs 4.5 s restricted, the
#: solver problem 25,390 vs 22,222 strategies, same written objective after a 20 s solve.  Kept (None)
#: for code that imports the name.
EXHAUSTIVE_LIMIT = None



def _structure_key(module) -> tuple:
    """What :func:`hloshard.cost.liveness.program_schedule` reads of ``module``: per computation its
    root and, per instruction in text order, the instruction, opcode, shape, operands, control
    predecessors, called computations and custom-call target.  Instructions and computations compare
    by identity (the key holds them, so an id is never reused while it lives); shardings are not in it
    (writing a plan changes no schedule); a pin copy inserted changes it; so does the fusion backend
    (:func:`hloshard.cost.liveness.set_fusion_backend`)."""
    out: list = [fusion_backend(module)]
    for comp in module.computations:
        out.append((comp, comp.root, module.entry is comp))
        for i in comp.instructions:
            a = i.attrs
            out.append((i, i.opcode, i.shape, tuple(i.operands), tuple(a.get("control-predecessors") or ()),
                        tuple(i.called_computations), a.get("custom_call_target")))
    return tuple(out)


def program_orders(module) -> tuple[list, list]:
    """``(schedule, numbering)``: :func:`hloshard.cost.liveness.program_schedule` of ``module``
    breadth first (the memory model's time axis) and in post order (the order nodes are numbered in),
    computed once per module structure (:func:`_structure_key`) and reused by later builds of the same
    module: ``solve``'s coarse build, its fine build and the re-pricing of the written module
    (48-layer transformer, 2x2x2: the breadth-first schedule was about 2.5 s of each build).  Lists
    the caller may read, not change."""
    key = _structure_key(module)
    hit = getattr(module, "_hloshard_orders", None)
    if hit is not None and hit[0] == key:
        return hit[1], hit[2]
    schedule = program_schedule(module)
    numbering = program_schedule(module, breadth_first=False)
    module._hloshard_orders = (key, schedule, numbering)
    return schedule, numbering


class _Recorded:
    """``fn`` (instruction -> node keys) with every answer it gave kept, by instruction."""

    def __init__(self, fn):
        self.fn, self.seen = fn, {}

    def __call__(self, instr):
        out = tuple(self.fn(instr))
        self.seen[id(instr)] = (instr, out)
        return out

    def same_for(self, fn) -> bool:
        """True when ``fn`` answers as this one did for every instruction this one was asked about."""
        return all(tuple(fn(instr)) == out for instr, out in self.seen.values())


def _cached_intervals(module, schedule, own, values, params, outputs, donated, gather_copies=False) -> dict:
    """:func:`hloshard.cost.liveness.buffer_intervals` of ``schedule`` (node -> interval), reused from
    the module's previous build when the schedule is the same list (:func:`program_orders`: the same
    structure) and ``own`` / ``values`` give the same nodes for every instruction the previous call
    asked them about, with the same parameters, outputs and donated nodes and the same written shardings
    (:func:`hloshard.cost.liveness.written_layouts`, what it reads of them): its
    answer is then the same.  ``solve``'s coarse build, fine build and the re-pricing of
    the written module number their nodes alike (48-layer transformer, 2x2x2: 2-4 s per build)."""
    key = (tuple(params), tuple(outputs), tuple(donated), written_layouts(module), bool(gather_copies))
    hit = getattr(module, "_hloshard_intervals", None)
    if hit is not None and hit[0] is schedule and hit[1] == key and hit[2].same_for(own) and \
            hit[3].same_for(values):
        return _copy_intervals(hit[4])
    rec_own, rec_values = _Recorded(own), _Recorded(values)
    iv = buffer_intervals(schedule, rec_own, rec_values, parameters=key[0], outputs=key[1], donated=key[2],
                          gather_copies=key[4])
    module._hloshard_intervals = (schedule, key, rec_own, rec_values, _copy_intervals(iv))
    return iv


def _copy_intervals(iv):
    """A copy of :func:`hloshard.cost.liveness.buffer_intervals`' answer, its ``output_slots`` kept."""
    out = BufferIntervals(iv)
    out.output_slots = getattr(iv, "output_slots", ())
    return out


def processed_computations(module) -> list:
    """Entry plus every computation reached through while / call / conditional (their instructions get
    strategies and shardings), in order of first appearance in the program schedule
    (:func:`hloshard.cost.liveness.program_schedule`); fused computations and reducers are not."""
    out, seen = [], set()
    for instr in program_orders(module)[1]:
        if id(instr.parent) not in seen:
            seen.add(id(instr.parent))
            out.append(instr.parent)
    return out


def kept_coarse_cuts(module, mesh, fixed) -> list:
    """The cut sets ``{1, c, N}`` (:func:`hloshard.mesh.sharding_cuts` on ``mesh``'s device positions)
    of the tiled shardings the build keeps (``fixed``: instruction -> kept spec), in text order, each
    once: a sharding whose device order is two runs of ``mesh``'s axes, e.g.
    ``{devices=[4,1,2]<=[4,2]T(1,0) last_tile_dim_replicate}`` on a 2x2x2 mesh, the layout a plan of
    the coarse space writes.  :meth:`hloshard.strategy.base.MeshInfo.add_coarse_order` enumerates
    both orders of those runs (it ignores cut sets that are not two runs of this mesh's axes), so the
    build that prices such a written module holds its layouts: without it ``hloshard cost --mesh
    2x2x2`` of decoder2's solved module priced its gathers' operands as raw layouts and all-gathered
    them (5,394,479 against the solver's 5,011,247; at ``--mesh 2x4`` the same file costs 5,011,247)."""
    n = mesh.num_devices
    positions = np.empty(n, dtype=np.int64)
    positions[np.asarray(mesh.device_ids).ravel()] = np.arange(n)
    out: list = []
    seen: set = set()
    for instr in module.all_instructions():
        sh = getattr(instr, "sharding", None)
        if sh is None or instr not in fixed:
            continue
        for leaf in (sh.tuple_elements if sh.is_tuple else (sh,)):
            if leaf.kind != "tiled" or leaf.num_devices != n:
                continue
            key = leaf.without_metadata()
            if key in seen:
                continue
            seen.add(key)
            cuts = sharding_cuts(leaf, positions)
            if cuts is not None and len(cuts) == 3 and cuts not in out:
                out.append(cuts)
    return out


def _work_stopped(work_limit: int, phase: str, done: int, total: int) -> BuildStopped:
    """The :class:`BuildStopped` of a build whose edge matrices hold more than ``work_limit`` resharding pairs
    (``phase``: where the count passed it, ``done`` of ``total`` strategy groups or nodes)."""
    return BuildStopped(phase, done, total, 0.0, reason=(
        f"not priced: its edge matrices hold more than {work_limit:,} resharding pairs (distinct source x "
        f"target layouts), the build's work limit"))


class _WorkCount:
    """The resharding pairs of a build's edge matrices counted while its strategies are built (the
    ``work_limit`` of :func:`build_graph`): after an instruction's strategy groups are made (post order, so
    its operands' groups exist), :meth:`add` counts their in-edges (:func:`in_edges` with a
    :class:`~hloshard.autoshard.resharder._PairCount`, which prices nothing and counts each distinct matrix
    once), and :meth:`finish` the groups not counted yet and the tied outputs' edges (:func:`pay_edges`).
    The total is the count of the same matrices after the build, so the decision is the same; a build past
    the limit stops as soon as the running count passes it instead of after every strategy (keras-hub's
    4-layer Gemma at 2x2x2: 2,698,357 pairs against a 2,500,000 limit, passed at node 1,088 of 1,756).
    Raises :class:`BuildStopped` past the limit."""

    def __init__(self, ctx, work_limit: int):
        self.ctx, self.work_limit = ctx, int(work_limit)
        self.counter = _PairCount(ctx, work_limit=work_limit)
        self.seen: set = set()

    @property
    def pairs(self) -> int:
        return self.counter.pairs

    def _groups(self, groups, done: int, total: int, phase: str) -> None:
        try:
            for g in groups:
                if id(g) in self.seen:
                    continue
                try:
                    for _ in in_edges(g, self.ctx, self.counter):
                        pass
                except KeyError:   # an operand not built yet (a while body's parameter): :meth:`finish` counts it
                    continue       # (the matrices it counted so far are cached: not counted twice)
                self.seen.add(id(g))
        except PastWorkLimit:
            raise _work_stopped(self.work_limit, phase, done, total) from None

    def add(self, instr, done: int, total: int) -> None:
        """Count the in-edges of ``instr``'s strategy groups (``done`` of ``total`` instructions built)."""
        g = self.ctx.groups.get(instr)
        if g is None:
            return
        self._groups([sg for sg in ([g] if isinstance(g, StrategyGroup) else g.children)
                      if isinstance(sg, StrategyGroup)], done, total, "strategies")

    def finish(self, module, nodes: list) -> None:
        """Count what :meth:`add` did not (the nodes not counted yet, the tied outputs' edges)."""
        self._groups(nodes, 0, len(nodes), "edges")
        try:
            for _ in pay_edges(module, self.ctx, self.counter):
                pass
        except PastWorkLimit:
            raise _work_stopped(self.work_limit, "edges", 0, len(nodes)) from None


def _leaf_shape(instr, leaf):
    return leaf_shapes(instr.shape)[leaf]


def moved_leaf_shape(mesh, consumer, instr, leaf):
    """The shape in which leaf ``leaf`` of ``instr`` is resharded for ``consumer``: its own
    (:func:`_leaf_shape`), or with a device whose fusion rule is the TPU compiler's (``--device tpu-*``:
    ``mesh.roofline_prices``) the same dims in the narrower element type the TPU compiler converts to
    before the collective (:func:`hloshard.cost.tpu_fusion.moved_element_type`: every reader converts it
    to bf16 or is an f32 dot at DEFAULT precision).  Without a device, or on another, the leaf's shape:
    the unit model is unchanged.

    Used by the report's collectives (:func:`hloshard.autoshard.evaluate.reshardings_of`, hence
    :func:`hloshard.timing.plan_collective_hbm_bytes`: what the TPU's ``bytes accessed`` counts of a
    written plan's gathers), not by the solver's objective (:func:`in_edges` prices the value's own
    type), as :attr:`hloshard.cost.tpu_fusion.FusionRule.tiled_layout` is the report's only: priced in
    the objective, the halved gathers led ``solve --device tpu-v5e`` to plans the TPU compiler estimates
    slower on 4 of the 9 samples (``moe_layer`` 3.49 -> 5.24 us, an input gathered for the router dot and
    a weight prefetch its memory-space assignment adds; ``transformer_train_step`` 167.55 -> 177.36,
    ``fused_qkv_train_step`` 93.86 -> 101.38, ``attention_6heads`` 12.31 -> 12.88; BENCHMARKS.md round
    19): costs of the gathered plans this model does not have."""
    shape = _leaf_shape(instr, leaf)
    prices = getattr(mesh, "roofline_prices", None)
    if prices is None or not is_array(shape) or prices.fusion is not TPU_FUSION:
        return shape
    t = moved_element_type(consumer, shape.element_type)
    return shape if t is None else Shape.array(t, shape.dims, shape.layout)



class BuildStopped(SolveFailed):
    """:func:`build_graph` passed its ``deadline`` (or its ``work_limit``) and stopped (``status``
    ``"timeout"``, exit 3 when it reaches the CLI); ``done`` / ``total``: the strategy groups or edge
    matrices made of how many, and ``phase``: ``"strategies"`` or ``"edges"``."""

    def __init__(self, phase: str, done: int, total: int, seconds: float, reason: str | None = None):
        # ``reason``: the message when the build was not started at all (coarse.coarse_first)
        super().__init__(reason or f"building the cost graph passed its deadline after {seconds:.1f} s "
                                   f"({phase}: {done} of {total} done)")
        self.status = "timeout"
        self.phase, self.done, self.total, self.seconds = phase, done, total, seconds


@_memoizing   # fusion answers (is_fused, effective_users) kept for the build: its shardings and users do not change
def build_graph(module, mesh, keep: str = "io", memory_budget: int | None = None, name: str | None = None,
                mesh_order_only: bool = False, deadline: float | None = None, share: bool = True,
                work_limit: int | None = None, as_given: bool = False) -> Graph:
    """Build the cost graph of ``module`` on ``mesh`` (see module docstring).

    ``as_given``: the graph prices the module as XLA gets it (``cost``), not a plan ``solve`` writes: a
    ``while`` without a sharding has its loop invariants captured (:func:`hloshard.strategy.control_flow._captured`).

    ``mesh_order_only``: enumerate the axes of a dim in mesh order only, also on meshes of two axes
    (:attr:`hloshard.strategy.base.MeshInfo.any_order`; the coarse space of
    :mod:`hloshard.autoshard.coarse`).

    ``keep``: which user shardings are kept ('all' | 'io' | 'none'); ``memory_budget``: bytes per
    device or None; the problem's ``usage_limit`` is the model peak that keeps XLA within it
    (:func:`hloshard.cost.memory.model_limit`).  ``deadline``: a ``time.monotonic()`` instant; the build
    checks it after each strategy group and each node's edge matrices and raises :class:`BuildStopped`
    once it has passed (None: no clock is read, as in deterministic mode).  ``work_limit``: the most
    resharding pairs the edge matrices may hold (distinct source x target layouts per distinct matrix,
    :class:`~hloshard.autoshard.resharder._PairCount`), counted as the strategies are built (:class:`_WorkCount`:
    the build stops where the count passes it) and before any pair is priced; more raises
    :class:`BuildStopped` (a count, no clock: deterministic mode's limit on the build,
    :func:`hloshard.autoshard.coarse.work_limit`; None: none).  ``share``: structurally
    equal instructions get one strategy list (:mod:`hloshard.strategy.sharing`; False builds every
    group by its handler, the same graph more slowly).  A computation called from several sites is first cloned per site
    (:func:`hloshard.hlo.callgraph.flatten_call_graph`, the module changes).  Raises InputError for shardings that do not fit, UsageError for a bad ``keep``.
    """
    warnings: list = []
    # wall seconds of the build's parts (graph.build_phases): what a later build of the same module repeats
    clock = [time.monotonic()]
    phases: dict = {}

    def lap(name: str) -> None:
        now = time.monotonic()
        phases[name] = phases.get(name, 0.0) + (now - clock[0])
        clock[0] = now
    # the compiler whose fusion the memory model follows: XLA CPU's, or a TPU's (cost.liveness.set_fusion_backend)
    set_fusion_backend(module, "cpu" if getattr(mesh, "memory_device", None) is None else "tpu")
    set_barriers_kept(module, getattr(mesh, "barriers_kept", False))   # a GPU profile: cost.remat
    inline_calls(module)   # XLA's CallInliner: calls are gone before partitioning, fusion and memory
    flatten_call_graph(module, warnings)   # one computation per call site, as XLA partitions them
    comps = processed_computations(module)
    fixed = user_shardings(module, keep, mesh, comps)
    kept = dict(fixed)
    ctx = BuildContext(mesh, fixed)
    ctx.writes_loop_state = not as_given
    ctx.exhaustive = True   # the full dot / convolution space whatever the module size
    if mesh_order_only:
        ctx.minfo.any_order = ctx.minfo.group_order = False
    else:   # the coarse mesh's layouts in both orders are layouts here too (coarse to fine embeds)
        cuts = coarse_cuts(mesh, module)
        if cuts is not None:
            ctx.minfo.add_coarse_order(cuts)
        # and the orders of the kept shardings themselves: a written plan's layouts in the coarse order
        # are then layouts of the graph that prices it (``hloshard cost`` of a module solved at 2x2x2)
        for c in kept_coarse_cuts(module, mesh, fixed):
            ctx.minfo.add_coarse_order(c)
    # the schedule: entry post order with while bodies / conditions, called computations and branches
    # right after their caller (the handlers of while / call / conditional alias the parameters of the
    # computations they call before those are built); execution counts from hlo.loops
    # the memory model's time axis (XLA CPU's breadth-first order); strategies built and nodes numbered
    # in post order
    lap("prepare")
    schedule, numbering = program_orders(module)
    counts = execution_counts(module, warnings)
    positions = {instr: t for t, instr in enumerate(schedule)}
    lap("orders")
    ctx.visit = lambda comp, weight: None
    started = time.monotonic() if deadline is not None else None
    sharing = GroupSharing(ctx)
    sharing.enabled = sharing.enabled and share
    # the work limit's pairs counted as the strategies are built: past it the build stops there (_WorkCount)
    work = _WorkCount(ctx, work_limit) if work_limit is not None else None
    for k, instr in enumerate(numbering):
        ctx.weights[instr] = counts.get(id(instr.parent), 1.0)
        if instr not in ctx.groups:
            sharing.build(instr)
        if work is not None:
            work.add(instr, k + 1, len(numbering))
        if deadline is not None and time.monotonic() > deadline:
            raise BuildStopped("strategies", k + 1, len(schedule), time.monotonic() - started)

    # --- nodes --------------------------------------------------------------------------------
    nodes: list = []
    node_owner: list = []
    seen = set()
    for instr in numbering:
        g = ctx.groups[instr]
        for sg in ([g] if isinstance(g, StrategyGroup) else g.children):
            if isinstance(sg, StrategyGroup) and id(sg) not in seen:
                seen.add(id(sg))
                sg.node = len(nodes)
                nodes.append(sg)
                node_owner.append(instr)

    if work is not None:   # counted before any is priced (a pair of a 4-axis mesh can cost 0.5 ms)
        work.finish(module, nodes)
    lap("strategies")
    resh = _Resharder(ctx, deadline)

    def edge_pass(unfollow=frozenset()):
        """The edges (summed per node pair), their contributions and the follow pairs; ``unfollow``: nodes
        whose follow edge is priced in full, as any other edge (:func:`in_edges`)."""
        edges: dict = {}
        info: dict = {}
        follows: list = []
        for v, g in enumerate(nodes):
            if deadline is not None and time.monotonic() > deadline:
                raise BuildStopped("edges", v, len(nodes), time.monotonic() - started)
            try:
                made = list(in_edges(g, ctx, resh, unfollow=v in unfollow))
            except PastDeadline:
                raise BuildStopped("edges", v, len(nodes), time.monotonic() - started) from None
            for inst, leaf, src, follow, m, scale in made:
                u = src.node
                if not follow and not np.any(m):
                    continue
                if follow:
                    follows.append((u, v))
                _add_edge(edges, info, u, v, m, (inst, leaf, g, scale))
        # ties in "pay" mode: the resharding of an output back to its parameter's layout (autoshard.aliases)
        try:
            paid = list(pay_edges(module, ctx, resh))
        except PastDeadline:
            raise BuildStopped("edges", len(nodes), len(nodes), time.monotonic() - started) from None
        for u, v, m, contribution in paid:
            _add_edge(edges, info, u, v, m, contribution)
        return edges, info, follows

    edges, info, follows = edge_pass()

    lap("edges")
    # --- liveness (hloshard.cost.liveness): a node is defined where its owner is scheduled and live to
    # its last read; entry parameters live throughout, outputs to the end -------------------------------
    n = len(nodes)
    owned: dict = {}
    for v in range(n):
        owned.setdefault(id(node_owner[v]), []).append(v)

    def leaf_nodes(instr) -> list:
        out = []
        if instr not in ctx.groups:
            return out
        for l, s in enumerate(leaf_shapes(instr.shape)):
            if is_array(s):
                r = ctx.resolve(instr, l)
                if r is not TOKEN:
                    out.append(r[0].node)
        return out

    # the memory model (cost/liveness.buffer_intervals): fusion, in place, outputs and donation
    entry = module.entry
    param_nodes = [u for p in entry.parameters for u in leaf_nodes(p)]
    iv = _cached_intervals(module, schedule, lambda i: owned.get(id(i), ()), leaf_nodes, param_nodes,
                           leaf_nodes(entry.root), _donated_nodes(module, leaf_nodes),
                           gather_copies=getattr(mesh, "memory_device", None) is None)   # XLA CPU: relayout_copies
    lo = np.array([iv[v][0] for v in range(n)], dtype=np.int64)
    hi = np.array([iv[v][1] for v in range(n)], dtype=np.int64)
    no_buffer = hi <= lo   # fused or in place: no memory of its own under any strategy
    lap("liveness")

    # --- integer problem ----------------------------------------------------------------------------
    # nodes sharing a strategy list (strategy.sharing) and an execution count share one read-only cost
    # array, and one usage array (memory of the integer problem grows with the distinct lists)
    fcosts = []
    by_list: dict = {}
    for g in nodes:
        w = ctx.weight(g.instr)
        key = (id(g.strategies), w)
        hit = by_list.get(key)
        if hit is None:
            arr = np.array([(s.compute + s.comm) * w for s in g.strategies], dtype=np.float64)
            arr.flags.writeable = False
            hit = by_list[key] = (g.strategies, arr)
        fcosts.append(hit[1])
    if getattr(mesh, "divisible_io", False) or getattr(mesh, "whole_axes_io", None) is not None:
        _divisible_io(nodes, fcosts, param_nodes + leaf_nodes(entry.root), ctx.minfo, kept)
    # --device tpu-*: each buffer as the TPU compiler lays it out (cost/tpu_layout: padded tiles)
    memory_device = getattr(mesh, "memory_device", None)
    usages: dict = {}
    node_usages = []
    for v, g in enumerate(nodes):
        key = (id(g.strategies), bool(no_buffer[v]), g.multi, g.leaf_shapes or (g.instr.shape,))
        hit = usages.get(key)
        if hit is None:
            arr = np.zeros(len(g.strategies), dtype=np.int64) if no_buffer[v] else \
                np.array([_usage(g, s, ctx.minfo, memory_device) for s in g.strategies], dtype=np.int64)
            arr.flags.writeable = False
            hit = usages[key] = (g.strategies, arr)
        node_usages.append(hit[1])

    def integer_problem(edges: dict, aliases: list):
        """The problem of the node costs and usages with ``edges``: (problem, edge keys, float matrices)."""
        edge_keys = sorted(edges)
        edge_float = [edges[k] for k in edge_keys]
        finite_max = 0.0
        for arr in fcosts + edge_float:
            f = arr[np.isfinite(arr)]
            if f.size:
                finite_max = max(finite_max, float(np.abs(f).max()))
        scale = choose_scale(finite_max)
        # equal float matrices are one object (the resharder's scaled matrices): one integer array each
        problem = Problem(
            name=name or module.name,
            intervals=np.stack([lo, hi], axis=1) if n else np.zeros((0, 2), dtype=np.int64),
            node_costs=_shared_ints(fcosts, scale), node_usages=node_usages,
            edges=np.array(edge_keys, dtype=np.int64).reshape(-1, 2),
            edge_costs=_shared_ints(edge_float, scale),
            usage_limit=_usage_limit(memory_budget, memory_device),
            cost_scale=scale, aliases=aliases,
        )
        return problem, edge_keys, edge_float

    problem, edge_keys, edge_float = integer_problem(edges, [])
    graph = Graph(module, mesh, ctx, nodes, problem, [info[k] for k in edge_keys], edge_float, positions, schedule,
                  comps, warnings)
    _add_aliases(graph)
    # a follow edge allows one strategy index for both ends (in_edges): where the kept shardings and the ties
    # leave no index for a follower chain (one shared followee, two tied outputs kept apart), its edges that
    # cannot hold are priced in full, as any other edge (solver.followers.follow_conflicts)
    cut = follow_conflicts(problem, follows)
    if cut:
        edges, info, follows = edge_pass(frozenset(v for _u, v in cut))
        problem, edge_keys, edge_float = integer_problem(edges, problem.aliases)
        graph.problem, graph.edge_info, graph.edge_float = problem, [info[k] for k in edge_keys], edge_float
        graph.cut_follows = cut
    graph.follows = follows
    # strategy groups given a shared list by signature / built by their handler (strategy.sharing)
    graph.shared_groups = {"shared": sharing.hits, "built": sharing.built, "interned": sharing.interned}
    graph.kept = kept
    graph.memory_device = memory_device
    graph.resharding_pairs = resh.pairs   # what a work_limit counts (deterministic mode's build limit)
    graph.counted_pairs = None if work is None else work.pairs   # the same pairs, counted before the pricing
    # entry parameters and outputs (always in HBM on a TPU: cost/tpu_layout.hbm_peak, autoshard.evaluate.peak_memory)
    graph.persistent = np.zeros(n, dtype=bool)
    for u in param_nodes + leaf_nodes(entry.root):
        graph.persistent[u] = True
    # XLA CPU: the outputs' allocations a plan's communication buffers may still take (edge_buffers)
    graph.output_slots = getattr(iv, "output_slots", ()) if memory_device is None else ()
    # XLA CPU's copies of a node's tile: f32 copies of bf16 loop invariants (cost.liveness.widened_invariants; not on a TPU):
    # (node whose tile is copied, lo, hi, factor), priced by edge_buffers and edgememory like a collective's
    graph.widened = []
    if memory_device is None:
        for w, leaf, wlo, whi, factor in widened_invariants(schedule, entry):
            r = ctx.resolve(w, leaf) if w in ctx.groups else TOKEN
            if r is not TOKEN:
                graph.widened.append((r[0].node, wlo, whi, factor))
        # and the copy of a shared scatter destination, in the scatter's tile (cost.liveness.scatter_destination_copies)
        for sc, slo, shi in scatter_destination_copies(schedule):
            r = ctx.resolve(sc, 0) if sc in ctx.groups else TOKEN
            if r is not TOKEN:
                graph.widened.append((r[0].node, slo, shi, 1))
        # and a batched gather's / scatter's index array with XLA's iota columns (cost.liveness.normalized_indices)
        for ix, ilo, ihi, factor in normalized_indices(schedule):
            r = ctx.resolve(ix, 0) if ix in ctx.groups else TOKEN
            if r is not TOKEN:
                graph.widened.append((r[0].node, ilo, ihi, factor))
        # and XLA CPU's expansion of a select-and-scatter (cost.liveness.select_and_scatter_expansions)
        for x, xlo, xhi, factor in select_and_scatter_expansions(schedule):
            r = ctx.resolve(x, 0) if x in ctx.groups else TOKEN
            if r is not TOKEN:
                graph.widened.append((r[0].node, xlo, xhi, factor))
    _budgeted(graph, memory_budget)
    lap("problem")
    graph.build_phases = phases
    return graph


def _divisible_io(nodes: list, fcosts: list, io_nodes: list, minfo, kept) -> None:
    """Entry parameters and outputs split evenly only (``mesh.divisible_io``): in ``fcosts`` (per node,
    float costs of its strategies; replaced, not written, as they are shared) the strategies of the nodes
    ``io_nodes`` whose output layout splits some dim unevenly (:meth:`MeshInfo.fits_evenly` false) cost
    ``inf``, unless no strategy of the node is even (then it keeps them all) or it is a user's sharding
    (``kept``: kept as given). The rule of ``jax.jit``: an argument's or result's ``NamedSharding`` must
    divide its dims (``IndivisibleError``; jax ``pjit``, ``allow_uneven_sharding=False``), where a
    ``with_sharding_constraint`` inside may be uneven; XLA's auto-sharding has the same option,
    ``only_allow_divisible_input_output`` (default true).  With ``mesh.whole_axes_io`` set the same holds
    for a layout that splits a dim over part of a user axis (:meth:`hloshard.mesh.DeviceMesh.on_user_axes`:
    a PartitionSpec names whole user axes only), the layouts of a refined mesh's sub-axes."""
    mesh = minfo.mesh
    even_only = getattr(mesh, "divisible_io", False)
    whole_only = getattr(mesh, "whole_axes_io", None) is not None
    for v in sorted(set(io_nodes)):
        g = nodes[v]
        if g.instr in kept:
            continue
        shapes = g.leaf_shapes or (g.instr.shape,)
        even = np.ones(len(g.strategies), dtype=bool)
        for k, st in enumerate(g.strategies):
            outs = st.out if g.multi else (st.out,)
            for shape, out in zip(shapes, outs):
                if is_mesh_spec(out) and getattr(shape, "dims", None) is not None and (
                        (even_only and not minfo.fits_evenly(shape.dims, out))
                        or (whole_only and not all(mesh.on_user_axes(ax) for ax in out))):
                    even[k] = False
                    break
        if even.any() and not even.all():
            arr = np.array(fcosts[v], dtype=np.float64)
            arr[~even] = np.inf
            arr.flags.writeable = False
            fcosts[v] = arr


def _usage_limit(memory_budget: int | None, memory_device) -> int | None:
    """The solver's node limit for ``memory_budget`` (the model's limit, :func:`hloshard.cost.memory.model_limit`,
    with a TPU's VMEM credit, :func:`hloshard.cost.tpu_layout.solver_limit`); None without a budget."""
    return None if memory_budget is None else solver_limit(model_limit(memory_budget, memory_device), memory_device)


def _budgeted(graph: Graph, memory_budget: int | None) -> None:
    """Set what depends on the memory budget in a built ``graph``: its budget, the model's limit, the
    solver's problem (below).  Strategies, costs, edges and usages do not depend on it."""
    graph.memory_budget = memory_budget   # the user's budget; problem.usage_limit: the model's limit
    # the limit on the evaluated peak (cost/tpu_layout: on a TPU the solver's limit adds the VMEM credit)
    graph.model_limit = None if memory_budget is None else model_limit(memory_budget, graph.memory_device)
    # the solver's problem: memory as a tie-breaker (worth less than one cost unit in total), followers
    # merged into the node they follow (not under a memory budget: memory stays exact per tensor)
    tb_problem, graph.tie_break = with_memory_tie_break(graph.problem)
    # merged into the node they follow and each tied output / parameter pair into one node (not under a
    # memory budget: memory stays exact per tensor; the presolve then merges the tied pairs exactly)
    graph.solver_problem, graph.classes = merge_followers(tb_problem, graph.follows, merge=memory_budget is None,
                                                          ties=tie_merges(graph))


def with_memory_budget(graph: Graph, memory_budget: int | None) -> Graph:
    """``graph`` (from :func:`build_graph`) for another ``memory_budget`` (bytes per device or None) without
    building it again: the graph :func:`build_graph` would give for that budget (a shallow copy sharing the
    strategies, edges and usages, which do not depend on the budget; its problem's ``usage_limit``, model
    limit and solver's problem are the budget's, its warnings a copy).  ``graph`` is left as it was."""
    import copy
    import dataclasses

    memory_device = graph.memory_device
    out = copy.copy(graph)
    out.warnings = list(graph.warnings)
    out.problem = dataclasses.replace(graph.problem, usage_limit=_usage_limit(memory_budget, memory_device))
    _budgeted(out, memory_budget)
    return out



def _usage(g, s, minfo, memory_device) -> int:
    """Bytes per device of node ``g``'s value under strategy ``s``: ``s.memory`` (the unpadded tile),
    or with a TPU device the padded tiles of :func:`hloshard.cost.tpu_layout.strategy_bytes`."""
    if memory_device is None:
        return int(s.memory)
    shapes = g.leaf_shapes or (g.instr.shape,)
    outs = s.out if g.multi else (s.out,)
    if len(shapes) != len(outs):
        return int(s.memory)
    return strategy_bytes(shapes, outs, minfo.tile_dims)


def edge_buffers(graph: Graph, choice, copies: list | None = None) -> tuple[list, list]:
    """The buffers of ``choice`` outside the problem's nodes: ``(intervals, sizes)`` (XLA's 8-byte
    pointer per element of the entry output tuple, for the whole run, and the communication buffers).  One per collective of a chosen
    strategy (``Strategy.collectives``: ``nbytes`` per device, the buffer beside the node's value while
    the collective runs, at the node's point ``[t, t + 1)``; a halo exchange by collective-permutes
    also concatenates the operand's tile with the halos), and one per operand leaf that an
    edge reshards (its chosen pair has a non-zero resharding cost; none when the consumer is elementwise
    on an operand of its own shape: it computes in place on the resharded buffer, and a producer XLA
    would have fused is then made: its tile from its definition to the consumer): the operand in the
    layout the consumer's strategy requires (bytes per device, ``MeshInfo.bytes_per_device``), live at the
    consumer's schedule point ``[t, t + 1)``, where XLA's partitioner materialises it (to the last
    reader of a fused consumer, e.g. a pin ``copy``, whose value it is; from the program's start when
    the operand is an entry parameter: :func:`hloshard.cost.liveness.made_at_entry_start`); in a plan that
    solve writes with pins, the consumers that share a pin share that buffer, made where the operand is made
    (:func:`copy_start`) and read until the last of them (:func:`pin_key`), and a value only pins read ends
    at them (:func:`pinned_only_credit`); the users that XLA's reshard cache serves from one collective
    (:func:`hloshard.autoshard.reshard_cache.shared_reshards`: one value to one layout, e.g. an FSDP weight
    gathered for the forward and the backward dot) share one buffer, from the first user's copy to the
    last user.  A dot's (or convolution's) operand that an all-gather
    reshards and a copy relays out is copied once (the relayout after the gather and ``DotDecomposer``'s
    transpose are one loop fusion in XLA CPU), that copy made at the dot; the source, when the collective
    was its last reader, is dead there (round 26: keras-hub Llama's embedding gradient); the gathered
    buffer is live there with its copy (round 27: XLA makes the copy from it just before the dot).  On XLA CPU these buffers take what the module's
    temporaries left of the entry outputs' allocations before the outputs are written
    (:func:`hloshard.cost.liveness.place_in_outputs`, ``graph.output_slots``).  The IOPDDL form
    has node memory only, so these are not in ``graph.problem``: the evaluation adds them to the peak
    (:func:`hloshard.autoshard.evaluate.peak_memory`) and a memory budget is checked against that.
    ``copies``: when a list, ``(instruction, bytes)`` is appended for each layout copy among them (the
    dot operand copies and the relayouts of gathered operands: kernels that read and write those bytes,
    for the roofline, :func:`hloshard.timing.plan_roofline`; the instruction is the consumer)."""
    ivs: list = []
    sizes: list = []
    minfo = graph.ctx.minfo
    ids = {id(i): t for i, t in graph.positions.items()}
    # XLA's entry output tuple holds an 8-byte pointer per element (its output_size counts them)
    root = graph.module.entry.root if graph.module.entry is not None else None
    table = _tuple_table_bytes(root.shape) if root is not None else 0
    if table:
        ivs.append((0, max(len(graph.schedule), 1)))
        sizes.append(table)
    # XLA CPU's f32 copy of a bf16 loop invariant, over the loop (cost.liveness.widened_invariants)
    for u, lo, hi, factor in getattr(graph, "widened", ()):
        g = graph.nodes[u]
        ivs.append((lo, hi))
        sizes.append(factor * int(g.strategies[int(choice[u])].memory))
    # the plan's own temporaries below may take an output's free allocation (cost.liveness.place_in_outputs;
    # not the copies above: a scatter's destination copy is the scatter's in-place buffer, already placed
    # with it, tests/test_memory_model.py's SCATTER_COPY)
    first_comm = len(ivs)
    # the collectives of the chosen strategies: the buffer on the other side of each (an all-reduce's
    # partial sums beside its result, a reduce-scatter's input, an all-gathered operand) at the node
    for v, g in enumerate(graph.nodes):
        extra = scratch_bytes(g, g.strategies[int(choice[v])], minfo, getattr(graph, "memory_device", None))
        t = graph.positions.get(g.instr)
        if extra > 0 and t is not None:
            ivs.append((t, t + 1))
            sizes.append(extra)
    # XLA's DotDecomposer relayout copies of dot operands (hloshard.cost.liveness.relayout_intervals); the
    # copy of an operand the plan reshards for the dot is made after the collective, at the dot, and it is
    # the relayout copy after an all-gather (one loop fusion: _relayout_bytes is not added again)
    moved = _resharded_operands(graph, choice)
    decomposed = set()
    for dot, k, lo, hi, b in relayout_copies(graph, choice, ids):
        if (id(dot), id(dot.operands[k])) in moved:
            decomposed.add((id(dot), id(dot.operands[k])))
            lo = max(lo, ids.get(id(dot), lo))
        ivs.append((lo, hi))
        sizes.append(b)
        if copies is not None:
            copies.append((dot, b))
    for conv, k, lo, hi, b in conv_copies(graph, choice, ids, _required, moved):   # XLA CPU's canonical transposes
        ivs.append((lo, hi))
        sizes.append(b)
        if copies is not None and hi - lo >= 1 and b > 0:
            copies.append((conv, b))
    resharded: list = []
    pinned: dict = {}
    # one value resharded to one layout for several users is one buffer, first user to last (reshard_cache)
    shared = shared_reshards(graph, choice)
    dead_at: dict = {}   # node -> the dot its value is dead at (read there only by a collective)
    for (u, v), m, contribs in zip(graph.problem.edges, graph.edge_float, graph.edge_info):
        if m[int(choice[u]), int(choice[v])] <= 0:
            continue
        for inst, leaf, g, _scale in contribs:
            st = g.strategies[int(choice[g.node])]
            req = _required(g, st, inst, leaf)
            if req is None:
                continue
            t = graph.positions.get(g.instr)
            if t is None:
                continue
            try:
                b = int(minfo.bytes_per_device(_leaf_shape(inst, leaf), req))
            except (ValueError, TypeError, AttributeError):
                continue
            # the relayout copy: only a dot / convolution needs the default layout (a loop fusion, a
            # reshape or a copy reads the gathered layout directly)
            dots = [graph.positions.get(u) for u in relayout_readers(g.instr)]   # (a while's state, a reduce: too)
            relayout = _relayout_bytes(graph, inst, leaf, choice, req) if dots else 0
            copied = (id(g.instr), id(inst)) in decomposed   # the DotDecomposer copy above is this copy
            # a dot's operand gathered and then copied: the source is dead at the dot when the collective was
            # its last reader (not where solve writes a pin for the consumer: that pin is the buffer, pin_key)
            relaid = bool(relayout or copied) and g.instr.opcode in ("dot", "convolution") and \
                pin_key(graph, g, inst, leaf, req) is None
            src = graph.positions.get(inst)
            r = graph.ctx.resolve(inst, leaf) if src is not None else TOKEN
            if r is not TOKEN and (is_fused(inst) or
                                   resharded_by_tuple(g.instr, inst, graph.problem.intervals[r[0].node])):
                # a collective between producer and consumer: XLA cannot fuse the producer, it is made (or a
                # root tuple's resharded leaf: the source's tile, taken over by the tuple, lives until then)
                sg = r[0]
                ivs.append((src, max(src, t if relaid else t + 1)))
                sizes.append(int(sg.strategies[int(choice[sg.node])].memory))
            elif relaid and r is not TOKEN and r[1] is None and not inst.is_root and r[0].node not in dead_at and \
                    not _persistent(graph, r[0].node) and \
                    all(u is g.instr or (ids.get(id(u)) is not None and ids[id(u)] < t) for u in inst.users):
                # ... and the source itself, last read by that collective, is dead at the dot too (not an entry
                # parameter: its argument buffer lives throughout; tests/test_memory_model.py's GATHERED_DOT_COPY)
                sg = r[0]
                dead_at[sg.node] = t
                lo_s, hi_s = (int(x) for x in graph.problem.intervals[sg.node])
                own = int(graph.problem.node_usages[sg.node][int(choice[sg.node])])
                if own > 0 and lo_s < t and hi_s == t + 1:
                    ivs.append((t, t + 1))
                    sizes.append(-own)
            if relayout and not copied:
                # made just before the first dot that reads it (after a pin: the pin's reader, not the pin;
                # the gathered buffer dies at the copy, which the pin's interval then stands for)
                at = relayout_point(graph, g.instr, t)
                ivs.append((at, at + 1))
                sizes.append(relayout)
                if copies is not None:
                    copies.append((g.instr, relayout))
            fused = is_fused(g.instr)
            if not fused and in_place_user(g.instr, inst):
                continue   # the consumer computes in place on the resharded buffer: it is the result
            end = t + 1
            if fused:   # read where the fused consumer's readers run
                last = read_until(g.instr, ids)
                end = max(end, (last if last is not None else t) + 1)
                # the collective ends the fusion chain: the source is last read here, not by the
                # readers of the fused consumer (credit its tile back after t when nothing else reads it)
                r = graph.ctx.resolve(inst, leaf)
                others = [read_until(u, ids) if is_fused(u) else ids.get(id(u)) for u in inst.users
                          if u is not g.instr]
                if r is not TOKEN and not is_fused(inst) and all(o is None or o <= t for o in others):
                    sg = r[0]
                    lo_s, hi_s = (int(x) for x in graph.problem.intervals[sg.node])
                    own = int(graph.problem.node_usages[sg.node][int(choice[sg.node])])
                    if own > 0 and hi_s > t + 1 and hi_s <= end:
                        ivs.append((t + 1, hi_s))
                        sizes.append(-own)
            # (the gathered buffer itself stays live at the consumer: XLA makes the copy from it just before
            # the dot, the two live together there, and one schedule point stands for both instants; round 26
            # ended it at the copy, and tests/test_jax_e2e.py's transformer baseline, whose XLA peak is at such
            # a copy, was put 8% under XLA: 7,435,372 B against 8,078,996, which moved the guard's plans)
            # where the copy is made: a pin solve writes, as soon as its operand exists (copy_start)
            key = pin_key(graph, g, inst, leaf, req)
            start = copy_start(graph, inst, t, key is not None or made_at_source(graph, g.instr))
            cached = shared.get((g.node, id(inst), leaf)) if key is None else None
            resharded.append((key or cached or len(resharded), start, end, b))
            if key is not None:
                pinned.setdefault(id(inst), (inst, leaf, set()))[2].add(id(g.instr))
    # the copies solve's pins will share: one buffer per value and layout (cost.liveness.one_buffer_per_reshard)
    for lo, hi, b in one_buffer_per_reshard(resharded):
        ivs.append((lo, hi))
        sizes.append(b)
    # a value every reader of which reads through a pin is last read by the pins (cost.liveness.resharding_pin)
    for lo, hi, b in pinned_only_credit(graph, choice, pinned):
        ivs.append((lo, hi))
        sizes.append(b)
    # the communication buffers and copies XLA keeps in an output's allocation before the output is
    # written (cost.liveness.place_in_outputs: the rule of the module's own temporaries)
    slots = getattr(graph, "output_slots", ())
    if slots:
        placed = place_in_outputs(slots, ivs[first_comm:], sizes[first_comm:], dead_at)
        for j, hit in enumerate(placed):
            if hit:
                sizes[first_comm + j] = 0
    return ivs, sizes


def _persistent(graph: Graph, node: int) -> bool:
    """Whether ``node`` is an entry parameter or output (``graph.persistent``: live the whole program)."""
    persistent = getattr(graph, "persistent", None)
    return persistent is not None and node < len(persistent) and bool(persistent[node])


def _resharded_operands(graph: Graph, choice) -> set:
    """``{(id(consumer), id(operand))}``: the operands ``choice`` reshards for a dot or convolution
    (an edge with a resharding cost and a layout the consumer's strategy requires)."""
    out = set()
    for (u, v), m, contribs in zip(graph.problem.edges, graph.edge_float, graph.edge_info):
        if m[int(choice[u]), int(choice[v])] <= 0:
            continue
        for inst, leaf, g, _scale in contribs:
            if g.instr.opcode in ("dot", "convolution") and \
                    _required(g, g.strategies[int(choice[g.node])], inst, leaf) is not None:
                out.add((id(g.instr), id(inst)))
    return out


def pinned_only_credit(graph: Graph, choice, pinned: dict) -> list:
    """``(lo, hi, -bytes)`` for each value of ``pinned`` (``id(instr) -> (instr, leaf, ids of the consumers
    that read it through a pin solve writes)``, :func:`edge_buffers`) that every user reads through such a
    pin: the written pins are its last readers, made as soon as it exists (:func:`copy_start`), so its
    buffer ends there, not at its last consumer (how ``hloshard cost`` prices the written module,
    :func:`hloshard.cost.liveness.resharding_pin`); the credit is its tile from one point after its
    definition to the end of its node's interval.  Not for an entry parameter, a root, a value XLA would
    fuse (made for the collective only) or a leaf of a tuple-valued node."""
    out = []
    entry = graph.module.entry
    for inst, leaf, readers in pinned.values():
        src = graph.positions.get(inst)
        if src is None or inst.is_root or made_at_entry_start(inst, entry) or is_fused(inst) or \
                any(id(u) not in readers for u in inst.users):
            continue
        r = graph.ctx.resolve(inst, leaf)
        if r is TOKEN or r[1] is not None:
            continue
        v = r[0].node
        lo_s, hi_s = (int(x) for x in graph.problem.intervals[v])
        own = int(graph.problem.node_usages[v][int(choice[v])])
        start = max(lo_s, int(src) + 1)
        if own > 0 and hi_s > start:
            out.append((start, hi_s, -own))
    return out


def pin_key(graph: Graph, g, inst, leaf, req):
    """The key of the pin ``solve --pin-operands`` writes for consumer group ``g`` reading leaf ``leaf``
    of ``inst`` in layout ``req`` (:func:`hloshard.strategy.realize.insert_pins`: one pin per computation,
    operand and layout, which its consumers share), or None when no pin is written there: the graph is
    not one whose plan is written with pins (``graph.pin_operands``, set by
    :func:`hloshard.autoshard.solve.solve_module`) or ``g`` is not a pinned op.  Copies with one key are
    one buffer (:func:`hloshard.cost.liveness.one_buffer_per_reshard`); the copies of a module priced as
    it is (``hloshard cost``: its pins are instructions of their own) stay one per consumer."""
    if not getattr(graph, "pin_operands", False) or g.instr.opcode not in PINNED_OPS or g.operands is not None:
        return None
    return (id(g.instr.parent), id(inst), leaf, repr(req))


def copy_start(graph: Graph, inst, t: int, pinned: bool) -> int:
    """The schedule point where the copy of ``inst``'s value in a consumer's layout is made, the consumer
    at point ``t``: 0 when ``inst`` is an entry parameter (:func:`hloshard.cost.liveness.made_at_entry_start`);
    with ``pinned`` (the consumer reads the copy through a pin solve writes, :func:`pin_key`) the point
    ``inst`` is defined at, since a pin whose layout differs from its operand's is XLA's collective, run
    by the breadth-first scheduler as soon as its operand exists (:func:`hloshard.cost.liveness.resharding_pin`:
    how ``hloshard cost`` prices the written pin); else ``t``, where XLA's partitioner reshards for the
    consumer.  Round 19's budget start of the encoder-decoder: the solver priced its pins at the
    consumers (11.5 MiB peak) and the written module needed 14.0 MiB."""
    if made_at_entry_start(inst, graph.module.entry):
        return 0
    src = graph.positions.get(inst) if pinned else None
    return t if src is None else min(t, int(src))


def relayout_copies(graph: Graph, choice, positions: dict | None = None) -> list:
    """The dot operand copies XLA's ``DotDecomposer`` makes under ``choice``
    (:func:`hloshard.cost.liveness.relayout_intervals`): ``[(dot, k, lo, hi, bytes)]`` (``k``: the operand
    number), bytes per device of the operand in the layout the dot's chosen strategy requires (copies of 0
    bytes left out), each a buffer over ``[lo, hi)`` of :func:`edge_buffers`."""
    ids = positions if positions is not None else {id(i): t for i, t in graph.positions.items()}
    minfo = graph.ctx.minfo
    out = []
    for dot, k, lo, hi in relayout_intervals(graph.schedule, ids,
                                            gathers=getattr(graph, "memory_device", None) is None):
        r = graph.ctx.resolve(dot, 0) if dot in graph.ctx.groups else TOKEN
        if r is TOKEN:
            continue
        dg = r[0]
        op = dot.operands[k]
        req = _required(dg, dg.strategies[int(choice[dg.node])], op, 0)
        try:
            b = int(minfo.bytes_per_device(op.shape, req)) if req is not None else 0
        except (ValueError, TypeError, AttributeError):
            b = 0
        if b > 0:
            out.append((dot, k, lo, hi, b))
    return out


def relayout_point(graph: Graph, consumer, t: int) -> int:
    """Where the relayout copy after an all-gather into ``consumer`` (at schedule position ``t``) is live
    (:func:`_relayout_bytes`): at ``t``, or, when ``consumer`` is a written
    :func:`hloshard.cost.liveness.communicating_pin`, just before the first dot or convolution reading the
    pin (XLA's buffer assignment of ``transformer_block``'s solve plan: ``all-gather`` live 18-20, its
    ``wrapped_copy.1`` 20-23, read by the dot at 23; the pin's own interval stands for the copy after)."""
    if not communicating_pin(consumer):
        return t
    dots = [graph.positions.get(u) for u in relayout_readers(consumer)]
    return min([x for x in dots if x is not None and x > t] or [t + 1]) - 1


def _relayout_bytes(graph: Graph, inst, leaf, choice, req) -> int:
    """Bytes of the copy XLA makes after an all-gather along a dimension that is not the most major
    one: its CPU layout assignment makes the gathered dimension major, and a dot or convolution reading
    it needs the default layout (a ``copy`` / ``transpose`` of the gathered size).  0 when the resharding of
    ``inst``'s leaf into ``req`` (:func:`hloshard.cost.reshard.plan`) has no such step."""
    r = graph.ctx.resolve(inst, leaf)
    if r is TOKEN:
        return 0
    sg, k = r
    st = sg.strategies[int(choice[sg.node])]
    src = st.out if k is None else st.out[k]
    shape = _leaf_shape(inst, leaf)
    minfo = graph.ctx.minfo
    try:
        a, b = minfo.to_sharding(src, len(shape.dims)), minfo.to_sharding(req, len(shape.dims))
        steps = plan(shape, a, b, graph.mesh).steps
    except Exception:  # noqa: BLE001 - a pair the planner cannot plan is priced by the resharder, not here
        return 0
    out = 0
    for step in steps:
        if step.kind == "all-gather" and step.dims and step.output_shape:
            d = min(step.dims)
            if math.prod(step.output_shape[:d]) > 1:
                out = max(out, int(step.output_bytes))
    return out


def scratch_bytes(g, st, minfo, memory_device=None) -> int:
    """Bytes per device live beside node ``g``'s output while it runs under strategy ``st``: the buffer
    on the other side of each of its collectives (an all-reduce's partial sums, a reduce-scatter's
    input, an all-gathered operand); for a halo exchange (collective-permutes) the operand's local tile
    concatenated with the halos it received, which XLA's partitioner slices the result out of; and,
    when memory follows the CPU backend (``memory_device`` None), XLA CPU's dense expansion of a
    batch-grouped convolution (:func:`hloshard.cost.group_conv.expansion_bytes`).  The one rule for
    the evaluation (:func:`edge_buffers`) and the solver's priced problem
    (:func:`hloshard.autoshard.edgememory.edge_memory_terms`).  A collective the module already
    writes (:func:`hloshard.strategy.collectives.charged_collective`: its operand and its result are
    values of their own, with their own intervals) has no other side to add."""
    own = charged_collective(g.instr) is not None
    extra = 0 if own else sum(int(c.nbytes) for c in st.collectives)
    halo = 0 if own else sum(int(c.nbytes) for c in st.collectives if c.kind == "collective-permute")
    if halo:
        extra += halo + _operand_tile_bytes(g, st, minfo)
    if memory_device is None:
        extra += expansion_bytes(g.instr, st.memory, st.out, minfo.shape) + output_copy_bytes(g.instr, st)
    return extra


def _operand_tile_bytes(g, st, minfo) -> int:
    """Bytes per device of ``g``'s first array operand in the layout strategy ``st`` requires (0 when
    unknown)."""
    for i, opref in enumerate(g.ops()):
        entry = st.inputs[i] if i < len(st.inputs) else None
        for inst, leaf, req in _operand_leaves(opref, entry):
            if req is None:
                continue
            try:
                return int(minfo.bytes_per_device(_leaf_shape(inst, leaf), req))
            except (ValueError, TypeError, AttributeError):
                return 0
    return 0


def _required(g, st, inst, leaf):
    """The layout strategy ``st`` of group ``g`` requires for leaf ``leaf`` of operand ``inst``."""
    for i, opref in enumerate(g.ops()):
        entry = st.inputs[i] if i < len(st.inputs) else None
        for ii, ll, req in _operand_leaves(opref, entry):
            if ii is inst and ll == leaf and req is not None:
                return req
    return None


def _donated_nodes(module, leaf_nodes) -> list:
    """Nodes of the entry output leaves that ``input_output_alias`` or ``buffer_donor`` places in a
    parameter's buffer (:func:`hloshard.strategy.ties.donated_aliases`)."""
    root = module.entry.root
    pairs = donated_aliases(module)
    if root is None or not pairs:
        return []
    nodes = leaf_nodes(root)   # one per array leaf of the output, in order
    out = []
    for out_index, _param, _pindex in pairs:
        k = _array_leaf_index(root.shape, tuple(out_index))
        if k is not None and k < len(nodes):
            out.append(nodes[k])
    return out


def _tuple_table_bytes(shape) -> int:
    """8 bytes per element of every tuple in ``shape`` (XLA's tuple index tables)."""
    if not shape.is_tuple:
        return 0
    return 8 * len(shape.tuple_shapes) + sum(_tuple_table_bytes(e) for e in shape.tuple_shapes)


def _array_leaf_index(shape, index: tuple) -> int | None:
    """Position, among the array leaves of ``shape``, of the leaf at tuple ``index`` (None if that is
    not an array leaf)."""
    n = 0
    for k, elem in enumerate(shape.tuple_shapes if shape.is_tuple else ()):
        if index and k == index[0]:
            sub = _array_leaf_index(elem, index[1:])
            return None if sub is None else n + sub
        n += sum(1 for x in ([elem] if not elem.is_tuple else elem.leaves()) if x.is_array)
    if not index:
        return 0 if shape.is_array else None
    return None


def in_edges(g, ctx, resh, unfollow: bool = False):
    """The resharding edges into group ``g``, one per array operand leaf that some strategy constrains:
    yields ``(operand instruction, leaf, source group, follow, matrix, scale)``, the matrix (source
    strategies x ``g``'s strategies, cost units) already multiplied by ``scale`` = ``g``'s executions
    times the operand's edge weight; ``follow``: ``g`` follows that operand (a diagonal matrix: the other
    pairs forbidden; ``unfollow``: priced in full and not a follow, where :func:`build_graph` found that
    the kept shardings and ties cannot keep it, :func:`hloshard.solver.followers.follow_conflicts`).
    With a device-priced mesh, an edge from a value independent of every collective of its computation
    (a parameter, or computed from parameters without one) is priced with its all-gathers sharing
    latency as XLA's combiners merge them (:func:`_combined`, :mod:`hloshard.cost.combiner`).
    ``resh``: the :class:`~hloshard.autoshard.resharder._Resharder` pricing the pairs.  Used by
    :func:`build_graph` and by ``explain``'s local re-pricing (one edge loop)."""
    w = ctx.weight(g.instr)
    ops = g.ops()
    weights = g.operand_weights or [1.0] * len(ops)
    for i, opref in enumerate(ops):
        if not isinstance(opref, LeafRef) and not opref.shape.is_tuple:
            # the common case: one array operand, one requirement per strategy
            per_leaf = {(opref, 0): resh.specs(g.strategies, ("in", i))}
        else:
            per_leaf = {}
            for q, st in enumerate(g.strategies):
                entry = st.inputs[i] if i < len(st.inputs) else None
                for (inst, leaf, req) in _operand_leaves(opref, entry):
                    per_leaf.setdefault((inst, leaf), [None] * len(g.strategies))[q] = req
        for (inst, leaf), reqs in per_leaf.items():
            if all(r is None for r in reqs):
                continue
            r = ctx.resolve(inst, leaf)
            if r is TOKEN:
                continue
            src, k = r
            if src is g:
                continue
            shape = _leaf_shape(inst, leaf)    # not moved_leaf_shape: the report's only (its docstring)
            if not is_array(shape):
                continue
            srcs = resh.specs(src.strategies, ("out", k))
            follow = (g.follow is not None and g.follow[0] is inst and g.follow[1] == leaf
                      and len(srcs) == len(reqs) and not unfollow)
            scale = w * weights[i]
            m = resh.scaled(shape, srcs, reqs, scale, diagonal_only=follow)
            yield inst, leaf, src, follow, _combined(ctx, resh, inst, shape, srcs, reqs, m, scale), scale


def _combined(ctx, resh, inst, shape, srcs, reqs, m, scale):
    """``m`` (an edge's scaled matrix) less what its all-gathers save by sharing latency in XLA's
    combiners when ``inst`` (the producer) is independent of every collective of its computation
    (:func:`hloshard.cost.combiner.edge_savings`, the rule in :mod:`hloshard.cost.combiner`); ``m``
    itself without a device-priced mesh, for other producers, or when nothing is saved.  One result
    object per distinct (``m``, class size): equal edges keep sharing one array."""
    if getattr(ctx.mesh, "roofline_prices", None) is None or inst.parent is None or not np.any(m):
        return m
    state = vars(ctx).setdefault("edge_combiner", {"classes": {}, "pairs": {}, "matrices": {}})
    comp = inst.parent
    hit = state["classes"].get(id(comp))
    if hit is None or hit[0] is not comp:
        hit = state["classes"][id(comp)] = (comp, *independent_values(comp))
    _, free, k = hit
    if id(inst) not in free or k <= 1:
        return m
    key = (id(m), k)
    done = state["matrices"].get(key)
    if done is not None and done[0] is m:
        return done[1]
    saved = edge_savings(ctx.mesh, shape, srcs, reqs, ctx.minfo.to_sharding, k, state["pairs"], costs=m)
    out = m
    if saved is not None:
        out = np.maximum(m - saved * scale, 0.0)
        out.flags.writeable = False
    state["matrices"][key] = (m, out)
    return out


def _add_edge(edges, info, u, v, m, contribution):
    if u > v:
        u, v, m = v, u, m.T
    key = (u, v)
    if key in edges:
        edges[key] = edges[key] + m
        info[key].append(contribution)
    else:
        edges[key] = m
        info[key] = [contribution]



def choose_scale(finite_max: float) -> float:
    """Cost units per integer unit: a power of ten that keeps the largest finite cost near 1e9 (and no
    finer than 0.001), so objective sums stay far below int64 and CP-SAT's coefficients stay moderate."""
    if finite_max <= 0:
        return 1.0
    exp = math.floor(math.log10(finite_max)) - 9
    return float(10.0 ** max(exp, -3))



def _shared_ints(arrays: list, scale: float) -> list:
    """``[_to_int(a, scale) for a in arrays]`` with one read-only integer array per distinct input
    object (inputs shared between nodes or edges stay shared)."""
    ints: dict = {}
    out = []
    for a in arrays:
        hit = ints.get(id(a))
        if hit is None or hit[0] is not a:
            b = _to_int(a, scale)
            b.flags.writeable = False
            hit = ints[id(a)] = (a, b)
        out.append(hit[1])
    return out


def _to_int(arr: np.ndarray, scale: float) -> np.ndarray:
    out = np.full(arr.shape, INFINITY, dtype=np.int64)
    fin = np.isfinite(arr)
    out[fin] = np.minimum(np.rint(arr[fin] / scale), INFINITY - 1).astype(np.int64)
    return out

