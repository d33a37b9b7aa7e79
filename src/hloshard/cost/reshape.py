"""Reshape sharding inference, both directions.

A reshape ``[32,16,1000,256] -> [512,1000,256]`` splits into *groups*: runs of consecutive input
dims and output dims with equal element counts (``(32,16) -> (512)``, ``(1000) -> (1000)``,
``(256) -> (256)``). Inside a group the data is the same row-major sequence on both sides, so a tiling
carries over without communication exactly when it cuts that sequence into contiguous equal blocks:

* on the source side the split dims must form a *prefix*: every dim before the last split dim is
  split all the way (one element per tile), the last split dim's size is divisible by its tile
  count, and the dims after it are not split ("the more minor merged dims must be unsharded");
* the resulting block count must then factor over the target dims major-first: a dim takes all of
  the remaining count when that divides its size, or is split completely when its size divides the
  remaining count ("which splits survive").

When a group does not carry over, XLA's ``hlo_sharding_util::ReshapeSharding`` keeps the splits of the
longest prefix that does and turns the rest into replication (partial replication,
``last_tile_dim_replicate``); that sharding needs the dropped splits **gathered** first: the seed's
``[2,4,1,1] -> [2,1,1,4] last_tile_dim_replicate`` is exactly that (see
``../shared/reference/xla_autosharding.md`` section 4, oracle B). A split that carries over but does
not fall on whole mesh axes (a tiled dim of 4 on one mesh axis reshaped to ``(2,2)``) is legal
HloSharding but "needs a sub-axis" in mesh terms; :func:`mesh_axes_report` says so.

Public API (shardings are :class:`~hloshard.hlo.sharding.HloSharding`, shapes
:class:`~hloshard.hlo.shape.Shape` or their text)::

    reshape_groups(in_dims, out_dims) -> list[ReshapeGroup]
    infer_output(in_shape, out_shape, in_sharding) -> ReshapeInference   # operand -> output
    infer_operand(in_shape, out_shape, out_sharding) -> ReshapeInference # output -> required operand
    output_shardings_without_communication(in_shape, out_shape, in_sharding, mesh) -> list[HloSharding]
    required_operand_sharding(in_shape, out_shape, out_sharding, mesh) -> HloSharding
    xla_reshape_sharding(in_shape, out_shape, in_sharding) -> HloSharding
    source_groups(src_dims, dst_dims, src_is_operand) -> tuple[ReshapeGroup, ...]  # oriented groups
    carry_group(sizes, tiles, dst_sizes) -> (kept, dist, why, status)    # one group's tile arithmetic

Errors: :class:`~hloshard.errors.InputError` when the element counts differ or a sharding's rank is
not the shape's rank.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Sequence

import numpy as np

from ..errors import InputError
from ..hlo.shape import Shape, parse_shape
from ..hlo.reshape_dims import ReshapeGroup, reshape_groups  # noqa: F401  (re-exported)
from ..hlo.sharding import HloSharding
from ..mesh import ShardingMeshMismatch


@dataclasses.dataclass
class GroupResult:
    """How one group's tiling carries over.

    status: ``'unsplit'`` (no tiles), ``'carried'`` (carries over exactly), ``'dropped'`` (some splits
      cannot be expressed and become replication: they must be gathered), ``'uneven'`` (a split does not
      divide its dim: the ceil-tiled blocks are not contiguous in the other shape).
    kept_tiles: block count that carries over; dropped: factor turned into replication.
    detail: one human sentence (deterministic).
    """

    group: ReshapeGroup
    status: str
    kept_tiles: int
    dropped: int
    detail: str


@dataclasses.dataclass
class ReshapeInference:
    """The sharding on the other side of a reshape.

    sharding: the inferred sharding (XLA ``ReshapeSharding`` semantics: splits that do not carry over
      become partial replication).
    exact: True when every split carries over (no communication needed on this side); False when
      some splits were dropped, i.e. the source must first be resharded (gathered) to ``source_needed``.
    source_needed: the source-side sharding that reshapes *exactly* into ``sharding`` (equal to the
      source sharding when ``exact``).
    groups: per group what happened; notes: human sentences for the dropped / uneven groups.
    """

    sharding: HloSharding
    exact: bool
    source_needed: HloSharding
    groups: list[GroupResult]
    notes: list[str]


def _dims(shape) -> tuple[int, ...]:
    if isinstance(shape, Shape):
        return tuple(int(d) for d in shape.dims)
    if isinstance(shape, str):
        return tuple(int(d) for d in parse_shape(shape).dims)
    return tuple(int(d) for d in shape)


def _prefix_blocks(sizes: Sequence[int], tiles: Sequence[int]) -> tuple[int, int, str]:
    """(kept block count, index of the first dropped dim or len, reason) for source-side tiles."""
    kept = 1
    for k, (n, t) in enumerate(zip(sizes, tiles)):
        if t == 1:
            if n == 1:
                continue
            # an unsplit dim: everything after must be unsplit too
            rest = [tt for tt in tiles[k + 1:] if tt > 1]
            return kept, (k + 1 if not rest else _first_split(tiles, k + 1)), \
                ("" if not rest else "a more minor merged dim is split while this one is not fully split")
        if n % t:
            return kept, k, f"split {t} ways does not divide the dim of size {n} (uneven)"
        kept *= t
        if t < n:
            rest = [tt for tt in tiles[k + 1:] if tt > 1]
            if rest:
                return kept, _first_split(tiles, k + 1), \
                    "a more minor merged dim is split while a more major one is not fully split"
            return kept, len(sizes), ""
    return kept, len(sizes), ""


def _first_split(tiles: Sequence[int], start: int) -> int:
    for k in range(start, len(tiles)):
        if tiles[k] > 1:
            return k
    return len(tiles)


def _distribute(count: int, sizes: Sequence[int]) -> list[int] | None:
    """Split ``count`` blocks over target dims major-first, or None when it does not factor."""
    out = []
    rem = count
    for m in sizes:
        if rem == 1 or m == 1:
            out.append(1)
            continue
        if rem >= m:
            if rem % m:
                return None
            out.append(m)
            rem //= m
        else:
            if m % rem:
                return None
            out.append(rem)
            rem = 1
    return out if rem == 1 else None


@functools.lru_cache(maxsize=4096)
def source_groups(src_dims: tuple[int, ...], dst_dims: tuple[int, ...],
                  src_is_operand: bool) -> tuple[ReshapeGroup, ...]:
    """The groups of a reshape (:func:`reshape_groups` of operand -> output) with ``in_dims`` on the
    side the inference starts from (``src_dims``: the operand's when ``src_is_operand``, else the
    output's).  Raises InputError when the element counts differ; cached."""
    if src_is_operand:
        return tuple(reshape_groups(src_dims, dst_dims))
    return tuple(ReshapeGroup(g.out_dims, g.in_dims) for g in reshape_groups(dst_dims, src_dims))


@functools.lru_cache(maxsize=65536)
def carry_group(sizes: tuple[int, ...], tiles: tuple[int, ...], dst_sizes: tuple[int, ...],
                dst_side: str = "output") -> tuple[tuple[int, ...], tuple[int, ...], str, str]:
    """How the tiles of one group's source dims carry over (the module docstring's rules).

    ``sizes`` / ``tiles``: the group's source dims and their tile counts (product > 1); ``dst_sizes``:
    the group's target dims; ``dst_side``: their side's name in ``why``.  Returns ``(kept, dist, why,
    status)``: per source dim the tile count that carries over (the major factor of its tiles; the
    rest becomes replication), per target dim the tile count it gets (major-first, product ==
    prod(kept)), why some tiles are dropped ('' when none is) and the status of a group that drops
    some (``'dropped'`` or ``'uneven'``, :class:`GroupResult`).  Shape arithmetic only (no device
    order); cached."""
    _, cut, why = _prefix_blocks(sizes, tiles)
    kept_here = [tiles[k] if k < cut else 1 for k in range(len(tiles))]
    status = "uneven" if "uneven" in why else "dropped"
    while True:
        kept = math.prod(kept_here)
        dist = _distribute(kept, dst_sizes)
        if dist is not None:
            break
        if not why:
            why = f"{kept} blocks do not factor over the {dst_side} dims {list(dst_sizes)} (non-divisible)"
            status = "uneven"
        # keep the largest factor of the most minor kept split that still factors
        last = max(k for k in range(len(kept_here)) if kept_here[k] > 1)
        t = kept_here[last]
        kept_here[last] = next(f for f in range(t - 1, 0, -1) if t % f == 0)
    return tuple(kept_here), tuple(dist), why, status


def _infer(src_dims: tuple[int, ...], dst_dims: tuple[int, ...], sharding: HloSharding,
           src_is_operand: bool) -> ReshapeInference:
    """Cached :func:`_infer_uncached`; each call gets its own lists (safe to mutate)."""
    r = _infer_cached(tuple(src_dims), tuple(dst_dims), sharding, src_is_operand)
    return dataclasses.replace(r, groups=list(r.groups), notes=list(r.notes))


@functools.lru_cache(maxsize=65536)
def _infer_cached(src_dims, dst_dims, sharding, src_is_operand):
    return _infer_uncached(src_dims, dst_dims, sharding, src_is_operand)


def _infer_uncached(src_dims: tuple[int, ...], dst_dims: tuple[int, ...], sharding: HloSharding,
                    src_is_operand: bool) -> ReshapeInference:
    groups = source_groups(src_dims, dst_dims, src_is_operand)
    side = "operand" if src_is_operand else "output"
    if sharding.kind in ("replicated", "maximal", "manual", "unknown", "unreduced"):
        res = [GroupResult(g, "unsplit", 1, 1, "not split") for g in groups]
        return ReshapeInference(sharding, True, sharding, res, [])
    if sharding.kind != "tiled":
        raise InputError(f"cannot infer a reshape sharding from a {sharding.kind} sharding {sharding}")
    if math.prod(src_dims) == 0:  # an empty tensor: nothing to move, any sharding will do
        res = [GroupResult(g, "unsplit", 1, 1, "empty tensor") for g in groups]
        return ReshapeInference(HloSharding.replicated(), True, HloSharding.replicated(), res,
                                ["empty tensor: no data to move"])
    if sharding.tiled_rank != len(src_dims):
        raise InputError(f"{side} sharding {sharding} has {sharding.tiled_rank} tiled dims but the {side} has "
                         f"rank {len(src_dims)}")
    tiles = list(sharding.tile_dims)
    ta = np.asarray(sharding.tile_assignment)
    nsub = ta.ndim - len(tiles)
    rep = int(math.prod(ta.shape[len(tiles):]))
    types = sharding.subgroup_types
    if any(t != "replicated" for t in types):
        raise InputError(f"cannot reshape a sharding with {'/'.join(types)} subgroups: {sharding}")
    devs = ta.reshape(tuple(tiles) + (rep,)) if nsub else ta.reshape(tuple(tiles) + (1,))

    results: list[GroupResult] = []
    notes: list[str] = []
    keep_tiles_src = list(tiles)  # source tiles that carry over (dropped ones set to 1)
    out_tiles = [1] * len(dst_dims)
    for g in groups:
        sizes = [src_dims[d] for d in g.in_dims]
        gt = [tiles[d] for d in g.in_dims]
        total = math.prod(gt)
        dsizes = [dst_dims[d] for d in g.out_dims]
        if total == 1:
            results.append(GroupResult(g, "unsplit", 1, 1, "not split"))
            continue
        kept_here, dist, why, status = carry_group(tuple(sizes), tuple(gt), tuple(dsizes),
                                                   "output" if src_is_operand else "operand")
        kept_here, dist = list(kept_here), list(dist)
        kept = math.prod(kept_here)
        dropped = total // kept
        for d, t in zip(g.in_dims, kept_here):
            keep_tiles_src[d] = t
        for d, t in zip(g.out_dims, dist):
            out_tiles[d] = t
        src_txt = "(" + ",".join(map(str, sizes)) + ")"
        dst_txt = "(" + ",".join(map(str, dsizes)) + ")"
        if dropped == 1:
            detail = f"{side} dims {list(g.in_dims)} {src_txt} split {gt} carry over to {list(g.out_dims)} " \
                     f"{dst_txt} as {dist}"
            results.append(GroupResult(g, "carried", kept, 1, detail))
        else:
            detail = (f"{side} dims {list(g.in_dims)} {src_txt} split {gt}: {why}; only {kept} of {total} "
                      f"blocks carry over ({dist} on {list(g.out_dims)}), the other factor {dropped} "
                      f"becomes replication and must be gathered first")
            results.append(GroupResult(g, status, kept, dropped, detail))
            notes.append(detail)

    # device array: dropped factors move to the replication dim (after the existing replicas)
    split_shape: list[int] = []
    keep_axes: list[int] = []
    drop_axes: list[int] = []
    ax = 0
    for d, t in enumerate(tiles):
        k = keep_tiles_src[d]
        if t == k:
            split_shape.append(t)
            keep_axes.append(ax)
            ax += 1
        else:  # the kept part is the major factor, the dropped part minor
            split_shape += [k, t // k]
            keep_axes.append(ax)
            drop_axes.append(ax + 1)
            ax += 2
    arr = devs.reshape(tuple(split_shape) + (devs.shape[-1],))
    rep_axis = ax
    arr = arr.transpose(keep_axes + [rep_axis] + drop_axes)
    new_rep = arr.shape[len(keep_axes):]
    new_rep_n = int(math.prod(new_rep))
    kept_src = arr.reshape(tuple(keep_tiles_src) + (new_rep_n,))
    exact = all(r.dropped == 1 for r in results)
    out_arr = kept_src.reshape(tuple(out_tiles) + (new_rep_n,))
    result = _make(out_arr, out_tiles, new_rep_n)
    needed = sharding if exact else _make(kept_src, keep_tiles_src, new_rep_n)
    return ReshapeInference(result, exact, needed, results, notes)


def _make(arr: np.ndarray, tiles: Sequence[int], rep: int) -> HloSharding:
    if all(t == 1 for t in tiles):
        return HloSharding.replicated()
    if rep == 1:
        return HloSharding.tiled(arr.reshape(tuple(tiles)))
    return HloSharding.tiled(arr.reshape(tuple(tiles) + (rep,)), last_tile_dim_replicate=True)


def infer_output(in_shape, out_shape, in_sharding: HloSharding) -> ReshapeInference:
    """Operand sharding -> the reshape's output sharding (XLA ``ReshapeSharding`` semantics).

    ``exact`` tells whether the output follows with no communication; otherwise ``source_needed`` is
    the operand sharding that must be reached first (the dropped splits gathered). Raises InputError on
    an element-count or rank mismatch.
    """
    return _infer(_dims(in_shape), _dims(out_shape), in_sharding, True)


def infer_operand(in_shape, out_shape, out_sharding: HloSharding) -> ReshapeInference:
    """Output sharding -> the operand sharding the reshape requires.

    ``sharding`` is the required operand sharding (splits of the output that cannot be expressed on the
    operand become replication on the operand: the reshape output is then sliced locally, no
    communication); ``exact`` is False in that case. Raises InputError on an element-count or rank
    mismatch.
    """
    return _infer(_dims(out_shape), _dims(in_shape), out_sharding, False)


def xla_reshape_sharding(in_shape, out_shape, in_sharding: HloSharding) -> HloSharding:
    """What an accounting that derives the reshape's strategy from its operand's gets: the output
    sharding XLA's ``ReshapeSharding`` infers (may silently need a gather: see :func:`infer_output`)."""
    return infer_output(in_shape, out_shape, in_sharding).sharding


def required_operand_sharding(in_shape, out_shape, out_sharding: HloSharding, mesh=None) -> HloSharding:
    """The operand sharding a reshape with output sharding ``out_sharding`` requires (for the seed:
    ``[2,1,1,4] last_tile_dim_replicate`` on ``[512,1000,256]`` requires
    ``[2,1,1,1,4] last_tile_dim_replicate`` on ``[32,16,1000,256]``). ``mesh`` is accepted for the
    layer contract and not needed. Raises InputError on an element-count or rank mismatch."""
    return infer_operand(in_shape, out_shape, out_sharding).sharding


def output_shardings_without_communication(in_shape, out_shape, in_sharding: HloSharding,
                                           mesh=None) -> list[HloSharding]:
    """Output shardings the reshape can produce from ``in_sharding`` with no communication.

    The exact carry-over first (when every split carries over), then, for a partially replicated
    operand, the variants where devices additionally slice the replicated part into one output dim
    (a local dynamic-slice). Deterministic order, no duplicates; [] when some split cannot carry over
    (then the data must be gathered or exchanged first). ``mesh`` (optional) restricts the slices to
    whole mesh axes' sizes. Cached (each call gets a new list). Raises InputError on an element-count
    or rank mismatch.
    """
    try:
        hash(mesh)
    except TypeError:  # an unhashable mesh-like object: no caching
        return _no_comm(_dims(in_shape), _dims(out_shape), in_sharding, mesh)
    return list(_no_comm_cached(_dims(in_shape), _dims(out_shape), in_sharding, mesh))


@functools.lru_cache(maxsize=16384)
def _no_comm_cached(in_dims, out_dims, in_sharding, mesh) -> tuple[HloSharding, ...]:
    return tuple(_no_comm(in_dims, out_dims, in_sharding, mesh))


def _no_comm(in_shape, out_shape, in_sharding: HloSharding, mesh=None) -> list[HloSharding]:
    # (documented on output_shardings_without_communication)
    inf = infer_output(in_shape, out_shape, in_sharding)
    if not inf.exact:
        return []
    out: list[HloSharding] = [inf.sharding]
    s = inf.sharding
    if s.kind == "replicated" or (s.kind == "tiled" and s.last_tile_dim_replicate):
        odims = _dims(out_shape)
        if s.kind == "replicated":
            devices = np.asarray(mesh.device_ids).ravel() if mesh is not None else None
            if devices is None:
                return out
            arr = np.sort(devices).reshape((1,) * len(odims) + (-1,))
            tiles = [1] * len(odims)
        else:
            arr = np.asarray(s.tile_assignment)
            tiles = list(s.tile_dims)
        rep = arr.shape[-1]
        factors = sorted({int(a) for a in getattr(mesh, "shape", ()) if a > 1} or
                         {f for f in range(2, rep + 1) if rep % f == 0})
        for d in range(len(odims)):
            for f in factors:
                if rep % f or (odims[d] % (tiles[d] * f)):
                    continue
                sp = arr.reshape(arr.shape[:-1] + (f, rep // f))
                sp = np.moveaxis(sp, -2, d + 1)
                nt = list(tiles)
                nt[d] *= f
                cand = _make(sp.reshape(tuple(nt) + (rep // f,)), nt, rep // f)
                if cand not in out:
                    out.append(cand)
    return out


def mesh_axes_report(sharding: HloSharding, rank: int, mesh) -> tuple[list[list[int]] | None, str]:
    """Per tensor dim the mesh axes a sharding splits it over, or (None, why) when it needs a sub-axis
    or another device order (uses :meth:`hloshard.mesh.DeviceMesh.sharding_to_axes`)."""
    try:
        axes = mesh.sharding_to_axes(sharding, rank)
    except ShardingMeshMismatch as exc:
        return None, str(exc)
    return [list(a) for a in axes], ""
