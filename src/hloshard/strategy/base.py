"""Strategy data model and the shared machinery every op handler uses.

Vocabulary (Alpa / XLA auto-sharding, see ``shared/reference/xla_autosharding.md`` §2):

* A **spec** is how one array is laid out on the :class:`~hloshard.mesh.DeviceMesh`: a tuple with one
  entry per tensor dimension, each entry the tuple of mesh axes that dimension is split over
  (major -> minor).  Mesh axes used by no dimension are replicated (partial replication,
  ``last_tile_dim_replicate``).  ``((), ())`` is the replicated spec of a rank-2 array.  A spec may
  also be a raw :class:`~hloshard.hlo.sharding.HloSharding` when a user sharding is not a mesh
  layout (maximal, manual, an unusual device order): such specs are costed through the planner.
* A **Strategy** is one candidate for an instruction: its output spec (a tuple of specs, one per leaf,
  for a multi-output node), the spec it requires of every operand (``None``: no requirement, no edge),
  its compute cost, its communication cost (e.g. the all-reduce of a dot with a split contracting dim)
  and its memory per device in bytes.  All costs are in the mesh's cost units (alpha-beta model of
  :mod:`hloshard.cost.collectives`; ``beta`` is cost per byte).
* A **StrategyGroup** is the set of strategies of one cost-graph node.  A group may *follow* an
  operand (elementwise ops, transpose, reduce ...): then its strategy ``p`` is derived from the
  operand node's strategy ``p`` and the cost graph forbids every other pairing (XLA's "following",
  which keeps the model small).  A :class:`TupleGroup` has no node of its own: each leaf is either
  a child group or an alias (:class:`LeafRef`) of another instruction's leaf (tuple,
  get-tuple-element, while-body parameters ...).

Compute cost model (our own, documented; XLA's open-source pass has none, only penalties):
``COMPUTE_COST_PER_FLOP`` cost units per floating-point operation per device, i.e. a device does
``1 / COMPUTE_COST_PER_FLOP`` flops in the time a mesh axis with ``beta = 1`` moves one byte.  It
makes replicated (recomputed) work cost what it costs instead of XLA's flat ``replicated_penalty``.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Iterable, Sequence

from ..cost.roofline import hbm_terms, hbm_total, kernel_reads
from ..cost.tpu_layout import padded_bytes
from ..cost.tpu_fusion import CPU_FUSION, partition_slice_bytes, reduced_epilogue_bytes, windowed_einsum_bytes, windowed_reread_operand
from ..hlo.shape import element_byte_size
from ..hlo.sharding import HloSharding

#: cost units per flop per device (see module docstring)
COMPUTE_COST_PER_FLOP = 1.0 / 512.0

#: a forbidden choice (mirrors hloshard.costgraph.INFINITY, kept as float here)
INF = float("inf")

#: at most this many axis-to-dim assignments are enumerated per array shape ((d + 1) ** n for d candidate
#: dims and n non-trivial mesh axes: :meth:`MeshInfo._layouts`).  A bound on untrusted input, not a
#: tuning constant: a rank-12 array on a 6-axis mesh would otherwise enumerate 13 ** 6 = 4.8 M
#: assignments and build edge matrices of millions of entries for a 4-instruction module; every array
#: of rank <= 6 on a mesh of <= 3 non-trivial axes, or of rank <= 4 on 5 axes, is enumerated in full
#: (7 ** 3 = 343, 6 ** 4 = 1,296, 5 ** 5 = 3,125 <= 4,096).
LAYOUT_ASSIGNMENT_LIMIT = 4096

Spec = tuple  # tuple[tuple[int, ...], ...]  or an HloSharding for non-mesh layouts


@dataclass(eq=False)
class Strategy:
    """One sharding candidate of a node.

    ``out``: Spec (array node) or tuple of Specs (multi-output node, one per leaf).
    ``inputs``: per operand of the group (``StrategyGroup.operands``) the required Spec, a tuple of
    Specs/None (one per leaf) for a tuple-shaped operand, or None (no requirement).
    ``compute`` / ``comm``: cost units, already for one execution (loop scaling happens in the graph).
    ``memory``: bytes per device of the node's output under ``out``.
    ``collectives``: the collectives behind ``comm``, one
    :class:`hloshard.cost.collectives.PredictedCollective` each (what XLA's partitioner is expected to
    insert for this instruction, resharding of operands excluded: that is on the edges).
    ``flops``: floating-point operations per device of one execution when ``compute`` is a roofline
    price (:func:`price_roofline`, with ``--device``); None when ``compute`` is ``flops *
    COMPUTE_COST_PER_FLOP`` (then :meth:`flop_count` derives them).
    """

    name: str
    out: object
    inputs: tuple
    compute: float = 0.0
    comm: float = 0.0
    memory: int = 0
    collectives: tuple = ()
    flops: float | None = None

    def flop_count(self) -> float:
        """Flops per device of one execution (``flops``, else ``compute / COMPUTE_COST_PER_FLOP``)."""
        return self.compute / COMPUTE_COST_PER_FLOP if self.flops is None else self.flops


@dataclass(eq=False)
class StrategyGroup:
    """The strategies of one cost-graph node (one instruction, or one leaf of a while loop).

    ``follow``: (instruction, leaf) whose node this group follows, or None; when set, strategy ``p``
    pairs only with the followee node's strategy ``p`` (``len(strategies)`` equals the followee's).
    ``operands``: instructions the ``Strategy.inputs`` refer to (default ``instr.operands``).
    ``operand_weights``: multiplier of each operand edge (loop back-edges carry the trip count).
    ``multi``: strategies' ``out`` is a tuple of per-leaf specs.
    """

    instr: object
    strategies: list
    follow: tuple | None = None
    operands: list | None = None
    operand_weights: list | None = None
    multi: bool = False
    leaf_shapes: tuple = ()
    node: int = -1
    fixed: bool = False
    seq: int = -1

    def ops(self) -> list:
        return list(self.instr.operands) if self.operands is None else self.operands


@dataclass(frozen=True, eq=False)
class LeafRef:
    """Leaf ``leaf`` (flat index) of instruction ``instr``: an alias, no node of its own."""

    instr: object
    leaf: int


@dataclass(eq=False)
class TupleGroup:
    """A tuple-shaped instruction whose leaves are child groups or aliases (``LeafRef``)."""

    instr: object
    children: list = field(default_factory=list)


class TokenLeaf:
    """A token (or empty) leaf: always replicated, never a node, no memory."""


TOKEN = TokenLeaf()


# ---------------------------------------------------------------------------------------------
# small helpers
# ---------------------------------------------------------------------------------------------

_INT_RE = re.compile(r"-?\d+")


def int_list(value) -> list[int] | None:
    """Attribute value (typed list, or raw text such as ``'{0,1}'``) -> list of ints, None when absent."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        out = []
        for v in value:
            if isinstance(v, (list, tuple)):
                out.extend(int(x) for x in v)
            else:
                out.append(int(v))
        return out
    if isinstance(value, int):
        return [value]
    return [int(x) for x in _INT_RE.findall(str(value))]


def attr_ints(instr, key: str) -> list[int]:
    """``instr.attrs[key]`` as a list of ints ([] when absent)."""
    v = instr.attrs.get(key) if hasattr(instr, "attrs") else None
    return int_list(v) or []


def replicated_spec(rank: int) -> Spec:
    return ((),) * rank


def is_mesh_spec(spec) -> bool:
    """True for an axis-tuple spec, False for a raw HloSharding (or None)."""
    return type(spec) is tuple


def spec_axes(spec: Spec) -> set:
    return {a for d in spec for a in d}


@lru_cache(maxsize=65536)
def _spec_name(spec) -> str:
    parts = [f"S{d}@{''.join(str(a) for a in ax)}" for d, ax in enumerate(spec) if ax]
    return ",".join(parts) if parts else "R"


def spec_name(spec) -> str:
    """Short human name: 'S0:1,S1:0' style (``R`` when replicated)."""
    if not is_mesh_spec(spec):
        return str(spec)
    return _spec_name(spec)


def leaf_shapes(shape) -> list:
    """Flat list of leaf shapes of ``shape`` (tokens included, in pre-order)."""
    if shape.is_tuple:
        out = []
        for s in shape.tuple_shapes:
            out.extend(leaf_shapes(s))
        return out
    return [shape]


def leaf_range(shape, index: int) -> range:
    """Flat leaf indices of tuple element ``index`` of ``shape``."""
    start = 0
    for i, s in enumerate(shape.tuple_shapes):
        n = len(leaf_shapes(s))
        if i == index:
            return range(start, start + n)
        start += n
    raise IndexError(index)


_NON_ARRAY = frozenset(("tuple", "token", "opaque"))


def is_array(shape) -> bool:
    """An array shape (not a tuple, token or opaque)."""
    return shape.element_type not in _NON_ARRAY


def element_bytes(shape) -> float:
    return element_byte_size(shape.element_type)


# ---------------------------------------------------------------------------------------------
# mesh helpers (pure functions of the mesh shape; cached)
# ---------------------------------------------------------------------------------------------


class MeshInfo:
    """Cached facts about a DeviceMesh used by every handler."""

    def __init__(self, mesh):
        self.mesh = mesh
        self.shape = tuple(int(n) for n in mesh.shape)
        self.axes = tuple(a for a, n in enumerate(self.shape) if n > 1)
        self.num_devices = int(math.prod(self.shape))
        #: uneven-split policy (see :meth:`uneven_ok`), from the mesh (``DeviceMesh.with_policy``)
        self.max_padding = float(getattr(mesh, "max_padding", 0.5))
        self.memory_budget = getattr(mesh, "memory_budget", None)
        #: a device's roofline in cost units (:class:`hloshard.cost.roofline.RooflinePrices`) when the
        #: mesh was priced by ``--device``, else None (compute = flops only, :func:`price_roofline`)
        self.roofline_prices = getattr(mesh, "roofline_prices", None)
        self._enum_cache: dict = {}
        self._fits_cache: dict = {}
        self._even_best: dict = {}
        self._sharding_cache: dict = {}
        self._bytes_cache: dict = {}
        self._vol_cache: dict = {}
        #: per-mesh memo tables of handlers (e.g. dot strategies per shapes/roles)
        self.memo: dict = {}
        #: both orders of a dim's two axes are enumerated (:meth:`_layouts`): on meshes of at most two
        #: non-trivial axes, unless the builder asks for mesh order only (the coarse space of
        #: :mod:`hloshard.autoshard.coarse`, which must embed into a finer mesh's space)
        self.any_order = len(self.axes) <= 2
        #: per mesh axis the user's axis it is part of (:attr:`hloshard.mesh.DeviceMesh.sub_axes`):
        #: on a refined mesh whose user mesh has at most two non-trivial axes (2x4 refined to 2x2x2),
        #: a dim's axes are also enumerated with the two users' axes swapped, each one's sub-axes kept
        #: together in mesh order (:func:`_orders`): the layouts of the user's 2x4 mesh in both
        #: orders, i.e. every layout of the 1-D mesh refined at the same cuts (issue 26: the
        #: ``--mesh 8`` plan of decoder2 splits dims that way and was outside the 2x2x2 space)
        subs = getattr(mesh, "sub_axes", None) or ()
        owners = [subs[a].user_axis if a < len(subs) else a for a in range(len(self.shape))]
        self.user_of = tuple(owners)
        self.group_order = len(self.axes) > 2 and len({owners[a] for a in self.axes}) <= 2
        #: further groupings of the mesh axes (per axis a group id) whose two runs of a dim's axes are
        #: also enumerated swapped (:meth:`add_coarse_order`)
        self.extra_groups: list = []

    def add_coarse_order(self, cuts) -> None:
        """Also enumerate a dim's axes with the two runs of a coarser mesh's axes swapped: ``cuts`` are
        the strides at which that mesh (two non-trivial axes, e.g. the coarse mesh of
        :func:`hloshard.mesh.coarse_cuts`, the 1-D mesh of the same devices refined for the module)
        cuts the flat device order, each one a cut of this mesh too.  Every layout of the coarse mesh,
        in either order of its two axes, is then a layout of this one (the same tile assignment: a
        reversed coarse product is the fine product with the two runs of fine axes swapped), so a
        coarse plan embeds (issue 26: decoder2's ``--mesh 8`` plan splits dims as
        ``{devices=[1,8]<=[2,4]T(1,0)}``, outside a 2x2x2 mesh's mesh-order space).  Call before any
        enumeration (the caches are not cleared).  Does nothing for other than three cuts (two axes)
        or cuts that are not this mesh's."""
        c = sorted(int(x) for x in cuts)
        if len(c) != 3:
            return
        stride, strides = 1, [0] * len(self.shape)
        for a in reversed(range(len(self.shape))):
            strides[a] = stride
            stride *= self.shape[a]
        if not set(c) <= {strides[a] * self.shape[a] for a in range(len(self.shape))} | {1}:
            return
        groups = tuple(0 if strides[a] >= c[1] else 1 for a in range(len(self.shape)))
        if (len({groups[a] for a in self.axes}) == 2 and groups not in self.extra_groups
                and not (self.group_order and groups == self.user_of)):
            self.extra_groups.append(groups)

    def split(self, axes: Iterable[int]) -> int:
        n = 1
        for a in axes:
            n *= self.shape[a]
        return n

    def fits_evenly(self, dims: Sequence[int], spec: Spec) -> bool:
        """Every split dim is divisible by (and at least) its number of shards."""
        for d, ax in zip(dims, spec):
            if ax:
                n = self.split(ax)
                if d < n or d % n:
                    return False
        return True

    def fits(self, dims: Sequence[int], spec: Spec) -> bool:
        """``spec`` is a layout of ``dims`` the strategy space considers: every split even
        (:meth:`fits_evenly`), or uneven under the policy of :meth:`uneven_ok`. Cached."""
        key = (tuple(dims), spec)
        hit = self._fits_cache.get(key)
        if hit is None:
            hit = self.fits_evenly(dims, spec) or self.uneven_ok(dims, spec)
            if len(self._fits_cache) < 200000:
                self._fits_cache[key] = hit
        return hit

    def padding_ratio(self, dims: Sequence[int], spec: Spec) -> float:
        """Largest, over the split dims, padded size / size - 1 with XLA's ceil tiling (a dim of 24 over
        32 devices pads to 32: 1/3; 32 over 56: 56/32 - 1 = 0.75); ``inf`` for a split of a size-0 dim."""
        worst = 0.0
        for d, ax in zip(dims, spec):
            if ax:
                n = self.split(ax)
                if d <= 0:
                    return INF
                worst = max(worst, (-(-d // n) * n - d) / d)
        return worst

    def best_even_split(self, dims: Sequence[int]) -> int:
        """The most devices any even layout of ``dims`` splits it over (1 when none splits it)."""
        key = tuple(dims)
        hit = self._even_best.get(key)
        if hit is None:
            hit = max((self.split(spec_axes(s)) for s, even in self._layouts(key) if even), default=1)
            self._even_best[key] = hit
        return hit

    def uneven_ok(self, dims: Sequence[int], spec: Spec) -> bool:
        """An uneven split XLA's partitioner accepts (padded last shards, empty shards) that the
        strategy space considers: its padding ratio (:meth:`padding_ratio`) is at most
        ``max_padding`` (``--max-padding``, default 0.5), or a memory budget is set and it splits the
        tensor over more devices than any even layout can (no even split gets as small a tile).
        User shardings are always kept, whatever their padding (they are fixed specs, not enumerated).
        Compute and memory are priced on the padded tile (:meth:`tile_dims`, ceil tiling)."""
        ratio = self.padding_ratio(dims, spec)
        if ratio == INF:
            return False
        if ratio <= self.max_padding:
            return True
        return self.memory_budget is not None and self.split(spec_axes(spec)) > self.best_even_split(dims)

    def tile_dims(self, dims: Sequence[int], spec) -> tuple[int, ...]:
        if is_mesh_spec(spec):
            return tuple(-(-d // self.split(ax)) if ax else d for d, ax in zip(dims, spec))
        try:
            return tuple(spec.tile_shape(dims))
        except Exception:
            return tuple(dims)

    def bytes_per_device(self, shape, spec) -> int:
        """Bytes of the per-device tile of an array ``shape`` under ``spec`` (ceil tiling); cached."""
        if type(spec) is tuple:
            key = (shape.element_type, shape.dims, spec)
            hit = self._bytes_cache.get(key)
            if hit is None:
                hit = self._bytes_per_device(shape, spec)
                self._bytes_cache[key] = hit
            return hit
        return self._bytes_per_device(shape, spec)

    def tile_volume(self, dims, spec) -> int:
        """Elements of the per-device tile (ceil tiling); cached for axis specs."""
        key = (tuple(dims), spec)
        hit = self._vol_cache.get(key)
        if hit is None:
            hit = math.prod(self.tile_dims(dims, spec)) if dims else 1
            self._vol_cache[key] = hit
        return hit

    def _bytes_per_device(self, shape, spec) -> int:
        if not is_array(shape):
            return 0
        if not is_mesh_spec(spec) and getattr(spec, "is_manual", False):
            n = math.prod(shape.dims)
        else:
            n = math.prod(self.tile_dims(shape.dims, spec))
        return int(math.ceil(n * element_bytes(shape)))

    def _layouts(self, dims: tuple) -> list:
        """Every (spec, even) of ``dims``: each non-trivial mesh axis assigned to one tensor dim or to
        none, the axes of one dim in mesh order, and on meshes of at most two non-trivial axes also
        in the reverse order (:func:`_orders`; user shardings in other orders are kept as written)."""
        key = ("all", dims)
        hit = self._enum_cache.get(key)
        if hit is not None:
            return hit
        rank = len(dims)
        out = []
        seen = set()
        # bounded growth (issue 14): both orders of a product of two axes on meshes of at most two
        # non-trivial axes (+2..17% strategies on the samples and MaxText at 2x4); on 3+ axis meshes the
        # reversed products would add ~45% (MaxText at 2x2x2) and only mesh order is enumerated
        any_order = self.any_order
        for assign in itertools.product([None] + layout_dims(dims, len(self.axes)), repeat=len(self.axes)):
            per = [[] for _ in range(rank)]
            for ax, d in zip(self.axes, assign):
                if d is not None:
                    per[d].append(ax)
            groups = ([self.user_of] if self.group_order else []) + self.extra_groups
            for orders in itertools.product(*(_orders(p, any_order, groups) for p in per)):
                spec = tuple(tuple(o) for o in orders)
                if spec in seen:
                    continue
                seen.add(spec)
                if any(ax and d <= 0 for d, ax in zip(dims, spec)):
                    continue
                out.append((spec, self.fits_evenly(dims, spec)))
        self._enum_cache[key] = out
        return out

    def enumerate(self, dims: Sequence[int]) -> list[Spec]:
        """All mesh layouts of an array with ``dims``: every assignment of each non-trivial mesh axis
        to one tensor dim or to none, the axes of a dim in mesh order and, on meshes of at most two
        non-trivial axes, reversed (:func:`_orders`).  This covers replicated, 1-D
        splits with partial replication, N-D splits (several dims of one tensor over different axes)
        and products of axes (several axes on one dim, major -> minor).  Layouts where
        each split dim is divisible by its shard count are produced, plus the uneven ones
        :meth:`uneven_ok` admits.  Order: even before uneven, most devices used first, then
        lexicographic (deterministic)."""
        key = tuple(dims)
        hit = self._enum_cache.get(key)
        if hit is not None:
            return hit
        specs = [(not even, s) for s, even in self._layouts(key) if even or self.uneven_ok(key, s)]
        specs = [s for _, s in sorted(specs, key=lambda t: (t[0], -self.split(spec_axes(t[1])), t[1]))]
        self._enum_cache[key] = specs
        return specs

    def padded_work(self, total: float, splits) -> float:
        """Per-device share of ``total`` work over an iteration space split per dim: ``splits`` is
        (size, axes) per iteration dim. Even splits: ``total / devices``; uneven ones are priced on the
        padded tile, ``total * prod(ceil(size / n) / size)`` (XLA pads the last shards and computes them
        whole)."""
        pairs = [(int(s), self.split(ax)) for s, ax in splits if ax]
        if all(s % n == 0 for s, n in pairs):
            return total / math.prod(n for _, n in pairs) if pairs else total
        out = float(total)
        for s, n in pairs:
            if s > 0:
                out *= -(-s // n) / s
        return out

    def to_sharding(self, spec, rank: int | None = None):
        """Spec -> HloSharding (mesh.axes_to_sharding, cached); raw HloShardings pass through."""
        if not is_mesh_spec(spec):
            return spec
        hit = self._sharding_cache.get(spec)
        if hit is None:
            if not spec_axes(spec):
                hit = HloSharding.replicated()
            else:
                hit = self.mesh.axes_to_sharding(spec)
            self._sharding_cache[spec] = hit
        return hit

    def from_sharding(self, sharding, rank: int):
        """HloSharding -> Spec.  Mesh-expressible shardings become axis tuples; anything else is
        returned as the HloSharding itself (raw spec).  Raises nothing."""
        if sharding is None:
            return None
        if sharding.is_replicated:
            return replicated_spec(rank)
        if sharding.is_manual or sharding.is_maximal or sharding.is_tuple or sharding.is_unknown:
            return sharding
        try:
            dim_axes = self.mesh.sharding_to_axes(sharding, rank)
        except Exception:
            return sharding
        dims = _dimaxes_dims(dim_axes)
        if dims is None or len(dims) != rank:
            return sharding
        spec = tuple(tuple(int(a) for a in ax) for ax in dims)
        # drop size-1 axes for a canonical form
        spec = tuple(tuple(a for a in ax if self.shape[a] > 1) for ax in spec)
        return spec


def layout_dims(dims: Sequence[int], n_axes: int) -> list[int]:
    """The dims of an array with ``dims`` that mesh axes are assigned to in :meth:`MeshInfo._layouts`:
    all of them, unless ``(rank + 1) ** n_axes`` exceeds :data:`LAYOUT_ASSIGNMENT_LIMIT`; then the
    largest dims (ties: the earlier dim), as many as the limit allows (at least one), in dim order --
    the dims whose split changes bytes most.  A dim of size 1 is never a candidate."""
    order = [d for d in range(len(dims)) if dims[d] > 1]
    if n_axes <= 0 or (len(dims) + 1) ** n_axes <= LAYOUT_ASSIGNMENT_LIMIT:
        return list(range(len(dims)))
    keep = 1
    while keep < len(order) and (keep + 2) ** n_axes <= LAYOUT_ASSIGNMENT_LIMIT:
        keep += 1
    return sorted(sorted(order, key=lambda d: (-dims[d], d))[:keep])


def _orders(axes: list, any_order: bool, groupings=()) -> list:
    """The orders a dim's axes are tried in: both orders of two axes when ``any_order``; for each of
    ``groupings`` (per mesh axis a group: its user axis, or its axis of a coarser mesh) whose groups
    split the dim's axes into two runs, also the order with the two runs swapped; else (and for three
    or more axes) mesh order only.  Mesh order first, no order twice."""
    if any_order and len(axes) == 2:
        return [tuple(axes), tuple(reversed(axes))]
    out = [tuple(axes)]
    for groups in groupings:
        if len(axes) < 2:
            break
        first = [a for a in axes if groups[a] == groups[axes[0]]]
        rest = [a for a in axes if groups[a] != groups[axes[0]]]
        if rest and len({groups[a] for a in rest}) == 1 and tuple(rest + first) not in out:
            out.append(tuple(rest + first))
    return out


def _dimaxes_dims(dim_axes):
    """Per-dim axes of a ``mesh.DimAxes`` (a tuple of tuples)."""
    try:
        return tuple(tuple(int(a) for a in x) for x in dim_axes)
    except TypeError:
        return None


# ---------------------------------------------------------------------------------------------
# spec transforms shared by several handlers
# ---------------------------------------------------------------------------------------------


def drop_dims(spec: Spec, dims: Iterable[int]) -> Spec:
    """Remove tensor dims (e.g. reduced dims) from a spec."""
    s = set(dims)
    return tuple(ax for d, ax in enumerate(spec) if d not in s)


def unshard_dims(spec: Spec, dims: Iterable[int]) -> Spec:
    """The same spec with ``dims`` replicated."""
    s = set(dims)
    return tuple(() if d in s else ax for d, ax in enumerate(spec))


def permute(spec: Spec, perm: Sequence[int]) -> Spec:
    """Output spec of a transpose: output dim i is operand dim perm[i]."""
    return tuple(spec[p] for p in perm)


def inverse_permute(spec: Spec, perm: Sequence[int]) -> Spec:
    out = [()] * len(perm)
    for i, p in enumerate(perm):
        out[p] = spec[i]
    return tuple(out)


def compute_cost(flops: float) -> float:
    return flops * COMPUTE_COST_PER_FLOP


def elementwise_strategy(name, out_spec, inputs, shape, minfo: MeshInfo, flops_per_element: float = 1.0) -> Strategy:
    """A strategy whose compute is ``flops_per_element`` per output element on the device."""
    mem = minfo.bytes_per_device(shape, out_spec)
    if is_array(shape):
        elems = minfo.tile_volume(shape.dims, out_spec) if type(out_spec) is tuple else \
            math.prod(minfo.tile_dims(shape.dims, out_spec))
    else:
        elems = 0
    return Strategy(name, out_spec, tuple(inputs), compute=compute_cost(elems * flops_per_element), memory=mem)


# ---------------------------------------------------------------------------------------------
# the roofline in the objective (--device)
# ---------------------------------------------------------------------------------------------


def _leaf_bytes(minfo: MeshInfo, shape, spec, tiled: bool = False) -> float:
    """Bytes per device of ``shape`` under ``spec`` (a Spec or HloSharding; for a tuple shape a tuple
    of them, one per leaf); the whole size where ``spec`` is None or does not fit the shape.

    ``tiled`` (a fusion rule with :attr:`hloshard.cost.tpu_fusion.FusionRule.tiled_layout`, ``--device
    tpu-*``): a split saves no more than its share of the padded buffer, ``max(tile bytes, whole bytes x
    padded(tile) / padded(whole))`` (:func:`hloshard.cost.tpu_layout.padded_bytes`: the TPU compiler's
    (8, 128) tiles): splitting an f32 ``[8,32,128]`` 2 x 4 ways on its first and last dims leaves
    ``[4,32,32]`` tiles that the TPU still lays out at 128 lanes (libtpu 0.0.42.1, ``v5e:2x4``,
    ``moe_layer``'s solved plan: its output ``f32[4,32,32]{2,1,0:T(8,128)}``, the same 64 KiB as GSPMD's
    ``f32[4,32,128]``), so such a split saves half, not seven eighths.  An unsplit buffer keeps its
    elements' bytes (round 13: pricing the padding itself in the objective led the convolution sample to
    a batch split the TPU re-lays out, BENCHMARKS.md), so only the saving of a split is bounded."""
    if shape.is_tuple:
        leaves = leaf_shapes(shape)
        specs = spec if isinstance(spec, tuple) and len(spec) == len(leaves) else (None,) * len(leaves)
        return float(sum(_leaf_bytes(minfo, s, p, tiled) for s, p in zip(leaves, specs)))
    if not is_array(shape):
        return 0.0
    if spec is None or (is_mesh_spec(spec) and len(spec) != len(shape.dims)):
        return float(math.ceil(math.prod(shape.dims) * element_bytes(shape)))
    mine = float(minfo.bytes_per_device(shape, spec))
    if not tiled:
        return mine
    whole_padded = padded_bytes(shape.element_type, shape.dims)
    if not whole_padded:
        return mine
    whole = math.ceil(math.prod(shape.dims) * element_bytes(shape))
    tile = padded_bytes(shape.element_type, minfo.tile_dims(shape.dims, spec))
    return max(mine, whole * tile / whole_padded)


def strategy_hbm_bytes(instr, st: Strategy, operands: Sequence, minfo: MeshInfo, origin: dict,
                       fusion=None, terms: tuple | None = None) -> float:
    """HBM bytes one device moves for one execution of ``instr`` under strategy ``st``: the roofline's
    rule (:func:`hloshard.cost.roofline.hbm_bytes`: the memory model's fusion rule, 0 when XLA fuses
    ``instr`` into its consumers) with the sizes this strategy implies: its result at ``st.out``, an
    operand it reads directly at the spec ``st.inputs`` requires of it, and a buffer it reads through a
    fused producer (an operand's operand, ...) at that buffer's whole size times the share of the
    direct operand it is reached through (``origin``: id(buffer) -> operand index, from
    :func:`hloshard.cost.roofline.kernel_reads`); where the strategy sets no requirement, at the share
    of the result it computes.  ``operands``: the group's operands (``StrategyGroup.ops()``);
    ``fusion``: the device's fusion rule (:attr:`hloshard.cost.roofline.RooflinePrices.fusion`; None:
    the CPU backend's); under the TPU's rule a dot strategy that scatters its partial sums also pays
    the windowed einsum's extra reads (:func:`windowed_dot_bytes`), and one that all-reduces them its
    epilogue's own kernel (:func:`split_epilogue_bytes`).  ``terms``: ``instr``'s
    :func:`hloshard.cost.roofline.hbm_terms` under ``fusion`` when the caller has them (None: computed
    here)."""
    direct = {id(o): k for k, o in enumerate(operands)}
    out = st.out
    # a convolution's buffers keep their elements' bytes: the TPU's convolution emitters lay them out their
    # own way (the batch among the tiled dims), which the (8, 128) share does not describe (conv_layer on
    # v5e:2x4: under the share the solver split the batch to 2 rows per device, and the TPU compiler padded,
    # copied and re-laid it out, 43.75 us against 23.75 us for the plan priced by elements; round 13 the same)
    tiled = fusion is not None and fusion.tiled_layout and instr.opcode != "convolution"

    def spec_of(k):
        return st.inputs[k] if k is not None and k < len(st.inputs) else None

    def size_of(x) -> float:
        if x is instr:
            return _leaf_bytes(minfo, x.shape, out, tiled)
        k = direct.get(id(x))
        if spec_of(k) is not None:
            return _leaf_bytes(minfo, x.shape, spec_of(k), tiled)
        k = origin.get(id(x), k)
        whole = _leaf_bytes(minfo, x.shape, None, tiled)
        spec = spec_of(k)
        if spec is None:
            mine, total = _leaf_bytes(minfo, instr.shape, out, tiled), _leaf_bytes(minfo, instr.shape, None, tiled)
        else:
            o = operands[k]
            mine, total = _leaf_bytes(minfo, o.shape, spec, tiled), _leaf_bytes(minfo, o.shape, None, tiled)
        return whole * (mine / total if total else 1.0)

    rule = CPU_FUSION if fusion is None else fusion
    if terms is None:
        terms = hbm_terms(instr, rule)
    total = hbm_total(instr, terms, size_of) if fusion is None else \
        hbm_total(instr, terms, size_of, fusion, lambda x: minfo.tile_dims(x.shape.dims, out) if x is instr and is_array(x.shape) else None)
    return total + windowed_dot_bytes(instr, st, operands, minfo, fusion) + split_epilogue_bytes(instr, st, minfo, fusion)


def split_epilogue_bytes(instr, st: Strategy, minfo: MeshInfo, fusion=None, result_bytes: float | None = None) -> float:
    """HBM bytes the dot / convolution ``instr`` moves under ``st`` beyond its output-fused kernel when
    ``st`` all-reduces its partial sums (an all-reduce over mesh axes among ``st.collectives``): its
    epilogue then runs as a kernel of its own after the all-reduce
    (:func:`hloshard.cost.tpu_fusion.reduced_epilogue_bytes`, 2 x the result per device); 0 for any
    other strategy or a ``fusion`` rule without it (None: the CPU's).  ``result_bytes``: the result's
    bytes per device as the caller sizes it (None: its elements at ``st.out``)."""
    if fusion is None or not fusion.reduced_epilogue_kernel \
            or not any(c.kind == "all-reduce" and c.mesh_axes for c in st.collectives):
        return 0.0
    if result_bytes is None:
        result_bytes = _leaf_bytes(minfo, instr.shape, st.out, fusion.tiled_layout and instr.opcode != "convolution")
    return reduced_epilogue_bytes(fusion, instr, result_bytes) + _sliced_share_bytes(instr, st, minfo, fusion)


def _sliced_share_bytes(instr, st: Strategy, minfo: MeshInfo, fusion) -> float:
    """The TPU's slice of a partition's share after an all-reduce (:func:`hloshard.cost.tpu_fusion.partition_slice_bytes`):
    where ``st`` all-reduces partial sums over mesh axes that also split its result and no windowed einsum
    scatters them (:func:`windowed_dot_bytes`), the partitioner all-reduces the whole result and each
    partition slices its share at an offset computed from ``partition-id`` (libtpu's ``moe_layer`` solved
    plan: ``all-reduce`` of ``f32[4,32,128]``, then ``dynamic-slice_add_fusion`` to ``f32[4,32,32]``); 0
    otherwise."""
    if not is_mesh_spec(st.out):
        return 0.0
    axes = set().union(*(set(c.mesh_axes) for c in st.collectives if c.kind == "all-reduce" and c.mesh_axes))
    scattered = [d for d, spec in enumerate(st.out) if axes & set(spec)]
    if not scattered:
        return 0.0
    if windowed_dot_bytes(instr, st, instr.operands, minfo, fusion) > 0:
        return 0.0
    return partition_slice_bytes(fusion)


def windowed_dot_bytes(instr, st: Strategy, operands: Sequence, minfo: MeshInfo, fusion=None) -> float:
    """HBM bytes the TPU compiler's windowed einsum adds to the dot ``instr`` under ``st`` when the
    strategy scatters its partial sums (its all-reduce's mesh axes also split a result dimension:
    :func:`hloshard.cost.tpu_fusion.windowed_einsum_bytes`, operands at the specs ``st.inputs``
    requires); 0 for anything else or a ``fusion`` rule without windowed einsums (None: the CPU's)."""
    if fusion is None or not fusion.windowed_reduce_scatter or instr.opcode != "dot" or not is_mesh_spec(st.out):
        return 0.0
    reduce = [c for c in st.collectives if c.kind == "all-reduce" and c.mesh_axes]
    if len(reduce) != 1 or len(operands) < 2 or len(st.inputs) < 2:
        return 0.0
    axes = set(reduce[0].mesh_axes)
    scattered = [d for d, spec in enumerate(st.out) if axes & set(spec)]
    reread = windowed_reread_operand(instr, scattered)
    if reread is None:
        return 0.0
    lhs = _leaf_bytes(minfo, operands[0].shape, st.inputs[0], fusion.tiled_layout)
    rhs = _leaf_bytes(minfo, operands[1].shape, st.inputs[1], fusion.tiled_layout)
    return windowed_einsum_bytes(fusion, reduce[0].group_size, reread, lhs, rhs)


def price_roofline(group, minfo: MeshInfo) -> None:
    """With a device (``minfo.roofline_prices``), reprice every strategy of ``group`` (a StrategyGroup;
    anything else is left alone) by the roofline: ``compute`` = the cost units of max(flops / peak,
    HBM bytes / HBM bandwidth) (:meth:`hloshard.cost.roofline.RooflinePrices.units`, the report's
    formula), flops = the handler's compute / ``COMPUTE_COST_PER_FLOP`` kept in ``Strategy.flops``, HBM
    bytes from :func:`strategy_hbm_bytes`.  The strategies are replaced by copies (handlers may share
    strategy objects between groups, e.g. dots of equal shapes).  Without a device nothing changes."""
    prices = minfo.roofline_prices
    if prices is None or not isinstance(group, StrategyGroup) or not group.strategies:
        return
    instr = group.instr
    operands = group.ops()
    fusion = prices.fusion
    origin = {id(b): k for b, k in kernel_reads(instr, fusion)} if group.operands is None else {}
    terms = hbm_terms(instr, fusion)   # the fusion decisions: once per instruction, not per strategy
    out = []
    for st in group.strategies:
        if st.flops is not None:      # already priced (a group built twice)
            out.append(st)
            continue
        flops = st.compute / COMPUTE_COST_PER_FLOP
        b = strategy_hbm_bytes(instr, st, operands, minfo, origin, fusion, terms)
        out.append(replace(st, compute=prices.units(instr, flops, b), flops=flops))
    group.strategies = out
