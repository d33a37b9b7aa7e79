"""What a memory budget on a TPU must allow for beyond the model's HBM data: libtpu's temp heap.

libtpu's ``memory_analysis()`` of a plan is the model's HBM data (:func:`hloshard.cost.tpu_layout.hbm_peak`)
plus its HBM temp heap (:func:`hloshard.cost.tpu_layout.reported_temp_bytes`): one 32,256 B slot per async
header or spilled partition-offset scalar, reported as 0 or in full depending on one scalar's placement
(``tpu_layout``'s module docstring).  The heap is a *count*, so the budget's margin is additive
(:func:`hloshard.cost.memory.model_limit`): this module bounds the count for a module before any plan is
chosen (:func:`heap_slot_bound`), says when the model's data is exact (:func:`temporaries_fit_vmem`), and
carries both on the mesh's ``memory_device`` (:class:`TpuMemoryDevice`, set by
:func:`hloshard.mesh_setup.timed_mesh_from_options`, and for ``--mesh auto``'s candidates by
``hloshard.mesh_search``), where every budget path already reads the device.
"""

from __future__ import annotations

from ..hlo.callgraph import reverse_post_order
from ..hlo.shape import element_byte_size
from .liveness import computation_peak_bytes
from .tpu_layout import padded_bytes, vmem_bytes

#: Opcodes that never make a slot of libtpu's HBM temp heap by themselves (:func:`heap_slot_bound`): views,
#: layout changes and constants the TPU compiler folds into a kernel or an allocation it already has
#: (``Sharding`` custom-calls, a written plan's pins, are layout annotations as well).
HEAP_FREE_OPCODES = frozenset({"constant", "get-tuple-element", "tuple", "bitcast", "reshape", "transpose",
                               "broadcast", "convert", "copy", "iota", "after-all", "partition-id", "replica-id"})


def heap_slot_bound(module) -> int:
    """An upper bound on the slots of libtpu's HBM temp heap for any plan of ``module`` (a
    :class:`hloshard.hlo.ir.Module`; a count, plan-independent): the instructions of the computations
    reached from the entry through control flow (each once, not per trip), less those of
    :data:`HEAP_FREE_OPCODES` and ``Sharding`` custom-calls.

    What fills the heap (:mod:`hloshard.cost.tpu_layout`; read from libtpu's buffer assignment of the 18 sample plans,
    round 21): one slot per tuple-valued instruction of the compiled entry computation -- a copy-start of
    a prefetched parameter or offset table, an asynchronous collective's start, the multi-output fusions
    of a collective matmul and of sibling loops, a collective-permute-start, a combined all-reduce, a
    sort's tuple; a loop body's multi-output fusions; a slice-start takes two -- (exactly the heap's headers
    on the 17 sample plans whose final HLO was read) plus one per
    partition-offset scalar that found no free entry output.  Which of those libtpu makes depends on its
    fusion, scheduling and memory-space assignment, which hloshard does not replay; the count of the
    source program's computing instructions bounds them: measured heap / bound 0.09-0.89 on the 18 sample
    plans (tuned on; the tightest ``attention_6heads`` solve, 17 slots of 19), and on the 18 held-out
    plans of ``benchmarks/attention_heads.py`` and ``make_transformer.py --layers 2`` (not looked at
    before the rule was fixed: 0.21-0.84), on three plans compiled after the margin was final (6-layer
    transformer, ``../shared/cases/decoder2.py``: 0.12-0.22) and on MaxText's GSPMD plan (165 of 883):
    BENCHMARKS.md "Round 21, helper tpuheap".  An empirical bound, not a
    derivation: a module whose compiled program makes more async operations per source instruction than
    these (e.g. a long collective-permute pipeline per instruction) could exceed it."""
    count = 0
    for comp in reverse_post_order(module):
        for instr in comp.instructions:
            if instr.opcode in HEAP_FREE_OPCODES or instr.is_sharding_constraint:
                continue
            count += 1
    return count


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

    def whole(instr) -> int:
        shape = instr.shape
        return sum(padded_bytes(leaf.element_type, leaf.dims)
                   for leaf in (shape.leaves() if shape.is_tuple else [shape])
                   if leaf.is_array and element_byte_size(leaf.element_type) > 0)

    total = 0
    for comp in reverse_post_order(module):
        total += computation_peak_bytes(comp, size_of=whole)
        if total > vmem:
            return False
    return True


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


def tpu_memory_device(name: str, module) -> str:
    """``name`` (a TPU profile's name) as a :class:`TpuMemoryDevice` for ``module``; ``name`` itself when
    ``module`` is None."""
    if module is None:
        return name
    return TpuMemoryDevice(name, heap_slot_bound(module), temporaries_fit_vmem(module, name))


