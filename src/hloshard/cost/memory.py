"""Bytes each device holds for a tensor under a sharding (XLA's ceil tiling).

A tensor dim of size N split into t tiles occupies ``ceil(N / t)`` elements on every device (the last
tiles are padded: XLA allocates the padded tile), so the per-device size is
``ceil(bits * prod(ceil(N_i / t_i)) / 8)`` bytes. This is the strategy memory cost of XLA's
auto-sharding (``auto_sharding_memory``: "bytes of the tile shape"), without the 8-byte pointer XLA
adds per tuple. Replicated, maximal, manual and unknown shardings hold the full tensor.
"""

from __future__ import annotations

from fractions import Fraction
import math
from typing import Sequence

from ..hlo.shape import Shape, element_byte_size
from ..hlo.sharding import HloSharding


def tile_bytes(element_type: str, tile_shape: Sequence[int]) -> int:
    """Bytes of one padded tile of ``tile_shape`` elements of ``element_type`` (sub-byte types round
    up per tile: ``ceil(bits * n / 8)``)."""
    bits = round(element_byte_size(element_type) * 8)
    return (bits * math.prod(int(d) for d in tile_shape) + 7) // 8


def bytes_per_device(shape: Shape, sharding: HloSharding | None) -> int:
    """Bytes one device holds for ``shape`` under ``sharding`` (the largest, padded tile).

    Tuples: the sum over leaves with the matching leaf sharding (a non-tuple sharding applies to every
    leaf). ``None`` means replicated. Raises ValueError when a tiled sharding's rank differs from the
    shape's.
    """
    if shape.is_tuple:
        leaves = shape.leaves()
        total = 0
        for i, leaf in enumerate(leaves):
            s = None if sharding is None else sharding.leaf(i) if sharding.is_tuple else sharding
            total += bytes_per_device(leaf, s)
        return total
    if sharding is None or not sharding.is_tiled:
        return shape.byte_size
    if sharding.tiled_rank != len(shape.dims):
        raise ValueError(f"sharding {sharding} has {sharding.tiled_rank} tiled dims but {shape} has rank "
                         f"{len(shape.dims)}")
    return tile_bytes(shape.element_type, sharding.tile_shape(shape.dims))


def total_bytes(shape: Shape, sharding: HloSharding | None) -> int:
    """Bytes summed over every device holding a copy or tile (replication counts every copy):
    per-device bytes times the devices of a tiled sharding; the full size for non-tiled shardings."""
    if sharding is None or shape.is_tuple or not sharding.is_tiled:
        return bytes_per_device(shape, sharding)
    return bytes_per_device(shape, sharding) * sharding.num_devices


# --------------------------------------------------------------------------------------------
# The memory model's measured error against XLA (what a memory budget promises)

#: Largest ``XLA peak / predicted peak`` measured: XLA's ``memory_analysis()`` (argument + output +
#: temp - alias per device, CPU backend, 8 devices) against :mod:`hloshard.cost.liveness`'s peak, over
#: the GSPMD and ``solve`` plans of the 9 samples (mesh 2x4; BENCHMARKS.md "Memory: predicted vs XLA"),
#: rounded up (the worst: ``scan_mlp_train_step``'s GSPMD plan, 0.785).  A plan the model puts at P
#: bytes needs at most ``P * XLA_CPU_UNDERESTIMATE`` under XLA -- on modules like those measured: the
#: held-out 12-layer transformer (0.870) is covered, the MaxText corpus module (0.593: f32 copies of its
#: stacked activations the model does not see) is not.
XLA_CPU_UNDERESTIMATE = 1.28

#: Largest ``predicted peak / XLA peak`` measured on the same plans, rounded up (``attention_6heads``'
#: GSPMD plan, 1.150): a plan the model puts at P bytes needs at least ``P / XLA_CPU_OVERESTIMATE``
#: under XLA (what a refused budget states as its lower bound).
XLA_CPU_OVERESTIMATE = 1.16


def model_limit(budget: int) -> int:
    """The model peak (bytes per device) a plan may have so that XLA's peak stays within ``budget``:
    ``floor(budget / XLA_CPU_UNDERESTIMATE)`` (the measured worst under-estimate)."""
    return int(Fraction(int(budget)) / Fraction(str(XLA_CPU_UNDERESTIMATE)))   # exact: no float rounding


def xla_lower_bound(model_bytes: int) -> int:
    """A lower bound on XLA's peak for a plan whose model peak is at least ``model_bytes``:
    ``floor(model_bytes / XLA_CPU_OVERESTIMATE)`` (the measured worst over-estimate)."""
    return int(Fraction(int(model_bytes)) / Fraction(str(XLA_CPU_OVERESTIMATE)))


def budget_for_model_limit(limit: int) -> int:
    """The smallest budget (bytes per device) whose :func:`model_limit` is at least ``limit`` (a peak in
    the model's own bytes): ``ceil(limit * XLA_CPU_UNDERESTIMATE)``, so that ``model_limit`` of it is
    ``limit`` exactly.  How a limit in the model's units (an implicit memory guard: the predicted peak
    of a baseline plan, :func:`hloshard.jax.auto_shard`) enters the solver through the budget path."""
    return math.ceil(Fraction(int(limit)) * Fraction(str(XLA_CPU_UNDERESTIMATE)))   # exact
