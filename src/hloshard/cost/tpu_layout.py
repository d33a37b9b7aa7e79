"""What a buffer costs on a TPU: the TPU compiler's tiled layouts, and which buffers it keeps in HBM.

The memory model (:func:`hloshard.cost.liveness.buffer_intervals`) decides which buffers exist and when;
this module says how many bytes of HBM each one takes when the program is compiled by XLA's TPU backend
(``--device tpu-*``).  Everything here was measured with the real TPU compiler (libtpu 0.0.42.1, jax
0.10.2, topology ``v5e:2x4``, ahead of time: ``../shared/reference/tpu_aot.md``) by compiling the
identity ``jax.jit(lambda x: x)`` on one array and reading ``memory_analysis().argument_size_in_bytes``
and the layout the compiler chose (``entry_computation_layout`` of ``compiled.as_text()``); the measured
table is ``tests/data/tpu_layout_measured.json`` (``tests/test_tpu_memory.py`` checks
:func:`padded_bytes` against every row).

**Layouts** (what the compiler chose on the probes):

* every buffer is a multiple of :data:`GRANULE_BYTES` (512 B; a scalar takes 512 B);
* rank 1: tiled ``T(t)`` with ``t`` the smallest power of two >= the length, at least 512 B worth of
  elements (f32: 128, bf16: 256, s8 / pred: 512) and at most 1024 (longer vectors: whole 1024-element
  tiles): ``f32[129]`` takes 1 KiB, ``f32[1025]`` 8 KiB;
* rank >= 2: the minor dimension is padded to a multiple of 128 (lanes) and the second-minor one to a
  row tile: a multiple of 8, or, when the dimension is shorter, the smallest allowed tile covering it
  (32-bit: 1, 2, 4 rows; 16-bit: 2, 4; 8-bit and pred: 4).  Packed types keep the (8, 128) tile of
  32-bit types (``bf16[9,128]`` takes 4 KiB = 16 x 128 x 2 B, not a (16, 128) tile).  The compiler also
  chooses *which* dimensions are minor: ``f32[4,16,8]`` gets layout ``{1,2,0}`` (16 KiB) rather than
  ``{2,1,0}`` (32 KiB).  :func:`padded_bytes` takes the cheapest (minor, second-minor) pair, as the
  compiler did on every probe;
* element types of 64 bits and sub-byte types were not probed: they get the 32-bit and 8-bit rules
  (bytes scaled by their width).

**HBM and VMEM**: the TPU compiler's memory-space assignment keeps temporaries in the core's VMEM
(on-chip vector memory) when they fit; ``memory_analysis().temp_size_in_bytes`` counts HBM only.  Entry
parameters and outputs are always in HBM.  Measured on v5e (``probe``: a chain of three f32 matmuls of
n x n, n = 256 .. 8192): temp 0 up to n = 2048 (two live 16.8 MB temporaries), 402,653,184 B at n = 8192
(two live 268 MB temporaries less 128 MiB); at n = 4096 (two 67 MB temporaries) 67 MB, more than the
rule below predicts (0).  The model: HBM temp = max(0, peak of live temporaries - :data:`VMEM_BYTES`)
(:func:`hbm_peak`); a profile without a measured VMEM size gets 0 (every temporary in HBM: an upper
bound).  Not modelled: the TPU compiler's own fusion (it fuses more than the CPU backend, whose rule
the liveness model follows).

**The HBM heap of asynchronous operations** (:func:`reported_temp_bytes`; read from libtpu's buffer
assignment, ``--xla_dump_to``, of the 18 sample plans and two matmul-chain probes, and reproduced to the
byte on all of them, then on 20 one-collective probes, ``benchmarks/tpu_truth.py --heap-probes``, and
18 held-out plans).  Every asynchronous operation of the TPU program -- a collective-permute (every
one), an all-gather the compiler makes asynchronous, an asynchronous collective fusion, and the
copy-starts and slice-starts of memory-space assignment (parameters and constant tables prefetched into
VMEM; a slice-start takes two slots) -- has a 512 B tuple header in HBM (all-reduce, reduce-scatter and
all-to-all made none of their own in the probes; their operands and results were in VMEM), in the program's temp heap (color 0, ``preallocated-temp``), each in its own slot
aligned to :data:`HBM_ALIGN_BYTES` (libtpu's ``xla_jf_program_hbm_alignment_in_kib``, 16): a heap of S
slots is ``(S - 1) * 16 KiB + 512 B``.  Small scalars of the program (the ``s32[1]`` offsets a
partitioned program computes from ``partition-id`` with a ``dynamic-slice`` of a constant table) go into
HBM as well: into an output buffer not yet written when one is free, else into a slot of that heap.
What ``memory_analysis().temp_size_in_bytes`` reports of the heap:

* **0** when the heap holds async headers only (``mlp_train_step``'s GSPMD plan: 13 headers, 197,120 B
  of heap, temp 0; ``transformer_train_step``: 110 headers, 1.79 MB, temp 0);
* else the heap rounded up to 16 KiB plus :data:`HEAP_SLOT_EXTRA_BYTES` (15,872 B = 16 KiB - 512 B) per
  slot that holds a value of at most 512 B: with headers and scalars only, 32,256 B per slot
  (``mlp_train_step``'s solve plan: 24 headers and one spilled scalar in 25 slots, temp 806,400 B =
  25 x 32,256); with data temporaries in HBM (beyond VMEM) ``heap + 15,872 B`` per small slot (a chain
  of f32[8192,8192] matmuls with all-gathers: 302,235,648 B of heap, 15 header slots, temp 302,473,728).

So the same program's temp is 0 or about twice its header heap depending on whether one scalar found a
free output buffer -- a decision of libtpu's buffer assignment that the model does not follow.
**Which heap is reported** (round 15, ``benchmarks/tpu_truth.py --memory``, whose table gives per plan
where the buffer assignment put the partition-offset scalars, ``s32[1]`` / ``pred[1]``): on all 18
sample plans libtpu's ``memory_analysis()`` total is the model's peak plus libtpu's temp to within
one 512 B granule (argument + output - alias is the model's peak, 0 or 512 B under it; every data
temporary of these plans is in VMEM), and
its temp is 0 on the 9 plans whose heap holds no scalar (headers only: 1 to 97 slots, the scalars, up
to 7, all placed in entry outputs not yet written) and the heap rule's figure on 8 of the 9 whose
heap holds one (a scalar live while every entry output's buffer is already written or hosting
another; ``mlp_train_step``'s solve plan, 15 headers and one ``s32[1]``, reports 0).  The number of
offset scalars does not decide it (``fused_qkv_train_step``: 7 scalars and 18 outputs, none in the
heap, on GSPMD's plan; 4 scalars, one in the heap, on the solve plan, the one that spills an offset
libtpu computes at step 34 of 471 and uses at 467): their live ranges in libtpu's schedule do, which
the model does not have.  Round 20 wrote the placement down and replayed it on libtpu's own schedule
(``tests.tpu_oracle.offset_scalar_spills``): scalars in order of definition, each into the first entry
output's allocation free over its whole live range (read for the last time strictly before the output
is written; a scalar read only by the next scalar of its chain shares with it), never the root tuple's
pointer table, else the heap.  It names libtpu's heap scalars exactly on the 18 sample plans (tuned
on) and on 17 of 18 held-out plans (one extra scalar on the 18th; whether any spills: 18 of 18),
BENCHMARKS.md "Round 20, helper tpumem".  A spill is not always reported either: 0 on 1 of 6 sample
plans and 2 of 8 held-out plans whose heap holds a scalar.  What the model lacks to predict it is
the scalars themselves (which resharding or iota offsets libtpu computes from an ``s32[8]`` table in
HBM rather than inside a kernel: hloshard's resharding plans slice locally on many more edges than
libtpu makes such scalars for) and libtpu's schedule.  The held-out 2- and 6-layer transformers (``scripts/make_transformer.py``)
follow both rules on their 4 plans.  Adding the heap rule's figure to the peak would put the 10
plans reported at 0 at 1.00x to 2.09x of libtpu (``fused_qkv_train_step``'s GSPMD plan: 89 header
slots on 2.64 MB), so the model's peak
(:func:`hbm_peak`) counts no heap; :func:`header_heap_bound` is the most ``memory_analysis()`` can add
to it for a plan with a given number of heap slots, which a memory budget must allow for: round 21
(:mod:`hloshard.cost.tpu_heap`) found the heap's headers to be exactly the tuple-valued instructions of
the compiled entry computation (copy-starts, asynchronous collectives' starts, multi-output fusions,
collective-permute-starts, combined all-reduces, sorts, a loop; a slice-start two; in a loop body its
multi-output fusions too) on the 17 sample plans that
compile, bounds the slots per module (:func:`hloshard.cost.tpu_heap.heap_slot_bound`) and makes the
budget's margin additive (:func:`hloshard.cost.memory.model_limit`).  Round 25 predicts the spill itself where
it is structural -- a program with one output array, whose root kernel reads a table offset or which
regroups a split dim through two table offsets at once -- and counts that heap
(:func:`hloshard.cost.tpu_heap.spill_heap_slots`; ``Evaluation.tpu_heap`` / ``reported_peak`` of
:mod:`hloshard.autoshard.evaluate`); round 26 for any number of outputs (every HBM offset takes an output
buffer written after its last read, else spills: :func:`hloshard.cost.tpu_heap.unhosted_output_offsets`).
``peak_memory``, what a budget checks, stays the data alone.  Every heap reported beside the data held a spilled ``dynamic-slice`` of
a table; the heaps reported as 0 held only computed scalars (``subtract``, ``compare``, ``multiply``): 37 plans
with scalars in the heap, round 26 (not used as a rule: which values spill is not followed that closely).  One probe is not explained by the rule:
a chain of f32[16384,16384] matmuls with all-gathers, whose temp is its heap plus 4 small slots plus
exactly 128 MiB (the VMEM size; memory-space assignment put nothing in VMEM there).
"""

from __future__ import annotations

import functools
import math
from typing import Sequence

from ..hlo.shape import element_byte_size

#: Allocation granule of the TPU compiler's buffers (bytes): every buffer measured is a multiple of it.
GRANULE_BYTES = 512

#: Lanes: the minor dimension of a rank >= 2 array is padded to a multiple of this.
LANES = 128

#: Rows of the full tile: the second-minor dimension is padded to a multiple of this.
SUBLANES = 8

#: Largest tile of a rank-1 array (elements).
VECTOR_TILE = 1024

#: VMEM per chip that the TPU compiler fills with temporaries before it uses HBM (bytes), per device
#: profile; measured (module docstring): v5e 128 MiB.  Profiles without an entry: 0 (no VMEM credit).
VMEM_BYTES = {"tpu-v5e": 128 * 2 ** 20}


#: Alignment of the TPU program's HBM allocations (bytes): libtpu's ``xla_jf_program_hbm_alignment_in_kib``
#: (16 in libtpu 0.0.42.1's flags); every async header and spilled scalar of the temp heap takes one slot.
HBM_ALIGN_BYTES = 16 * 1024

#: What ``memory_analysis()`` adds per heap slot that holds a value of at most 512 B, beyond the heap
#: rounded up to :data:`HBM_ALIGN_BYTES` (bytes; measured: 15,872 = 16 KiB - 512 B on every plan whose
#: heap holds more than headers, module docstring).
HEAP_SLOT_EXTRA_BYTES = HBM_ALIGN_BYTES - GRANULE_BYTES

#: ``memory_analysis()``'s temp per slot of a heap of headers and scalars only (bytes): one aligned slot
#: plus :data:`HEAP_SLOT_EXTRA_BYTES`, 32,256.
SLOT_REPORTED_BYTES = HBM_ALIGN_BYTES + HEAP_SLOT_EXTRA_BYTES


def reported_temp_bytes(heap_bytes: int, small_slots: int, holds_more_than_headers: bool) -> int:
    """``memory_analysis().temp_size_in_bytes`` of a TPU program whose HBM temp heap (libtpu's buffer
    assignment: color 0, ``preallocated-temp``) is ``heap_bytes`` long, has ``small_slots`` slots holding
    a value of at most 512 B (async headers, spilled scalars), and holds more than async headers
    (``holds_more_than_headers``: a non-tuple value); module docstring, measured.  0 for a heap of
    headers only, else ``ceil(heap_bytes / 16 KiB) * 16 KiB + small_slots * 15,872``.  Bytes per device.
    One counter-example is known (round 10, ``tests/test_tpu_memory.py``): a heap of 15 headers and one
    spilled ``s32[1]`` reported as 0, so for a heap whose only other values are spilled scalars libtpu
    reports 0 or this figure; which one is its buffer assignment's decision."""
    if not holds_more_than_headers or heap_bytes <= 0:
        return 0
    return -(-int(heap_bytes) // HBM_ALIGN_BYTES) * HBM_ALIGN_BYTES + int(small_slots) * HEAP_SLOT_EXTRA_BYTES


def header_heap_bound(async_ops: int) -> int:
    """The most ``memory_analysis()`` adds to a peak of HBM data for a TPU program with ``async_ops``
    slots in its temp heap (async headers and spilled scalars; bytes per device): ``async_ops *``
    :data:`SLOT_REPORTED_BYTES` (module docstring: a heap of headers and scalars only is reported as
    32,256 B per slot, or as 0)."""
    return max(0, int(async_ops)) * SLOT_REPORTED_BYTES


def _bits(element_type: str) -> int:
    return max(1, round(element_byte_size(element_type) * 8))


def row_tiles(element_type: str) -> tuple[int, ...]:
    """Row tiles the compiler may give the second-minor dimension when it is shorter than
    :data:`SUBLANES` (32-bit and wider: 1, 2, 4; 16-bit: 2, 4; 8-bit and narrower: 4)."""
    bits = _bits(element_type)
    if bits >= 32:
        return (1, 2, 4)
    if bits >= 16:
        return (2, 4)
    return (4,)


def _rows(n: int, element_type: str) -> int:
    """The second-minor dimension ``n`` padded to its row tile."""
    if n >= SUBLANES:
        return -(-n // SUBLANES) * SUBLANES
    return next((t for t in row_tiles(element_type) if t >= n), SUBLANES)


def _granule(nbytes: float) -> int:
    return int(max(1, math.ceil(nbytes / GRANULE_BYTES))) * GRANULE_BYTES


def padded_bytes(element_type: str, dims: Sequence[int]) -> int:
    """Bytes the TPU compiler allocates for one array of ``dims`` elements of ``element_type`` (the
    per-device tile: pass the sharded dims), with its tiled layout (module docstring).  0 for an array
    with a zero dimension and for non-array types (token, opaque).  Raises KeyError for an unknown
    element type."""
    return _padded_bytes(str(element_type), tuple(int(d) for d in dims))


@functools.lru_cache(maxsize=65536)
def _padded_bytes(element_type: str, dims: tuple) -> int:
    """:func:`padded_bytes` (cached: the roofline asks for the same tiles many times)."""
    width = element_byte_size(element_type)
    if width == 0:
        return 0
    dims = [int(d) for d in dims]
    if any(d == 0 for d in dims):
        return 0
    if not dims:
        return GRANULE_BYTES
    if len(dims) == 1:
        n = dims[0]
        smallest = max(1, int(GRANULE_BYTES // max(width, 1 / 8)))
        tile = min(VECTOR_TILE, max(smallest, 1 << max(0, (n - 1).bit_length())))
        if n > VECTOR_TILE:
            tile = VECTOR_TILE
        return _granule(-(-n // tile) * tile * width)
    best = None
    total = math.prod(dims)
    for m in range(len(dims)):
        lanes = -(-dims[m] // LANES) * LANES
        for s in range(len(dims)):
            if s == m:
                continue
            rest = total // (dims[m] * dims[s])
            size = rest * _rows(dims[s], element_type) * lanes * width
            if best is None or size < best:
                best = size
    return _granule(best)


def minor_pair(element_type: str, dims: Sequence[int]) -> tuple[int, int] | None:
    """The (minor, second-minor) dimensions of the layout the TPU compiler gives an array of ``dims``
    (the per-device tile) of ``element_type``: the cheapest pair of :func:`padded_bytes`, ties to the
    default row-major pair (last, second-last).  None below rank 2.  ``f32[128,96]`` -> (0, 1) (layout
    ``{0,1}``: 96 rows of 128 lanes), ``f32[128,128]`` and ``f32[64,128]`` -> (1, 0).  Read in libtpu's
    optimised programs: the entry outputs ``f32[128,96]{0,1}``, ``f32[128,192]{0,1}``, ``f32[128,64]{0,1}``,
    ``f32[64,128]{1,0}`` of round 26's dumps.  Raises KeyError for an unknown element type."""
    dims = tuple(int(d) for d in dims)
    if len(dims) < 2:
        return None
    rank = len(dims)
    order = [(rank - 1, rank - 2)] + [(m, s) for m in range(rank) for s in range(rank)
                                      if m != s and (m, s) != (rank - 1, rank - 2)]
    width = element_byte_size(str(element_type))
    best, pick = None, None
    total = math.prod(dims)
    for m, s in order:
        if dims[m] == 0 or dims[s] == 0:
            return order[0]
        size = total // (dims[m] * dims[s]) * _rows(dims[s], str(element_type)) * (-(-dims[m] // LANES) * LANES) * width
        if best is None or size < best:
            best, pick = size, (m, s)
    return pick


def layout_bytes(element_type: str, dims: Sequence[int], minor: int) -> int:
    """Bytes of a rank-2 array of ``dims`` (per device) of ``element_type`` laid out with dim ``minor`` (0 or 1)
    minor and the other second-minor, at the TPU compiler's tiles (the minor dim padded to :data:`LANES`, the
    other to its row tile, the whole to :data:`GRANULE_BYTES`; module docstring): what a layout copy reads or
    writes of that buffer.  ``f32[256,192]`` with dim 1 minor: 256 rows x 256 lanes x 4 = 262,144 B; dim 0
    minor: 192 x 256 x 4 = 196,608 B.  Raises ValueError for a rank other than 2 or ``minor`` not 0 / 1,
    KeyError for an unknown element type."""
    dims = [int(d) for d in dims]
    if len(dims) != 2 or minor not in (0, 1):
        raise ValueError(f"layout_bytes takes a rank-2 array and minor 0 or 1, not {dims} minor {minor}")
    width = element_byte_size(str(element_type))
    if any(d == 0 for d in dims) or width == 0:
        return 0
    other = dims[1 - minor]
    return _granule(_rows(other, str(element_type)) * (-(-dims[minor] // LANES) * LANES) * width)


def lane_use(n: int) -> float:
    """The share of its 128-lane rows a dimension of ``n`` elements fills as a buffer's minor dimension:
    ``n / (128 * ceil(n / 128))`` (64 -> 0.5, 96 -> 0.75, 130 -> 0.508, 256 -> 1.0).  Raises ValueError
    for ``n < 1``."""
    n = int(n)
    if n < 1:
        raise ValueError(f"a dimension of {n} elements has no lanes")
    return n / (LANES * -(-n // LANES))


def all_to_all_chunk(in_shape: Sequence[int], split_dim: int, k: int) -> list[int]:
    """The per-device dims one peer's piece of a resharding all-to-all has (XLA SPMD partitioner,
    ``ReshardWithAllToAll``: ``split_dim`` is split into ``k`` pieces, one per peer): ``in_shape`` with
    ``in_shape[split_dim]`` divided by ``k`` (rounded up: the partitioner pads), in order, minor last.
    ``in_shape``: the per-device dims before the exchange.  Raises ValueError for ``k < 1`` or a
    ``split_dim`` outside ``in_shape``."""
    if k < 1 or not 0 <= split_dim < len(in_shape):
        raise ValueError(f"no all-to-all piece for k={k}, split dim {split_dim} of {list(in_shape)}")
    return [-(-int(d) // int(k)) if i == split_dim else int(d) for i, d in enumerate(in_shape)]


def all_to_all_lane_flat(chunk: Sequence[int]) -> bool:
    """Whether the TPU compiler exchanges an all-to-all's pieces of dims ``chunk``
    (:func:`all_to_all_chunk`) as a lane-flat buffer: True iff no dim of the piece fills more than half
    its 128-lane rows as the minor dim (``max(lane_use(d)) <= 0.5``).  Then layout assignment writes a
    data-moving reshape to ``[k, s, N / (k s)]`` tiled ``T(s, 128)`` before the all-to-all (``s`` = 4 /
    element bytes sublanes: f32 1, bf16 / f16 2, s8 4) and, for types narrower than 32 bits, one back after
    it; otherwise the piece keeps its dims and the compiler makes the dim of best lane use minor (a 64-wide
    f32 piece of 256 rows: rows minor, no reshape).  Any element type, any ``k``.

    Read off libtpu 0.0.42.1's optimised programs (ahead of time, ``v5e:2x4``): it holds on every all-to-all of
    round 33's 40 stored plans per chip (123 on v5e, 102 on v5p, 95 on v6e; 52 / 52 / 50 of them flat) and on
    18 of 18 probes written after the rule was fixed (BENCHMARKS.md round 37, helper tpu;
    ``benchmarks/measured/tpu_r37``).  What the reshapes cost is not priced: the step time and the bytes
    do not read this predicate (in the probes a program with a flat all-to-all counted 25-28 bytes accessed
    per byte of the per-device buffer, 8 without a relayout: a count not derived here).  Raises ValueError
    for an empty ``chunk`` or a dim below 1."""
    dims = [int(d) for d in chunk]
    if not dims:
        raise ValueError("an all-to-all piece has at least one dim")
    return max(lane_use(d) for d in dims) <= 0.5


def padded_bytes_per_device(shape, sharding) -> int:
    """:func:`padded_bytes` of the per-device tile of ``shape`` (a :class:`hloshard.hlo.shape.Shape`) under
    ``sharding`` (an :class:`hloshard.hlo.sharding.HloSharding`, None: replicated; a tuple shape: the sum
    over its leaves with the matching leaf sharding), as :func:`hloshard.cost.memory.bytes_per_device`
    tiles it (ceil tiling) but with the TPU's tiled layout: what a kernel of the TPU compiler reads or
    writes of that buffer (the roofline's HBM bytes with ``--device tpu-*``,
    :attr:`hloshard.cost.tpu_fusion.FusionRule.tiled_layout`).  0 for tokens and opaque values.  Raises
    ValueError when a tiled sharding's rank differs from the shape's."""
    if shape.is_tuple:
        total = 0
        for i, leaf in enumerate(shape.leaves()):
            s = None if sharding is None else sharding.leaf(i) if sharding.is_tuple else sharding
            total += padded_bytes_per_device(leaf, s)
        return total
    if not shape.is_array:
        return 0
    dims = tuple(shape.dims)
    if sharding is not None and sharding.is_tiled:
        if sharding.tiled_rank != len(dims):
            raise ValueError(f"sharding {sharding} has {sharding.tiled_rank} tiled dims but {shape} has rank {len(dims)}")
        dims = tuple(sharding.tile_shape(dims))
    return padded_bytes(shape.element_type, dims)


def vmem_bytes(device: str | None) -> int:
    """VMEM credit of ``device`` (a profile name such as ``tpu-v5e``; :data:`VMEM_BYTES`), 0 if unknown."""
    return int(VMEM_BYTES.get(str(device or "").lower(), 0))


def hbm_peak(persistent: int, temp_peak: int, vmem: int) -> int:
    """HBM bytes per device at the peak: ``persistent`` (entry parameters and outputs, never in VMEM)
    plus the part of the temporaries' peak ``temp_peak`` that does not fit in ``vmem`` bytes of VMEM
    (module docstring: measured on v5e; the rule is exact at n = 8192 and under-estimates n = 4096)."""
    return int(persistent) + max(0, int(temp_peak) - int(vmem))


def strategy_bytes(leaf_shapes: Sequence, outs: Sequence, tile_dims) -> int:
    """HBM bytes of one cost-graph node's value on a TPU: the sum over its array leaves of
    :func:`padded_bytes` of the per-device tile (``leaf_shapes``: the leaves' shapes; ``outs``: each
    leaf's sharding spec, None for a leaf without one, which is not counted; ``tile_dims(dims, spec)``:
    the per-device tile dims, :meth:`hloshard.strategy.base.MeshInfo.tile_dims`)."""
    total = 0
    for shape, spec in zip(leaf_shapes, outs):
        if spec is None or getattr(shape, "is_tuple", False) or not hasattr(shape, "dims"):
            continue
        if element_byte_size(shape.element_type) == 0:
            continue
        dims = tuple(shape.dims) if getattr(spec, "is_manual", False) else tuple(tile_dims(shape.dims, spec))
        total += padded_bytes(shape.element_type, dims)
    return total



def solver_limit(limit: int, device: str | None) -> int:
    """The node-memory limit of the solver's problem (sum of the live buffers at each point, no VMEM
    credit: IOPDDL's linear form) for a plan whose :func:`hbm_peak` must stay within ``limit``: ``limit +
    VMEM`` on a TPU (``P + max(0, T - V) <= L`` holds iff ``P + T <= L + V`` and ``P <= L``; the second
    is checked on the evaluated peak), ``limit`` elsewhere."""
    return int(limit) + vmem_bytes(device) if device is not None else int(limit)
