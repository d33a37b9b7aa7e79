"""Branch and bound over the memory-heavy choices of a reduced problem, a Lagrangian dual bound per node.

**Why.**  On problems whose memory limit binds hard the LP relaxation (local polytope + memory rows,
:mod:`~hloshard.solver.lp`) can stay far under the optimum: contest instance V (208 reduced nodes, 88 memory
points) has the LP at 1,323,173 under the optimum 1,617,084 (Gurobi's), and no block of it is the cause (round
35: every block of up to 24 nodes is integral at the LP's duals).  The gap is the memory: without memory
limits the dual bound is 409,325; the LP lets each memory-heavy node take a fractional mix of a sharded and a
replicated strategy that meets the capacity exactly.  Fixing the memory-heavy nodes' *level* (how much memory
they take where memory binds) removes that mix: with V's 15 such nodes fixed at the levels of a 1,670,909
solution, the Lagrangian bound below reaches 1,646,302 (1.5% under that solution, 1.8% above the optimum, so
those levels are proven not optimal).  Branching on the levels is how such a gap is closed (branch and bound
with a relaxation per node, Land & Doig 1960; the levels play the part of the knapsack items).

**Tree.**  A node restricts some *items* to one *level*.  The items are the reduced nodes whose usage varies
at the memory points the root's prices ``mu`` weigh (``mu > 0``); an item's levels are the distinct usage
vectors of its strategies over those points (V: 15 items, 3-6 levels each).  Items are branched on in the
order of their priced spread ``sum_k mu_k (max_a W[a, k] - min_a W[a, k])`` (largest first), then every other
node with a choice, its strategies as its levels (program order), so that the tree is complete; a node's
children are the levels of the first item not fixed that has more than one level left.

**Bound of a node** (a proof, whatever the prices and the reparametrisation): the Lagrangian relaxation of
every memory point, ``min_x cost(x) + mu . (load(x) - caps)`` over the node's restriction, is at most its
optimum for any ``mu >= 0`` (Geoffrion 1974); the priced problem (node costs plus ``W_i mu``) is bounded by
:class:`~hloshard.solver.bounds.DualBound`'s dual ascent (:meth:`~hloshard.solver.bounds.DualBound.proven`,
``-mu . caps`` as its constant), recomputed exactly up to a margin for float rounding
(:meth:`~hloshard.solver.bounds.DualBound.certified`, :meth:`_Rows.price_error`).  Strategies outside the restriction are priced ``penalty`` (the incumbent's
objective) instead of forbidden: the costs are pointwise no higher, so the bound stays one.  ``mu`` moves by
subgradient steps (Polyak's step towards the incumbent, the subgradient ``load(x) - caps`` at the dual's
rounding ``x``, :meth:`~hloshard.solver.bounds.DualBound.decode`); each node starts from its parent's
reparametrisation and prices (:meth:`~hloshard.solver.bounds.DualBound.state`).  A node where the least loads
its restriction allows exceed a capacity has no solution and is closed, and a strategy that cannot fit beside
the least usage of the others is priced out like the restriction's (knapsack propagation, :meth:`_Rows.propagate`).

**Search.**  Best first: the node with the least bound is expanded (evaluated first when it was not yet:
children carry their parent's bound until then), so the proven bound, the least bound open, never falls.
Every rounding that fits in memory and beats the incumbent becomes the incumbent.

**Two node bounds.**  :func:`branch_and_bound` uses the Lagrangian + dual ascent above: ~0.4 CPU-s a node on V, but
weak in the interior (V, from the LP's duals, 300 s at load ~30: 1,323,173 -> 1,369,097 in 173 nodes).
:func:`lp_branch_and_bound` uses the LP relaxation itself, re-solved warm per node: 6-18 CPU-s a node on V, and
far stronger (fixing the first item's level alone: 1,323,319 to 3,294,956 over its six levels, three of them
above the optimum).  Neither is on :func:`~hloshard.solver.api.solve_problem`'s path.

**Cuts and fixing** (round 37).  :func:`lp_branch_and_bound` can add the memory rows' cover inequalities
(:mod:`~hloshard.solver.covers`; global cuts, kept by every later node) and fix by reduced cost against the
incumbent.  On V (load 16-26): seven rounds of covers at the root raise the LP from 1,323,173 to 1,346,024, after
which no row has a violated cover; reduced-cost fixing against a 1,670,909 incumbent removes 228,197 of the LP's
411,703 variables; 1,800 s (~232 CPU-s) of the tree end at 1,366,631 (no node cuts) / 1,369,650 (three rounds per
node), where round 36's tree was at 1,361,761 after 243 CPU-s; after 2,450 s (534 CPU-s, 34 nodes) 1,404,233, where
round 36's tree was at 1,405,708 after 510 CPU-s: the cuts' lead is gone by then (fewer, costlier nodes).

**Strong branching** (round 38, ``lp_branch_and_bound(strong=K)``).  After the cuts V's LP is a ~0.535 / 0.465 mix
of two plans over 145 of its 208 nodes, and which disjunction a node splits on decides what a branching proves
(round 37's probe at the cut root: "node 58 at its largest strategy / not" raises the weaker side by 69,688, the
most fractional nodes' by far less).  So a node branches on a binary disjunction "reduced node ``i`` at strategy
``a`` / not at ``a``" (each side strictly smaller: the tree stays complete), chosen among ``K`` candidates ranked by
the LP's split of the node weighted by the priced cost at stake (:func:`_strong_candidates`) by strong branching:
both children of each candidate are solved (warm, the same GLOP) and the candidate whose weaker child is strongest
is kept (Applegate, Bixby, Chvatal & Cook's strong branching, as in Achterberg, Koch & Martin 2005, "Branching
rules revisited"); its children enter the heap with their LP bounds (their parent's if higher) and their own
candidates.  A side whose knapsack propagation or LP is infeasible has no solution and is dropped.  Each bound is a
certified LP bound of a restriction: the tree's bound is one whichever candidates are tried.  On V (``strong=1``, 10
root cover rounds, fixing against a 1,670,909 incumbent, load 3-5): optimal, 1,617,084 proven after 305 CPU-s and
41 LPs (round 37's probe: 1,419,926 after 472); ``strong=3`` makes the same choices at ~1.5-2x the LPs.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass, field

import numpy as np

from .bounds import DualBound
from .covers import separate_covers
from .cpsat import memory_rows
from .heuristic import LocalSearch
from .lp import _LocalPolytope
from .presolve import INF

#: subgradient steps at the root (its prices decide the items) and at every other node (warm from its parent)
ROOT_STEPS = 40
NODE_STEPS = 6
#: dual sweeps (passes) per subgradient step
PASSES = 10


@dataclass
class BranchResult:
    """``bound``: proven lower bound of the reduced problem's optimum (presolve offset included; the incumbent's
    objective when the tree is closed); ``objective``/``positions``: the best solution known (the one given, or
    one the search found), None without one; ``status``: 'optimal' (tree closed with a solution), 'infeasible'
    (closed without), 'limit' (time or node limit); ``nodes``: nodes evaluated; ``items``: reduced node ids
    branched on, in order; ``trace``: ``[seconds, bound, objective]`` each time either improved; ``fixed``: LP
    variables the root's reduced-cost fixing removed (:func:`lp_branch_and_bound` with ``fixing``)."""

    bound: int | None
    objective: int | None
    positions: np.ndarray | None
    status: str
    nodes: int
    items: list
    trace: list = field(default_factory=list)
    fixed: int = 0


class _Rows:
    """The memory rows of :func:`~hloshard.solver.cpsat.memory_rows` (the LP's and CP-SAT's: one per elementary
    interval of the usage profiles, ``sum_i d_i(x_i) <= rhs`` with ``d = U - min U``), as per reduced node a dense
    ``(|S_i|, rows)`` int64 matrix ``D_i`` (None for nodes in no row) and ``rhs`` (``(rows,)`` float, bytes)."""

    def __init__(self, red):
        n = red.num_nodes
        rows = memory_rows(red, np.arange(n, dtype=np.int64), np.ones(n, dtype=bool))
        profs = red.memory.profiles()
        self.sizes = [len(c) for c in red.costs]
        self.rhs = np.array([r for r, _ in rows], dtype=np.float64)
        self.D: list = [None] * n
        for k, (_, terms) in enumerate(rows):
            for li, q, i in terms:
                col = profs[i][1][:, q]
                if self.D[li] is None:
                    self.D[li] = np.zeros((self.sizes[li], len(rows)), dtype=np.int64)
                self.D[li][:, k] += col - col.min()

    def penalties(self, mu) -> list:
        return [np.zeros(k) if d is None else d @ mu for d, k in zip(self.D, self.sizes)]

    def price_error(self, mu) -> float:
        """Most the float Lagrangian terms (:meth:`penalties`, ``mu . rhs``) can be off from their exact values in
        all: ``(rows + 1) * 2**-52`` times the sums of the magnitudes (``mu >= 0``, ``D >= 0``), doubled."""
        eps = (len(self.rhs) + 1) * 2.0 ** -52
        err = eps * float(mu @ self.rhs)
        for d in self.D:
            if d is not None:
                err += eps * float((d @ mu).max())
        return 2.0 * err

    def loads(self, x) -> np.ndarray:
        out = np.zeros(len(self.rhs), dtype=np.int64)
        for i, d in enumerate(self.D):
            if d is not None:
                out += d[int(x[i])]
        return out

    def propagate(self, allowed, costs) -> list | None:
        """``allowed`` (per node a bool mask or None) with every strategy removed that cannot fit: its row usage
        plus the least usage of every other node over what it allows exceeds a row's ``rhs`` (knapsack
        propagation, to a fixed point); forbidden strategies (cost ``INF`` in ``costs``) removed too.  None when a
        node is left without a strategy (no solution)."""
        out = [None if a is None else a.copy() for a in allowed]
        for i, d in enumerate(self.D):
            if d is not None:
                fin = costs[i] < INF
                out[i] = fin if out[i] is None else out[i] & fin
        while True:
            mins = [None if d is None else d[a].min(axis=0) if a.any() else None for d, a in zip(self.D, out)]
            if any(d is not None and m is None for d, m in zip(self.D, mins)):
                return None
            total = np.zeros(len(self.rhs), dtype=np.int64)
            for m in mins:
                if m is not None:
                    total += m
            changed = False
            for i, d in enumerate(self.D):
                if d is None:
                    continue
                room = self.rhs - (total - mins[i])
                fits = out[i] & (d <= room[None, :]).all(axis=1)
                if not fits.any():
                    return None
                if not np.array_equal(fits, out[i]):
                    out[i] = fits
                    changed = True
            if not changed:
                return out

    def least(self, allowed) -> np.ndarray:
        """Least load of each row over the strategies ``allowed`` (per node a bool mask, or None: all)."""
        out = np.zeros(len(self.rhs), dtype=np.int64)
        for i, d in enumerate(self.D):
            if d is not None:
                a = allowed[i]
                out += (d if a is None else d[a]).min(axis=0)
        return out


def memory_items(red, usage: _Rows, mu) -> tuple[list, list]:
    """``(items, levels)``: reduced node ids whose usage varies at the points ``mu`` prices (``mu > 0``), in
    decreasing order of their priced spread (module docstring), and per item an ``(|S_i|,)`` int array, the
    level of each strategy (equal usage at those points, equal level; levels numbered from 0)."""
    crit = np.nonzero(np.asarray(mu) > 0)[0]
    if not len(crit):
        return [], []
    scored = []
    for i, w in enumerate(usage.D):
        if w is None:
            continue
        sub = w[:, crit]
        spread = sub.max(axis=0) - sub.min(axis=0)
        if not spread.any():
            continue
        _, level = np.unique(sub, axis=0, return_inverse=True)
        scored.append((-float(spread @ np.asarray(mu)[crit]), i, level.reshape(-1).astype(np.int64)))
    scored.sort(key=lambda t: (t[0], t[1]))
    return [i for _, i, _ in scored], [lv for _, _, lv in scored]


class _Progress:
    """The incumbent and the bound trace both trees keep: ``x`` (strategy per node) and ``best`` (its objective,
    offset included) of the best feasible solution offered, ``lo`` the best bound noted, ``trace`` ``[seconds, bound,
    objective]`` each time either improved (``progress`` called with the same three)."""

    def __init__(self, ls, off: int, t0: float, progress, incumbent):
        self.ls, self.off, self.t0, self.progress = ls, off, t0, progress
        self.x, self.best, self.lo, self.trace = None, None, None, []
        if incumbent is not None:
            x = np.asarray(incumbent, dtype=np.int64)
            if ls.feasible(x):
                self.x, self.best = x.copy(), ls.objective(x) + off

    def note(self, bound) -> None:
        if bound is not None and (self.lo is None or bound > self.lo):
            self.lo = bound
        self.trace.append([round(time.monotonic() - self.t0, 3), self.lo, self.best])
        if self.progress is not None:
            self.progress(self.trace[-1][0], self.lo, self.best)

    def offer(self, x) -> None:
        if self.ls.feasible(x):
            o = self.ls.objective(x) + self.off
            if self.best is None or o < self.best:
                self.x, self.best = x.copy(), o
                self.note(None)


def branch_and_bound(red, time_limit: float, incumbent=None, max_nodes: int | None = None,
                     progress=None, start=None) -> BranchResult:
    """Branch and bound over the memory items of the reduced problem ``red`` (module docstring).

    ``time_limit``: wall seconds (checked between subgradient steps); ``incumbent``: optional positions per
    reduced node of a solution (its objective prunes; without one the first rounding that fits in memory is
    taken); ``max_nodes``: most nodes evaluated; ``progress(seconds, bound, objective)`` on each improvement;
    ``start``: ``(prow, pcol, rows)`` of :func:`~hloshard.solver.lp.lp_potentials` (the LP's optimal duals as edge
    potentials and memory row prices): the root starts from them, at the LP's bound; without it from zero.
    Raises ValueError for a problem without memory constraints (there is nothing to branch on: the dual
    bound of :mod:`~hloshard.solver.bounds` is the same bound)."""
    if red.memory is None:
        raise ValueError("branch_and_bound: the problem has no memory constraints")
    t0 = time.monotonic()
    deadline = t0 + float(time_limit)
    n = red.num_nodes
    off = int(red.offset)
    ls = LocalSearch(red, seed=0)
    usage = _Rows(red)
    caps = usage.rhs
    order = np.arange(n, dtype=np.int64)
    track = _Progress(ls, off, t0, progress, incumbent)
    note, offer = track.note, track.offer

    dual = DualBound(red)
    big = sum(float(c[c < INF].max()) for c in red.costs if (c < INF).any()) + \
        sum(float(m[m < INF].max()) for m in red.edge_costs if (m < INF).any())

    def evaluate(allowed, state, mu0, steps):
        """(bound, state, mu) of the node whose strategies are ``allowed``, from ``state`` and prices ``mu0``."""
        allowed = usage.propagate(allowed, red.costs)
        if allowed is None:
            return None, None, None   # no solution fits
        dual.set_state(state)
        pen = (track.best if track.best is not None else big) + 1.0
        forbid = [np.zeros(len(c)) if a is None else np.where(a, 0.0, pen) for c, a in zip(red.costs, allowed)]
        mu = np.asarray(mu0, dtype=np.float64).copy()
        best = None
        keep = (None, None)
        for _ in range(steps):
            dual.set_extra([f + q for f, q in zip(forbid, usage.penalties(mu))])
            dual.sweep(PASSES)
            # the float value picks the best step; only that one is certified (below), or one that closes the node
            b = dual.value() - float(mu @ caps) + off
            if best is None or b > best:
                best, keep = b, (dual.state(), mu.copy())
            if track.best is not None and b >= track.best and \
                    dual.certified(-float(mu @ caps), usage.price_error(mu)) + off >= track.best:
                break
            if time.monotonic() > deadline:
                break
            x = dual.decode(order)
            offer(x)
            g = (usage.loads(x) - caps).astype(np.float64)
            gg = float(g @ g)
            target = track.best if track.best is not None else b + 0.05 * max(1.0, abs(b))
            if gg <= 0:
                break
            mu = np.maximum(0.0, mu + max(1.0, target - b) / gg * g)
        dual.set_state(keep[0])
        return dual.certified(-float(keep[1] @ caps), usage.price_error(keep[1])) + off, keep[0], keep[1]

    root_allowed = [None] * n
    mu0 = np.zeros(len(caps))
    if start is not None:
        prow, pcol, rows = start
        dual.set_potentials(prow, pcol)
        if rows:
            if len(rows) != len(caps):
                raise ValueError(f"branch_and_bound: {len(rows)} priced rows for {len(caps)} memory rows")
            mu0 = np.array([float(r[0]) for r in rows], dtype=np.float64)
    root_bound, root_state, root_mu = evaluate(root_allowed, dual.state(), mu0, ROOT_STEPS)
    if root_bound is None:
        return BranchResult(None, None, None, "infeasible", 1, [], track.trace)
    note(root_bound)
    items, levels = memory_items(red, usage, root_mu)
    # then every other node with a choice, its strategies as levels (program order): the tree is complete, a leaf
    # is one solution, its bound its cost (or no solution)
    for i in range(n):
        if int((red.costs[i] < INF).sum()) > 1:
            items.append(i)
            levels.append(np.arange(len(red.costs[i]), dtype=np.int64))
    # heap entries: (bound, tie, evaluated, fixed levels per item (tuple, -1 free), state, mu)
    heap = [(root_bound, 0, True, tuple([-1] * len(items)), root_state, root_mu)]
    tie = 1
    evaluated = 1
    def open_bound():
        vals = [heap[0][0]] if heap else []
        low = min(vals) if vals else None
        if track.best is not None:
            low = track.best if low is None else min(low, track.best)
        return low
    while heap:
        if time.monotonic() > deadline or (max_nodes is not None and evaluated >= max_nodes):
            break
        bound, _, done, fixed, state, mu = heapq.heappop(heap)
        if track.best is not None and bound >= track.best:
            heapq.heappush(heap, (bound, tie, done, fixed, state, mu))   # every open node is closed
            tie += 1
            break
        allowed = [None] * n
        for k, lv in enumerate(fixed):
            if lv >= 0:
                i = items[k]
                allowed[i] = (levels[k] == lv) if allowed[i] is None else allowed[i] & (levels[k] == lv)
        if not done:
            b, st, m = evaluate(allowed, state, mu, NODE_STEPS)
            evaluated += 1
            if b is None:
                continue
            heapq.heappush(heap, (max(bound, b), tie, True, fixed, st, m))
            tie += 1
            now = open_bound()
            if now is not None and (track.lo is None or now > track.lo):
                note(now)
            continue
        # branch: the first item with more than one level left
        left = []
        for k, lv in enumerate(fixed):
            if lv < 0:
                i = items[k]
                ok = red.costs[i] < INF if allowed[i] is None else allowed[i] & (red.costs[i] < INF)
                left = np.unique(levels[k][ok]).tolist()
                if len(left) > 1:
                    break
        else:
            # one strategy left at every node: the node is one solution, known exactly
            x = np.array([int(np.argmax((red.costs[i] < INF) if a is None else a & (red.costs[i] < INF)))
                          for i, a in enumerate(allowed)], dtype=np.int64)
            offer(x)
            continue
        for lv in left:
            child = list(fixed)
            child[k] = lv
            heapq.heappush(heap, (bound, tie, False, tuple(child), state, mu))
            tie += 1
    if not heap or (track.best is not None and heap[0][0] >= track.best):
        final = track.best
        status = "optimal" if track.best is not None else "infeasible"
    else:
        final = open_bound()
        status = "limit"
    note(final)
    return BranchResult(final, track.best, track.x, status, evaluated, items, track.trace)


def lp_branch_and_bound(red, time_limit: float, incumbent=None, max_nodes: int | None = None,
                        progress=None, root_cuts: int = 0, node_cuts: int = 0, fixing: bool = False,
                        strong: int = 0) -> BranchResult:
    """The same tree as :func:`branch_and_bound` (memory items' levels first, then every node with a choice; best
    first; a leaf is one solution), with the LP relaxation of :mod:`~hloshard.solver.lp` as the node bound: GLOP
    keeps one solver and its basis, a node's restriction is set as upper bounds 0 on the strategies outside it and
    the dual simplex starts from the last basis (GLOP's presolve off, :data:`~hloshard.solver.lp.INCREMENTAL_PARAMS`);
    each bound is certified from the node's duals with the node's upper bounds (:func:`~hloshard.solver.lp._certified`).
    Measured on contest V (load 33): the root LP 60.8 CPU-s; fixing the first item's level, a warm re-solve took
    6.4-9.7 CPU-s and raised the bound from 1,323,173 to 1,566,707-1,597,721, where the Lagrangian bound of
    :func:`branch_and_bound` gave its children ~1.33 M.  The items and their order come from the root LP's memory
    prices; a node branches on the item whose LP levels are the most fractional (the most-fractional rule).  Arguments and
    result as :func:`branch_and_bound` (``time_limit`` in wall seconds, checked between
    solves; a solve is given what is left).  ``root_cuts`` / ``node_cuts``: most rounds of cover inequalities of the
    memory rows (:func:`~hloshard.solver.covers.separate_covers`, global cuts: every later node keeps them) separated
    at the root's / every other node's LP values and the LP re-solved warm, while a round finds a violated one.
    ``fixing``: reduced-cost fixing against the incumbent (:meth:`~hloshard.solver.lp._LocalPolytope.fixable`): at the
    root every LP variable it fixes is removed for the whole tree, at a node its strategies for the node's subtree.
    ``strong`` > 0: branch instead on binary strategy disjunctions chosen by strong branching
    (:func:`_strong_candidates`, module docstring "Strong branching"): at every node both children of the
    ``strong`` best candidates are solved and the candidate whose weaker child is strongest is taken.
    Raises ValueError without memory constraints."""
    if red.memory is None:
        raise ValueError("lp_branch_and_bound: the problem has no memory constraints")
    t0 = time.monotonic()
    deadline = t0 + float(time_limit)
    n = red.num_nodes
    off = int(red.offset)
    ls = LocalSearch(red, seed=0)
    usage = _Rows(red)
    track = _Progress(ls, off, t0, progress, incumbent)
    note, offer = track.note, track.offer

    lp = _LocalPolytope(red)
    base_ub = lp.ub.copy()

    def run(left):
        res = lp.solve(left, None, incremental=True)
        if res is None and not lp.infeasible and deadline - time.monotonic() > 0.05:
            # GLOP without its presolve can end 'abnormal' (contest A's root): solve the node afresh instead
            res = lp.solve(deadline - time.monotonic(), None, incremental=False)
        return res

    def solve(allowed, rounds=0):
        """Certified LP bound of the node (None: infeasible, or not solved in time) and its LP rounding, after up
        to ``rounds`` rounds of cover cuts (the best bound of the node's solves: each is a bound)."""
        want = base_ub.copy()
        for i, a in enumerate(allowed):
            if a is not None:
                want[lp.xoff[i]:lp.xoff[i] + len(a)] &= a.astype(np.int64)
        lp.infeasible = False
        left = deadline - time.monotonic()
        if left <= 0.05 or not lp.restrict(want):
            return None, None, None, None
        res = run(left)
        if res is None:
            return None, None, None, None
        bound, values = res
        last = res[0]
        for _ in range(rounds):
            if track.best is not None and bound >= track.best:
                break
            left = deadline - time.monotonic()
            cuts = separate_covers(usage.D, usage.rhs, np.split(values[:lp.nx], lp.xoff[1:]), lp.xoff)
            if not cuts or left <= 0.05:
                break
            for ids, coefs, rhs in cuts:
                lp.add(ids, coefs, rhs, 1)
            res = run(left)
            if res is None:
                break
            bound, values, last = max(bound, res[0]), res[1], res[0]
        fix = lp.fixable(lp.duals, last, track.best) if fixing and track.best is not None else None
        return bound, lp.positions(values), values[:lp.nx], fix

    root_allowed = [None] * n
    allowed0 = usage.propagate(root_allowed, red.costs)
    if allowed0 is None:
        return BranchResult(None, track.best, track.x, "infeasible", 0, [], track.trace)
    rb, rpos, rx, fix = solve(allowed0)
    if rb is None:
        note(track.best)
        return BranchResult(track.best, track.best, track.x, "limit", 1, [], track.trace)
    offer(rpos)
    note(rb if track.best is None else min(rb, track.best))
    # the items come from the memory rows' prices before any cut (cuts take over part of their prices)
    prices = lp.memory_prices(lp.duals)
    nofix = np.zeros(lp.nx, dtype=bool)
    fixed_root = 0
    if root_cuts:
        b, pos, bx, fix2 = solve(allowed0, root_cuts)
        if b is not None:
            rb, rx, fix = max(rb, b), bx, fix2
            offer(pos)
            note(rb if track.best is None else min(rb, track.best))
    mu = np.array([r[0] for r in prices], dtype=np.float64) if prices else np.zeros(len(usage.rhs))
    items, levels = memory_items(red, usage, mu)
    n_mem = len(items)
    for i in range(n):
        if int((red.costs[i] < INF).sum()) > 1:
            items.append(i)
            levels.append(np.arange(len(red.costs[i]), dtype=np.int64))

    def pick(fixed, x):
        """The item to branch on: the memory item whose LP levels are the most fractional (``1 -`` its largest
        level's LP mass; the usual most-fractional rule), else the most fractional other node, else the first with
        more than one level left; None when none is."""
        best_k, best_f = None, 1e-6
        first = None
        for k, lv in enumerate(fixed):
            if lv >= 0:
                continue
            if best_k is not None and k >= n_mem:
                break   # a fractional memory item first: the other nodes' strategies make many children
            i = items[k]
            lvl = levels[k]
            if len(np.unique(lvl[red.costs[i] < INF])) < 2:
                continue
            if first is None:
                first = k
            if x is None:
                break
            mass = np.bincount(lvl, weights=np.clip(x[lp.xoff[i]:lp.xoff[i] + len(lvl)], 0.0, 1.0))
            f = 1.0 - float(mass.max())
            if f > best_f:
                best_k, best_f = k, f
        return best_k if best_k is not None else first

    if fix is not None:
        base_ub[fix] = 0   # removed for the whole tree (no solution better than the incumbent takes them)
        fixed_root = int(fix.sum())
    if strong > 0:
        return _strong_tree(red, lp, usage, track, solve, base_ub, allowed0, rb, rx, int(strong), node_cuts,
                            deadline, max_nodes, fixed_root)
    heap = [(rb, 0, True, tuple([-1] * len(items)), pick(tuple([-1] * len(items)), rx), nofix)]
    tie, evaluated = 1, 1

    def open_bound():
        low = heap[0][0] if heap else None
        if track.best is not None:
            low = track.best if low is None else min(low, track.best)
        return low

    while heap:
        if time.monotonic() > deadline or (max_nodes is not None and evaluated >= max_nodes):
            break
        bound, _, done, fixed, branch_k, xfix = heapq.heappop(heap)
        if track.best is not None and bound >= track.best:
            heapq.heappush(heap, (bound, tie, done, fixed, branch_k, xfix))
            tie += 1
            break
        allowed = [None] * n
        for k, lv in enumerate(fixed):
            if lv >= 0:
                i = items[k]
                allowed[i] = (levels[k] == lv) if allowed[i] is None else allowed[i] & (levels[k] == lv)
        gone = xfix | (base_ub[:lp.nx] == 0)
        if gone.any():
            for i in np.unique(np.searchsorted(lp.xoff, np.nonzero(gone)[0], side="right") - 1).tolist():
                keep = ~gone[lp.xoff[i]:lp.xoff[i] + len(red.costs[i])]
                allowed[i] = keep if allowed[i] is None else allowed[i] & keep
        allowed = usage.propagate(allowed, red.costs)
        if allowed is None:
            continue
        if not done:
            b, pos, bx, nfix = solve(allowed, node_cuts)
            if b is None:
                if time.monotonic() > deadline:
                    heapq.heappush(heap, (bound, tie, False, fixed, None, xfix))
                    tie += 1
                    break
                evaluated += 1
                if not lp.infeasible:   # GLOP failed: the node keeps its parent's bound and is branched on
                    heapq.heappush(heap, (bound, tie, True, fixed, pick(fixed, None), xfix))
                    tie += 1
                continue   # infeasible LP: no solution in the node
            evaluated += 1
            offer(pos)
            if nfix is not None:
                xfix = xfix | nfix[:lp.nx]
            heapq.heappush(heap, (max(bound, b), tie, True, fixed, pick(fixed, bx), xfix))
            tie += 1
            now = open_bound()
            if now is not None and (track.lo is None or now > track.lo):
                note(now)
            continue
        left = []
        order_k = ([branch_k] if branch_k is not None else []) + [k for k, lv in enumerate(fixed) if lv < 0]
        for k in order_k:
            i = items[k]
            ok = allowed[i] if allowed[i] is not None else red.costs[i] < INF
            left = np.unique(levels[k][ok]).tolist()
            if len(left) > 1:
                break
        else:
            x = np.array([int(np.argmax((red.costs[i] < INF) if a is None else a & (red.costs[i] < INF)))
                          for i, a in enumerate(allowed)], dtype=np.int64)
            offer(x)
            continue
        for lv in left:
            child = list(fixed)
            child[k] = lv
            heapq.heappush(heap, (bound, tie, False, tuple(child), None, xfix))
            tie += 1
    if not heap or (track.best is not None and heap[0][0] >= track.best):
        final, status = track.best, ("optimal" if track.best is not None else "infeasible")
    else:
        final, status = open_bound(), "limit"
    note(final)
    return BranchResult(final, track.best, track.x, status, evaluated, items, track.trace, fixed_root)


def _strong_candidates(red, lp, base_ub, allowed, x, y, k: int) -> list:
    """Up to ``k`` binary disjunctions ``(i, a)`` ("reduced node ``i`` at strategy ``a`` / not at it") to try at a
    node whose LP values are ``x`` (``(nx,)`` floats) and duals ``y`` (one per LP row), best first; ``[]`` when
    every node has one strategy left (``allowed``: per node a bool mask or None; ``base_ub``: the tree's upper
    bounds).  ``a`` is the node's largest LP strategy; a node is scored by ``f * stake``: ``f = min(x_a, 1 - x_a)``
    (how split it is between ``a`` and the rest) times ``stake = sum_s x_s |p_s - p_a|``, the mass-weighted
    difference of its priced costs ``p = c - A^T y`` over the inequality rows (memory rows and cuts: node cost plus
    what the LP's duals charge for its memory), so that a node the LP splits between plans whose costs or memory
    differ comes first (round 37's probe on V's cut root: the best disjunctions are on nodes split ~0.535 / 0.465
    between two plans, not the most fractional ones).  Ties: larger ``f``, then the lower node id.  Without a
    fractional node, the first node with two strategies left at its largest LP strategy (so the tree is
    complete)."""
    aty = np.zeros(lp.nx)
    for r in range(lp.first_memory_row, min(len(lp.cons_rhs), len(y))):   # rows added after ``y``: no price
        yr = float(y[r])
        if yr != 0.0:
            np.add.at(aty, lp.cons_idx[r], lp.cons_coef[r] * yr)
    priced = lp.cost[:lp.nx] - aty
    scored, first = [], None
    for i in range(lp.n):
        lo, hi = int(lp.xoff[i]), int(lp.xoff[i] + lp.sizes[i])
        ok = (red.costs[i] < INF) & (base_ub[lo:hi] > 0)
        if allowed[i] is not None:
            ok = ok & allowed[i]
        if int(ok.sum()) < 2:
            continue
        blk = np.where(ok, np.clip(x[lo:hi], 0.0, 1.0), 0.0)
        a = int(np.argmax(np.where(ok, blk, -1.0)))
        if first is None:
            first = (i, a)
        f = min(float(blk[a]), 1.0 - float(blk[a]))
        if f <= 1e-6:
            continue
        stake = float(blk @ np.abs(priced[lo:hi] - priced[lo + a]))
        scored.append((-(f * stake), -f, i, a))
    scored.sort()
    out = [(i, a) for _, _, i, a in scored[:k]]
    return out if out or first is None else [first]


def _strong_tree(red, lp, usage, track, solve, base_ub, allowed0, rb, rx, k, node_cuts, deadline, max_nodes,
                 fixed_root) -> BranchResult:
    """The best-first loop of :func:`lp_branch_and_bound` with ``strong`` = ``k`` (module docstring, "Strong
    branching").  A node is ``allowed`` (per reduced node a bool mask or None) with its bound and its candidates
    (:func:`_strong_candidates`, computed from its own LP right after it was solved).  Expanding it solves both
    children of each candidate (knapsack propagation first, :meth:`_Rows.propagate`; reduced-cost fixing of the
    child's subtree when ``solve`` gives one) and keeps the candidate whose weaker child is strongest; its
    children enter the heap already solved.  Every bound is a certified LP bound of a restriction, or the least of
    the two sides of a complete disjunction: the tree's bound is one whatever the candidates."""
    note, offer = track.note, track.offer
    evaluated = 1
    branched: list = []
    heap = [(rb, 0, allowed0, _strong_candidates(red, lp, base_ub, allowed0, rx, lp.duals, k))]
    tie = 1

    def open_bound():
        low = heap[0][0] if heap else None
        if track.best is not None:
            low = track.best if low is None else min(low, track.best)
        return low

    def child(allowed, i, a, at):
        ok = (red.costs[i] < INF) if allowed[i] is None else allowed[i].copy()
        if at:
            ok = ok & (np.arange(len(ok)) == a)
        else:
            ok = ok.copy()
            ok[a] = False
        ch = list(allowed)
        ch[i] = ok
        return usage.propagate(ch, red.costs)

    stopped = False
    while heap and not stopped:
        if time.monotonic() > deadline or (max_nodes is not None and evaluated >= max_nodes):
            break
        bound, _, allowed, cands = heapq.heappop(heap)
        if track.best is not None and bound >= track.best:
            heapq.heappush(heap, (bound, tie, allowed, cands))
            tie += 1
            break
        if not cands:   # one strategy left per node: a solution
            offer(np.array([int(np.argmax((red.costs[i] < INF) if a is None else a & (red.costs[i] < INF)))
                            for i, a in enumerate(allowed)], dtype=np.int64))
            continue
        picked = None
        for i, a in cands:
            kids = []
            for at in (True, False):
                ch = child(allowed, i, a, at)
                if ch is None:
                    kids.append(None)    # no strategy fits in memory: no solution on this side
                    continue
                b, pos, bx, nfix = solve(ch, node_cuts)
                if b is None:
                    if time.monotonic() > deadline:
                        stopped = True
                        break
                    evaluated += 1
                    # infeasible LP: no solution on this side; GLOP failed: the side keeps its parent's bound
                    kids.append(None if lp.infeasible else
                                (bound, ch, _strong_candidates(red, lp, base_ub, ch, np.zeros(lp.nx), lp.duals, k)))
                    continue
                evaluated += 1
                offer(pos)
                if nfix is not None:
                    gone = nfix[:lp.nx]
                    for j in np.unique(np.searchsorted(lp.xoff, np.nonzero(gone)[0], side="right") - 1).tolist():
                        keep = ~gone[lp.xoff[j]:lp.xoff[j] + lp.sizes[j]]
                        ch[j] = keep if ch[j] is None else ch[j] & keep
                kids.append((max(bound, b), ch, _strong_candidates(red, lp, base_ub, ch, bx, lp.duals, k)))
            if stopped:
                break
            score = min(np.inf if kid is None else kid[0] for kid in kids)
            if picked is None or score > picked[0]:
                picked = (score, i, kids)
            if track.best is not None and score >= track.best:
                break    # both sides closed: nothing in this node beats the incumbent
        if picked is None or stopped:
            # a complete disjunction's weaker side is still a bound of the node
            if picked is None or picked[0] < np.inf:
                heapq.heappush(heap, (bound if picked is None else int(picked[0]), tie, allowed, cands))
                tie += 1
            break
        branched.append(picked[1])
        for kid in picked[2]:
            if kid is None or (track.best is not None and kid[0] >= track.best):
                continue
            heapq.heappush(heap, (kid[0], tie, kid[1], kid[2]))
            tie += 1
        now = open_bound()
        if now is not None and (track.lo is None or now > track.lo):
            note(now)
    if not heap or (track.best is not None and heap[0][0] >= track.best):
        final, status = track.best, ("optimal" if track.best is not None else "infeasible")
    else:
        final, status = open_bound(), "limit"
    note(final)
    return BranchResult(final, track.best, track.x, status, evaluated, branched, track.trace, fixed_root)
