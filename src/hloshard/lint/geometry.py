"""Shard geometry for the divisibility rules (HS2xx), on the written sharding.

XLA tiles a tensor dim of size N split d ways with ``c = ceil(N / d)`` elements per tile: tile i
covers ``[min(i*c, N), min((i+1)*c, N))`` (``HloSharding::TileOffsetForDevice`` /
``TileLimitForDevice``), every device allocates ``c`` elements, and the trailing tiles are short --
or empty when ``i*c >= N``, which can happen even when ``N >= d`` (N=5, d=4: 2,2,1,0).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..hlo.partitioned import is_per_device_program
from .context import leaf_shapes, sharding_arity


#: how many shards a message names before it says "and N more"
NAMED_SHARDS = 8


@dataclass(frozen=True)
class DimSplit:
    """One tensor dim of size ``size`` split ``ways`` ways with ceil tiling, in closed form.

    With ``c = per_shard = ceil(size / ways)``: tiles ``0..full-1`` hold ``c`` elements
    (``full = size // c``), tile ``full`` holds ``size % c`` when that is non-zero (the one short
    tile), and the remaining ``num_empty`` tiles hold nothing. Everything here is O(1) in ``ways``
    (a split may be millions of ways); the devices of a tile are read from the tile assignment
    only on request (:meth:`devices_of`).
    """

    leaf: int                 # tuple leaf index (0 for arrays)
    dim: int
    size: int                 # elements along the dim (> 0)
    ways: int                 # tile-assignment extent along the dim (> 1)
    per_shard: int            # ceil(size / ways): what every device allocates along the dim
    # the tile assignment (np.ndarray) when materialised, else None
    tile_array: object = field(default=None, compare=False, repr=False)

    @property
    def full(self) -> int:
        """Tiles holding ``per_shard`` elements (tiles 0..full-1)."""
        return self.size // self.per_shard

    @property
    def remainder(self) -> int:
        """Elements of the one short, non-empty tile (index ``full``); 0 when there is none."""
        return self.size % self.per_shard

    @property
    def num_empty(self) -> int:
        """Tiles holding no data: ``ways - ceil(size / per_shard)``."""
        return self.ways - self.full - (1 if self.remainder else 0)

    @property
    def empty(self) -> range:
        """Indices of the empty tiles (the last ``num_empty``)."""
        return range(self.ways - self.num_empty, self.ways)

    @property
    def short(self) -> list[tuple[int, int]]:
        """(tile index, padding elements) for every non-empty tile shorter than ``per_shard``
        (at most one)."""
        return [(self.full, self.per_shard - self.remainder)] if self.remainder else []

    def size_of(self, i: int) -> int:
        """Elements tile ``i`` holds: ``min((i+1)*c, size) - min(i*c, size)``."""
        c = self.per_shard
        return min((i + 1) * c, self.size) - min(i * c, self.size)

    def held_text(self) -> str:
        """The per-tile sizes: listed in full up to 16 tiles (``2,2,1,0``), else run-length
        (``1 x16, 0 x9999984``)."""
        if self.ways <= 16:
            return ",".join(str(self.size_of(i)) for i in range(self.ways))
        runs = [(self.per_shard, self.full)]
        if self.remainder:
            runs.append((self.remainder, 1))
        if self.num_empty:
            runs.append((0, self.num_empty))
        return ", ".join(f"{v} x{n}" for v, n in runs)

    def devices_of(self, i: int) -> tuple[int, ...] | None:
        """The devices holding tile ``i`` (sorted), or None when the tile assignment is not
        materialised."""
        if self.tile_array is None:
            return None
        return tuple(sorted(np.take(self.tile_array, i, axis=self.dim).ravel().tolist()))

    @property
    def padding(self) -> int:
        """Padding elements along the dim summed over the tiles: ``ways * ceil(size/ways) - size``."""
        return self.ways * self.per_shard - self.size


def uneven_splits(context, site):
    """DimSplit for every tensor dim of ``site``'s instruction that its (sound) tiled sharding does
    not divide evenly. Yields (leaf_shape, DimSplit)."""
    instr = site.instruction
    if instr is None or id(site) in context.unsound_sites:
        return
    shape = instr.shape
    cache = context.__dict__.setdefault("_uneven_split_cache", {})
    key = (site.text, str(shape))
    if key not in cache:
        cache[key] = list(_splits(shape, site.spec))
    yield from cache[key]


def all_uneven_splits(context) -> list:
    """(site, leaf_shape, DimSplit) for every site, computed once per context (HS201 and HS202
    share it); none in a per-device program (:func:`hloshard.hlo.partitioned.is_per_device_program`:
    its parameters keep their global shardings while every shape is already one device's, so a split
    of those shapes says nothing)."""
    cached = context.__dict__.get("_all_uneven_splits")
    if cached is None:
        per_device = context.module is not None and is_per_device_program(context.module)
        cached = [] if per_device else [
            (site, leaf, split) for site in context.sites for leaf, split in uneven_splits(context, site)]
        context.__dict__["_all_uneven_splits"] = cached
    return cached


def _splits(shape, spec):
    if spec.kind == "tuple":
        if not shape.is_tuple or len(spec.elements) != sharding_arity(shape):
            return
        pairs = list(zip(range(len(spec.elements)), leaf_shapes(shape), spec.elements))
    elif shape.is_tuple:
        pairs = [(i, s, spec) for i, s in enumerate(leaf_shapes(shape))]
    else:
        pairs = [(0, shape, spec)]
    for index, leaf_shape, leaf in pairs:
        if leaf.kind != "tiled" or leaf.num_devices is None or getattr(leaf_shape, "is_token", False):
            continue
        if getattr(leaf_shape, "is_tuple", False) or len(leaf.tile_dims) != leaf_shape.rank + leaf.num_subgroup_dims:
            continue
        arr = None
        for dim, (size, ways) in enumerate(zip(leaf_shape.dims, leaf.tile_dims)):
            size = int(size)
            if ways <= 1 or size <= 0 or size % ways == 0:
                continue
            if arr is None and leaf.devices is not None:
                arr = leaf.tile_array()
            yield leaf_shape, DimSplit(index, dim, size, ways, -(-size // ways), arr)
