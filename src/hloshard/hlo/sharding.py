"""The HloSharding model: XLA's sharding annotations, parsed, normalized, compared and printed.

Forms (see ``shared/reference/hlo_syntax.md`` section 6 for the text syntax):

* ``{replicated}``, ``{manual}``, ``{unknown}``, ``{unreduced}``, ``{maximal device=3}``;
* tiled, V1 (explicit device list) ``{devices=[2,2]0,1,2,3}`` and V2 (iota)
  ``{devices=[4,2]<=[2,4]T(1,0)}`` (= ``arange(8).reshape(2,4).transpose(1,0).reshape(4,2)``);
* partial replication ``last_tile_dim_replicate`` and subgroups ``last_tile_dims={manual, replicated}``;
* tuples ``{{replicated}, {devices=[1,2]3,5}}`` (one element per leaf of the tuple shape, pre-order);
* ``shard_as N`` / ``shard_like N`` groups and ``metadata={...}`` (kept raw, ignored by equality);
* named-mesh ("V3", ``{mesh[x=2,y=4], [{x}, {y}]}``) shardings are kept as raw text (kind ``'named'``).

Parsing applies the same normalizations as XLA's parser (``HloSharding::PartialTile`` and
``HloSharding::Subgroup``): a partially replicated sharding whose replication dim covers every device
becomes ``{replicated}``, a replication dim of size 1 is dropped, the device ids inside each replication
group are sorted, subgroup dims of size 1 are dropped, subgroup dims of the same type are merged and the
types are ordered manual, unreduced, replicated; iota tile assignments are canonicalized (size-1
reshape dims dropped, dims consecutive in the transpose merged). Printing then keeps the form the
sharding was written in (explicit stays explicit, iota stays iota), exactly as XLA does; shardings built
by hloshard (:meth:`HloSharding.tiled`) print in the iota form whenever their device list is an iota.

Equality and hashing are semantic: the V1 and V2 forms of the same device list are equal, metadata is
ignored (XLA's ``HloSharding::operator==``).

Shard geometry follows XLA's ceil tiling (``HloSharding::TileOffsetForDevice`` /
``TileLimitForDevice``): along a tensor dim of size N split in d tiles, tile i covers
``[min(i*ceil(N/d), N), min((i+1)*ceil(N/d), N))``; trailing tiles may be short or empty.
"""

from __future__ import annotations

import functools
import math
import re
from typing import Iterable, Sequence

import numpy as np

from ..errors import HloSyntaxError
from .lexical import MAX_DEVICES, brace_block_end

__all__ = ["HloSharding", "SUBGROUP_TYPES", "iota_form", "parse_sharding"]

#: Subgroup types accepted in ``last_tile_dims={...}``, in XLA's canonical order.
SUBGROUP_TYPES = ("manual", "unreduced", "replicated", "maximal")
_TYPE_ORDER = {t: i for i, t in enumerate(SUBGROUP_TYPES)}

_SIMPLE_KINDS = ("replicated", "manual", "unknown", "unreduced")


# --------------------------------------------------------------------------------------------------
# iota tile assignments
# --------------------------------------------------------------------------------------------------

def _iota_array(reshape_dims: Sequence[int], perm: Sequence[int] | None) -> np.ndarray:
    """Flat device array of the iota form ``<=[reshape_dims]T(perm)`` (int64, 1-D)."""
    n = math.prod(reshape_dims)
    a = np.arange(n, dtype=np.int64)
    if perm is not None and len(reshape_dims) > 1 and list(perm) != list(range(len(perm))):
        a = a.reshape(tuple(reshape_dims)).transpose(tuple(perm)).ravel()
    return a


def iota_form(devices: np.ndarray | Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """The minimal iota form ``(reshape_dims, transpose_perm)`` of a flat device list, or None.

    ``devices`` (any shape; read in row-major order) equals
    ``arange(n).reshape(reshape_dims).transpose(transpose_perm).ravel()``. The form is minimal: no
    reshape dim of size 1, and no two reshape dims that are consecutive (ascending) in the permutation
    (XLA's canonical ``IotaTileAssignment``). ``perm`` is ``(0,)`` when there is a single reshape dim.
    Returns None when the list is not such a transposed iota (e.g. not a permutation of 0..n-1).
    """
    flat = np.asarray(devices, dtype=np.int64).ravel()
    n = int(flat.size)
    if n == 0 or flat[0] != 0:
        return None
    if n == 1:
        return (1,), (0,)
    sizes: list[int] = []     # position dims, minor to major
    strides: list[int] = []   # value stride of each position dim
    block = 1
    while block < n:
        sub = flat[::block]
        m = sub.size
        v = int(sub[1])
        if v <= 0:
            return None
        eq = sub == np.arange(m, dtype=np.int64) * v
        s = m if bool(eq.all()) else int(np.argmin(eq))
        if s < 2 or m % s:
            return None
        sizes.append(s)
        strides.append(v)
        block *= s
    k = len(sizes)
    order = sorted(range(k), key=lambda i: -strides[i])      # reshape dims, major first
    reshape = tuple(sizes[i] for i in order)
    where = {pos: r for r, pos in enumerate(order)}
    perm = tuple(where[k - 1 - i] for i in range(k))
    if not np.array_equal(_iota_array(reshape, perm), flat):
        return None
    return reshape, perm


def _iota_groups_sortable(form: tuple[tuple[int, ...], tuple[int, ...]], group: int) -> bool:
    """Whether XLA keeps the iota form when it sorts replica groups of size ``group`` (the minor tile
    dim) of the iota ``form`` (``HloSharding::PartialTile``): walking the transposed iota dims from the
    minor end, whole dims must divide the remaining group size, and the dim that is larger than what
    remains must be a multiple of it (it is split). Otherwise XLA falls back to an explicit device list.
    """
    reshape, perm = form
    g = group
    for p in reversed(perm):
        size = reshape[p]
        if g == 1:
            return True
        if size <= g:
            if g % size:
                return False
            g //= size
        else:
            return size % g == 0
    return True


def _sort_replica_groups(ta: np.ndarray, form):
    """Sort the devices inside each replica group (the minor tile dim), as XLA's ``PartialTile`` does.

    Returns ``(tile_assignment, iota form or None)``: an iota stays an iota when XLA can express the
    sorted groups as one (:func:`_iota_groups_sortable`), else the result is an explicit list (also for
    explicit input, even when the sorted list happens to be an iota).
    """
    sorted_ta = np.sort(ta, axis=-1)
    if form is None:
        return sorted_ta, None
    if not _iota_groups_sortable(form, int(ta.shape[-1])):
        return sorted_ta, None
    if np.array_equal(sorted_ta, ta):
        return ta, form
    return sorted_ta, iota_form(sorted_ta)


def _canonical_iota(reshape_dims: Sequence[int], perm: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Canonical (minimal) iota form of ``<=[reshape_dims]T(perm)``, computed symbolically: reshape dims
    of size 1 are dropped, and two reshape dims that are adjacent and consecutive (ascending) in the
    permutation are merged, until no such pair remains. Equals :func:`iota_form` of the expanded list.
    """
    dims = [int(d) for d in reshape_dims]
    order = [int(p) for p in perm]
    keep = [i for i, d in enumerate(dims) if d != 1]
    if not keep:
        return (1,), (0,)
    new_index = {old: new for new, old in enumerate(keep)}
    dims = [dims[i] for i in keep]
    order = [new_index[p] for p in order if p in new_index]
    merged = True
    while merged:
        merged = False
        for k in range(len(order) - 1):
            a = order[k]
            if order[k + 1] == a + 1:
                dims[a] *= dims[a + 1]
                del dims[a + 1]
                del order[k + 1]
                order = [p - 1 if p > a else p for p in order]
                merged = True
                break
    return tuple(dims), tuple(order)


# --------------------------------------------------------------------------------------------------
# the model
# --------------------------------------------------------------------------------------------------

class HloSharding:
    """One XLA sharding annotation (immutable; build with the class methods or :meth:`parse`).

    Attributes (read-only):
      kind: ``'replicated' | 'maximal' | 'manual' | 'unknown' | 'unreduced' | 'tiled' | 'tuple' | 'named'``.
      tile_assignment: ``np.ndarray`` (int64, read-only) of device ids, the data dims then the
        replication / subgroup dims; ``np.array([0])`` for non-tiled shardings.
      last_tile_dim_replicate: the last tile-assignment dim lists replicas.
      subgroup_types: from ``last_tile_dims={...}``, e.g. ``('manual', 'replicated')``.
      maximal_device: the device of ``{maximal device=N}``, else None.
      tuple_elements: the leaf shardings of a tuple sharding (pre-order), else ``()``.
      shard_as / shard_like: the shard group id, else None.
      metadata: the raw ``{...}`` text after ``metadata=`` (kept, printed back, ignored by equality).
      raw: the original text of a named-mesh (V3) sharding, else None.
    """

    __slots__ = ("kind", "_ta", "_iota", "last_tile_dim_replicate", "subgroup_types", "maximal_device",
                 "tuple_elements", "shard_as", "shard_like", "metadata", "raw", "_key", "_hash", "_pos")

    def __init__(self, kind: str, *, tile_assignment: np.ndarray | None = None,
                 iota: tuple[tuple[int, ...], tuple[int, ...]] | None = None,
                 last_tile_dim_replicate: bool = False, subgroup_types: tuple[str, ...] = (),
                 maximal_device: int | None = None, tuple_elements: tuple["HloSharding", ...] = (),
                 shard_as: int | None = None, shard_like: int | None = None,
                 metadata: str | None = None, raw: str | None = None):
        # Low-level constructor: no normalization. Use the class methods.
        self.kind = kind
        if tile_assignment is not None:
            tile_assignment = np.asarray(tile_assignment, dtype=np.int64)
            tile_assignment.flags.writeable = False
        self._ta = tile_assignment
        self._iota = iota
        self.last_tile_dim_replicate = bool(last_tile_dim_replicate)
        self.subgroup_types = tuple(subgroup_types)
        self.maximal_device = maximal_device
        self.tuple_elements = tuple(tuple_elements)
        self.shard_as = shard_as
        self.shard_like = shard_like
        self.metadata = metadata
        self.raw = raw
        self._key = None
        self._hash = None
        self._pos = None

    # ---------------------------------------------------------------- constructors
    @classmethod
    def replicated(cls, metadata: str | None = None) -> "HloSharding":
        """``{replicated}``: every device holds the whole tensor."""
        return cls("replicated", metadata=metadata)

    @classmethod
    def manual(cls, metadata: str | None = None) -> "HloSharding":
        """``{manual}``: the op is already partitioned; the SPMD partitioner leaves it alone."""
        return cls("manual", metadata=metadata)

    @classmethod
    def unknown(cls, metadata: str | None = None) -> "HloSharding":
        """``{unknown}``: a placeholder that sharding propagation may overwrite."""
        return cls("unknown", metadata=metadata)

    @classmethod
    def unreduced(cls, metadata: str | None = None) -> "HloSharding":
        """``{unreduced}``: every device holds a partial value not yet summed."""
        return cls("unreduced", metadata=metadata)

    @classmethod
    def maximal(cls, device: int, metadata: str | None = None) -> "HloSharding":
        """``{maximal device=N}``: device N holds the whole tensor and runs the op (-1: host)."""
        return cls("maximal", maximal_device=int(device), metadata=metadata)

    @classmethod
    def tuple(cls, elements: Iterable["HloSharding"]) -> "HloSharding":
        """A tuple sharding: one (non-tuple) sharding per leaf of the tuple shape, in pre-order.

        Raises ValueError if an element is itself a tuple sharding (XLA's tuple shardings are flat).
        """
        elems = tuple(elements)
        for e in elems:
            if e.kind == "tuple":
                raise ValueError("tuple sharding elements must not be tuple shardings (use the leaves)")
        return cls("tuple", tuple_elements=elems)

    @classmethod
    def named(cls, text: str) -> "HloSharding":
        """A named-mesh (V3 / Shardy-like) sharding kept as raw text (``{mesh[x=2], [{x}]}``)."""
        return cls("named", raw=text.strip())

    @classmethod
    def tiled(cls, tile_assignment, last_tile_dim_replicate: bool = False,
              last_tile_dims: Sequence[str] = (), metadata: str | None = None,
              shard_as: int | None = None, shard_like: int | None = None) -> "HloSharding":
        """A tiled sharding from a tile-assignment array (data dims, then the replicate/subgroup dims).

        Normalized as XLA does (see the module docstring); prints as the iota form when the device
        list is a (transposed) iota, else as an explicit list. Raises ValueError on an invalid tile
        assignment (fewer dims than subgroups, both ``last_tile_dim_replicate`` and
        ``last_tile_dims``, unknown subgroup type).
        """
        ta = np.array(tile_assignment, dtype=np.int64, copy=True)
        if ta.ndim == 0:
            ta = ta.reshape(1)
        form = iota_form(ta)
        return cls._make_tiled(ta, form, last_tile_dim_replicate, tuple(last_tile_dims),
                               metadata, shard_as, shard_like, detect_iota=True)

    @classmethod
    def iota(cls, dims: Sequence[int], reshape_dims: Sequence[int] | None = None,
             transpose_perm: Sequence[int] | None = None, last_tile_dim_replicate: bool = False,
             last_tile_dims: Sequence[str] = (), metadata: str | None = None,
             shard_as: int | None = None, shard_like: int | None = None) -> "HloSharding":
        """The V2 sharding ``{devices=[dims]<=[reshape_dims]T(transpose_perm)}``.

        ``reshape_dims`` defaults to ``[prod(dims)]``. Raises ValueError when the products differ or the
        permutation is not a permutation of ``range(len(reshape_dims))``.
        """
        dims = tuple(int(d) for d in dims)
        reshape = tuple(int(d) for d in (reshape_dims if reshape_dims is not None else (math.prod(dims),)))
        perm = tuple(int(p) for p in (transpose_perm if transpose_perm is not None else range(len(reshape))))
        if sorted(perm) != list(range(len(reshape))):
            raise ValueError(f"transpose permutation {list(perm)} is not a permutation of 0..{len(reshape) - 1}")
        if math.prod(dims) != math.prod(reshape):
            raise ValueError(f"iota product {math.prod(reshape)} differs from the tile product {math.prod(dims)}")
        ta = _iota_array(reshape, perm).reshape(dims)
        return cls._make_tiled(ta, _canonical_iota(reshape, perm), last_tile_dim_replicate,
                               tuple(last_tile_dims), metadata, shard_as, shard_like, detect_iota=False)

    @classmethod
    def _make_tiled(cls, ta: np.ndarray, form, ltdr: bool, types: tuple[str, ...], metadata, shard_as,
                    shard_like, detect_iota: bool) -> "HloSharding":
        """Normalize like XLA's ``PartialTile`` / ``Subgroup`` and build the sharding.

        ``form`` is the canonical iota form of ``ta`` when the sharding is in iota form (None: explicit).
        """
        extra = dict(metadata=metadata, shard_as=shard_as, shard_like=shard_like)
        for t in types:
            if t not in _TYPE_ORDER:
                raise ValueError(f"unknown subgroup type {t!r} in last_tile_dims (expected one of "
                                 f"{', '.join(SUBGROUP_TYPES)})")
        if ltdr and types:
            raise ValueError("last_tile_dim_replicate and last_tile_dims cannot both be given")
        if types:
            if len(types) > ta.ndim:
                raise ValueError(f"{len(types)} subgroup types but the tile assignment has only "
                                 f"{ta.ndim} dims")
            ndata = ta.ndim - len(types)
            sub_dims = ta.shape[ndata:]
            keep = [i for i, d in enumerate(sub_dims) if d != 1]
            kept_types = [types[i] for i in keep]
            data_product = math.prod(ta.shape[:ndata])
            # XLA checks "one type, no data tiling" before dropping the size-1 subgroup dims
            if data_product == 1 and all(t == types[0] for t in types) and types[0] in _SIMPLE_KINDS:
                return cls(types[0], **extra)
            # drop size-1 subgroup dims; order by type (stable: dims of one type keep their order),
            # then merge the adjacent dims of one type
            kept = ta.reshape(tuple(ta.shape[:ndata]) + tuple(sub_dims[i] for i in keep))
            order = sorted(range(len(keep)), key=lambda j: _TYPE_ORDER[kept_types[j]])
            perm = list(range(ndata)) + [ndata + j for j in order]
            new_types: list[str] = []
            new_dims = list(ta.shape[:ndata])
            for j in order:
                if new_types and new_types[-1] == kept_types[j]:
                    new_dims[-1] *= sub_dims[keep[j]]
                else:
                    new_types.append(kept_types[j])
                    new_dims.append(sub_dims[keep[j]])
            if perm != list(range(ta.ndim)) or len(new_dims) != ta.ndim:
                ta = kept.transpose(perm).reshape(new_dims)
                if form is not None:
                    form = iota_form(ta)
            types = tuple(new_types)
            if types == ("replicated",):
                types, ltdr = (), True
            elif types == ("manual",) and data_product == 1:
                return cls("manual", **extra)
            elif types and types[-1] == "replicated":
                # the devices inside each replicated subgroup are sorted, as for last_tile_dim_replicate
                ta, form = _sort_replica_groups(ta, form)
        if ltdr:
            if ta.ndim == 1 or ta.shape[-1] == ta.size:
                return cls("replicated", **extra)
            if ta.shape[-1] == 1:
                ta = ta.reshape(ta.shape[:-1])
                ltdr = False
            else:
                ta, form = _sort_replica_groups(ta, form)
        if detect_iota and form is None:
            form = iota_form(ta)
        return cls("tiled", tile_assignment=ta, iota=form, last_tile_dim_replicate=ltdr,
                   subgroup_types=types, **extra)

    # ---------------------------------------------------------------- parsing
    @staticmethod
    def parse(text: str) -> "HloSharding":
        """Parse XLA's sharding text (``{devices=[2,4]<=[8]}``, ``{replicated}``, ``{{...}, {...}}``).

        Raises :class:`HloSyntaxError` with ``line=1`` and a 1-based ``column`` relative to the start
        of ``text`` (the HLO parser offsets it to the file position). Results are cached on the text.
        """
        return _parse_cached(text)

    # ---------------------------------------------------------------- queries
    @property
    def is_replicated(self) -> bool:
        """Every device holds the whole tensor (for tuples: every element is replicated)."""
        if self.kind == "tuple":
            return all(e.is_replicated for e in self.tuple_elements)
        return self.kind == "replicated"

    @property
    def is_tiled(self) -> bool:
        return self.kind == "tiled"

    @property
    def is_tuple(self) -> bool:
        return self.kind == "tuple"

    @property
    def is_manual(self) -> bool:
        """``{manual}`` (not a tiled sharding with a manual subgroup; see :attr:`has_manual_subgroup`)."""
        return self.kind == "manual"

    @property
    def is_maximal(self) -> bool:
        return self.kind == "maximal"

    @property
    def is_unknown(self) -> bool:
        return self.kind == "unknown"

    @property
    def is_named(self) -> bool:
        return self.kind == "named"

    @property
    def has_manual_subgroup(self) -> bool:
        return "manual" in self.subgroup_types

    @property
    def is_iota(self) -> bool:
        """Tiled and stored (and printed) in the iota ``<=[...]`` form."""
        return self._iota is not None

    @property
    def iota_reshape_dims(self) -> tuple[int, ...] | None:
        return self._iota[0] if self._iota is not None else None

    @property
    def iota_transpose_perm(self) -> tuple[int, ...] | None:
        return self._iota[1] if self._iota is not None else None

    @property
    def tile_assignment(self) -> np.ndarray:
        """The tile assignment (int64, read-only), incl. replicate / subgroup dims; ``[0]`` if not tiled."""
        if self._ta is None:
            return _NOT_TILED
        return self._ta

    @property
    def tile_assignment_dims(self) -> tuple[int, ...]:
        """Shape of :attr:`tile_assignment` (incl. replicate / subgroup dims)."""
        return tuple(self.tile_assignment.shape)

    @property
    def num_subgroup_dims(self) -> int:
        """Trailing non-data dims of the tile assignment (replicate dim + subgroup dims)."""
        return int(self.last_tile_dim_replicate) + len(self.subgroup_types)

    @property
    def tile_dims(self) -> tuple[int, ...]:
        """Number of tiles along each tensor dim (data dims only); ``()`` when not tiled."""
        if self._ta is None:
            return ()
        shape = self._ta.shape
        return tuple(shape[:len(shape) - self.num_subgroup_dims])

    @property
    def tiled_rank(self) -> int:
        """The tensor rank a tiled sharding applies to (``len(tile_dims)``)."""
        return len(self.tile_dims)

    @property
    def num_tiles(self) -> int:
        """Product of :attr:`tile_dims` (1 when not tiled)."""
        return math.prod(self.tile_dims)

    @property
    def replication_factor(self) -> int:
        """Devices holding each tile: the product of the replicate / subgroup dims (1 if none)."""
        if self._ta is None:
            return 1
        return math.prod(self._ta.shape[len(self.tile_dims):])

    @property
    def devices(self) -> tuple[int, ...]:
        """The flat (row-major) device list of the tile assignment; ``(d,)`` for maximal; else ()."""
        if self._ta is not None:
            return tuple(self._ta.ravel().tolist())
        if self.kind == "maximal":
            return (self.maximal_device,)
        return ()

    @property
    def num_devices(self) -> int:
        """Devices named by the sharding: tile-assignment size, 1 for maximal, 0 when any count fits."""
        if self._ta is not None:
            return int(self._ta.size)
        return 1 if self.kind == "maximal" else 0

    # ---------------------------------------------------------------- shard geometry
    def _check_rank(self, dims: Sequence[int]) -> None:
        if len(dims) != self.tiled_rank:
            raise ValueError(f"sharding {self} has {self.tiled_rank} tiled dims but the tensor has rank "
                             f"{len(dims)}")

    def tile_index(self, device: int) -> tuple[int, ...]:
        """Index of ``device`` in the tile assignment (data dims only). Raises ValueError if absent."""
        if self._ta is None:
            raise ValueError(f"sharding {self} is not tiled")
        pos = self._device_positions().get(int(device))
        if pos is None:
            raise ValueError(f"device {device} is not in the tile assignment of {self}")
        return pos[:len(self.tile_dims)]

    def _device_positions(self) -> dict[int, tuple[int, ...]]:
        cache = self._pos
        if cache is None:
            cache = {}
            for idx, dev in np.ndenumerate(self._ta):
                cache.setdefault(int(dev), tuple(int(i) for i in idx))
            self._pos = cache
        return cache

    def tile_shape(self, dims: Sequence[int]) -> tuple[int, ...]:
        """Padded per-device shape ``ceil(dim / tiles)`` (what each device allocates); the full shape
        when not tiled. Raises ValueError on a rank mismatch."""
        if self._ta is None:
            return tuple(int(d) for d in dims)
        self._check_rank(dims)
        return tuple(-(-int(d) // t) for d, t in zip(dims, self.tile_dims))

    def shard_offsets(self, dims: Sequence[int], device: int) -> tuple[int, ...]:
        """Start of ``device``'s shard along each dim: ``min(i * ceil(N/d), N)`` (XLA's ceil tiling).

        Zeros when not tiled. Raises ValueError on a rank mismatch or a device not in the assignment.
        """
        if self._ta is None:
            return tuple(0 for _ in dims)
        self._check_rank(dims)
        idx = self.tile_index(device)
        return tuple(min(i * -(-int(n) // t), int(n)) for n, t, i in zip(dims, self.tile_dims, idx))

    def shard_shape(self, dims: Sequence[int], device: int) -> tuple[int, ...]:
        """Unpadded shape of the data ``device`` holds: ``min((i+1)*c, N) - min(i*c, N)``, c = ceil(N/d).

        The last tiles of an uneven split are short, and may be empty (0). The full shape when not
        tiled (replicated / maximal / manual / unknown). Raises ValueError as :meth:`shard_offsets`.
        """
        if self._ta is None:
            return tuple(int(d) for d in dims)
        self._check_rank(dims)
        idx = self.tile_index(device)
        out = []
        for n, t, i in zip(dims, self.tile_dims, idx):
            n = int(n)
            c = -(-n // t)
            out.append(min((i + 1) * c, n) - min(i * c, n))
        return tuple(out)

    def shard_slices(self, dims: Sequence[int], device: int) -> tuple[slice, ...]:
        """``device``'s shard as numpy slices of the full tensor (offsets + :meth:`shard_shape`)."""
        return tuple(slice(o, o + n) for o, n in zip(self.shard_offsets(dims, device),
                                                       self.shard_shape(dims, device)))

    # ---------------------------------------------------------------- tuples
    def leaf(self, index: int) -> "HloSharding":
        """The sharding of tuple leaf ``index``: the element of a tuple sharding, or ``self`` (a single
        sharding on a tuple shape applies to every leaf)."""
        if self.kind == "tuple":
            return self.tuple_elements[index]
        return self

    def as_tuple(self, num_leaves: int) -> "HloSharding":
        """This sharding expanded to a tuple sharding over ``num_leaves`` leaves (XLA's normalization of
        a single sharding on a tuple-shaped instruction; an empty tuple gets one element)."""
        if self.kind == "tuple":
            return self
        return HloSharding.tuple([self] * max(1, num_leaves))

    def with_metadata(self, metadata: str | None) -> "HloSharding":
        """A copy with ``metadata`` replaced (None drops it)."""
        s = object.__new__(HloSharding)
        for name in HloSharding.__slots__:
            setattr(s, name, getattr(self, name))
        s.metadata = metadata
        return s

    def without_metadata(self) -> "HloSharding":
        """A copy with no metadata (recursively for tuples)."""
        if self.kind == "tuple":
            return HloSharding.tuple(e.without_metadata() for e in self.tuple_elements)
        return self if self.metadata is None else self.with_metadata(None)

    # ---------------------------------------------------------------- equality
    def _semantic_key(self):
        if self._key is None:
            k = self.kind
            if k == "tuple":
                key = ("tuple", tuple(e._semantic_key() for e in self.tuple_elements))
            elif k == "tiled":
                key = ("tiled", self._ta.shape, self._ta.tobytes(), self.last_tile_dim_replicate,
                       self.subgroup_types, self.shard_as, self.shard_like)
            elif k == "maximal":
                key = ("maximal", self.maximal_device, self.shard_as, self.shard_like)
            elif k == "named":
                key = ("named", _named_key(self.raw))
            else:
                key = (k, self.shard_as, self.shard_like)
            self._key = key
        return self._key

    def __eq__(self, other):
        if not isinstance(other, HloSharding):
            return NotImplemented
        return self is other or self._semantic_key() == other._semantic_key()

    def __hash__(self):
        if self._hash is None:
            self._hash = hash(self._semantic_key())
        return self._hash

    # ---------------------------------------------------------------- printing
    def to_string(self, include_metadata: bool = True) -> str:
        """XLA's text form; ``include_metadata=False`` drops ``metadata=`` (XLA's default printer)."""
        if self.kind == "tuple":
            parts = []
            for i, e in enumerate(self.tuple_elements):
                body = e.to_string(include_metadata)
                parts.append(f"/*index={i}*/{body}" if i and i % 5 == 0 else body)
            return "{" + ", ".join(parts) + "}"
        if self.kind == "named":
            return self.raw
        return "{" + self._body(include_metadata) + "}"

    def _body(self, include_metadata: bool) -> str:
        k = self.kind
        if k == "tiled":
            dims = ",".join(map(str, self._ta.shape))
            if self._iota is not None:
                reshape, perm = self._iota
                s = f"devices=[{dims}]<=[{','.join(map(str, reshape))}]"
                if len(reshape) > 1:
                    s += f"T({','.join(map(str, perm))})"
            else:
                s = f"devices=[{dims}]{','.join(map(str, self._ta.ravel().tolist()))}"
            if self.last_tile_dim_replicate:
                s += " last_tile_dim_replicate"
            if self.subgroup_types:
                s += " last_tile_dims={" + ", ".join(self.subgroup_types) + "}"
        elif k == "maximal":
            s = f"maximal device={self.maximal_device}"
        else:
            s = k
        if self.shard_as is not None:
            s += f" shard_as {self.shard_as}"
        if self.shard_like is not None:
            s += f" shard_like {self.shard_like}"
        if include_metadata and self.metadata is not None:
            s += f" metadata={self.metadata}"
        return s

    def __str__(self) -> str:
        return self.to_string()

    def __repr__(self) -> str:
        return f"HloSharding({self.to_string(include_metadata=False)!r})"


_NOT_TILED = np.zeros((1,), dtype=np.int64)
_NOT_TILED.flags.writeable = False


def _named_key(raw: str) -> str:
    """Equality key of a named sharding: its raw text without whitespace."""
    return re.sub(r"\s+", "", raw)


# --------------------------------------------------------------------------------------------------
# the scanner
# --------------------------------------------------------------------------------------------------

_WS = re.compile(r"(?:\s+|/\*.*?\*/)*", re.S)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INT = re.compile(r"-?[0-9]+")
_INT_LIST = re.compile(r"\s*-?[0-9]+(?:\s*,\s*-?[0-9]+)*\s*")


class _Scanner:
    """Hand-written scanner for the small sharding grammar (hlo_syntax.md 6.1)."""

    __slots__ = ("text", "pos")

    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    def error(self, message: str, pos: int | None = None) -> HloSyntaxError:
        p = self.pos if pos is None else pos
        return HloSyntaxError(message, line=1, column=p + 1, source_line=self.text)

    def ws(self) -> None:
        self.pos = _WS.match(self.text, self.pos).end()

    def peek(self) -> str:
        self.ws()
        return self.text[self.pos:self.pos + 1]

    def expect(self, ch: str, what: str | None = None) -> None:
        self.ws()
        if not self.text.startswith(ch, self.pos):
            found = self.text[self.pos:self.pos + 12] or "end of text"
            raise self.error(f"expected {what or repr(ch)} in sharding, found {found!r}")
        self.pos += len(ch)

    def word(self) -> str | None:
        self.ws()
        m = _WORD.match(self.text, self.pos)
        if not m:
            return None
        self.pos = m.end()
        return m.group()

    def int(self, what: str) -> int:
        self.ws()
        m = _INT.match(self.text, self.pos)
        if not m:
            found = self.text[self.pos:self.pos + 12] or "end of text"
            raise self.error(f"expected {what} (an integer) in sharding, found {found!r}")
        self.pos = m.end()
        return int(m.group())

    def int_list(self, open_: str, close: str, what: str) -> list[int]:
        self.expect(open_, f"'{open_}' starting {what}")
        m = _INT_LIST.match(self.text, self.pos)
        if not m:
            raise self.error(f"expected a comma-separated list of integers for {what}")
        self.pos = m.end()
        self.expect(close, f"'{close}' closing {what}")
        return [int(x) for x in m.group().split(",")]

    def balanced(self) -> str:
        """Raw text of a ``{...}`` block starting at pos (braces balanced, strings skipped)."""
        self.ws()
        start = self.pos
        text = self.text
        if not text.startswith("{", start):
            raise self.error("expected '{' starting the metadata block")
        try:
            end = brace_block_end(text, start)
        except ValueError as exc:
            what = "unterminated string in sharding metadata" if "string" in str(exc) else "unbalanced '{' in sharding"
            raise self.error(what, start) from None
        self.pos = end
        return text[start:end]


def _parse_single(sc: _Scanner) -> HloSharding:
    """``{ part* }`` -> one non-tuple sharding."""
    open_pos = sc.pos
    sc.expect("{")
    first = sc.pos
    w = sc.word()
    if w in ("mesh", "maximal_mesh"):
        sc.pos = open_pos
        return HloSharding.named(sc.balanced())
    sc.pos = first
    kind = None
    kind_pos = 0
    device = None
    dims = None
    devices = None
    iota = None
    ltdr = False
    types: tuple[str, ...] = ()
    shard_as = shard_like = None
    metadata = None
    while True:
        c = sc.peek()
        if c == "}":
            sc.pos += 1
            break
        if not c:
            raise sc.error("expected '}' closing the sharding")
        wpos = sc.pos
        w = sc.word()
        if w is None:
            raise sc.error(f"unexpected {sc.text[sc.pos:sc.pos + 12]!r} in sharding")
        if w in _SIMPLE_KINDS or w == "maximal":
            if kind is not None:
                raise sc.error(f"conflicting sharding kinds {kind!r} and {w!r}", wpos)
            kind, kind_pos = w, wpos
        elif w == "device":
            sc.expect("=")
            device = sc.int("device id")
        elif w == "devices":
            if dims is not None:
                raise sc.error("'devices=' given twice", wpos)
            sc.expect("=")
            dims_pos = sc.pos
            dims = sc.int_list("[", "]", "the tile assignment dims")
            if any(d <= 0 for d in dims):
                raise sc.error("tile assignment dims must be positive", dims_pos)
            sc.ws()
            if sc.text.startswith("<=", sc.pos):
                sc.pos += 2
                rpos = sc.pos
                reshape = sc.int_list("[", "]", "the iota reshape dims")
                if any(d <= 0 for d in reshape):
                    raise sc.error("iota reshape dims must be positive", rpos)
                sc.ws()
                perm = None
                tpos = sc.pos
                if sc.text.startswith("T", sc.pos):
                    sc.pos += 1
                    perm = sc.int_list("(", ")", "the iota transpose permutation")
                if perm is None:
                    if len(reshape) > 1:
                        raise sc.error("iota tile assignment with more than one reshape dim needs a "
                                       "transpose T(...)", tpos)
                    perm = [0]
                else:
                    if len(reshape) == 1:
                        raise sc.error("iota tile assignment with one reshape dim takes no T(...)", tpos)
                    if len(perm) != len(reshape):
                        raise sc.error(f"iota transpose T({','.join(map(str, perm))}) has {len(perm)} "
                                       f"entries but there are {len(reshape)} reshape dims", tpos)
                    if sorted(perm) != list(range(len(reshape))):
                        raise sc.error(f"iota transpose T({','.join(map(str, perm))}) is not a "
                                       f"permutation of 0..{len(reshape) - 1}", tpos)
                if math.prod(reshape) != math.prod(dims):
                    raise sc.error(f"iota product {math.prod(reshape)} (<=[{','.join(map(str, reshape))}]) "
                                   f"differs from the tile product {math.prod(dims)} "
                                   f"([{','.join(map(str, dims))}])", rpos)
                if math.prod(reshape) > MAX_DEVICES:
                    raise sc.error(f"too many devices: tile assignment names {math.prod(reshape)} devices "
                                   f"(at most {MAX_DEVICES:,} are supported)", rpos)
                iota = (reshape, perm)
            else:
                lpos = sc.pos
                m = _INT_LIST.match(sc.text, sc.pos)
                if not m:
                    raise sc.error("expected an explicit device list or '<=[...]' after the tile "
                                   "assignment dims")
                sc.pos = m.end()
                devices = [int(x) for x in m.group().split(",")]
                if len(devices) != math.prod(dims):
                    raise sc.error(f"tile assignment [{','.join(map(str, dims))}] needs "
                                   f"{math.prod(dims)} devices but {len(devices)} are listed", lpos)
                if len(devices) <= 1:
                    raise sc.error("non-maximal shardings must have more than one device assigned", lpos)
        elif w == "last_tile_dim_replicate":
            ltdr = True
        elif w == "last_tile_dims":
            sc.expect("=")
            sc.expect("{")
            tl = []
            while True:
                sc.ws()
                tp = sc.pos
                t = sc.word()
                if t not in _TYPE_ORDER:
                    raise sc.error(f"unknown subgroup type {t!r} in last_tile_dims (expected "
                                   f"{', '.join(SUBGROUP_TYPES)})", tp)
                tl.append(t)
                c = sc.peek()
                if c == ",":
                    sc.pos += 1
                    continue
                sc.expect("}", "',' or '}' in last_tile_dims")
                break
            types = tuple(tl)
        elif w in ("shard_as", "shard_like"):
            gid = sc.int(f"the {w} group id")
            if w == "shard_as":
                shard_as = gid
            else:
                shard_like = gid
            if shard_as is not None and shard_like is not None:
                raise sc.error("a sharding cannot be both shard_as and shard_like", wpos)
        elif w == "metadata":
            if metadata is not None:
                raise sc.error("'metadata=' given twice", wpos)
            sc.expect("=")
            metadata = sc.balanced()
        else:
            raise sc.error(f"unknown sharding attribute {w!r}", wpos)
    extra = dict(metadata=metadata, shard_as=shard_as, shard_like=shard_like)
    tiled = dims is not None
    if kind in _SIMPLE_KINDS:
        if tiled or device is not None or ltdr or types:
            raise sc.error(f"a {kind} sharding takes no devices", kind_pos)
        return HloSharding(kind, **extra)
    if kind == "maximal":
        if device is None:
            raise sc.error("a maximal sharding needs 'device=N'", kind_pos)
        if tiled or ltdr or types:
            raise sc.error("a maximal sharding takes no tile assignment", kind_pos)
        return HloSharding("maximal", maximal_device=device, **extra)
    if device is not None:
        raise sc.error("'device=' is only valid with 'maximal'", open_pos)
    if not tiled:
        raise sc.error("a tiled sharding needs 'devices=[...]'", open_pos)
    if ltdr and types:
        raise sc.error("last_tile_dim_replicate and last_tile_dims cannot both be given", open_pos)
    if len(types) > len(dims):
        raise sc.error(f"last_tile_dims names {len(types)} subgroups but the tile assignment has "
                       f"{len(dims)} dims", open_pos)
    if iota is not None:
        reshape, perm = iota
        ta = _iota_array(reshape, perm).reshape(dims)
        form = _canonical_iota(reshape, perm)
    else:
        ta = np.array(devices, dtype=np.int64).reshape(dims)
        form = None
    return HloSharding._make_tiled(ta, form, ltdr, types, metadata, shard_as, shard_like, detect_iota=False)


# one metadata block: {...} with strings, or {{...}, {...}} (two levels of braces)
_META_BLOCK = r'\{(?:[^{}"]++|"(?:[^"\\]++|\\.)*+"|\{(?:[^{}"]++|"(?:[^"\\]++|\\.)*+")*+\})*+\}'
_META_RE = re.compile(r"\s*metadata=(" + _META_BLOCK + ")")
_SINGLE_START = re.compile(r"\s*\{\s*(?![{}\s]|mesh\b|maximal_mesh\b)")


@functools.lru_cache(maxsize=65536)
def _parse_cached(text: str) -> HloSharding:
    if not isinstance(text, str):
        raise TypeError("HloSharding.parse expects a str")
    # Fast path: metadata makes nearly every sharding text of a module distinct, so parse the text
    # without it through a second cache and attach the raw metadata (single shardings only).
    if "metadata=" in text and _SINGLE_START.match(text):
        m = _META_RE.search(text)
        if m is not None and text.find("metadata=", m.end()) < 0:
            try:
                core = _parse_core(text[:m.start()] + text[m.end():])
            except HloSyntaxError:
                core = None  # report the error with the right column below
            if core is not None and core.kind != "tuple" and core.metadata is None:
                return core.with_metadata(m.group(1))
    return _parse_full(text)


@functools.lru_cache(maxsize=16384)
def _parse_core(text: str) -> HloSharding:
    return _parse_full(text)


def _parse_full(text: str) -> HloSharding:
    sc = _Scanner(text)
    sc.ws()
    start = sc.pos
    if not text.startswith("{", start):
        raise sc.error("expected '{' starting a sharding")
    sc.pos = start + 1
    c = sc.peek()
    if c in ("{", "}"):
        elems = []
        if c == "}":
            sc.pos += 1
        else:
            while True:
                elems.append(_parse_single(sc))
                c = sc.peek()
                if c == ",":
                    sc.pos += 1
                    continue
                sc.expect("}", "',' or '}' in the tuple sharding")
                break
        result = HloSharding("tuple", tuple_elements=tuple(elems))
    else:
        sc.pos = start
        result = _parse_single(sc)
    sc.ws()
    if sc.pos != len(text):
        raise sc.error(f"unexpected text after the sharding: {text[sc.pos:sc.pos + 12]!r}")
    return result


def parse_sharding(text: str) -> HloSharding:
    """Module-level alias of :meth:`HloSharding.parse`."""
    return _parse_cached(text)
