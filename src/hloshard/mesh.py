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

import dataclasses
import itertools
import math
import re
from typing import Iterable, Sequence

import numpy as np

from .devices import LinkPiece, pieces_ring_latency, sub_axis_alpha, sub_axis_pieces
from .errors import InputError, UsageError
from .hlo.reshape_dims import reshape_groups
from .hlo.sharding import HloSharding
from .sdy_mesh import module_sdy_mesh
from .units import counted

#: A mesh axis name as a mesh string names it (``data`` in ``data=2,model=4``): a letter or ``_``, then letters,
#: digits, ``_``, ``.`` or ``-`` (a regular expression; :meth:`DeviceMesh.parse`, and
#: :func:`hloshard.mesh_setup.named_mesh_spec` for the axis names of ``auto_shard``'s jax Mesh).
AXIS_NAME = r"[A-Za-z_][\w.\-]*"

#: Largest device count a mesh may have (hloshard builds per-device tables of this size).
MAX_MESH_DEVICES = 65536

#: Most mesh axes of size > 1 a mesh may have.  A tensor's strategies grow as (rank + 1) ** axes: on a
#: two-instruction module (f32[64,64] negate, new user 16) solve took 3.6 s at 8 axes of 2, 27.7 s at 10
#: and did not end in 150 s at 12.  Real meshes have at most 5 or 6 axes of size > 1 (MaxText's 12
#: logical axes are mostly 1); size-1 axes are not counted.
MAX_MESH_AXES = 8

#: Inference and refinement stop adding axes beyond this many (the strategy space grows as
#: (rank + 1) ** axes): further shardings are priced as written.
MAX_REFINED_AXES = 6

__all__ = ["DeviceMesh", "DeviceOrder", "DimAxes", "ShardingMeshMismatch", "SubAxis", "infer_device_order",
           "infer_mesh", "module_named_mesh", "refine_for_module", "sharding_cuts"]


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


#: ``DeviceMesh.source`` in words, for :meth:`DeviceMesh.describe` (the summaries' mesh line): where the mesh came
#: from.  The JSON reports keep the field's value.
MESH_SOURCE_WORDS = {
    "given": "",
    "--mesh": "from --mesh",
    "module mesh": "from the module's mesh (xla.sdy.meshes)",
    "inferred": "inferred from the module's shardings",
    "num_partitions": "from the module's num_partitions",
    "auto": "picked by --mesh auto",
}


class DeviceMesh:
    """A logical device mesh.

    Attributes:
      shape: mesh axis sizes, e.g. ``(2, 4)``.
      device_ids: ``np.ndarray`` (int64, read-only) shaped like the mesh: device id at each mesh position.
      alpha: per mesh axis, the latency term of the alpha-beta collective model (cost units).
      beta: per mesh axis, the inverse-bandwidth term (cost units per byte).
    """

    __slots__ = ("shape", "device_ids", "alpha", "beta", "axis_names", "sub_axes", "user_shape", "user_names",
                 "source", "notes", "max_padding", "memory_budget", "divisible_io", "whole_axes_io", "roofline_prices",
                 "memory_device", "barriers_kept", "axis_levels", "user_levels",
                 "_is_iota", "_coords", "_map_cache", "_build_cache")

    def __init__(self, shape: Sequence[int], device_ids=None, alpha: Sequence[float] | None = None,
                 beta: Sequence[float] | None = None, axis_names: Sequence[str] | None = None):
        """Raises UsageError on a non-positive axis size, device ids that are not a permutation of
        ``0..N-1`` or the wrong number of them, alpha/beta of the wrong length or negative, or axis
        names that are not one distinct name per axis.

        Besides the attributes above a mesh carries (none of them part of equality):

        * ``axis_names``: one name per axis (``None`` when the mesh is unnamed);
        * ``user_shape`` / ``user_names``: the mesh the user asked for, and ``sub_axes``: per axis of
          this mesh the :class:`SubAxis` of the user's mesh it is (``user_shape == shape`` and every
          sub-axis whole unless :meth:`refine` split an axis);
        * ``source``: where the mesh came from (``'--mesh'``, ``'module mesh'`` (Shardy
          ``xla.sdy.meshes``), ``'inferred'``, ``'num_partitions'``, ``'auto'`` or ``'given'``);
        * ``notes``: messages for the commands to print (refinements, shardings left as they are);
        * ``max_padding`` (default 0.5) and ``memory_budget`` (bytes or None): the uneven-split policy
          of the strategy space (:class:`hloshard.strategy.base.MeshInfo`); ``divisible_io`` (default
          False): entry parameters and outputs split evenly only (a ``jax.jit`` argument's or result's
          ``NamedSharding`` must divide its dims; XLA's auto-sharding option
          ``only_allow_divisible_input_output``), :func:`hloshard.autoshard.build.build_graph`;
        * ``whole_axes_io`` (default None): when set (:meth:`keep_io_on_user_axes`), the cuts of the
          user's mesh (:func:`_shape_cuts`); entry parameters and outputs are then laid out over whole
          user axes only (:meth:`on_user_axes`: a ``jax.sharding.PartitionSpec`` names user axes, each
          whole), while intermediates may use the sub-axes of a refinement;
        * ``roofline_prices``: with ``--device``, the device's roofline in cost units
          (:class:`hloshard.cost.roofline.RooflinePrices`: compute priced as max(flops, HBM bytes)),
          else None.
        """
        shape = tuple(int(s) for s in shape)
        if not shape or any(s <= 0 for s in shape):
            raise UsageError(f"invalid mesh shape {shape}: every axis size must be a positive integer")
        n = math.prod(shape)
        desc = "x".join(map(str, shape))
        if n > MAX_MESH_DEVICES:
            raise UsageError(f"invalid mesh {desc}: {n:,} devices; at most {MAX_MESH_DEVICES:,} are supported")
        if sum(s > 1 for s in shape) > MAX_MESH_AXES:
            raise UsageError(f"invalid mesh {desc}: {sum(s > 1 for s in shape)} axes of size > 1; at most "
                             f"{MAX_MESH_AXES} are supported (the strategies of a tensor grow as (rank + 1) ** axes)")
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
        if axis_names is not None:
            names = tuple(str(a) for a in axis_names)
            if len(names) != len(shape) or len(set(names)) != len(names) or any(not a for a in names):
                raise UsageError(f"mesh {desc}: give one distinct, non-empty name per axis, got {list(names)}")
            self.axis_names = names
        else:
            self.axis_names = None
        self.user_shape = shape
        self.user_names = self.axis_names
        self.sub_axes = tuple(SubAxis(a, 1, s) for a, s in enumerate(shape))
        self.source = "given"
        self.notes = []
        self.max_padding = 0.5
        self.memory_budget = None
        self.divisible_io = False
        self.whole_axes_io = None
        self.roofline_prices = None
        #: the TPU device profile whose compiler the memory model follows (``--device tpu-*``), else None
        self.memory_device = None
        #: True on a GPU profile (``--device h100-sxm``...): its compiler schedules with the ``opt-barrier``
        #: instructions in place (:func:`hloshard.cost.liveness.set_barriers_kept`)
        self.barriers_kept = False
        #: per axis, the link levels inside it (:class:`hloshard.devices.LinkPiece`, minor first) when its
        #: devices cross more than one link (an axis that spans nodes, priced on a device), else None;
        #: ``user_levels`` the same per axis of the user's mesh (:meth:`apply_levels`)
        self.axis_levels = None
        self.user_levels = None
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
        """Build a mesh from command-line text: ``spec`` ``'2x4'`` / ``'2x2x2'`` / ``'8'``, or with axis
        names ``'data=2,model=4'``; ``device_ids`` ``'0,2,1,3,...'`` (default iota), ``alpha`` / ``beta``
        ``'1,1'`` (one value per axis; default 1.0). Raises UsageError with a message naming the bad
        flag (``'2,4'`` is an error with a hint: write ``2x4`` or name the axes)."""
        text = str(spec).strip()
        names = None
        if "=" in text:
            m = re.fullmatch(rf"\s*{AXIS_NAME}\s*=\s*[0-9]+(\s*,\s*{AXIS_NAME}\s*=\s*[0-9]+)*\s*", text)
            if not m:
                raise UsageError(f"invalid --mesh {spec!r}: expected named axes NAME=SIZE separated by ',', "
                                 f"e.g. data=2,model=4")
            pairs = [p.split("=") for p in text.split(",")]
            names = [a.strip() for a, _ in pairs]
            if len(set(names)) != len(names):
                raise UsageError(f"invalid --mesh {spec!r}: axis name listed twice")
            shape = [int(b) for _, b in pairs]
        elif re.fullmatch(r"[0-9]+(\s*,\s*[0-9]+)+", text):
            x = "x".join(p.strip() for p in text.split(","))
            raise UsageError(f"invalid --mesh {spec!r}: separate axis sizes with 'x' ({x}), or name the axes "
                             f"({','.join(f'a{i}={p.strip()}' for i, p in enumerate(text.split(',')))})")
        elif text.lower() == "auto":
            raise UsageError("--mesh auto searches over meshes: it is available in `hloshard solve`")
        elif re.fullmatch(r"[0-9]+(\s*[xX*]\s*[0-9]+)*", text):
            shape = [int(s) for s in re.split(r"\s*[xX*]\s*", text)]
        else:
            raise UsageError(f"invalid --mesh {spec!r}: expected axis sizes separated by 'x', e.g. 2x4, "
                             f"2x2x2 or 8, or named axes, e.g. data=2,model=4")
        if any(s <= 0 for s in shape):
            raise UsageError(f"invalid --mesh {spec!r}: axis sizes must be positive")
        desc = "x".join(map(str, shape))
        if isinstance(device_ids, str):
            device_ids = _parse_list(device_ids, "--device-ids", int)
        if isinstance(alpha, str):
            alpha = _parse_list(alpha, "--alpha", float, desc)
        if isinstance(beta, str):
            beta = _parse_list(beta, "--beta", float, desc)
        return cls(shape, device_ids, alpha, beta, axis_names=names)

    @classmethod
    def for_module(cls, module, spec: str | None = None, device_ids=None, alpha=None,
                   beta=None, refine: bool = True) -> "DeviceMesh":
        """The mesh for ``module``, by one precedence for every command:

        1. ``spec`` (``--mesh``), else
        2. the module's named mesh (Shardy ``xla.sdy.meshes`` frontend attribute, one mesh), else
        3. the mesh inferred from the module's tiled shardings (:func:`infer_mesh`), else
        4. the 1-D mesh of ``num_partitions``.

        Without ``device_ids`` (and without a Shardy mesh, which carries its own) the device order is the
        one the module's shardings agree on (:func:`infer_device_order`: iota unless they all fit another
        order; a note says so), for the shape of ``spec`` or of the inferred mesh; shardings in two orders
        raise UsageError naming ``--device-ids``.

        With ``refine`` (default) the chosen mesh is then refined (:func:`refine_for_module`) so that
        every user sharding maps onto whole axes and reshapes can carry a split onto sub-axes; the
        result records ``source``, the user's mesh (``user_shape``, ``sub_axes``) and ``notes``.

        Raises UsageError when no mesh is known (no ``--mesh``, no named mesh, no tiled sharding and
        no num_partitions > 1), when the module's num_partitions (>1) differs from the mesh size, or when
        its shardings list their devices in two orders (above).
        ``num_partitions=1`` (XLA's default, never printed) counts as not stated.
        """
        n = getattr(module, "num_partitions", None) if module is not None else None
        stated = n is not None and int(n) > 1
        inferred_order = None
        if spec is not None:
            mesh = cls.parse(spec, device_ids, alpha, beta)
            source = "--mesh"
            if stated and mesh.num_devices != int(n):
                raise UsageError(f"--mesh {mesh} has {counted(mesh.num_devices, 'device')} but the module has "
                                 f"num_partitions={int(n)}")
            if device_ids is None and module is not None and module_named_mesh(module) is None:
                inferred_order = _agreed_order(module, mesh.num_devices, mesh.shape, str(mesh))
                if inferred_order is not None:
                    mesh = cls(mesh.shape, inferred_order.ids, mesh.alpha, mesh.beta, axis_names=mesh.axis_names)
            named = module_named_mesh(module) if module is not None else None
            if named is not None and tuple(named[1]) != tuple(mesh.shape):
                own = ",".join(f"{a}={k}" for a, k in zip(named[0], named[1]))
                mesh.notes.append(f"--mesh {mesh} is not the module's own mesh {own} (its xla.sdy.meshes "
                                  f"attribute): the module's shardings are read on --mesh {mesh}")
        else:
            mesh, source = None, None
            if isinstance(alpha, str):
                alpha = _parse_list(alpha, "--alpha", float)
            if isinstance(beta, str):
                beta = _parse_list(beta, "--beta", float)
            named = module_named_mesh(module)
            if named is not None and (not stated or math.prod(named[1]) == int(n)):
                names, shape, ids = named
                mesh = cls(shape, device_ids if device_ids is not None else ids, alpha, beta, axis_names=names)
                source = "module mesh"
            ids = _ids(device_ids)
            if mesh is None and ids is None:
                count = int(n) if stated else _sharding_device_count(module)
                inferred_order = _agreed_order(module, count, None, f"of {count} devices") if count else None
                ids = None if inferred_order is None else list(inferred_order.ids)
            if mesh is None:
                inferred = infer_mesh(module, int(n) if stated else None, ids, infer_order=False)
                if inferred is not None and len(inferred) > 1:
                    mesh, source = cls(inferred, ids, alpha, beta), "inferred"
            if mesh is None:
                count = int(n) if stated else _sharding_device_count(module)
                if count is None:
                    raise UsageError("the device mesh is unknown: the module states no num_partitions, so pass "
                                     "--mesh (e.g. --mesh 2x4)")
                mesh = cls((count,), ids, alpha, beta)
                source = "num_partitions" if stated else "inferred"
        if inferred_order is not None:
            mesh.notes.append(f"device order {inferred_order.words()} inferred from the module's shardings (they "
                              f"list their devices in that order; --device-ids sets another)")
        if not mesh.is_iota and not _groups_sort_alike(mesh.device_ids):
            mesh.notes.append("in this device order the devices of a replicated group do not sort into the same "
                              "mesh order in every group: XLA sorts them (a partially replicated sharding's canonical "
                              "form), and its partitioner may then take other collectives than priced for some ops "
                              "(measured: a few weight-gradient dots of the transformer sample)")
        mesh.source = source
        if refine and module is not None:
            mesh = refine_for_module(mesh, module)
        return mesh

    def with_policy(self, max_padding: float | None = None, memory_budget: int | None = None,
                    divisible_io: bool | None = None) -> "DeviceMesh":
        """Set the uneven-split policy (``max_padding``: padded elements / real elements allowed for an
        uneven split, default 0.5; ``memory_budget``: bytes per device, enables uneven splits that use
        more devices than any even one; ``divisible_io``: entry parameters and outputs split evenly only,
        None leaves it as it is). Returns ``self``. Raises UsageError on a negative padding."""
        if max_padding is not None:
            if not math.isfinite(float(max_padding)) or float(max_padding) < 0:
                raise UsageError(f"--max-padding must be a non-negative number, got {max_padding}")
            self.max_padding = float(max_padding)
        self.memory_budget = memory_budget
        if divisible_io is not None:
            self.divisible_io = bool(divisible_io)
        return self

    def keep_io_on_user_axes(self) -> "DeviceMesh":
        """Lay entry parameters and outputs over whole axes of the user's mesh only (``jax.jit``'s
        ``in_shardings`` / ``out_shardings`` are ``NamedSharding``s whose ``PartitionSpec`` names user axes,
        each whole: a Shardy sub-axis such as ``model:(1)2`` has no PartitionSpec form), while the
        intermediates of a refined mesh may use sub-axes. Sets ``whole_axes_io`` to the user mesh's cuts
        of the flat device order (carried by :meth:`refine`; a coarse mesh of the same devices takes it
        over, :func:`hloshard.autoshard.coarse.coarse_mesh`); applied to the entry's values by
        :func:`hloshard.autoshard.build.build_graph` through :meth:`on_user_axes`. Returns ``self``."""
        self.whole_axes_io = frozenset(_shape_cuts(self.user_shape))
        return self

    def on_user_axes(self, axes: Sequence[int]) -> bool:
        """Whether one tensor dim split over this mesh's ``axes`` (major to minor, as a strategy spec
        lists them) is split over whole axes of the user's mesh, i.e. has a PartitionSpec form: True when
        ``whole_axes_io`` is None (no restriction).  Each axis ``k`` covers the strides ``[lo, lo *
        shape[k])`` of the flat device order (``lo``: the product of the sizes minor to it); the axes
        form maximal chains (one axis' ``lo`` the next one's ``lo * size``), and every chain must start
        and end at a cut of the user's mesh (a chain between two cuts is a run of whole user axes, major
        to minor).  So on 2x4 refined to 2x2x2: ``(1, 2)`` (``model``), ``(0, 1, 2)`` (``data, model``)
        and ``(1, 2, 0)`` (``model, data``) are whole; ``(1,)`` (``model:(1)2``), ``(2, 1)`` and
        ``(0, 1)`` are not.  Size-1 axes are skipped."""
        cuts = self.whole_axes_io
        if cuts is None:
            return True
        lo = [1] * self.ndim
        for k in range(self.ndim - 2, -1, -1):
            lo[k] = lo[k + 1] * self.shape[k + 1]
        chain_hi = chain_lo = None
        for k in axes:
            if self.shape[k] == 1:
                continue
            hi = lo[k] * self.shape[k]
            if chain_lo is not None and hi == chain_lo:
                chain_lo = lo[k]
                continue
            if chain_lo is not None and (chain_lo not in cuts or chain_hi not in cuts):
                return False
            chain_hi, chain_lo = hi, lo[k]
        return chain_lo is None or (chain_lo in cuts and chain_hi in cuts)

    # ---------------------------------------------------------------- refinement
    def refine(self, shape: Sequence[int]) -> "DeviceMesh":
        """This mesh with its axes split into sub-axes: ``shape`` must refine ``self.shape`` (each axis
        of size n replaced by consecutive axes whose product is n, major first). Device order,
        alpha and beta (per sub-axis those of its axis; on a mesh priced on a device,
        ``roofline_prices`` set, a sub-axis' alpha is the ring latency of its own size,
        :func:`hloshard.devices.sub_axis_alpha`), names, source and notes carry over; the
        user's mesh stays ``self.user_shape`` and ``sub_axes`` says which part of which user axis each
        new axis is. Raises ValueError when ``shape`` does not refine the mesh."""
        shape = tuple(int(x) for x in shape)
        if shape == self.shape:
            return self
        owner, pre = [], []
        j = 0
        for a, n in enumerate(self.shape):
            acc = 1
            while acc < n:
                if j >= len(shape) or n % (acc * shape[j]):
                    raise ValueError(f"mesh {'x'.join(map(str, shape))} does not refine the mesh {self}")
                owner.append(a)
                pre.append(acc)
                acc *= shape[j]
                j += 1
            if n == 1 and j < len(shape) and shape[j] == 1:
                owner.append(a)
                pre.append(1)
                j += 1
        if j != len(shape) or math.prod(shape) != self.num_devices:
            raise ValueError(f"mesh {'x'.join(map(str, shape))} does not refine the mesh {self}")
        if self.roofline_prices is None:   # the unit model: a sub-axis keeps its axis' alpha
            alpha = [self.alpha[a] for a in owner]
        else:   # priced on a device: a sub-axis is a ring of its own size (devices.sub_axis_alpha)
            alpha = [sub_axis_alpha(self.alpha[a], self.shape[a], shape[k]) for k, a in enumerate(owner)]
        out = DeviceMesh(shape, self.device_ids.ravel(), alpha, [self.beta[a] for a in owner])
        base = self.sub_axes
        subs = []
        for k, a in enumerate(owner):
            b = base[a]
            subs.append(SubAxis(b.user_axis, b.pre_size * pre[k], shape[k]))
        out.sub_axes = tuple(subs)
        out.user_shape, out.user_names = self.user_shape, self.user_names
        out.axis_names = tuple(out.axis_label(k) for k in range(out.ndim)) if self.user_names else None
        out.source, out.notes = self.source, list(self.notes)
        out.max_padding, out.memory_budget, out.divisible_io = self.max_padding, self.memory_budget, self.divisible_io
        out.whole_axes_io = self.whole_axes_io
        out.roofline_prices = self.roofline_prices
        out.memory_device = getattr(self, "memory_device", None)
        out.barriers_kept = getattr(self, "barriers_kept", False)
        if self.user_levels is not None:   # each sub-axis priced at the links its own devices cross
            out.apply_levels(self.user_levels)
        return out

    def apply_levels(self, user_levels) -> "DeviceMesh":
        """Price each axis of this mesh by the link levels of the user axis it is part of: ``user_levels``,
        per axis of ``user_shape``, None (one link: the axis keeps its alpha / beta) or its
        :class:`hloshard.devices.LinkPiece` levels, minor first (:func:`hloshard.devices.axis_pieces`: an axis
        that spans nodes).  Each (sub-)axis takes the part of its user axis' levels its devices cover
        (:func:`hloshard.devices.sub_axis_pieces`): one level, that link's beta and ``(size - 1)`` of its
        step latencies as alpha; several, ``axis_levels[k]`` set (the collective cost functions price the
        levels, :func:`hloshard.cost.collectives.link_levels`), beta the slowest level's (the flat fallback)
        and alpha the latency of a ring through the levels (:func:`hloshard.devices.pieces_ring_latency`); a
        sub-axis that cuts a level off its boundary keeps its alpha / beta.  Sets ``user_levels`` (carried by
        :meth:`refine`).  Returns ``self``.  Raises ValueError for a list of the wrong length."""
        user_levels = tuple(None if lv is None else tuple(lv) for lv in user_levels)
        if len(user_levels) != len(self.user_shape):
            raise ValueError(f"{len(user_levels)} level lists for a user mesh of {len(self.user_shape)} axes")
        if all(lv is None for lv in user_levels):
            return self
        alpha, beta, levels = list(self.alpha), list(self.beta), [None] * self.ndim
        for k, sub in enumerate(self.sub_axes):
            pieces = user_levels[sub.user_axis]
            if pieces is None:
                continue
            part = sub_axis_pieces(pieces, sub.pre_size, sub.size)
            if part is None:
                continue
            beta[k] = max(p.beta for p in part)
            alpha[k] = pieces_ring_latency(part)
            if len(part) > 1:
                levels[k] = part
        self.alpha, self.beta = tuple(alpha), tuple(beta)
        self.axis_levels = tuple(levels) if any(lv is not None for lv in levels) else None
        self.user_levels = user_levels
        return self

    def flattened(self) -> "DeviceMesh":
        """The 1-D mesh of this mesh's devices in the same order, priced as one axis: alpha and beta the
        largest of this mesh's (XLA's rule for a collective over several axes); on a device-priced mesh
        (``roofline_prices`` set) whose axes cross links of different betas, nested fast inside slow (the
        minor axes the fast ones), the one axis carries those links as levels (:meth:`apply_levels`), so that
        a refinement of it (the coarse mesh of :mod:`hloshard.autoshard.coarse`) prices each sub-axis at the
        links its devices cross, not every sub-axis at the slowest.  Policy and device carry-overs are the
        caller's."""
        base = DeviceMesh((self.num_devices,), self.device_ids.ravel(), [max(self.alpha)], [max(self.beta)])
        if self.roofline_prices is None:
            return base
        pieces: list = []
        for k in reversed(range(self.ndim)):   # minor first
            size = int(self.shape[k])
            if size == 1:
                continue
            own = self.axis_levels[k] if self.axis_levels is not None else None
            for p in own or (LinkPiece(size, float(self.alpha[k]) / (size - 1), float(self.beta[k])),):
                if pieces and pieces[-1].beta == p.beta:
                    last = pieces.pop()
                    p = LinkPiece(last.size * p.size, max(last.step, p.step), p.beta, p.link or last.link)
                pieces.append(p)
        if len(pieces) < 2 or any(a.beta > b.beta for a, b in zip(pieces, pieces[1:])):
            return base
        base.roofline_prices = self.roofline_prices
        return base.apply_levels((tuple(pieces),))

    @property
    def is_refined(self) -> bool:
        """Some axis is a sub-axis of an axis of the user's mesh."""
        return self.shape != self.user_shape

    def axis_label(self, axis: int) -> str:
        """How axis ``axis`` prints in reports: its user name (``data``) or index (``0``), and for a
        sub-axis Shardy's ``name:(pre)size`` form (``model:(1)2``: the major 2 of the axis of 4)."""
        sub = self.sub_axes[axis]
        base = self.user_names[sub.user_axis] if self.user_names else str(sub.user_axis)
        if sub.size == self.user_shape[sub.user_axis]:
            return base
        return f"{base}:({sub.pre_size}){sub.size}"

    def describe(self) -> str:
        """One line for summaries: the user's mesh with names, where it came from, and the internal
        refinement if any, e.g. ``2x4 (--mesh), refined internally to 2x2x2 [0, 1:(1)2, 1:(2)2]``."""
        user = "x".join(map(str, self.user_shape))
        if self.user_names:
            user += " (" + ", ".join(f"{a}={n}" for a, n in zip(self.user_names, self.user_shape)) + ")"
        # "given": built by a caller (auto_shard's jax Mesh), no words; the others in words, not the field's
        # value ("2x4 from inferred" read oddly: fresh-clone check, round 30)
        words = MESH_SOURCE_WORDS.get(self.source, f"from {self.source}")
        text = f"{user} {words}" if words else user
        if self.is_refined:
            text += (f", refined internally to {self} "
                     f"[{', '.join(self.axis_label(a) for a in range(self.ndim))}]")
        return text

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
        return (self.shape, self.device_ids.tobytes(), self.alpha, self.beta, self.axis_levels)

    def __eq__(self, other):
        if not isinstance(other, DeviceMesh):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def to_json(self) -> dict:
        """``{"shape": [...], "device_ids": [...] (flat), "alpha": [...], "beta": [...]}``, plus
        ``"axis_names"`` for a named mesh and ``"user_shape"`` / ``"axis_labels"`` / ``"source"`` /
        ``"notes"`` (see :meth:`describe`)."""
        out = {"shape": list(self.shape), "device_ids": self.device_ids.ravel().tolist(),
               "alpha": list(self.alpha), "beta": list(self.beta)}
        if self.axis_names:
            out["axis_names"] = list(self.axis_names)
        if self.is_refined or self.source != "given" or self.notes:
            out.update(user_shape=list(self.user_shape), source=self.source, notes=list(self.notes),
                       axis_labels=[self.axis_label(a) for a in range(self.ndim)])
        return out

    @classmethod
    def from_json(cls, data: dict) -> "DeviceMesh":
        """Inverse of :meth:`to_json`. Raises UsageError on inconsistent data."""
        try:
            return cls(data["shape"], data.get("device_ids"), data.get("alpha"), data.get("beta"),
                       axis_names=data.get("axis_names"))
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
            raise ShardingMeshMismatch(f"sharding {text} uses {counted(sharding.num_devices, 'device')} but the mesh "
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


# ------------------------------------------------------------------------------------------------
# Sub-axes, the module's meshes and refinement.
#
# A mesh of N devices is a mixed-radix numbering of the mesh positions 0..N-1 (row-major): axis a
# covers the digits of weight stride_a .. stride_a * size_a. A set of "cuts" {1, ..., N} (each one
# dividing the next) is such a numbering: the axes are the ratios of consecutive cuts, major first.
# Refining a mesh adds cuts inside its axes; a tiled sharding whose tile assignment is a transposed
# mixed-radix numbering of the positions (every sharding of a mesh is one) names the cuts it needs.
# ------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SubAxis:
    """Part ``(pre_size)size`` of axis ``user_axis`` of the user's mesh (Shardy's sub-axis notation):
    the ``size`` devices of that axis whose stride is ``user_size / (pre_size * size)``. A whole axis
    is ``SubAxis(a, 1, user_size)``."""

    user_axis: int
    pre_size: int
    size: int


def _agreed_order(module, n: int, shape, mesh_desc: str):
    """:func:`infer_device_order` for :meth:`DeviceMesh.for_module` without ``--device-ids``: None (the
    iota order) or the order the module's shardings agree on.  Raises UsageError, naming
    ``--device-ids``, when they follow orders no one mesh holds."""
    order = infer_device_order(module, n, shape)
    if order is not None and order.other is not None:
        raise UsageError(order.conflict_message(mesh_desc))
    return None if order is None or order.is_iota else order


def _groups_sort_alike(ids: np.ndarray) -> bool:
    """Whether, for every set of axes of a mesh whose device ids are ``ids`` (shaped as the mesh), the
    devices of each group along those axes (the other axes' coordinates fixed: the replicas of a
    sharding replicated over them) sort by id into the same order of mesh positions in every group.
    XLA sorts the devices inside each replication group of a partially replicated sharding (its
    canonical form, as :class:`hloshard.hlo.sharding.HloSharding` does); where the sorted order differs
    from group to group, the partitioner can take other collectives than the same plan in iota order
    (BENCHMARKS.md, round 38: the transformer sample with devices 0 and 1 swapped, 13.9 MB against
    12.3 MB; rows of a 2x4 mesh swapped, or all its devices reversed, are exact)."""
    ids = np.asarray(ids)
    axes = [a for a in range(ids.ndim) if ids.shape[a] > 1]
    for k in range(1, len(axes)):
        for group_axes in itertools.combinations(axes, k):
            rest = [a for a in range(ids.ndim) if a not in group_axes]
            rows = ids.transpose(rest + list(group_axes)).reshape(-1, math.prod(ids.shape[a] for a in group_axes))
            orders = np.argsort(rows, axis=1)
            if not (orders == orders[0]).all():
                return False
    return True


def _ids(device_ids):
    if isinstance(device_ids, str):
        return _parse_list(device_ids, "--device-ids", int)
    return device_ids


def prime_factors(n: int) -> list[int]:
    """The prime factors of ``n`` in ascending order, with repetition (12 -> [2, 2, 3])."""
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    if n > 1:
        out.append(n)
    return out


def _is_chain(cuts) -> bool:
    c = sorted(cuts)
    return all(b % a == 0 for a, b in zip(c, c[1:]))


def _shape_cuts(shape: Sequence[int]) -> set[int]:
    """Cuts of a row-major mesh ``shape``: the axis strides and N."""
    cuts, acc = {1}, 1
    for n in reversed(shape):
        acc *= int(n)
        cuts.add(acc)
    return cuts


def _cuts_to_shape(cuts) -> tuple[int, ...]:
    c = sorted(cuts)
    return tuple(b // a for a, b in reversed(list(zip(c, c[1:]))))


def sharding_cuts(sharding: HloSharding, positions: np.ndarray | None = None) -> set[int] | None:
    """The cuts (module comment above) a tiled ``sharding`` needs so that every tensor dim is split
    over whole axes (in some order) and the replicated devices form whole axes; None when its tile
    assignment is no transposed mixed-radix numbering of the mesh positions (then no mesh of any
    shape holds it). ``positions[d]``: mesh position of device d (default: the device id).
    Replicated / single-device shardings need no cut ({1, N})."""
    if sharding.kind != "tiled" or sharding.subgroup_types and set(sharding.subgroup_types) != {"replicated"}:
        return None
    ta = np.asarray(sharding.tile_assignment, dtype=np.int64)
    if positions is not None:
        if ta.size != positions.size or ta.size and (ta.min() < 0 or ta.max() >= positions.size):
            return None   # names a device the mesh lacks: the validity rule reports it (exit 2), not here
        ta = positions[ta]
    n = int(ta.size)
    if n <= 1:
        return {1}
    tiled = sharding.tiled_rank
    if ta.ndim > tiled:  # replication groups: the order inside a group does not matter
        rep = math.prod(ta.shape[tiled:])
        ta = np.sort(ta.reshape(ta.shape[:tiled] + (rep,)), axis=-1)
    primes, owner = [], []
    for d, size in enumerate(ta.shape):
        for p in prime_factors(int(size)):
            primes.append(p)
            owner.append(d)
    arr = ta.reshape(primes)
    if int(arr.flat[0]) != 0:
        return None
    k = len(primes)
    strides = []
    for j in range(k):
        idx = [0] * k
        idx[j] = 1
        strides.append(int(arr[tuple(idx)]))
    expect = np.zeros(primes, dtype=np.int64)
    for j in range(k):
        shape = [1] * k
        shape[j] = primes[j]
        expect += np.arange(primes[j], dtype=np.int64).reshape(shape) * strides[j]
    if not np.array_equal(arr, expect):
        return None
    acc = 1
    for j in sorted(range(k), key=lambda j: strides[j]):
        if strides[j] != acc:
            return None
        acc *= primes[j]
    cuts = {1, n}
    j = 0
    while j < k:
        hi, lo = strides[j] * primes[j], strides[j]
        while j + 1 < k and owner[j + 1] == owner[j] and strides[j] == strides[j + 1] * primes[j + 1]:
            j += 1
            lo = strides[j]
        cuts.update((lo, hi))
        j += 1
    return cuts


def _memo_cuts(memo: dict, sharding: HloSharding, positions):
    """:func:`sharding_cuts` cached per (semantically equal) sharding: modules repeat a few shardings
    on thousands of instructions."""
    key = sharding.without_metadata()
    if key not in memo:
        memo[key] = sharding_cuts(sharding, positions)
    return memo[key]


def _module_shardings(module):
    """(instruction, leaf sharding) of every tiled sharding in the module, in text order."""
    instrs = getattr(module, "all_instructions", None)
    if instrs is None:
        return
    for instr in instrs():
        sh = getattr(instr, "sharding", None)
        if sh is None:
            continue
        for leaf in (sh.tuple_elements if sh.is_tuple else (sh,)):
            if leaf.kind == "tiled":
                yield instr, leaf


def _sharding_device_count(module) -> int | None:
    """The device count of a module without ``num_partitions``, from its tiled shardings: the count
    most of them use (a tie: the larger), so that one sharding naming another count is the one the
    device-count check blames, not every other (None without a sharding over more than one device)."""
    from collections import Counter

    counts = Counter(leaf.num_devices for _, leaf in _module_shardings(module) if leaf.num_devices > 1)
    if not counts:
        return None
    return max(counts, key=lambda n: (counts[n], n))


def module_named_mesh(module):
    """The module's Shardy mesh ``(names, shape, device_ids or None)`` from its ``xla.sdy.meshes``
    frontend attribute (read by :func:`hloshard.sdy_mesh.module_sdy_mesh`), when it names a mesh of more than
    one device; else None."""
    if not hasattr(module, "attrs"):
        return None
    m = module_sdy_mesh(module)
    if m is None or not m.names or math.prod(m.sizes) <= 1:
        return None
    return tuple(m.names), tuple(int(x) for x in m.sizes), (None if m.device_ids is None else
                                                           [int(x) for x in m.device_ids])


def infer_mesh(module, num_devices: int | None = None, device_ids=None,
               infer_order: bool = True) -> tuple[int, ...] | None:
    """The coarsest mesh every tiled user sharding of ``module`` maps onto (whole axes, any order),
    found by factorizing their tile assignments' device orders (:func:`sharding_cuts`) and merging the
    cuts; None when the module has no tiled sharding of ``num_devices`` (default: the largest device
    count) devices. Shardings no mesh holds, or whose cuts conflict with earlier ones, are skipped
    (they are priced as written).  ``device_ids``: the device at each position of the flat mesh order
    (``--device-ids``); None: with ``infer_order`` the order the shardings agree on
    (:func:`infer_device_order`), else (or when they agree on none) iota."""
    n = num_devices or _sharding_device_count(module)
    if not n:
        return None
    if device_ids is None and infer_order:
        order = infer_device_order(module, n)
        device_ids = None if order is None or order.other is not None else order.ids
    positions = None if device_ids is None else _positions_of(device_ids, n)
    cuts, _, _, seen = _merge_sharding_cuts(module, n, {1, n}, positions, MAX_REFINED_AXES)
    return _cuts_to_shape(cuts) if seen else None


def _positions_of(device_ids, n: int):
    """``positions[d]``: the position of device ``d`` in the flat order ``device_ids`` (a permutation of
    ``0..n-1``); None when that is the iota order or not a permutation (the mesh's own check says so)."""
    ids = np.asarray(device_ids, dtype=np.int64).ravel()
    if ids.size != n or sorted(ids.tolist()) != list(range(n)) or np.array_equal(ids, np.arange(n)):
        return None
    positions = np.empty(n, dtype=np.int64)
    positions[ids] = np.arange(n)
    return positions


# ------------------------------------------------------------------------------------------------
# The device order a module's shardings imply.
#
# A module's shardings name logical device ids.  A jax Mesh built from devices in another order than
# their ids (mesh_utils.create_device_mesh on a TPU slice, a reversed or permuted device array) lowers
# to the iota form, but a module whose device ids were relabelled (an export of another program's
# device assignment, a hand-written module) lists them in another order: `P("data")` of a 2x4 mesh of
# devices 7..0 is `{devices=[2,1,4]7,6,5,4,3,2,1,0 last_tile_dim_replicate}`.  Such shardings are no
# transposed mixed-radix numbering of the device ids (sharding_cuts), but they are of the *positions*
# of the devices in the mesh's order.  Each tiled dim of a sharding gives every device a coordinate
# (its tile index along that dim); a tuple of independent coordinates, major first (completed by the
# device ids' own order inside each group), is a candidate order; the one under which the most
# shardings map (the fewest cuts first) is the module's when it maps more than the iota order does;
# shardings that share another order than the one taken are a conflict the user settles with --device-ids.
# ------------------------------------------------------------------------------------------------

#: Coordinates read from the module's shardings at most (the first, in text order) and candidate
#: orders tried at most: a bound on the search where the iota order does not fit (real modules name
#: two to four mesh axes: a handful of coordinates).
MAX_ORDER_COORDS = 12
MAX_ORDER_CANDIDATES = 512


@dataclasses.dataclass(frozen=True)
class DeviceOrder:
    """The device order a module's shardings imply (:func:`infer_device_order`).

    ``ids``: the device at each position of the flat mesh order (a permutation of ``0..N-1``, what
    ``--device-ids`` takes) under which most of the shardings map; ``fits``: the instructions whose
    shardings map in it; ``skipped``: those that map onto no refinement of the mesh in it (priced as
    written).  ``other`` / ``other_fits``: where two or more of the skipped shardings map in another
    order, that order and those instructions (the shardings conflict: the caller stops and names
    ``--device-ids``); else None / ()."""

    ids: tuple[int, ...]
    fits: tuple[str, ...]
    skipped: tuple[str, ...]
    other: tuple[int, ...] | None = None
    other_fits: tuple[str, ...] = ()

    @property
    def is_iota(self) -> bool:
        return list(self.ids) == list(range(len(self.ids)))

    def words(self) -> str:
        """The order as ``--device-ids`` takes it: ``7,6,5,4,3,2,1,0``."""
        return ",".join(map(str, self.ids))

    def conflict_message(self, mesh_desc: str) -> str:
        """Why no one order holds the module's shardings, naming ``--device-ids`` (a UsageError's text)."""
        def listing(names):
            names = sorted(set(names))
            return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")

        def order(ids):
            return ",".join(map(str, ids))

        return (f"the module's shardings list their devices in orders no one mesh {mesh_desc} holds: those of "
                f"{listing(self.fits)} fit the device order {order(self.ids)}, those of {listing(self.other_fits)} "
                f"the order {order(self.other)}; pass --device-ids with the device at each mesh position (e.g. "
                f"--device-ids {self.words()}) to say which order the devices are in (shardings that do not "
                f"fit it are priced as written)")


def _sharding_groups(module, n: int) -> list:
    """The distinct tiled ``n``-device user shardings of ``module`` in text order, each as
    ``(sharding, [instruction names])``."""
    groups: dict = {}
    for instr, leaf in _module_shardings(module):
        if leaf.num_devices != n:
            continue
        groups.setdefault(leaf.without_metadata(), (leaf, []))[1].append(instr.name)
    return list(groups.values())


def _order_fit(groups, base: set[int], positions, limit: int) -> tuple[set[int], list[str]]:
    """(cuts, skipped instruction names) of ``groups`` (:func:`_sharding_groups`) merged onto ``base`` in
    order ``positions`` (:func:`_merge_sharding_cuts`' rule on distinct shardings: a sharding that
    conflicts once conflicts with every later superset of cuts)."""
    cuts, skipped = set(base), []
    for sharding, names in groups:
        need = sharding_cuts(sharding, positions)
        if need is not None and need <= cuts:
            continue
        if need is None or not _is_chain(cuts | need) or len(cuts | need) - 1 > limit:
            skipped.extend(names)
            continue
        cuts |= need
    return cuts, skipped


def _coordinates(groups, n: int) -> list[np.ndarray]:
    """Per tiled dim of each sharding of ``groups`` (in text order), each device's tile index along it
    (``coord[d]``), distinct, at most :data:`MAX_ORDER_COORDS`."""
    out, seen = [], set()
    for sharding, _ in groups:
        ta = np.asarray(sharding.tile_assignment, dtype=np.int64)
        if ta.size != n or sorted(ta.ravel().tolist()) != list(range(n)):
            continue
        idx = np.indices(ta.shape).reshape(ta.ndim, -1)
        for k, t in enumerate(sharding.tile_dims):
            if t <= 1:
                continue
            coord = np.empty(n, dtype=np.int64)
            coord[ta.ravel()] = idx[k]
            key = coord.tobytes()
            if key not in seen:
                seen.add(key)
                out.append(coord)
            if len(out) >= MAX_ORDER_COORDS:
                return out
    return out


def _candidate_orders(coords: list[np.ndarray], n: int) -> list[np.ndarray]:
    """Device orders (the device at each position) from ordered tuples of independent coordinates
    (:func:`_coordinates`), major first, whose sizes multiply to a divisor of ``n``: the position is the
    tuple's mixed-radix value, the devices of one value in ascending id order.  The tuples that number
    every device come first, then those completed by the ids' order; each group in lexicographic order
    of the coordinates' text order (so a tie keeps the axes in the order the module first names them).
    Distinct orders, at most :data:`MAX_ORDER_CANDIDATES`."""
    sizes = [int(c.max()) + 1 for c in coords]
    full: list = []
    partial: list = []

    def walk(chosen: tuple, value: np.ndarray, prod: int) -> None:
        for j, c in enumerate(coords):
            if len(full) + len(partial) >= MAX_ORDER_CANDIDATES:
                return
            if j in chosen or n % (prod * sizes[j]):
                continue
            p = prod * sizes[j]
            v = value * sizes[j] + c
            counts = np.bincount(v, minlength=p)
            if counts.size != p or not np.all(counts == n // p):   # not independent of the chosen ones
                continue
            (full if p == n else partial).append(np.lexsort((np.arange(n), v)))
            if p < n:
                walk(chosen + (j,), v, p)

    walk((), np.zeros(n, dtype=np.int64), 1)
    out, seen = [], set()
    for order in full + partial:
        key = order.tobytes()
        if key not in seen:
            seen.add(key)
            out.append(order)
    return out


def _positions_array(order: np.ndarray) -> np.ndarray:
    positions = np.empty(order.size, dtype=np.int64)
    positions[order] = np.arange(order.size)
    return positions


def infer_device_order(module, n: int, shape: Sequence[int] | None = None) -> DeviceOrder | None:
    """The order of the ``n`` devices that the module's tiled shardings imply (module comment above),
    for a mesh of ``shape`` (None: any shape).  None when every sharding maps onto a refinement of the
    mesh in the iota order (the common case: one pass over the shardings).  Else the candidate order under
    which the most instructions' shardings map (then the fewest cuts, the least refinement; the first
    found on a tie) is taken when it maps strictly more of them than the iota order: a :class:`DeviceOrder`
    of it, whose ``skipped`` (a sharding no order holds, e.g. a manual subgroup; or an odd one) are priced
    as written.  Whichever order is taken, when two or more distinct shardings it leaves unmapped map in
    another order, ``other`` is set: the shardings list their devices in two orders, and
    :meth:`DeviceMesh.for_module` stops and names ``--device-ids``.  None: the iota order with no second
    order in use (a lone odd sharding is priced as written, as before round 38)."""
    if n <= 1 or module is None:
        return None
    groups = _sharding_groups(module, n)
    if not groups:
        return None
    base = _shape_cuts(shape) if shape is not None else {1, n}
    limit = max(MAX_REFINED_AXES, len(base) - 1)
    iota_cuts, iota_skipped = _order_fit(groups, base, None, limit)
    if not iota_skipped:
        return None
    candidates = _candidate_orders(_coordinates(groups, n), n)
    best, found, missed_best = None, None, None
    for order in candidates:
        cuts, missed = _order_fit(groups, base, _positions_array(order), limit)
        score = (len(missed), len(cuts))
        if best is None or score < best:
            best, found, missed_best = score, order, missed
            if not missed and cuts == base:   # nothing can do better
                break
    # the order most instructions' shardings fit (iota unless another fits strictly more); what it leaves is
    # priced as written, unless two or more of those shardings share another order (below)
    if found is not None and len(missed_best) < len(iota_skipped):
        positions, skipped = _positions_array(found), missed_best
    else:
        found, positions, skipped = np.arange(n), None, iota_skipped
    other, other_fits = None, ()
    left = [(sh, names) for sh, names in groups if set(names) & set(skipped)]
    # the shardings the order leaves that do not map in it at all (not those over the axis limit or cut against
    # the mesh's axes): two of them or more that share another order are a second order in use
    unmapped = [(sh, names) for sh, names in left if sharding_cuts(sh, positions) is None]
    if len(unmapped) >= 2:
        for order in candidates:
            if np.array_equal(order, found):
                continue
            pos = _positions_array(order)
            fit = [(sh, names) for sh, names in unmapped
                   if (need := sharding_cuts(sh, pos)) is not None and _is_chain(base | need)]
            if len(fit) >= 2:
                other, other_fits = tuple(int(d) for d in order), tuple(x for _, names in fit for x in names)
                break
    if other is None and positions is None:   # the iota order, and no second order in use: as before round 38
        return None
    fits = tuple(x for _, names in groups for x in names if x not in set(skipped))
    return DeviceOrder(tuple(int(d) for d in found), fits, tuple(skipped), other, other_fits)


def _merge_sharding_cuts(module, n: int, cuts: set[int], positions, limit: int):
    """Add the cuts of every tiled ``n``-device user sharding of ``module`` to ``cuts`` (a copy), in
    text order, skipping those no mesh holds, that conflict with the cuts so far or that would give
    more than ``limit`` axes. Returns (cuts, {new cut: instruction names}, skipped names, whether
    some sharding mapped)."""
    cuts = set(cuts)
    added: dict[int, list[str]] = {}
    skipped: list[str] = []
    seen = False
    memo: dict = {}
    for instr, leaf in _module_shardings(module):
        if leaf.num_devices != n:
            continue
        need = _memo_cuts(memo, leaf, positions)
        if need is not None and need <= cuts:
            seen = True
            continue
        if need is None or not _is_chain(cuts | need) or len(cuts | need) - 1 > limit:
            skipped.append(instr.name)
            continue
        seen = True
        for c in sorted(need - cuts):
            added.setdefault(c, []).append(instr.name)
        cuts |= need
    return cuts, added, skipped, seen


def _reshape_cuts(module, cuts: set[int], n: int):
    """Cuts that let reshapes carry a split onto sub-axes: for each group of merged / split dims of a
    reshape, each run of consecutive axes [lo, hi) (n = hi / lo devices) that divides the group's
    size, and each prefix product P of the group's dims on either side, the major gcd(n, P) devices
    of the run go to the major dims: cut at hi / gcd(n, P) when 1 < gcd < n (Shardy's sub-axes of
    ``reshape``). Yields (cut, instruction)."""
    instrs = getattr(module, "all_instructions", None)
    if instrs is None:
        return
    for instr in instrs():
        if instr.opcode not in ("reshape", "bitcast") or not instr.operands:
            continue
        a, b = instr.operands[0].shape, instr.shape
        if not (a.is_array and b.is_array) or tuple(a.dims) == tuple(b.dims):
            continue
        try:
            groups = reshape_groups(a.dims, b.dims)
        except InputError:
            continue
        for g in groups:
            for side, dims in ((g.in_dims, a.dims), (g.out_dims, b.dims)):
                sizes = [int(dims[d]) for d in side if dims[d] != 1]
                if len(sizes) < 2:
                    continue
                total = math.prod(sizes)
                c = sorted(cuts)
                for i in range(len(c)):
                    for j in range(i + 1, len(c)):
                        lo, hi = c[i], c[j]
                        run = hi // lo
                        if total % run:
                            continue
                        prefix = 1
                        for s in sizes[:-1]:
                            prefix *= s
                            gg = math.gcd(run, prefix)
                            if 1 < gg < run:
                                yield hi // gg, instr


def coarse_cuts(mesh: DeviceMesh, module) -> set[int] | None:
    """The cuts of the flat device order (strides, :func:`_shape_cuts`) of ``mesh``'s *coarse mesh*
    for ``module``: the 1-D mesh of the same devices in the same order, refined for ``module``
    (:func:`refine_for_module`) but only at cuts ``mesh`` has too, so that each of its axes is a run of
    consecutive axes of ``mesh``.  None when that is not coarser (the same cuts as ``mesh``) or
    ``mesh`` has one device.  The coarse space of :mod:`hloshard.autoshard.coarse` (coarse to fine)
    is built on it, and ``build_graph`` enumerates its two axes' orders on ``mesh`` too
    (:meth:`hloshard.strategy.base.MeshInfo.add_coarse_order`)."""
    n = mesh.num_devices
    if n <= 1:
        return None
    fine = _shape_cuts(mesh.shape)
    base = DeviceMesh((n,), mesh.device_ids.ravel(), [max(mesh.alpha)], [max(mesh.beta)])
    cuts = _shape_cuts(refine_for_module(base, module).shape) & fine
    return None if cuts == fine else cuts


def sub_axis_sizes(shape: Sequence[int], cuts: set[int]) -> list[int]:
    """Per axis of a mesh of ``shape`` (major first, size-1 axes kept as 1), the sizes of its sub-axes
    major first, split at ``cuts`` (device-count strides that include every axis boundary); the argument
    of :meth:`DeviceMesh.refine`.  E.g. shape ``(2, 4)``, cuts ``{1, 2, 4, 8}`` -> ``[2, 2, 2]``."""
    sizes, stride = [], math.prod(shape)
    for size in shape:
        lo = stride // size
        inner = sorted(c for c in cuts if lo <= c <= stride)
        sizes.extend([1] if size == 1 else [b // a for a, b in reversed(list(zip(inner, inner[1:])))])
        stride = lo
    return sizes


def refine_for_module(mesh: DeviceMesh, module) -> DeviceMesh:
    """``mesh`` refined so that every tiled user sharding of ``module`` maps onto whole axes and every
    reshape can carry its split onto sub-axes (:func:`sharding_cuts`, :func:`_reshape_cuts`);
    ``mesh`` itself when nothing needs refining. The refined mesh's ``notes`` say which axis was split
    and for which instructions; shardings no refinement of ``mesh`` holds are noted and left alone
    (priced as written). Alpha / beta of a sub-axis are those of its axis."""
    n = mesh.num_devices
    if n <= 1:
        return mesh
    base = _shape_cuts(mesh.shape)
    limit = max(MAX_REFINED_AXES, len(base) - 1)
    positions = np.empty(n, dtype=np.int64)
    positions[mesh.device_ids.ravel()] = np.arange(n)
    cuts, why, skipped, _ = _merge_sharding_cuts(module, n, base, positions, limit)
    by_reshape: set[str] = set()
    for c, instr in list(_reshape_cuts(module, cuts, n)):
        if c not in cuts and _is_chain(cuts | {c}) and len(cuts) <= limit:
            cuts.add(c)
            by_reshape.add(instr.name)
    notes = []
    if skipped:
        shown = ", ".join(sorted(set(skipped))[:5]) + (" ..." if len(set(skipped)) > 5 else "")
        notes.append(f"the shardings of {shown} map onto no refinement of the mesh {mesh}: priced as written")
    if cuts == base:
        mesh.notes.extend(notes)
        return mesh
    out = mesh.refine(sub_axis_sizes(mesh.shape, cuts))
    def listing(names):
        names = sorted(names)
        return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")

    parts = []
    users = {x for c in why for x in why[c]}
    if users:
        parts.append(f"the user shardings of {listing(users)} map onto whole axes (not resharded)")
    if by_reshape:
        parts.append(f"the reshapes {listing(by_reshape)} can carry a split onto sub-axes")
    out.notes = list(mesh.notes) + notes + [
        f"mesh {mesh} refined internally to {out} ({', '.join(out.axis_label(a) for a in range(out.ndim))}) "
        f"so that {' and '.join(parts)}"]
    return out
