"""A roofline per instruction: the seconds one device spends on it, from its flops and the HBM bytes it
reads and writes.

For one instruction executed once on one device::

    seconds = max(flops / peak, hbm_bytes / hbm_bandwidth)

(the roofline model: Williams, Waterman and Patterson, "Roofline: an insightful visual performance model
for multicore architectures", CACM 52(4), 2009).  With a profile that measures its on-chip memory
(``tpu-v5e``: :attr:`hloshard.devices.DeviceProfile.vmem_bandwidth`), the report's roofline has a third side
and an overhead: the kernels' results the chip keeps in VMEM (:func:`vmem_intermediates`) are read and
written at the VMEM bandwidth, not HBM's, ``seconds = max(flops / peak, HBM bytes / HBM bandwidth, VMEM bytes
/ VMEM bandwidth) + kernel overhead`` (round 32); the solver's objective keeps the two-sided form.  ``flops``: the flops of the instruction's shard (the
cost model's compute of the chosen strategy, :data:`hloshard.strategy.base.COMPUTE_COST_PER_FLOP` units
per flop); ``peak``: the device's dense FLOP/s for a dot / convolution / fused-attention call of the
instruction's element type (:func:`hloshard.devices.matmul_peak`), else its vector peak (the ``fp32``
entry of the profile: elementwise work does not run on tensor cores / the MXU).

``hbm_bytes``: what the instruction moves through HBM once XLA's fusion has run, as the backend's
fusion rule decides it (:class:`hloshard.cost.tpu_fusion.FusionRule`: by default the memory model's, XLA's
CPU backend, :mod:`hloshard.cost.liveness`; with ``--device tpu-*`` the TPU compiler's, which also fuses
producers into dot operands, a dot's elementwise consumer into the dot's output, and sibling reductions,
and runs a dot whose partial sums are scattered as a windowed einsum loop, whose extra reads the
caller adds, :func:`hloshard.cost.tpu_fusion.windowed_einsum_bytes`, :mod:`hloshard.cost.tpu_fusion`):
an instruction XLA fuses into its
consumers (:func:`~hloshard.cost.liveness.is_fused`) moves nothing itself; a materialised one writes its
result and reads the buffers it reads with its fused producers inlined (:func:`kernel_reads`), each at
its per-device size; a slice is read at its own size and a ``dynamic-update-slice`` moves only its
update (in place), as ``HloCostAnalysis`` counts them.  Instructions that move no
data of their own count 0: ``parameter`` (under the TPU rule an entry parameter's prefetch copies into
on-chip memory instead, :func:`prefetched`: :data:`PREFETCH_COPY_FACTOR` x its size, bytes that take no
seconds, :func:`instruction_seconds`), ``constant``, ``get-tuple-element``, ``tuple``, ``bitcast``,
``after-all``, and control flow (``while`` / ``call`` / ``conditional``: their bodies are counted per
execution instead), ``*-done``.  Collectives are counted in the bytes (XLA's ``bytes accessed`` counts
them too) but their time is communication, priced by :mod:`hloshard.cost.collectives`, so their
roofline seconds are 0 here; the plan's implicit collectives (a strategy's all-reduce, a resharding's
all-gather), which are no instruction of the module, are added by the caller
(:attr:`Roofline.collective_bytes`).

What XLA's ``HloCostAnalysis`` ``bytes accessed`` counts that this does not (measured on the samples,
BENCHMARKS.md "Round 11, helper memory"): the operands of each fusion as XLA's (backend-specific)
fusion left them (on a TPU, besides the TPU rule's fusions, its padded tiles and its prefetches of
entry parameters -- both counted with ``--device tpu-*``: :attr:`~hloshard.cost.tpu_fusion.FusionRule.tiled_layout`,
:func:`prefetched` --: the layout copies its layout assignment adds, e.g. of a weight gradient written transposed
(a forward convolution's output copied into the entry's layout is counted,
:func:`~hloshard.cost.tpu_fusion.conv_output_relayout`), the all-to-all and relayout
fusions of a reduce-scatter it decomposes, and its convolution emitters' re-layout of a small batch;
on the CPU the layout copies
around the attention reshapes, e.g. XLA's ``transpose_copy_fusion`` / ``bitcast_copy_fusion`` -- the
``DotDecomposer`` copies of dot operands and the relayouts of gathered operands are counted,
:attr:`Roofline.relayout_bytes` -- and the
producers XLA's XNNPACK reduce fusions do not take in), and the bookkeeping of loops
(the induction variable, the loop-state copies XLA inserts); ``HloCostAnalysis`` counts a while body
once, the roofline per trip (:func:`hloshard.timing.body_once` gives the figure to compare).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

from ..devices import matmul_peak
from .flops import FUSED_ATTENTION_TARGETS
from .combiner import _topological
from .liveness import ELEMENTWISE, effective_users
from .tpu_fusion import (CPU_FUSION, SLICES, FusionRule, conv_batch_factor, conv_output_relayout, fusion_rule,
                         online_softmax_dot, shared_join, sibling_key)

__all__ = ["kernel_reads", "prefetched", "shared_intermediates", "vmem_intermediates", "MSA_COPIED_KERNELS", "vmem_resident", "MIN_OVERLAP_TO_ASYNC_COPY_RATIO", "hbm_terms", "hbm_total", "PREFETCH_COPY_FACTOR", "NO_TRAFFIC", "SLICES", "COLLECTIVE_OPCODES", "MATMUL_OPCODES", "RooflineRow", "Roofline", "hbm_bytes",
           "roofline", "instruction_seconds", "instruction_peak", "RooflinePrices", "take_bytes"]

#: opcodes that move no data of their own (aliases, control flow, async tails)
NO_TRAFFIC = frozenset({"parameter", "constant", "get-tuple-element", "tuple", "bitcast", "after-all",
                        "while", "call", "conditional", "all-reduce-done", "all-gather-done",
                        "collective-permute-done", "async-done", "async-update", "copy-done", "partition-id",
                        "replica-id"})

#: collectives: bytes counted, time priced as communication (not here)
COLLECTIVE_OPCODES = frozenset({"all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
                                "collective-broadcast", "all-reduce-start", "all-gather-start",
                                "collective-permute-start", "ragged-all-to-all", "send", "recv"})


#: opcodes that run at the tensor-core / MXU peak
MATMUL_OPCODES = frozenset({"dot", "convolution"})


@dataclass(frozen=True)
class RooflineRow:
    """One instruction: ``flops`` and ``hbm_bytes`` per device for all its executions, ``seconds`` (the
    roofline), ``bound`` (``'compute'`` | ``'memory'`` | ``'communication'`` | ``'none'``); ``vmem_bytes``:
    the part of ``hbm_bytes`` that does not cross HBM on the chip (reads of a parameter held in on-chip
    memory, :func:`vmem_resident`; for the parameter's own row, its prefetch copy's bytes beyond the one
    HBM read), counted in ``hbm_bytes`` as ``HloCostAnalysis`` counts them but given no seconds."""

    name: str
    opcode: str
    executions: float
    flops: float
    hbm_bytes: float
    seconds: float
    bound: str
    vmem_bytes: float = 0.0


@dataclass
class Roofline:
    """The roofline of a whole program on one device: totals (flops, HBM bytes, seconds) and the
    seconds of the compute-bound and memory-bound instructions; ``rows``: per instruction.
    ``collective_bytes``: the part of ``hbm_bytes`` that the plan's implicit collectives (a strategy's
    all-reduce, a resharding's all-gather: not instructions of the module) read and write, added by the
    caller (:func:`hloshard.timing.plan_roofline`); not in ``seconds`` (their time, HBM
    traffic included, is communication: :func:`hloshard.cost.collectives.with_hbm`);
    ``collective_bytes_once``: the same with each collective counted once (a loop body's not per trip).
    ``relayout_bytes`` (``_once``): the part of ``hbm_bytes`` (and of the memory-bound ``seconds``) that
    the layout copies of the memory model read and write (dot operand copies, relayouts of gathered
    operands: :func:`hloshard.autoshard.build.edge_buffers`), added by the same caller."""

    flops: float = 0.0
    hbm_bytes: float = 0.0
    vmem_bytes: float = 0.0
    collective_bytes: float = 0.0
    collective_bytes_once: float = 0.0
    relayout_bytes: float = 0.0
    relayout_bytes_once: float = 0.0
    seconds: float = 0.0
    compute_bound_s: float = 0.0
    memory_bound_s: float = 0.0
    rows: list = field(default_factory=list)
    vmem_bandwidth: float | None = None
    kernel_overhead: float = 0.0


def kernel_reads(instr, rule: FusionRule = CPU_FUSION) -> list:
    """``(buffer, operand index)`` for every buffer the kernel of ``instr`` reads once XLA's fusion has
    run: its operands, each one XLA fuses into its consumers (:func:`hloshard.cost.liveness.is_fused`,
    the memory model's fusion rule) replaced by what it reads, recursively, each buffer once; the index
    is that of the operand of ``instr`` it is reached through.  One exception bounds the inlining: a
    fused producer read by several consumers that joins two or more array buffers
    (:func:`hloshard.cost.tpu_fusion.shared_join`) counts as one buffer of its own size, as XLA does not copy a shared chain
    into every consumer without bound (otherwise a residual stream ``x + f(x)`` over L layers, whose
    adds all fuse, would have each layer re-read every earlier layer: L^2 reads; measured on a
    48-layer transformer, 8.7x the TPU compiler's bytes, BENCHMARKS.md "Round 9").  A fused ``slice`` or
    ``dynamic-slice`` is read as a buffer of its own (result) size: the kernel reads that part of its
    operand only, and XLA's ``HloCostAnalysis`` counts a fusion parameter read through a slice at the
    slice's size (:data:`SLICES`).  ``rule``: the backend's fusion rule (:mod:`hloshard.cost.tpu_fusion`;
    the CPU's by default); under an output-fusing rule a dot / convolution with an epilogue
    (:attr:`FusionRule.epilogue`) also reads what the epilogue reads besides the dot -- for an output
    region (:func:`hloshard.cost.tpu_fusion.output_region`) what its members read besides the dot and
    each other -- with index None (reached through no operand of ``instr``)."""
    out: list = []
    seen: set = set()
    stack = [(o, k) for k, o in reversed(list(enumerate(instr.operands)))]
    tail = rule.epilogue(instr)
    if tail is not None:
        seen.add(id(instr))
        stack = [(o, None) for o in reversed(tail.operands)] + stack
    while stack:
        o, k = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        if tail is not None and k is None and rule.absorbed_by(o) is instr:
            stack.extend((x, None) for x in reversed(o.operands))    # a member of instr's output region
        elif rule.is_fused(o) and not shared_join(o, rule) and o.opcode not in SLICES and rule.absorbed_by(o) is None:
            stack.extend((x, k) for x in reversed(o.operands))
        else:
            out.append((o, k))
    return out


def _per_computation(comp, rule, attr: str, build):
    """``(stamp, table)`` kept on ``comp`` under ``attr``: ``build()``'s table, built again when the rule or the
    computation (its instruction count, its root) changed since."""
    stamp = (rule.name, len(comp.instructions), id(comp.root))
    cache = getattr(comp, attr, None)
    if cache is None or cache[0] != stamp:
        cache = (stamp, build())
        setattr(comp, attr, cache)
    return cache


def read_by_earlier_sibling(instr, rule: FusionRule) -> frozenset:
    """Ids of the buffers of :func:`kernel_reads` of the reduce ``instr`` that an earlier reduce of the
    same :func:`hloshard.cost.tpu_fusion.sibling_key` in its computation also reads (one multi-output
    kernel reads them once, :attr:`FusionRule.sibling_reduces`), where that earlier reduce is not an
    operand of ``instr``, directly or through other instructions; empty for anything else or under a
    rule without sibling fusion.

    The reachability test is XLA's for sibling multi-output fusion (``MultiOutputFusion`` fuses two
    siblings only when neither reaches the other: the fused kernel would otherwise depend on itself).
    A reduction over a row that reads an earlier one's result -- a softmax's sum of
    ``exp(x - max(x))``, a layer norm's variance ``mean((x - mean(x))^2)`` -- is a kernel of its own
    and reads ``x`` again: the TPU compiler's optimised programs of ``softmax`` and ``layernorm`` over
    f32[8192,8192] (libtpu 0.0.42.1, one v5e chip) run three kernels that each read ``x``
    (``reduce``, a ``kLoop`` fusion reducing the recomputed chain, the final ``kLoop`` fusion), 4 x 256
    MiB of ``bytes accessed``, and the chip takes 1.54 ms for either (BENCHMARKS.md round 20, lead:
    4 passes at its measured 691 GB/s), not the 3 passes counted while the sum shared the max's read.
    Computed once per computation and cached on it."""
    key = sibling_key(instr) if rule.sibling_reduces else None
    comp = instr.parent
    if key is None or comp is None:
        return frozenset()
    cache = _per_computation(comp, rule, "_hloshard_sibling_reads", lambda: _sibling_table(comp, rule))
    return cache[1][0].get(id(instr), frozenset())


def _sibling_table(comp, rule: FusionRule) -> tuple[dict, dict]:
    """``({id(reduce): ids of buffers an earlier independent sibling reads}, {id(reduce): id of the first
    such sibling})`` for :func:`read_by_earlier_sibling` and :func:`multi_output_kernels`.  Each keyed
    reduce kernel gets a bit; ``upstream[id(i)]``: the bits of the keyed reduces ``i`` depends on (an
    int used as a bit set, in one topological pass)."""
    instrs = list(comp.instructions)
    inside = {id(i) for i in instrs}
    bit: dict = {}
    for i in instrs:
        if sibling_key(i) is not None and not (rule.is_fused(i) and not shared_join(i, rule)):
            bit[id(i)] = 1 << len(bit)
    if len(bit) < 2:
        return {}, {}
    upstream: dict = {}
    for i in _topological(instrs, inside):
        up = 0
        for o in i.operands:
            if id(o) in inside:
                up |= upstream.get(id(o), 0) | bit.get(id(o), 0)
        upstream[id(i)] = up
    seen: dict = {}
    shared: dict = {}
    partner: dict = {}
    for i in instrs:
        if id(i) not in bit:
            continue
        reads = {id(b) for b, _ in kernel_reads(i, rule)}
        group = seen.setdefault(sibling_key(i), [])
        before: set = set()
        for b, r, j in group:
            if not upstream[id(i)] & b:
                if reads & r and id(i) not in partner:
                    partner[id(i)] = j
                before |= r
        shared[id(i)] = frozenset(reads & before)
        group.append((bit[id(i)], reads, id(i)))
    return shared, partner


def multi_output_kernels(comp, rule: FusionRule) -> int:
    """How many kernels of ``comp`` (an :class:`hloshard.hlo.ir.Computation`) write a tuple under ``rule``:
    the multi-output fusions its fusion model makes -- an elementwise kernel computed in a consumer's
    kernel or merged with a sibling (:func:`multi_output_skips`), a reduction of a dot's result computed in
    the dot's kernel, reductions of one operand over the same dimensions run as one kernel
    (:func:`read_by_earlier_sibling`) -- each group of two or more members one kernel (a count; 0 under a
    rule with neither multi-output loops nor sibling reductions).  libtpu gives each such kernel a
    512 B tuple header in its HBM heap (:func:`hloshard.cost.tpu_heap.spill_heap_slots`): ``kLoop`` /
    ``kOutput`` fusions with tuple results in its optimised programs (``multiply_reduce_fusion``,
    ``fusion.236 = (f32[4,8,64], f32[4,8,64,64])``, a score dot writing its ``reduce-max``; round 29)."""
    parent: dict = {}

    def find(x):
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    def union(a, b):
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[ra] = rb

    if rule.multi_output_loops:
        _, first = _per_computation(comp, rule, "_hloshard_multi_output", lambda: _multi_output_table(comp, rule))[1]
        for k, root in first.items():
            if k != root:
                union(k, root)
    if rule.sibling_reduces:
        _, partners = _per_computation(comp, rule, "_hloshard_sibling_reads", lambda: _sibling_table(comp, rule))[1]
        for k, j in partners.items():
            union(k, j)
    return len({find(k) for k in parent})


def _materialised(instr, rule: FusionRule) -> bool:
    """Whether ``instr`` is a kernel of its own under ``rule`` (:func:`hbm_bytes` may be > 0): not
    :data:`NO_TRAFFIC`, not fused (a shared join is written once), not computed in a dot's output
    fusion."""
    if instr.opcode in NO_TRAFFIC:
        return False
    if rule.is_fused(instr) and instr.opcode != "constant" and not shared_join(instr, rule):
        return False
    return rule.absorbed_by(instr) is None


def _loop_shape(instr):
    """The iteration space of ``instr``'s kernel for multi-output fusion: an elementwise op's result
    dims, a reduce's operand dims (XLA's ``ShapesCompatibleForMultiOutputFusion`` compares these), or
    None for anything else."""
    if instr.opcode == "reduce" and instr.operands and instr.operands[0].shape.is_array:
        return tuple(instr.operands[0].shape.dims)
    if instr.opcode in ELEMENTWISE and instr.shape.is_array:
        return tuple(instr.shape.dims)
    return None


def multi_output_skips(instr, rule: FusionRule) -> frozenset:
    """Ids of the buffers of :func:`kernel_reads` of ``instr`` that its kernel does not read from HBM
    under a rule with :attr:`FusionRule.multi_output_loops` (the TPU's): XLA's ``MultiOutputFusion``
    (``xla/service/multi_output_fusion.cc``, ``gpu/multi_output_fusion.cc``; read in openxla/xla, not
    copied) puts kernels of one iteration space (:func:`_loop_shape`) into one kernel with a tuple
    result when that creates no cycle:

    * *producer-consumer*: an elementwise kernel ``o`` that ``instr`` reads, of ``instr``'s iteration
      space, is computed inside ``instr``'s kernel and written from there (its other readers -- an
      entry output, another consumer -- read that result): ``instr`` does not read ``o`` back.  Legal
      when no other kernel lies on a path from ``o`` to ``instr``;
    * *a reduction of a dot's result*: a reduce over the result a dot / convolution kernel writes (the
      dot, or the epilogue it writes instead), of the result's iteration space, is computed in the
      dot's kernel as a second output, on the same level test: the attention scores' ``reduce-max``
      (``get-tuple-element(fusion)`` of the score dot's ``kOutput`` fusion in the TPU compiler's
      optimised ``transformer_block`` solve plan, ``v5e:2x4``) and a layer norm's sum over a residual
      add that a dot's output fusion computes;
    * *siblings*: elementwise kernels of one iteration space that read a common buffer are one kernel
      that reads it once (the first of them in the computation's order reads it).  Legal when neither
      reaches the other.

    The cycle test: each instruction's *level* in its computation is 0 when no kernel
    (:func:`_materialised`) depends on it, else the largest over its users ``u`` of ``level(u)`` plus 1
    when ``u`` is a kernel; ``o`` merges into ``instr`` when ``level(o) == level(instr) + 1`` (another
    kernel between them would make it at least 2 more), siblings when their levels are equal (a path
    between them would make them differ).  An Adam update is the case in point (MaxText's optimizer,
    BENCHMARKS.md round 17: the TPU's ``multiply_reduce_fusion`` writes the new moments and weight and
    sums the squared weight in one pass): the new moments are entry outputs read again by the weight's
    kernel, the new weight is an output read again by its norm's reduce.  Reductions keep their own
    sibling rule (:func:`read_by_earlier_sibling`).  Empty for anything else.  Cached per computation."""
    if not rule.multi_output_loops or instr.parent is None or _loop_shape(instr) is None:
        return frozenset()
    comp = instr.parent
    cache = _per_computation(comp, rule, "_hloshard_multi_output", lambda: _multi_output_table(comp, rule))
    return cache[1][0].get(id(instr), frozenset())


def _written_by_dot(b, kernel: dict, rule: FusionRule) -> bool:
    """Whether ``b`` is the buffer a dot / convolution kernel writes: the dot itself (a kernel without an
    epilogue) or the epilogue it writes instead (:attr:`FusionRule.epilogue`)."""
    if b.opcode in MATMUL_OPCODES:
        return bool(kernel.get(id(b))) and rule.epilogue(b) is None
    d = rule.absorbed_by(b)
    return d is not None and rule.epilogue(d) is b


def _kernel_levels(comp, rule: FusionRule) -> tuple[dict, dict]:
    """``({id(instr): is a kernel}, {id(instr): level})`` of the instructions of ``comp``: the
    :func:`multi_output_skips` cycle test's levels (0 when no kernel depends on the instruction, else the
    largest over its users ``u`` of ``level(u)`` plus 1 when ``u`` is a kernel)."""
    instrs = list(comp.instructions)
    inside = {id(i) for i in instrs}
    kernel = {id(i): _materialised(i, rule) for i in instrs}
    level: dict = {}
    for i in reversed(_topological(instrs, inside)):
        lv = 0
        for u in i.users:
            if id(u) in inside:
                lv = max(lv, level.get(id(u), 0) + (1 if kernel[id(u)] else 0))
        level[id(i)] = lv
    return kernel, level


def _multi_output_table(comp, rule: FusionRule) -> tuple[dict, dict]:
    """``({id(kernel): ids of buffers it does not read}, {id(kernel): id of its multi-output kernel's
    first member})`` for :func:`multi_output_skips` and :func:`_first_kernels`: a kernel merged with a
    producer it does not read back, or with an earlier sibling that read a common buffer, is one kernel
    with it (a kernel merged with none is its own)."""
    instrs = list(comp.instructions)
    kernel, level = _kernel_levels(comp, rule)
    out: dict = {}
    seen: dict = {}
    parent: dict = {}

    def find(x):
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    for i in instrs:
        shape = _loop_shape(i)
        if shape is None or not kernel[id(i)]:
            continue
        reads = [b for b, _ in kernel_reads(i, rule)]
        merged = [b for b in reads
                  if b.parent is comp and b.shape.is_array and tuple(b.shape.dims) == shape
                  and level[id(b)] == level[id(i)] + 1
                  and ((kernel.get(id(b)) and b.opcode in ELEMENTWISE)
                       or (i.opcode == "reduce" and _written_by_dot(b, kernel, rule)))]
        skip = {id(b) for b in merged}
        for b in merged:
            parent[find(id(i))] = find(id(b))
        if i.opcode in ELEMENTWISE:
            before = seen.setdefault((shape, level[id(i)]), {})
            common = {id(b) for b in reads} & before.keys()
            skip |= common
            for c in common:
                parent[find(id(i))] = find(before[c])
            for b in reads:
                before.setdefault(id(b), id(i))
        if skip:
            out[id(i)] = frozenset(skip)
    return out, {k: find(k) for k in list(parent)}


#: bytes ``HloCostAnalysis`` counts for one prefetch of a buffer into on-chip memory, in units of the
#: buffer's size: ``copy-start`` reads it (HBM) and writes it (VMEM), ``copy-done`` again reads and writes
#: it, each counted as operand plus result (measured on the TPU compiler's optimised ``conv_layer`` GSPMD
#: program: its only prefetch, of the f32[3,3,64,32] weight of 147,456 padded bytes, is 589,824 of the
#: 17,519,616 bytes accessed, the rest being its two kernels' padded operands and results to 0.03%)
PREFETCH_COPY_FACTOR = 4

#: the largest parameter (bytes per device) that memory-space assignment prefetches: less than the
#: smallest on-chip VMEM measured (v5e, 128 MiB: :data:`hloshard.cost.tpu_layout.VMEM_BYTES`), as the
#: kernel that reads it keeps its own scoped VMEM beside it.  Measured with the TPU compiler (libtpu
#: 0.0.42.1, one v5e chip, ahead of time) on ``x * sum(x, axis=1, keepdims=True) + y`` with ``x``,
#: ``y`` f32[n, 1024] (``y`` is read by the second kernel only, so it may be prefetched): ``y`` of 1,
#: 8, ..., 104, 112 MiB is prefetched (``copy-start``), of 113, 114, 115, 116, 120, 124, 127, 128 MiB
#: is not (bf16 the same at 1-96 and 128 MiB).  A 128 MiB bf16 softmax input was counted as
#: prefetched at 4 x its size, 1.83x the chip's measured time (BENCHMARKS.md round 20, tpufuse).
PREFETCH_MAX_BYTES = 112 * 2 ** 20


def _kernels_reading(param, rule: FusionRule) -> list:
    """The kernels (materialised instructions, :func:`hbm_bytes` > 0 under ``rule``) that read ``param``:
    its users (:func:`hloshard.cost.liveness.effective_users`), through the fused ones (inlined into their
    consumers) and an epilogue's dot, level by level; a user that is control flow or a tuple counts as a
    reader of its own."""
    out: list = []
    seen: set = set()
    frontier = [param]
    while frontier:
        fused = []
        for u in (u for x in frontier for u in effective_users(x)):
            if id(u) in seen:
                continue
            seen.add(id(u))
            dot = rule.absorbed_by(u)
            if dot is not None:
                out.append(dot)
            elif u.opcode not in NO_TRAFFIC and rule.is_fused(u) and not shared_join(u, rule) and u.opcode not in SLICES:
                fused.append(u)
            else:
                out.append(u)
        frontier = fused
    return out


def prefetched(param, rule: FusionRule) -> bool:
    """Whether the TPU compiler's memory-space assignment prefetches the entry parameter ``param`` into
    on-chip memory (``copy-start`` / ``copy-done`` to ``S(1)`` in its optimised program), under a rule
    with :attr:`FusionRule.prefetch_parameters`: an array parameter of the entry computation that some
    kernel reads, when (a) some reader also reads an intermediate (it waits for an earlier kernel, behind
    which the copy runs: round 22's rule), or (b) no reader is the program's first kernel
    (:func:`_runs_first`): every reader reads parameters only, but some kernel runs before each of them.
    A parameter read only by kernels that read parameters only, one of them the first, is read from HBM
    (round 22: the f32 AdamW update of four 64 MiB arrays, one multi-output kernel, prefetches none of
    them).  Whether the copy fits (:data:`PREFETCH_MAX_BYTES`) and is hidden in time
    (:data:`MIN_OVERLAP_TO_ASYNC_COPY_RATIO`) is :func:`vmem_resident`'s, which depends on the plan.
    Read off the optimised programs of the samples' GSPMD plans (``v5e:2x4``): the rule agrees with 76
    of their 80 parameters (round 22's: 75); of the four it misses, two are ``attention_6heads``' wq and
    wv (the TPU runs the q projection first, the module's order the v projection: the rule prefetches wq
    where the TPU prefetches wv, of the same size), one is ``conv_layer``'s weight, which only the first
    kernel reads (the TPU's one cross-program prefetch; which parameter it picks is not modelled), and one
    ``embedding_lookup``'s ``s32[8,128]`` index array.  Cached per computation."""
    if param.opcode != "parameter" or not rule.prefetch_parameters or not param.shape.is_array:
        return False
    comp = param.parent
    if comp is None or not getattr(comp, "is_entry", False):
        return False
    cache = _per_computation(comp, rule, "_hloshard_prefetched", lambda: {})
    hit = cache[1].get(id(param))
    if hit is None:
        readers = _kernels_reading(param, rule)
        hit = any(not _first_runnable(r, rule) for r in readers) or (
            bool(readers) and not any(_runs_first(r, rule) for r in readers))
        cache[1][id(param)] = hit
    return hit


#: the kernels whose result the TPU compiler writes to HBM on a megacore chip, for memory-space assignment
#: to copy into VMEM before a later reader (:func:`shared_intermediates`): a matmul (a ``dot`` /
#: ``convolution`` with its output fusion, the optimised program's ``kind=kOutput`` fusions) and a kernel
#: that only moves data between layouts or types (``copy``, ``transpose``, ``convert``).  A loop kernel
#: (elementwise, broadcast, reduce: ``kind=kLoop``) writes its result into VMEM (``S(1)``) directly and
#: no copy is made.  Read off libtpu 0.0.42.1's optimised programs of the eight samples' GSPMD and solve
#: plans on ``v5p:2x2x2`` (round 31; MaxText not included), the results of 4 KiB or more that a kernel other than the next reads (the
#: program's outputs and collectives' results left out): ``kOutput`` fusions 154 of 172 copied (43.5 of
#: 48.8 MB), ``copy`` 51 of 54, ``convert`` 8 of 15, ``kLoop`` fusions 0 of 91 (21.5 MB, all in ``S(1)``).
MSA_COPIED_KERNELS = MATMUL_OPCODES | frozenset({"copy", "transpose", "convert"})


def shared_intermediates(instrs: Iterable, rule: FusionRule) -> list:
    """``(kernel, buffer)`` for every kernel among ``instrs`` (a materialised instruction under ``rule``,
    :func:`hbm_terms` ``'kernel'``; collectives excluded) of an opcode in :data:`MSA_COPIED_KERNELS`
    whose result buffer (its epilogue's, when a dot writes its consumer's: the ``head`` of its terms)
    two or more kernels read (:func:`_kernels_reading`, through the fused ones; the entry's output tuple
    counts as one reader), in ``instrs``' order.

    What memory-space assignment copies back into on-chip memory on a megacore TPU
    (:attr:`hloshard.devices.DeviceProfile.megacore`, v5p): the compiler splits each kernel over the
    chip's two TensorCores, writes a matmul's or a layout copy's result that several kernels read to HBM
    and, before a later reader runs, copies it into VMEM (``copy-start`` / ``copy-done`` to ``S(1)``, the
    ``Pre_memory_space_assignment`` pipeline's memory-space-assignment pass); ``HloCostAnalysis`` counts
    each copy :data:`PREFETCH_COPY_FACTOR` x its padded size, as a parameter's prefetch.  A loop kernel's
    result is written to VMEM directly and not copied (:data:`MSA_COPIED_KERNELS`, round 31; round 30's
    rule copied every shared result and over-predicted the copies of solve's plans 1.3-1.7x).  On
    ``v5e:2x4`` / ``v6e:2x4`` (one TensorCore) no intermediate is copied.  Not modelled: a result one
    kernel reads that is copied all the same (a reader that does not run next: 107 of 152 such results,
    12.0 MB, in the samples' programs, where counting them all over-predicts moe_layer's copies 17x).
    Raises nothing."""
    out = []
    for instr in instrs:
        if instr.opcode in COLLECTIVE_OPCODES or instr.opcode not in MSA_COPIED_KERNELS:
            continue
        terms = hbm_terms(instr, rule)
        if terms[0] != "kernel":
            continue
        head = terms[1]
        if head.opcode in COLLECTIVE_OPCODES or not head.shape.is_array:
            continue
        if len({id(r) for r in _kernels_reading(head, rule)}) >= 2:   # one kernel reached by two paths: one reader
            out.append((instr, head))
    return out


def hbm_bytes(instr, size_of: Callable, rule: FusionRule = CPU_FUSION, tile_of: Callable | None = None) -> float:
    """Bytes one device moves through HBM for one execution of ``instr`` (module docstring):
    0 when fused (a shared join, :func:`hloshard.cost.tpu_fusion.shared_join`, is written once), when computed in a dot's output
    fusion (``rule.absorbed_by``) or of a :data:`NO_TRAFFIC` opcode; else ``size_of(instr)`` (its
    result; a dot's epilogue's result under an output-fusing ``rule``) plus
    ``size_of(o)`` of each buffer of :func:`kernel_reads` that moves data (a constant operand is read:
    it lives in the executable, not in a buffer, but a fusion reads it).  As XLA's ``HloCostAnalysis``
    counts them: a materialised ``slice`` / ``dynamic-slice`` reads what it writes (2 x its result), a
    ``dynamic-update-slice`` (in place: the memory model's rule) writes its update and reads what the
    update reads, not its operand 0; a sharding pin (``Sharding`` custom-call) moves nothing under a rule
    with :attr:`~hloshard.cost.tpu_fusion.FusionRule.pins_free` (its resharding is the plan's collective,
    priced apart); a reduce does not read again what an earlier sibling reduce read
    (:func:`read_by_earlier_sibling`, TPU rule), nor a buffer its multi-output kernel computes or
    another member reads (:func:`multi_output_skips`, TPU rule); a convolution whose per-device batch is below a tile's
    rows moves a full tile's (:func:`hloshard.cost.tpu_fusion.conv_batch_factor`, TPU rule, when
    ``tile_of`` is given).  ``size_of``: instruction -> bytes per device under the plan;
    ``rule``: the backend's fusion rule (:func:`hloshard.cost.tpu_fusion.fusion_rule`; the CPU's by
    default); ``tile_of``: instruction -> the per-device dims of its result under the plan (None: not
    known, no batch-tile factor)."""
    return hbm_total(instr, hbm_terms(instr, rule), size_of, rule, tile_of)


def hbm_terms(instr, rule: FusionRule = CPU_FUSION) -> tuple:
    """What :func:`hbm_bytes` of ``instr`` adds up under ``rule``, with the sizes left out (they depend on
    the plan, the rest only on the module): ``("zero",)``, ``("prefetch", prefetched)`` (an entry
    parameter under a prefetching rule), ``("slice",)`` or ``("kernel", head, reads, conv, relayout)`` (the
    buffer whose size is the result's, the buffers of :func:`kernel_reads` it reads, in order, whether the
    convolution batch-tile factor applies, and whether the result is copied into the entry's layout,
    :func:`hloshard.cost.tpu_fusion.conv_output_relayout`: 2 x its size more).  Computed once per instruction by a caller that prices many
    plans of it (:func:`hloshard.strategy.base.price_roofline`); :func:`hbm_total` evaluates it."""
    if instr.opcode == "parameter" and rule.prefetch_parameters:
        return ("prefetch", prefetched(instr, rule))
    if instr.opcode in NO_TRAFFIC or (rule.pins_free and instr.is_sharding_constraint):
        return ("zero",)
    if rule.is_fused(instr) and instr.opcode != "constant" and not shared_join(instr, rule):
        return ("zero",)
    if rule.absorbed_by(instr) is not None or online_softmax_dot(instr, rule) is not None:
        return ("zero",)      # computed in a dot's kernel: its output fusion, its online softmax
    if instr.opcode in SLICES:
        return ("slice",)
    in_place = instr.opcode == "dynamic-update-slice" and len(instr.operands) > 1
    tail = rule.epilogue(instr)
    head = instr.operands[1] if in_place else (instr if tail is None else tail)
    shared = read_by_earlier_sibling(instr, rule) | multi_output_skips(instr, rule)
    reads = []
    for o, k in kernel_reads(instr, rule):
        if (in_place and k == 0) or id(o) in shared:
            continue
        if o.opcode in ("tuple", "after-all") or (o.opcode == "constant" and not o.shape.is_array):
            continue
        reads.append(o)
    return ("kernel", head, tuple(reads), bool(rule.conv_batch_tile and instr.opcode == "convolution"),
            conv_output_relayout(instr, head, rule, reads))


def hbm_total(instr, terms: tuple, size_of: Callable, rule: FusionRule = CPU_FUSION,
              tile_of: Callable | None = None) -> float:
    """:func:`hbm_bytes` of ``instr`` from its :func:`hbm_terms` ``terms`` (under the same ``rule``) and
    the plan's ``size_of`` / ``tile_of`` (as :func:`hbm_bytes` takes them): bytes per device, one
    execution."""
    kind = terms[0]
    if kind == "zero":
        return 0.0
    if kind == "prefetch":
        size = float(size_of(instr))
        return PREFETCH_COPY_FACTOR * size if size <= PREFETCH_MAX_BYTES and terms[1] else 0.0
    if kind == "slice":
        return 2.0 * float(size_of(instr))
    _, head, reads, conv, relayout = terms
    total = float(size_of(head))
    for o in reads:
        total += float(size_of(o))
    if tile_of is not None and conv:
        total *= conv_batch_factor(instr, tile_of(instr), rule)
    if relayout:
        total += 2.0 * float(size_of(head))    # the copy into the entry's layout reads and writes it
    return total


def instruction_seconds(instr, flops: float, hbm: float, peak: float, hbm_bandwidth: float,
                        vmem: float = 0.0, vmem_bandwidth: float | None = None) -> tuple[float, str]:
    """``(seconds, bound)`` of ``instr`` doing ``flops`` and moving ``hbm`` bytes through HBM on one device:
    ``max(flops / peak, hbm / hbm_bandwidth)`` (module docstring), ``bound`` ``'compute'`` /
    ``'memory'``; a collective is ``(0, 'communication')`` (its time is priced as communication),
    nothing to do is ``(0, 'none')``. ``peak``: FLOP/s, ``hbm_bandwidth``: bytes/s (positive).  The one
    formula of the roofline, in the report (:func:`roofline`) and in the solver's objective
    (:class:`RooflinePrices`).

    A ``parameter``'s bytes (the prefetch copies of :func:`prefetched`, the only bytes a parameter
    has) take no seconds: the copy is an asynchronous DMA that reads the buffer from HBM once in place
    of the kernel that then reads it from VMEM, and that kernel's read is counted in its own row.
    ``HloCostAnalysis`` counts the copy 4 times (:data:`PREFETCH_COPY_FACTOR`) and the TPU compiler's
    ``optimal_seconds`` with it; the chip does not.  Measured on one v5e chip (BENCHMARKS.md round 20,
    tpufuse): ``x * sum(x, axis=1, keepdims=True) + y`` over f32[n, 1024] takes 6.27 / 6.26 us per MiB
    of ``y`` at 96 / 112 MiB (``y`` prefetched) and 6.25 / 6.25 us at 116 / 120 MiB (not), while
    ``optimal_seconds`` is 11.37 us per MiB prefetched and 5.69 not.

    ``vmem``: bytes of ``hbm`` that do not cross HBM (:func:`vmem_resident`, the report's roofline gives
    them): ``hbm - vmem`` is what takes HBM seconds; for a ``parameter`` given ``vmem`` that is its
    prefetch copy's one HBM read (the kernels then read it from on-chip memory, each read in its own
    row's ``vmem``).  Without it (the solver's objective) a parameter takes no seconds, as above.

    ``vmem_bandwidth`` (bytes/s; a profile's measured
    :attr:`hloshard.devices.DeviceProfile.vmem_bandwidth`, None: on-chip bytes take no time): a kernel's
    ``vmem`` bytes take ``vmem / vmem_bandwidth`` seconds, a third side of the roofline,
    ``max(flops / peak, (hbm - vmem) / hbm_bandwidth, vmem / vmem_bandwidth)``; a parameter's row (its
    prefetch copy, an asynchronous DMA) takes none."""
    if instr.opcode in COLLECTIVE_OPCODES:
        return 0.0, "communication"
    tc = flops / peak if flops else 0.0
    tm = 0.0 if instr.opcode == "parameter" and not vmem else max(hbm - vmem, 0.0) / hbm_bandwidth
    if vmem_bandwidth and vmem and instr.opcode != "parameter":
        tm = max(tm, min(vmem, hbm) / vmem_bandwidth)
    sec = max(tc, tm)
    return sec, ("none" if sec == 0 else ("compute" if tc >= tm else "memory"))


def instruction_peak(instr, profile) -> float:
    """FLOP/s ``instr`` runs at on ``profile`` (:class:`hloshard.devices.DeviceProfile`): a dot,
    convolution or fused-attention call at the matmul peak of its first operand's element type
    (:func:`hloshard.devices.matmul_peak`), anything else at the vector peak (the profile's ``fp32``
    entry; its largest peak when it lists none)."""
    matmul = instr.opcode in MATMUL_OPCODES or instr.custom_call_target in FUSED_ATTENTION_TARGETS
    if not matmul:
        return profile.peak_flops.get("fp32") or max(profile.peak_flops.values())
    ops = instr.operands
    t = ops[0].shape.element_type if ops and ops[0].shape.is_array else "bf16"
    return matmul_peak(profile, t)[1]


@dataclass(frozen=True)
class RooflinePrices:
    """A device's roofline in the cost model's units, for the solver's objective.

    ``profile``: the :class:`hloshard.devices.DeviceProfile`; ``seconds_per_unit``: the length of one
    cost unit on it (:attr:`hloshard.devices.TimeScale.seconds_per_unit`).  A mesh carries one as
    ``roofline_prices`` when ``--device`` is given; the strategy space then prices each strategy's
    compute as :meth:`units` of its flops and HBM bytes (``strategy.base.price_roofline``), so that
    the objective's compute is the report's roofline seconds over ``seconds_per_unit``."""

    profile: object
    seconds_per_unit: float

    def units(self, instr, flops: float, hbm: float) -> float:
        """Cost units of ``instr`` doing ``flops`` and moving ``hbm`` HBM bytes on one device:
        :func:`instruction_seconds` at :func:`instruction_peak` and the profile's sustained HBM
        bandwidth (``DeviceProfile.sustained_hbm_bandwidth``) over ``seconds_per_unit``."""
        sec, _ = instruction_seconds(instr, flops, hbm, instruction_peak(instr, self.profile),
                                     self.profile.sustained_hbm_bandwidth)
        return sec / self.seconds_per_unit

    @property
    def fusion(self) -> FusionRule:
        """The device's fusion rule for HBM bytes (:func:`hloshard.cost.tpu_fusion.fusion_rule`: the
        TPU compiler's on a TPU, else the CPU backend's)."""
        return fusion_rule(self.profile)


def _first_runnable(instr, rule: FusionRule) -> bool:
    """Whether ``instr`` is a kernel that reads nothing but parameters and constants from memory (the
    buffers of its :func:`hbm_terms`, after multi-output fusion): a kernel that can run first, before
    any prefetch has completed.  Control flow, tuples and anything that is no kernel: False."""
    t = hbm_terms(instr, rule)
    return t[0] == "kernel" and all(b.opcode in ("parameter", "constant") for b in t[2])


def _runs_first(instr, rule: FusionRule) -> bool:
    """Whether ``instr`` is the program's first kernel: a :func:`_first_runnable` kernel that is the first
    kernel (:func:`hbm_terms` ``"kernel"``) in its computation's order, or an elementwise kernel that
    multi-output fusion computes in the same kernel (one of its iteration space, :func:`_loop_shape`,
    on the same level of :func:`_kernel_levels`: the siblings of :func:`multi_output_skips`).  No kernel
    runs before it, so no prefetch copy can be hidden behind one: it reads its parameters from HBM.  A
    later kernel that reads parameters only runs after the first and reads the parameters memory-space
    assignment has prefetched meanwhile.  Read off the TPU compiler's optimised programs (libtpu
    0.0.42.1, ``v5e:2x4``, the samples' GSPMD plans; BENCHMARKS.md round 24, helper seconds):
    ``attention_6heads`` reads one q/k/v weight in its first kernel from HBM and prefetches the other
    two, each read by a kernel that reads parameters only; ``moe_layer`` reads its first expert weight
    from HBM (the first kernel) and prefetches the router's weight (the router's dot, later in the
    order, reads parameters only); round 22's AdamW update (four arrays, one multi-output loop kernel)
    prefetches none.  Cached per computation."""
    if not _first_runnable(instr, rule) or instr.parent is None:
        return False
    comp = instr.parent
    cache = _per_computation(comp, rule, "_hloshard_first_kernel", lambda: _first_kernels(comp, rule))
    return id(instr) in cache[1]


def _first_kernels(comp, rule: FusionRule) -> frozenset:
    """Ids of the instructions of ``comp`` that :func:`_runs_first` names (before the first-runnable test)."""
    first = next((i for i in comp.instructions if i.opcode != "parameter" and hbm_terms(i, rule)[0] == "kernel"),
                 None)
    if first is None:
        return frozenset()
    if not rule.multi_output_loops or _loop_shape(first) is None:
        return frozenset({id(first)})
    multi_output_skips(first, rule)   # fills the computation's table
    group = comp._hloshard_multi_output[1][1]
    root = group.get(id(first), id(first))
    return frozenset({id(first)} | {k for k, r in group.items() if r == root})


#: the least time the kernels before a prefetched buffer's reader must take, in units of the prefetch copy's
#: own time, for memory-space assignment to start the copy early enough: the TPU compiler's
#: ``--xla_msa_min_overlap_to_async_copy_ratio`` (1 in the flags libtpu 0.0.42.1 writes with its dumps,
#: ``--xla_dump_to``: ``*.flagfile``; its preferred ratio, ``--xla_msa_preferred_overlap_to_async_copy_ratio``,
#: is 2).  A copy that no earlier kernels can hide is not made: the reader reads HBM.
MIN_OVERLAP_TO_ASYNC_COPY_RATIO = 1.0


def vmem_resident(instrs: list, size_of: Callable, rule: FusionRule, terms: dict | None = None,
                  seconds_of: Callable | None = None, hbm_bandwidth: float | None = None) -> frozenset:
    """Ids of the entry parameters among ``instrs`` that the TPU holds in on-chip memory (VMEM) once their
    prefetch completes, under a rule with :attr:`FusionRule.prefetch_parameters` (else empty): the
    :func:`prefetched` ones, in the order of their first reader in ``instrs``, while their per-device sizes
    (``size_of``) add up to at most :data:`PREFETCH_MAX_BYTES` (one VMEM holds them all at once).

    A kernel that reads such a parameter after the copy reads VMEM, not HBM; the copy reads it from HBM
    once; a kernel that reads only parameters and constants (:func:`_first_runnable`) may run before the
    copy completes and reads HBM.  Measured on one v5e chip (BENCHMARKS.md round 22, helper seconds,
    profiler trace per kernel): the f32 [4096, 4096] layer-norm backward prefetches ``x`` (64 MiB; ``dy``,
    64 MiB more, is not: the sum would pass the VMEM the kernels leave); the first reduce reads ``x``
    from HBM in 89.4 us, the prefetch copy 88.4 us, two reductions reading ``x`` from VMEM 12.1 and 12.5
    us (about 5.5 TB/s), and the 8192 x 4096 backward (``x`` 128 MiB: not prefetched) takes 2.84x the
    time of the 4096^2 one for 2x the bytes.  ``terms``: ``{id(instr): hbm_terms(instr, rule)}`` when the
    caller has them.

    With ``seconds_of`` (instruction -> seconds of its kernel, all executions, no VMEM) and
    ``hbm_bandwidth`` (bytes/s), a parameter read only by kernels that read parameters only (each could
    start at once: nothing else they wait for hides the copy) is resident only when the kernels before
    its first reader that does not run first (:func:`_runs_first`: the first kernel reads HBM) take at
    least :data:`MIN_OVERLAP_TO_ASYNC_COPY_RATIO` x its copy's time (its size at ``hbm_bandwidth``):
    memory-space assignment hides a prefetch behind earlier kernels or does not make it (the 3x3
    convolution backwards of round 21 / 22: bf16 activations of 6-26 MB read by the filter-gradient
    convolution after a small first kernel are read from HBM in the TPU's programs).  A parameter that
    some kernel reads beside an intermediate keeps round 22's rule: the copy overlaps the kernels that
    compute the intermediate, or is the program's cross-program prefetch, which overlaps the previous
    step (``--xla_msa_max_cross_program_prefetches=1``; which parameter the TPU picks is not modelled)."""
    if not rule.prefetch_parameters:
        return frozenset()
    if seconds_of is not None:     # the time test concerns parameters read only by parameter-only kernels
        params = {id(b): b for i in instrs
                  for t in [terms[id(i)] if terms is not None else hbm_terms(i, rule)] if t[0] == "kernel"
                  for b in t[2] if b.opcode == "parameter"}
        if not any(hbm_terms(b, rule) == ("prefetch", True)
                   and all(_first_runnable(r, rule) for r in _kernels_reading(b, rule)) for b in params.values()):
            seconds_of = None
    order: dict = {}
    hidden: dict = {}      # id(parameter) -> seconds of the kernels before its first reader that runs later
    elapsed = 0.0
    for k, instr in enumerate(instrs):
        t = terms[id(instr)] if terms is not None else hbm_terms(instr, rule)
        if t[0] == "kernel":
            later = seconds_of is not None and not _runs_first(instr, rule)
            for b in t[2]:
                if b.opcode == "parameter":
                    order.setdefault(id(b), (k, b))
                    if later:
                        hidden.setdefault(id(b), elapsed)
            if seconds_of is not None:
                elapsed += float(seconds_of(instr))
    out = set()
    used = 0.0
    for _, b in sorted(order.values(), key=lambda x: x[0]):
        if hbm_terms(b, rule) != ("prefetch", True):
            continue
        size = float(size_of(b))
        if seconds_of is not None and hbm_bandwidth and \
                all(_first_runnable(r, rule) for r in _kernels_reading(b, rule)) and \
                hidden.get(id(b), 0.0) < MIN_OVERLAP_TO_ASYNC_COPY_RATIO * size / hbm_bandwidth:
            continue
        if used + size <= PREFETCH_MAX_BYTES:
            used += size
            out.add(id(b))
    return frozenset(out)


def _program_output(buf) -> bool:
    """Whether ``buf`` is a result of its computation: its root, or read by the root (a tuple of results),
    directly or through instructions that forward its buffer (:func:`hloshard.cost.liveness.effective_users`)."""
    comp = buf.parent
    root = getattr(comp, "root", None) if comp is not None else None
    if root is None:
        return False
    if buf is root:
        return True
    return any(u is root or u.is_root for u in effective_users(buf))


def vmem_intermediates(instrs: list, size_of: Callable, rule: FusionRule, terms: dict, limit: float) -> frozenset:
    """Ids of the kernel results among ``instrs`` that a single-TensorCore TPU keeps in on-chip memory
    (VMEM, ``S(1)``): the result buffer (:func:`hbm_terms`' head) of every kernel (``'kernel'`` terms, not a
    collective, not an in-place ``dynamic-update-slice``) that is not a result of its computation
    (:func:`_program_output`: a program output or a loop's state stays in HBM) and whose per-device size
    (``size_of``, bytes) is at most ``limit`` (bytes: what fits in VMEM beside the kernel's own scoped
    memory, :data:`PREFETCH_MAX_BYTES`).  ``terms``: ``{id(instr): hbm_terms(instr, rule)}``.

    The rule is the TPU compiler's memory-space assignment as its optimised programs show it on one v5e chip
    (libtpu 0.0.42.1, BENCHMARKS.md "VMEM-resident intermediates", round 32): the kernels of a step write their
    results into ``S(1)`` -- ``kLoop`` and ``kOutput`` fusions alike: of the entry kernels' results of 256 KiB to
    64 MiB that are not program outputs, 511 of 545 in the nine programs the rule was read off, 555 of 576 in
    eight held-out ones; every program output in HBM (298 of 298), every result over 64 MiB too (8 of 8, a
    transformer's 128 MiB attention scores) -- and the next kernels read them from VMEM; a result a much
    later kernel reads (an activation kept for the backward pass) is evicted to HBM and prefetched back by
    asynchronous copies (``copy-start`` / ``copy-done``) beside the kernels.  The chip's
    profile per kernel shows the effect: the kernels of the narrow (d=256) transformer touch 39 MB of HBM and 1.3
    GB of VMEM; hloshard's roofline, counting all of it at HBM bandwidth, put that program at 2.99x the chip's
    time.  Not modelled: the asynchronous evictions' and prefetches' HBM traffic (the waits on them and on the
    asynchronous slices are 0-28% of the 17 timed steps' device time, most in the narrowest, d=128), and which
    results memory-space assignment leaves in HBM when VMEM is full (the 128 MiB results of a d=1024 transformer's attention: above ``limit``)."""
    out = set()
    for instr in instrs:
        t = terms[id(instr)]
        if t[0] != "kernel" or instr.opcode in COLLECTIVE_OPCODES or instr.opcode == "dynamic-update-slice":
            continue
        head = t[1]
        if head.opcode in COLLECTIVE_OPCODES or not head.shape.is_array or _program_output(head):
            continue
        if float(size_of(head)) <= limit:
            out.add(id(head))
    return frozenset(out)


def roofline(instrs: Iterable, *, flops_of: Callable, size_of: Callable, executions_of: Callable,
             peak_of: Callable, hbm_bandwidth: float, fusion: FusionRule = CPU_FUSION,
             tile_of: Callable | None = None, vmem_bandwidth: float | None = None,
             kernel_overhead: float = 0.0) -> Roofline:
    """:class:`Roofline` of ``instrs`` (each counted once, in order).

    ``flops_of(instr)``: flops per device of one execution; ``size_of(instr)``: bytes per device of its
    result; ``executions_of(instr)``: executions per run (loop trips); ``peak_of(instr)``: FLOP/s it runs
    at; ``hbm_bandwidth``: bytes/s; ``fusion``: the backend's fusion rule for HBM bytes
    (:func:`hloshard.cost.tpu_fusion.fusion_rule`); ``tile_of(instr)``: the per-device dims of its result
    (:func:`hbm_bytes`; None: not known).  Entry parameters held in on-chip memory (:func:`vmem_resident`)
    are read by later kernels without HBM seconds (:attr:`RooflineRow.vmem_bytes`); a prefetched parameter
    that does not fit beside them is not prefetched (its copy's bytes 0).

    ``vmem_bandwidth`` (bytes/s; a device profile's measured
    :attr:`hloshard.devices.DeviceProfile.vmem_bandwidth`, None: off): the kernels' results that stay in
    on-chip memory (:func:`vmem_intermediates`) are written and read there -- their bytes are the rows'
    ``vmem_bytes`` -- and every kernel's on-chip bytes take ``vmem / vmem_bandwidth`` seconds
    (:func:`instruction_seconds`); ``kernel_overhead`` (seconds): what each execution of a kernel costs
    beyond its roofline (:attr:`hloshard.devices.DeviceProfile.kernel_overhead_s`), added to its row.
    Both off (the defaults), the roofline is the one the solver's objective prices.  Raises
    ZeroDivisionError for a non-positive peak or bandwidth."""
    out = Roofline()
    out.vmem_bandwidth, out.kernel_overhead = vmem_bandwidth, float(kernel_overhead)
    instrs = list(instrs)
    all_terms = {id(i): hbm_terms(i, fusion) for i in instrs}
    def base_seconds(instr) -> float:
        """``instr``'s seconds as the objective prices it (no VMEM): what hides a prefetch."""
        n = float(executions_of(instr))
        f = float(flops_of(instr)) * n
        b = hbm_total(instr, all_terms[id(instr)], size_of, fusion, tile_of) * n
        return instruction_seconds(instr, f, b, peak_of(instr) if f else 1.0, hbm_bandwidth)[0]

    resident = vmem_resident(instrs, size_of, fusion, all_terms, base_seconds, hbm_bandwidth)
    on_chip = vmem_intermediates(instrs, size_of, fusion, all_terms, PREFETCH_MAX_BYTES) \
        if vmem_bandwidth and fusion.prefetch_parameters else frozenset()
    for instr in instrs:
        n = float(executions_of(instr))
        f = float(flops_of(instr)) * n
        terms = all_terms[id(instr)]
        b = hbm_total(instr, terms, size_of, fusion, tile_of) * n
        vm = 0.0
        if terms[0] == "prefetch" and terms[1]:
            if id(instr) in resident:
                vm = b - float(size_of(instr)) * n     # the copy's bytes beyond its one HBM read
            else:
                b = 0.0                                 # does not fit beside the resident ones: not prefetched
        elif terms[0] == "kernel" and resident and not _runs_first(instr, fusion):
            vm = sum(float(size_of(o)) for o in terms[2] if id(o) in resident) * n
        if terms[0] == "kernel" and on_chip and instr.opcode not in COLLECTIVE_OPCODES:
            inside = sum(float(size_of(o)) for o in terms[2] if id(o) in on_chip and id(o) not in resident)
            if id(terms[1]) in on_chip:
                inside += float(size_of(terms[1]))
            vm = min(vm + inside * n, b)
        sec, bound = instruction_seconds(instr, f, b, peak_of(instr) if f else 1.0, hbm_bandwidth, vm,
                                         vmem_bandwidth)
        if kernel_overhead and terms[0] == "kernel" and instr.opcode not in COLLECTIVE_OPCODES:
            sec += kernel_overhead * n
            bound = bound if bound != "none" else "memory"
        out.flops += f
        out.hbm_bytes += b
        out.vmem_bytes += vm
        out.seconds += sec
        if bound == "compute":
            out.compute_bound_s += sec
        elif bound == "memory":
            out.memory_bound_s += sec
        out.rows.append(RooflineRow(instr.name, instr.opcode, n, f, b, sec, bound, vm))
    return out


def take_bytes(roof: Roofline, instr, saved: float, peak: float, hbm_bandwidth: float) -> float:
    """Take ``saved`` bytes (all executions) off the row of ``instr`` in ``roof`` -- bytes a fusion the
    plan allows keeps on chip (:func:`hloshard.cost.tpu_fusion.dot_dot_reader`) -- and re-price that row
    by :func:`instruction_seconds` (its flops at ``peak`` FLOP/s, its bytes at ``hbm_bandwidth`` bytes/s,
    its VMEM bytes as before), the totals with it.  A row is never taken below its VMEM bytes, except
    under a roofline that prices on-chip bytes (``roof.vmem_bandwidth``: its kernels' results in VMEM,
    :func:`vmem_intermediates`), where the bytes are taken off the on-chip ones first (the hidden value
    is such a result) and the rest off the HBM ones.
    Returns the bytes taken (0 when ``instr`` has no row)."""
    for k, r in enumerate(roof.rows):
        if r.name != instr.name or r.opcode != instr.opcode:
            continue
        vm = r.vmem_bytes
        take = 0.0
        if roof.vmem_bandwidth:   # the hidden value is a kernel's result kept on chip: its on-chip bytes first
            take = min(float(saved), vm)
            vm -= take
            roof.vmem_bytes -= take
        take += min(float(saved) - take, max(r.hbm_bytes - r.vmem_bytes, 0.0))
        sec, bound = instruction_seconds(instr, r.flops, r.hbm_bytes - take, peak if r.flops else 1.0,
                                         hbm_bandwidth, vm, roof.vmem_bandwidth)
        if roof.kernel_overhead and r.executions:   # the kernel still runs
            sec += roof.kernel_overhead * r.executions
            bound = bound if bound != "none" else "memory"
        for b, s in ((r.bound, -r.seconds), (bound, sec)):
            if b == "compute":
                roof.compute_bound_s += s
            elif b == "memory":
                roof.memory_bound_s += s
        roof.seconds += sec - r.seconds
        roof.hbm_bytes -= take
        roof.rows[k] = RooflineRow(r.name, r.opcode, r.executions, r.flops, r.hbm_bytes - take, sec, bound, vm)
        return take
    return 0.0
