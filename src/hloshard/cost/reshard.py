"""The resharding planner: which collectives turn one sharding of a tensor into another.

``plan(shape, src, dst, mesh)`` returns a :class:`ReshardPlan`: the ordered steps XLA's SPMD
partitioner (GSPMD, ``PartitionedHlo::Reshard``) inserts for the same resharding, each with tensor
dims, mesh axes, explicit replica groups, bytes per device and an alpha-beta cost
(:mod:`hloshard.cost.collectives`), plus the memory each device holds before, at the peak and after.

How the planner decides (our own formulation of the behaviour measured on jaxlib 0.10.2's raw
``after_spmd-partitioning`` output, see ``tests/test_reshard_oracle.py``). A sharding is normalised to a
device array of shape ``tiles + (R,)`` (tiles per tensor dim, then the R devices holding each tile);
two shardings are *equivalent* when every device holds the same tile. Then, first match wins:

1. equivalent: nothing to do;
2. the source is replicated: every device slices its tile locally (``dynamic-slice``, no traffic);
3. same tile counts, different devices: one ``collective-permute`` (pairs by tile-assignment position);
4. same replication, and the tile counts move by one factor from one dim to another, or are a
   permutation of the target's: ``all-to-all`` steps (each moves the minor factor of the source dim
   to the minor end of the target dim; for permutations, smallest count first, as GSPMD orders its
   source/target dim pairs), then a ``collective-permute`` when the device order still differs;
5. the target is coarser on every dim (tiled -> replicated / partially replicated): one
   ``all-gather`` per gathered dim, **last dim first**, each within the devices that differ only in
   that dim's gathered (minor) factor; a ``collective-permute`` goes first when the devices of a target
   tile are not the ones whose source tiles make it up;
6. the target is finer on every dim (partially replicated -> more tiled): a local ``dynamic-slice``,
   and when a device's target tile is not inside its source tile, the slice goes to the target's tiles
   as the source's devices hold them, then a ``collective-permute`` moves the (smaller) target tiles;
7. the target is more replicated: all-gather whole dims until the replication matches, then as 4;
8. the target is less replicated. A fully tiled target first, as GSPMD orders it: when the source is
   the target shifted one dim right (same device order), all-to-all, then slice the replication into
   the last dim locally (``ReshardPartialReplicateWithAllToAll``); else the whole replication becomes
   the tiles of the **first** dim the source does not split and the target splits by a multiple of it,
   replica index as tile index (``TryComplexReshardHandling``), then as 4 (a collective-permute when
   that slicing order is not the target's device order). Otherwise, still for a fully tiled target:
   slice the replication into dims so that the tile counts become a permutation of the target's, then
   as 4; or slice into the dims the source does not split and move whole dims the target does not
   split into them. A partially replicated target goes to 9 (GSPMD has no path for it);
9. otherwise: all-gather every dim the two do not split alike to replicated (the dims both split by the
   same count stay, GSPMD's grouping on equal dims) and slice (GSPMD's last resort).

Measured agreement with GSPMD: every hand-written case in the oracle test, and 95-100% of random
reshardings on 8 devices (the rest differ in which replica of a partially replicated group pairs
with which, or in GSPMD choosing a cheaper special case); every plan is correct either way (the shard
simulation in ``tests/test_reshard.py``).

Shardings that do not describe the mesh's devices (another device count or set, manual subgroups,
named shardings) get a conservative plan: all-gather to replicated, then slice; ``plan.conservative``
is True and ``plan.notes`` says why. ``{unknown}`` on either side costs nothing (like XLA's
auto-sharding, an undefined sharding is not resharded). ``{unreduced}`` (partial sums on every device)
is reduced: an all-reduce to replicated, a ``reduce-scatter`` onto a one-dim split over all devices,
else an all-reduce and a local slice.

Costs: all-gather ``B`` = gathered (output) bytes per device; all-to-all ``B`` = the bytes the group
holds together (per-device tile bytes x group size, i.e. the full tensor on a 1-D mesh, as in XLA's
``ReshardingCost``); collective-permute ``B`` = per-device tile bytes; dynamic-slice 0. A group that
spans only part of a mesh axis is costed with that axis's alpha/beta and n = group size.
Uneven dims (size not divisible by the tile count) use XLA's padded tiles (``ceil``); where XLA
re-pads with extra collective-permutes the plan says so in ``notes``.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Any, Sequence

import numpy as np

from ..errors import InputError
from ..hlo.shape import Shape, parse_shape
from ..hlo.sharding import HloSharding
from . import collectives as C
from .memory import tile_bytes
from ..mesh import ShardingMeshMismatch

#: GSPMD's last resort replicates fully and slices (measured); False keeps the dims it can.
FULL_REPLICATE_FALLBACK = True
SORT_AFTER_GATHER = False

STEP_KINDS = ("all-gather", "all-to-all", "collective-permute", "reduce-scatter", "all-reduce",
              "dynamic-slice")


# ------------------------------------------------------------------------------------------------
# public data


@dataclasses.dataclass
class ReshardStep:
    """One step of a resharding plan.

    kind: ``'all-gather' | 'all-to-all' | 'collective-permute' | 'reduce-scatter' | 'all-reduce' |
      'dynamic-slice'``.
    dims: tensor dims the step acts on (gathered dim; (source, target) dims of an all-to-all;
      sliced dims of a dynamic-slice; () for a collective-permute).
    mesh_axes: mesh axes the replica groups (or permutation pairs) span.
    replica_groups: explicit groups (list of lists of device ids, each group ordered by the tile
      index it contributes); [] for collective-permute and dynamic-slice.
    source_target_pairs: (source, target) device pairs of a collective-permute (identity pairs
      included, as XLA prints them), else [].
    bytes_per_device: bytes each device **receives** (the most any device receives).
    bytes_sent: bytes each device sends (the most any device sends).
    input_bytes / output_bytes: per-device buffer before / after the step (padded tiles).
    input_shape / output_shape: per-device (padded) shapes.
    cost: cost units under the mesh's alpha-beta model; cost_bytes: the ``B`` passed to the formula.
    group_size: devices per replica group (0 when not a grouped collective).
    exact_mesh_axes: the groups are whole mesh axes (False: a sub-axis, or devices off the mesh).
    sharding_after: the (normalised) sharding the tensor has after the step.
    leaf: tuple leaf index (0 for arrays).
    note: a short human remark ('' when none).
    """

    kind: str
    dims: tuple[int, ...]
    mesh_axes: tuple[int, ...]
    replica_groups: list[list[int]]
    bytes_per_device: int
    cost: float
    source_target_pairs: list[tuple[int, int]] = dataclasses.field(default_factory=list)
    bytes_sent: int = 0
    input_bytes: int = 0
    output_bytes: int = 0
    input_shape: tuple[int, ...] = ()
    output_shape: tuple[int, ...] = ()
    cost_bytes: int = 0
    group_size: int = 0
    exact_mesh_axes: bool = True
    sharding_after: HloSharding | None = None
    leaf: int = 0
    note: str = ""

    def predicted(self) -> "C.PredictedCollective | None":
        """This step as a :class:`~hloshard.cost.collectives.PredictedCollective` (None for a local
        dynamic-slice): ``nbytes`` as :func:`~hloshard.cost.collectives.ring_bytes` takes them (the
        all-gather's output tile, the all-to-all's / all-reduce's / reduce-scatter's input tile, the bytes
        a collective-permute sends)."""
        if self.kind == "dynamic-slice":
            return None
        if self.kind == "collective-permute":
            if not self.bytes_sent:
                return None
            return C.PredictedCollective("collective-permute", tuple(self.mesh_axes), 1, int(self.bytes_sent),
                                         tuple(tuple(p) for p in self.source_target_pairs if p[0] != p[1]))
        nbytes = self.output_bytes if self.kind == "all-gather" else self.input_bytes
        n = self.group_size or (len(self.replica_groups[0]) if self.replica_groups else 1)
        return C.PredictedCollective(self.kind, tuple(self.mesh_axes), int(n), int(nbytes),
                                     tuple(tuple(g) for g in self.replica_groups))

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (stable keys, see ``docs/explain-reshape.md``)."""
        return {
            "kind": self.kind,
            "dims": list(self.dims),
            "mesh_axes": list(self.mesh_axes),
            "replica_groups": [list(g) for g in self.replica_groups],
            "source_target_pairs": [list(p) for p in self.source_target_pairs],
            "bytes_per_device": int(self.bytes_per_device),
            "bytes_sent": int(self.bytes_sent),
            "input_bytes": int(self.input_bytes),
            "output_bytes": int(self.output_bytes),
            "input_shape": list(self.input_shape),
            "output_shape": list(self.output_shape),
            "cost_bytes": int(self.cost_bytes),
            "cost": self.cost,
            "group_size": self.group_size,
            "exact_mesh_axes": self.exact_mesh_axes,
            "sharding_after": None if self.sharding_after is None else str(self.sharding_after),
            "leaf": self.leaf,
            "note": self.note,
        }


@dataclasses.dataclass
class ReshardPlan:
    """The steps that reshard ``shape`` from ``src`` to ``dst`` on ``mesh``.

    steps: ordered :class:`ReshardStep` list ([] when nothing moves).
    total_cost: sum of the step costs (cost units).
    memory_before / memory_peak / memory_after: bytes per device: the source tile, the most held at
      once during the plan (a step's input and output together), the destination tile.
    conservative: True when the plan is the fallback (all-gather to replicated, then slice) because a
      sharding does not describe the mesh's devices; ``notes`` says why.
    notes: human-readable remarks (uneven dims, fallbacks), deterministic order.
    """

    shape: Shape
    src: HloSharding
    dst: HloSharding
    steps: list[ReshardStep]
    total_cost: float
    memory_before: int
    memory_peak: int
    memory_after: int
    conservative: bool = False
    notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def collectives(self) -> list[ReshardStep]:
        """The steps that communicate (everything but dynamic-slice)."""
        return [s for s in self.steps if s.kind != "dynamic-slice"]

    def predicted_collectives(self) -> list["C.PredictedCollective"]:
        """The communicating steps as PredictedCollective, in plan order (see ReshardStep.predicted)."""
        return [p for p in (s.predicted() for s in self.steps) if p is not None]

    @property
    def bytes_per_device(self) -> int:
        """Bytes received per device over the whole plan."""
        return sum(s.bytes_per_device for s in self.steps)

    def to_json(self) -> dict[str, Any]:
        return {
            "shape": str(self.shape),
            "src": str(self.src),
            "dst": str(self.dst),
            "steps": [s.to_json() for s in self.steps],
            "total_cost": self.total_cost,
            "bytes_per_device": self.bytes_per_device,
            "memory_per_device": {"before": self.memory_before, "peak": self.memory_peak,
                                  "after": self.memory_after},
            "conservative": self.conservative,
            "notes": list(self.notes),
        }


# ------------------------------------------------------------------------------------------------
# normalised layouts


class _Unsupported(Exception):
    """A sharding the planner cannot describe device by device (-> conservative plan)."""


@dataclasses.dataclass(eq=False)
class _Layout:
    """Tile counts per tensor dim and the device array ``tiles + (R,)``; immutable (``devs`` is made
    read-only), so the layout functions below are memoised on :attr:`key`."""

    tiles: tuple[int, ...]
    devs: np.ndarray  # shape tiles + (R,)
    _key: tuple | None = dataclasses.field(default=None, init=False, repr=False)
    _skey: tuple | None = dataclasses.field(default=None, init=False, repr=False)
    #: devices per tile (the last axis of ``devs``)
    rep: int = dataclasses.field(default=1, init=False, repr=False)

    def __post_init__(self):
        self.devs.flags.writeable = False
        self.rep = int(self.devs.shape[-1])

    @property
    def key(self) -> tuple:
        """Hashable identity: tiles and the device array (shape, dtype, elements)."""
        if self._key is None:
            self._key = (self.tiles, self.devs.shape, self.devs.dtype.str, self.devs.tobytes())
        return self._key

    @property
    def sorted_key(self) -> tuple:
        """Like :attr:`key` with each tile's devices sorted: equal exactly for equivalent layouts."""
        if self._skey is None:
            srt = np.sort(self.devs, axis=-1)
            self._skey = (self.tiles, srt.shape, srt.dtype.str, srt.tobytes())
        return self._skey

    def positions(self) -> dict[int, tuple[int, ...]]:
        out: dict[int, tuple[int, ...]] = {}
        for idx, d in np.ndenumerate(self.devs):
            out[int(d)] = idx[:-1]
        return out

    def is_replicated(self) -> bool:
        return all(t == 1 for t in self.tiles)

    def sharding(self) -> HloSharding:
        if self.is_replicated():
            return HloSharding.replicated()
        if self.rep == 1:
            return HloSharding.tiled(self.devs.reshape(self.tiles))
        return HloSharding.tiled(self.devs, last_tile_dim_replicate=True)


def _equivalent(a: _Layout, b: _Layout) -> bool:
    """Every device holds the same tile under both."""
    if a.tiles != b.tiles or a.rep != b.rep:
        return False
    return a.sorted_key == b.sorted_key


#: results of the pure layout functions (:func:`_memo`), keyed on the function and its arguments
_LAYOUT_MEMO: dict = {}
_MISS = object()


def _memo(fn):
    """Memoise a function of layouts, integers and tuples of them (layouts keyed on :attr:`_Layout.key`;
    results are shared, callers do not mutate them): the layout functions and the planner's choices
    from tile counts (:func:`_dim_move`, :func:`_swap_moves`, ...)."""
    name = fn.__name__

    def wrapper(*args):
        key = (name, SORT_AFTER_GATHER) + tuple(a.key if isinstance(a, _Layout) else
                                                (tuple(a) if isinstance(a, list) else a) for a in args)
        hit = _LAYOUT_MEMO.get(key, _MISS)
        if hit is _MISS:
            hit = fn(*args)
            if len(_LAYOUT_MEMO) >= _MEMO_LIMIT:
                _LAYOUT_MEMO.clear()
            _LAYOUT_MEMO[key] = hit
        return hit

    wrapper.__name__, wrapper.__doc__, wrapper.__wrapped__ = name, fn.__doc__, fn
    return wrapper


_MEMO_LIMIT = 1 << 18
_MESH_MEMO: dict[int, tuple[object, dict]] = {}


def _mesh_memo(mesh) -> dict:
    """A memo dict for results that depend on ``mesh`` (one per mesh object; the mesh is kept alive so
    that its id is not reused)."""
    hit = _MESH_MEMO.get(id(mesh))
    if hit is not None and hit[0] is mesh:
        return hit[1]
    if len(_MESH_MEMO) > 64:
        _MESH_MEMO.clear()
    memo: dict = {}
    _MESH_MEMO[id(mesh)] = (mesh, memo)
    return memo


def _mesh_devices(mesh) -> np.ndarray:
    return np.sort(np.asarray(mesh.device_ids).ravel())


def _layout(sharding: HloSharding, rank: int, mesh) -> _Layout:
    """The normalised layout of ``sharding`` for a rank-``rank`` tensor on ``mesh`` (memoised per
    mesh); raises _Unsupported for shardings the planner cannot describe device by device."""
    memo = _mesh_memo(mesh)
    key = ("layout", sharding, rank)
    hit = memo.get(key)
    if hit is None:
        hit = memo[key] = _make_layout(sharding, rank, mesh)
    return hit


def _make_layout(sharding: HloSharding, rank: int, mesh) -> _Layout:
    devices = _mesh_devices(mesh)
    if sharding.kind == "replicated":
        return _Layout((1,) * rank, devices.reshape((1,) * rank + (-1,)).copy())
    if sharding.kind != "tiled":
        raise _Unsupported(f"{sharding.kind} sharding {sharding}")
    if any(t != "replicated" for t in sharding.subgroup_types):
        raise _Unsupported(f"sharding {sharding} has {'/'.join(sharding.subgroup_types)} subgroups")
    tiles = tuple(int(t) for t in sharding.tile_dims)
    ta = np.asarray(sharding.tile_assignment)
    if ta.size != devices.size or not np.array_equal(np.sort(ta.ravel()), devices):
        raise _Unsupported(f"sharding {sharding} uses {ta.size} devices "
                           f"{'that are not the mesh devices' if ta.size == devices.size else ''}"
                           f"{'' if ta.size == devices.size else f'but the mesh has {devices.size}'}".strip())
    return _Layout(tiles, ta.reshape(tiles + (-1,)).copy())


# ---- layout transformations ---------------------------------------------------------------------


def _split(devs: np.ndarray, dim: int, factor: int) -> np.ndarray:
    """Split tile dim ``dim`` (size t) into (t/factor, factor): the factor is the minor part."""
    shape = devs.shape
    return devs.reshape(shape[:dim] + (shape[dim] // factor, factor) + shape[dim + 1:])


@_memo
def _gather_groups(layout: _Layout, dim: int, factor: int) -> tuple[list[list[int]], _Layout]:
    """Groups gathering the minor ``factor`` of ``dim``, and the layout afterwards (the factor joins the
    replication dim as its minor part)."""
    sp = _split(layout.devs, dim, factor)
    moved = np.moveaxis(sp, dim + 1, -1)  # (..., R, factor)
    groups = moved.reshape(-1, factor).tolist()
    new_tiles = layout.tiles[:dim] + (layout.tiles[dim] // factor,) + layout.tiles[dim + 1:]
    devs = moved.reshape(new_tiles + (-1,))
    if SORT_AFTER_GATHER:  # GSPMD's partially replicated shardings list each group's devices sorted
        devs = np.sort(devs, axis=-1)
    return groups, _Layout(new_tiles, devs)


@_memo
def _a2a_groups(layout: _Layout, src_dim: int, dst_dim: int, k: int) -> tuple[list[list[int]], _Layout]:
    """All-to-all moving the minor ``k``-factor of ``src_dim`` to the minor end of ``dst_dim``."""
    sp = _split(layout.devs, src_dim, k)
    groups = np.moveaxis(sp, src_dim + 1, -1).reshape(-1, k).tolist()
    moved = np.moveaxis(sp, src_dim + 1, dst_dim + 1)
    tiles = list(layout.tiles)
    tiles[src_dim] //= k
    tiles[dst_dim] *= k
    return groups, _Layout(tuple(tiles), moved.reshape(tuple(tiles) + (layout.rep,)))


@_memo
def _arrange_for_gather(src: _Layout, dst: _Layout, factors: Sequence[int]) -> _Layout:
    """Source tiles re-assigned so that gathering ``factors`` lands exactly on ``dst``: the sorted
    devices of each destination tile take its sub-tiles in row-major (factor digits, source replica)."""
    dst_sorted = np.sort(dst.devs, axis=-1)
    out = np.empty_like(src.devs)
    sub_shape = tuple(factors) + (src.rep,)
    for idx in np.ndindex(*src.devs.shape):
        tile, r = idx[:-1], idx[-1]
        t_dst = tuple(i // f for i, f in zip(tile, factors))
        digits = tuple(i % f for i, f in zip(tile, factors)) + (r,)
        p = int(np.ravel_multi_index(digits, sub_shape))
        out[idx] = dst_sorted[t_dst][p]
    return _Layout(src.tiles, out)


@_memo
def _slice_in_place(src: _Layout, dst: _Layout, factors: Sequence[int]) -> _Layout:
    """``dst``'s tiles held so that every device's tile lies in its ``src`` tile (a local slice reaches it):
    the devices of source tile i, in their order, take the destination sub-tiles of i (sub-tile major,
    replica minor)."""
    out = np.empty_like(dst.devs)
    for tile in np.ndindex(*src.tiles):
        devs = src.devs[tile].tolist()
        k = 0
        for sub in np.ndindex(*factors):
            t_dst = tuple(i * f + s for i, f, s in zip(tile, factors, sub))
            out[t_dst] = devs[k:k + dst.rep]
            k += dst.rep
    return _Layout(dst.tiles, out)


@_memo
def _slice_is_local(src: _Layout, dst: _Layout, factors: Sequence[int]) -> bool:
    ps = src.positions()
    for d, tdst in dst.positions().items():
        tsrc = ps[d]
        if any(i // f != j for i, f, j in zip(tdst, factors, tsrc)):
            return False
    return True


# ------------------------------------------------------------------------------------------------
# the planner


class _Builder:
    def __init__(self, shape: Shape, mesh, leaf: int, describe: bool = True):
        self.describe = describe
        self.shape = shape
        self.dims = tuple(int(d) for d in shape.dims)
        self.mesh = mesh
        self.leaf = leaf
        self.steps: list[ReshardStep] = []
        self.costs: list[float] = []   # the steps' costs (only these with describe=False)
        self.notes: list[str] = []
        self._coords = C._coordinate_table(mesh)
        self._memo = _mesh_memo(mesh)
        if len(self._memo) >= _MEMO_LIMIT:
            self._memo.clear()
        #: how each step's cost follows from the tensor's dims (see :func:`_replay`): one
        #: ``(cost function, tile counts, multiplier, args, kwargs)`` per step that costs anything
        self.recipe: list[tuple] = []
        #: every tile count this plan looked at divides its dim (no padding anywhere): then the same
        #: plan, re-priced by the recipe, holds for every shape whose dims share their gcd with N
        self.even = True
        #: every dims-dependent *decision* this plan made, ``(kind, dim, a, b) -> outcome``
        #: (:func:`_decision`: :meth:`move_repads`, :meth:`repad`, an all-to-all's transposes): a plan
        #: holds for other dims when each decision has the same outcome there (:func:`_canonical_cost`).
        #: The padded tile sizes of :meth:`tile_shape` decide nothing: they only size a step's bytes,
        #: which a replay recomputes from its own dims (:func:`_step_bytes`)
        self.tests: dict[tuple[int, int, int, int], int] = {}
        #: a device prices HBM traffic: an all-to-all's data-moving transposes too (C.all_to_all_transposes)
        self.transposes = C.hbm_units_per_byte(mesh) is not None

    # geometry
    def decide(self, kind: int, dim: int, a: int, b: int) -> int:
        """:func:`_decision` ``(kind, dims[dim], a, b)``, recorded in :attr:`tests`."""
        out = self.tests[(kind, dim, a, b)] = _decision(kind, self.dims[dim], a, b)
        return out

    def tile_shape(self, layout: _Layout) -> tuple[int, ...]:
        """The padded per-device tile ``ceil(dims / tiles)`` of ``layout`` (clears :attr:`even` when a
        count does not divide its dim); used only for bytes, so it records no :meth:`look`."""
        if self.even and any(n % t for n, t in zip(self.dims, layout.tiles)):
            self.even = False
        return tuple(-(-n // t) for n, t in zip(self.dims, layout.tiles))

    def charge(self, nbytes: int, tiles: Sequence[int], mult: int, key: tuple, fn, *args,
               extra: tuple | None = None, **kw) -> float:
        """One step's cost ``fn(mesh, nbytes, *args, **kw)``, through this mesh's :class:`_Priced` for
        ``key`` (which names ``fn`` and its arguments), recorded in the recipe as costing the bytes
        :func:`_step_bytes` computes from the dims, ``tiles``, ``mult`` and ``extra`` (what ``nbytes`` is)."""
        key = ("priced",) + key
        priced = self._memo.get(key)
        if priced is None:
            priced = self._memo[key] = _Priced(self.mesh, fn, args, kw)
        self.recipe.append((priced, tuple(tiles), mult, extra))
        return priced(nbytes)

    def nbytes(self, tile_shape: Sequence[int]) -> int:
        return tile_bytes(self.shape.element_type, tile_shape)

    def axes_of(self, device_sets: Sequence[Sequence[int]]) -> tuple[tuple[int, ...], bool]:
        axes: set[int] = set()
        for g in device_sets:
            cs = [self._coords.get(int(d)) for d in g]
            if any(c is None for c in cs):
                return tuple(range(len(self.mesh.shape))), False
            for a in range(len(self.mesh.shape)):
                if len({c[a] for c in cs}) > 1:
                    axes.add(a)
        ax = tuple(sorted(axes))
        return ax, True

    def pair_axes(self, pairs: Sequence[tuple[int, int]]) -> tuple[tuple[int, ...], ...]:
        """The distinct tuples of mesh axes along which a moving pair's devices differ (all devices on
        the mesh): ``collectives.collective_permute_cost`` is a function of these alone (per pair the
        sum over its axes in axis order, then the max over pairs), so permutes with the same tuples
        share one priced cost function (the same floats)."""
        coords = self._coords
        out = set()
        for x, y in pairs:
            cx, cy = coords[x], coords[y]
            out.add(tuple(i for i, (a, c) in enumerate(zip(cx, cy)) if a != c))
        out.discard(())
        return tuple(sorted(out))

    def group_axes(self, groups: list[list[int]]) -> tuple[tuple[int, ...], bool]:
        ax, ok = self.axes_of(groups)
        n = len(groups[0]) if groups else 1
        exact = ok and n == math.prod(int(self.mesh.shape[a]) for a in ax)
        return ax, exact

    def repads(self, dim: int, a: int, b: int) -> bool:
        """Going from a to b tiles on ``dim`` changes the padded size (both split): GSPMD then moves
        the padding with extra collective-permutes (halo exchange) that this plan does not list. Only
        a note's test: not recorded as a decision (:meth:`move_repads` records its own)."""
        return bool(_decision(0, self.dims[dim], a, b))

    def move_repads(self, tiles: Sequence[int], move: tuple[int, int, int]) -> bool:
        """True when the single all-to-all ``move`` (``(src_dim, dst_dim, k)`` from tile counts ``tiles``)
        splits a whole dim or makes a split dim whole, and changes the padded size of the other
        (:meth:`repads`). XLA's partitioner then replicates
        (all-gathers the padded tensor) and slices instead, as measured on f32[12,64], f32[10,64] and
        f32[20,64] from 8 row tiles to 4x2 and back, f32[12,8] from 8 row tiles to 2x4 and f32[64,12]
        from 8 column tiles to 2x4 (tests/test_reshard_uneven_oracle.py); a move between two dims that
        both stay split remains an all-to-all with halo permutes (f32[10,6], 2x4 -> 4x2)."""
        i, j, k = move
        if tiles[j] != 1 and tiles[i] // k != 1:
            return False   # both dims stay split: XLA's all-to-all with halo permutes (f32[10,6] above)
        return bool(self.decide(0, i, tiles[i], tiles[i] // k) or self.decide(0, j, tiles[j], tiles[j] * k))

    # steps
    def add(self, **kw) -> None:
        kw["cost"] = cost = round(float(kw.get("cost", 0.0)), 6)
        self.costs.append(cost)
        if not self.describe:
            return
        kw.setdefault("leaf", self.leaf)
        after = kw.get("sharding_after")
        if isinstance(after, _Layout):
            kw["sharding_after"] = after.sharding()
        self.steps.append(ReshardStep(**kw))

    def step(self, key: tuple, make) -> _Layout:
        """Run ``make()`` (one step method) or, in a cost-only plan, replay what the same step did on a
        tensor of the same dims and type (its costs and recipe entries; memoised per mesh only when the
        step padded nothing, so it added no re-pad steps and no notes)."""
        if self.describe:
            return make()
        key = key + (self.dims, self.shape.element_type)
        hit = self._memo.get(key)
        if hit is not None:
            nxt, costs, recipe, tests = hit
            self.costs.extend(costs)
            self.recipe.extend(recipe)
            self.tests.update(tests)
            return nxt
        even, n_costs, n_recipe = self.even, len(self.costs), len(self.recipe)
        outer, self.tests = self.tests, {}
        nxt = make()
        tests, self.tests = self.tests, outer
        outer.update(tests)
        if even and self.even:
            self._memo[key] = (nxt, self.costs[n_costs:], self.recipe[n_recipe:], tuple(tests.items()))
        return nxt

    def all_gather(self, cur: _Layout, dim: int, factor: int) -> _Layout:
        return self.step(("all-gather step", cur.key, dim, factor, SORT_AFTER_GATHER),
                         lambda: self._all_gather(cur, dim, factor))

    def _all_gather(self, cur: _Layout, dim: int, factor: int) -> _Layout:
        key = ("all-gather", cur.key, dim, factor, SORT_AFTER_GATHER)
        hit = self._memo.get(key)
        if hit is None:
            groups, nxt = _gather_groups(cur, dim, factor)
            hit = self._memo[key] = (nxt, _sorted_groups(groups)) + self.group_axes(groups)
        nxt, groups, axes, exact = hit
        in_shape = self.tile_shape(cur)
        out_shape = list(in_shape)
        out_shape[dim] *= factor  # XLA gathers padded tiles
        in_b, out_b = self.nbytes(in_shape), self.nbytes(out_shape)
        cost = self.charge(out_b, cur.tiles, 1, ("all-gather", axes, factor), C.all_gather_cost, axes,
                           group_size=factor, extra=(0, dim, factor)) if axes else 0.0
        note = ""
        if self.repads(dim, cur.tiles[dim], nxt.tiles[dim]):
            note = (f"dim {dim} ({self.dims[dim]}) is uneven over {cur.tiles[dim]} tiles: XLA also "
                    f"exchanges padding with collective-permutes")
            self.notes.append(f"step {len(self.steps) + 1}: {note}")
        self.add(kind="all-gather", dims=(dim,), mesh_axes=axes, replica_groups=[list(g) for g in groups],
                 bytes_per_device=out_b - in_b, bytes_sent=(factor - 1) * in_b, input_bytes=in_b,
                 output_bytes=out_b, input_shape=in_shape, output_shape=tuple(out_shape), cost=cost,
                 cost_bytes=out_b, group_size=factor, exact_mesh_axes=exact, sharding_after=nxt,
                 note=note)
        if nxt.tiles[dim] > 1:
            self.repad(nxt, dim, cur.tiles[dim], nxt.tiles[dim])
        return nxt

    def repad(self, nxt: _Layout, dim: int, a: int, b: int) -> None:
        """After re-tiling ``dim`` from ``a`` to ``b`` padded tiles (a gather or a local slice), the data a
        device holds is off by :func:`_repad_shift` elements when the padded sizes differ: GSPMD then
        shifts it into place with a collective-permute of that many elements of the new tile (measured:
        ``f32[10,64]`` from 4 to 2 row tiles moves one row, ``f32[6,64]`` from 2 to 8 moves one row)."""
        self.decide(1, dim, a, b)
        shift = _repad_shift(self.dims[dim], a, b)
        if shift <= 0:
            return
        self.even = False  # a shift only exists when a padded size differs from the dim
        shape = list(self.tile_shape(nxt))
        per = self.nbytes(shape) // max(shape[dim], 1)
        shape[dim] = min(shift, shape[dim])
        nbytes = per * shape[dim]
        devs = np.moveaxis(nxt.devs, dim, 0)
        pairs = [(x, y) for t in range(1, devs.shape[0])
                 for x, y in zip(devs[t - 1].ravel().tolist(), devs[t].ravel().tolist())]   # Python ints
        axes, ok = self.axes_of(pairs)
        extra = (1, dim, shape[dim])
        if ok:
            cost = self.charge(nbytes, nxt.tiles, 1, ("collective-permute", self.pair_axes(pairs)),
                               C.collective_permute_cost, pairs, extra=extra)
        else:
            cost = self.charge(nbytes, nxt.tiles, 1, ("flat-permute",), _flat_permute_cost, extra=extra)
        self.add(kind="collective-permute", dims=(dim,), mesh_axes=axes, replica_groups=[],
                 source_target_pairs=pairs, bytes_per_device=nbytes, bytes_sent=nbytes, input_bytes=nbytes,
                 output_bytes=nbytes, input_shape=tuple(shape), output_shape=tuple(shape), cost=cost,
                 cost_bytes=nbytes, exact_mesh_axes=ok, sharding_after=nxt,
                 note=f"uneven dim {dim} ({self.dims[dim]}): padding moved from {a} to {b} tiles")

    def all_to_all(self, cur: _Layout, src_dim: int, dst_dim: int, k: int) -> _Layout:
        return self.step(("all-to-all step", cur.key, src_dim, dst_dim, k),
                         lambda: self._all_to_all(cur, src_dim, dst_dim, k))

    def _all_to_all(self, cur: _Layout, src_dim: int, dst_dim: int, k: int) -> _Layout:
        key = ("all-to-all", cur.key, src_dim, dst_dim, k)
        hit = self._memo.get(key)
        if hit is None:
            groups, nxt = _a2a_groups(cur, src_dim, dst_dim, k)
            hit = self._memo[key] = (nxt, _sorted_groups(groups)) + self.group_axes(groups)
        nxt, groups, axes, exact = hit
        in_shape, out_shape = self.tile_shape(cur), self.tile_shape(nxt)
        in_b, out_b = self.nbytes(in_shape), self.nbytes(out_shape)
        cost_b = in_b * k
        t = 0
        if axes and self.transposes:
            t, looked = C.all_to_all_transposes(in_shape, src_dim, dst_dim, k)
            for d, _ in looked:   # a replay must see the same sizes 1 / above 1: dim > its tile count
                self.decide(2, d, nxt.tiles[d] if d == dst_dim else cur.tiles[d], 0)   # dst_dim: after the exchange
                self.even = False    # the test read sizes, not tile counts: no replay by gcd (_planned_cost)
        kw = {"transposes": t} if t else {}
        cost = self.charge(cost_b, cur.tiles, k, ("all-to-all", axes, k, t), C.all_to_all_cost, axes,
                           group_size=k, **kw) if axes else 0.0
        moved = in_b - in_b // k
        note = ""
        bad = [d for d in (src_dim, dst_dim) if self.repads(d, cur.tiles[d], nxt.tiles[d])]
        if bad:
            note = f"uneven dim(s) {sorted(set(bad))}: XLA pads and may add collective-permutes"
            self.notes.append(f"step {len(self.steps) + 1}: {note}")
        self.add(kind="all-to-all", dims=(src_dim, dst_dim), mesh_axes=axes,
                 replica_groups=[list(g) for g in groups], bytes_per_device=moved, bytes_sent=moved,
                 input_bytes=in_b, output_bytes=out_b, input_shape=in_shape, output_shape=out_shape,
                 cost=cost, cost_bytes=cost_b, group_size=k, exact_mesh_axes=exact,
                 sharding_after=nxt, note=note)
        return nxt

    def permute(self, cur: _Layout, nxt: _Layout) -> _Layout:
        return self.step(("collective-permute step", cur.key, nxt.key), lambda: self._permute(cur, nxt))

    def _permute(self, cur: _Layout, nxt: _Layout) -> _Layout:
        key = ("collective-permute", cur.key, nxt.key)
        hit = self._memo.get(key)
        if hit is None:
            pairs = list(zip(cur.devs.ravel().tolist(), nxt.devs.ravel().tolist()))   # Python ints
            moving = [(a, b) for a, b in pairs if a != b]
            axes, ok = self.axes_of(moving)
            hit = self._memo[key] = (pairs, moving, axes, ok, self.pair_axes(moving) if ok else None)
        pairs, moving, axes, ok, signature = hit
        shape = self.tile_shape(cur)
        b = self.nbytes(shape)
        if ok:
            cost = self.charge(b, cur.tiles, 1, ("collective-permute", signature),
                               C.collective_permute_cost, moving)
        else:
            cost = self.charge(b, cur.tiles, 1, ("flat-permute",), _flat_permute_cost)
        self.add(kind="collective-permute", dims=(), mesh_axes=axes, replica_groups=[],
                 source_target_pairs=list(pairs), bytes_per_device=b if moving else 0,
                 bytes_sent=b if moving else 0, input_bytes=b, output_bytes=b, input_shape=shape,
                 output_shape=shape, cost=cost, cost_bytes=b, exact_mesh_axes=ok,
                 sharding_after=nxt)
        return nxt

    def dynamic_slice(self, cur: _Layout, nxt: _Layout) -> _Layout:
        return self.step(("dynamic-slice step", cur.key, nxt.key), lambda: self._dynamic_slice(cur, nxt))

    def _dynamic_slice(self, cur: _Layout, nxt: _Layout) -> _Layout:
        in_shape, out_shape = self.tile_shape(cur), self.tile_shape(nxt)
        dims = tuple(d for d in range(len(self.dims)) if nxt.tiles[d] != cur.tiles[d])
        self.add(kind="dynamic-slice", dims=dims, mesh_axes=(), replica_groups=[], bytes_per_device=0,
                 input_bytes=self.nbytes(in_shape), output_bytes=self.nbytes(out_shape),
                 input_shape=in_shape, output_shape=out_shape, cost=0.0, sharding_after=nxt,
                 note="local: each device keeps its part of the data it already holds")
        for d in dims:
            if cur.tiles[d] > 1 and nxt.tiles[d] % cur.tiles[d] == 0:
                self.repad(nxt, d, cur.tiles[d], nxt.tiles[d])
        return nxt

    # plans
    def gather_to(self, cur: _Layout, dst: _Layout, factors: Sequence[int]) -> _Layout:
        natural = cur
        for d in reversed(range(len(factors))):
            if factors[d] > 1:
                _, natural = _gather_groups(natural, d, factors[d])
        if not _equivalent(natural, dst):
            cur = self.permute(cur, _arrange_for_gather(cur, dst, factors))
        for d in reversed(range(len(factors))):
            if factors[d] > 1:
                cur = self.all_gather(cur, d, factors[d])
        return cur

    def slice_to(self, cur: _Layout, dst: _Layout, factors: Sequence[int]) -> _Layout:
        if _slice_is_local(cur, dst, factors):
            return self.dynamic_slice(cur, dst)
        # GSPMD slices first, each device a target tile inside the tile it holds, then permutes the target
        # tiles (a quarter of the bytes of permuting the source tiles first, when 4 replicas become 4 tiles:
        # f32[16,512,256] from {devices=[1,1,2,4]<=[8] last_tile_dim_replicate} to {devices=[1,2,4]<=[8]},
        # XLA 0.10.2 on 8 CPU devices: one collective-permute of 1 MiB per device, not 4 MiB)
        cur = self.dynamic_slice(cur, _slice_in_place(cur, dst, factors))
        return cur if _equivalent(cur, dst) else self.permute(cur, dst)

    def moves(self, cur: _Layout, seq: Sequence[tuple[int, int, int]]) -> _Layout:
        for i, j, k in seq:
            cur = self.all_to_all(cur, i, j, k)
        return cur

    def shifted_all_to_all(self, src: _Layout, dst: _Layout) -> bool:
        """Partially replicated -> fully tiled when the source's tile counts are the target's shifted one
        dim to the right (``(1, d0, .., d[n-2])`` replicated ``d[n-1]`` times -> ``(d0, .., d[n-1])``) and
        both list the devices in the same order: GSPMD's ``ReshardPartialReplicateWithAllToAll``
        (spmd_partitioner.cc) all-to-alls to ``(d0, .., d[n-2], 1)`` replicated ``d[n-1]`` times (same
        device order), then slices the replication into the last dim locally. Tried before
        :meth:`unreplicate_first_dim`, as GSPMD does. Returns False (nothing added) when the pattern
        does not hold.

        Measured (XLA 0.10.2, 8 CPU devices): f32[16,16] ``[1,4,2]<=[4,2]T(1,0) last_tile_dim_replicate``
        -> ``[4,2]<=[4,2]T(1,0)``: one all-to-all in groups of 4 ([[0,4,1,5],[2,6,3,7]]), no permute."""
        if not _shifted_pair(src, dst):
            return False
        n = len(dst.tiles)
        mid_tiles = dst.tiles[:-1] + (1,)
        mid = _Layout(mid_tiles, dst.devs.reshape(mid_tiles + (src.rep,)).copy())
        move = _dim_move(src.tiles, mid_tiles)
        if move is not None and self.move_repads(src.tiles, move):
            return False
        seq = [move] if move is not None else (_swap_moves(src.tiles, mid_tiles) or [])
        if not seq:
            return False
        cur = self.moves(src, seq)
        if not _equivalent(cur, mid):
            cur = self.permute(cur, mid)
        self.slice_to(cur, dst, [1] * (n - 1) + [src.rep])
        return True

    def unreplicate_first_dim(self, src: _Layout, dst: _Layout) -> bool:
        """Partially replicated -> fully tiled, GSPMD's way (``TryComplexReshardHandling``, the
        partially-replicated-to-tiled case, spmd_partitioner.cc): the whole replication becomes the
        tile count of the **first** dim that the source does not split and the target splits by a
        multiple of the replication, the replica index in its order becoming the tile index (a local
        slice), then the tile counts move to the target's with all-to-alls and a collective-permute
        fixes the device order. Returns False (nothing added) when no dim qualifies or the counts are
        not one move / a permutation apart (GSPMD then falls back too; the planner's other rules go on).

        Measured (XLA 0.10.2, 8 CPU devices): f32[8,128,256] ``[2,1,2,2]<=[8] last_tile_dim_replicate``
        -> ``[4,2,1]<=[2,2,2]T(0,2,1)`` slices the replication into dim 1, all-to-alls dim 2 into dim 0
        and collective-permutes the f32[2,64,256] tile; slicing into dim 0 instead would need no permute,
        but it is not what XLA emits."""
        n = len(src.tiles)
        first = next((i for i in range(n) if src.tiles[i] == 1 and dst.tiles[i] != 1
                      and dst.tiles[i] % src.rep == 0), None)
        if first is None:
            return False
        slices = [1] * n
        slices[first] = src.rep
        mid = _slice_replication(src, slices)
        if mid.tiles == dst.tiles:
            seq: list[tuple[int, int, int]] = []
        else:
            move = _dim_move(mid.tiles, dst.tiles)
            if move is not None and self.move_repads(mid.tiles, move):
                return False
            seq = [move] if move is not None else (_swap_moves(mid.tiles, dst.tiles) or [])
            if not seq:
                return False
        cur = self.moves(self.dynamic_slice(src, mid), seq)
        if not _equivalent(cur, dst):
            self.permute(cur, dst)
        return True

    def run(self, src: _Layout, dst: _Layout) -> None:
        if _equivalent(src, dst):
            return
        if src.is_replicated():
            self.dynamic_slice(src, dst)
            return
        if src.tiles == dst.tiles and src.rep == dst.rep:
            self.permute(src, dst)
            return
        if src.rep == dst.rep:
            move = _dim_move(src.tiles, dst.tiles)
            seq = [move] if move is not None else _swap_moves(src.tiles, dst.tiles)
            if seq and not (move is not None and self.move_repads(src.tiles, move)):
                cur = self.moves(src, seq)
                if not _equivalent(cur, dst):
                    self.permute(cur, dst)
                return
        n = len(src.tiles)
        if all(s % t == 0 for s, t in zip(src.tiles, dst.tiles)):
            self.gather_to(src, dst, [s // t for s, t in zip(src.tiles, dst.tiles)])
            return
        if all(t % s == 0 for s, t in zip(src.tiles, dst.tiles)):
            self.slice_to(src, dst, [t // s for s, t in zip(src.tiles, dst.tiles)])
            return
        if src.rep < dst.rep and dst.rep % src.rep == 0:
            # gather whole dims until the replication matches, then move the remaining factors
            for dims in _whole_dim_gathers(src.tiles, dst.tiles, dst.rep // src.rep):
                mid = tuple(1 if d in dims else t for d, t in enumerate(src.tiles))
                move = _dim_move(mid, dst.tiles)
                seq = [move] if move is not None else _swap_moves(mid, dst.tiles)
                if not seq:
                    continue
                cur = src
                for d in sorted(dims, reverse=True):
                    cur = self.all_gather(cur, d, src.tiles[d])
                cur = self.moves(cur, seq)
                if not _equivalent(cur, dst):
                    self.permute(cur, dst)
                return
        if src.rep > dst.rep and src.rep % dst.rep == 0:
            if dst.rep == 1 and (self.shifted_all_to_all(src, dst) or self.unreplicate_first_dim(src, dst)):
                return
            # slice part of the replication into dims the target splits more, so that the tile counts
            # become a permutation of the target's, then swap them with all-to-alls. Only onto a fully tiled
            # target: onto a partially replicated one GSPMD has no such path (none of ReshardNoCache's
            # partial-replication cases matches) and replicates fully, then slices (the fallback below;
            # measured: f32[8,16,32] [1,2,1,4] -> [2,1,2,2] last_tile_dim_replicate, XLA all-gathers
            # 16,384 B where the slice + all-to-all would move 8,192 B)
            best = _best_split(src.tiles, dst.tiles, src.rep // dst.rep) if dst.rep == 1 else None
            if best is not None:
                cur = self.dynamic_slice(src, _slice_replication(src, best[0]))
                cur = self.moves(cur, best[1])
                if not _equivalent(cur, dst):
                    self.permute(cur, dst)
                return
            if dst.rep == 1:
                # whole dims the target does not split move into dims unsplit in the source that the
                # target splits: slice the replication into those dims first, then all-to-all
                tiles = list(src.tiles)
                seq = []
                for i in range(n):
                    if tiles[i] > 1 and dst.tiles[i] == 1:
                        for j in range(n):
                            if j != i and src.tiles[j] == 1 and tiles[j] == 1 and dst.tiles[j] > src.tiles[i] \
                                    and dst.tiles[j] % src.tiles[i] == 0:
                                seq.append((i, j, src.tiles[i]))
                                tiles[j], tiles[i] = src.tiles[i], 1
                                break
                slices = [t // s_ if t % s_ == 0 else 0 for s_, t in zip(tiles, dst.tiles)]
                if seq and all(slices) and math.prod(slices) == src.rep:
                    cur = self.dynamic_slice(src, _slice_replication(src, slices))
                    cur = self.moves(cur, seq)
                    if not _equivalent(cur, dst):
                        self.permute(cur, dst)
                    return
        # otherwise: gather what the target does not refine, then slice locally; when that slice
        # would need the data moved, GSPMD replicates fully and slices instead
        mid_tiles = []
        for s, t in zip(src.tiles, dst.tiles):
            if s % t == 0:
                mid_tiles.append(t)
            elif t % s == 0:
                mid_tiles.append(s)
            else:
                mid_tiles.append(1)
        natural = src
        for d in reversed(range(n)):
            f = src.tiles[d] // mid_tiles[d]
            if f > 1:
                _, natural = _gather_groups(natural, d, f)
        factors = [t // m for m, t in zip(mid_tiles, dst.tiles)]
        if FULL_REPLICATE_FALLBACK or (not _equivalent(natural, dst) and not _slice_is_local(natural, dst, factors)):
            # GSPMD keeps the dims both split alike (ReshardNoCache groups the devices on them) and replicates
            # the rest within each group, then slices (measured, 16 CPU devices: f32[16,16,16]
            # [2,2,1,4] -> [2,1,4,2] last_tile_dim_replicate, one all-gather of dim 1 in pairs, not two)
            mid_tiles = [s_ if s_ == t > 1 else 1 for s_, t in zip(src.tiles, dst.tiles)]
            factors = [t // m for m, t in zip(mid_tiles, dst.tiles)]
        cur = src
        for d in reversed(range(n)):
            f = src.tiles[d] // mid_tiles[d]
            if f > 1:
                cur = self.all_gather(cur, d, f)
        if not _equivalent(cur, dst):
            self.slice_to(cur, dst, factors)

    def run_any(self, src: HloSharding, dst: HloSharding) -> None:
        """Plan between any two array shardings (maximal included); raises _Unsupported."""
        rank = len(self.dims)
        if src.kind == "tiled" and dst.kind == "tiled":  # the common case
            self.run(_layout(src, rank, self.mesh), _layout(dst, rank, self.mesh))
            return
        devices = _mesh_devices(self.mesh)
        if src.kind == "maximal" and dst.kind == "maximal" and src.maximal_device == dst.maximal_device:
            return
        if src.kind == "unreduced" and dst.kind != "unreduced":
            self.reduce_to(dst, devices)
            return
        if src.kind == "maximal":
            m = src.maximal_device
            if m not in set(devices.tolist()):
                raise _Unsupported(f"device {m} of {src} is not in the mesh")
            full = self.nbytes(self.dims)
            groups = [devices.tolist()]
            axes, exact = self.group_axes(groups)
            cost = self.charge(full, (1,) * rank, 1, ("all-reduce", axes, len(groups[0])), C.all_reduce_cost,
                               axes, group_size=len(groups[0])) if axes else 0.0
            self.add(kind="all-reduce", dims=(), mesh_axes=axes, replica_groups=groups,
                     bytes_per_device=full, bytes_sent=full, input_bytes=full, output_bytes=full,
                     input_shape=self.dims, output_shape=self.dims, cost=cost, cost_bytes=full,
                     group_size=len(groups[0]), exact_mesh_axes=exact,
                     sharding_after=HloSharding.replicated(),
                     note=f"broadcast from device {m}: GSPMD zeroes the other devices' buffers and "
                          f"all-reduces")
            if dst.kind == "maximal":
                return
            self.run(_layout(HloSharding.replicated(), rank, self.mesh), _layout(dst, rank, self.mesh))
            return
        if dst.kind == "maximal":
            if dst.maximal_device not in set(devices.tolist()):
                raise _Unsupported(f"device {dst.maximal_device} of {dst} is not in the mesh")
            self.notes.append(f"to {dst}: GSPMD replicates the tensor; device {dst.maximal_device} "
                              f"keeps its copy")
            self.run(_layout(src, rank, self.mesh), _layout(HloSharding.replicated(), rank, self.mesh))
            return
        self.run(_layout(src, rank, self.mesh), _layout(dst, rank, self.mesh))

    def reduce_to(self, dst: HloSharding, devices: np.ndarray) -> None:
        """From ``{unreduced}`` (every device holds a partial sum of the whole tensor): an all-reduce to
        replicated; a reduce-scatter when the target splits exactly one dim over all devices; otherwise
        an all-reduce then a local slice (what GSPMD's raw output holds in every case; backends turn
        all-reduce + dynamic-slice into reduce-scatter)."""
        rank = len(self.dims)
        full = self.nbytes(self.dims)
        all_devs = [int(d) for d in devices]
        axes, exact = self.group_axes([all_devs])
        n = len(all_devs)
        if dst.kind == "tiled" and dst.replication_factor == 1 and sum(1 for t in dst.tile_dims if t > 1) == 1:
            layout = _layout(dst, rank, self.mesh)
            d = next(i for i, t in enumerate(layout.tiles) if t > 1)
            group = [int(x) for x in layout.devs.ravel()]  # target tile order
            out_shape = self.tile_shape(layout)
            out_b = self.nbytes(out_shape)
            cost = self.charge(full, (1,) * rank, 1, ("reduce-scatter", axes, n), C.reduce_scatter_cost, axes,
                               group_size=n) if axes else 0.0
            self.add(kind="reduce-scatter", dims=(d,), mesh_axes=axes, replica_groups=[group],
                     bytes_per_device=full - out_b, bytes_sent=full - out_b, input_bytes=full, output_bytes=out_b,
                     input_shape=self.dims, output_shape=out_shape, cost=cost, cost_bytes=full, group_size=n,
                     exact_mesh_axes=exact, sharding_after=layout,
                     note="GSPMD's raw output is all-reduce + dynamic-slice; backends combine them")
            return
        cost = self.charge(full, (1,) * rank, 1, ("all-reduce", axes, n), C.all_reduce_cost, axes,
                           group_size=n) if axes else 0.0
        self.add(kind="all-reduce", dims=(), mesh_axes=axes, replica_groups=[sorted(all_devs)],
                 bytes_per_device=full, bytes_sent=full, input_bytes=full, output_bytes=full,
                 input_shape=self.dims, output_shape=self.dims, cost=cost, cost_bytes=full, group_size=n,
                 exact_mesh_axes=exact, sharding_after=HloSharding.replicated(), note="sums the partial values")
        if dst.kind == "tiled":
            self.run(_layout(HloSharding.replicated(), rank, self.mesh), _layout(dst, rank, self.mesh))

    def conservative(self, src: HloSharding, dst: HloSharding, reason: str) -> None:
        """All-gather to replicated over the whole mesh, then slice: always valid, never cheaper."""
        self.notes.append(f"conservative plan: {reason}; assuming an all-gather to replicated and a "
                          f"local slice")
        full = self.nbytes(self.dims)
        axes = tuple(a for a, s in enumerate(self.mesh.shape) if int(s) > 1)
        if src.kind == "tiled" and src.num_tiles > 1:
            src_shape = src.tile_shape(self.dims) if src.tiled_rank == len(self.dims) else self.dims
            in_b = self.nbytes(src_shape)
            n = int(src.num_tiles)
            cost = self.charge(full, (1,) * len(self.dims), 1, ("all-gather", axes, n), C.all_gather_cost,
                               axes, group_size=n) if axes else 0.0
            self.add(kind="all-gather", dims=tuple(d for d, t in enumerate(src.tile_dims) if t > 1),
                     mesh_axes=axes, replica_groups=[], bytes_per_device=max(full - in_b, 0),
                     bytes_sent=in_b * (n - 1), input_bytes=in_b, output_bytes=full,
                     input_shape=tuple(src_shape), output_shape=self.dims, cost=cost, cost_bytes=full,
                     group_size=n, exact_mesh_axes=False, sharding_after=HloSharding.replicated(),
                     note="conservative (sharding does not map onto the mesh)")
        elif src.kind == "maximal":
            cost = self.charge(full, (1,) * len(self.dims), 1, ("all-reduce", axes, None), C.all_reduce_cost,
                               axes) if axes else 0.0
            self.add(kind="all-reduce", dims=(), mesh_axes=axes, replica_groups=[], bytes_per_device=full,
                     input_bytes=full, output_bytes=full, input_shape=self.dims, output_shape=self.dims,
                     cost=cost, cost_bytes=full, group_size=int(np.asarray(self.mesh.device_ids).size),
                     exact_mesh_axes=False, sharding_after=HloSharding.replicated(),
                     note=f"broadcast from device {src.maximal_device} (masked all-reduce)")
        if dst.kind == "tiled" and dst.num_tiles > 1 and dst.tiled_rank == len(self.dims):
            out_shape = dst.tile_shape(self.dims)
            self.add(kind="dynamic-slice", dims=tuple(d for d, t in enumerate(dst.tile_dims) if t > 1),
                     mesh_axes=(), replica_groups=[], bytes_per_device=0, input_bytes=full,
                     output_bytes=self.nbytes(out_shape), input_shape=self.dims, output_shape=out_shape,
                     cost=0.0, sharding_after=dst, note="local slice")


def _repad_shift(n: int, a: int, b: int) -> int:
    """Elements by which a device's data is misplaced after re-tiling a dim of size ``n`` from ``a`` to
    ``b`` padded tiles (ceil tiling): for a gather (``a = f*b``) tile i of the result starts at
    ``i*ceil(n/b)`` but the gathered pieces put it at ``i*f*ceil(n/a)``; for a local slice (``b = f*a``)
    a device cuts its sub-tile at ``(i//f)*ceil(n/a) + (i%f)*ceil(n/b)``.  The largest offset over the
    tiles holding real data (0 when the padded sizes agree)."""
    sa, sb = -(-n // a), -(-n // b)
    worst = 0
    for i in range(b):
        if i * sb >= n:
            break
        if a % b == 0:
            got = i * (a // b) * sa
        elif b % a == 0:
            f = b // a
            got = (i // f) * sa + (i % f) * sb
        else:
            return 0
        worst = max(worst, abs(i * sb - got))
    return worst


def _decision(kind: int, n: int, a: int, b: int) -> int:
    """The outcome of one dims-dependent decision of the planner on a dim of size ``n``:

    - kind 0, :meth:`_Builder.move_repads`: 1 when re-tiling from ``a`` to ``b`` padded tiles (both
      above 1) changes the padded size ``ceil(n / t) * t``, else 0;
    - kind 1, :meth:`_Builder.repad`: 0 when the data needs no shift (:func:`_repad_shift`), else the
      elements of the new tile the re-pad permute moves, ``min(shift, ceil(n / b))`` (>= 1; what its
      recorded step charges, :func:`_step_bytes`);
    - kind 2, an all-to-all's transposes (:func:`collectives.all_to_all_transposes`): whether the
      padded per-device size ``ceil(n / a)`` is above 1, i.e. ``n > a`` (``b`` unused).

    Two dims with the same outcome of every decision a plan made get the same plan."""
    if kind == 0:
        return int(a > 1 and b > 1 and -(-n // a) * a != -(-n // b) * b)
    if kind == 1:
        shift = _repad_shift(n, a, b)
        return min(shift, -(-n // b)) if shift > 0 else 0
    return int(n > a)


def _flat_permute_cost(mesh, nbytes: int) -> float:
    return max(float(a) for a in mesh.alpha) + max(float(b) for b in mesh.beta) * nbytes


def _sorted_groups(groups: list[list[int]]) -> list[list[int]]:
    return sorted(([int(d) for d in g] for g in groups), key=lambda g: (min(g), g))


@_memo
def _shifted_pair(src: _Layout, dst: _Layout) -> bool:
    """GSPMD's ``ReshardPartialReplicateWithAllToAll`` pattern: ``src`` partially replicated with tile counts
    ``(1, d0, .., d[n-2])`` and replication ``d[n-1]``, ``dst`` fully tiled ``(d0, .., d[n-1])`` (n >= 2), the same
    devices in the same (row-major) order. It reads dim positions, so a pair that matches is never priced
    on its canonical reduction (:func:`_canonical_cost` drops inert dims): :func:`_planned_cost` and
    :func:`resharding_cost_table` plan it in full (the gcd recipe path)."""
    n = len(dst.tiles)
    return (n >= 2 and src.rep > 1 and dst.rep == 1 and src.tiles[0] == 1 and src.tiles[1:] == dst.tiles[:-1]
            and dst.tiles[-1] == src.rep and np.array_equal(src.devs.ravel(), dst.devs.ravel()))


def _dim_move(src: tuple[int, ...], dst: tuple[int, ...]) -> tuple[int, int, int] | None:
    """(source dim, target dim, k) when exactly one dim loses a factor k and one other gains it."""
    down = [d for d, (s, t) in enumerate(zip(src, dst)) if t < s]
    up = [d for d, (s, t) in enumerate(zip(src, dst)) if t > s]
    if len(down) != 1 or len(up) != 1:
        return None
    i, j = down[0], up[0]
    if src[i] % dst[i] or dst[j] % src[j]:
        return None
    k = src[i] // dst[i]
    if dst[j] // src[j] != k:
        return None
    return i, j, k


@_memo
def _swap_moves(src: tuple[int, ...], dst: tuple[int, ...]) -> list[tuple[int, int, int]] | None:
    """All-to-alls that turn tile counts ``src`` into ``dst`` when the counts of the differing dims are
    a permutation of each other: each all-to-all swaps the counts of two dims (the larger count's
    dim hands its extra factor to the other). Greedy, smallest current count first (as GSPMD orders
    them). None when not a permutation or a swap is not a whole factor."""
    diff = [d for d in range(len(src)) if src[d] != dst[d]]
    if not diff or sorted(src[d] for d in diff) != sorted(dst[d] for d in diff):
        return None
    cur = list(src)
    out: list[tuple[int, int, int]] = []
    for _ in range(4 * len(src)):
        pend = [d for d in range(len(cur)) if cur[d] != dst[d]]
        if not pend:
            return out
        smallest = min(cur[d] for d in pend)
        i = max(d for d in pend if cur[d] == smallest)
        cands = [d for d in pend if d != i and cur[d] == dst[i]]
        if not cands:
            return None
        if smallest == 1:
            cands = [d for d in cands if dst[d] != 1] or cands
        j = cands[0]
        a, b = cur[j], cur[i]
        if a > b:
            if a % b:
                return None
            out.append((j, i, a // b))
        else:
            if b % a:
                return None
            out.append((i, j, b // a))
        cur[i], cur[j] = cur[j], cur[i]
    return None


def _gather_choices(tiles: Sequence[int], dst: Sequence[int], total: int):
    """Per-dim gather factors whose product is ``total``, only on dims the target splits at least as
    much (GSPMD gathers such a dim and re-splits it with an all-to-all), minor dims first."""
    n = len(tiles)

    def rec(d: int, left: int):
        if d < 0:
            if left == 1:
                yield ()
            return
        top = tiles[d] if dst[d] >= tiles[d] else 1
        for f in range(1, top + 1):
            if tiles[d] % f == 0 and left % f == 0:
                for rest in rec(d - 1, left // f):
                    yield rest + (f,)

    yield from rec(n - 1, total)


@_memo
def _whole_dim_gathers(tiles: tuple[int, ...], dst: tuple[int, ...], total: int) -> list[tuple[int, ...]]:
    """Sets of split dims gathered completely whose tile product is ``total``: dims the target does
    not split first, then fewer dims, then lower dims (deterministic)."""
    split = [d for d, t in enumerate(tiles) if t > 1]
    found = []
    for k in range(1, len(split) + 1):
        for combo in itertools.combinations(split, k):
            if math.prod(tiles[d] for d in combo) == total:
                found.append(combo)
    found.sort(key=lambda c: (sum(1 for d in c if dst[d] > 1), len(c), c))
    return found


def _split_choices(tiles: Sequence[int], dst: Sequence[int], total: int):
    """Per-dim factors to slice out of the replication (product ``total``), only on dims the target
    splits more, each dividing what that dim still lacks."""
    n = len(tiles)

    def rec(d: int, left: int):
        if d == n:
            if left == 1:
                yield ()
            return
        need = dst[d] // tiles[d] if dst[d] > tiles[d] and dst[d] % tiles[d] == 0 else 1
        for f in range(1, need + 1):
            if need % f == 0 and left % f == 0:
                for rest in rec(d + 1, left // f):
                    yield (f,) + rest

    yield from rec(0, total)


@_memo
def _best_split(tiles: tuple[int, ...], dst: tuple[int, ...], total: int):
    """The first of :func:`_split_choices` whose sliced tile counts reach ``dst`` by the fewest
    :func:`_swap_moves`: ``(slices, moves)``, or None when none does."""
    best = None
    for slices in _split_choices(tiles, dst, total):
        mid = tuple(t * g for t, g in zip(tiles, slices))
        seq = _swap_moves(mid, dst)
        if seq and (best is None or len(seq) < len(best[1])):
            best = (slices, seq)
    return best


@_memo
def _slice_replication(src: _Layout, slices: Sequence[int]) -> _Layout:
    """The layout after each device slices the minor part of its replica index into ``slices``."""
    devs = src.devs
    tiles = list(src.tiles)
    for d, g in enumerate(slices):
        if g == 1:
            continue
        r = devs.shape[-1]
        sp = devs.reshape(devs.shape[:-1] + (r // g, g))
        sp = np.moveaxis(sp, -1, d + 1)  # right after dim d: the minor factor of dim d
        tiles[d] *= g
        devs = sp.reshape(tuple(tiles) + (r // g,))
    return _Layout(tuple(tiles), devs)


def _as_shape(shape: Shape | str) -> Shape:
    if isinstance(shape, Shape):
        return shape
    return parse_shape(str(shape))


def plan(shape: Shape | str, src: HloSharding, dst: HloSharding, mesh) -> ReshardPlan:
    """Plan the resharding of a tensor of ``shape`` from ``src`` to ``dst`` on ``mesh``.

    ``shape``: a :class:`Shape` or its text (``'f16[32,16,1000,256]'``); tuple shapes are planned leaf
    by leaf (``step.leaf``). ``mesh``: a :class:`hloshard.mesh.DeviceMesh` (needs ``shape``,
    ``device_ids``, ``alpha``, ``beta``). Returns a :class:`ReshardPlan` (bytes per device, cost units).

    Raises InputError when a tiled sharding's rank differs from the tensor's rank. Shardings that do
    not describe the mesh's devices never raise: they get a conservative plan (``plan.conservative``).
    """
    return _plan(shape, src, dst, mesh, True)


def _plan(shape: Shape | str, src: HloSharding, dst: HloSharding, mesh, describe: bool,
          builders: list | None = None) -> ReshardPlan:
    """:func:`plan`; ``describe=False``: only ``total_cost`` (cost-only callers: no steps, notes or
    memory figures); ``builders``: the per-leaf planners are appended to it (their ``recipe`` and
    ``even``)."""
    shape = _as_shape(shape)
    leaves = shape.leaves() if shape.is_tuple else [shape]
    steps: list[ReshardStep] = []
    notes: list[str] = []
    conservative = False
    before = peak = after = 0
    costs: list[float] = []
    for i, leaf in enumerate(leaves):
        s = src.leaf(i) if src.is_tuple else src
        d = dst.leaf(i) if dst.is_tuple else dst
        for sh, what in ((s, "source"), (d, "destination")):
            if sh.kind == "tiled" and sh.tiled_rank != leaf.rank:
                raise InputError(f"{what} sharding {sh} has {sh.tiled_rank} tiled dims but {leaf} has "
                                 f"rank {leaf.rank}")
        b = _Builder(leaf, mesh, i, describe)
        if builders is not None:
            builders.append(b)
        unknown = s.kind == "unknown" or d.kind == "unknown"
        if not unknown:
            try:
                b.run_any(s, d)
            except _Unsupported as exc:
                b.steps.clear()
                b.costs.clear()
                b.recipe.clear()
                b.conservative(s, d, str(exc))
                conservative = True
        costs.extend(b.costs)
        if not describe:
            continue
        leaf_before = _bytes(leaf, s)
        leaf_after = leaf_before if unknown else _bytes(leaf, d)
        if unknown:
            b.notes.append("an {unknown} sharding is not resharded (cost 0)")
        if any(not st.exact_mesh_axes for st in b.steps if st.kind != "dynamic-slice") and not conservative:
            b.notes.append("some replica groups do not span whole mesh axes (a sub-axis or a device order the "
                           "mesh does not have): costed with that axis' alpha/beta and n = group size")
        leaf_peak = max([leaf_before, leaf_after] + [st.input_bytes + st.output_bytes for st in b.steps])
        before += leaf_before
        after += leaf_after
        peak += leaf_peak  # leaves are resharded one after another, but all stay live: sum is an upper bound
        steps.extend(b.steps)
        prefix = f"leaf {i}: " if len(leaves) > 1 else ""
        notes.extend(prefix + n for n in b.notes)
    total = round(float(sum(costs)), 6)  # no 0.00099999999 float noise
    return ReshardPlan(shape=shape, src=src, dst=dst, steps=steps, total_cost=total,
                       memory_before=before, memory_peak=peak, memory_after=after,
                       conservative=conservative, notes=notes)


def _bytes(leaf: Shape, sharding: HloSharding) -> int:
    if sharding.kind == "tiled" and sharding.tiled_rank == leaf.rank:
        return tile_bytes(leaf.element_type, sharding.tile_shape(leaf.dims))
    return leaf.byte_size


# ------------------------------------------------------------------------------------------------
# cached cost


def _mesh_key(mesh) -> tuple:
    ids = np.asarray(mesh.device_ids)
    return (tuple(int(s) for s in mesh.shape), tuple(int(d) for d in ids.ravel()),
            tuple(float(a) for a in mesh.alpha), tuple(float(b) for b in mesh.beta),
            C.hbm_units_per_byte(mesh),   # a device's HBM term (collectives.with_hbm) or None
            getattr(mesh, "axis_levels", None))   # links inside an axis that spans nodes (collectives.link_levels)


def _mesh_token(mesh) -> int:
    """A small int standing for the mesh's shape, device ids, alpha and beta (equal meshes get the
    same token), remembered per mesh object so that cache keys hash cheaply."""
    memo = _mesh_memo(mesh)
    hit = memo.get("token")
    if hit is not None and hit[0] is mesh.alpha and hit[1] is mesh.beta:
        return hit[2]
    token = _MESH_TOKENS.setdefault(_mesh_key(mesh), len(_MESH_TOKENS))
    memo["token"] = (mesh.alpha, mesh.beta, token)
    return token


_MESH_TOKENS: dict[tuple, int] = {}
_COST_CACHE: dict[tuple, float] = {}
_CACHE_LIMIT = 1 << 16
#: (dims' gcds with the device count, src, dst, mesh) -> the recipe of an even plan, or None when the
#: plan pads somewhere (then every shape of that key is planned in full; see :func:`_planned_cost`)
_RECIPE_CACHE: dict[tuple, list | None] = {}
#: reduced layouts of :func:`_canonical_cost` (their :attr:`_Layout.key`) -> small ints
_REDUCED_IDS: dict[tuple, int] = {}
#: at most this many recorded plans per canonical pair (:func:`_canonical_cost`; distinct padded dims)
_PLANS_PER_PAIR = 16
#: (mesh token, element type, reduced dims) -> :class:`_Table` of canonical costs
_TABLES: dict[tuple, "_Table"] = {}
#: costs held in all tables together (``[count]``), and the most kept before they are all forgotten
_TABLE_SIZE = [0]
_TABLE_LIMIT = 1 << 21
#: recorded plan steps ``(priced, tiles, mult, extra)`` -> index in :data:`_STEPS`
_STEP_IDS: dict[tuple, int] = {}
_STEPS: list[tuple] = []
#: a recorded plan's steps (a tuple of step ids) -> index in :data:`_RECIPES`
_RECIPE_IDS: dict[tuple, int] = {}
_RECIPES: list[tuple] = []
#: a recorded plan's decisions (sorted ``((kind, dim, a, b), outcome)`` items of ``_Builder.tests``) ->
#: index in :data:`_TESTS`
_TESTS_IDS: dict[tuple, int] = {}
_TESTS: list[tuple] = []


def resharding_cost(shape: Shape | str, src: HloSharding, dst: HloSharding, mesh) -> float:
    """``plan(shape, src, dst, mesh).total_cost``, cached on (shape, src, dst, mesh) (cost units).

    Equal shardings cost 0 without planning. The cache keys on the shape's type and dims, the semantic
    sharding (metadata ignored) and the mesh's shape, device ids, alpha and beta; it holds up to 65,536
    entries (cleared when full). Array shapes whose dims share their gcd with the device count reuse
    one plan, re-priced for their bytes (:func:`_planned_cost`; the same figure as planning them).
    Raises InputError as :func:`plan`.
    """
    if src == dst:
        return 0.0
    shape = _as_shape(shape)
    skey = (shape.element_type, shape.dims) if not shape.is_tuple else str(shape.without_layout())
    mkey = _mesh_token(mesh)
    key = (skey, src, dst, mkey)
    hit = _COST_CACHE.get(key)
    if hit is not None:
        return hit
    value = _planned_cost(shape, src, dst, mesh, mkey)
    if len(_COST_CACHE) >= _CACHE_LIMIT:
        _COST_CACHE.clear()
    _COST_CACHE[key] = value
    return value


def _planned_cost(shape: Shape, src: HloSharding, dst: HloSharding, mesh, mkey) -> float:
    """``_plan(shape, src, dst, mesh).total_cost``, planning once per canonical (source, target) pair
    for arrays whose shardings are tiled or replicated (:func:`_canonical_cost`), else once per
    (per-dim gcd with the device count N, src, dst, mesh).

    Why the gcd key gives the same figure: the planner's choices depend on the layouts alone, except
    where a tile count does not divide its dim (padding: re-pad permutes); every tile count divides N,
    so when all the counts a plan looks at divide the dims (``_Builder.even``), they divide the dims of
    every shape with the same ``gcd(dim, N)``, which therefore get the same steps. Each step's cost is
    then its cost function applied to the bytes of ``dims / tiles`` (times a multiplier), which
    :func:`_replay` recomputes, with the same rounding and summation order as the plan. The recipe is
    checked against the plan it was recorded from before it is kept."""
    if shape.is_tuple:
        return _plan(shape, src, dst, mesh, False).total_cost
    dims = tuple(int(d) for d in shape.dims)
    memo = _mesh_memo(mesh)
    la, lb = _canonical_layout(src, len(dims), mesh, memo), _canonical_layout(dst, len(dims), mesh, memo)
    if la is not None and lb is not None and not _shifted_pair(la, lb):
        return _canonical_cost(shape.element_type, dims, la, lb, mesh, mkey, memo)
    n = memo.get("devices")
    if n is None:
        n = memo["devices"] = int(np.asarray(mesh.device_ids).size)
    rkey = (tuple(math.gcd(d, n) for d in dims), src, dst, mkey)
    if rkey in _RECIPE_CACHE:
        recipe = _RECIPE_CACHE[rkey]
        if recipe is not None:
            return _replay(recipe, shape.element_type, dims)
        return _plan(shape, src, dst, mesh, False).total_cost
    builders: list = []
    value = _plan(shape, src, dst, mesh, False, builders).total_cost
    b = builders[0]
    recipe = b.recipe if b.even and _replay(b.recipe, shape.element_type, dims) == value else None
    if len(_RECIPE_CACHE) >= _CACHE_LIMIT:
        _RECIPE_CACHE.clear()
    _RECIPE_CACHE[rkey] = recipe
    return value


def _canonical_layout(sharding: HloSharding, rank: int, mesh, memo: dict) -> _Layout | None:
    """The layout of a tiled (rank ``rank``) or replicated ``sharding`` on ``mesh``, or None when
    :func:`_plan` would not simply run :meth:`_Builder.run` on it (other kinds, a rank mismatch, a
    sharding off the mesh's devices); memoised per mesh."""
    key = ("canonical layout", sharding, rank)
    hit = memo.get(key, _MISS)
    if hit is _MISS:
        hit = None
        if sharding.kind == "replicated" or (sharding.kind == "tiled" and sharding.tiled_rank == rank):
            try:
                hit = _layout(sharding, rank, mesh)
            except _Unsupported:
                hit = None
        memo[key] = hit
    return hit


def _reduced_layout(layout: _Layout, keep: tuple[int, ...], memo: dict) -> tuple[int, _Layout]:
    """``layout`` restricted to the dims ``keep`` plus one trailing unsplit dim, and a small int naming
    it (equal reduced layouts get the same int, :data:`_REDUCED_IDS`)."""
    key = ("reduced layout", layout.key, keep)
    hit = memo.get(key)
    if hit is None:
        tiles = tuple(layout.tiles[d] for d in keep) + (1,)
        red = _Layout(tiles, layout.devs.reshape(tiles + (-1,)).copy())
        hit = memo[key] = (_REDUCED_IDS.setdefault(red.key, len(_REDUCED_IDS)), red)
    return hit


def _canonical_cost(element_type: str, dims: tuple[int, ...], la: _Layout, lb: _Layout, mesh, mkey,
                    memo: dict) -> float:
    """``_plan(shape, src, dst, mesh).total_cost`` for an array of ``dims`` between two tiled or
    replicated shardings with layouts ``la`` and ``lb`` (cost units), planned once per canonical pair.

    The canonical pair: both layouts restricted to the dims that either splits, plus one trailing dim
    that neither splits, holding the product of the dropped dims (:func:`_reduced_layout`). Why that
    is the same figure:

    1. *Dims split by neither side are inert.* :meth:`_Builder.run` looks at a dim through its tile
       counts; a dim with 1 tile in both never differs (``_dim_move``, ``_swap_moves`` and the
       all-to-all fallback act on differing dims; ``_whole_dim_gathers``, the gathers of ``gather_to``
       and of the fallback act on split dims; ``_split_choices``, the ``dst.rep == 1`` branch and
       :meth:`_Builder.unreplicate_first_dim` only on dims the target splits), and no step ever splits
       it (GSPMD's shifted all-to-all, :func:`_shifted_pair`, reads dim positions: its pairs never come
       here). The planner's other choices are
       ordered by dim index (``min``/``max``/first over dims, tuples of dims sorted), which dropping dims
       keeps. A device array with its size-1 axes dropped holds its devices in the same row-major order,
       so groups, permutation pairs and equivalence tests are unchanged. Every step's bytes are
       ``tile_bytes(ceil(dims / tiles))`` with tile 1 on those dims: the product of the dropped dims as
       one trailing dim gives the same integer. So the reduced problem charges the same steps with the
       same cost functions on the same bytes, in the same order.
    2. *One plan serves many shapes of the pair.* The planner reads the dims only in decisions that
       test one dim against tile counts (:func:`_decision`: whether an all-to-all move re-pads, the
       elements a re-pad permute moves, which padded sizes an all-to-all's transposes see above 1) and
       in the bytes of its steps (the ceil of ``tile_shape``, which decides nothing: the notes'
       ``repads`` tests change no cost); ``_Builder.tests`` records every decision with its outcome
       (also through memoised steps). Take a plan recorded on dims ``D0`` and other dims ``D`` on which
       every recorded decision has the same outcome. By induction over the run, the planner on ``D``
       makes the same decisions with the same outcomes (the first one that differed would be recorded),
       hence the same steps (re-pad permutes included, moving the same number of elements);
       :func:`_replay` recomputes each step's bytes from ``D`` as the step does (:func:`_step_bytes`)
       and its cost with the same function, rounding and summation order. So a plan on a dim that a
       tile count pads (the 6 heads of a model over 4 devices) serves the even dims of another table
       wherever the padding decided nothing. Shapes that match no recorded plan are planned (reduced,
       by 1), and their plan is recorded too (up to :data:`_PLANS_PER_PAIR` per pair).

    ``tests/test_reshard_cache.py`` checks this figure against a fresh full plan on random pairs."""
    keep, rdims = _canonical_dims(dims, tuple(d for d in range(len(dims)) if la.tiles[d] > 1 or lb.tiles[d] > 1),
                                  mesh)
    ia, ra = _reduced_layout(la, keep, memo)
    ib, rb = _reduced_layout(lb, keep, memo)
    return _canonical_value(_table(mkey, element_type, rdims), ia, ra, ib, rb, mesh)


def _canonical_dims(dims: tuple[int, ...], split: tuple[int, ...], mesh) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The dims a canonical pair keeps (``split``: the dims either side splits, ascending) and its reduced
    dims (the kept ones, then the product of the others). On a mesh that prices HBM the dims of size
    above 1 before the last split one are kept too: an all-to-all's transposes read them
    (:func:`collectives.all_to_all_transposes`)."""
    keep = split
    if keep and C.hbm_units_per_byte(mesh) is not None:
        keep = tuple(d for d in range(keep[-1] + 1) if d in keep or dims[d] > 1)
    return keep, tuple(dims[d] for d in keep) + (math.prod(d for i, d in enumerate(dims) if i not in keep),)


class _Table:
    """The canonical costs of one (mesh, element type, reduced dims): ``values`` maps the id of a
    reduced source layout to a dict from the id of a reduced target layout to its cost (nested, so
    that :func:`resharding_cost_table` looks a row's dict up once), ``steps`` a recorded step's id to
    its rounded cost for these dims, ``totals`` a recorded plan's id (:data:`_RECIPES`) to its replayed total
    (:func:`_replay_ids`), ``fits`` the id of a recorded plan's decisions (:data:`_TESTS`) to whether
    they have the same outcomes on these dims (:func:`_canonical_value`)."""

    __slots__ = ("mkey", "element_type", "rdims", "values", "steps", "totals", "fits", "shape")

    def __init__(self, mkey, element_type: str, rdims: tuple[int, ...]):
        self.mkey, self.element_type, self.rdims = mkey, element_type, rdims
        self.values: dict[int, dict[int, float]] = {}
        self.steps: dict[int, float] = {}
        self.totals: dict[int, float] = {}
        self.fits: dict[int, bool] = {}
        self.shape = Shape(element_type, rdims)   # what the canonical pairs are planned on


def _table(mkey, element_type: str, rdims: tuple[int, ...]) -> _Table:
    key = (mkey, element_type, rdims)
    hit = _TABLES.get(key)
    if hit is None:
        if len(_TABLES) >= _CACHE_LIMIT:
            _TABLES.clear()
        hit = _TABLES[key] = _Table(mkey, element_type, rdims)
    return hit


def _canonical_value(table: _Table, ia: int, ra: _Layout, ib: int, rb: _Layout, mesh) -> float:
    """The cost of the canonical pair (``ia``: ``ra``, ``ib``: ``rb``) for ``table``'s dims
    (:func:`_canonical_cost` says why it is the planner's figure): remembered in the table, else
    replayed from a recorded plan whose decisions have the same outcomes on the dims, else planned and
    recorded."""
    row = table.values.get(ia)
    if row is None:
        row = table.values[ia] = {}
    hit = row.get(ib)
    if hit is not None:
        return hit
    rdims, element_type = table.rdims, table.element_type
    ckey = ("canonical", ia, ib, table.mkey)
    entries = _RECIPE_CACHE.get(ckey)
    value = None
    if entries is not None:
        fits = table.fits
        for tid, rid in entries:
            ok = fits.get(tid)
            if ok is None:   # whether the recorded plan's decisions have the same outcomes on these dims
                ok = fits[tid] = all(_decision(kind, rdims[d], a, b) == out for (kind, d, a, b), out in _TESTS[tid])
            if ok:
                value = table.totals.get(rid)
                if value is None:
                    value = _replay_ids(rid, table)
                break
    if value is None:
        b = _Builder(table.shape, mesh, 0, False)
        b.run(ra, rb)
        value = round(float(sum(b.costs)), 6)
        if entries is None or len(entries) < _PLANS_PER_PAIR:   # recorded only where it replays exactly
            rid = _interned(tuple(_interned(st, _STEP_IDS, _STEPS) for st in b.recipe), _RECIPE_IDS, _RECIPES)
            if _replay_ids(rid, table) == value:
                if entries is None:
                    if len(_RECIPE_CACHE) >= _CACHE_LIMIT:
                        _RECIPE_CACHE.clear()
                    entries = _RECIPE_CACHE[ckey] = []
                entries.append((_interned(tuple(sorted(b.tests.items())), _TESTS_IDS, _TESTS), rid))
    _TABLE_SIZE[0] += 1
    if _TABLE_SIZE[0] > _TABLE_LIMIT:   # bounded memory: forget every table (they are refilled on demand)
        _TABLES.clear()
        _TABLE_SIZE[0] = 0
    row[ib] = value
    return value


def _interned(item: tuple, ids: dict[tuple, int], items: list[tuple]) -> int:
    """A small int naming ``item`` (its index in ``items``; ``ids`` maps each item to it): a recorded step
    (:data:`_STEPS`), a plan's steps (:data:`_RECIPES`) or its decisions (:data:`_TESTS`)."""
    hit = ids.get(item)
    if hit is None:
        hit = ids[item] = len(items)
        items.append(item)
    return hit


def _replay_ids(rid: int, table: _Table) -> float:
    """:func:`_replay` of the recorded plan ``rid`` (its step ids, :data:`_RECIPES`) for ``table``'s dims,
    each step's rounded cost remembered in the table, and so is the total (the same figures, rounding
    and summation order)."""
    hit = table.totals.get(rid)
    if hit is not None:
        return hit
    ids = _RECIPES[rid]
    total = 0
    costs = table.steps
    for sid in ids:
        c = costs.get(sid)
        if c is None:
            priced, tiles, mult, extra = _STEPS[sid]
            c = costs[sid] = round(float(priced(_step_bytes(table.element_type, table.rdims, tiles, mult,
                                                            extra))), 6)
        total += c
    total = table.totals[rid] = round(float(total), 6)
    return total


#: :func:`resharding_cost_table`'s ``check`` is called after every this many pairs it plans: a pair not in a
#: table costs 0.5-2.5 ms (a 6-axis mesh, rank-6 tensor: 29,073 plans in 72 s under cProfile, load 7.7), so a
#: deadline is read at least every ~0.05 s of planning; the read itself (``time.monotonic``) is ~0.1 us
CHECK_PLANS = 16


def resharding_cost_table(shape: Shape | str, srcs: Sequence[HloSharding], dsts: Sequence[HloSharding],
                          mesh, check=None) -> np.ndarray:
    """``resharding_cost(shape, srcs[i], dsts[j], mesh)`` for every pair, as a float64 array of shape
    ``(len(srcs), len(dsts))`` (cost units), NaN where a pair is not between two tiled (rank of
    ``shape``) or replicated shardings of the mesh's devices, or ``shape`` is a tuple: the caller prices
    those with :func:`resharding_cost` (which may raise). The canonical pairs of :func:`_canonical_cost`,
    grouped by the dims either side splits so that each group's reduced dims are found once.
    ``check``: optional callable, called before each row and after every :data:`CHECK_PLANS` pairs
    planned (not found in a table); whatever it raises propagates (a caller's deadline: one row of a
    6-axis mesh's matrix on a rank-6 tensor plans thousands of pairs, seconds)."""
    shape = _as_shape(shape)
    out = np.full((len(srcs), len(dsts)), np.nan)
    if shape.is_tuple or not srcs or not dsts:
        return out
    dims = tuple(int(d) for d in shape.dims)
    rank = len(dims)
    memo = _mesh_memo(mesh)
    mkey = _mesh_token(mesh)
    la = [_canonical_layout(s, rank, mesh, memo) for s in srcs]
    lb = [_canonical_layout(d, rank, mesh, memo) for d in dsts]
    ma = [None if x is None else sum(1 << d for d, t in enumerate(x.tiles) if t > 1) for x in la]
    # the targets by the dims they split: a row meets each such class with one mask, so one table
    cls: dict[int, list[int]] = {}
    for j, y in enumerate(lb):
        if y is not None:
            cls.setdefault(sum(1 << d for d, t in enumerate(y.tiles) if t > 1), []).append(j)
    classes = [(m_b, np.asarray(js, dtype=np.intp), js) for m_b, js in cls.items()]
    shifted_to: dict[tuple[int, ...], list[int]] = {}   # fully tiled targets by tile counts (_shifted_pair)
    for j, y in enumerate(lb):
        if y is not None and y.rep == 1 and rank >= 2:
            shifted_to.setdefault(y.tiles, []).append(j)
    groups: dict[int, tuple] = {}
    targets: dict[tuple, tuple] = {}   # (mask, target class) -> the class' reduced target ids and layouts
    planned = 0
    for i, (x, m_a) in enumerate(zip(la, ma)):
        if check is not None:
            check()
        if x is None:
            continue
        row = out[i]
        for m_b, cols, js in classes:
            m = m_a | m_b
            g = groups.get(m)
            if g is None:   # the same reduction as _canonical_cost's
                keep, rdims = _canonical_dims(dims, tuple(d for d in range(rank) if m >> d & 1), mesh)
                g = groups[m] = (keep, _table(mkey, shape.element_type, rdims), {})
            keep, table, red_a = g
            ra = red_a.get(i)
            if ra is None:
                ra = red_a[i] = _reduced_layout(x, keep, memo)
            tk = (m, m_b)
            tg = targets.get(tk)
            if tg is None:
                rbs = [_reduced_layout(lb[j], keep, memo) for j in js]
                tg = targets[tk] = ([r[0] for r in rbs], rbs)
            ids, rbs = tg
            known = table.values.get(ra[0])
            vals = [None] * len(ids) if known is None else [known.get(b) for b in ids]
            if None in vals:
                for k, v in enumerate(vals):
                    if v is not None:
                        continue
                    planned += 1
                    if check is not None and planned % CHECK_PLANS == 0:
                        check()
                    try:
                        vals[k] = _canonical_value(table, ra[0], ra[1], ids[k], rbs[k][1], mesh)
                    except Exception:  # noqa: BLE001 - left NaN: the caller's resharding_cost raises it
                        vals[k] = math.nan
            row[cols] = vals
        if rank >= 2 and x.rep > 1 and x.tiles[0] == 1:   # GSPMD's shifted all-to-all: planned in full (_shifted_pair)
            for j in shifted_to.get(x.tiles[1:] + (x.rep,), ()):
                if _shifted_pair(x, lb[j]):
                    try:
                        row[j] = _planned_cost(shape, srcs[i], dsts[j], mesh, mkey)
                    except Exception:  # noqa: BLE001 - left NaN: the caller's resharding_cost raises it
                        row[j] = math.nan
    return out


def _replay(recipe: list, element_type: str, dims: Sequence[int]) -> float:
    """A plan's ``total_cost`` from its recipe (``_Builder.charge``) for a tensor of ``dims``: each
    step's cost function on its bytes (:func:`_step_bytes`), rounded to 1e-6 as ``_Builder.add``
    rounds it, summed in step order and rounded as :func:`_plan` does."""
    total = 0
    for priced, tiles, mult, extra in recipe:
        total += round(float(priced(_step_bytes(element_type, dims, tiles, mult, extra))), 6)
    return round(float(total), 6)


def _step_bytes(element_type: str, dims: Sequence[int], tiles: Sequence[int], mult: int, extra) -> int:
    """The bytes a recorded step charges for a tensor of ``dims`` (as ``_Builder`` computes them): the
    padded tile ``ceil(dims / tiles)``; ``extra`` None: its bytes times ``mult``; ``(0, dim, f)`` (an
    all-gather): that tile with ``dim`` grown ``f`` times; ``(1, dim, c)`` (a re-pad permute): ``c``
    of the tile's slices along ``dim``."""
    shape = [-(-d // t) for d, t in zip(dims, tiles)]
    if extra is None:
        return tile_bytes(element_type, shape) * mult
    kind, dim, f = extra
    if kind == 0:
        shape[dim] *= f
        return tile_bytes(element_type, shape) * mult
    return tile_bytes(element_type, shape) // max(shape[dim], 1) * f


class _Priced:
    """``fn(mesh, nbytes, *args, **kw)`` (a collective's cost) for one mesh, remembered per byte count
    (the same float the call returns)."""

    __slots__ = ("mesh", "fn", "args", "kw", "values")

    def __init__(self, mesh, fn, args: tuple, kw: dict):
        self.mesh, self.fn, self.args, self.kw, self.values = mesh, fn, args, kw, {}

    def __call__(self, nbytes: int) -> float:
        hit = self.values.get(nbytes)
        if hit is None:
            hit = self.values[nbytes] = self.fn(self.mesh, nbytes, *self.args, **self.kw)
        return hit


def clear_cache() -> None:
    """Forget every cached :func:`resharding_cost` (and the plans reused across shapes)."""
    _COST_CACHE.clear()
    _RECIPE_CACHE.clear()
    _REDUCED_IDS.clear()
    _TABLES.clear()
    _TABLE_SIZE[0] = 0
    _STEP_IDS.clear()
    _STEPS.clear()
    _TESTS_IDS.clear()
    _TESTS.clear()
    _RECIPE_IDS.clear()
    _RECIPES.clear()
    _LAYOUT_MEMO.clear()
    _MESH_MEMO.clear()
    _MESH_TOKENS.clear()


# ------------------------------------------------------------------------------------------------
# XLA auto-sharding's own estimate


def autosharding_resharding_cost(shape: Shape | str, src: HloSharding, dst: HloSharding, mesh) -> float:
    """What XLA's auto-sharding pass charges for resharding ``src -> dst`` (its ``ReshardingCost``), in
    cost units, from the rules paraphrased in ``../shared/reference/xla_autosharding.md`` section 1.3.

    Unlike :func:`plan` (what the SPMD partitioner really inserts), this is the solver's estimate, for
    comparing with XLA's ``communication_resharding_costs``:

    * 0 when equal, or when ``src`` is replicated / unknown (a local slice);
    * each tensor dim is mapped to the mesh axes it is split over (:meth:`DeviceMesh.sharding_to_axes`);
      a dim split over several axes, or tile-dim counts that differ, take the mixed-mesh rule (per
      dropped axis: an all-to-all of the full bytes over all devices when ``dst`` still splits on that
      axis, else an all-gather of the full bytes);
    * dims that only lose their axis form a chain of all-gathers in tensor-dim order, each with B =
      the per-device bytes grown by the axes gathered so far;
    * exactly one dim losing an axis and one gaining one: an all-to-all of the full bytes on a mesh
      with one non-trivial axis, else (as XLA) the collective-permute / over-estimate path;
    * the same tile counts in a different device order: a collective-permute of the per-device bytes;
    * anything else (shardings off the mesh, axis swaps): XLA's ``OverestimateReplicationCost``
      (an all-gather per mesh axis, B = per-device bytes grown axis by axis).

    Known approximation: XLA maps a sharding with a single split dim onto a flattened 1-D mesh; we map
    it onto the axes it really uses. Tuples: the sum over leaves. Raises InputError on a rank mismatch.
    """
    shape = _as_shape(shape)
    if shape.is_tuple:
        return sum(autosharding_resharding_cost(leaf, src.leaf(i) if src.is_tuple else src,
                                                dst.leaf(i) if dst.is_tuple else dst, mesh)
                   for i, leaf in enumerate(shape.leaves()))
    rank = shape.rank
    for sh, what in ((src, "source"), (dst, "destination")):
        if sh.kind == "tiled" and sh.tiled_rank != rank:
            raise InputError(f"{what} sharding {sh} has {sh.tiled_rank} tiled dims but {shape} has rank {rank}")
    if src == dst or src.kind in ("replicated", "unknown") or dst.kind == "unknown":
        return 0.0
    if src.kind == "unreduced":  # XLA's resharding model has no partial values: use the plan
        return _plan(shape, src, dst, mesh, False).total_cost
    per = _bytes(shape, src)
    full = shape.byte_size
    axes_big = [a for a, s in enumerate(mesh.shape) if int(s) > 1]

    def overestimate() -> float:
        b, total = float(per), 0.0
        for a in axes_big:
            total += (C.all_reduce_cost if src.kind == "maximal" else C.all_gather_cost)(mesh, b, a)
            b *= int(mesh.shape[a])
        return total

    def try_permute() -> float:
        if src.kind == "tiled" and dst.kind == "tiled" and src.tile_dims == dst.tile_dims \
                and src.replication_factor == dst.replication_factor:
            pairs = [(int(a), int(b)) for a, b in zip(np.asarray(src.tile_assignment).ravel(),
                                                      np.asarray(dst.tile_assignment).ravel()) if a != b]
            return C.collective_permute_cost(mesh, per, pairs)
        return overestimate()

    if src.kind != "tiled" or dst.kind not in ("tiled", "replicated"):
        return overestimate()

    try:
        s_axes = mesh.sharding_to_axes(src, rank)
        d_axes = mesh.sharding_to_axes(dst, rank)
    except (ShardingMeshMismatch, AttributeError):
        return try_permute()
    s_tiled = sum(1 for t in src.tile_dims if t > 1) + (1 if src.replication_factor > 1 else 0)
    d_tiled = -1 if dst.kind == "replicated" else \
        sum(1 for t in dst.tile_dims if t > 1) + (1 if dst.replication_factor > 1 else 0)
    multi = any(len(x) > 1 for x in s_axes) or any(len(x) > 1 for x in d_axes)
    if multi or (d_tiled != -1 and s_tiled != d_tiled):
        # mixed mesh shape: compare the axis sets per dim
        collective_axes: list[int] = []
        for sa, da in zip(s_axes, d_axes):
            ss, ds = set(sa), set(da)
            if ss == ds or ds >= ss:
                continue
            if not ds <= ss:
                return overestimate()
            collective_axes.extend(a for a in sa if a not in ds)
        d_used = {a for x in d_axes for a in x}
        total = 0.0
        n_all = int(np.asarray(mesh.device_ids).size)
        for a in collective_axes:
            if a in d_used:
                total += C.all_to_all_cost(mesh, full, a, group_size=n_all)
            else:
                total += C.all_gather_cost(mesh, full, a)
        return total
    slice_dims, gather_axes = [], []
    for sa, da in zip(s_axes, d_axes):
        if sa == da:
            continue
        if not sa:
            slice_dims.append(da[0])
        elif not da:
            gather_axes.append(sa[0])
        else:
            return try_permute()
    if not gather_axes:
        return 0.0
    if len(slice_dims) > 1 and len(gather_axes) > 1:
        return try_permute()
    if len(slice_dims) == 1 and len(gather_axes) == 1:
        if len(axes_big) > 1:
            return try_permute()
        return C.all_to_all_cost(mesh, full, gather_axes[0])
    b, total = float(per), 0.0
    for a in gather_axes:
        b *= int(mesh.shape[a])
        total += C.all_gather_cost(mesh, b, a)
    return total
