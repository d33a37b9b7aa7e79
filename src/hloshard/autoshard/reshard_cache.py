"""XLA's resharding cache, on a chosen plan: one value resharded to one layout is resharded once.

XLA's SPMD partitioner keeps, per partitioned value, the layouts it has already produced
(``PartitionedHlo::Reshard``'s ``reshard_cache``, all-gathers included: ``cache_all_gather``), so when
several users in one computation need the same value in the same other layout -- a dot's operand pin and
an elementwise user of the same activation, two identical multiplies jax traced twice, ``clamp(x, y, x)``
-- the collective is made once, for the first of them, and the others read its result.  A replicated
copy is shared by every handler, dots included: ``PartitionedHlo::Replicate()`` and ``Reshard(Replicate())``
both return any replicated entry of the cache (``cache_all_gather``), so an FSDP weight gathered for the
forward dot is not gathered again for the backward's input-gradient dot (new user 25b's GPT-2 FSDP plan on
16 devices: 152.12 MB predicted -> 125.58, XLA 98.18; ``tests/test_reuse_xla.py``).  The cost graph
prices one resharding per edge (its matrices are pairwise, so the solver cannot see this); this module
finds, for a chosen plan, the operand leaves whose resharding an earlier user's identical one serves, so
that :func:`hloshard.autoshard.evaluate.evaluate_choice` (the objective of ``hloshard cost`` and of the
written module ``solve`` reports) and :func:`hloshard.autoshard.evaluate.reshardings_of` (the predicted
collectives, :mod:`hloshard.xla_compare`) count it once.  Measured: new user 21's Falcon plan at 128 MiB
(an activation gathered for its dot's pin and for an add: 262,144 B; an all-to-all for two identical
multiplies: 196,608 B, predicted twice, made once by XLA), ``tests/test_strategy_xla_reshard_cache.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..cost.reshard import resharding_cost
from ..strategy.base import TOKEN, is_array, is_mesh_spec, leaf_shapes
from ..strategy.dot import dot_dims
from ..strategy.elementwise import ELEMENTWISE
from .apply import leaf_spec
from .graph import Graph, chosen_operand_leaves
from .resharder import _key


def resharded_as_planned(instr) -> bool:
    """True for a user whose operand XLA's partitioner reshards to exactly the layout the plan requires
    of it (``operand.Reshard(required)``), so that two such users share XLA's cached resharding: an
    elementwise op (``HandleElementwise``: to its own layout) and a ``Sharding`` custom-call (solve's
    operand pins, ``with_sharding_constraint``).  Other handlers reshard to layouts of their own (e.g. a
    ``dynamic-update-slice`` to its operand's layout partly replicated), which the plan's requirement
    need not equal: their reshardings are not taken as shared."""
    if instr.opcode == "custom-call":
        return instr.custom_call_target == "Sharding"
    return instr.opcode in _ELEMENTWISE


_ELEMENTWISE = frozenset(ELEMENTWISE)


def cache_layout(minfo, user, inst, leaf, req):
    """The layout key under which XLA's partitioner looks up, in the cache of leaf ``leaf`` of ``inst``,
    the resharding its user ``user`` needs to ``req`` (a spec): ``_key(req)`` when the user reshards
    through the cache (:func:`resharded_as_planned`, or any user that needs the value whole,
    :func:`_replicates`), else None (its resharding is its own).  The one rule behind
    :func:`cached_reshards` (bytes), :func:`shared_reshards` (the evaluated memory) and the solver's
    priced memory (:func:`hloshard.autoshard.edgememory.edge_memory_terms`)."""
    if req is None:
        return None
    if resharded_as_planned(user) or _replicates(minfo, inst, leaf, req):
        return _key(req)
    return None


def dot_top_level_layout(graph: Graph, g, v, i, src, req, choice):
    """The layout (an axis spec) to which XLA's dot handler reshards operand ``i`` of dot node ``v`` (from
    ``src`` toward ``req``, axis specs) at the top level, through the value's own reshard cache -- shared
    with every other top-level user of the value in that layout (an elementwise user, another such dot) --
    or None (no top-level resharding this rule knows).  When it is not ``req`` itself, the rest (from it to
    ``req``) is made inside the dot's device groups, unshared.

    The rule (openxla ``spmd/dot_handler.cc``, read): ``PartitionDotGroupOnNonContractingDims`` may group on
    an operand's non-contracting dims when their partition count equals the result's on the same dims
    (``may_group_on_{lhs,rhs}_non_contracting``); with both possible, it matches the lhs when
    ``lhs_parts * bytes(rhs tile) < rhs_parts * bytes(lhs tile)`` (per-device tile bytes;
    ``LhsIsBestMatchForNonContractingPartitioning``).  The *other* operand is resharded, at the top level, to its layout with the group's
    devices replicated; everything resharded after that is inside the device groups
    (``CreatePerGroupPartitioningState``: ``reshard_cache->groupd_caches[<device groups>]``, a cache of its
    own per grouping), which this rule does not share.  Kept narrow: no split batch dim (batch grouping
    comes first), axis specs only, the matched operand's non-contracting dims split over the same mesh axes as
    the result's (XLA's first pass requires matching device groups), and the other operand's resharding
    removes the group's axes and then, in the groups, at most gathers further.  Measured:
    tests/test_reshard_cache_groups.py (a dot's other-operand gather shared with an elementwise user; the
    same gather inside a dot's data groups not shared), new user 28's F4 (Mixtral's expert and router dots
    reading ``reshape.134`` / ``.143``)."""
    instr = g.instr
    if instr.opcode != "dot" or i > 1 or len(instr.operands) < 2:
        return None
    out = g.strategies[int(choice[v])].out
    lhs, rhs = instr.operands[0], instr.operands[1]
    if not (is_array(lhs.shape) and is_array(rhs.shape)):
        return None
    specs = (leaf_spec(graph, lhs, 0, choice), leaf_spec(graph, rhs, 0, choice))
    if not all(is_mesh_spec(s) for s in (out, src, req) + specs):
        return None
    minfo = graph.ctx.minfo
    lb, _rb, _lc, _rc, lf, rf = dot_dims(instr)
    if any(out[d] for d in range(len(lb))):
        return None
    out_free = ([len(lb) + k for k in range(len(lf))], [len(lb) + len(lf) + k for k in range(len(rf))])
    free = (lf, rf)

    def parts(spec, dims):
        n = 1
        for d in dims:
            n *= minfo.split(spec[d])
        return n

    may = [parts(specs[k], free[k]) == parts(out, out_free[k]) > 1 for k in (0, 1)]
    if not any(may):
        return None
    tile = [minfo.bytes_per_device(op.shape, s) for op, s in zip((lhs, rhs), specs)]
    lhs_matching = may[0] and (not may[1] or parts(specs[0], lf) * tile[1] < parts(specs[1], rf) * tile[0])
    m = 0 if lhs_matching else 1
    if i != 1 - m:
        return None
    if any(tuple(specs[m][d]) != tuple(out[o]) for d, o in zip(free[m], out_free[m])):
        return None
    group = {a for d in free[m] for a in specs[m][d]}
    top = tuple(tuple(a for a in ax if a not in group) for ax in src)
    if top == tuple(tuple(ax) for ax in src):
        return None
    # the rest, inside the groups, only replicates further (gathers): XLA's in-group resharding of the
    # measured cases; anything else is left to the plan as a whole
    if any(not set(r) <= set(t) for r, t in zip(req, top)):
        return None
    return top


def _replicates(minfo, inst, leaf, req) -> bool:
    """True when ``req`` (a plan's requirement of leaf ``leaf`` of ``inst``) is the fully replicated
    layout: whatever the user's handler (a dot, a gather, the default handler), XLA's partitioner makes a
    replicated operand with ``PartitionedHlo::Replicate()`` or ``Reshard(Replicate())``, and both first
    look in the value's reshard cache for any replicated entry (``cache_all_gather``, on by default): a
    value all-gathered once is all-gathered once for every user that needs it whole (FSDP's weight, read
    by the forward dot and by the backward's input-gradient dot)."""
    shape = leaf_shapes(inst.shape)[leaf]
    if not is_array(shape):
        return False
    try:
        return bool(minfo.to_sharding(req, len(shape.dims)).is_replicated)
    except (ValueError, TypeError, AttributeError):
        return False


@dataclass(frozen=True)
class CachedReshard:
    """One operand leaf whose resharding XLA takes from its cache: the ``index``-th operand (leaf
    ``leaf``, produced by ``operand``) of node ``node``'s instruction, carried by edge ``edge`` of the
    graph, resharded exactly as for ``served_by`` (the earlier user, in instruction order, that pays it);
    ``saved``: what the cost graph charges for it under the plan (cost units, executions included)."""

    node: int
    index: int
    operand: object
    leaf: int
    edge: int
    served_by: str
    saved: float
    #: None: the whole resharding is served; else the layout (a spec) the cache serves it in, from which
    #: the user still reshards to its requirement (a dot's other operand: :func:`dot_top_level_layout`)
    rest: object = None


def cached_reshards(graph: Graph, choice) -> list[CachedReshard]:
    """The reshardings of ``choice`` (one strategy index per node of ``graph``) that XLA's partitioner
    reuses instead of making again: every operand leaf of :func:`_cache_users` (a user
    :func:`resharded_as_planned`, or any user that needs the value whole) whose (computation of the user,
    producing node and leaf, source layout, required layout) equals that of an earlier one in its
    computation's instruction order (the same instruction reading one value twice included).  Reshardings that move nothing (equal layouts, or
    manual ones) are not listed.  ``saved``: the plan's cost of that resharding
    (:func:`hloshard.cost.reshard.resharding_cost`) times the user's executions and operand weight;
    unplannable pairs are left out."""
    ctx, minfo = graph.ctx, graph.ctx.minfo
    edge_of: dict = {}
    for e, contribs in enumerate(graph.edge_info):
        for inst, leaf, g, _w in contribs:
            edge_of.setdefault((id(inst), leaf, id(g)), e)
    first: dict = {}
    out: list[CachedReshard] = []
    for v, g, i, inst, leaf, req, weight, src, key, via in _cache_users(graph, choice):
        payer = first.get(key)
        if payer is None:
            first[key] = g.instr.name
            continue
        e = edge_of.get((id(inst), leaf, id(g)))
        shape = leaf_shapes(inst.shape)[leaf]   # as the edges price it (build.in_edges)
        if e is None or not is_array(shape):
            continue
        rank = len(shape.dims)
        partial = _key(via) != _key(req)
        try:
            cost = float(resharding_cost(shape, minfo.to_sharding(src, rank), minfo.to_sharding(req, rank),
                                         graph.mesh))
            if partial:   # the cache serves the top-level part; the rest is made in the dot's groups
                cost -= float(resharding_cost(shape, minfo.to_sharding(via, rank), minfo.to_sharding(req, rank),
                                              graph.mesh))
        except Exception:  # noqa: BLE001 - not plannable: the graph priced it otherwise, keep it
            continue
        if cost <= 0.0:
            continue
        out.append(CachedReshard(v, i, inst, leaf, e, payer, cost * ctx.weight(g.instr) * weight,
                                 via if partial else None))
    return out


def _cache_users(graph: Graph, choice):
    """Yield ``(v, group, i, instr, leaf, required, weight, source spec, key, via)`` for every operand leaf of
    ``choice`` that XLA's partitioner reshards through the value's cache, in the order it visits the users
    (each computation's instruction order: a topological order, jax's, so that the collective is
    attributed to the instruction XLA tags it with): a user :func:`resharded_as_planned`, or any user that
    needs the value whole (:func:`_replicates`), whose layout differs from the value's (manual ones left
    out).  ``key``: (computation of the user, producing node and leaf, source layout, required layout);
    users with one key share one resharded value.  ``via``: the layout the user reads from the cache --
    ``required`` itself, or for a dot's other operand the top-level layout of :func:`dot_top_level_layout`
    (the rest is made inside the dot's device groups)."""
    ctx, minfo = graph.ctx, graph.ctx.minfo
    text = {id(i): k for comp in graph.computations for k, i in enumerate(comp.instructions)}
    order = sorted(range(len(graph.nodes)), key=lambda v: (text.get(id(graph.nodes[v].instr), -1), v))
    for v, g, i, inst, leaf, req, weight in chosen_operand_leaves(graph, choice, order):
        layout = cache_layout(minfo, g.instr, inst, leaf, req)
        if layout is None and (req is None or g.instr.opcode != "dot"):
            continue
        if inst not in ctx.groups:
            # an operand the graph was not built with: the module has since been written (its pins,
            # solve.apply_solution's fallback prices earlier plans' memory on it); nothing cached
            continue
        r = ctx.resolve(inst, leaf)
        if r is TOKEN or r[0] is g:
            continue
        src = leaf_spec(graph, inst, leaf, choice)
        if src is None or _key(src) == _key(req):
            continue
        via = req
        top = dot_top_level_layout(graph, g, v, i, src, req, choice) if g.instr.opcode == "dot" else None
        if top is not None:   # a dot's other operand: its top-level layout first (a replicated one too)
            via, layout = top, _key(top)
        elif layout is None:
            continue
        if (not is_mesh_spec(src) and getattr(src, "is_manual", False)) or \
                (not is_mesh_spec(req) and getattr(req, "is_manual", False)):
            continue
        yield v, g, i, inst, leaf, req, weight, src, (id(g.instr.parent), id(r[0]), r[1], _key(src), layout), via


def shared_reshards(graph: Graph, choice) -> dict:
    """``{(node, id(operand instruction), leaf): key}`` for the operand leaves of ``choice`` whose
    resharded value XLA's cache shares with another user (the payer of :func:`cached_reshards` and the
    users it serves; one key per shared value): the memory model prices one buffer per key, made at its
    first user and live until its last (:func:`hloshard.autoshard.build.edge_buffers`,
    :func:`hloshard.cost.liveness.one_buffer_per_reshard`), as XLA's buffer assignment keeps the one
    collective's result for all its readers."""
    users: dict = {}
    minfo = graph.ctx.minfo
    for v, g, _i, inst, leaf, req, _w, _src, key, via in _cache_users(graph, choice):
        # a dot's other operand (:func:`dot_top_level_layout`) shares the collective, not the priced buffer:
        # measured on new user 28's F4 (Mixtral's hand plan), one buffer from the forward expert dot to the
        # backward's moved the predicted peak away from XLA's (ratio 1.026 -> 1.040), so it keeps its own
        if _key(via) == _key(req) and cache_layout(minfo, g.instr, inst, leaf, req) is not None:
            users.setdefault(key, []).append((v, id(inst), leaf))
    return {u: ("reshard-cache",) + key for key, lst in users.items() if len(lst) > 1 for u in lst}
