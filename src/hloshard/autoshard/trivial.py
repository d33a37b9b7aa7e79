"""Plans every strategy space holds, built without a search: the floor under the solver's answer.

:func:`trivial_plans` gives, for a cost graph, the replicated plan (every node's output and operands
replicated, where its strategy list has such a strategy) and, per mesh axis and for all axes together,
the data-parallel plan (every array replicated or split along one dim by exactly that axis set: the
batch of activations, the contracting dim of a weight gradient).  Each is a choice of
``graph.problem``: per node the allowed strategies, followers given one index per class, and the nodes
left open (or whose allowed strategies are not consistent with their neighbours) completed greedily in
node order, each taking the strategy of least node cost plus edge cost to the nodes already chosen
(:func:`complete`).  :func:`hloshard.autoshard.search.solve_graph` returns the cheapest of them when the
solver's answer costs more (a short or loaded solve on a large graph: a new user's 919-instruction
ConvNeXt solved in 10 s ended at 1.36 M against the replicated plan's 1.12 M, round 13).
"""

from __future__ import annotations

import numpy as np

from ..costgraph import INFINITY, evaluate
from ..solver.unionfind import UnionFind
from ..strategy.base import is_mesh_spec


def adjacency(prob) -> dict:
    """Per node of ``prob`` its edges as ``(edge, other node, node is the column side)``."""
    adj: dict = {}
    for e, (a, b) in enumerate(prob.edges.tolist()):
        adj.setdefault(a, []).append((e, b, False))
        adj.setdefault(b, []).append((e, a, True))
    return adj


def complete(prob, choice, adj: dict | None = None) -> bool:
    """Fill the ``-1`` entries of ``choice`` (one strategy index per node of ``prob``, changed in place)
    in node order with the strategy of least node cost plus edge cost to the nodes already chosen;
    False when some node has only infinite options.  ``adj``: :func:`adjacency` of ``prob``, when the
    caller has it."""
    if adj is None:
        adj = adjacency(prob)
    for v in range(len(choice)):
        if choice[v] >= 0:
            continue
        c = prob.node_costs[v].astype(np.float64).copy()
        for e, w, transposed in adj.get(v, ()):
            if choice[w] < 0:
                continue
            m = prob.edge_costs[e]
            c += m[choice[w], :] if transposed else m[:, choice[w]]
        q = int(np.argmin(c))
        if c[q] >= INFINITY:
            return False
        choice[v] = q
    return True


def follower_classes(graph) -> list:
    """The classes of nodes that must take one strategy index (``graph.follows`` pairs with strategy
    lists of one length), each a list of nodes, the least first."""
    n = len(graph.nodes)
    sets = UnionFind(n)
    for a, b in getattr(graph, "follows", ()):
        if len(graph.nodes[a].strategies) == len(graph.nodes[b].strategies):
            ra, rb = sets.find(int(a)), sets.find(int(b))
            if ra != rb:
                sets.union(min(ra, rb), max(ra, rb))   # the class's least node represents it
    classes: dict = {}
    for v in range(n):
        classes.setdefault(sets.find(v), []).append(v)
    return list(classes.values())


def choose_allowed(graph, allowed: list, classes: list | None = None, adj: dict | None = None) -> tuple[list | None, int]:
    """A choice of ``graph.problem`` from ``allowed`` (per node a list of strategy indices, or None:
    no preference): per class of followers (:func:`follower_classes`) the index every member allows
    of least summed node cost (each member alone when none is common), the rest completed greedily
    (:func:`complete`).  Returns ``(choice, nodes completed greedily)``; the choice is None when no
    finite completion exists.  ``classes`` / ``adj``: :func:`follower_classes` of ``graph`` and
    :func:`adjacency` of its problem, when the caller has them."""
    prob = graph.problem
    choice = [-1] * len(graph.nodes)
    for members in (follower_classes(graph) if classes is None else classes):
        ok = None
        for v in members:
            if allowed[v] is not None:
                ok = set(allowed[v]) if ok is None else ok & set(allowed[v])
        if not ok:   # no index every member allows: match each alone, the completion settles the rest
            for v in members:
                if allowed[v]:
                    choice[v] = min(allowed[v], key=lambda q: prob.node_costs[v][q])
            if len(members) > 1:
                for v in members[1:]:
                    choice[v] = -1
            continue
        best = min(sorted(ok), key=lambda q: sum(int(prob.node_costs[v][q]) for v in members))
        for v in members:
            choice[v] = best
    open_nodes = sum(1 for c in choice if c < 0)
    if open_nodes and not complete(prob, choice, adj):
        return None, open_nodes
    return choice, open_nodes



def complete_plan(problem, allowed: list, follows=()) -> list | None:
    """A choice of ``problem`` (a :class:`hloshard.costgraph.Problem`) that takes, for every node ``v``
    with ``allowed[v]`` (a list of strategy indices, or None: any), one of those indices.  Followers
    (``follows``: ``(followee, follower)`` node pairs, ``graph.follows``; a pair with equal strategy
    counts takes one index, as :func:`hloshard.solver.followers.merge_followers` merges them) are one
    class.  Classes in order of their first node (the build's order: a node's operands before it), each
    the index of least node cost plus edge cost to the nodes already chosen, among those every member
    allows and its alias pairs with chosen nodes allow (a tied output leaves as its parameter came in).
    Greedy and myopic by design: a start for the solver, not a search.  Unlike :func:`choose_allowed`
    (a class's index by node cost alone, for the coarse plan's image and the trivial plans) the class's
    edges and alias pairs decide here: plans of tied state (:mod:`hloshard.jax.known`) stay feasible.  None when some class has no
    finite option left."""

    n = problem.num_nodes
    counts = problem.strategy_counts
    sets = UnionFind(n)
    for a, b in follows:
        ra, rb = sets.find(int(a)), sets.find(int(b))
        if ra != rb and counts[ra] == counts[rb]:
            sets.union(min(ra, rb), max(ra, rb))   # the class's first node represents it
    members: dict = {}
    for v in range(n):
        members.setdefault(sets.find(v), []).append(v)
    adj: list = [[] for _ in range(n)]
    for e, (a, b) in enumerate(np.asarray(problem.edges).reshape(-1, 2).tolist()):
        adj[a].append((problem.edge_costs[e], b, False))
        adj[b].append((problem.edge_costs[e], a, True))
    pairs: list = [[] for _ in range(n)]
    for u, v, ok in problem.aliases:
        pairs[int(u)].append((np.asarray(ok, dtype=bool), int(v), False))
        pairs[int(v)].append((np.asarray(ok, dtype=bool), int(u), True))
    choice = [-1] * n
    for root in sorted(members):
        group = members[root]
        inside = set(group)
        cost = np.zeros(int(counts[root]), dtype=np.float64)
        for v in group:
            cost += np.asarray(problem.node_costs[v], dtype=np.float64)
            if allowed[v]:
                mask = np.full(cost.shape, True)
                mask[list(allowed[v])] = False
                cost[mask] = INFINITY
            for m, w, transposed in adj[v]:
                if w in inside:   # one index for the class: the diagonal, counted from one end
                    if not transposed:
                        cost += np.diagonal(np.asarray(m, dtype=np.float64))
                elif choice[w] >= 0:
                    cost += m[choice[w], :] if transposed else m[:, choice[w]]
            for ok, w, transposed in pairs[v]:
                if w in inside:
                    if not transposed:
                        cost[~np.diagonal(ok)] = INFINITY
                elif choice[w] >= 0:
                    cost[~(ok[choice[w], :] if transposed else ok[:, choice[w]])] = INFINITY
                else:   # the partner comes later: keep only indices it can still pair with (a tied output
                    # chosen with its follower class before its parameter left the parameter no option:
                    # a new user's ViT with Adam had no data-parallel plan, round 15)
                    cols = ok if not allowed[w] else (ok[list(allowed[w]), :] if transposed else ok[:, list(allowed[w])])
                    cost[~(cols.any(axis=0) if transposed else cols.any(axis=1))] = INFINITY
        q = int(np.argmin(cost))
        if cost[q] >= INFINITY:
            return None
        for v in group:
            choice[v] = q
    return choice

def _is_spec(entry) -> bool:
    """An array's mesh spec (a tuple of axis tuples), not a tuple of per-leaf specs."""
    return all(type(d) is tuple and all(type(a) is int for a in d) for d in entry)


def _layout_class(st, multi: bool):
    """What strategy ``st`` does with the mesh: ``()`` when every spec (output and operands) is
    replicated, ``axes`` when each is replicated or split along one dim by exactly that axis tuple,
    None otherwise (several dims or axis sets, or a raw HloSharding)."""
    found = None
    for entry, m in [(st.out, multi)] + [(e, False) for e in st.inputs]:
        if entry is None:
            continue
        leaves = entry if (m or (type(entry) is tuple and not _is_spec(entry))) else (entry,)
        for leaf in leaves:
            if leaf is None:
                continue
            if not is_mesh_spec(leaf) or not _is_spec(leaf):
                return None
            split = [ax for ax in leaf if ax]
            if not split:
                continue
            if len(split) > 1 or (found is not None and split[0] != found):
                return None
            found = split[0]
    return () if found is None else tuple(found)


def trivial_plans(graph) -> list:
    """``[(name, choice)]``: the replicated plan (``"replicated"``) and the data-parallel plans of the
    data axis and of all axes (``"data-parallel over axes (0,)"``, ...), each a choice of
    ``graph.problem`` that is finite there (module docstring); plans that cannot be completed are
    left out.  Strategy lists shared between nodes (:mod:`hloshard.strategy.sharing`) are scanned once."""
    axes = tuple(getattr(graph.ctx.minfo, "axes", ()))
    # the data axis: the mesh axes (sub-axes of a refined mesh) that make up the user's first axis
    sub = getattr(graph.mesh, "sub_axes", None) or ()
    if axes and len(sub) == len(graph.ctx.minfo.shape):
        first = tuple(a for a in axes if sub[a].user_axis == sub[axes[0]].user_axis)
    else:
        first = axes[:1]
    sets = [()]
    for want in (first, axes):
        if want and want not in sets:
            sets.append(want)
    memo: dict = {}
    lists = []   # per node its list's entry: (strategies, layout class per strategy, allowed per set)
    for g in graph.nodes:
        key = (id(g.strategies), g.multi)
        hit = memo.get(key)
        if hit is None or hit[0] is not g.strategies:
            cls = [_layout_class(st, g.multi) for st in g.strategies]
            hit = memo[key] = (g.strategies, [[q for q, c in enumerate(cls) if c == () or c == want] or None
                                              for want in sets])
        lists.append(hit[1])
    out = []
    classes, adj = follower_classes(graph), adjacency(graph.problem)
    for k, want in enumerate(sets):
        choice = choose_allowed(graph, [per[k] for per in lists], classes, adj)[0]
        if choice is None or not evaluate(graph.problem, choice)[1]:
            continue
        out.append(("replicated" if want == () else f"data-parallel over axes {want}", choice))
    return out


def cheapest_trivial(graph):
    """``(name, choice, objective)`` of the cheapest plan of :func:`trivial_plans` by
    ``graph.problem`` (integer units), or None when there is none."""
    best = None
    for name, choice in trivial_plans(graph):
        obj, ok = evaluate(graph.problem, choice)
        if ok and (best is None or obj < best[2]):
            best = (name, choice, int(obj))
    return best

