"""Local re-building and re-pricing of a few instructions on top of the cost graph ``hloshard cost``
built for a module (``explain``'s alternatives, ``solve``'s post-solve local moves).

``hloshard cost`` of a module is the deterministic solve of its cost graph with every annotation kept
(:func:`hloshard.autoshard.evaluate_module`).  When only a few instructions change sharding, only the
strategy groups of those instructions and of their users change (a user fixed by its annotation keeps
the strategies XLA's partitioner realizes from its operands' layouts, ``strategy.registry._realized``,
so it must be re-built too); every other group, node cost and edge is the same.  :class:`Site` re-builds
exactly those groups with the registry (``strategy.registry.build_group``, through one
:class:`~hloshard.strategy.sharing.GroupSharing` per :class:`Pricing`) in a copy of the build
context whose other groups are the as-given ones, and prices them:

* node costs: ``(compute + communication) * executions`` of each re-built group's strategies,
* edges: the resharding matrices into each re-built group from all its operands, and from re-built
  groups into the groups that read them without being re-built (tuples, loop states), as
  :func:`hloshard.autoshard.build_graph` forms them (``_Resharder`` matrices, follower edges diagonal),
* alias constraints (``input_output_alias``, ``shard_as``) of the re-built nodes: the same sharding on
  both sides,

with every group that is not re-built at the as-given choice.  :meth:`Site.solve` minimises the sum over
the re-built groups (exhaustively when small, else the same CP-SAT solver on a small problem) and
returns it with the as-given value of the same terms (:meth:`Site.given_terms`), so that
``new - given`` is the change of the module's total cost.

Exactness: equal to ``hloshard cost`` of the module written with the new shardings when the
instructions next to the re-built ones are annotated (XLA's propagation, a solved module): then the
cost graph separates.  Where an unannotated instruction next to them could also change its strategy,
``cost`` may find a lower total (this is an upper bound).  Costs in cost units (float, no integer
rounding), memory in bytes per device.

One local re-solve for ``explain`` (:mod:`hloshard.explain_instruction`'s alternatives; its checks against
``solve``'s space stay in :mod:`hloshard.explain_local`) and for ``solve``'s post-solve pass
(:func:`improve_written`, ``solve --local-moves``), which writes the moves that lower the module's
total: the GNN of new user 17 (finding 12), where explain's kept re-solve of ``scatter-add.45`` found
-98,368.10 outside solve's space (``add.104`` is built as a follower of ``add.100`` there).
"""

from __future__ import annotations

import re
from collections import deque

import numpy as np

from ..costgraph import INFINITY, Problem
from ..cost.reshard import autosharding_resharding_cost
from ..solver import solve_problem
from ..strategy.base import LeafRef, StrategyGroup, TOKEN, is_array, is_mesh_spec, leaf_shapes
from ..strategy.registry import BuildContext, _same
from ..strategy.sharing import GroupSharing
from .build import in_edges, processed_computations
from .evaluate import evaluate_module
from .resharder import _Resharder, _key

#: most entries of one table the exact elimination (:func:`eliminate`) forms before the small CP-SAT model
#: is used instead (a memory bound: 2**20 float64 entries are 8 MiB; not tuned on any module)
ENUMERATE_LIMIT = 1 << 20
#: most instructions one exact re-pricing re-builds (the changed ones, their users, and so on)
MAX_CASCADE = 400
#: distinct resharding pairs the neighbourhood re-solve plans exactly; beyond, XLA auto-sharding's
#: estimate ranks the moves (each planned pair costs about 0.4 ms; priced figures are always planned)
PLAN_BUDGET = 1000
#: wall seconds a local CP-SAT solve may take
SOLVE_SECONDS = 5.0

_CONTROL = ("while", "call", "conditional")


class Pricing:
    """Shared state for the re-pricings of one module: the as-given graph ``graph`` and choice
    ``choice`` (of :func:`hloshard.autoshard.evaluate_module`), a resharding-matrix cache, and the map
    from each node's group to the groups that read it (found once, structurally)."""

    def __init__(self, graph, choice, resharders=None):
        self.graph = graph
        self.choice = [int(c) for c in choice]
        # ``resharders``: the (exact, ranking) pair of an earlier Pricing of the same module and mesh, whose
        # caches are keyed by value (shapes and specs), not by groups: a later round re-uses their matrices
        self.resh, self.estimate = resharders if resharders is not None else \
            (_Resharder(graph.ctx), _budget_resharder(graph.ctx, PLAN_BUDGET))
        self.estimate.planned = 0   # each round plans up to PLAN_BUDGET new pairs, as a fresh one would
        #: re-built groups by :meth:`build_key` (re-used by later sites: a group is never changed after)
        self.built: dict = {}
        #: the strategy lists of structurally equal re-built instructions shared across sites (:meth:`build`)
        self._sharing = None
        self._edges: dict = {}
        self._readers = None
        self._alias_of = None

    # --- structure ---------------------------------------------------------------------------
    def plain(self, instr) -> bool:
        """An array instruction with one cost-graph node of its own (no tuple, loop state, manual
        region or control flow): the instructions :class:`Site` can re-build."""

        g = self.graph.ctx.groups.get(instr)
        return (isinstance(g, StrategyGroup) and g.operands is None and not g.multi and g.node >= 0
                and id(g) not in self.graph.ctx.manual_nodes and is_array(instr.shape)
                and instr.opcode not in _CONTROL)

    def readers(self, group) -> list:
        """The as-given groups with an operand leaf owned by ``group`` (users, and through tuple /
        get-tuple-element / loop aliases the groups further on)."""
        if self._readers is None:
            ctx = self.graph.ctx
            out: dict = {}
            for d in self.graph.nodes:
                seen = set()
                for inst, leaf in _operand_leaf_refs(d):
                    try:
                        r = ctx.resolve(inst, leaf)
                    except (KeyError, IndexError):
                        continue
                    if r is TOKEN or r[0] is d or id(r[0]) in seen:
                        continue
                    seen.add(id(r[0]))
                    out.setdefault(id(r[0]), []).append(d)
            self._readers = out
        return self._readers.get(id(group), [])

    def build_key(self, instr, ctx) -> tuple:
        """What a re-built group of ``instr`` depends on: its kept sharding and, per operand leaf, the
        outputs of the strategies of the group that owns it (handlers read nothing else of them; the
        followee tie-break ``seq`` is the as-given one)."""

        ops = []
        for op in instr.operands:
            for leaf in range(len(leaf_shapes(op.shape))):
                r = ctx.resolve(op, leaf) if op in ctx.groups else TOKEN
                if r is TOKEN:
                    ops.append(None)
                    continue
                grp, k = r
                ops.append(tuple(_key(st.out if k is None else st.out[k]) for st in grp.strategies))
        sh = ctx.fixed.get(instr)
        return (id(instr), None if sh is None else str(sh), tuple(ops))

    def build(self, instr, ctx):
        """The group of ``instr`` re-built in ``ctx`` (a site's context, :meth:`context`; recorded in its
        ``groups``), through one :class:`hloshard.strategy.sharing.GroupSharing` for all the sites of this
        pricing: an instruction whose structural signature (opcode, shape, attributes, kept sharding, its
        operands' strategy lists by identity...) is that of one re-built before, in any site, gets that
        group's strategy list instead of a build (the same strategies: ``tests/test_strategy_sharing.py``),
        so the repeated layers of a model are built once and their edges found by identity
        (:meth:`hloshard.autoshard.resharder._Resharder.matrix`).  A signature never holds a site's
        context, only what the handlers read, so one sharing serves every site of this pricing (one round of
        :func:`improve_written`: the lists it keys by ``id`` stay alive with the pricing's graph and groups)."""
        sharing = self._sharing
        if sharing is None:
            sharing = self._sharing = GroupSharing(ctx)
        sharing.ctx = ctx
        return sharing.build(instr)

    def edges(self, group, ctx, resh) -> list:
        """:func:`edges_into` ``group``, memoised on the group and the groups its operand leaves resolve
        to (groups are never changed once built)."""

        srcs = []
        for inst, leaf in _operand_leaf_refs(group):
            r = ctx.resolve(inst, leaf) if inst in ctx.groups else TOKEN
            srcs.append(None if r is TOKEN else id(r[0]))
        key = (id(group), tuple(srcs), id(resh))
        hit = self._edges.get(key)
        if hit is None:
            hit = self._edges[key] = edges_into(group, ctx, resh)
        return hit

    def aliases_of(self, node: int) -> list:
        """``(other node, allowed matrix, node is first)`` of every alias constraint on ``node``."""
        if self._alias_of is None:
            out: dict = {}
            for u, v, allowed in self.graph.problem.aliases:
                out.setdefault(int(u), []).append((int(v), allowed, True))
                out.setdefault(int(v), []).append((int(u), allowed, False))
            self._alias_of = out
        return self._alias_of.get(node, [])

    def context(self, fixed: dict):
        """A build context with the as-given groups and ``fixed`` as the kept user shardings."""

        g = self.graph.ctx
        ctx = BuildContext(self.graph.mesh, fixed)
        ctx.minfo = g.minfo
        ctx.groups = dict(g.groups)
        ctx.weights = g.weights
        ctx.manual_nodes = g.manual_nodes
        ctx.manual_comps = g.manual_comps
        ctx.exhaustive = g.exhaustive
        ctx.seq = g.seq
        ctx.visit = lambda comp, weight: None
        return ctx

    def site(self, instrs, shardings: dict | None = None, free=(), cascade: bool = False,
             estimate: bool = False) -> "Site | None":
        """A :class:`Site` re-building ``instrs`` (plain instructions; put in schedule order) with the
        as-given annotations, except ``shardings`` (instruction -> HloSharding, written) and ``free``
        (instructions built without their annotation); ``cascade``: see :meth:`Site.build`;
        ``estimate``: edges from the planning-budget cache (:func:`_budget_resharder`; for ranking
        only).  None when a re-built group is not a plain node."""
        fixed = dict(self.graph.ctx.fixed)
        for instr in free:
            fixed.pop(instr, None)
        fixed.update(shardings or {})
        order = sorted(set(instrs), key=lambda i: self.graph.positions[i])
        return Site.build(self, order, fixed, cascade=cascade, resh=self.estimate if estimate else self.resh)

    def given_terms(self, instrs) -> dict:
        """The as-given value of the terms a :class:`Site` over ``instrs`` re-prices: the node costs of
        their nodes and every edge touching them, at the as-given choice (cost units, by kind)."""
        g, c = self.graph, self.choice
        nodes = {self.graph.ctx.groups[i].node for i in instrs}
        out = {"compute": 0.0, "communication": 0.0, "resharding": 0.0}
        for v in nodes:
            grp = g.nodes[v]
            st = grp.strategies[c[v]]
            w = g.ctx.weight(grp.instr)
            out["compute"] += st.compute * w
            out["communication"] += st.comm * w
        for e, (u, v) in enumerate(g.problem.edges):
            u, v = int(u), int(v)
            if u in nodes or v in nodes:
                out["resharding"] += float(g.edge_float[e][c[u], c[v]])
        return out


def _budget_resharder(ctx, budget: int):
    """A resharding-matrix cache (``autoshard.resharder._Resharder``) that plans the first ``budget``
    distinct (shape, source, target) pairs it meets with the planner and prices the rest with XLA
    auto-sharding's own estimate (:func:`hloshard.cost.reshard.autosharding_resharding_cost`, about 6x
    cheaper; the planner where the estimate cannot price a pair).  For the neighbourhood re-solve, which
    only ranks moves: every figure explain reports is priced with the planner."""

    class _Budget(_Resharder):
        planned = 0

        def cost(self, shape, src, dst) -> float:
            if dst is None or src is None or (is_mesh_spec(src) and is_mesh_spec(dst) and src == dst):
                return 0.0
            key = (shape.element_type, tuple(shape.dims), _key(src), _key(dst))   # _Resharder's own key
            if key in self.cache or self.planned < budget or not (is_mesh_spec(src) and is_mesh_spec(dst)):
                if key not in self.cache:
                    self.planned += 1
                return _Resharder.cost(self, shape, src, dst)
            ekey = ("estimate",) + key
            hit = self.cache.get(ekey)
            if hit is None:
                minfo = self.ctx.minfo
                try:
                    hit = float(autosharding_resharding_cost(shape, minfo.to_sharding(src, len(shape.dims)),
                                                             minfo.to_sharding(dst, len(shape.dims)), self.ctx.mesh))
                except Exception:  # noqa: BLE001 - the estimate cannot price it: plan it
                    hit = _Resharder.cost(self, shape, src, dst)
                self.cache[ekey] = hit
            return hit

    return _Budget(ctx)


def _separable(m):
    """``(row, column)`` with ``m[a, b] == row[a] + column[b]``, or None: a matrix with one row or
    column, or whose rows (columns) are all equal (an annotated source or target: every strategy has the
    same output)."""
    if m.shape[0] == 1:
        return np.zeros(1), m[0, :]
    if m.shape[1] == 1:
        return m[:, 0], np.zeros(1)
    if (m == m[0:1, :]).all():
        return np.zeros(m.shape[0]), m[0, :]
    if (m == m[:, 0:1]).all():
        return m[:, 0], np.zeros(m.shape[1])
    return None


def _operand_leaf_refs(group) -> list:
    """(instruction, leaf) of every operand leaf of ``group``."""

    out = []
    for opref in group.ops():
        if isinstance(opref, LeafRef):
            out.append((opref.instr, opref.leaf))
        elif opref.shape.is_tuple:
            out.extend((opref, leaf) for leaf in range(len(leaf_shapes(opref.shape))))
        else:
            out.append((opref, 0))
    return out


def edges_into(group, ctx, resh) -> list:
    """``(source group, matrix)`` of the edges into ``group``: per operand leaf the resharding cost
    (cost units, times the executions and the operand's edge weight) from each source strategy's
    output to what each of ``group``'s strategies requires; diagonal for a follower.  The edges of
    :func:`hloshard.autoshard.build_graph`, for one group (before parallel edges are summed)."""

    return [(src, m) for _inst, _leaf, src, _follow, m, _scale in in_edges(group, ctx, resh)]


#: :func:`eliminate`'s answer when a table would pass its limit
TOO_LARGE = object()


def eliminate(unary: list, pairs: dict, limit: int):
    """The exact minimum of ``sum_k unary[k][x_k] + sum_(j,k) pairs[(j, k)][x_j, x_k]`` by variable
    (bucket) elimination (Dechter, "Bucket elimination", Artificial Intelligence 113, 1999): variables are
    eliminated one at a time, the fewest table entries first (ties: the lowest index), each bucket's
    factors summed over its variables by broadcasting and minimised over the eliminated one, the argmin
    kept for the back substitution.  ``unary``: float arrays (cost units, inf forbidden); ``pairs``:
    ``(j, k) -> (len(unary[j]), len(unary[k]))`` arrays, j < k.  Returns one index per variable (the first
    minimiser of each bucket: deterministic), None when every assignment is infinite, or
    :data:`TOO_LARGE` when a bucket's table would hold more than ``limit`` entries (then nothing was
    decided).  Exact on any graph; its tables grow with the graph's induced width, so the limit bounds
    memory and time (a neighbourhood of a few dozen nodes is mostly a tree: tables of two variables)."""
    n = len(unary)
    sizes = [len(u) for u in unary]
    factors = [((k,), np.asarray(unary[k], dtype=np.float64)) for k in range(n)]
    factors += [((j, k), np.asarray(m, dtype=np.float64)) for (j, k), m in pairs.items()]
    alive = set(range(n))
    steps = []
    while alive:
        nbrs = {}
        for k in alive:
            nbrs[k] = set()
        for scope, _ in factors:
            for v in scope:
                nbrs[v].update(scope)
        best, best_size = None, None
        for k in sorted(alive):
            size = int(np.prod([sizes[v] for v in nbrs[k]], dtype=np.float64))
            if best_size is None or size < best_size:
                best, best_size = k, size
        if best_size > limit:
            return TOO_LARGE
        x = best
        scope = tuple(sorted(nbrs[x]))
        axis = {v: a for a, v in enumerate(scope)}
        table = np.zeros([sizes[v] for v in scope])
        rest = []
        for fscope, f in factors:
            if x not in fscope:
                rest.append((fscope, f))
                continue
            order = sorted(range(len(fscope)), key=lambda a: axis[fscope[a]])
            view = np.transpose(f, order) if order != list(range(len(fscope))) else f
            shape = [1] * len(scope)
            for v in fscope:
                shape[axis[v]] = sizes[v]
            table = table + view.reshape(shape)
        xa = axis[x]
        arg = np.argmin(table, axis=xa)
        low = np.min(table, axis=xa)
        left = tuple(v for v in scope if v != x)
        steps.append((x, left, arg))
        rest.append((left, low))
        factors = rest
        alive.discard(x)
    if not all(np.isfinite(f) for scope, f in factors if not scope):
        return None
    pick = [0] * n
    for x, left, arg in reversed(steps):
        pick[x] = int(arg[tuple(pick[v] for v in left)]) if left else int(arg)
    return pick


class Site:
    """The re-built groups of some instructions and their local pricing problem (see module docstring).

    ``instrs``: the instructions in schedule order; ``groups``: their re-built groups; ``unary[k]``:
    per strategy of group k its node cost plus the edges to groups that are not re-built (at the
    as-given choice); ``pairs``: ``(j, k) -> matrix`` between re-built groups; ``parts``: the same by
    kind (for the breakdown of a solution)."""

    def __init__(self, pricing, instrs, groups, ctx):
        self.pricing = pricing
        self.instrs = instrs
        self.groups = groups
        self.ctx = ctx
        self.index = {id(g): k for k, g in enumerate(groups)}
        self.node_part = []      # per group: (compute, communication) arrays
        self.unary_edges = []    # per group: resharding to / from fixed groups
        self.pairs: dict = {}
        self._split = None

    @classmethod
    def build(cls, pricing, instrs, fixed, cascade: bool = False, resh=None):
        """Re-build ``instrs`` (schedule order) under the kept shardings ``fixed``.  ``cascade``: also
        re-build the plain users of every re-built group whose strategies' outputs differ from the
        as-given ones, transitively, up to :data:`MAX_CASCADE` instructions: an unannotated user's
        strategies depend on them (following), an annotated user's on whether the operand's layout is
        pinned (one strategy) and to what (XLA's realization from operand layouts, rematerialized
        broadcasts: ``strategy.registry._operand_specs`` / ``_free_rematerialized``).  None when that
        is exceeded or a re-built group is not a plain node."""
        import heapq


        ctx = pricing.context(fixed)
        old = pricing.graph.ctx.groups
        pos = pricing.graph.positions
        heap = [(pos[i], k, i) for k, i in enumerate(instrs)]
        heapq.heapify(heap)
        queued = {id(i) for i in instrs}
        order, groups = [], []
        while heap:
            _, _, instr = heapq.heappop(heap)
            key = pricing.build_key(instr, ctx)
            g = pricing.built.get(key)
            if g is None:
                seq = old[instr].seq
                g = pricing.build(instr, ctx)
                if not isinstance(g, StrategyGroup) or g.multi or not g.strategies:
                    return None
                g.seq = seq     # the build order of the as-given graph (followee choice breaks ties by it)
                pricing.built[key] = g
            else:
                ctx.groups[instr] = g
            order.append(instr)
            groups.append(g)
            if not cascade:
                continue
            outs = [_key(s.out) for s in g.strategies]
            before = [_key(s.out) for s in old[instr].strategies]
            if outs == before:
                continue
            pinned_same = (len(outs) == 1) == (len(before) == 1) and (len(outs) > 1 or outs == before)
            for u in instr.users:
                if id(u) not in queued and u in pos:
                    if not pricing.plain(u):
                        continue
                    if u in fixed and pinned_same:
                        continue   # an annotated user sees only whether this layout is pinned, and which
                    if len(queued) >= MAX_CASCADE:
                        return None
                    queued.add(id(u))
                    heapq.heappush(heap, (pos[u], len(queued), u))
        site = cls(pricing, order, groups, ctx)
        site._price(resh or pricing.resh)
        return site

    def _price(self, resh) -> None:
        p, c = self.pricing, self.pricing.choice
        for g in self.groups:
            w = self.ctx.weight(g.instr)
            self.node_part.append((np.array([s.compute * w for s in g.strategies], dtype=np.float64),
                                   np.array([s.comm * w for s in g.strategies], dtype=np.float64)))
            self.unary_edges.append(np.zeros(len(g.strategies)))
        for k, g in enumerate(self.groups):
            for src, m in p.edges(g, self.ctx, resh):
                j = self.index.get(id(src))
                if j is None:
                    self.unary_edges[k] = self.unary_edges[k] + m[c[src.node], :]
                else:
                    self._add_pair(j, k, m)
        # groups that read a re-built one without being re-built (tuples, loop states, ...)
        rebuilt_old = {id(p.graph.ctx.groups[i]) for i in self.instrs}
        readers, seen = [], set()
        for instr in self.instrs:
            for d in p.readers(p.graph.ctx.groups[instr]):
                if id(d) not in rebuilt_old and id(d) not in seen:
                    seen.add(id(d))
                    readers.append(d)
        for d in readers:
            for src, m in p.edges(d, self.ctx, resh):
                j = self.index.get(id(src))
                if j is not None:
                    self.unary_edges[j] = self.unary_edges[j] + m[:, c[d.node]]
        # alias constraints: the same sharding on both sides

        old_node = {p.graph.ctx.groups[i].node: k for k, i in enumerate(self.instrs)}
        for v, k in old_node.items():
            mine = [_key(s.out) for s in self.groups[k].strategies]
            for other, _allowed, _first in p.aliases_of(v):
                j = old_node.get(other)
                if j is None:
                    og = p.graph.nodes[other]
                    want = _key(og.strategies[c[other]].out)
                    bad = np.array([x != want for x in mine])
                    self.unary_edges[k] = np.where(bad, np.inf, self.unary_edges[k])
                elif j > k:
                    theirs = [_key(s.out) for s in self.groups[j].strategies]
                    m = np.array([[0.0 if a == b else np.inf for b in theirs] for a in mine])
                    self._add_pair(k, j, m)

    def _add_pair(self, j: int, k: int, m) -> None:
        if j > k:
            j, k, m = k, j, m.T
        key = (j, k)
        self.pairs[key] = self.pairs[key] + m if key in self.pairs else m

    def unary(self, k: int):
        comp, comm = self.node_part[k]
        return comp + comm + self.unary_edges[k]

    def value(self, pick) -> dict:
        """Cost by kind of one strategy per re-built group (cost units; inf when forbidden)."""
        out = {"compute": 0.0, "communication": 0.0, "resharding": 0.0}
        for k, q in enumerate(pick):
            comp, comm = self.node_part[k]
            out["compute"] += float(comp[q])
            out["communication"] += float(comm[q])
            out["resharding"] += float(self.unary_edges[k][q])
        for (j, k), m in self.pairs.items():
            out["resharding"] += float(m[pick[j], pick[k]])
        return out

    def solve(self, masks: dict | None = None, cost_scale: float = 1.0):
        """The cheapest strategy per re-built group (``masks``: group index -> bool array of allowed
        strategies), as a list of strategy indices, or None when nothing is allowed.  A pair matrix that
        is a sum of a row and a column term (an annotated source: every strategy has the same output) is
        folded into the two groups' own costs; groups left without pairs take their cheapest strategy;
        the rest are solved exactly by :func:`eliminate` while its tables stay within
        :data:`ENUMERATE_LIMIT` entries, else by CP-SAT over the integer-scaled problem."""
        masks = masks or {}
        unary = []
        for k in range(len(self.groups)):
            u = self.unary(k)
            if k in masks:
                u = np.where(masks[k], u, np.inf)
            unary.append(u)
        pairs = {}
        if self._split is None:
            self._split = {jk: _separable(m) for jk, m in self.pairs.items()}
        for (j, k), m in self.pairs.items():
            split = self._split[(j, k)]
            if split is None:
                pairs[(j, k)] = m
            else:
                unary[j] = unary[j] + split[0]
                unary[k] = unary[k] + split[1]
        if any(not np.isfinite(u).any() for u in unary):
            return None
        pick = [int(np.argmin(u)) for u in unary]
        linked = sorted({x for jk in pairs for x in jk})
        if not linked:
            return pick
        pos = {x: i for i, x in enumerate(linked)}
        sub_unary = [unary[x] for x in linked]
        sub_pairs = {(pos[j], pos[k]): m for (j, k), m in pairs.items()}
        best_pick = eliminate(sub_unary, sub_pairs, ENUMERATE_LIMIT)
        if best_pick is None:
            return None
        if best_pick is TOO_LARGE:
            best_pick = self._cpsat(sub_unary, sub_pairs, cost_scale)
            if best_pick is None:
                return None
        for x, q in zip(linked, best_pick):
            pick[x] = int(q)
        return pick

    def _cpsat(self, unary, pairs: dict, cost_scale: float):
        def to_int(a):
            a = np.asarray(a, dtype=np.float64)
            out = np.full(a.shape, INFINITY, dtype=np.int64)
            fin = np.isfinite(a)
            out[fin] = np.minimum(np.rint(a[fin] / cost_scale), INFINITY - 1).astype(np.int64)
            return out

        keys = sorted(pairs)
        n = len(unary)
        sub = Problem(name="explain-site", intervals=np.zeros((n, 2), dtype=np.int64),
                      node_costs=[to_int(u) for u in unary],
                      node_usages=[np.zeros(len(u), dtype=np.int64) for u in unary],
                      edges=np.array(keys, dtype=np.int64).reshape(-1, 2),
                      edge_costs=[to_int(pairs[k]) for k in keys], usage_limit=None, cost_scale=cost_scale)
        sol = solve_problem(sub, time_limit=SOLVE_SECONDS, workers=1, seed=0, deterministic=True)
        if not sol.strategies:
            return None
        return [int(x) for x in sol.strategies]


# ------------------------------------------------------------------------------------------------
# The neighbourhood of one instruction and its kept re-solve (explain's alternatives, solve's
# post-solve improvement pass)

#: most instructions re-solved around one instruction (keeps each re-solve a small exact CP-SAT model)
MAX_FREE = 40

#: the names of the Sharding custom-calls ``solve`` writes itself (``strategy.realize``: operand pins
#: ``NAME.pin``, loop-state ``.sh``, transpose ``.tpin``; a number when the name was taken): its cost graph
#: has none (a pin's layout is its user's operand requirement there), so they are re-solved freely;
#: every other Sharding custom-call is the user's and is kept, as ``solve`` keeps it
_SOLVE_PIN = re.compile(r"\.(pin|sh|tpin)(\.?\d+)?$")


def neighbourhood(instr, allowed: set, radius: int = 2, limit: int = MAX_FREE) -> list:
    """Instructions within ``radius`` operand/user steps of ``instr`` (itself first, then by distance,
    in operand-then-user order), restricted to ``allowed`` (ids), at most ``limit``."""
    seen = {id(instr)}
    out = [instr]
    frontier = deque([(instr, 0)])
    while frontier and len(out) < limit:
        cur, d = frontier.popleft()
        if d >= radius:
            continue
        for nxt in list(cur.operands) + list(cur.users):
            if id(nxt) in seen or id(nxt) not in allowed:
                continue
            seen.add(id(nxt))
            out.append(nxt)
            frontier.append((nxt, d + 1))
            if len(out) >= limit:
                break
    return out


def freeable(instr, target, module, pins: bool = True) -> bool:
    """Whether a re-solve around ``target`` may change ``instr``'s sharding: not the program's interface
    (entry parameters and root), not a user's own sharding constraint (``solve``'s pins are, with
    ``pins``), not a manual or maximal sharding."""
    if instr is target:
        return True
    if not pins and instr.is_sharding_constraint:
        return False
    entry = module.entry
    if instr.parent is entry and (instr.opcode == "parameter" or instr is entry.root):
        return False  # the program's interface stays as the user wrote it
    if instr.is_sharding_constraint and not _SOLVE_PIN.search(instr.name):
        return False  # a user's constraint (with_sharding_constraint): solve keeps it (user_shardings)
    sh = instr.sharding
    return sh is None or isinstance(sh, str) or not (sh.is_manual or sh.is_maximal)


def same_spec(a, b) -> bool:
    """Two output specs are the same layout (mesh specs by value, raw shardings by text): the
    registry's own comparison (``strategy.registry._same``)."""

    return _same(a, b)


def spec_key(spec):
    """A hashable key of an output spec (:func:`same_spec` classes)."""

    return spec if is_mesh_spec(spec) or spec is None else ("raw", str(spec))


class LocalSearch:
    """The kept re-solve around ``target``: the neighbourhood ``free`` (``target`` among them) is
    re-built without annotations, their plain users with theirs (:meth:`Pricing.site`, ranking edges),
    with everything else at the as-given choice.  :meth:`resolve` gives the neighbourhood's cheapest
    layouts for one output spec of ``target``; :meth:`price_changes` prices annotation changes exactly,
    as ``hloshard cost`` prices the module written with them.  ``site`` is None when a re-built group is
    not a plain node."""

    def __init__(self, pricing, target, free):
        self.pricing, self.target, self.free = pricing, target, list(free)
        g1, c1 = pricing.graph, pricing.choice
        self.given_spec = {i: g1.nodes[g1.ctx.groups[i].node].strategies[c1[g1.ctx.groups[i].node]].out
                           for i in self.free}
        users = [u for i in self.free for u in i.users if pricing.plain(u)]
        self.site = pricing.site(self.free + users, free=self.free, estimate=True)
        if self.site is None:
            return
        self.k_target = self.site.instrs.index(target)
        self.free_k = [self.site.instrs.index(i) for i in self.free]
        self._resolved: dict = {}

    def _outs(self, k: int) -> list:
        return [st.out for st in self.site.groups[k].strategies]

    def resolve(self, spec):
        """Re-solve the neighbourhood with the target sharded ``spec``: ``(estimate, config)`` with the
        estimate the re-solved neighbourhood's own objective (cost units; its users' realization not
        modelled, so only for ranking) and config the output spec per free instruction; None when
        nothing is allowed."""
        key = spec_key(spec)
        if key in self._resolved:
            return self._resolved[key]
        masks = {self.k_target: np.array([same_spec(o, spec) for o in self._outs(self.k_target)])}
        out = None
        if masks[self.k_target].any():
            pick = self.site.solve(masks, self.pricing.graph.cost_scale)
            if pick is not None:
                est = sum(self.site.value(pick).values())
                out = (est, {i: self.site.groups[k].strategies[pick[k]].out for i, k in zip(self.free, self.free_k)})
        self._resolved[key] = out
        return out

    def changes_of(self, config: dict) -> dict:
        """The entries of ``config`` (instruction -> output spec) that differ from the as-given layouts,
        the target always kept."""
        return {i: o for i, o in config.items() if i is self.target or not same_spec(o, self.given_spec[i])}

    def price_changes(self, changes: dict):
        """Exact change of the module's total cost when the instructions of ``changes`` (instruction ->
        output spec) are annotated with those shardings: ``(site, pick, change by kind (cost units),
        shardings written)``, or None when no strategy choice allows it.  The changed instructions and
        their users are re-built (cascading, :meth:`Site.build`) and solved exactly."""
        p, g1 = self.pricing, self.pricing.graph
        minfo = g1.ctx.minfo
        shardings = {i: minfo.to_sharding(o, len(i.shape.dims)) for i, o in changes.items()}
        users = [u for i in changes for u in i.users if p.plain(u)]
        site = p.site(list(changes) + users, shardings=shardings, cascade=True)
        if site is None:
            return None
        pick = site.solve(None, g1.cost_scale)
        if pick is None:
            return None
        new = site.value(pick)
        if not all(np.isfinite(v) for v in new.values()):
            return None
        old = p.given_terms(site.instrs)
        return site, pick, {kk: new[kk] - old[kk] for kk in new}, shardings


# ------------------------------------------------------------------------------------------------
# solve's post-solve improvement pass

#: rounds of :func:`improve_written` (each: a kept re-solve around every candidate, the improving moves
#: on disjoint instructions written, the module priced again); a bound on the loop, not tuned
IMPROVE_ROUNDS = 3
#: the least relative drop of the module's total that counts as an improvement (float noise of the
#: summed terms, far below a cost unit of any module measured)
IMPROVE_EPS = 1e-9
#: the least relative drop of the module's total that a round's moves must bring (as priced) for the module
#: to be priced again, and that a round must bring (as priced again) for another round: the solver's own
#: optimality tolerance (``solver.api.GAP_LIMIT``, 0.01%: it stops searching within it), so the pass does
#: not re-price the module for changes the solve itself would not have searched for
from ..solver.api import GAP_LIMIT as ROUND_GAIN  # noqa: E402
#: the least relative share of the module's total that an instruction must pay (its collectives and the
#: resharding on its edges) to be a candidate (:func:`improve_written`): what a round must bring.  Not a
#: bound (a move around it may save what its neighbours pay), a cut: against 1e-9 it took 2-30% of the
#: candidates off (round 19), the GNN's and decoder2's moves unchanged, the GAT's total 0.007% higher
TARGET_LEAST = ROUND_GAIN


def paid_nodes(graph, choice) -> dict:
    """Nodes of ``graph`` that pay communication at ``choice``, each with what it pays (cost units > 0):
    the collectives of its own strategy plus the resharding on every edge touching it.  A local move can
    only lower what is paid around such a node: elsewhere every re-solve keeps the as-given layouts at no
    lower compute (the candidates of :func:`improve_written`)."""
    out: dict = {}
    for v, grp in enumerate(graph.nodes):
        st = grp.strategies[choice[v]]
        if st.comm > 0:
            out[v] = out.get(v, 0.0) + float(st.comm) * graph.ctx.weight(grp.instr)
    for e, (u, v) in enumerate(graph.problem.edges):
        u, v = int(u), int(v)
        c = float(graph.edge_float[e][choice[u], choice[v]])
        if c > 0:
            out[u] = out.get(u, 0.0) + c
            out[v] = out.get(v, 0.0) + c
    return out


def _pairs(pricing) -> int:
    """The resharding pairs ``pricing``'s matrix caches have counted (exact and ranking: both are kept across
    the rounds of :func:`improve_written`, so the count is the pass's)."""
    return int(pricing.resh.pairs) + int(getattr(pricing.estimate, "pairs", 0))


def _frame(pricing, instrs) -> set:
    """Ids of what a re-solve over ``instrs`` reads of the as-given module: the instructions, their
    operands and users, and the instructions of the groups that read them (tuples, loop states)."""
    out = set()
    for i in instrs:
        out.add(id(i))
        out.update(id(o) for o in i.operands)
        out.update(id(u) for u in i.users)
        g = pricing.graph.ctx.groups.get(i)
        if g is not None:
            out.update(id(d.instr) for d in pricing.readers(g))
    return out


def _strategy_changes(before, after) -> set:
    """Ids of the instructions whose as-given strategy (output spec, compute, communication) differs
    between two :func:`hloshard.autoshard.evaluate_module` results of the same module object."""

    def at(res):
        out = {}
        for v, grp in enumerate(res.graph.nodes):
            st = grp.strategies[int(res.choice[v])]
            out[id(grp.instr)] = (_key(st.out), st.compute, st.comm)
        return out

    a, b = at(before), at(after)
    return {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}


def improve_written(module, mesh, written, deadline: float | None = None, rounds: int = IMPROVE_ROUNDS,
                    pins: bool = True, work: int | None = None, stats: dict | None = None, keep_ids=(),
                    peak_limit: int | None = None, pair_limit: int | None = None):
    """Lower ``hloshard cost`` of a written ``module`` by local moves: around each instruction that pays
    communication (:func:`paid_nodes`), in schedule order, its neighbourhood (:func:`neighbourhood`: radius
    2, :func:`freeable`, ``solve``'s own operand pins included) is re-solved with the instruction's layout
    kept (:class:`LocalSearch`, explain's kept re-solve) and the changed layouts priced exactly as the
    module written with them (:meth:`LocalSearch.price_changes`).  The moves that lower the total are
    written, cheapest first, each only where no earlier move re-built an instruction of its site (their
    changes then add up); when together they lower the total by at least :data:`ROUND_GAIN` of it (the
    solver's own tolerance) the module is priced again (:func:`hloshard.autoshard.evaluate_module`) and the
    moves kept only when that total is lower, else undone and the pass ends.  Up to ``rounds`` rounds; a
    round after one that lowered the total by less than :data:`ROUND_GAIN` is not started, and a later
    round re-solves only around the instructions whose re-solve read something the last round changed
    (an annotation, or an as-given strategy: :func:`_frame`, :func:`_strategy_changes`), or that found a
    move: elsewhere it would find the same nothing.  Candidates pay at least :data:`TARGET_LEAST` of the
    total (:func:`paid_nodes`).

    Cost (round 19, ``solve --deterministic --time-limit 10`` at 2x4, CPU seconds of the pass in the
    command's process): 0.00-0.41 s on the nine samples (0.01-2.63 s before), 0.86 s of the GNN's 3.75 s
    (1.68 s before); the re-pricing (one ``evaluate_module`` per round with moves) is a third of it where
    moves are found.

    ``solve``'s own operand pins are re-solved too (``pins``, as explain's re-solve; False: kept as
    written): moving one leaves XLA to realize the reader from the other layouts
    (``strategy.registry._realized``).  Round 19 kept them, because a dot whose operand split a free dim
    its result did not was priced computing a quarter of its columns and gathering the result, where
    XLA gathers the operand (fused_qkv: -294,912.80 predicted, the same flops and bytes under XLA);
    round 20 prices XLA's gather (``strategy.dot.no_new_contracting_split``; round 29's
    ``one_sided_contracting`` took over round 20's ``gathers_partial_contracting``): fused_qkv finds nothing with the pins freed, transformer_block
    -98,304.00 (-3.9%; XLA flops per device 272.1 -> 221.8 M, the same 1,966,080 collective bytes),
    held-out decoder2 -105,525.53 more (XLA collective bytes 5,199,366 -> 5,052,294).

    Reaches plans outside ``solve``'s strategy space: an annotated follower may reshard the operand it
    follows (``solve`` merges the pair, :mod:`hloshard.solver.followers`), an annotated instruction takes
    the strategy XLA realizes from its operands' layouts (new user 17 finding 12: the GNN's -2.0%).

    ``written``: ``evaluate_module`` of ``module`` as it is (a :class:`~hloshard.autoshard.evaluate.CostResult`);
    ``module`` is changed in place (its instructions' ``sharding``).  ``deadline``: a ``time.monotonic()``
    instant; no candidate is started after it and no re-pricing that the last one's seconds would take
    past it (None: no clock read, deterministic).  ``keep_ids``: ids of instructions whose annotation stays
    (``solve``'s kept user shardings, ``--keep all``: ``graph.ctx.fixed`` of its solve).  ``work``: the most neighbourhood re-solves over all
    rounds (a deterministic budget; None with no ``deadline``: as many as the written graph has nodes, one
    per node, as the build builds each once).  ``stats``: a dict, filled with ``rounds``, ``candidates``
    (re-solves), ``priced`` (exact re-pricings of a site), ``evaluations`` (modules priced again),
    ``peak_refused`` (rounds undone for their peak), ``pairs`` (resharding pairs counted, ``pair_limit``'s
    unit), ``pair_limited`` (True when that limit stopped a round) and
    ``per_round`` (per round: candidates before it, instructions changed by the last, and the round's
    change of the total as priced and, when priced again, as found).  ``peak_limit``: bytes per device; a
    round whose module, priced again, peaks above it (``evaluation.peak_memory``, the memory model of
    ``hloshard cost``) is undone and the pass ends, as a round that does not lower the total
    (:func:`hloshard.autoshard.solve.improve_applied`, :func:`hloshard.jax.auto_shard`'s moves: the memory
    guard's baseline and a budget's limit, or the written plan's own peak).  ``pair_limit``: the most resharding
    pairs the pass's matrices may count over all rounds (``_Resharder.pairs`` of the exact and the ranking cache:
    the work unit of the deterministic build's limit, :func:`hloshard.autoshard.coarse.work_limit`); no candidate
    is started once the count has reached it, and the candidates are then taken by what they pay, highest
    first (:func:`paid_nodes`; the schedule breaking ties), so a limit that binds leaves out the ones paying
    least (:func:`hloshard.jax.auto_shard`'s deterministic moves; None: every candidate, in schedule order).
    Returns ``(CostResult of the module as left, moves kept: [(instruction name, old
    sharding text, new sharding text)])``."""
    import time


    kept: list = []
    stats = {"rounds": 0, "candidates": 0, "priced": 0, "evaluations": 0} if stats is None else stats
    for key in ("rounds", "candidates", "priced", "evaluations", "peak_refused"):
        stats.setdefault(key, 0)
    if work is None and deadline is None:
        work = len(written.graph.nodes)
    frames: dict = {}      # id(target) -> ids of the instructions its last re-solve read (round > 1: skipped unless changed)
    changed = None         # ids of the instructions whose annotation or as-given strategy the last round changed
    resharders = None      # the first round's (Pricing.resh, Pricing.estimate), kept for the later rounds
    for _ in range(rounds):
        t_eval = float(written.seconds_build + written.seconds_choose)
        graph, choice = written.graph, [int(c) for c in written.choice]
        if written.method == "per-device":
            break
        stats["rounds"] += 1
        stats.setdefault("per_round", []).append([stats["candidates"], 0 if changed is None else len(changed)])
        pricing = Pricing(graph, choice, resharders)
        resharders = (pricing.resh, pricing.estimate)
        allowed = {id(i) for c in processed_computations(module) for i in c.instructions}
        paid = paid_nodes(graph, choice)
        least = TARGET_LEAST * max(1.0, abs(written.total_cost))
        moves = []
        order = graph.schedule if pair_limit is None else sorted(
            graph.schedule, key=lambda t: (-paid.get(getattr(graph.ctx.groups.get(t), "node", None), 0.0),
                                           graph.positions[t]))
        for target in order:
            if deadline is not None and time.monotonic() + t_eval > deadline:
                break
            if pair_limit is not None and _pairs(pricing) >= pair_limit:
                stats["pair_limited"] = True
                break
            if id(target) not in allowed or not pricing.plain(target) \
                    or paid.get(graph.ctx.groups[target].node, 0.0) < least \
                    or not freeable(target, None, module, pins=pins):
                continue
            if changed is not None and id(target) in frames and not frames[id(target)] & changed:
                continue   # nothing it read changed since its re-solve found no move: the same answer
            if work is not None and stats["candidates"] >= work:
                break
            stats["candidates"] += 1
            free = [i for i in neighbourhood(target, allowed) if freeable(i, target, module, pins=pins)
                    and pricing.plain(i) and (i is target or id(i) not in keep_ids)]
            ls = LocalSearch(pricing, target, free)
            frames[id(target)] = _frame(pricing, ls.site.instrs if ls.site is not None else free)
            if ls.site is None:
                continue
            res = ls.resolve(ls.given_spec[target])
            if res is None:
                continue
            changes = ls.changes_of(res[1])
            if len(changes) < 2:   # only the target, at its own layout: nothing moves
                continue
            stats["priced"] += 1
            core = ls.price_changes(changes)
            if core is None:
                continue
            site, _pick, change, shardings = core
            frames[id(target)] |= _frame(pricing, site.instrs)
            total = sum(change.values())
            if total < -IMPROVE_EPS * max(1.0, abs(written.total_cost)):
                moves.append((total, graph.positions[target], shardings, {id(i) for i in site.instrs}, id(target)))
        if not moves:
            break
        moves.sort(key=lambda m: (m[0], m[1]))
        touched: set = set()
        undo = []
        predicted = 0.0   # the written moves' change of the total, as priced (they add up: disjoint sites)
        for total, _pos, shardings, ids, _t in moves:
            if ids & touched:
                continue
            touched |= ids
            predicted += total
            for instr, sh in shardings.items():
                if instr.sharding is None or str(instr.sharding) != str(sh):
                    undo.append((instr, instr.sharding))
                    instr.sharding = sh
        stats["per_round"][-1].append(predicted)
        if not undo or predicted > -ROUND_GAIN * max(1.0, abs(written.total_cost)) or \
                (deadline is not None and time.monotonic() + t_eval > deadline):
            for instr, sh in reversed(undo):
                instr.sharding = sh
            break
        stats["evaluations"] += 1
        again = evaluate_module(module, mesh)
        over = peak_limit is not None and int(again.evaluation.peak_memory) > int(peak_limit)
        stats["peak_refused"] += bool(over)
        if over or not again.total_cost < written.total_cost - IMPROVE_EPS * max(1.0, abs(written.total_cost)):
            for instr, sh in reversed(undo):
                instr.sharding = sh
            break
        kept.extend((instr.name, None if old is None else str(old), str(instr.sharding)) for instr, old in undo)
        drop = written.total_cost - again.total_cost
        stats["per_round"][-1].append(-drop)
        changed = {id(instr) for instr, _ in undo} | _strategy_changes(written, again)
        for m in moves:
            frames.pop(m[4], None)     # a target with a move, written or not, is looked at afresh
        written = again
        if drop < ROUND_GAIN * max(1.0, abs(written.total_cost)):
            break   # the round brought less than the solver's tolerance: another would bring less still
    if resharders is not None:
        stats["pairs"] = int(resharders[0].pairs) + int(getattr(resharders[1], "pairs", 0))
    return written, kept
