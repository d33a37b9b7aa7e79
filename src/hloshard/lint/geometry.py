"""Shard geometry for the divisibility rules (HS2xx), on the written sharding.

XLA tiles a tensor dim of size N split d ways with ``c = ceil(N / d)`` elements per tile: tile i
covers ``[min(i*c, N), min((i+1)*c, N))`` (``HloSharding::TileOffsetForDevice`` /
``TileLimitForDevice``), every device allocates ``c`` elements, and the trailing tiles are short --
or empty when ``i*c >= N``, which can happen even when ``N >= d`` (N=5, d=4: 2,2,1,0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .context import leaf_shapes, sharding_arity


@dataclass(frozen=True)
class DimSplit:
    leaf: int                 # tuple leaf index (0 for arrays)
    dim: int
    size: int
    ways: int
    per_shard: int            # ceil(size / ways): what every device allocates along the dim
    sizes: tuple[int, ...]    # data actually held by tile i
    shard_devices: tuple[tuple[int, ...], ...]   # devices holding tile i (sorted)

    @property
    def empty(self) -> tuple[int, ...]:
        return tuple(i for i, s in enumerate(self.sizes) if s == 0)

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
    share it)."""
    cached = context.__dict__.get("_all_uneven_splits")
    if cached is None:
        cached = [(site, leaf, split) for site in context.sites for leaf, split in uneven_splits(context, site)]
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
        if leaf.kind != "tiled" or leaf.devices is None or getattr(leaf_shape, "is_token", False):
            continue
        if getattr(leaf_shape, "is_tuple", False) or len(leaf.tile_dims) != leaf_shape.rank + leaf.num_subgroup_dims:
            continue
        arr = None
        for dim, (size, ways) in enumerate(zip(leaf_shape.dims, leaf.tile_dims)):
            size = int(size)
            if ways <= 1 or size <= 0 or size % ways == 0:
                continue
            if arr is None:
                arr = leaf.tile_array()
            c = -(-size // ways)
            sizes = tuple(min((i + 1) * c, size) - min(i * c, size) for i in range(ways))
            devs = tuple(tuple(sorted(np.take(arr, i, axis=dim).ravel().tolist())) for i in range(ways))
            yield leaf_shape, DimSplit(index, dim, size, ways, c, sizes, devs)
