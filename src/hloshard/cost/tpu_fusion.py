"""What the TPU compiler's fusion materialises in HBM: the fusion rule of the roofline's HBM bytes with
``--device tpu-*`` (``DeviceProfile.backend == 'tpu'``).

The memory model's rule (:func:`hloshard.cost.liveness.is_fused`) is XLA's CPU backend: loop fusion of
elementwise producers into elementwise / reduce consumers (``CpuInstructionFusion``, an
``InstructionFusion``), with ``ComputeGloballyUnfusible`` keeping a buffer for every producer that
would be re-read by several consumers.  The TPU compiler fuses more; read off its optimised programs
(libtpu 0.0.42.1 ahead of time, ``compiled.as_text()`` of the samples on ``v5e:2x4``: ``kind=kOutput``
fusions holding a dot or convolution, ``kind=kLoop`` fusions with tuple results):

* **producer fusion into dot / convolution operands**: a layer norm's elementwise tail (subtract the
  mean, multiply by the rsqrt, scale, shift, convert) is computed inside the dot's fusion while it
  reads the activation; the normalised activation never reaches HBM.  Here: a fusible producer
  (:data:`hloshard.cost.liveness.FUSIBLE_PRODUCERS`) whose consumers are elementwise / reduce
  consumers *or dots and convolutions* is fused (:func:`is_fused`).  XLA's open-source analogue is
  ``InstructionFusion`` with the GPU backend's ``IsProducerConsumerFusible`` of a dot's operand;
  as in ``InstructionFusion`` an expensive producer (``HloInstruction::IsExpensive``:
  :data:`hloshard.cost.liveness.EXPENSIVE`) is not duplicated into several consumers, but for the
  floating-point ops that are cheap on the accelerator (:func:`expensive_on_tpu`: a softmax's ``exp``
  and ``divide`` are computed inside each dot fusion that reads them, nested ``kLoop`` fusions in the
  ``kOutput`` ones of ``attn_h12m8_d32_s128_train``'s optimised programs; a GELU's ``tanh``, the same in
  ``transformer_train_step``'s).  The TPU
  compiler's fusion is not ``ComputeGloballyUnfusible``-bounded the way the CPU backend's is (its
  multi-output fusions compute a shared producer once beside its consumers, ``MultiOutputFusion``),
  so that rule is not applied.  A producer read by several consumers is inlined into each while its
  kernel reads one large buffer (``x - broadcast(mean)``: the mean, rsqrt, scale and shift of a layer
  norm are vectors); one whose inlined kernel reads two or more (a backward layer norm's
  ``convert(add(a, b))`` read by six dots) is written once and read by each
  (:func:`hloshard.cost.roofline.kernel_reads`, ``transitive_join``), as the TPU's multi-output loop
  fusions (``add_add_fusion``) write it.
* **output fusion**: a dot or convolution whose one consumer is elementwise (a bias or residual add,
  a convert to bf16, an activation) writes that consumer's result, not its own (``kind=kOutput``
  fusions rooted at the elementwise op; XLA's ``HloInstruction::FusionKind::kOutput``, the
  ``OutputFusion`` pass of its TPU pipeline).  Here: :func:`epilogue` names the consumer;
  the roofline charges the dot's kernel with the consumer's result and its other reads, and the
  consumer nothing (:func:`absorbed_by`).  Several elementwise consumers whose paths meet again at one
  sink (a GELU's backward after its gradient dot) are all computed in the dot's kernel, which writes the
  sink only (:func:`output_region`).
* **sibling multi-output fusion of reductions**: reductions of the same operand shape over the same
  dimensions that read a common buffer, neither depending on the other, run as one kernel with a tuple
  result (``multiply_reduce_fusion`` with several outputs; XLA's ``MultiOutputFusion`` of siblings): the
  buffer is read once, by the first of them in the computation's order (:func:`sibling_key`,
  :func:`hloshard.cost.roofline.read_by_earlier_sibling`); a softmax's sum, which reads its max, reads
  the row again.

* **multi-output fusion of elementwise kernels** (:attr:`FusionRule.multi_output_loops`,
  :func:`hloshard.cost.roofline.multi_output_skips`): an elementwise kernel of a reduce's or another
  elementwise kernel's iteration space is computed in that consumer's kernel and written from there
  (not read back), and elementwise siblings of one iteration space read a common buffer once, where
  no other kernel lies between them (XLA's ``MultiOutputFusion``; an optimizer's update of the moments
  and weights, MaxText's ``multiply_reduce_fusion``).

* **a convolution's batch in the sublanes** (:attr:`FusionRule.conv_batch_tile`,
  :func:`conv_batch_factor`): the TPU's convolution kernels lay an activation out with its batch as the
  second-minor (sublane) dimension of the (8, 128) tiles and its features in the lanes (the layout
  ``{3,0,2,1}`` of a ``b01f`` activation in the optimised programs); a per-device batch below
  :data:`CONV_BATCH_TILE` moves as many bytes as a batch of 8: the kernel's bytes (input, result,
  epilogue, and its kernel operand too) are scaled by ``8 / b``.  Scaling the kernel operand is an
  over-count where the weights dominate (8x8x256x256 chains: 11.9 MB per convolution at a batch of 1, 2
  and 4, 11.1 MB at 8; the rule says 4x at 2), kept because the TPU's train steps cost more at a batch
  of 2..7 than at 8, not as much (a 4-convolution train step, 16x16x32: 37.3 / 70.1 / 30.1 MB at a
  batch of 2 / 4 / 8: layout changes around the convolutions that the padding alone does not give), and
  two narrower rules (the activations only, in the convolution's kernel; the activations in every
  kernel) left the plans of the new user's U-Net and of a held-out convolution net at their slower
  small-batch splits (BENCHMARKS.md round 17).  Measured with chains of 3x3 ``SAME``
  convolutions (f32, ReLU between, one chip of ``v5e``; the marginal ``bytes accessed`` of a convolution,
  from chains of 2 and 6): 32x32x16 activations 1.42 / 2.47 / 7.35 / 2.47 / 4.57 MB at a batch of
  1 / 2 / 4 / 8 / 16 (the same bytes at 2 as at 8; 16 adds one 8-row tile); 16x16x64 1.87 / 2.27 / 3.05
  / 2.00 / 2.53 MB.  A filter-gradient convolution (its window spans the input, ``f01b_i01o->01bf``) has
  no such floor: 1.65 / 7.41 / 14.75 MB at a batch of 2 / 8 / 16.

The TPU's fusion of one dot into the next (its ``xla_tpu_dot_dot_fusion``): :func:`dot_dot_reader`
below.  (Reduce epilogues of dots -- ``reduce-max`` of attention scores in the score
dot's multi-output fusion -- are: :func:`hloshard.cost.roofline.multi_output_skips`.)  Padding to (8,128) tiles is the rule's :attr:`FusionRule.tiled_layout`: every
buffer the roofline counts is sized as :func:`hloshard.cost.tpu_layout.padded_bytes_per_device` lays it
out; the prefetch copies of entry parameters into on-chip memory (``copy-start`` / ``copy-done`` to
``S(1)``, memory-space assignment) are :attr:`FusionRule.prefetch_parameters`
(:func:`hloshard.cost.roofline.prefetched`).

* **windowed einsum of a reduce-scattered dot** (:attr:`FusionRule.windowed_reduce_scatter`,
  :func:`windowed_einsum_bytes`): a dot whose partial sums are scattered over the mesh axes its
  contraction is split on (the dot strategies ``|allreduce+slice``: GSPMD's all-reduce + slice, which
  the TPU pipeline turns into a reduce-scatter) is lowered by the TPU compiler as a collective matmul,
  a ``while`` loop ``windowed_dot_general_body_rs`` (its default
  ``xla_tpu_enable_windowed_einsum_for_reduce_scatter``, bidirectional: two result chunks per step,
  n / 2 steps over n devices).  Each step computes the result chunk a neighbour accumulates from the
  whole of the operand that does not carry the scattered dimension and a slice of the other, so that
  operand is read n / 2 times instead of once; and the loop reads its operand in a layout with the
  contracting dimensions minor, made by a layout copy before the loop.  Read off the optimised programs
  of the 2-layer 256-chip solve plan (12 such loops) and of single-dot probes on ``v5e:2x4``.

* **no output fusion across a plan's all-reduce** (:attr:`FusionRule.reduced_epilogue_kernel`,
  :func:`reduced_epilogue_bytes`): the output fusion above joins a dot and its elementwise consumer
  in the module as written; when the plan splits the dot's contraction, the partitioner puts the
  all-reduce of its partial sums between the two, and the consumer (a residual add, a GELU's backward
  region) becomes a kernel of its own that reads the all-reduced sum.  The dot's kernel writes its
  partial result and the consumer's kernel reads the sum: two more buffers of the dot's per-device
  result than the fused kernel moves.  Read off the optimised programs on ``v5e:2x4`` of
  ``attention_6heads`` (GSPMD: ``fusion.9`` -> ``all-reduce`` -> ``add.3``), ``moe_layer`` (``fusion.20``
  -> ``all-reduce`` -> ``add.4``) and ``transformer_block`` (both residual adds: ``fusion.68`` ->
  ``all-reduce`` -> ``fusion.62``, ``fusion.7`` -> ``all-reduce.1`` -> ``add.29``); the plan's strategy
  says whether it all-reduces, so the caller adds these bytes per strategy (the objective,
  :func:`hloshard.strategy.base.split_epilogue_bytes`, and the report alike).

* **dot-dot fusion** (:attr:`FusionRule.dot_dot_fusion`, :func:`dot_dot_reader`): an MLP's first dot,
  whose result only the second dot reads -- through elementwise instructions of the same dimensions that
  are fused into that read (a ReLU, a GELU), nothing reshaped or transposed between -- is computed
  inside the second dot's kernel (``kind=kOutput`` fusions holding both: libtpu's
  ``xla_tpu_dot_dot_fusion``): the hidden activation never reaches HBM, so the first dot's kernel writes
  nothing and the second does not read it (the first dot's operands are read by the fused kernel, once
  each, as before).  Only where the plan puts no collective between the two: the first dot's partial
  sums not all-reduced and the second dot's operand not resharded (the caller checks the plan,
  :func:`hloshard.timing.plan_roofline`).  Read off the optimised programs on ``v5e:2x4``:
  ``moe_layer``'s expert einsums (``x . w1 -> max(., 0) -> w2``, GSPMD and solve plans: ``fusion.20``
  holds both), ``transformer_block``'s GELU MLP (GSPMD ``fusion.7``, solve ``fusion.28``); not fused,
  and not predicted: the q / k / v projections read by the attention dots through a head reshape, the
  attention's ``p . v`` dot read by the output projection through a transpose.  Held out (round 22's
  modules, looked at after the rule was written): ``ho_ln_mlp_fwd`` fused in both plans,
  ``ho_mlp_bf16_train``'s backward ``dy . w2^T -> select -> dot`` fused in the solve plan and not in
  GSPMD's, whose second dot all-gathers that operand.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..hlo.attributes import AttrError, parse_dim_labels
from . import liveness
from .liveness import EXPENSIVE, ELEMENTWISE, FUSIBLE_PRODUCERS, FUSING_CONSUMERS, effective_users
from ..hlo.shape import ELEMENT_BITS, element_byte_size
from .tpu_layout import LANES

__all__ = ["FusionRule", "CPU_FUSION", "TPU_FUSION", "fusion_rule", "is_fused", "epilogue", "absorbed_by",
           "shared_join", "sibling_key", "SLICES", "TPU_FUSING_CONSUMERS", "OUTPUT_FUSING",
           "windowed_reread_operand", "windowed_einsum_bytes", "WINDOWED_EINSUM_MIN_OPERAND_BYTES",
           "CHEAP_FLOAT_OPS", "CHEAP_ON_TPU", "expensive_on_tpu", "output_region", "REGION_MAX",
           "moved_element_type", "DEFAULT_PRECISION_TYPE", "conv_output_relayout", "CONV_BATCH_TILE", "conv_batch_factor",
           "one_hot_scatter", "online_softmax_dot", "ONLINE_SOFTMAX_LANES", "gathered_from",
           "row_gather", "gather_counted_bytes", "GATHER_TILE_ROWS",
           "reduced_epilogue_bytes", "dot_dot_reader"]

#: consumers the TPU compiler computes a fusible producer inside: the CPU's loop / reduce consumers and
#: dots and convolutions (producer fusion into their operands)
TPU_FUSING_CONSUMERS = FUSING_CONSUMERS | {"dot", "convolution"}

#: opcodes that read a part of their operand (counted at their result's size by the roofline)
SLICES = frozenset({"slice", "dynamic-slice"})

#: opcodes whose result an elementwise consumer's output fusion replaces (``kind=kOutput``)
OUTPUT_FUSING = frozenset({"dot", "convolution"})


def _same_parent(a, b) -> bool:
    return a.parent is b.parent


def _memo(tag: str, instr, fn):
    """``fn(instr)``, cached per computation under ``tag`` (recomputed when the computation's
    instruction count or root changes, as :func:`hloshard.cost.liveness` caches its own rule)."""
    comp = instr.parent
    if comp is None:
        return fn(instr)
    key = (len(comp.instructions), id(comp.root))
    store = getattr(comp, "_hloshard_tpu_fusion", None)
    if store is None or store[0] != key:
        store = (key, {})
        comp._hloshard_tpu_fusion = store
    k = (tag, id(instr))
    if k not in store[1]:
        store[1][k] = fn(instr)
    return store[1][k]


def inlined_call(comp):
    """The ``call`` instruction whose computation ``comp`` is, when it is ``comp``'s only caller: XLA's
    ``CallInliner`` (run before fusion by the TPU compiler, as by every XLA backend) replaces it by
    ``comp``'s body, so that the body's root is read where the call's result is (the GSPMD-propagated
    samples hold no ``call`` any more; a solve plan written from the ``pre.hlo`` keeps jax's
    ``jit(relu)`` calls). None for the entry, a loop body, a reducer or a computation called from
    several sites.  The callers are found once per module (cached on it while its computation and
    instruction counts stay the same)."""
    module = getattr(comp, "parent", None)
    if module is None or getattr(comp, "is_entry", False):
        return None
    stamp = (len(module.computations), sum(len(c.instructions) for c in module.computations))
    cache = getattr(module, "_hloshard_callers", None)
    if cache is None or cache[0] != stamp:
        callers: dict = {}
        for c in module.computations:
            for i in c.instructions:
                for callee in i.called_computations:
                    callers.setdefault(id(callee), []).append(i)
        cache = (stamp, callers)
        module._hloshard_callers = cache
    sites = cache[1].get(id(comp), ())
    return sites[0] if len(sites) == 1 and sites[0].opcode == "call" else None


def is_fused(instr) -> bool:
    """True when the TPU compiler gives ``instr``'s result no HBM buffer (module docstring): what the CPU
    rule fuses (:func:`hloshard.cost.liveness.is_fused`: constants, forwarding copies and reshapes,
    loop-fused producers), and a fusible producer that is not a root whose consumers (through
    forwarding users) are all in :data:`TPU_FUSING_CONSUMERS` in its own computation, an expensive one
    (:data:`hloshard.cost.liveness.EXPENSIVE`) only when it has one consumer.  The root of a computation
    a ``call`` inlines (:func:`inlined_call`) is judged at the call, by the call's consumers, and the
    call itself is fused (no buffer: its consumers read what the inlined body reads, the call's
    operands) when its root is."""
    if liveness.is_fused(instr) and not gathered_from(instr):
        return True
    if instr.opcode == "call":
        body = instr.called_computations
        return len(body) == 1 and body[0].root is not None and inlined_call(body[0]) is instr \
            and is_fused(body[0].root)
    site = inlined_call(instr.parent) if instr.is_root and instr.parent is not None else instr
    if site is None or site.is_root or not (instr.opcode in FUSIBLE_PRODUCERS or one_hot_scatter(instr)) \
            or not site.users or not instr.shape.is_array:
        return False
    consumers = effective_users(site)
    if not consumers or any((u.opcode not in TPU_FUSING_CONSUMERS and not one_hot_scatter(u))
                            or not _same_parent(u, site) for u in consumers):
        return False
    return not (expensive_on_tpu(instr) and len(consumers) > 1)


#: rows of a gathered table that the TPU compiler's ``HloCostAnalysis`` counts read for each index of a row
#: gather (:func:`gather_counted_bytes`): the sublane height of an (8, 128) tile, for every element type.
#: Probed ahead of time (libtpu 0.0.42.1, one v5e chip, ``jnp.take(table, ids, axis=0, mode='clip')``, the
#: bytes accessed per index from the slope over 512 -> 1,024 ids, BENCHMARKS.md round 36): 9 x the row's
#: lane-padded bytes for f32 rows of 128 / 256 / 384 and bf16 256 / 384 (round 21: f32 256 / 512, bf16
#: 256), s8 256 / 512, s32 256, f16 256, tables of 1,000-50,000 rows -- 8 rows even where bf16 / s8 tiles
#: hold 16 / 32 -- and, for rows narrower or wider than a multiple of 128 (f32 8 / 64 / 100 / 1,000,
#: bf16 64 / 1,000), 9 x the row padded up to 128 lanes, beside the layout copy of the result (a copy the
#: compiler adds to the output's least padded layout, not a cost of the gather).
GATHER_TILE_ROWS = 8


def row_gather(instr) -> bool:
    """Whether the ``gather`` ``instr`` takes whole rows of its operand: one collapsed dimension, the first,
    sliced 1 wide, every other dimension taken whole (``jnp.take(table, ids, axis=0)``)."""
    def ints(key):
        v = instr.attrs.get(key)
        return () if v is None else tuple(int(x) for x in (v if isinstance(v, (list, tuple)) else (v,)))
    if instr.opcode != "gather" or not instr.operands:
        return False
    op = instr.operands[0].shape
    sizes = ints("slice_sizes")
    return (op.is_array and ints("collapsed_slice_dims") == (0,) and len(sizes) == len(op.dims)
            and sizes[0] == 1 and tuple(sizes[1:]) == tuple(op.dims[1:]))


def gather_counted_bytes(instr, tile) -> float | None:
    """Bytes the TPU compiler's ``HloCostAnalysis`` counts for one execution of the row gather ``instr``
    (:func:`row_gather`) whose per-device result has dims ``tile``: each index reads the
    :data:`GATHER_TILE_ROWS` rows of the tile holding its row and writes the row, each row at its bytes
    with the minor dimension padded up to a multiple of 128 lanes --
    ``(GATHER_TILE_ROWS + 1) x prod(tile[:-1]) x ceil(tile[-1] / 128) x 128 x element bytes``.
    The table's size does not enter (measured: 1,000 to 50,000 rows).  None when ``instr`` is no row
    gather, its rows are not the result's minor dimension, or ``tile`` is None / empty.  The chip does
    not move these bytes (round 21: the gather kernel ran at 1 / 1.83 of the compiler's estimate), so
    they are the report's bytes accessed only: :func:`hloshard.timing.plan_roofline` adds them as a
    ``gather-tiles`` row with no seconds."""
    if not tile or not row_gather(instr) or not instr.shape.is_array:
        return None
    offset = instr.attrs.get("offset_dims")
    offset = () if offset is None else tuple(int(x) for x in (offset if isinstance(offset, (list, tuple)) else (offset,)))
    if offset != tuple(range(len(tile) - len(offset), len(tile))):
        return None
    rows = 1
    for d in tile[:-1]:
        rows *= int(d)
    lanes = -(-int(tile[-1]) // LANES) * LANES
    return float((GATHER_TILE_ROWS + 1) * rows * lanes * element_byte_size(instr.shape.element_type))


def gathered_from(instr) -> bool:
    """Whether ``instr`` is an elementwise producer that a ``gather`` reads (through forwarding users): the
    CPU backend computes it inside the gather's loop fusion (:data:`hloshard.cost.liveness.CPU_LOOP_CONSUMERS`),
    the TPU compiler does not -- its gather is a ``kCustom`` fusion that reads its operand from HBM, so
    the producer is written in full first.  Read off the TPU compiler's optimised program of a bf16
    cross-entropy loss over 2048 x 50257 logits (libtpu 0.0.42.1, one v5e chip; BENCHMARKS.md round 21,
    chip): ``take_along_axis`` of the f32 log-softmax is a ``gather_fusion`` of a ``kLoop`` fusion that
    writes the whole f32[2048,50257] log-softmax (1.04e9 bytes accessed: three reads of the logits and
    that write), where the CPU rule had the gather read the logits."""
    return instr.opcode in ELEMENTWISE and any(u.opcode == "gather" for u in effective_users(instr))


def one_hot_scatter(instr) -> bool:
    """Whether the TPU compiler turns the ``scatter`` ``instr`` into an elementwise select, which fuses like
    any elementwise op (:func:`is_fused`: into its consumers, and its operand's producers into it): one
    update per batch element at one position of the other dimension(s), ``select(iota == index,
    combine(operand, update), operand)``, so that no scatter kernel and no buffer for its result are
    left.  The form it rewrites (read off its optimised programs, libtpu 0.0.42.1, one v5e chip, ahead of
    time; BENCHMARKS.md round 21, chip): no update window dims, every operand dim either a batching dim
    (``input_batching_dims``) or a scattered one (``inserted_window_dims``), the indices one index
    vector per batch element, and the updates of the operand's rank (each batch dim at its size, each
    scattered dim of size 1, so that the update broadcasts to the operand).  The gradient of
    ``take_along_axis`` -- a cross-entropy's one-hot ``s32[n,1,1]`` indices, ``f32[n,1]`` updates into
    zeros ``f32[n,V]`` -- is computed inside the kernel that reads it, and its reductions read only the
    labels (held-out ``cross_entropy_bf16_32k``: the TPU's ``compare_select_fusion`` /
    ``select_reduce_fusion``); the same with a non-zero operand (one ``add_select_fusion``; probed with
    an add combiner, any combiner accepted here).  Kept as a scatter there (not rewritten): updates of a lower rank than the operand
    (``s32[n,1]`` indices with ``f32[n]`` updates), several indices per batch element, and index
    vectors without batching dims (``x.at[arange(n), labels]``).  False for anything else."""
    if instr.opcode != "scatter" or len(instr.operands) != 3 or not instr.shape.is_array:
        return False
    return _memo("onehot", instr, _one_hot_scatter)


def _attr_ints(instr, key: str) -> tuple:
    v = instr.attrs.get(key) if hasattr(instr, "attrs") else None
    if v is None:
        return ()
    return tuple(int(x) for x in (v if isinstance(v, (list, tuple)) else (v,)))


def _one_hot_scatter(instr) -> bool:
    op, idx, upd = instr.operands
    if not (op.shape.is_array and idx.shape.is_array and upd.shape.is_array):
        return False
    if _attr_ints(instr, "update_window_dims"):
        return False
    batch, inserted = _attr_ints(instr, "input_batching_dims"), _attr_ints(instr, "inserted_window_dims")
    sbatch = _attr_ints(instr, "scatter_indices_batching_dims")
    odims, idims, udims = tuple(op.shape.dims), tuple(idx.shape.dims), tuple(upd.shape.dims)
    if not batch or len(batch) != len(sbatch) or sorted(batch + inserted) != list(range(len(odims))):
        return False
    ivd = instr.attrs.get("index_vector_dim")
    ivd = len(idims) if ivd is None else int(ivd)
    per_batch = 1
    for d, n in enumerate(idims):
        if d != ivd and d not in sbatch:
            per_batch *= n
    if per_batch != 1 or any(idims[s] != odims[b] for b, s in zip(batch, sbatch)):
        return False
    if len(udims) != len(odims):
        return False
    want = sorted(odims[b] for b in batch) + [1] * len(inserted)
    return sorted(udims) == sorted(want) and all(n == 1 or n in (odims[b] for b in batch) for n in udims)


#: elementwise ops that are cheap on the accelerator for floating-point elements of at most 32 bits,
#: so that fusion duplicates them into every consumer (XLA's GPU backend,
#: ``GpuInstructionFusion::IsExpensive``: "some floating-point math ops are cheap on the GPU": divide,
#: sqrt, rsqrt, exp for F32 / F16)
CHEAP_FLOAT_OPS = frozenset({"divide", "sqrt", "rsqrt", "exponential"})

#: what the TPU compiler also duplicates: :data:`CHEAP_FLOAT_OPS` and ``tanh`` (read off the optimised
#: ``transformer_train_step`` solve plan on ``v5e:2x4``: a GELU's ``tanh`` is computed again inside each
#: dot fusion that reads the activation -- the forward ``w2`` dot and the ``w2`` weight-gradient dot --
#: rather than read from a buffer)
CHEAP_ON_TPU = CHEAP_FLOAT_OPS | {"tanh"}


def expensive_on_tpu(instr) -> bool:
    """Whether the TPU compiler's fusion keeps ``instr`` out of several consumers
    (``HloInstruction::IsExpensive``, :data:`hloshard.cost.liveness.EXPENSIVE`) but for
    :data:`CHEAP_FLOAT_OPS` on f32 / bf16 / f16 elements, which it duplicates (read off the optimised
    programs: a softmax's ``exp`` and ``divide`` computed inside each dot that reads them)."""
    if instr.opcode not in EXPENSIVE:
        return False
    return not (instr.opcode in CHEAP_ON_TPU and instr.shape.is_array
                and instr.shape.element_type in ("f32", "bf16", "f16"))


def _is_large_array(x) -> bool:
    """An array buffer a join counts: not a constant, a scalar, a broadcast or an iota (those are read
    as vectors or computed in place)."""
    return x.shape.is_array and x.opcode not in ("constant", "broadcast", "iota") and bool(x.shape.dims)


def _join_leaves(o, rule: "FusionRule", depth: int = 0) -> frozenset:
    """Ids of the large array buffers (:func:`_is_large_array`) the kernel of ``o`` reads once its fused
    producers are inlined: its operands but broadcasts and iotas, each fused operand that is not a
    :func:`shared_join` of its own replaced by what it reads, recursively (to a depth of 64: deeper, a
    fused operand counts as one buffer), each buffer once.  Cached per computation."""
    def compute(_):
        out = set()
        for x in o.operands:
            if x.opcode in ("broadcast", "iota"):
                continue      # a vector (a layer norm's statistics, its scale) read along the kernel
            if depth < 64 and rule.is_fused(x) and x.opcode not in SLICES and rule.absorbed_by(x) is None \
                    and not shared_join(x, rule):
                out |= _join_leaves(x, rule, depth + 1)
            elif _is_large_array(x):
                out.add(id(x))
        return frozenset(out)
    return _memo("leaves", o, compute)


def _fused_sinks(o, rule: "FusionRule", depth: int = 0) -> frozenset:
    """Ids of the kernels the value of the fused producer ``o`` flows into: each consumer
    (:func:`hloshard.cost.liveness.effective_users`) that the rule fuses (not a slice) replaced by its
    own sinks, recursively (to a depth of 64: deeper, the consumer counts as a sink of its own), any
    other consumer by itself.  A shared fused consumer is passed through as if it were inlined (its
    own readers are counted), and two members of one dot's output region count as two (output regions
    are not asked for: :func:`epilogue` asks :func:`shared_join`): both can only find more sinks than
    there are kernels, never fewer.  Cached per computation."""
    def compute(_):
        out = set()
        for u in effective_users(o):
            if depth < 64 and _same_parent(u, o) and u.opcode not in SLICES and rule.is_fused(u):
                out |= _fused_sinks(u, rule, depth + 1)
            else:
                out.add(id(u))
        return frozenset(out)
    return _memo("sinks", o, compute)


def shared_join(o, rule: "FusionRule") -> bool:
    """A fused producer that several consumers read and that itself joins two or more array buffers
    (an add of two activations, a select ...): its kernel is read as one buffer of its own size rather
    than inlined into each consumer (see :func:`hloshard.cost.roofline.kernel_reads`).  The arrays joined: under the CPU rule
    ``o``'s operands (broadcasts included); under a rule with ``transitive_join`` (the TPU's,
    :mod:`hloshard.cost.tpu_fusion`) the distinct large buffers its kernel reads with its fused producers inlined
    (:func:`_join_leaves`, each buffer once: a backward layer norm's ``convert(add(a, b))`` read by six
    dots joins a and b; ``x - broadcast(mean)`` joins nothing; a GELU ``x * 0.5 * (1 + tanh(f(x)))``
    read by two dots joins x alone, and each dot computes it from x, as the TPU's programs do).  Under
    ``transitive_join`` a producer whose consumers all end in one kernel (:func:`_fused_sinks`: a
    GELU's backward, whose terms several elementwise ops read, all computed in the operand fusion of
    the weight-gradient dot) is no shared join: that kernel computes it once and nothing else reads it,
    as the TPU compiler's optimised MLP train step (f32 4096x2048, f 8192, libtpu 0.0.42.1, one v5e
    chip) does -- one ``kOutput`` fusion per dot, the GELU backward inside the ``w1`` gradient's, no
    ``[4096,8192]`` buffer besides the two dots' results (BENCHMARKS.md round 20, tpufuse)."""
    if len(effective_users(o)) < 2:
        return False
    if rule.transitive_join:
        if len(_fused_sinks(o, rule)) < 2:
            return False
        return _memo("join", o, lambda x: len(_join_leaves(x, rule))) >= 2
    arrays = {id(x) for x in o.operands if x.shape.is_array and x.opcode != "constant" and x.shape.dims}
    return len(arrays) >= 2


def online_softmax_dot(instr, rule: "FusionRule"):
    """The dot whose kernel computes the reduction ``instr`` in the same pass over their common operand,
    or None: the TPU compiler's ``online-softmax`` rewrite, under a rule with
    :attr:`FusionRule.online_softmax`.  A softmax whose normalised result is read by a dot,
    ``dot(exp(s - max(s)) / sum(exp(s - max(s))), v)`` -- an attention forward's ``softmax(q k^T) v`` --
    becomes one ``tpu_custom_call`` (``online-softmax``) that reads the scores once, keeping the running
    max and sum beside the product, where a kernel for the sum and then the dot's kernel would read them
    twice.  Read off the TPU compiler's optimised programs (libtpu 0.0.42.1, one v5e chip, ahead of
    time): the held-out ``attention_fwd_bf16_s2048`` and probes of the same forward (head dim 64 / 128,
    bf16 and f32) hold it when the probabilities are the dot's lhs and the key length is a multiple of
    :data:`ONLINE_SOFTMAX_LANES`; not with the probabilities as the rhs (``dot(v, p)``, the samples'
    ``attention_6heads``), not at key lengths 64 ... 200 or 1000 that are not, not when dividing after
    the dot (``(e v) / sum(e)``), and not in train steps (the probabilities feed the backward too).  The compiler's
    ``cost_analysis()`` counts neither flops nor bytes for the custom call, so its flops for the forward
    are half of the two dots' (BENCHMARKS.md round 21, chip); the chip runs it: 963 us for 2048^2 scores,
    4 x 16 heads (1872.6 us the forward, 909.8 us the scores' kernel alone), the time of one read.

    The form matched: ``instr`` is an add ``reduce`` over one dim (a multiple of
    :data:`ONLINE_SOFTMAX_LANES`) of an ``exponential`` (through converts) that divides (through
    broadcasts: the softmax's normalisation), whose every reader ends in one kernel, a dot
    (:func:`_fused_sinks`), whose lhs has ``instr``'s operand's shape and contracts the dim ``instr``
    reduces; and both read that operand's producer chain from one common buffer (the scores).  A layer
    norm's sums feeding the next dot are not this form (their kernels are separate reductions in the
    TPU's programs: ``transformer_block``'s ``multiply_reduce_fusion``).  The
    max's reduction is a second output of the score dot's kernel already
    (:func:`hloshard.cost.roofline.multi_output_skips`).  Cached per computation."""
    if not rule.online_softmax or instr.opcode != "reduce" or len(instr.operands) != 2 \
            or not instr.operands[0].shape.is_array:
        return None
    return _memo("online", instr, lambda i: _online_softmax_dot(i, rule))


#: the key length (the softmax's reduced dim) must be a multiple of this for the TPU's online-softmax
#: rewrite (its lanes): probed with the forward at key lengths 128, 256, 384, 512, 640, 768, 1024, 1536,
#: 2048, 4096 (rewritten) and 64, 96, 120, 136, 192, 200, 1000 (not), bf16 and f32 alike
ONLINE_SOFTMAX_LANES = 128


def _adds_reducer(instr) -> bool:
    comps = getattr(instr, "called_computations", None) or []
    return bool(comps) and comps[0].root is not None and comps[0].root.opcode == "add"


def _through(x, ops=("convert", "reshape", "bitcast", "copy")):
    while x.opcode in ops and x.operands:
        x = x.operands[0]
    return x


def _divides_by(r) -> bool:
    """Whether the value of ``r`` reaches a ``divide`` as its divisor through broadcasts and reshapes
    only (a softmax's normalisation)."""
    frontier, seen = [r], set()
    while frontier:
        x = frontier.pop()
        for u in effective_users(x):
            if id(u) in seen:
                continue
            seen.add(id(u))
            if u.opcode == "divide" and len(u.operands) == 2 and u.operands[1] is x:
                return True
            if u.opcode in ("broadcast", "reshape", "convert", "bitcast", "copy"):
                frontier.append(u)
    return False


def _online_softmax_dot(instr, rule: "FusionRule"):
    if not _adds_reducer(instr) or _through(instr.operands[0]).opcode != "exponential" or not _divides_by(instr):
        return None
    sinks = _fused_sinks(instr, rule)
    if len(sinks) != 1:
        return None
    comp = instr.parent
    dot = next((u for u in (comp.instructions if comp is not None else ()) if id(u) in sinks), None)
    if dot is None or dot.opcode != "dot" or len(dot.operands) != 2:
        return None
    shape = tuple(instr.operands[0].shape.dims)
    reduced = tuple(sorted(instr.dimensions or ()))
    mine = _join_leaves(instr, rule) | ({id(instr.operands[0])} if _is_large_array(instr.operands[0]) else set())
    if len(reduced) != 1 or shape[reduced[0]] % ONLINE_SOFTMAX_LANES:
        return None
    o = dot.operands[0]      # the probabilities are the dot's lhs
    if not o.shape.is_array or tuple(o.shape.dims) != shape \
            or tuple(sorted(dot.attrs.get("lhs_contracting_dims") or ())) != reduced:
        return None
    theirs = _join_leaves(o, rule) | ({id(o)} if _is_large_array(o) and not rule.is_fused(o) else set())
    return dot if mine & theirs else None


def epilogue(instr):
    """The elementwise consumer whose result the dot / convolution ``instr`` writes instead of its own
    (output fusion, module docstring), or None: see :func:`_epilogue` (cached per computation)."""
    if instr.opcode not in OUTPUT_FUSING:
        return None
    return _memo("epilogue", instr, _epilogue)


#: the most elementwise instructions :func:`output_region` follows from one dot (a bound on the search's
#: cost per dot, not a measured figure: the regions seen are 2-8 instructions, a GELU's backward)
REGION_MAX = 64


def _elements(x) -> int:
    n = 1
    for d in x.shape.dims:
        n *= d
    return n


def output_region(instr):
    """The elementwise consumers a dot / convolution ``instr`` computes in its output fusion when they
    are more than one, as ``(members, sink)``, or None (module docstring, *output fusion*).  The forward
    closure of ``instr`` through elementwise users (:func:`hloshard.cost.liveness.effective_users`) in its
    computation with as many elements as ``instr``'s result; when exactly one member (the sink) is a root
    or has a user outside it, the sink is materialised (not :func:`is_fused`, or read by several
    consumers: a dot's kernel is not duplicated) and the closure has two members or more, the dot's
    kernel computes all of them and writes the sink only.  Read off the optimised ``transformer_train_step``
    solve plan (``v5e:2x4``): a GELU's backward -- the gradient dot's result read by two multiplies
    whose paths meet again at an add read by two dots -- is one ``kOutput`` fusion writing that add.
    A closure of more than :data:`REGION_MAX` members is not followed (None).  Cached per computation."""
    if instr.opcode not in OUTPUT_FUSING:
        return None
    return _memo("region", instr, _output_region)


def _output_region(instr):
    if instr.is_root or not instr.shape.is_array:
        return None
    size = _elements(instr)
    members: dict = {}
    stack = list(effective_users(instr))
    while stack:
        u = stack.pop()
        if id(u) in members:
            continue
        if u.opcode not in ELEMENTWISE or not _same_parent(u, instr) or not u.shape.is_array \
                or _elements(u) != size:
            return None
        members[id(u)] = u
        if len(members) > REGION_MAX:
            return None
        stack.extend(x for x in effective_users(u) if x.opcode in ELEMENTWISE and _same_parent(x, instr)
                     and x.shape.is_array and _elements(x) == size)
    if len(members) < 2:
        return None
    exits = [u for u in members.values()
             if u.is_root or any(id(x) not in members for x in effective_users(u))]
    if len(exits) != 1:
        return None
    sink = exits[0]
    if is_fused(sink) and len(effective_users(sink)) < 2:
        return None
    return frozenset(members), sink


def _epilogue(instr):
    """The elementwise consumer whose result the dot / convolution ``instr`` writes instead of its own
    (output fusion, module docstring), or None: the sink of its :func:`output_region`, else ``instr``'s
    one consumer (through forwarding users), elementwise, in the same computation, that has a buffer
    (not :func:`is_fused`, or a :func:`shared_join`: else its consumers inline it and read ``instr``'s
    result)."""
    if instr.opcode not in OUTPUT_FUSING or instr.is_root or not instr.shape.is_array:
        return None
    region = output_region(instr)
    if region is not None:
        return region[1]
    consumers = effective_users(instr)
    if len(consumers) != 1:
        return None
    u = consumers[0]
    if u.opcode not in ELEMENTWISE or not _same_parent(u, instr) or not u.shape.is_array:
        return None
    if is_fused(u) and not shared_join(u, TPU_FUSION):
        return None
    return u


def _regions_of(comp) -> dict:
    """``{id(member): dot}`` for every :func:`output_region` of the dots and convolutions of ``comp``."""
    out: dict = {}
    for i in comp.instructions:
        region = output_region(i) if i.opcode in OUTPUT_FUSING else None
        if region is not None:
            for m in region[0]:
                out[m] = i
    return out


def absorbed_by(instr):
    """The dot / convolution whose output fusion computes ``instr`` (``epilogue(dot) is instr``, or
    ``instr`` in the dot's :func:`output_region`), or None."""
    if instr.opcode not in ELEMENTWISE:
        return None
    for o in instr.operands:
        src = o
        while liveness.is_fused(src) and src.opcode != "constant" and src.operands and src.opcode not in OUTPUT_FUSING \
                and len(src.operands) == 1:
            src = src.operands[0]     # a forwarding copy / reshape between the dot and its consumer
        if src.opcode in OUTPUT_FUSING and epilogue(src) is instr:
            return src
    comp = instr.parent
    if comp is None:
        return None
    return _memo("regions", comp.root if comp.root is not None else instr, lambda _: _regions_of(comp)).get(id(instr))


def sibling_key(instr):
    """The kind of reduction ``instr`` is, for sibling multi-output fusion (module docstring), or None
    when it is no reduce: the reduced operand's dimensions and the reduced dimensions.  Reductions of
    one key in one computation that read a common buffer (a layer norm's mean and variance of ``x``;
    the backward's sums of ``dy`` and ``dy * xhat``) are one kernel on the TPU (its
    ``multiply_reduce_fusion`` with a tuple result), which reads the buffer once."""
    if instr.opcode != "reduce" or not instr.operands or not instr.operands[0].shape.is_array:
        return None
    return tuple(instr.operands[0].shape.dims), tuple(sorted(instr.dimensions or ()))


@dataclass(frozen=True)
class FusionRule:
    """A backend's fusion rule for the roofline's HBM bytes (:mod:`hloshard.cost.roofline`).

    ``is_fused(instr) -> bool``: no HBM buffer of its own; ``epilogue(instr)``: the consumer whose
    result a dot / convolution writes instead of its own (or None); ``absorbed_by(instr)``: the dot /
    convolution that computes ``instr`` in its fusion (or None); ``transitive_join``: whether a shared
    producer's join (the bound on inlining of :func:`hloshard.cost.roofline.kernel_reads`) counts the
    large buffers its inlined kernel reads (True) or its own operands, broadcasts included (False);
    ``relayout_copies``: whether the backend copies a dot operand whose dimensions are not in the
    order its kernel wants (the CPU's ``DotDecomposer``, priced by the memory model's
    ``autoshard.build.edge_buffers``) -- the TPU's layout assignment gives each dot operand the layout
    its fusion reads instead (the samples' optimised TPU programs hold no such copies);
    ``sibling_reduces``: whether reductions of the same kind that read a common buffer share one
    kernel that reads it once (:func:`sibling_key`); ``tiled_layout``: whether a kernel moves each
    buffer in the backend's tiled layout, padding included (the TPU's (8, 128) tiles:
    :func:`hloshard.cost.tpu_layout.padded_bytes_per_device`; measured: ``conv_layer``'s f32
    activations with a minor dimension of 32 or 64 are read and written at 128 lanes, 4x / 2x their
    elements, in the TPU compiler's ``bytes accessed``) rather than at its elements' bytes: in the
    report's roofline (:func:`hloshard.timing.plan_roofline`), not in the solver's objective
    (``strategy.base.strategy_hbm_bytes`` prices elements), because a plan that avoids padding by
    splitting a convolution's batch down to a few rows per device meets a cost the model does not
    have: the TPU's convolution emitters keep the batch in the sublanes and re-lay a small per-device
    batch out (pad, slices, layout copies; measured: ``conv_layer`` solved with padding priced splits
    its batch 8 ways, 2 rows per device, and the TPU compiler estimates that plan at 43.75 us against
    GSPMD's 23.75 us, BENCHMARKS.md round 13);
    ``prefetch_parameters``: whether the backend's memory-space assignment copies entry parameters into
    on-chip memory before their readers run (:func:`hloshard.cost.roofline.prefetched`);
    ``windowed_reduce_scatter``: whether a dot whose partial sums are scattered runs as a windowed
    einsum loop (:func:`windowed_einsum_bytes`; the objective and the report alike);
    ``multi_output_loops``: whether elementwise kernels of one iteration space merge into multi-output
    kernels, producer into consumer and siblings, each buffer read once
    (:func:`hloshard.cost.roofline.multi_output_skips`);
    ``conv_batch_tile``: whether a convolution's kernel moves a per-device batch below
    :data:`CONV_BATCH_TILE` as a full tile of batch rows (:func:`conv_batch_factor`; the objective and
    the report alike);
    ``online_softmax``: whether a softmax's sum that only a dot reads is computed in that dot's kernel
    in one pass over the scores (:func:`online_softmax_dot`);
    ``pins_free``: whether a sharding pin (a ``Sharding`` custom-call, what ``solve`` writes on operands) is
    no kernel: the partitioner turns it into the resharding collective the plan already prices (its HBM
    bytes among the collectives') or into nothing -- the TPU's optimised programs hold no kernel for one (round
    22: ``solve``'s plan of a held-out layer-norm MLP, two pins gathering f32[256,1024] weights: two
    all-gathers and no copy), where the roofline had charged each pin the gather's bytes a second time;
    ``reduced_epilogue_kernel``: whether a dot / convolution whose partial sums the plan all-reduces
    computes its elementwise consumer in a kernel of its own after the all-reduce rather than in its
    output fusion (:func:`reduced_epilogue_bytes`); ``dot_dot_fusion``: whether a dot whose result only
    another dot reads is computed inside that dot's kernel (:func:`dot_dot_reader`); ``gather_tiles``: whether
    the backend's ``HloCostAnalysis`` counts a row gather (:func:`row_gather`) at whole tiles of rows
    (:func:`gather_counted_bytes`: the report's bytes accessed only, no seconds)."""

    name: str
    is_fused: Callable
    epilogue: Callable
    absorbed_by: Callable
    transitive_join: bool = False
    relayout_copies: bool = True
    sibling_reduces: bool = False
    tiled_layout: bool = False
    prefetch_parameters: bool = False
    windowed_reduce_scatter: bool = False
    conv_batch_tile: bool = False
    multi_output_loops: bool = False
    online_softmax: bool = False
    pins_free: bool = False
    reduced_epilogue_kernel: bool = False
    dot_dot_fusion: bool = False
    gather_tiles: bool = False


def _none(instr):
    return None


#: XLA's CPU backend (the memory model's rule; no output fusion)
CPU_FUSION = FusionRule("cpu", liveness.is_fused, _none, _none, False, True, False)
#: the TPU compiler (module docstring)
TPU_FUSION = FusionRule("tpu", is_fused, epilogue, absorbed_by, True, False, True, True, True, True, True,
                        multi_output_loops=True, online_softmax=True, pins_free=True, reduced_epilogue_kernel=True,
                        dot_dot_fusion=True, gather_tiles=True)


def fusion_rule(profile) -> FusionRule:
    """:data:`TPU_FUSION` for a profile whose ``backend`` is ``'tpu'``
    (:attr:`hloshard.devices.DeviceProfile.backend`), else :data:`CPU_FUSION` (also for None)."""
    return TPU_FUSION if profile is not None and getattr(profile, "backend", None) == "tpu" else CPU_FUSION


#: the sum of a dot's two operands, bytes per device, above which the TPU compiler lowers a
#: reduce-scattered dot as a windowed einsum (:func:`windowed_einsum_bytes`).  Measured with single-dot
#: probes on ``v5e:2x4`` (a weight gradient ``f32[F,G] = dot(bf16[B,S,F], bf16[B,S,G])`` contracted over
#: the batch split 8 ways, result split 8 ways over G; BENCHMARKS.md round 14): no loop with operands of
#: 1 and 2 MiB per device (0.5 + 0.5, 1 + 1), a loop with 4 + 4, 8 + 8, 32 + 8, 1 + 32 MiB; at 2 + 2
#: MiB one probe of two had a loop (the TPU compiler also weighs the result's size, not modelled).
WINDOWED_EINSUM_MIN_OPERAND_BYTES = 4 * 2 ** 20


def windowed_reread_operand(instr, scattered_dims) -> int | None:
    """The operand (0: lhs, 1: rhs) a windowed einsum of the dot ``instr`` reads whole at every step:
    the one that does not supply the scattered result dimensions ``scattered_dims`` (result dimension
    indices; a dot's result is its batch dims, then the lhs free dims, then the rhs free dims, XLA's
    ``DotGeneral`` order).  None when a scattered dim is a batch dim (both operands are sliced) or the
    scattered dims come from both operands, or ``instr`` is not a two-operand dot."""
    if instr.opcode != "dot" or len(instr.operands) < 2 or not scattered_dims:
        return None
    lhs = instr.operands[0]
    nb = len(instr.attrs.get("lhs_batch_dims") or ())
    nc = len(instr.attrs.get("lhs_contracting_dims") or ())
    n_lhs_free = len(lhs.shape.dims) - nb - nc
    sides = set()
    for d in scattered_dims:
        if d < nb:
            return None
        sides.add(0 if d < nb + n_lhs_free else 1)
    if len(sides) != 1:
        return None
    return 1 - sides.pop()


def windowed_einsum_bytes(rule: FusionRule, group_size: int, reread: int | None, lhs_bytes: float,
                          rhs_bytes: float) -> float:
    """HBM bytes one device moves for a reduce-scattered dot beyond the plain dot's kernel when the TPU
    compiler lowers it as a windowed einsum (module docstring), for one execution:

        (steps - 1) x bytes of the operand read whole at every step + 2 x max(lhs_bytes, rhs_bytes)

    with ``steps`` = n / 2 for an even ``group_size`` n (bidirectional: two result chunks per step), n
    otherwise; the second term is the layout copy (read and written) of an operand into the loop's
    layout, the larger in the programs measured.  ``reread``: :func:`windowed_reread_operand` (None:
    0); ``lhs_bytes`` / ``rhs_bytes``: the operands' bytes per device.  0 under a rule without
    :attr:`FusionRule.windowed_reduce_scatter`, for n < 2, or when the operands sum to at most
    :data:`WINDOWED_EINSUM_MIN_OPERAND_BYTES` (no loop)."""
    n = int(group_size)
    if not rule.windowed_reduce_scatter or reread is None or n < 2:
        return 0.0
    if lhs_bytes + rhs_bytes <= WINDOWED_EINSUM_MIN_OPERAND_BYTES:
        return 0.0
    steps = n // 2 if n % 2 == 0 else n
    whole = lhs_bytes if reread == 0 else rhs_bytes
    return (steps - 1) * float(whole) + 2.0 * max(float(lhs_bytes), float(rhs_bytes))


def reduced_epilogue_bytes(rule: FusionRule, instr, result_bytes: float) -> float:
    """HBM bytes one device moves beyond the output-fused kernel of the dot / convolution ``instr`` when
    the plan all-reduces its partial sums (module docstring, *no output fusion across a plan's
    all-reduce*), for one execution: ``2 x result_bytes`` -- the dot's kernel writes its partial result,
    the epilogue's kernel reads the all-reduced sum -- where ``instr`` has an epilogue under ``rule``
    (:attr:`FusionRule.epilogue`: the roofline charged the dot's kernel with the epilogue's reads and
    result, which stay), else 0; 0 under a rule without :attr:`FusionRule.reduced_epilogue_kernel`.
    ``result_bytes``: ``instr``'s result per device, bytes (the shape of its all-reduced sum).  The
    caller decides that the plan's strategy all-reduces (:func:`hloshard.strategy.base.split_epilogue_bytes`);
    the all-reduce's own bytes are the collective's."""
    if not rule.reduced_epilogue_kernel or instr.opcode not in OUTPUT_FUSING or rule.epilogue(instr) is None:
        return 0.0
    return 2.0 * float(result_bytes)


#: bytes the TPU compiler's ``HloCostAnalysis`` counts for a kernel that takes its partition's share of a
#: buffer at an offset the SPMD partitioner computes from ``partition-id`` (a scalar offset, or a lookup in a
#: per-partition constant table: ``constant s32[8] {0, 32, 64, 96, 0, 32, 64, 96}``, ``dynamic-slice(table,
#: partition-id)``), beyond the slice it reads and writes: nine 512-byte granules.  Probed ahead of time
#: (libtpu 0.0.42.1, ``v5e:2x4``, ``exponential`` of a replicated f32 [n, n], n = 1024 and 2048, its result
#: written split 8 ways on one dimension: +3,584 B over the sliced kernel's read and write; split [2, 4]
#: (two table lookups): +4,608 B); ``moe_layer``'s solved plan (round 31), whose dot result is all-reduced
#: and then split on the reduced axis (``dynamic-slice_add_fusion``), counts 8,704 B more than GSPMD's plan,
#: which keeps the same all-reduce and writes the whole result.
PARTITION_SLICE_BYTES = 9 * 512


def partition_slice_bytes(rule: FusionRule) -> float:
    """HBM bytes the TPU compiler counts for a kernel that slices its partition's share of an all-reduced
    result (:data:`PARTITION_SLICE_BYTES`) under ``rule``; 0 under a rule without
    :attr:`FusionRule.reduced_epilogue_kernel` (the CPU's: its slices are priced as today)."""
    return float(PARTITION_SLICE_BYTES) if rule.reduced_epilogue_kernel else 0.0


def dot_dot_reader(instr, rule: FusionRule):
    """``(reader, chain)`` when the TPU computes the dot ``instr`` inside the kernel of the dot ``reader``
    (module docstring, *dot-dot fusion*), else None.  ``chain``: the elementwise instructions between
    the two (ids), all fused into ``reader``'s read.  Conditions, read structurally (the plan's part --
    no collective between -- is the caller's): ``rule.dot_dot_fusion``; ``instr`` is a ``dot`` with an
    array result, not a root, without an epilogue (:attr:`FusionRule.epilogue`); the closure of its
    users through forwarding instructions (:func:`hloshard.cost.liveness.effective_users`) and through
    elementwise instructions of the same parent and the same dimensions that ``rule`` fuses holds exactly
    one other user, a ``dot``, which takes ``instr`` or a chain member directly as an operand (no reshape
    between: a reshape is forwarded by ``effective_users`` and then no operand matches); every other
    operand of a chain member is a ``broadcast`` / ``constant`` / ``iota`` or has fewer elements than
    ``instr`` (no second large buffer joins the chain).  Cached per computation."""
    if not rule.dot_dot_fusion or instr.opcode != "dot":
        return None
    return _memo("dotdot", instr, _dot_dot_reader)


def _dot_dot_reader(instr):
    if instr.is_root or not instr.shape.is_array or TPU_FUSION.epilogue(instr) is not None:
        return None
    dims = tuple(instr.shape.dims)
    size = _elements(instr)
    chain: dict = {}
    readers: dict = {}
    stack = list(effective_users(instr))
    while stack:
        u = stack.pop()
        if id(u) in chain or id(u) in readers:
            continue
        if u.opcode in ELEMENTWISE and _same_parent(u, instr) and u.shape.is_array \
                and tuple(u.shape.dims) == dims and is_fused(u) and not u.is_root:
            chain[id(u)] = u
            if len(chain) > REGION_MAX:
                return None
            stack.extend(effective_users(u))
        else:
            readers[id(u)] = u
    if len(readers) != 1:
        return None
    reader = next(iter(readers.values()))
    inside = set(chain) | {id(instr)}
    if reader.opcode != "dot" or not _same_parent(reader, instr) \
            or not any(id(o) in inside for o in reader.operands[:2]):
        return None
    for u in chain.values():
        for o in u.operands:
            if id(o) not in inside and o.opcode not in ("broadcast", "constant", "iota") \
                    and (not o.shape.is_array or _elements(o) >= size):
                return None
    return reader, frozenset(chain)


#: the batch rows of one tile of a TPU convolution's activations: the sublanes of the (8, 128) tile
#: (:data:`hloshard.cost.tpu_layout.SUBLANES`; module docstring, "a convolution's batch in the sublanes")
CONV_BATCH_TILE = 8


def conv_batch_factor(instr, out_tile, rule: FusionRule) -> float:
    """How many times its elements' share of bytes the kernel of the convolution ``instr`` moves because
    of its per-device batch (module docstring): ``CONV_BATCH_TILE / b`` when the per-device output batch
    ``b`` (``out_tile[output_batch]``, the ``b`` of its ``dim_labels``) is below
    :data:`CONV_BATCH_TILE`, else 1.  1 for anything but a convolution, under a rule without
    :attr:`FusionRule.conv_batch_tile`, when ``out_tile`` (the per-device dims of ``instr``'s result) is
    None or does not fit, for unparsable ``dim_labels``, and for a filter-gradient convolution (its
    output has fewer spatial positions than its kernel operand: the window spans the input, and the
    batch it contracts is not tiled this way, measured)."""
    if not rule.conv_batch_tile or out_tile is None:
        return 1.0
    labels = _forward_conv_labels(instr)
    if labels is None or len(out_tile) != len(instr.shape.dims) or labels.output_batch >= len(out_tile):
        return 1.0
    batch = int(out_tile[labels.output_batch])
    if batch <= 0 or batch >= CONV_BATCH_TILE:
        return 1.0
    return CONV_BATCH_TILE / batch


def _forward_conv_labels(instr):
    """The parsed ``dim_labels`` of the convolution ``instr`` when it is a forward (or input-gradient)
    convolution -- its output has at least as many spatial positions as its kernel operand has taps --,
    else None (not a convolution, unparsable or out-of-range labels, a filter gradient: the window spans
    the input)."""
    if instr.opcode != "convolution" or len(instr.operands) < 2:
        return None
    try:
        labels = parse_dim_labels(str(instr.attrs.get("dim_labels")))
    except AttrError:
        return None
    dims, rhs = tuple(instr.shape.dims), tuple(instr.operands[1].shape.dims)
    if max(labels.output_spatial, default=-1) >= len(dims) or max(labels.kernel_spatial, default=-1) >= len(rhs):
        return None
    positions = 1
    for d in labels.output_spatial:
        positions *= dims[d]
    taps = 1
    for d in labels.kernel_spatial:
        taps *= rhs[d]
    return labels if positions >= taps else None


#: the element type a TPU dot / convolution at DEFAULT precision reads an ``f32`` operand as (its MXU's
#: one bf16 pass; ``operand_precision={high,...}`` / ``{highest,...}`` keep f32)
DEFAULT_PRECISION_TYPE = "bf16"


def _default_precision(instr) -> bool:
    """Whether every operand of the dot / convolution ``instr`` is read at DEFAULT precision (no
    ``operand_precision``, or all ``default``)."""
    raw = instr.attrs.get("operand_precision")
    if raw is None:
        return True
    words = [w.strip().lower() for w in str(raw).strip("{} ").split(",") if w.strip()]
    return all(w == "default" for w in words)


def _narrow_read(u, element_type: str) -> str | None:
    """The element type narrower than ``element_type`` that the consumer ``u`` reads its operand at, or
    None: a ``convert`` to a narrower type (its result's type); an ``f32`` operand of a dot /
    convolution at DEFAULT precision (:data:`DEFAULT_PRECISION_TYPE`)."""

    width = ELEMENT_BITS.get(element_type, 0)
    if u.opcode == "convert" and u.shape.is_array:
        t = u.shape.element_type
        return t if 0 < ELEMENT_BITS.get(t, 0) < width and t.startswith(("bf", "f")) else None
    if u.opcode in ("dot", "convolution") and element_type == "f32" and _default_precision(u):
        return DEFAULT_PRECISION_TYPE
    return None


def moved_element_type(consumer, element_type: str) -> str | None:
    """The narrower element type in which the TPU compiler moves a floating-point value of
    ``element_type`` resharded for ``consumer``, or None (it moves ``element_type``).

    Read off the TPU compiler's optimised programs (libtpu 0.0.42.1 ahead of time, ``v5e:2x4``; single-dot
    probes ``f32[512,1024] x f32[1024,1024]`` with the weight split 8 ways and gathered, BENCHMARKS.md round
    19): when every reader of the gathered value reads it narrower -- a ``convert`` to bf16, or an f32 dot at
    DEFAULT precision, which the MXU reads as bf16 -- the compiler converts before the all-gather and gathers
    bf16 (half the bytes); with ``operand_precision={high,high}`` or ``{highest,highest}``, or with another
    reader beside the dot (an ``add``, a ``reduce`` of the gathered weight), it gathers f32.  ``consumer``:
    the instruction the resharding is for; a forwarding one (a copy, a reshape, a ``Sharding`` pin:
    :func:`hloshard.cost.liveness.effective_users`) is judged by its readers, all of which must read the
    same narrower type.  Applies under the TPU rule only (the caller's condition)."""
    if not consumer.shape.is_array:
        return None
    # a pin that reshards is a buffer of its own (liveness.resharding_pin) but still moves its operand for
    # its readers: they decide the type, as for a forwarding one
    pin = liveness._forwards(consumer) or liveness.resharding_pin(consumer)
    readers = effective_users(consumer) if pin else [consumer]
    if not readers:
        return None
    types = {_narrow_read(u, element_type) for u in readers}
    if len(types) != 1:
        return None
    return types.pop()


def _entry_output(x) -> bool:
    """Whether ``x`` is an output of the entry computation: its root, or an element of a root tuple."""
    comp = x.parent
    if comp is None or not getattr(comp, "is_entry", False):
        return False
    return x.is_root or any(u.is_root and u.opcode == "tuple" for u in x.users)


def conv_output_relayout(instr, head, rule: FusionRule, reads=()) -> bool:
    """Whether the TPU compiler copies the result ``head`` of the kernel ``instr`` (its first instruction;
    ``reads``: the buffers the kernel reads, :func:`hloshard.cost.roofline.kernel_reads`) into the entry's
    layout: under a rule with :attr:`FusionRule.conv_batch_tile` (the TPU's convolutions keep the batch in
    the sublanes, module docstring), a kernel that writes an entry output and is either a forward
    convolution's (not a filter gradient, :func:`conv_batch_factor`; the convolution's own, or its
    epilogue's) or an elementwise kernel reading a forward convolution's result of the output's dims (the
    layout assignment gives it the convolution's layout).  Read off ``conv_layer``'s optimised GSPMD program
    (``v5e:2x4``): one ``kOutput`` fusion of the convolution, its bias add and ReLU writes
    ``f32[8,32,32,32]`` in layout ``{3,0,2,1}`` (8.54 MB accessed), then a ``copy`` to the entry's
    ``{3,2,1,0}`` reads and writes it (8.39 MB); and off the chip set's held-out ``conv_bn_f32``
    (``benchmarks/tpu_measured.py``, one v5e chip ahead of time): the batch norm's statistics need the
    whole convolution result first, so its normalise-and-ReLU ``add_maximum_fusion`` is a kernel of its own
    that writes ``f32[32,56,56,256]`` in ``{3,0,2,1}``, and a ``copy`` writes the entry's ``{3,2,1,0}``."""
    if not rule.conv_batch_tile or head is None or not head.shape.is_array or not _entry_output(head):
        return False
    if instr.opcode == "convolution":
        return _forward_conv_labels(instr) is not None
    if instr.opcode not in ELEMENTWISE:
        return False
    dims = tuple(head.shape.dims)
    return any(r.opcode == "convolution" and r.shape.is_array and tuple(r.shape.dims) == dims
               and _forward_conv_labels(r) is not None for r in reads)
