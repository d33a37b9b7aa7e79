"""The logical device mesh, and the mapping between HloShardings and mesh axes.

A :class:`DeviceMesh` is an n-D array of device ids (SPMD partition ids ``0..N-1``) with one alpha
(latency, cost units per collective) and one beta (cost units per byte) per mesh axis, as in XLA's
auto-sharding ``ClusterEnvironment`` (``shared/reference/xla_autosharding.md`` section 1.1; both default
to 1.0, XLA's ``kIciDeviceMeshAlpha/Beta``).

A sharding "maps onto the mesh" when each tensor dim is split over an ordered tuple of whole mesh axes
(major to minor) and the remaining axes, if any, hold replicas (partial replication,
``last_tile_dim_replicate``). The device order follows XLA's ``Tile`` helper (util.cc): the mesh is
transposed so that the used axes come first (ascending tensor dim, each dim's axes in listed order),
then the unused axes in ascending order, then flattened and reshaped to the tile assignment. For the
iota mesh this is the iota form ``<=[mesh]T(order)``.
"""

from __future__ import annotations

import itertools
import math
import re
from typing import Iterable, Sequence

import numpy as np

from .errors import InputError, UsageError
from .hlo.sharding import HloSharding

#: Largest device count a mesh may have (hloshard builds per-device tables of this size).
MAX_MESH_DEVICES = 65536

__all__ = ["DeviceMesh", "DimAxes", "ShardingMeshMismatch"]


class ShardingMeshMismatch(InputError):
    """A sharding that does not map onto the mesh axes (wrong device count, a split that is not a
    product of whole mesh axes, a device order no axis assignment produces, a maximal / manual /
    tuple sharding, or a rank mismatch). The message says which. Exit code 2."""


class DimAxes(tuple):
    """Per tensor dim, the tuple of mesh axes it is split over (major to minor), e.g. ``((0,), (), (1,))``.

    A tuple of tuples, plus ``unused_axes``: the mesh axes no dim is split over, ascending (the
    partially replicated axes; axes of size 1 are always unused). ``used_axes`` is the flat tuple of
    the axes that are used, in tensor-dim order.
    """

    unused_axes: tuple[int, ...]

    def __new__(cls, dims: Iterable[Sequence[int]], unused_axes: Sequence[int] = ()):
        obj = super().__new__(cls, tuple(tuple(int(a) for a in d) for d in dims))
        obj.unused_axes = tuple(sorted(int(a) for a in unused_axes))
        return obj

    @property
    def used_axes(self) -> tuple[int, ...]:
        return tuple(a for d in self for a in d)

    def __repr__(self) -> str:
        return f"DimAxes({tuple(self)!r}, unused_axes={self.unused_axes!r})"

    def __eq__(self, other):
        if isinstance(other, DimAxes):
            return tuple(self) == tuple(other) and self.unused_axes == other.unused_axes
        return tuple.__eq__(self, other)

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash((tuple(self), self.unused_axes))


def _parse_list(text: str, what: str, conv, mesh_desc: str | None = None) -> list:
    parts = [p.strip() for p in str(text).split(",")]
    if not parts or any(p == "" for p in parts):
        raise UsageError(f"invalid {what} {text!r}: expected comma-separated values"
                         + (f" (one per mesh axis of {mesh_desc})" if mesh_desc else ""))
    out = []
    for p in parts:
        try:
            out.append(conv(p))
        except ValueError:
            raise UsageError(f"invalid {what} {text!r}: {p!r} is not a number") from None
    return out


class DeviceMesh:
    """A logical device mesh.

    Attributes:
      shape: mesh axis sizes, e.g. ``(2, 4)``.
      device_ids: ``np.ndarray`` (int64, read-only) shaped like the mesh: device id at each mesh position.
      alpha: per mesh axis, the latency term of the alpha-beta collective model (cost units).
      beta: per mesh axis, the inverse-bandwidth term (cost units per byte).
    """

    __slots__ = ("shape", "device_ids", "alpha", "beta", "_is_iota", "_coords", "_map_cache", "_build_cache")

    def __init__(self, shape: Sequence[int], device_ids=None, alpha: Sequence[float] | None = None,
                 beta: Sequence[float] | None = None):
        """Raises UsageError on a non-positive axis size, device ids that are not a permutation of
        ``0..N-1`` or the wrong number of them, or alpha/beta of the wrong length or negative."""
        shape = tuple(int(s) for s in shape)
        if not shape or any(s <= 0 for s in shape):
            raise UsageError(f"invalid mesh shape {shape}: every axis size must be a positive integer")
        n = math.prod(shape)
        desc = "x".join(map(str, shape))
        if n > MAX_MESH_DEVICES:
            raise UsageError(f"invalid mesh {desc}: {n:,} devices; at most {MAX_MESH_DEVICES:,} are supported")
        if device_ids is None:
            ids = np.arange(n, dtype=np.int64)
        else:
            ids = np.asarray(device_ids, dtype=np.int64).ravel()
            if ids.size != n:
                raise UsageError(f"--device-ids lists {ids.size} devices but the mesh {desc} has {n}")
            if sorted(ids.tolist()) != list(range(n)):
                raise UsageError(f"--device-ids must be a permutation of 0..{n - 1} (each device once)")
        ids = ids.reshape(shape)
        ids.flags.writeable = False
        self.shape = shape
        self.device_ids = ids
        self.alpha = self._per_axis(alpha, "alpha", desc)
        self.beta = self._per_axis(beta, "beta", desc)
        self._is_iota = bool(np.array_equal(ids.ravel(), np.arange(n)))
        self._coords = None
        self._map_cache = {}
        self._build_cache = {}

    def _per_axis(self, values, what: str, desc: str) -> tuple[float, ...]:
        if values is None:
            return tuple(1.0 for _ in self.shape)
        vals = tuple(float(v) for v in values)
        if len(vals) != len(self.shape):
            raise UsageError(f"--{what} has {len(vals)} value(s) but the mesh {desc} has {len(self.shape)} "
                             f"axes: give one comma-separated value per axis")
        if any(not math.isfinite(v) or v < 0 for v in vals):
            raise UsageError(f"--{what} values must be finite and non-negative, got {list(vals)}")
        return vals

    # ---------------------------------------------------------------- construction
    @classmethod
    def parse(cls, spec: str, device_ids: str | Sequence[int] | None = None,
              alpha: str | Sequence[float] | None = None,
              beta: str | Sequence[float] | None = None) -> "DeviceMesh":
        """Build a mesh from command-line text: ``spec`` ``'2x4'`` / ``'2x2x2'`` / ``'8'``,
        ``device_ids`` ``'0,2,1,3,...'`` (default iota), ``alpha`` / ``beta`` ``'1,1'`` (one value per axis;
        default 1.0). Raises UsageError with a message naming the bad flag."""
        text = str(spec).strip()
        if not re.fullmatch(r"[0-9]+(\s*[xX*,]\s*[0-9]+)*", text):
            raise UsageError(f"invalid --mesh {spec!r}: expected axis sizes separated by 'x', e.g. 2x4, "
                             f"2x2x2 or 8")
        shape = [int(s) for s in re.split(r"\s*[xX*,]\s*", text)]
        if any(s <= 0 for s in shape):
            raise UsageError(f"invalid --mesh {spec!r}: axis sizes must be positive")
        desc = "x".join(map(str, shape))
        if isinstance(device_ids, str):
            device_ids = _parse_list(device_ids, "--device-ids", int)
        if isinstance(alpha, str):
            alpha = _parse_list(alpha, "--alpha", float, desc)
        if isinstance(beta, str):
            beta = _parse_list(beta, "--beta", float, desc)
        return cls(shape, device_ids, alpha, beta)

    @classmethod
    def for_module(cls, module, spec: str | None = None, device_ids=None, alpha=None,
                   beta=None) -> "DeviceMesh":
        """The mesh for ``module``: from ``spec`` when given, else the 1-D mesh ``num_partitions``.

        Raises UsageError when neither is available (pre-optimization JAX dumps state no
        num_partitions: pass ``--mesh``), or when the module's num_partitions (>1) differs from the
        mesh size. ``num_partitions=1`` (XLA's default, never printed) counts as not stated.
        """
        n = getattr(module, "num_partitions", None) if module is not None else None
        stated = n is not None and int(n) > 1
        if spec is None:
            if not stated:
                raise UsageError("the device mesh is unknown: the module states no num_partitions, so pass "
                                 "--mesh (e.g. --mesh 2x4)")
            return cls.parse(str(int(n)), device_ids, alpha, beta)
        mesh = cls.parse(spec, device_ids, alpha, beta)
        if stated and mesh.num_devices != int(n):
            raise UsageError(f"--mesh {mesh} has {mesh.num_devices} devices but the module has "
                             f"num_partitions={int(n)}")
        return mesh

    # ---------------------------------------------------------------- basic queries
    @property
    def num_devices(self) -> int:
        return int(self.device_ids.size)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def is_iota(self) -> bool:
        """The device ids are 0..N-1 in row-major order."""
        return self._is_iota

    def axis_size(self, axis: int) -> int:
        return self.shape[axis]

    def coords(self, device: int) -> tuple[int, ...]:
        """Mesh coordinates of ``device``. Raises ValueError for an unknown device."""
        if self._coords is None:
            self._coords = {int(d): tuple(int(i) for i in idx) for idx, d in np.ndenumerate(self.device_ids)}
        try:
            return self._coords[int(device)]
        except KeyError:
            raise ValueError(f"device {device} is not in the mesh {self}") from None

    def __str__(self) -> str:
        return "x".join(map(str, self.shape))

    def _describe(self) -> str:
        """``2x4``, plus the device ids when they are not the iota."""
        if self._is_iota:
            return str(self)
        return f"{self} (device ids {','.join(map(str, self.device_ids.ravel().tolist()))})"

    def __repr__(self) -> str:
        ids = "" if self._is_iota else f", device_ids={self.device_ids.ravel().tolist()}"
        return f"DeviceMesh({self}{ids}, alpha={list(self.alpha)}, beta={list(self.beta)})"

    def _key(self):
        return (self.shape, self.device_ids.tobytes(), self.alpha, self.beta)

    def __eq__(self, other):
        if not isinstance(other, DeviceMesh):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def to_json(self) -> dict:
        """``{"shape": [...], "device_ids": [...] (flat), "alpha": [...], "beta": [...]}``."""
        return {"shape": list(self.shape), "device_ids": self.device_ids.ravel().tolist(),
                "alpha": list(self.alpha), "beta": list(self.beta)}

    @classmethod
    def from_json(cls, data: dict) -> "DeviceMesh":
        """Inverse of :meth:`to_json`. Raises UsageError on inconsistent data."""
        try:
            return cls(data["shape"], data.get("device_ids"), data.get("alpha"), data.get("beta"))
        except (KeyError, TypeError, ValueError) as exc:
            raise UsageError(f"invalid device mesh description {data!r}: {exc}") from None

    # ---------------------------------------------------------------- sharding <-> axes
    def _check_axes(self, axes: Iterable[int], what: str) -> tuple[int, ...]:
        out = tuple(int(a) for a in axes)
        for a in out:
            if not 0 <= a < self.ndim:
                raise ValueError(f"{what}: mesh axis {a} out of range for the mesh {self} ({self.ndim} axes)")
        if len(set(out)) != len(out):
            raise ValueError(f"{what}: mesh axis listed twice in {list(out)}")
        return out

    def axes_to_sharding(self, dim_axes: Sequence[Sequence[int]]) -> HloSharding:
        """The sharding that splits tensor dim ``t`` over the mesh axes ``dim_axes[t]`` (major to minor).

        Tile count of dim t = product of its axes' sizes; if the used axes do not cover the mesh, a
        trailing replication dim is added (``last_tile_dim_replicate``). Device order: XLA's ``Tile``
        convention (module docstring), so for the iota mesh the result prints as
        ``<=[mesh]T(order)`` (canonicalized). No axis used -> ``{replicated}``.
        Raises ValueError on an out-of-range or repeated axis.
        """
        key = tuple(tuple(d) for d in dim_axes)
        hit = self._build_cache.get(key)
        if hit is None:
            hit = self._axes_to_sharding(key)
            if len(self._build_cache) < 100000:
                self._build_cache[key] = hit
        return hit

    def _axes_to_sharding(self, dim_axes) -> HloSharding:
        dims = [self._check_axes(d, "axes_to_sharding") for d in dim_axes]
        used = [a for d in dims for a in d]
        self._check_axes(used, "axes_to_sharding")
        if all(self.shape[a] == 1 for a in used):
            return HloSharding.replicated()
        unused = [a for a in range(self.ndim) if a not in used]
        order = used + unused
        tile = [math.prod(self.shape[a] for a in d) for d in dims]
        rest = math.prod(self.shape[a] for a in unused)
        ltdr = rest > 1
        if ltdr:
            tile.append(rest)
        if self._is_iota:
            return HloSharding.iota(tile, self.shape, order, last_tile_dim_replicate=ltdr)
        ta = self.device_ids.transpose(order).reshape(tile)
        return HloSharding.tiled(ta, last_tile_dim_replicate=ltdr)

    def sharding_to_axes(self, sharding: HloSharding, rank: int) -> DimAxes:
        """The mesh axes each of the ``rank`` tensor dims is split over (inverse of :meth:`axes_to_sharding`).

        ``{replicated}`` gives ``()`` for every dim (all axes unused). A tiled sharding maps when some
        assignment of whole mesh axes (size > 1) to its tiled dims, with the remaining axes as replicas,
        rebuilds exactly its tile assignment (semantic equality, so V1/V2 forms and the order within
        replication groups do not matter). Raises :class:`ShardingMeshMismatch` saying why otherwise
        (maximal / manual / unknown / tuple / subgroup shardings, rank mismatch, device count not the
        mesh size, a tile count that is not a product of mesh axis sizes, or a device order no
        assignment produces). Never guesses. Results are cached per (sharding, rank).
        """
        key = (sharding, int(rank))
        hit = self._map_cache.get(key)
        if hit is not None:
            if isinstance(hit, ShardingMeshMismatch):
                raise ShardingMeshMismatch(str(hit))
            return hit
        try:
            result = self._sharding_to_axes(sharding, int(rank))
        except ShardingMeshMismatch as exc:
            if len(self._map_cache) < 100000:
                self._map_cache[key] = exc
            raise
        if len(self._map_cache) < 100000:
            self._map_cache[key] = result
        return result

    def _sharding_to_axes(self, sharding: HloSharding, rank: int) -> DimAxes:
        kind = sharding.kind
        if kind == "replicated":
            return DimAxes([()] * rank, range(self.ndim))
        if kind != "tiled":
            why = {"maximal": "it places the whole tensor on one device",
                   "manual": "the op is manually partitioned",
                   "unknown": "it is a placeholder",
                   "unreduced": "it holds unreduced partial values",
                   "tuple": "it is a tuple sharding (map each leaf)",
                   "named": "named-mesh shardings are not supported"}.get(kind, "")
            raise ShardingMeshMismatch(f"sharding {sharding.to_string(False)} does not map onto the mesh {self}: "
                                       f"{why}")
        text = sharding.to_string(False)
        if sharding.subgroup_types:
            raise ShardingMeshMismatch(f"sharding {text} has subgroups last_tile_dims="
                                       f"{{{', '.join(sharding.subgroup_types)}}}, which are not mapped onto "
                                       f"mesh axes")
        if sharding.tiled_rank != rank:
            raise ShardingMeshMismatch(f"sharding {text} tiles {sharding.tiled_rank} dims but the tensor has "
                                       f"rank {rank}")
        if sharding.num_devices != self.num_devices:
            raise ShardingMeshMismatch(f"sharding {text} uses {sharding.num_devices} devices but the mesh "
                                       f"{self} has {self.num_devices}")
        tiles = sharding.tile_dims
        big = [a for a in range(self.ndim) if self.shape[a] > 1]
        found = []

        def assign(t: int, free: tuple[int, ...], acc: list[tuple[int, ...]]):
            if t == rank:
                found.append(list(acc))
                return
            need = tiles[t]
            if need == 1:
                acc.append(())
                assign(t + 1, free, acc)
                acc.pop()
                return
            for k in range(1, len(free) + 1):
                for combo in itertools.permutations(free, k):
                    if math.prod(self.shape[a] for a in combo) == need:
                        acc.append(combo)
                        assign(t + 1, tuple(a for a in free if a not in combo), acc)
                        acc.pop()

        assign(0, tuple(big), [])
        if not found:
            sizes = "x".join(map(str, self.shape))
            raise ShardingMeshMismatch(f"sharding {text} splits the tensor dims {list(tiles)} ways, which are not "
                                       f"products of distinct whole axes of the mesh {sizes} (a split over part "
                                       f"of an axis?)")
        for cand in found:
            if self.axes_to_sharding(cand) == sharding:
                used = {a for d in cand for a in d}
                return DimAxes(cand, [a for a in range(self.ndim) if a not in used])
        raise ShardingMeshMismatch(f"sharding {text} splits the dims {list(tiles)} ways, but its device order "
                                   f"matches no assignment of the axes of the mesh {self._describe()}")

    def sharding_axes(self, sharding: HloSharding, rank: int) -> tuple[int, ...]:
        """The mesh axes a sharding splits the tensor over (flat, tensor-dim order); see
        :meth:`sharding_to_axes` for the errors."""
        return self.sharding_to_axes(sharding, rank).used_axes

    # ---------------------------------------------------------------- replica groups
    def replica_groups(self, axes: Sequence[int], sort: bool = True) -> list[list[int]]:
        """Groups of devices that differ only along the mesh ``axes``: the participants of a collective
        over those axes. ``[]`` axes give one singleton group per device.

        With ``sort=True`` (default) each group is sorted and the groups are ordered by their first
        device (deterministic; matches XLA's groups on iota meshes). With ``sort=False`` each group
        lists its devices in mesh order along ``axes`` (the first listed axis major), which is the
        order an all-gather over those axes concatenates in. Raises ValueError on a bad axis.
        """
        axes = self._check_axes(axes, "replica_groups")
        rest = [a for a in range(self.ndim) if a not in axes]
        size = math.prod(self.shape[a] for a in axes)
        arr = self.device_ids.transpose(rest + list(axes)).reshape(-1, size)
        groups = arr.tolist()
        if sort:
            groups = sorted(sorted(g) for g in groups)
        return groups

    def axes_for_replica_groups(self, groups: Sequence[Sequence[int]]) -> tuple[int, ...] | None:
        """The mesh axes a collective's replica groups run over, or None when they match no set of axes.

        Groups are compared as sets of sets. When the device order inside the groups also matches an
        ordering of those axes (``replica_groups(axes, sort=False)``), the axes come in that order;
        otherwise ascending. Axes of size 1 are never included. Empty ``groups`` (XLA's "all devices")
        give every axis of size > 1.
        """
        big = [a for a in range(self.ndim) if self.shape[a] > 1]
        if not groups:
            return tuple(big)
        target = sorted(sorted(int(d) for d in g) for g in groups)
        exact = [list(map(int, g)) for g in groups]
        for k in range(0, len(big) + 1):
            for subset in itertools.combinations(big, k):
                if self.replica_groups(subset) != target:
                    continue
                for order in itertools.permutations(subset):
                    mine = self.replica_groups(order, sort=False)
                    if sorted(mine) == sorted(exact):
                        return tuple(order)
                return tuple(subset)
        return None
