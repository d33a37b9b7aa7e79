"""What a memory budget on a TPU must allow for beyond the model's HBM data: libtpu's temp heap.

libtpu's ``memory_analysis()`` of a plan is the model's HBM data (:func:`hloshard.cost.tpu_layout.hbm_peak`)
plus its HBM temp heap (:func:`hloshard.cost.tpu_layout.reported_temp_bytes`): one 32,256 B slot per async
header or spilled partition-offset scalar, reported as 0 or in full depending on one scalar's placement
(``tpu_layout``'s module docstring).  The heap is a *count*, so the budget's margin is additive
(:func:`hloshard.cost.memory.model_limit`): this module bounds the count for a module before any plan is
chosen (:func:`heap_slot_bound`), says when the model's data is exact (:func:`temporaries_fit_vmem`), and
carries both on the mesh's ``memory_device`` (:class:`TpuMemoryDevice`, set by
:func:`hloshard.mesh_setup.timed_mesh_from_options`, and for ``--mesh auto``'s candidates by
``hloshard.mesh_search``), where every budget path already reads the device.  Once a plan is written its
own temporaries are known: :func:`written_memory_device` gives the device for the written module (the
data margin dropped when the plan's per-device temporaries fit in half the VMEM,
:func:`written_temporaries_fit_vmem`), which is what the budget's check of the written module reads
(:func:`hloshard.autoshard.solve.reevaluate_written`).
"""

from __future__ import annotations

import math
from typing import Callable, Mapping, Sequence

from ..errors import InputError
from ..hlo.callgraph import reverse_post_order
from ..hlo.inline import is_inlinable_call
from ..hlo.reshape_dims import reshape_groups
from ..hlo.shape import element_byte_size
from .combiner import collective_heights
from .liveness import computation_peak_bytes, set_fusion_backend
from .roofline import multi_output_kernels
from .tpu_fusion import TPU_FUSION
from .tpu_layout import minor_pair, padded_bytes, padded_bytes_per_device, vmem_bytes

#: Opcodes that never make a slot of libtpu's HBM temp heap by themselves (:func:`heap_slot_bound`): views,
#: layout changes and constants the TPU compiler folds into a kernel or an allocation it already has
#: (``Sharding`` custom-calls, a written plan's pins, are layout annotations as well).
HEAP_FREE_OPCODES = frozenset({"constant", "get-tuple-element", "tuple", "bitcast", "reshape", "transpose",
                               "broadcast", "convert", "copy", "iota", "after-all", "partition-id", "replica-id"})


#: Heap slots beyond its own that a ``slice`` cutting a dim (:func:`cuts_a_dim`) may make when a plan splits
#: that dim off the slice's boundaries, which no plan-independent count of instructions sees: XLA's SPMD
#: partitioner exchanges halos with the neighbouring tiles (``collective-permute``-starts, shared by the
#: slices of one operand after CSE), selects by per-partition offset and limit tables (a prefetched
#: constant each) and libtpu spills their ``s32[1]`` offsets and compares into the heap.  Read per slice
#: in libtpu's buffer assignments (round 25; slices, permutes / tables / spilled scalars):
#: ``split3_sum_fwd`` 3, 7 / 3 / 4; ``transformer_block`` 3, 7 / 3 / 4; ``glu_split_fwd`` 2, 4 / 4 / 7;
#: ``qkv_split5_fwd`` 5, 11 / 7 / 11 -- at most 3 permutes, 2 tables and 4 spilled scalars per slice
#: (``ceil`` of 7/3, 4/2, 7/2), 9 slots.  The slice's own slot is its select fusion.
SLOTS_PER_CUTTING_SLICE = 3 + 2 + 4


def cuts_a_dim(instr) -> bool:
    """True when ``instr`` is a ``slice`` whose result is shorter than its operand along some dim (a
    ``split``'s piece, ``x[:, a:b]``): a dim some plan may split off the slice's boundaries
    (:data:`SLOTS_PER_CUTTING_SLICE`).  A slice that keeps every dim whole, or an unreadable one: False."""
    if instr.opcode != "slice" or len(instr.operands) != 1:
        return False
    op = instr.operands[0]
    if op.shape.is_tuple or instr.shape.is_tuple or not op.shape.is_array:
        return False
    return any(int(o) < int(i) for i, o in zip(op.shape.dims, instr.shape.dims))


def heap_slot_bound(module, prefetches: bool = False) -> int:
    """An upper bound on the slots of libtpu's HBM temp heap for any plan of ``module`` (a
    :class:`hloshard.hlo.ir.Module`; a count, plan-independent): the instructions of the program as XLA
    compiles it after its ``CallInliner`` -- the computations reached from the entry through control flow
    (each once, not per trip), every inlinable ``call`` (:func:`hloshard.hlo.inline.is_inlinable_call`)
    replaced by its callee's instructions less the callee's parameters, at each call site -- less those of
    :data:`HEAP_FREE_OPCODES` and ``Sharding`` custom-calls.  Counted without changing ``module``; on a
    module whose calls are already inlined (what ``solve`` writes) it is the plain count.

    What fills the heap (:mod:`hloshard.cost.tpu_layout`; read from libtpu's buffer assignment of the 18 sample plans,
    round 21): one slot per tuple-valued instruction of the compiled entry computation -- a copy-start of
    a prefetched parameter or offset table, an asynchronous collective's start, the multi-output fusions
    of a collective matmul and of sibling loops, a collective-permute-start, a combined all-reduce, a
    sort's tuple; a loop body's multi-output fusions; a slice-start takes two -- (exactly the heap's headers
    on the 17 sample plans whose final HLO was read) plus one per
    partition-offset scalar that found no free entry output.  Which of those libtpu makes depends on its
    fusion, scheduling and memory-space assignment, which hloshard does not replay; the count of the
    compiled program's computing instructions bounds them: measured heap / bound 0.09-0.89 on the 18 sample
    plans (tuned on; the tightest ``attention_6heads`` solve, 17 slots of 19), and on the 18 held-out
    plans of ``benchmarks/attention_heads.py`` and ``make_transformer.py --layers 2`` (not looked at
    before the rule was fixed: 0.21-0.84), on three plans compiled after the margin was final (6-layer
    transformer, ``../shared/cases/decoder2.py``: 0.12-0.22) and on MaxText's GSPMD plan (165 of 883):
    BENCHMARKS.md "Round 21, helper tpuheap".  Until round 23 the count was taken on the module as
    parsed: a ``call`` and its callee's parameters counted although XLA's ``CallInliner`` removes them
    before anything is partitioned or fused (``scan_mlp_train_step``: 97 slots allowed, 49 after
    inlining; ``moe_layer`` 24 -> 20), and a callee called from several sites counted once although it is
    compiled at each; BENCHMARKS.md "Round 23, helper tpupin" re-checks every plan measured since round 20
    against the inlined count.  Round 25 found two regimes the plain count misses, now counted:

    * a ``slice`` that cuts a dim (:func:`cuts_a_dim`: a ``split``'s pieces) takes
      :data:`SLOTS_PER_CUTTING_SLICE` more: where a plan splits the dim off the slice's boundaries XLA's
      partitioner exchanges halos (collective-permutes, offset tables, spilled offsets: held-out sets 7 / 8's
      GSPMD plans ``split3_sum_fwd`` 16 slots, ``qkv_split5_fwd`` 29, ``glu_split_fwd`` 17 over plain counts of
      9, 13, 13; now 36, 58, 31);
    * with ``prefetches`` (what :func:`tpu_memory_device` asks when the module's buffers do not fit the VMEM,
      :func:`temporaries_fit_vmem`), each instruction also takes :func:`_prefetch_slots` (memory-space
      assignment's copy-starts between HBM and VMEM: held-out set 5's ``attn_block_train_step`` solve plan
      158 slots over a plain count of 91, now 339; ``swiglu_train_step`` 68 over 38, now 138).

    An empirical bound, not a derivation: a module whose compiled program makes more async operations per
    source instruction than these (e.g. a long collective-permute pipeline per instruction) could exceed
    it.  BENCHMARKS.md "Round 25, helper tpuheap": every plan measured in rounds 21-25 within it."""
    def slots(instr) -> int:
        out = 1 + (SLOTS_PER_CUTTING_SLICE if cuts_a_dim(instr) else 0)
        return out + (_prefetch_slots(instr) if prefetches else 0)

    return compiled_instruction_sum(module, slots)


def cutting_slices(module) -> int:
    """The slices that cut a dim (:func:`cuts_a_dim`) in ``module``'s program as XLA compiles it (counted as
    :func:`heap_slot_bound` counts: after the ``CallInliner``, each computation reached through control
    flow once)."""
    return compiled_instruction_sum(module, lambda instr: int(cuts_a_dim(instr)))


def compiled_instruction_sum(module, weight: Callable[[object], int]) -> int:
    """The sum of ``weight(instr)`` over the computing instructions of ``module``'s program as XLA compiles
    it after its ``CallInliner`` (:func:`heap_slot_bound`'s walk): the computations reached from the entry
    through control flow (each once), every inlinable ``call`` replaced by its callee's instructions less
    its parameters at each call site, less :data:`HEAP_FREE_OPCODES` and ``Sharding`` custom-calls."""
    memo: dict[int, int] = {}

    def inlined(comp, drop_parameters: bool) -> int:
        key = (id(comp) << 1) | drop_parameters
        if key in memo:
            return memo[key]
        memo[key] = 0   # a call cycle is malformed HLO; count it once rather than recurse forever
        count = 0
        for instr in comp.instructions:
            if is_inlinable_call(instr):
                count += inlined(instr.attrs["to_apply"], True)
            elif instr.opcode in HEAP_FREE_OPCODES or instr.is_sharding_constraint or \
                    (drop_parameters and instr.opcode == "parameter"):
                continue
            else:
                count += weight(instr)
        memo[key] = count
        return count

    comps = reverse_post_order(module)
    # computations reached only through inlinable calls are counted at their call sites, not on their own
    other = {id(module.entry)}
    for comp in comps:
        for instr in comp.instructions:
            if instr.opcode in ("while", "conditional") or (instr.opcode == "call" and not is_inlinable_call(instr)):
                other.update(id(c) for c in instr.called_computations)
    return sum(inlined(comp, False) for comp in comps if id(comp) in other)


def _prefetch_slots(instr) -> int:
    """Copy-starts memory-space assignment may give ``instr`` when its buffers live in HBM: one prefetch
    per array operand it reads (a copy into VMEM before the use) and one eviction of its own result (a copy
    back to HBM); each an asynchronous copy whose start is a tuple header in the heap."""
    reads = sum(1 for op in instr.operands if not op.shape.is_tuple and op.shape.is_array and
                op.opcode not in ("constant", "iota"))
    return reads + 1


def temporaries_fit_vmem(module, device: str | None) -> bool:
    """True when ``module``'s buffers fit in ``device``'s VMEM (:func:`hloshard.cost.tpu_layout.vmem_bytes`)
    even unsharded: the sum over the computations reached from the entry through control flow of each
    one's peak of live buffers in text order (:func:`hloshard.cost.liveness.computation_peak_bytes`; every
    array whole, with its padded TPU layout, :func:`hloshard.cost.tpu_layout.padded_bytes`; entry
    parameters and outputs included).  Then libtpu keeps every data temporary in VMEM, and its peak was the
    model's HBM data to one 512 B granule plus its heap on every such plan measured (36 in round 20, 35 in
    round 21, held out included).  False without VMEM (a profile without a measured size)."""
    vmem = vmem_bytes(device)
    if vmem <= 0:
        return False
    set_fusion_backend(module, "tpu")   # the TPU compiler's buffers: no XLA CPU library fusion

    def whole(instr) -> int:
        shape = instr.shape
        return sum(padded_bytes(leaf.element_type, leaf.dims)
                   for leaf in (shape.leaves() if shape.is_tuple else [shape])
                   if leaf.is_array and element_byte_size(leaf.element_type) > 0)

    return _peaks_within(module, whole, vmem)


def _peaks_within(module, size_of, limit: float) -> bool:
    """True when the sum over ``module``'s computations reached through control flow of each one's peak of
    live buffers in text order (:func:`hloshard.cost.liveness.computation_peak_bytes`, buffers sized by
    ``size_of(instr)`` in bytes) stays at or below ``limit`` bytes."""
    total = 0
    for comp in reverse_post_order(module):
        total += computation_peak_bytes(comp, size_of=size_of)
        if total > limit:
            return False
    return True


#: Share of the VMEM that a written plan's temporaries may take for its data to count as exact
#: (:func:`written_temporaries_fit_vmem`).  Measured (:mod:`hloshard.cost.tpu_layout`, the matmul-chain
#: probe on v5e): two live 16.8 MB temporaries (n = 2048, 32 MiB) stayed in VMEM, two of 67 MB (n = 4096,
#: 128 MiB: the whole VMEM) did not -- libtpu put one in HBM where the VMEM rule said none.  Half the VMEM
#: lies between the two probes (room for memory-space assignment's prefetches beside the temporaries);
#: the plans measured on both sides of it: BENCHMARKS.md "Round 22, helper tpumem".
WRITTEN_VMEM_SHARE = 0.5


def written_temporaries_fit_vmem(module, device: str | None) -> bool:
    """True when the *written* ``module`` (its instructions annotated with the plan's shardings, as
    ``solve`` writes it) keeps its temporaries per device within :data:`WRITTEN_VMEM_SHARE` of
    ``device``'s VMEM: the sum over the computations reached through control flow of each one's peak
    of live buffers in text order (:func:`hloshard.cost.liveness.computation_peak_bytes`), every buffer
    its padded per-device tile under its written sharding
    (:func:`hloshard.cost.tpu_layout.padded_bytes_per_device`; unannotated or unreadable: the whole
    array), entry parameters left out (always in HBM, counted exactly by the model; entry outputs are
    kept in: conservative).  Then libtpu keeps every data temporary in VMEM and its peak is the model's
    HBM data plus its heap, as on every plan measured whose temporaries fit (:func:`temporaries_fit_vmem`
    asks the same of the module unsharded, before a plan exists).  False without VMEM."""
    vmem = vmem_bytes(device)
    if vmem <= 0:
        return False
    limit = WRITTEN_VMEM_SHARE * vmem
    entry = module.entry
    set_fusion_backend(module, "tpu")   # the TPU compiler's buffers: no XLA CPU library fusion

    def tile(instr) -> int:
        if instr.opcode == "parameter" and instr.parent is entry:
            return 0
        shape = instr.shape
        try:
            return int(padded_bytes_per_device(shape, instr.sharding))
        except (ValueError, AttributeError, KeyError, IndexError):
            return sum(padded_bytes(leaf.element_type, leaf.dims)
                       for leaf in (shape.leaves() if shape.is_tuple else [shape])
                       if leaf.is_array and element_byte_size(leaf.element_type) > 0)

    return _peaks_within(module, tile, limit)


class TpuMemoryDevice(str):
    """The name of a TPU device profile (``tpu-v5e``: what ``mesh.memory_device`` holds, a ``str``) with
    what a memory budget needs to know of the one module being planned for it: ``heap_slots``
    (:func:`heap_slot_bound`) and ``temporaries_fit_vmem`` (:func:`temporaries_fit_vmem`).
    :func:`hloshard.cost.memory.model_limit` reads them; a plain profile name (no module known) gets the
    conservative defaults there.  Compares and hashes as its name."""

    heap_slots: int
    temporaries_fit_vmem: bool

    def __new__(cls, name: str, heap_slots: int, fits_vmem: bool):
        out = super().__new__(cls, name)
        out.heap_slots = max(0, int(heap_slots))
        out.temporaries_fit_vmem = bool(fits_vmem)
        return out

    def __reduce__(self):
        return (TpuMemoryDevice, (str(self), self.heap_slots, self.temporaries_fit_vmem))


def written_memory_device(device, module):
    """The memory device a budget's check of the written ``module`` reads: ``device`` (``mesh.memory_device``)
    itself unless it is a :class:`TpuMemoryDevice` whose allowance the written plan narrows:

    * the module's temporaries do not fit VMEM unsharded and the written plan's do
      (:func:`written_temporaries_fit_vmem`): the data margin dropped (no VMEM term, U = 1,
      :func:`hloshard.cost.memory.model_limit`);
    * the written plan splits no dim a ``slice`` cuts (:func:`written_heap_slot_bound`): no halo exchange
      can be made, so the cutting slices' :data:`SLOTS_PER_CUTTING_SLICE` are not allowed for.

    Never a larger margin than ``device``'s, so a plan the solver kept within ``model_limit(budget,
    device)`` is kept here."""
    if not isinstance(device, TpuMemoryDevice) or module is None:
        return device
    fits = device.temporaries_fit_vmem or written_temporaries_fit_vmem(module, str(device))
    slots = min(device.heap_slots, written_heap_slot_bound(module, prefetches=not device.temporaries_fit_vmem))
    if (slots, fits) == (device.heap_slots, device.temporaries_fit_vmem):
        return device
    return TpuMemoryDevice(str(device), slots, fits)


def splits_cut_dim(instr) -> bool:
    """True when ``instr``, a slice cutting a dim (:func:`cuts_a_dim`), may make a halo exchange under its
    written shardings: some cut dim is split (more than one tile) in the slice's or its operand's sharding,
    or either sharding is unknown (none, a tuple, manual, maximal).  A cut dim whole on every device is
    sliced locally."""
    if not cuts_a_dim(instr):
        return False
    op = instr.operands[0]
    idims, odims = tuple(op.shape.dims), tuple(instr.shape.dims)
    tin, tout = _tiles(op.sharding, len(idims)), _tiles(instr.sharding, len(odims))
    if tin is None or tout is None:
        return True
    return any(int(o) < int(i) and (tin[d] > 1 or tout[d] > 1) for d, (i, o) in enumerate(zip(idims, odims)))


def written_heap_slot_bound(module, prefetches: bool = False) -> int:
    """:func:`heap_slot_bound` of a *written* ``module`` (its shardings are the plan's): the cutting-slice
    term only for the slices whose written shardings split a cut dim (:func:`splits_cut_dim`).  At most
    :func:`heap_slot_bound` of the same module."""
    def slots(instr) -> int:
        out = 1 + (SLOTS_PER_CUTTING_SLICE if splits_cut_dim(instr) else 0)
        return out + (_prefetch_slots(instr) if prefetches else 0)

    return compiled_instruction_sum(module, slots)


def tpu_memory_device(name: str, module) -> str:
    """``name`` (a TPU profile's name) as a :class:`TpuMemoryDevice` for ``module``; ``name`` itself when
    ``module`` is None.  Marks ``module`` as planned for a TPU (:func:`hloshard.cost.liveness.set_fusion_backend`:
    its cost graph, evaluations and roofline then leave out XLA CPU's library fusions)."""
    if module is None:
        return name
    set_fusion_backend(module, "tpu")   # planned for a TPU: its memory model has no XLA CPU library fusion
    fits = temporaries_fit_vmem(module, name)
    return TpuMemoryDevice(name, heap_slot_bound(module, prefetches=not fits), fits)




# --- the spilled offset scalar (round 25: one-output programs; round 26: any number of outputs) --------

#: Resharding steps (:func:`hloshard.cost.reshard.plan`'s step kinds) that libtpu runs as an asynchronous
#: collective: its start and the multi-output fusion it decomposes into each take one slot of the heap
#: (libtpu's buffer assignment, round 25: ``async-collective-start`` + a ``kOutput`` / ``kCustom`` fusion per
#: all-gather; all-to-all's decomposed fusions; a collective-permute's start and its select fusion).
ASYNC_STEP_KINDS = frozenset({"all-gather", "all-to-all", "collective-permute"})

#: Slots per asynchronous collective (:data:`ASYNC_STEP_KINDS`): its start and its fusion.
SLOTS_PER_ASYNC_STEP = 2

def _tile_map(sharding, rank: int, dims: tuple[int, ...], devices: int) -> tuple[int, ...] | None:
    """Per device ``0 .. devices-1``, its tile index along ``dims`` of an array of ``rank`` under
    ``sharding`` (row-major over ``dims``; 0 everywhere when replicated along them), None when unknown
    (no sharding, a tuple, manual or maximal, a rank or device count that does not match)."""
    tiles = _tiles(sharding, rank)   # the one validity check (None: unknown)
    if tiles is None:
        return None
    if sharding.is_replicated:
        return (0,) * devices
    out = []
    try:
        for d in range(devices):
            idx = sharding.tile_index(d)
            k = 0
            for dim in dims:
                k = k * int(tiles[dim]) + int(idx[dim])
            out.append(k)
    except ValueError:
        return None
    return tuple(out)


def _term(tile_map: tuple[int, ...]) -> str:
    """How XLA's SPMD partitioner gets a per-partition offset from a tile map (round 25, read in libtpu's
    final programs): ``"none"`` (not split: no term), ``"pid"`` (the tile is the partition id itself:
    arithmetic on ``partition-id`` in scalar memory), else ``"table"`` (a ``dynamic-slice`` of a constant
    ``s32[N]`` table by ``partition-id``: an ``s32[1]`` value in HBM; the table itself a prefetched
    constant, one per distinct table: XLA's CSE)."""
    if all(t == 0 for t in tile_map):
        return "none"
    if all(t == d for d, t in enumerate(tile_map)):
        return "pid"
    return "table"


def _offset_terms(a, a_rank, b, b_rank, a_dims, b_dims, a_shape, b_shape, devices: int,
                  moved: bool = False) -> tuple[list, int] | None:
    """(the tables, the number of partition-id terms) of the offset a device needs to go from its tile of
    ``a`` along ``a_dims`` to its tile of ``b`` along ``b_dims`` (shapes ``a_shape`` / ``b_shape``); a
    table is the tuple of per-device offsets in elements.  None when unknown, or when the tiles are the
    same and not ``moved`` (a slice off the tile boundaries moves data between devices with the same
    maps)."""
    ta = _tile_map(a, a_rank, a_dims, devices)
    tb = _tile_map(b, b_rank, b_dims, devices)
    if ta is None or tb is None or (ta == tb and not moved):
        return None
    tables, pids = [], 0
    for tmap, sharding, dims, shape in ((ta, a, a_dims, a_shape), (tb, b, b_dims, b_shape)):
        kind = _term(tmap)
        if kind == "pid":
            pids += 1
        elif kind == "table":
            tiles = math.prod(int(sharding.tile_dims[d]) for d in dims)
            block = -(-math.prod(int(shape[d]) for d in dims) // tiles)
            tables.append(tuple(block * t for t in tmap))
    return tables, pids


def regroup_tables(instr, devices: int) -> list:
    """The offset tables (:func:`_offset_terms`) when XLA's SPMD partitioner computes ``instr`` -- a
    ``reshape`` or ``slice`` whose operand is split along dims the instruction regroups -- with two
    per-partition offsets in HBM live at once: both tile maps read from constant tables (:func:`_term`;
    libtpu's final program: ``dynamic-slice(table_a, partition-id) - dynamic-slice(table_b,
    partition-id)``, or a chain of table lookups feeding two compares; round 25 read them in the buffer
    assignments of ``attention_6heads``' and ``transformer_block``'s GSPMD plans); else empty.
    Regrouped: a reshape dim group split on both sides but not as one contiguous block per device with
    the same count (``[8,64,384]`` 4-way on 384 -> ``[8,64,6,64]`` 2-way on the 6 heads), a slice of a
    dim split in the operand and the result that does not cut at the operand's tile boundaries
    (``[..,768]`` 4-way, 192 per device, sliced at 256 and 512).  ``devices``: the partitions.
    Shardings read as written; an instruction without them: empty."""
    if instr.opcode not in ("reshape", "slice") or len(instr.operands) != 1:
        return []
    op = instr.operands[0]
    if op.shape.is_tuple or instr.shape.is_tuple or not op.shape.is_array:
        return []
    idims, odims = tuple(op.shape.dims), tuple(instr.shape.dims)
    tin, tout = _tiles(op.sharding, len(idims)), _tiles(instr.sharding, len(odims))
    if tin is None or tout is None:
        return []
    pairs = []
    if instr.opcode == "slice":
        ranges = getattr(instr.attr("slice"), "ranges", None)
        if ranges is None or len(ranges) != len(idims):
            return []
        for d, (start, _limit, stride) in enumerate(ranges):
            if tin[d] == 1 or tout[d] == 1:
                continue
            shard = -(-idims[d] // tin[d])
            if stride != 1 or start % shard or -(-odims[d] // tout[d]) != shard:
                pairs.append(((d,), (d,)))
    else:
        try:
            groups = reshape_groups(idims, odims)
        except InputError:   # a malformed reshape is the verifier's to report
            return []
        for g in groups:
            if not g.in_dims or not g.out_dims:
                continue
            ti, to = tuple(tin[d] for d in g.in_dims), tuple(tout[d] for d in g.out_dims)
            ki, ko = math.prod(ti), math.prod(to)
            if ki == 1 or ko == 1:
                continue
            gi, go = tuple(idims[d] for d in g.in_dims), tuple(odims[d] for d in g.out_dims)
            if ki == ko and _major_only(ti, gi) and _major_only(to, go):
                continue
            pairs.append((g.in_dims, g.out_dims))
    for a_dims, b_dims in pairs:
        terms = _offset_terms(op.sharding, len(idims), instr.sharding, len(odims), a_dims, b_dims, idims, odims,
                              devices, moved=instr.opcode == "slice")
        if terms is not None and len(terms[0]) >= 2 and terms[1] == 0:
            return terms[0]
    return []


def halo_pairs(slices, devices: int) -> set:
    """The collective-permutes of XLA's SPMD partitioner's halo exchange for ``slices`` (``slice``
    instructions off their operand's tile boundaries, :func:`regroup_tables`): per operand and sliced dim,
    the distinct (source tile, destination tile) pairs, source != destination, over all its slices -- a
    device whose result tile of a slice needs elements of an operand tile other than its own receives
    that tile's piece; the partitioner emits one permute per pair, shared by the slices of one operand
    after CSE.  Read in the partitioned program of held-out set 8's ``qkv_split5_fwd`` GSPMD plan
    (round 26): a 4-way ``[.., 1600]`` sliced into five 320-wide pieces 4-way: 11 collective-permutes,
    11 of the 12 ordered pairs of the 4 tiles (this count: 12).  Returned as ``(operand name, dim,
    source, destination)`` tuples; ``devices``: the partitions."""
    pairs = set()
    for instr in slices:
        op = instr.operands[0]
        idims, odims = tuple(op.shape.dims), tuple(instr.shape.dims)
        tin, tout = _tiles(op.sharding, len(idims)), _tiles(instr.sharding, len(odims))
        ranges = getattr(instr.attr("slice"), "ranges", None)
        if tin is None or tout is None or ranges is None or len(ranges) != len(idims):
            continue
        for d, (start, limit, stride) in enumerate(ranges):
            if tin[d] == 1 or stride != 1:
                continue
            ta = _tile_map(op.sharding, len(idims), (d,), devices)
            tb = _tile_map(instr.sharding, len(odims), (d,), devices)
            if ta is None or tb is None:
                continue
            b = -(-idims[d] // tin[d])
            c = -(-odims[d] // tout[d])
            for dev in range(devices):
                lo = start + tb[dev] * c
                hi = min(limit, lo + c)
                for src in range(lo // b, (hi - 1) // b + 1) if hi > lo else ():
                    if src != ta[dev]:
                        pairs.add((op.name, d, src, ta[dev]))
    return pairs


def halo_slots(slices, devices: int) -> int:
    """The heap slots of the halo exchange for ``slices`` (off-tile slices the plan prices without a
    collective): a collective-permute-start per distinct pair (:func:`halo_pairs`) and the select fusion
    joining each slice's pieces (one per slice)."""
    return len(halo_pairs(slices, devices)) + len(slices)


def regrouped_offsets(instr, devices: int) -> bool:
    """True when :func:`regroup_tables` finds two table offsets live at once for ``instr``."""
    return bool(regroup_tables(instr, devices))


def _tiles(sharding, rank: int) -> tuple[int, ...] | None:
    """Tiles per dim of ``sharding`` on an array of ``rank`` (1s when replicated), None when unknown."""
    if sharding is None or sharding.is_tuple:
        return None
    if sharding.is_replicated:
        return (1,) * rank
    if not sharding.is_tiled or sharding.tiled_rank != rank:
        return None
    return tuple(int(t) for t in sharding.tile_dims)


def _major_only(tiles: tuple[int, ...], dims: tuple[int, ...]) -> bool:
    """A dim group split only along its major dim, evenly: each device holds one contiguous block."""
    return all(t == 1 for t in tiles[1:]) and dims[0] % tiles[0] == 0


#: Elementwise opcodes whose single-user producer of the root the TPU compiler fuses into the root's kernel
#: (a loop fusion): what they slice locally, the root's kernel reads (:func:`root_table_offsets`).
_FUSED_ELEMENTWISE = frozenset({"add", "subtract", "multiply", "divide", "maximum", "minimum", "negate", "exponential",
                                "log", "tanh", "logistic", "select", "convert", "abs", "sqrt", "rsqrt", "power",
                                "compare", "and", "or", "not", "clamp", "copy"})


def root_table_offsets(root, devices: int) -> list:
    """The offset tables (:func:`_offset_terms`) the kernel writing the entry output ``root`` (an array
    instruction, with the elementwise producers of its shape that only it reads, which the TPU compiler
    fuses into it) reads itself: where that kernel slices an operand locally (its tile and the operand's
    differ along a dim) with an offset made of table terms only -- no ``partition-id`` term, which would
    move the offset into scalar memory before the kernel runs.  That ``s32[1]`` offset in HBM is read by
    the kernel writing the output, which cannot host it in the buffer it writes (round 25: ``moe_layer``'s
    and ``attention_6heads``' solve plans; ``cross_attention_fwd``'s, batch 2-way -> 8-way, offset
    ``partition-id - table``, hosts it in the output).  An operand whose per-device tile the TPU lays out
    with other minor dims than the root's (:func:`hloshard.cost.tpu_layout.minor_pair`) is sliced by a
    kernel of its own and copied to the root's layout before the root's kernel runs, which then reads
    no offset (round 26, libtpu's final programs: ``mlp_two_out_fwd``'s solve plan, ``f32[128,384]{1,0}``
    sliced, copied to ``f32[128,96]{0,1}``; round 25's ``swiglu_fwd``; ``fused_qkv_train_step``'s
    weight updates read their slices' copies).  Empty when there is none."""
    if root.shape.is_tuple or not root.shape.is_array:
        return []
    dims = tuple(root.shape.dims)
    rank = len(dims)
    kernel, stack = [], [root]
    while stack:
        instr = stack.pop()
        kernel.append(instr)
        for op in instr.operands:
            if op.opcode in _FUSED_ELEMENTWISE and len(op.users) == 1 and not op.shape.is_tuple and \
                    tuple(op.shape.dims) == dims and op not in kernel:
                stack.append(op)
    found = []
    layout = _tile_layout(root.shape, root.sharding)
    for instr in kernel:
        for op in instr.operands:
            if op.shape.is_tuple or not op.shape.is_array or tuple(op.shape.dims) != dims or op in kernel:
                continue
            if _tile_layout(op.shape, op.sharding) != layout:
                continue   # sliced by its own kernel before the layout copy the root's kernel reads
            tables, pids = [], 0
            for d in range(rank):
                terms = _offset_terms(op.sharding, rank, instr.sharding, rank, (d,), (d,), dims, dims, devices)
                if terms is not None:
                    tables += terms[0]
                    pids += terms[1]
            if tables and not pids:
                found += tables
    return found


def _tile_layout(shape, sharding):
    """The (minor, second-minor) dims of the TPU layout of ``shape``'s per-device tile under ``sharding``
    (:func:`hloshard.cost.tpu_layout.minor_pair`); None below rank 2 or when the tile is unknown."""
    dims = tuple(shape.dims)
    if sharding is not None and sharding.is_tiled:
        if sharding.tiled_rank != len(dims):
            return None
        dims = tuple(sharding.tile_shape(dims))
    try:
        return minor_pair(shape.element_type, dims)
    except KeyError:
        return None


def root_reads_table_offset(root, devices: int) -> bool:
    """True when :func:`root_table_offsets` finds one."""
    return bool(root_table_offsets(root, devices))


def entry_output_arrays(module) -> int:
    """The entry computation's output arrays (the root tuple's array leaves, or 1): libtpu's only HBM
    buffers free to host a partition-offset scalar before they are written."""
    root = module.entry.root
    if root.shape.is_tuple:
        return sum(1 for leaf in root.shape.leaves() if leaf.is_array and element_byte_size(leaf.element_type) > 0)
    return 1


def entry_outputs(module) -> list:
    """The instructions writing the entry computation's output arrays, in the root tuple's order (each
    once; the root itself when it is an array): the buffers libtpu may host a partition-offset scalar in
    before they are written (:func:`spill_heap_slots`)."""
    root = module.entry.root
    while root.opcode == "tuple" and len(root.operands) == 1:
        root = root.operands[0]
    if root.opcode != "tuple":
        return [root] if not root.shape.is_tuple and root.shape.is_array else []
    out, seen = [], set()
    for op in root.operands:
        if op.shape.is_tuple or not op.shape.is_array or element_byte_size(op.shape.element_type) <= 0 \
                or id(op) in seen:
            continue
        seen.add(id(op))
        out.append(op)
    return out


def _local_offsets(instr, devices: int) -> list[tuple]:
    """The partition offsets (each the sorted tuple of its tables, :func:`_offset_terms`) that XLA's SPMD
    partitioner computes in HBM for ``instr`` slicing an operand of its own shape locally: per operand,
    the tables of the dims where ``instr``'s tile is a table lookup (split, not by the partition id
    itself), no term being ``partition-id`` arithmetic (scalar memory: no HBM value).  A dim the result
    leaves whole is an all-gather, no offset.  Empty for tuples, parameters and unknown shardings."""
    if instr.shape.is_tuple or not instr.shape.is_array or instr.opcode in ("parameter", "tuple"):
        return []
    dims = tuple(instr.shape.dims)
    rank = len(dims)
    out = []
    for op in instr.operands:
        if op.shape.is_tuple or not op.shape.is_array or tuple(op.shape.dims) != dims:
            continue
        tables, pids, sliced = [], 0, False
        for d in range(rank):
            terms = _offset_terms(op.sharding, rank, instr.sharding, rank, (d,), (d,), dims, dims, devices)
            if terms is None:
                continue
            tables += terms[0]
            pids += terms[1]
            tb = _tile_map(instr.sharding, rank, (d,), devices)
            sliced = sliced or (tb is not None and _term(tb) == "table")
        if tables and not pids and sliced:
            out.append(tuple(sorted(set(tables))))
    return out


#: The latency the scheduler puts between a collective's start and its done, in units of one instruction
#: (XLA's ``ApproximateLatencyEstimator``: ``kHighLatency = 5000`` between an async start and its done,
#: ``kLowLatency = 1`` on every other edge; ``latency_hiding_scheduler.h``).  :func:`schedule_depths`.
COLLECTIVE_LATENCY = 5000.0


def schedule_depths(module, collectives: Mapping[str, int]) -> dict[int, float]:
    """Where libtpu's scheduler puts each instruction of ``module``'s entry computation, as its depth: the
    longest latency path to it from the computation's sources (``id(instr)`` -> depth), every instruction
    one unit after its latest operand plus :data:`COLLECTIVE_LATENCY` per collective the plan makes on
    it (``collectives``: instruction name -> how many: its strategy's own -- a dot's or reduce's partial
    sums -- and the reshardings of its operands, pins included).

    XLA's latency-hiding scheduler lists the program bottom-up and, among the instructions ready, prefers
    the deeper (its graph nodes' depths: the longest latency path from the top, from the latency
    estimator; ``DefaultSchedulerCore::ScheduleCandidate``'s depth rules): the deeper an instruction, the
    later it runs.  Read in libtpu's
    final programs (round 28): ``transformer_train_step``'s solve plan writes its weight updates (steps
    1150-1191 of 1293) before its bias and layer-norm updates (1261-1291), which wait for the layer-norm
    gradients of the first layer -- the gradient of its input, behind the collective matmuls of the q, k,
    v weights -- and the combined all-reduce (``all-reduce.80``) that follows them; the written module's
    order (jax's, outputs in the root's order) has them the other way round.  ``fused_qkv_train_step``'s
    (no layer norm): the bias updates first (373-401), the weight updates last (408-428), the fused qkv
    weight's behind the all-to-all of its gradient's pin (``concatenate.3.pin``).  Unit depths alone put
    that weight update one step before the bias updates: the collectives' latency orders them.  Not
    modelled: the estimator's node costs, the scheduler's memory-pressure and async rules before depth,
    and the collectives the combiners merge (a combined all-reduce waits for its last member)."""
    depth: dict[int, float] = {}
    for instr in module.entry.instructions:
        stack = [instr]
        while stack:
            x = stack[-1]
            if id(x) in depth:
                stack.pop()
                continue
            todo = [o for o in x.operands if id(o) not in depth]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            depth[id(x)] = 1.0 + COLLECTIVE_LATENCY * collectives.get(x.name, 0) + \
                max((depth[id(o)] for o in x.operands), default=-1.0)
    return depth


def _entry_positions(module, collectives: Mapping[str, int] | None) -> dict[int, float]:
    """``id(instr)`` -> its place in the entry's schedule: :func:`schedule_depths` when the plan's
    ``collectives`` are given (equal depths in the written instruction order: the scheduler's last rule
    keeps the order it was given; the fraction added stays under a quarter of a unit, so a read just
    before an instruction, ``- 0.5``, stays before it), else the written instruction order."""
    order = module.entry.instructions
    if collectives is not None:
        depth = schedule_depths(module, collectives)
        return {id(instr): depth[id(instr)] + 0.25 * k / (len(order) + 1) for k, instr in enumerate(order)}
    return {id(instr): float(k) for k, instr in enumerate(order)}


def _written_at(module, collectives: Mapping[str, int] | None = None) -> list[float]:
    """Places in the entry's schedule (:func:`_entry_positions`) of the instructions writing its outputs."""
    pos = _entry_positions(module, collectives)
    return [pos.get(id(o), float(len(pos))) for o in entry_outputs(module)]


def offset_reads(module, devices: int, collectives: Mapping[str, int] | None = None) -> dict[tuple, float]:
    """Every partition offset the written ``module``'s entry computation holds in HBM (the sorted tuple of
    its tables -> the place of its last read in the entry's schedule, :func:`_entry_positions`: the
    instruction order, or with the plan's ``collectives`` libtpu's scheduler's depths): those the kernels
    writing entry outputs read themselves (:func:`root_table_offsets`; at the output's place) and
    every local slice by a table (:func:`_local_offsets`; read by a kernel of its own, just before the
    instruction's place)."""
    pos = _entry_positions(module, collectives)
    reads: dict[tuple, float] = {}
    for instr in module.entry.instructions:
        for tables in _local_offsets(instr, devices):
            reads[tables] = max(reads.get(tables, -1), pos[id(instr)] - 0.5)
    for o in entry_outputs(module):
        tables = tuple(sorted(set(root_table_offsets(o, devices))))
        if tables:
            reads[tables] = max(reads.get(tables, -1), pos.get(id(o), float(len(pos))))
    return reads


def unhosted_output_offsets(module, devices: int, collectives: Mapping[str, int] | None = None) -> list:
    """The partition offsets of :func:`offset_reads` (each the sorted tuple of its tables: libtpu combines
    a difference of table lookups, ``subtract(dynamic-slice(table_a), dynamic-slice(table_b))``, into one
    ``s32[1]``, and XLA's CSE makes one value per distinct offset) that no entry output's buffer can
    host.  libtpu computes every such value at the start of the program (its final programs: the
    ``dynamic-slice``s of the tables by ``partition-id`` first), so all are live at once until their last
    reads, and it hosts one only in an output buffer written after its last read (round 20's placement
    rule, ``tests.tpu_oracle.offset_scalar_spills``), one value per buffer.  The order outputs are written
    in: with the plan's ``collectives`` (instruction name -> count, :func:`schedule_depths`) libtpu's
    scheduler's, by depth (round 28); without them the written module's entry order (the order XLA
    starts from).  Each offset, latest last read first, takes an untaken output written after it; an
    offset left without one spills into the heap (:func:`spill_heap_slots`).

    Read in libtpu's buffer assignments and final programs (round 26): ``fused_qkv_train_step``'s solve
    plan (17 outputs) holds four table offsets; three are hosted in the ``f32[32]`` bias updates written
    after their last reads, the fourth, ``dynamic-slice(table {0,0,0,0,128,128,128,128}, partition-id)``,
    is read last by the kernels writing weight updates (``bitcast_subtract_fusion``: the update written
    finer than the weight it reads), the last kernels of the program: no output is written after it,
    spilled (hloshard's order: the same offset read by the last output, ``sub.117``).  Held-out set 8's
    ``glu_split_fwd`` solve plan (one output): the root's slice of ``x`` (its own kernel, a layout copy)
    and the pin of ``mul.1`` both hold an offset, one host: ``mul.1.pin``'s spilled.
    ``transformer_train_step``'s GSPMD plan: the readers are followed by outputs that read none, hosted;
    ``mlp_train_step``'s solve plan: three offsets (one the ``subtract`` of two tables) for three later
    outputs (libtpu spilled the ``subtract`` and reported a temp of 0, the known exception of
    :func:`hloshard.cost.tpu_layout.reported_temp_bytes`: both say 0).  In the written order
    ``transformer_train_step``'s solve plan spilled (its last weight update reads an offset and no
    output follows it); in libtpu's schedule its bias and layer-norm updates follow the weight updates
    and host all five offsets: round 28's depths (:func:`schedule_depths`) order them so."""
    reads = offset_reads(module, devices, collectives)
    written = sorted(_written_at(module, collectives))
    spilled = []
    taken: set[int] = set()
    for t, last in sorted(reads.items(), key=lambda kv: -kv[1]):
        host = next((w for w in written if w > last and w not in taken), None)
        if host is None:
            spilled.append(t)
        else:
            taken.add(host)
    return spilled


def combined_collective_slots(module, partial_sums: Mapping[str, Sequence[tuple]]) -> int:
    """The tuple headers of the combined gradient collectives of the written ``module``'s entry
    computation (a count): the plan's partial-sum collectives (``partial_sums``: instruction name ->
    ``(kind, mesh axes, scattered)`` per all-reduce or reduce-scatter its strategy makes; ``scattered``:
    the instruction's result stays split along the reduced axes, so XLA's partitioner slices the
    all-reduced sum and its reduce-scatter creator makes it a reduce-scatter) of the height-0 class
    (:func:`hloshard.cost.combiner.collective_heights`: nothing that may carry a collective depends on
    them -- a training step's gradients), grouped by kind and mesh axes; each group of two or more is one
    variadic collective with a tuple result, a 512 B header in libtpu's HBM heap.

    Read in libtpu's buffer assignments and optimised programs (round 29, ``v5e:2x4``): the solve plans of
    ``fused_qkv_train_step`` (17 gradient sums: a 7-operand ``all-reduce`` of the loss and bias gradients
    over the data axis, a 2-operand one over all devices, and the 8 weight gradients in one ``kCustom``
    fusion calling ``all-reduce-scatter``: 3 headers, 3 here), ``transformer_train_step`` (3, 3),
    held-out set 11's ``attn_ln_bias`` (an all-reduce of 6 and an all-reduce-scatter of 4: 2, 2),
    ``deep_mlp_bias`` (2, 2), ``qkv_bias`` (2, 2), ``ln_mlp_bias2`` (1, 1), ``rms_swiglu`` (0, 0).  The
    partial sums of higher classes (a forward layer's all-reduce over the model axes) were never combined
    in those programs (``attn_ln_bias``: three of height 1, none combined): not counted."""
    heights = collective_heights(module.entry)
    groups: dict = {}
    for instr in module.entry.instructions:
        if heights.get(id(instr)) != 0:
            continue
        for kind, axes, scattered in partial_sums.get(instr.name, ()):
            key = ("reduce-scatter" if scattered or kind == "reduce-scatter" else "all-reduce", tuple(axes))
            groups[key] = groups.get(key, 0) + 1
    return sum(1 for n in groups.values() if n >= 2)


def spill_heap_slots(module, devices: int, resharding_steps: Callable[[], Mapping[str, Sequence[str]]],
                     collectives: Callable[[], Mapping[str, int]] | None = None,
                     partial_sums: Callable[[], Mapping[str, Sequence[tuple]]] | None = None) -> int:
    """The slots of libtpu's HBM temp heap when a partition-offset scalar of the written ``module`` spills
    into it, 0 when none is predicted to (a count; :func:`hloshard.cost.tpu_layout.header_heap_bound`
    turns it into the bytes ``memory_analysis()`` reports).  ``devices``: the partitions;
    ``resharding_steps()``: instruction name -> the step kinds of the reshardings on its operands in the
    evaluated plan (:func:`hloshard.autoshard.evaluate.reshardings_of`; called only where a spill is
    predicted); ``collectives()``: instruction name -> the collectives the plan makes on it (its
    strategy's and its operands' reshardings), the latencies of libtpu's schedule
    (:func:`schedule_depths`; called only for a program with several outputs and an offset in HBM; None:
    the written order).

    **When** (libtpu's buffer assignment, :mod:`hloshard.cost.tpu_layout`: an ``s32[1]`` offset goes into
    an entry output's buffer not yet written, never into the buffer of the kernel that reads it, else
    into the heap): (a) a partition offset in HBM that no output written after its last read can host
    (:func:`unhosted_output_offsets` over :func:`offset_reads`: with one output, whenever the root's
    kernel reads one, :func:`root_reads_table_offset` -- the output written finer than an operand it
    slices locally -- or two offsets are held anywhere; with several, round 26, when more offsets are
    read late than outputs are written after them: an untied training step whose last weight updates
    are written finer than the weights); (b) in a program with one output array, two offsets of one
    regroup live at once (:func:`regrouped_offsets`; with more outputs not predicted).  With several
    outputs and libtpu's schedule (``collectives`` given), a spill of differences of two tables only
    (``subtract`` scalars) is reported as 0: libtpu's ``memory_analysis()`` reported a temp on every plan
    whose heap held a spilled ``dynamic-slice`` of one table and 0 on every plan whose heap held only
    ``subtract`` / ``compare`` / ``multiply`` scalars (round 26: 37 plans, samples and held-out sets 7-10,
    no exception; ``mlp_train_step``'s and set 10's ``mlp_bias_train_step``'s solve plans spill one
    ``subtract`` each and report 0).  Not predicted:
    offsets and loop counters spilled inside a ``while`` body (``scan_mlp_train_step``'s solve plan
    spills four such scalars; its entry-level offset read by the last weight update is what (a) sees,
    and libtpu hosted that one -- the heap right, partly for another reason).

    **How many slots** (the heap's tuple headers, read per kind in libtpu's buffer assignments of the
    spilling plans, round 25): one per entry parameter (memory-space assignment's prefetch copy-start),
    one per distinct offset table (:func:`_offset_terms`: its prefetch; identical tables are one constant
    after XLA's CSE), :data:`SLOTS_PER_ASYNC_STEP` per asynchronous collective of the plan
    (:data:`ASYNC_STEP_KINDS`, counted from ``resharding_steps``), the halo exchange of the regrouped
    slices the plan prices without a collective (:func:`halo_slots`: a permute per distinct tile pair of
    each operand's slices, a select per slice; round 25 counted 3 per slice), and one for the spilled
    offset.  With several outputs (a training step) and the plan's ``partial_sums()`` (instruction name ->
    ``(kind, mesh axes, scattered)`` per all-reduce / reduce-scatter its strategy makes; round 29) also:
    every distinct table of :func:`offset_reads` (each a prefetched constant, not only the roots'), one
    per multi-output kernel of the TPU fusion rule (:func:`hloshard.cost.roofline.multi_output_kernels`:
    ``kLoop`` / ``kOutput`` fusions with tuple results) and one per combined gradient collective
    (:func:`combined_collective_slots`).  Read in libtpu's buffer assignment of ``fused_qkv_train_step``'s
    solve plan (51 headers: 18 parameter and 4 table prefetches, 3 async collective starts and 9
    collective-matmul fusions, 9 ``kLoop`` and 4 ``kOutput`` tuple fusions, a ``kCustom``
    ``all-reduce-scatter`` of the 8 weight gradients, 2 combined all-reduces, the spilled scalar;
    round 28 counted 30, now 49) and of held-out set 11's spilling solve plans.  Programs with one
    output keep round 25's count (``attention_6heads``' solve plan: its score dot writes no tuple with
    the ``reduce-max`` the fusion rule gives it, 17 slots measured and counted without it).  Not counted:
    sorts' tuples, the loop fusions of a halo beyond its select, the further offsets and compares of
    several off-tile slices (held-out set 8's ``qkv_split5_fwd``: 11 spilled scalars), the collective
    matmuls' fusions beyond one per async collective, and the multi-output kernels the fusion rule does
    not see (a dot writing the bias gradient ``reduce`` of its result beside its ``convert``: 3 such
    ``kOutput`` fusions in set 11's ``attn_ln_bias_train_step``).  :func:`heap_slot_bound` allows for all
    of them.
    Empirical: BENCHMARKS.md "Round 25, helper tpupeak" and "Round 26, helper tpuspill" give predicted /
    reported on the plans tuned on (the samples, held-out sets 7-9) and on held-out set 10; "Round 29,
    helper tpu" the kernel terms on the samples, sets 7-11 and held-out set 12.
    """
    outs = entry_outputs(module)
    regrouped = {}
    if len(outs) == 1:   # (b): two offsets live at once outgrow one host; with more, not predicted
        for comp in reverse_post_order(module):
            for instr in comp.instructions:
                tables = regroup_tables(instr, devices)
                if tables:
                    regrouped[instr] = tables
    if not regrouped:
        order = collectives() if collectives is not None and len(outs) > 1 and offset_reads(module, devices) \
            else None
        spilled = unhosted_output_offsets(module, devices, order)
        if not spilled or order is not None and all(len(t) > 1 for t in spilled):
            return 0   # none spills, or only differences of two tables: reported as 0 (docstring)
    tables = {t for o in outs for t in root_table_offsets(o, devices)} | \
        {t for ts in regrouped.values() for t in ts}
    kernels = 0
    if partial_sums is not None and len(outs) > 1:   # round 29's terms: a training step (docstring)
        tables |= {t for key in offset_reads(module, devices) for t in key}
        kernels = multi_output_kernels(module.entry, TPU_FUSION) + combined_collective_slots(module, partial_sums())
    params = sum(1 for i in module.entry.instructions if i.opcode == "parameter")
    resharding_steps = resharding_steps()
    asyncs = sum(1 for kinds in resharding_steps.values() for k in kinds if k in ASYNC_STEP_KINDS)
    halos = [i for i in regrouped if i.opcode == "slice" and
             not any(k in ASYNC_STEP_KINDS for k in resharding_steps.get(i.name) or ())]
    return params + len(tables) + kernels + SLOTS_PER_ASYNC_STEP * asyncs + halo_slots(halos, devices) + 1
