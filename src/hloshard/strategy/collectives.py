"""Existing collectives: all-reduce, all-gather, reduce-scatter, all-to-all, collective-permute,
collective-broadcast, their variadic (tuple) forms, async ``*-start`` / ``*-done`` pairs and
``async-start`` wrapping a collective through ``calls=``; send / recv.

Every collective already in the module gets a **communication cost** from
:mod:`hloshard.cost.collectives` (alpha-beta, XLA auto-sharding formulas), charged **once**: on the
synchronous op, on ``*-start`` / ``async-start`` for async pairs (``*-done``, ``async-update`` and
``async-done`` cost nothing).  What is charged (:func:`existing_collective_cost`):

* **participants**: the replica groups mapped to mesh axes (:func:`group_axes`).  Groups equal to
  the device groups of a set of whole mesh axes (``DeviceMesh.axes_for_replica_groups``) cost over
  those axes (several axes: max alpha, max beta, n = product, the rule of the cost model).  Groups
  that match no whole axes (e.g. pairs along an axis of size 4, or an irregular set) cost with
  ``n`` = the group size and the alpha / beta of the most expensive mesh axis along which the members
  of a group differ (every axis they vary along is passed; the cost model takes max alpha, max beta).
  Empty groups (``replica_groups={}``) are all devices.  Groups of one device cost 0.
  Group mode (XLA's ``CollectiveOpGroupMode``): with a ``channel_id`` (cross-partition, or flattened
  global ids with ``use_global_device_ids=true``) the ids are partition ids, i.e. the mesh's devices.
  Without a ``channel_id`` the op is cross-replica: its groups are replica ids, which never span the
  partition mesh; with ``num_replicas`` <= 1 every group is one replica and the op costs 0 (it
  communicates nothing); with several replicas it is charged as if the ids were mesh devices (an
  approximation: replicas are not part of the mesh).  Ids outside the mesh: every non-trivial mesh
  axis with ``n`` = the group size (a conservative bound).
* **bytes per device**, per the cost functions' conventions: all-gather the gathered (result) bytes;
  reduce-scatter, all-reduce, all-to-all, collective-permute and collective-broadcast the operand
  bytes (ragged-all-to-all and the in-place collective-permute form: operand 0 only).  Inside a manual
  region (``{manual}``, shard_map / FSDP style) shapes are already per-device and are charged as
  written; outside, the per-device bytes of the layout the chosen strategy gives the operands /
  result (:class:`~hloshard.strategy.base.MeshInfo` ``bytes_per_device``; replicated = full bytes).
* **variadic** forms pay one latency plus beta over the summed bytes of all their elements (the
  byte counts are passed as a sequence), which is the saving ``hloshard combine`` reports.
* collective-permute: ``max`` over its source-target pairs (``collective_permute_cost``);
  collective-broadcast is charged as an all-gather of its bytes over its groups (a pipelined
  broadcast moves about the same (n-1)/n * B per device); a send with an
  ``_xla_send_recv_source_target_pairs`` frontend attribute is charged as a collective-permute of its
  data over those pairs (the matching recv and the ``*-done`` ops cost nothing); a send without it is
  not charged (its partner is not stated).

Strategies outside manual regions (consistent with XLA's SPMD partitioner, so the output compiles):

* a cross-replica all-reduce (no ``channel_id``) of one array and a collective-permute of one array
  are elementwise (:func:`partitioned_elementwise`): output and operand share the layout, bytes per
  device under that layout (a pinned operand is resharded to the result's layout on the edge);
* every other form (channel all-reduce, all-gather, reduce-scatter, all-to-all, variadic, async) is
  replicated: XLA partitions it by replicating its operands (its ``DefaultAction``), so the operands
  are required replicated and every result element is replicated, element by element for tuples
  (per-element shardings); an all-gather's result dim is thus never split over the axes it gathers
  over, and the cost is over the full bytes.  ``*-done`` / ``async-done`` pass the start's layout
  through (replicated) with no operand requirement.

Inside a manual region the instruction keeps its manual sharding (per element for tuples,
``custom_call.manual_group``) and :func:`charge_manual_collective` adds the cost.
"""

from __future__ import annotations

import math

from .base import Strategy, int_list, is_array, is_mesh_spec, leaf_shapes, replicated_spec
from .elementwise import follow_group, free_group
from .registry import _fixed_specs, _same, register, replicated_group
from ..cost import collectives as cc

#: collectives the cost model prices (HLO opcode of the synchronous form)
COSTED_KINDS = ("all-gather", "all-reduce", "reduce-scatter", "all-to-all", "ragged-all-to-all",
                "collective-permute", "collective-broadcast")
SHAPE_PRESERVING = ("all-reduce", "collective-permute", "collective-broadcast")
OTHERS = ("all-gather", "reduce-scatter", "all-to-all", "ragged-all-to-all", "all-reduce-start", "all-gather-start",
          "collective-permute-start", "async-start", "send", "recv")
DONE = ("all-reduce-done", "all-gather-done", "collective-permute-done", "async-done", "async-update", "send-done",
        "recv-done", "copy-start", "copy-done")


# ---------------------------------------------------------------------------------------------
# what a collective is and what it charges
# ---------------------------------------------------------------------------------------------


def charged_collective(instr):
    """``(kind, op)``: the collective kind ``instr`` is charged for and the instruction that describes it
    (replica groups, operands, result), or None when ``instr`` charges nothing.

    ``all-gather`` -> ``('all-gather', instr)``; ``all-gather-start`` -> ``('all-gather', instr)``;
    ``async-start`` whose ``calls=`` computation's root is a collective -> that kind and the root;
    ``send`` with source-target pairs -> ``('collective-permute', instr)``; ``*-done``,
    ``async-update``, ``async-done``, recv, a send without pairs and non-collectives -> None.
    """
    op = instr.opcode
    if op in COSTED_KINDS:
        return op, instr
    if op.endswith("-start") and op[:-len("-start")] in COSTED_KINDS:
        return op[:-len("-start")], instr
    if op == "send" and _pairs(instr):
        return "collective-permute", instr
    if op == "async-start":
        for comp in instr.called_computations:
            root = getattr(comp, "root", None)
            if root is None:
                continue
            inner = charged_collective(root)
            if inner is not None:
                return inner
    return None


def _is_cross_replica(op) -> bool:
    return op.channel_id is None and not bool(op.attrs.get("use_global_device_ids", False))


def _groups(op):
    try:
        return op.replica_groups
    except Exception:  # noqa: BLE001 - unreadable groups: treated as all devices
        return None


def group_axes(mesh, groups, memo: dict | None = None):
    """Map replica groups to ``(axes, group_size)`` for the cost functions, or None when the collective
    communicates nothing (every group one device).

    ``axes``: tuple of mesh axes; ``group_size``: None when the groups are exactly the device groups of
    ``axes`` (n = product of their sizes), else the number of devices per group (the largest group).
    See the module docstring for the rules. ``memo``: optional dict cache keyed by the groups. Raises
    nothing.
    """
    key = None if groups is None else tuple(tuple(int(d) for d in g) for g in groups)
    if memo is not None and key in memo:
        return memo[key]
    big = tuple(a for a in range(len(mesh.shape)) if int(mesh.shape[a]) > 1)
    res = None
    if not key:
        res = (big, None) if big else None
    else:
        size = max(len(g) for g in key)
        if size <= 1:
            res = None
        else:
            try:
                ax = mesh.axes_for_replica_groups([list(g) for g in key])
            except (ValueError, IndexError):
                ax = None
            if ax:
                res = (tuple(ax), None)
            elif ax is not None:      # () : singleton groups (size 1 checked above, kept for safety)
                res = None
            else:
                try:
                    varying = set()
                    for g in key:
                        coords = [mesh.coords(d) for d in g]
                        varying.update(a for a in range(len(mesh.shape)) if len({c[a] for c in coords}) > 1)
                    axes = tuple(sorted(varying))
                except (ValueError, IndexError, KeyError):
                    axes = big          # ids outside the mesh: every axis, n = group size
                res = (axes, size) if axes else None
    if memo is not None:
        memo[key] = res
    return res


def _array_bytes(shape, spec, minfo) -> int:
    if not is_array(shape):
        return 0
    if spec is None:
        return int(shape.byte_size)
    return int(minfo.bytes_per_device(shape, spec))


def _operand_leaf_bytes(op, minfo, specs=None) -> list[int]:
    """Per array leaf of ``op``'s operands the per-device bytes (``specs``: per operand the spec or a
    tuple of per-leaf specs; None: the shapes as written, i.e. manual / per-device already)."""
    operands = list(op.operands)
    if op.opcode in ("ragged-all-to-all",) or (op.opcode.startswith("collective-permute") and "slice_sizes" in op.attrs):
        operands = operands[:1]
    out = []
    for i, o in enumerate(operands):
        spec_i = None if specs is None or i >= len(specs) else specs[i]
        for k, leaf in enumerate(leaf_shapes(o.shape)):
            if not is_array(leaf):
                continue
            s = spec_i[k] if (isinstance(spec_i, tuple) and o.shape.is_tuple and k < len(spec_i)) else \
                (None if o.shape.is_tuple else spec_i)
            out.append(_array_bytes(leaf, s, minfo))
    return out


def collective_bytes_per_device(kind, op, minfo, in_specs=None, out_spec=None, group_size: int | None = None
                                ) -> list[int]:
    """Bytes per device charged for collective ``op`` of ``kind`` (a list: one entry per element of a
    variadic collective; the cost functions sum it and pay one alpha).

    all-gather: the gathered bytes (the result's leaves for the synchronous op; operand bytes times the
    group size for ``all-gather-start``, whose result tuple also holds the operands); every other kind:
    operand bytes.  ``in_specs`` / ``out_spec``: the layouts under the chosen strategy (None: shapes
    are per-device already, as in a manual region).
    """
    if kind == "all-gather":
        if op.opcode == "all-gather":
            leaves = leaf_shapes(op.shape)
            outs = list(out_spec) if (op.shape.is_tuple and isinstance(out_spec, tuple)) else [out_spec] * len(leaves)
            return [_array_bytes(s, o, minfo) for s, o in zip(leaves, outs) if is_array(s)]
        n = group_size or 1
        return [b * n for b in _operand_leaf_bytes(op, minfo, in_specs)]
    return _operand_leaf_bytes(op, minfo, in_specs)


def existing_collective_cost(instr, ctx, in_specs=None, out_spec=None) -> float:
    """Communication cost (cost units) of the collective ``instr`` already in the module; 0.0 for
    instructions that charge nothing (``*-done``, non-collectives).  ``in_specs`` / ``out_spec`` as in
    :func:`collective_bytes_per_device` (None inside manual regions).  Raises nothing: a collective the
    mesh cannot describe gets the conservative bound of the module docstring."""
    return existing_collective(instr, ctx, in_specs, out_spec)[0]


def existing_collective(instr, ctx, in_specs=None, out_spec=None) -> tuple:
    """``(cost, collectives)``: :func:`existing_collective_cost` and the same collective as a tuple of
    :class:`hloshard.cost.collectives.PredictedCollective` (one, or none when nothing is charged;
    a collective-broadcast is predicted as the all-gather it is priced as; variadic forms as one
    collective over the summed bytes)."""

    found = charged_collective(instr)
    if found is None:
        return 0.0, ()
    kind, op = found
    mesh = ctx.mesh
    if _is_cross_replica(op):
        nrep = None
        try:
            nrep = op.parent.parent.num_replicas
        except AttributeError:
            nrep = None
        if nrep is None or int(nrep) <= 1:
            return 0.0, ()
    if kind == "collective-permute":
        pairs = _pairs(op)
        if not pairs:
            return 0.0, ()
        nbytes = collective_bytes_per_device(kind, op, ctx.minfo, in_specs, out_spec)
        try:
            cost, col = cc.priced("collective-permute", mesh, nbytes, pairs=pairs)
            return cost, (col,)
        except (ValueError, KeyError):  # a device outside the mesh: the most expensive single hop over every axis
            axes = tuple(a for a in range(len(mesh.shape)) if int(mesh.shape[a]) > 1)
            if not axes:
                return 0.0, ()
            col = cc.PredictedCollective("collective-permute", axes, 1, int(cc.total_bytes(nbytes)),
                                         tuple((int(a), int(b)) for a, b in pairs if a != b))
            return max(float(mesh.alpha[a]) for a in axes) * len(axes) + \
                max(float(mesh.beta[a]) for a in axes) * len(axes) * cc.total_bytes(nbytes), (col,)
    memo = ctx.minfo.memo.setdefault("collective_group_axes", {})
    ga = group_axes(mesh, _groups(op), memo)
    if ga is None:
        return 0.0, ()
    axes, gsize = ga
    n = gsize if gsize is not None else math.prod(int(mesh.shape[a]) for a in axes)
    nbytes = collective_bytes_per_device(kind, op, ctx.minfo, in_specs, out_spec, group_size=n)
    if kind == "collective-broadcast":
        kind = "all-gather"
    if kind == "ragged-all-to-all":
        kind = "all-to-all"
    cost, col = cc.priced(kind, mesh, nbytes, axes, group_size=gsize)
    groups = op.replica_groups
    if groups:
        col = cc.PredictedCollective(col.kind, col.mesh_axes, int(n), col.nbytes,
                                     tuple(tuple(int(d) for d in g) for g in groups))
    return cost, (col,)


def _pairs(op) -> list[tuple[int, int]]:
    """(source, target) pairs of a collective-permute, or of a send from its
    ``_xla_send_recv_source_target_pairs`` frontend attribute ([] when absent)."""
    raw = op.attrs.get("source_target_pairs")
    if raw is None and op.opcode == "send":
        fa = op.attrs.get("frontend_attributes")
        if isinstance(fa, dict):
            raw = fa.get("_xla_send_recv_source_target_pairs")
        elif fa is not None:
            import re

            m = re.search(r'_xla_send_recv_source_target_pairs="([^"]*)"', str(fa))
            raw = m.group(1) if m else None

    flat = int_list(raw) or []
    return [(flat[i], flat[i + 1]) for i in range(0, len(flat) - 1, 2)]


def _manual_layout(spec):
    """A raw HloSharding spec of a manual-region value (``{manual}`` or partially manual), else None."""

    return None if spec is None or is_mesh_spec(spec) else spec


def charge_manual_collective(instr, group, ctx) -> None:
    """Inside a manual region: add the collective's cost to the one strategy of ``group`` (built by
    ``custom_call.manual_group``). No-op for other instructions.

    Bytes: the shapes as written for ``{manual}`` values (already per device); for a partially manual
    value (``last_tile_dims={manual}`` with tiled data dims) the tile of its sharding, so the split over
    the non-manual axes is not charged as if it were replicated."""
    found = charged_collective(instr)
    if found is None:
        return
    strategies = getattr(group, "strategies", ())
    in_specs = out_spec = None
    if found[1] is instr and len(strategies) == 1:
        specs = []
        for op in instr.operands:
            leaves = leaf_shapes(op.shape)
            try:
                per = [_manual_layout(ctx.leaf_specs(op, k)[0]) if len(ctx.leaf_specs(op, k)) == 1 else None
                       for k in range(len(leaves))]
            except (KeyError, IndexError):
                per = [None] * len(leaves)
            specs.append(tuple(per) if op.shape.is_tuple else per[0])
        in_specs = tuple(specs)
        out = strategies[0].out
        out_spec = tuple(_manual_layout(o) for o in out) if group.multi else _manual_layout(out)
    cost, cols = existing_collective(instr, ctx, in_specs=in_specs, out_spec=out_spec)
    for st in strategies:
        st.comm = cost
        st.collectives = cols


# ---------------------------------------------------------------------------------------------
# handlers (outside manual regions)
# ---------------------------------------------------------------------------------------------


def partitioned_elementwise(instr) -> bool:
    """XLA's partitioner treats ``instr`` like an elementwise op (the operand resharded to the result's
    layout, the collective run on the tiles): a cross-replica all-reduce of one array
    (``HandleAllReduce``: ``IsCrossReplicaAllReduce() && operand_count() == 1``) and a collective-permute
    of one array (measured, jaxlib 0.10.2: ``f32[64,32]`` tiled ``[2,4]`` permuted over pairs keeps the
    ``f32[32,8]`` tile and sends 1024 bytes; tests/test_handlers_collectives.py)."""
    if not is_array(instr.shape) or len(instr.operands) != 1:
        return False
    if instr.opcode == "all-reduce":
        return _is_cross_replica(instr)
    return instr.opcode == "collective-permute" and "slice_sizes" not in instr.attrs


@register(*SHAPE_PRESERVING)
def handle_shape_preserving(instr, ctx):
    """:func:`partitioned_elementwise` collectives keep the layout (every layout when the operand's is
    pinned, else the operand's layouts); everything else is replicated (:func:`handle_other`)."""

    if not partitioned_elementwise(instr):
        return handle_other(instr, ctx)
    r = ctx.resolve(instr.operands[0], 0)
    if not isinstance(r, tuple):
        return handle_other(instr, ctx)

    def priced(spec):
        if not is_mesh_spec(spec):
            spec = replicated_spec(len(instr.shape.dims))
        cost, cols = existing_collective(instr, ctx, in_specs=(spec,), out_spec=spec)
        return spec, cost, cols

    if len(r[0].strategies) <= 1:
        # the operand's layout is pinned: XLA reshards it to whatever layout the result is given
        g = free_group(instr, ctx, lambda spec: (spec,), flops_per_element=0.0)
        for st in g.strategies:
            _, st.comm, st.collectives = priced(st.out)
        return g

    cols_by_spec: dict = {}

    def transform(spec):
        spec, cost, cols_by_spec[spec] = priced(spec)
        return spec, (spec,), cost

    g = follow_group(instr, ctx, 0, transform, flops_per_element=1.0)
    for st in g.strategies:
        st.collectives = cols_by_spec.get(st.out, ())
    return g


@register(*OTHERS)
def handle_other(instr, ctx):
    """Replicated result (per element), operands required replicated; the collective over full bytes."""
    g = replicated_group(instr, ctx)
    st = g.strategies[0]
    if charged_collective(instr) is not None:
        in_specs = tuple(st.inputs)
        st.comm, st.collectives = existing_collective(instr, ctx, in_specs=in_specs, out_spec=st.out)
        # a collective's cost is its communication: no per-element compute, so a single-operand
        # collective and its variadic (tuple) form are charged alike
        st.compute = 0.0
    if instr in ctx.fixed:
        user = _user_strategy(instr, ctx, st)
        if user is not None:
            g.strategies.append(user)
    return g


def _user_strategy(instr, ctx, rep):
    """The strategy a kept user sharding selects: XLA computes the collective on replicated operands and
    keeps the user's layout of the result (a local slice), so the operands stay replicated and the cost
    is the replicated one (``rep.comm``); memory is the user layout's.  None when it equals ``rep``."""

    try:
        specs = _fixed_specs(instr, ctx)
    except Exception:  # noqa: BLE001 - a bad user sharding is reported by apply_fixed
        return None
    leaves = leaf_shapes(instr.shape)
    specs = [sp if sp is not None else (replicated_spec(len(s.dims)) if is_array(s) else None)
             for sp, s in zip(specs, leaves)]
    out = tuple(specs) if instr.shape.is_tuple else specs[0]
    same = all(_same(a, b) for a, b in zip(out, rep.out)) if instr.shape.is_tuple else _same(out, rep.out)
    if same:
        return None
    mem = sum(ctx.minfo.bytes_per_device(s, sp) for s, sp in zip(leaves, specs) if is_array(s) and sp is not None)
    return Strategy("user", out, rep.inputs, compute=rep.compute, comm=rep.comm, memory=mem,
                    collectives=rep.collectives)


@register(*DONE)
def handle_done(instr, ctx):
    """Pass-through of the start's (replicated) buffers; no operand requirement, no cost."""
    g = replicated_group(instr, ctx, require_replicated_inputs=False) if not instr.shape.is_tuple else \
        _done_tuple(instr, ctx)
    g.strategies[0].compute = 0.0
    return g


def _done_tuple(instr, ctx):
    g = replicated_group(instr, ctx)
    g.strategies[0].inputs = tuple(None for _ in instr.operands)
    return g
