"""Follower merging: the problem the solver gets when followers share their followee's decision.

XLA's auto-sharding ``Simplify`` merges a *follower* (an instruction whose sharding should follow
another's, e.g. an elementwise op after its operand) into the node it follows: both take strategy
index ``p`` together.  That is a modelling choice (the merged problem has fewer solutions), unlike the
presolve's follow/alias merge, which is exact (there the edge matrix allows one strategy per row).
Both use one primitive, :func:`hloshard.solver.presolve.merge_into`.
"""

from __future__ import annotations

import numpy as np

from ..costgraph import INFINITY, Problem
from .presolve import _Graph, merge_into
from .unionfind import UnionFind


class MergeClasses(list):
    """``classes[v]``: the merged node of original node ``v``; ``maps[v]``: for a node merged through a
    tie, its strategy for each strategy of the merged node (other nodes take the merged node's index)."""

    maps: dict = {}


def expand_choice(classes, x) -> list:
    """The choice of every original node from a choice ``x`` of the merged problem (``classes`` from
    :func:`merge_followers`, or any list of merged-node ids)."""
    maps = getattr(classes, "maps", None) or {}
    return [int(maps[v][int(x[c])]) if v in maps else int(x[c]) for v, c in enumerate(classes)]


class _Domains:
    """The strategies arc consistency leaves open, per class of nodes that take one strategy index (follower
    classes; at first one class per node).  A class's mask is the AND of its members' finite node costs, and
    each hard constraint -- an alias, an edge with a forbidden pair (cost ``>= INFINITY``) -- keeps only the
    strategies of one end that some open strategy of the other end may pair with (both ends in one class:
    the diagonal), until nothing changes.  A strategy closed here is in no feasible choice (the presolve's
    first reduction, :func:`hloshard.solver.presolve.presolve`, closes the same ones).  ``soft``: edges
    (``(u, v)`` with ``u < v``) left out of the constraints (the follow edges, whose forbidden pairs are
    what :func:`follow_conflicts` decides on)."""

    def __init__(self, problem: Problem, find, soft=frozenset(), why: dict | None = None):
        self.find = find
        self.ok = {v: np.asarray(c) < INFINITY for v, c in enumerate(problem.node_costs)}
        hard = [(int(u), int(v), np.asarray(a, dtype=bool)) for u, v, a in problem.aliases]
        for (u, v), m in zip(np.asarray(problem.edges, dtype=np.int64).reshape(-1, 2).tolist(), problem.edge_costs):
            if (min(u, v), max(u, v)) in soft:
                continue
            m = np.asarray(m)
            if m.size and m.max() >= INFINITY:
                hard.append((u, v, m < INFINITY))
        self.hard = hard
        self.num_aliases = len(problem.aliases)   # hard[k] is an alias for k below it, an edge above
        self.why = why   # a dict: class -> the constraint that last narrowed it, filled (None: not kept)
        self.emptied = None   # (class, constraint) where a class was left no strategy
        self.of: dict = {}   # class root -> ids of the hard constraints on its members
        for k, (u, v, _a) in enumerate(hard):
            self.of.setdefault(find(u), []).append(k)
            if find(v) != find(u):
                self.of.setdefault(find(v), []).append(k)
        bare = next((v for v, m in self.ok.items() if not m.any()), None)   # no finite strategy of its own
        if bare is not None:
            self.emptied, self.consistent = (bare, None), False
        else:
            self.consistent = self._propagate(range(len(hard)), self.ok, find)

    def _propagate(self, seeds, ok: dict, find, extra: tuple = ()) -> bool:
        """Narrow ``ok`` (class root -> mask, changed in place) from the constraints ``seeds`` on; ``find``:
        a node's class root; ``extra``: ``(root, constraint ids)`` of a class being joined into ``root``.
        False as soon as some class has no strategy left."""
        todo = list(seeds)
        queued = set(todo)
        while todo:
            k = todo.pop()
            queued.discard(k)
            u, v, a = self.hard[k]
            cu, cv = find(u), find(v)
            if cu == cv:
                changed = ((cu, ok[cu] & np.diagonal(a)),)
            else:
                changed = ((cu, ok[cu] & a[:, ok[cv]].any(axis=1)), (cv, ok[cv] & a[ok[cu], :].any(axis=0)))
            for c, mask in changed:
                if mask.sum() == ok[c].sum():
                    continue
                ok[c] = mask
                if not mask.any():
                    self.emptied = (c, k)
                    return False
                if self.why is not None:
                    self.why[c] = k
                more = extra[1] if extra and c == extra[0] else ()
                for j in (*self.of.get(c, ()), *more):
                    if j not in queued:
                        queued.add(j)
                        todo.append(j)
        return True

    def join(self, keep: int, gone: int) -> bool:
        """Join class ``gone`` into ``keep`` (one strategy index for both) when arc consistency still leaves
        every class a strategy; False, nothing changed, otherwise.  The caller unions the two."""
        ok = self.ok
        both = ok[keep] & ok[gone]
        if not both.any():
            return False
        mine, theirs = self.of.get(keep, []), self.of.get(gone, [])
        find = self.find
        n = int(both.sum())
        # to re-check: the constraints of a class whose mask narrows, and those between the two (now within one)
        small, other = (mine, gone) if len(mine) <= len(theirs) else (theirs, keep)
        seeds = [k for k in small if other in (find(self.hard[k][0]), find(self.hard[k][1]))]
        if n < int(ok[keep].sum()):
            seeds += mine
        if n < int(ok[gone].sum()):
            seeds += theirs
        if seeds:

            def joined(x: int) -> int:
                r = find(x)
                return keep if r == gone else r

            trial = _Overlay(ok)
            trial[keep] = both
            if not self._propagate(seeds, trial, joined, (keep, theirs)):
                return False
            ok.update(trial)
        ok[keep] = both if not seeds else ok[keep]
        ok.pop(gone, None)
        if theirs:   # (a constraint between the two is then listed twice: the propagation queues it once)
            self.of.setdefault(keep, []).extend(self.of.pop(gone))
        return True


class _Overlay(dict):
    """A dict read through to ``base`` for a key it does not hold: a trial's changes are its own items."""

    def __init__(self, base: dict):
        super().__init__()
        self.base = base

    def __missing__(self, key):
        return self.base[key]


def allowed_strategies(problem: Problem) -> list:
    """Per node of ``problem`` a bool mask, one entry per strategy: the strategies arc consistency over the
    node costs, aliases and forbidden edge pairs leaves open (:class:`_Domains`).  A node whose mask is
    all False: ``problem`` is infeasible."""
    d = _Domains(problem, lambda v: v)
    return [d.ok[v] for v in range(problem.num_nodes)]


def forbidden_chains(problem: Problem, most: int = 8):
    """Why ``problem`` has no feasible choice, where arc consistency (:class:`_Domains`) shows it: None when
    it leaves every node a strategy; else ``(node, chains)``: the node left none and the two chains of
    constraints that met there, each a list of ``(node, constraint)`` from the node where the narrowing began
    (its own node costs; constraint None) towards ``node``, ``constraint`` the one that narrowed that step's
    node, ``(u, v, "alias" | "edge")`` -- the second chain narrowed ``node`` first, the first emptied it (a
    chain may be ``[]``: ``node``'s own costs).  At most ``most`` steps per chain, nearest ``node`` kept."""
    why: dict = {}
    d = _Domains(problem, lambda v: v, why=why)
    if d.consistent:
        return None
    node, last = d.emptied

    def chain(start: int, k) -> list:
        """From ``start``, reached through constraint ``k`` (None: ``start`` itself), back to an origin."""
        steps, seen, cur = [], set(), k
        while cur is not None and len(steps) < most:
            u, v, _a = d.hard[cur]
            kind = "alias" if cur < d.num_aliases else "edge"
            here = start if not steps else steps[-1][2]
            other = v if u == here else u
            steps.append((here, (u, v, kind), other))
            if other in seen:
                break
            seen.add(other)
            cur = why.get(other)
        out = [(other, None) for _here, _c, other in steps[-1:]]
        for here, c, _other in reversed(steps):
            out.append((here, c))
        return out

    first = chain(node, last) if last is not None else [(node, None)]
    before = why.get(node)
    second = chain(node, before) if before is not None else [(node, None)]
    return node, [first, second]


def follow_conflicts(problem: Problem, follows) -> list:
    """The follow pairs of ``follows`` (``(followee, follower)`` node pairs, in order; their edges in
    ``problem`` allow only equal strategy indices, :func:`hloshard.autoshard.build.in_edges`) that cannot all
    hold: taken in order, each pair whose classes have equal strategy counts is joined (one index for both)
    when arc consistency over the other constraints (:class:`_Domains`: finite node costs, aliases, other
    forbidden pairs) still leaves every class a strategy; the pairs that would not are returned, in order.
    An empty list when the other constraints alone leave some node no strategy (the follows do not cause
    it).  New user 31's GroupNorm ResNet: one CSE'd broadcast of Adam's beta1 followed by the ``m`` updates
    of a replicated and of a sharded [4,256] scale, each output tied to its argument kept as given -- no
    index serves both, "every strategy is forbidden"."""
    n = problem.num_nodes
    counts = [len(c) for c in problem.node_costs]
    soft = {(min(int(u), int(v)), max(int(u), int(v))) for u, v in follows}
    sets = UnionFind(n)
    find = sets.find
    domains = _Domains(problem, find, soft)
    if not domains.consistent:
        return []
    out = []
    for u, v in follows:
        ru, rv = find(int(u)), find(int(v))
        if ru == rv or counts[ru] != counts[rv]:
            continue
        keep, gone = min(ru, rv), max(ru, rv)
        if domains.join(keep, gone):
            sets.union(keep, gone)
        else:
            out.append((int(u), int(v)))
    return out


def merge_followers(problem: Problem, follows, merge: bool = True, ties=()):
    """Merge every follower into the node it follows (strategy index ``p`` of one is ``p`` of the
    other), then every tie ``(keep, gone, mapping)`` (``gone`` takes strategy ``mapping[a]`` when
    ``keep`` takes ``a``; ``-1``: ``a`` is forbidden; :func:`hloshard.autoshard.aliases.tie_merges`)
    whose nodes no earlier tie merged.

    ``follows``: ``(followee, follower)`` node pairs; a pair is merged when both (after earlier
    merges) have the same number of strategies.  Node costs add up, the cost of an edge between two
    merged nodes at equal indices becomes a node cost, other edges are re-attached (parallel ones
    summed; every edge matrix is normalised -- row and column minima moved into node costs, all-zero
    matrices dropped -- which changes no objective); aliases become forbidden pairs (cost
    ``INFINITY``) of an edge.  A merged node is live over the union of its members' intervals with
    the largest member usage per strategy (exact enough for reporting; merge only without a memory
    budget, so that memory constraints stay exact).  ``merge=False`` returns the problem unchanged.

    Returns ``(merged problem, classes)`` with ``classes[v]`` the merged node of original node ``v``;
    for every choice ``x`` of the merged problem, :func:`expand_choice` ``(classes, x)`` (``[x[classes[v]]
    for v]`` when no tie was merged) has the same objective and feasibility in ``problem``.
    """
    n = problem.num_nodes
    sets = UnionFind(n)
    find = sets.find
    pairs = []
    if merge:
        for u, v in follows:
            ru, rv = find(int(u)), find(int(v))
            if ru != rv and len(problem.node_costs[ru]) == len(problem.node_costs[rv]):
                keep, gone = min(ru, rv), max(ru, rv)
                sets.union(keep, gone)
                pairs.append((keep, gone))
    tied, touched = [], set()
    roots = np.array([find(v) for v in range(n)], dtype=np.int64) if merge and len(ties) else None
    maps: dict = {}
    for keep, gone, mapping in (ties if merge else ()):
        # follower merges keep strategy indices, so the mapping holds for the roots; a root an earlier
        # tie merged does not (left to the alias constraint)
        rk, rg = find(int(keep)), find(int(gone))
        mapping = np.asarray(mapping, dtype=np.int64)
        if rk == rg or rk in touched or rg in touched or len(mapping) != len(problem.node_costs[rk]) \
                or (mapping >= len(problem.node_costs[rg])).any():
            continue
        touched.update((rk, rg))
        for v in np.nonzero(roots == rg)[0].tolist():   # the gone node and its followers: through the mapping
            maps[v] = np.maximum(mapping, 0)   # a forbidden strategy (-1) stays forbidden through the merged cost
        sets.union(rk, rg)
        tied.append((rk, rg, mapping))
    if not pairs and not tied:
        return problem, list(range(n))
    g = _Graph(problem)
    g.share_matrices(True)   # merged edges of repeated layers: one matrix each, not one per edge
    for keep, gone in pairs:
        merge_into(g, keep, gone, np.arange(len(g.strat[keep]), dtype=np.int64))
    for keep, gone, mapping in tied:
        g.cost[keep] = np.where(mapping < 0, INFINITY, g.cost[keep])
        merge_into(g, keep, gone, np.maximum(mapping, 0))
    g.share_matrices(False)
    alive = np.nonzero(g.alive)[0]
    pos = np.full(n, -1, dtype=np.int64)
    pos[alive] = np.arange(len(alive))
    classes = MergeClasses(int(pos[find(v)]) for v in range(n))
    classes.maps = maps
    iv = problem.intervals
    costs, usages, intervals = [], [], []
    for i in alive.tolist():
        costs.append(g.cost[i].copy())
        members = g.terms[i]
        usages.append(np.max([u for _, u in members], axis=0).astype(np.int64))
        live = [j for j, _ in members if iv[j, 1] > iv[j, 0]]
        if live:
            intervals.append((min(int(iv[j, 0]) for j in live), max(int(iv[j, 1]) for j in live)))
        else:
            intervals.append((int(iv[i, 0]), int(iv[i, 1])))
    edges, edge_costs = g.edge_list(alive, pos)
    edge_costs = _interned(edge_costs)
    out = Problem(name=problem.name, intervals=np.array(intervals, dtype=np.int64).reshape(-1, 2),
                  node_costs=costs, node_usages=usages,
                  edges=np.array(edges, dtype=np.int64).reshape(-1, 2), edge_costs=edge_costs,
                  usage_limit=problem.usage_limit, cost_scale=problem.cost_scale)
    return out, classes


def _interned(arrays: list) -> list:
    """``arrays`` with equal matrices (shape and entries) replaced by one read-only array: the merged
    edges of repeated layers are equal, and the problem then holds each once (memory grows with the
    distinct matrices, not with the layers)."""
    seen: dict = {}
    done: dict = {}   # id of an input array -> (it, its interned array): one object shared by edges
    out = []
    for m in arrays:
        hit = done.get(id(m))
        if hit is not None and hit[0] is m:
            out.append(hit[1])
            continue
        given = m
        m = np.ascontiguousarray(m)
        key = (m.shape, m.dtype.str, hash(m.tobytes()))
        hits = seen.setdefault(key, [])
        for h in hits:
            if np.array_equal(h, m):
                m = h
                break
        else:
            m.flags.writeable = False
            hits.append(m)
        done[id(given)] = (given, m)
        out.append(m)
    return out
