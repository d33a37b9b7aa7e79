"""The communication buffers of a plan as node memory of the solver's problem (issue 25, item 1).

:func:`hloshard.autoshard.build.edge_buffers` prices, for one chosen plan, the buffers that are not a
node's value: the buffer on the other side of a chosen strategy's collectives, XLA's ``DotDecomposer``
relayout copies, XLA CPU's canonical copies of convolution operands (:mod:`hloshard.autoshard.conv_copies`:
the same sites and bytes the evaluation reads), and per resharded operand the operand in the consumer's
layout (with its relayout copy after an all-gather, and the producer XLA would have fused, made because
a collective now sits between it and its consumer; a convolution's operand made where the operand is).  The IOPDDL form has node memory only.  Each buffer here becomes a
**shadow node**: a node with no cost tied to one node of the problem by an alias (strategy ``a`` of the
node allows only strategy ``a`` of the shadow; the presolve merges it into the node exactly, as one
more memory term), live over the buffer's interval, whose usage per strategy is the buffer's bytes.

* A chosen strategy's collectives and the dot relayout copies depend on one node's strategy: their
  shadow is exact for every plan.
* A resharded operand depends on a strategy *pair* of its edge: the buffer exists only when the pair's
  resharding cost is non-zero.  Node memory cannot say that without a node per pair, and that was
  measured too large for the solver (the new user's block train step, mesh 2x4: up to 307 x 307
  strategies per edge, 6.3 million pair strategies for its 366 buffers; a smaller exact encoding, one
  strategy per source layout plus one per size, tied to both ends by aliases, left the solver 18 s
  to find its first plan, and none in 20 s after the next round).  So the pair is **linearised at a
  plan** (:func:`priced_problem`'s ``at``): the buffer is carried by the end whose bytes it is, with
  the other end's strategy held at the plan's -- the copy in the consumer's layout and its relayout
  copy on the consumer, ``bytes[j]`` where the plan's source strategy reshards into ``j``; the made
  producer's tile on the source, where ``i`` reshards into the plan's consumer strategy.  Exact for
  every plan that keeps the other end's strategy; a plan that changes it is priced again by the
  evaluation (:func:`hloshard.autoshard.evaluate.peak_memory`), which is what a budget is checked on.
  (Bounding the copy over every source strategy instead, exact for no plan, was measured worse: on the
  block above, deterministic, work budget 20, no priced plan was found; linearised, the second round's
  plan was 1.5 KB over the limit, from 461 KB over.)

:func:`edge_memory_terms` lists the buffers with their intervals (bytes computed when a term is
priced); :func:`terms_at` picks those live at given points; :func:`priced_problem` adds a set of them
to a problem, and lowers its limit by the entry tuple's pointer table (the same for every plan).  The
loop that uses them: :func:`hloshard.autoshard.solve.solve_module`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..costgraph import Problem
from ..cost.group_conv import batch_groups
from ..cost.liveness import (effective_users, in_place_user, is_fused, read_until, relayout_readers,
                             relayout_intervals, resharded_by_tuple)
from ..strategy.base import TOKEN
from .conv_copies import conv_copies, copy_bytes, copy_sites, made_at_source, source_of, transposed_output
from .build import (_leaf_shape, _relayout_bytes, _required, _resharded_operands, _tuple_table_bytes, copy_start, pin_key,
                    relayout_point,
                    scratch_bytes)
from .graph import Graph
from .reshard_cache import cache_layout


@dataclass
class Term:
    """One buffer outside the problem's nodes, live over the half-open schedule interval ``[lo, hi)``.

    ``nodes == (v,)``: ``usage()`` gives its bytes per device for each strategy of node ``v`` of
    ``graph.problem``.  ``nodes == (source, consumer)``, an operand's edge: ``usage(i, j)`` gives, with
    ``i`` (the source's strategy) or ``j`` (the consumer's) held and the other None, the bytes per
    strategy of the free end (0 where the pair does not reshard); ``carrier`` is the free end
    (0: the source, 1: the consumer)."""

    nodes: tuple
    lo: int
    hi: int
    usage: Callable = field(repr=False)
    carrier: int = 0
    #: a resharded operand's copy (carried by the consumer): ``(computation, value, leaf)`` ids, and the
    #: layout key the consumer's strategy ``j`` reads it in (``layout(j)``); None for the other terms.
    #: Copies of one ``share`` and layout are one buffer (:func:`shared_spans`)
    share: tuple | None = None
    layout: Callable | None = field(default=None, repr=False)
    #: a buffer that stands for another's after a point at some plans (a convolution operand's canonical copy,
    #: the source dead once its last other reader ran): ``cut(at)`` gives, at the plan ``at``, ``(a, b, own)``:
    #: over ``[a, b)`` the carrier's bytes are lowered by ``own`` (at least 0), or None (no credit at that plan)
    cut: Callable | None = field(default=None, repr=False)


class _Pick:
    """A choice that is only read at one node (``_relayout_bytes`` reads the source's strategy)."""

    def __init__(self, node: int, strategy: int):
        self.node, self.strategy = node, strategy

    def __getitem__(self, v):
        if int(v) != self.node:
            raise KeyError(v)
        return self.strategy


def edge_memory_terms(graph: Graph) -> list:
    """The buffers :func:`hloshard.autoshard.build.edge_buffers` adds to a plan's peak, as
    :class:`Term` s over every strategy (the same rules; module docstring).  Not included: the entry
    tuple's pointer table (the same for every plan, :func:`constant_bytes`) and the credits for a source
    tile a resharded fused consumer frees early and for a value only solve's pins read
    (:func:`hloshard.autoshard.build.pinned_only_credit`) (negative buffers: leaving them out over-states a
    plan's memory, never under-states it; a convolution copy's source credit is read at the plan instead,
    :func:`_conv_copy_terms`); nor are the evaluation's one copy of a gathered dot operand, the
    gathered buffer and its source dead at that copy, and the buffers it places in the outputs' free
    allocations (:func:`hloshard.cost.liveness.place_in_outputs`, round 26): each only lowers the
    evaluated peak, so the terms over-state it there too.  A copy solve writes as a pin starts where its operand is made
    (:func:`hloshard.autoshard.build.copy_start`), as the evaluation prices it.  Cheap: bytes are computed when a term is priced."""
    terms: list = []
    minfo = graph.ctx.minfo
    ids = {id(i): t for i, t in graph.positions.items()}

    def bytes_of(shape, req) -> int:
        if req is None:
            return 0
        try:
            return int(minfo.bytes_per_device(shape, req))
        except (ValueError, TypeError, AttributeError):
            return 0

    # the collectives of each strategy (and the halo concatenation of a halo exchange; on XLA CPU a grouped
    # convolution's dense expansion and a transposed convolution result's canonical copy: scratch_bytes), at the node
    device = getattr(graph, "memory_device", None)
    for v, g in enumerate(graph.nodes):
        t = graph.positions.get(g.instr)
        if t is None or not (any(st.collectives for st in g.strategies) or device is None and
                             (batch_groups(g.instr) > 1 or transposed_output(g.instr))):
            continue

        def collectives(g=g):
            return np.array([scratch_bytes(g, st, minfo, device) for st in g.strategies], dtype=np.int64)
        terms.append(Term((v,), t, t + 1, collectives))
    # XLA CPU's f32 copies of bf16 loop invariants (cost.liveness.widened_invariants), the leaf's tile
    for u, lo, hi, factor in getattr(graph, "widened", ()):
        def widened(g=graph.nodes[u], factor=factor):
            return np.array([factor * int(st.memory) for st in g.strategies], dtype=np.int64)
        terms.append(Term((u,), lo, hi, widened))
    # XLA's DotDecomposer relayout copies, sized by the first dot reading the operand
    for dot, k, lo, hi in relayout_intervals(graph.schedule, ids, gathers=device is None):
        r = graph.ctx.resolve(dot, 0) if dot in graph.ctx.groups else TOKEN
        if r is TOKEN:
            continue
        dg = r[0]

        def relayout(dg=dg, op=dot.operands[k]):
            return np.array([bytes_of(op.shape, _required(dg, st, op, 0)) for st in dg.strategies], dtype=np.int64)
        terms.append(Term((dg.node,), lo, hi, relayout))
    # XLA CPU's canonical-transpose copies of convolution operands (autoshard.conv_copies: the sites and the
    # bytes the evaluation reads), carried by the convolution with the operand's source held at the plan: none
    # where the plan reshards the operand (the resharded buffer stands for it), one per value and order
    terms.extend(_conv_copy_terms(graph, ids))
    # the resharded operands: present for the pairs whose resharding cost is non-zero
    for (u, v), m, contribs in zip(graph.problem.edges, graph.edge_float, graph.edge_info):
        u, v = int(u), int(v)
        for inst, leaf, g, _scale in contribs:
            t = graph.positions.get(g.instr)
            r = graph.ctx.resolve(inst, leaf)
            if t is None or r is TOKEN:
                continue
            sg, kk = r
            consumer = g.node
            source = v if consumer == u else u
            if sg.node != source:
                continue
            mat = (lambda m=m, c=consumer, v=v: np.asarray(m if c == v else m.T))   # source x consumer
            reqs = (lambda g=g, inst=inst, leaf=leaf: [_required(g, st, inst, leaf) for st in g.strategies])
            src_pos = graph.positions.get(inst)
            if src_pos is not None and (is_fused(inst) or
                                        resharded_by_tuple(g.instr, inst, graph.problem.intervals[sg.node])):
                # a collective between producer and consumer: XLA cannot fuse the producer, it is made (or
                # a root tuple's resharded leaf: the source's tile, taken over by the tuple, lives until then)
                def made(i, j, sg=sg, mat=mat, reqs=reqs):
                    if reqs()[j] is None:
                        return np.zeros(len(sg.strategies), dtype=np.int64)
                    tiles = np.array([int(s.memory) for s in sg.strategies], dtype=np.int64)
                    return np.where(mat()[:, j] > 0, tiles, 0)
                terms.append(Term((source, consumer), src_pos, t + 1, made, carrier=0))
            fused = is_fused(g.instr)
            end = t + 1
            if fused:   # read where the fused consumer's readers run
                last = read_until(g.instr, ids)
                end = max(end, (last if last is not None else t) + 1)
            if fused or not in_place_user(g.instr, inst):
                def copy(i, j, inst=inst, leaf=leaf, mat=mat, reqs=reqs):
                    shape = _leaf_shape(inst, leaf)
                    moved = mat()[i] > 0
                    return np.array([bytes_of(shape, q) if moved[n] else 0 for n, q in enumerate(reqs())],
                                    dtype=np.int64)
                shared = pin_key(graph, g, inst, leaf, None) is not None
                # a written pin, or a convolution's operand on XLA CPU: made as soon as its operand is
                lo = copy_start(graph, inst, t, shared or made_at_source(graph, g.instr))
                if shared:
                    share, layout = (id(g.instr.parent), id(inst), leaf), (lambda j, reqs=reqs: repr(reqs()[j]))
                else:   # users XLA's reshard cache serves from one collective (build.edge_buffers)
                    share = ("reshard-cache", id(g.instr.parent), sg.node, kk)
                    layout = (lambda j, reqs=reqs, g=g, inst=inst, leaf=leaf, own=len(terms):
                              cache_layout(minfo, g.instr, inst, leaf, reqs()[j]) or ("own", own))
                terms.append(Term((source, consumer), lo, end, copy, carrier=1, share=share, layout=layout))
            if relayout_readers(g.instr):   # a dot, convolution, while state or reduce (cost.liveness)
                # the relayout copy after an all-gather along a dimension that is not the most major
                def relayout_after(i, j, sg=sg, inst=inst, leaf=leaf, mat=mat, reqs=reqs):
                    moved = mat()[i] > 0
                    cache: dict = {}
                    use = np.zeros(len(moved), dtype=np.int64)
                    for n, q in enumerate(reqs()):
                        if moved[n] and q is not None:
                            key = repr(q)
                            if key not in cache:
                                cache[key] = _relayout_bytes(graph, inst, leaf, _Pick(sg.node, i), q)
                            use[n] = cache[key]
                    return use
                at = relayout_point(graph, g.instr, t)
                terms.append(Term((source, consumer), at, at + 1, relayout_after, carrier=1))
    return terms


def _conv_copy_terms(graph: Graph, ids: dict) -> list:
    """The canonical copies of :func:`hloshard.autoshard.conv_copies.conv_copies` as :class:`Term` s: one per
    convolution reading a copy site (:func:`~hloshard.autoshard.conv_copies.copy_sites`), live from where the
    copy is made to the convolution, carried by the convolution (``carrier`` 1) with the operand's source
    strategy held at the plan (module docstring): ``bytes[j]`` is
    :func:`~hloshard.autoshard.conv_copies.copy_bytes` under the convolution's strategy ``j``, 0 where the
    pair reshards the operand (the evaluation's ``moved``: the resharded buffer, priced with the edge's
    copy terms, stands for it).  Members of one site in one layout are one buffer (``share``, HloCSE), over
    the hull of their intervals (:func:`shared_spans`).  The source's buffer ending at its last reader that is
    no copy (the evaluation's credit, a negative buffer the IOPDDL form cannot hold) is carried as the copy's
    ``cut``: read at the plan from :func:`~hloshard.autoshard.conv_copies.conv_copies` itself, the copy
    carries over that window only what it holds beyond the source's tile (for a copy not grouped with
    others at the plan, :func:`priced_problem`; a group keeps its whole hull).  An operand with no
    edge to the convolution (one strategy, or resharded by no pair) is held by the convolution alone."""
    sites = copy_sites(graph, ids)
    if not sites:
        return []
    minfo = graph.ctx.minfo
    edge_of: dict = {}   # (id(consumer), id(operand)) -> (source node, consumer node, edge matrix)
    for (u, v), m, contribs in zip(graph.problem.edges, graph.edge_float, graph.edge_info):
        for inst, leaf, g, _scale in contribs:
            if leaf in (None, 0) and g.instr.opcode == "convolution":
                con = g.node
                edge_of[(id(g.instr), id(inst))] = (int(v) if con == int(u) else int(u), con, m, con == int(v))
    credits: dict = {}   # the evaluation's source credits at the last plan asked (one plan per pricing)

    def credit(at, src):
        key = tuple(int(x) for x in at)
        if credits.get("plan") != key:
            credits.clear()
            credits["plan"] = key
            for conv, k, a, b, size in conv_copies(graph, at, ids, _required, _resharded_operands(graph, at)):
                if size < 0:
                    credits[id(source_of(conv.operands[k]))] = (int(a), int(b), -int(size))
        return credits.get(id(src))
    out = []
    for src, order, lo, members in sites:
        share = ("conv-copy", id(src), order)
        for conv, k, cg, t in members:
            op = conv.operands[k]
            node = int(cg.node)
            hit = edge_of.get((id(conv), id(op)))
            source, mat = (node, None) if hit is None else (hit[0], hit[2] if hit[3] else hit[2].T)

            memo: dict = {}

            def reqs(cg=cg, op=op, memo=memo):
                if "reqs" not in memo:
                    memo["reqs"] = [repr(_required(cg, st, op, 0)) for st in cg.strategies]
                return memo["reqs"]

            def usage(i, j, cg=cg, conv=conv, k=k, mat=mat, memo=memo):
                if "bytes" not in memo:
                    memo["bytes"] = np.array([copy_bytes(minfo, conv, k, cg, st, _required)
                                              for st in cg.strategies], dtype=np.int64)
                b = memo["bytes"]
                if mat is not None and i is not None:
                    b = np.where(np.asarray(mat)[int(i)] > 0, 0, b)
                return b
            out.append(Term((source, node), t if lo is None else min(lo, t), t + 1, usage, carrier=1,
                            share=share, layout=lambda j, reqs=reqs: reqs()[j],
                            cut=lambda at, src=src: credit(at, src)))
    return out


def shared_spans(terms: list, at) -> tuple[dict, dict]:
    """The copies among ``terms`` that are one buffer at the plan ``at`` (one strategy per node of
    ``graph.problem``): copies of one value, in one computation, that the plan reshards into one layout
    for consumers that share one of solve's pins (:func:`hloshard.autoshard.build.pin_key`; what
    :func:`hloshard.autoshard.build.edge_buffers` prices).  Linearised at the plan like the copies
    themselves (module docstring): the group's first copy (by interval) carries the buffer over the hull
    of the group's intervals, and the others carry nothing for a strategy that reads the value in the
    group's layout.  Returns ``(spans, shared)``: term index -> ``(lo, hi)`` for each carrier, and term
    index -> the layout key it no longer carries for each other member; groups of one copy are in
    neither."""
    groups: dict = {}
    for k, term in enumerate(terms):
        if term.share is None:
            continue
        src, con = term.nodes
        j = int(at[con])
        if term.usage(int(at[src]), None)[j] <= 0:
            continue   # the plan does not reshard this operand
        groups.setdefault((term.share, term.layout(j)), []).append(k)
    spans: dict = {}
    shared: dict = {}
    for (_share, layout), ks in groups.items():
        if len(ks) < 2:
            continue
        first = min(ks, key=lambda k: (terms[k].lo, k))
        spans[first] = (min(terms[k].lo for k in ks), max(terms[k].hi for k in ks))
        for k in ks:
            if k != first:
                shared[k] = layout
    return spans, shared


def terms_at(terms: list, points, at=None) -> list:
    """Indices of the ``terms`` live at any of the schedule ``points``; with a plan ``at``, a shared
    copy's interval is its group's (:func:`shared_spans`) and a group is taken whole."""
    pts = np.unique(np.asarray(list(points), dtype=np.int64))
    if len(pts) == 0:
        return []
    spans, shared = shared_spans(terms, at) if at is not None else ({}, {})
    out = []
    for k, term in enumerate(terms):
        lo, hi = spans.get(k, (term.lo, term.hi))
        a = np.searchsorted(pts, lo)
        if a < len(pts) and pts[a] < hi:
            out.append(k)
    if spans:   # the other members of a taken group
        taken = {(terms[k].share, terms[k].layout(int(at[terms[k].nodes[1]]))) for k in out if k in spans}
        out = sorted(set(out) | {k for k, layout in shared.items() if (terms[k].share, layout) in taken})
    return out


def constant_bytes(graph: Graph) -> int:
    """Bytes every plan adds for the whole run outside the nodes: XLA's entry output tuple table."""
    root = graph.module.entry.root if graph.module.entry is not None else None
    return _tuple_table_bytes(root.shape) if root is not None else 0


def _pieces(term: Term, k: int, spans: dict, shared: dict, use, at) -> list:
    """``[(lo, hi, usage)]``: the shadow nodes of term ``k`` at the plan ``at`` (:func:`priced_problem`): its
    interval (its group's hull, :func:`shared_spans`) with ``use``, or, where its ``cut`` gives a window at
    that plan and it is no member of a group, the interval split at the window, ``use`` lowered by the
    window's bytes inside it (at least 0); pieces that hold nothing are left out."""
    lo, hi = spans.get(k, (term.lo, term.hi))
    window = term.cut(at) if term.cut is not None and k not in spans and k not in shared else None
    if window is None:
        return [(lo, hi, use)]
    a, b, own = max(lo, window[0]), min(hi, window[1]), window[2]
    if a >= b:
        return [(lo, hi, use)]
    out = [(lo, a, use), (a, b, np.maximum(use - int(own), 0)), (b, hi, use)]
    return [(x, y, u) for x, y, u in out if y > x and u.any()]


def priced_problem(graph: Graph, problem: Problem, terms: list, at) -> Problem:
    """``problem`` (the solver's problem of ``graph``: one node per class of ``graph.classes``) with each
    of ``terms`` added as a shadow node (module docstring: no cost, tied to its node by an alias, the
    term's usage and interval; an operand's buffer linearised at the plan ``at``, one strategy per node
    of ``graph.problem``) and the limit lowered by :func:`constant_bytes`.  The first
    ``problem.num_nodes`` strategies of a solution are a solution of ``problem`` with the same
    objective."""
    classes = graph.classes
    maps = getattr(classes, "maps", None) or {}
    counts = [len(c) for c in problem.node_costs]
    costs, usages, aliases = list(problem.node_costs), list(problem.node_usages), list(problem.aliases)
    extra_iv: list = []
    spans, shared = shared_spans(terms, at)
    for k, term in enumerate(terms):
        if len(term.nodes) == 1:
            node, use = term.nodes[0], term.usage()
        else:
            src, con = term.nodes
            node = term.nodes[term.carrier]
            use = term.usage(int(at[src]), None) if term.carrier == 1 else term.usage(None, int(at[con]))
            if k in shared:   # another copy of its group carries the shared buffer
                use = np.where([term.layout(j) == shared[k] for j in range(len(use))], 0, use)
        c = int(classes[node])
        pick = np.asarray(maps[node], dtype=np.int64) if node in maps else np.arange(counts[c])
        use = np.asarray(use, dtype=np.int64)[pick]   # per strategy of the solver's node
        if not use.any():
            continue
        for lo, hi, part in _pieces(term, k, spans, shared, use, at):
            costs.append(np.zeros(len(part), dtype=np.int64))
            usages.append(part)
            extra_iv.append((lo, hi))
            aliases.append((c, len(costs) - 1, np.eye(counts[c], dtype=bool)))
    limit = problem.usage_limit
    if limit is not None:
        limit = int(limit) - constant_bytes(graph)
    iv = np.concatenate([np.asarray(problem.intervals, dtype=np.int64).reshape(-1, 2),
                         np.asarray(extra_iv, dtype=np.int64).reshape(-1, 2)])
    return Problem(name=problem.name, intervals=iv, node_costs=costs, node_usages=usages,
                   edges=problem.edges, edge_costs=problem.edge_costs, usage_limit=limit,
                   cost_scale=problem.cost_scale, aliases=aliases)
