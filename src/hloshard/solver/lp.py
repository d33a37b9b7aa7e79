"""The LP relaxation of a reduced problem (local polytope + memory rows), solved by GLOP, with an
exact lower-bound certificate from its dual.

**Why.**  The dual ascent of :mod:`~hloshard.solver.bounds` (MPLP star updates) is a block-coordinate
ascent on a non-smooth dual: it can stop at a fixed point below the LP optimum.  On the 3-layer
transformer sample (123 reduced nodes, 202,800 edge entries, no memory limit) it stalls 3.0% below
the incumbent, while the LP of the local polytope, solved exactly, equals the incumbent (the
relaxation is tight there).  Solving the LP with a simplex code gets the relaxation's true value.

**Formulation** (the LP relaxation of :mod:`~hloshard.solver.cpsat`'s model, same variables):
``x[i, a] in [0, 1]``, ``sum_a x[i, a] = 1``; one ``e[u, v, a, b] in [0, 1]`` per allowed (finite)
pair, ``sum_b e[u, v, a, b] = x[u, a]``, ``sum_a e[u, v, a, b] = x[v, b]``; the memory rows of
:func:`~hloshard.solver.cpsat.memory_rows` (``sum (U - min U) x <= rhs``).  Forbidden node strategies
get ``x <= 0``.

**Certificate.**  For *any* multipliers ``y`` (free on equalities, ``<= 0`` on the ``<=`` memory
rows of a minimisation) the Lagrangian ``L(y) = b.y + sum_j min(0, c_j - A_j.y)`` (every variable in
``[0, 1]``) is a lower bound of the LP optimum and so of the integer optimum.  GLOP's dual values are
floats; :func:`lp_bound` evaluates ``L(y)`` for them *exactly* (rational arithmetic on the float
values, only over the variables whose reduced cost is not clearly positive), so the bound is a proof
whatever GLOP's tolerances were; since every solution's objective is an integer, ``ceil(L(y))`` is
one too.  (Standard LP duality, e.g. Schrijver, *Theory of Linear and Integer Programming*, ch. 7;
the rounding-safe evaluation of a dual bound is the idea of Neumaier & Shcherbina 2004.)
"""

from __future__ import annotations

import heapq
import math
import time
from fractions import Fraction

import numpy as np
from ortools.linear_solver import linear_solver_pb2, pywraplp

from ..costgraph import INFINITY
from .cpsat import memory_rows

INF = np.int64(INFINITY)
#: GLOP parameters: the dual simplex (on the 3-layer transformer sample's LP, 205,819 variables, it
#: ends in ~4 s where GLOP's default primal simplex had not ended after 60 s: the relaxation is very
#: degenerate in the primal, as assignment-like LPs are)
GLOP_PARAMS = "use_dual_simplex: true"
#: GLOP parameters added for an LP solved again after rows are added (cycle inequalities): its presolve
#: would discard the previous optimal basis the dual simplex restarts from
INCREMENTAL_PARAMS = "use_preprocessing: false"
MAX_COST_BITS = 34  # GLOP ended optimal on the 3-layer sample (costs up to 1.5e10 < 2**34) unscaled


def lp_size(red) -> int:
    """Number of LP variables (node strategies + allowed edge pairs): what :func:`lp_bound` costs."""
    return int(sum(len(c) for c in red.costs) + sum(int((m < INF).sum()) for m in red.edge_costs))


def lp_bound(red, time_limit: float, deterministic_limit: float | None = None):
    """``(bound, positions)`` of :func:`lp_solve`, positions only when the LP optimum is integral."""
    bound, positions, integral = lp_solve(red, time_limit, deterministic_limit)
    return bound, positions if integral else None


def lp_potentials(red, time_limit: float, deterministic_limit: float | None = None):
    """``(bound, prow, pcol, rows)``: the LP relaxation's certified bound (presolve offset included, as
    :func:`lp_solve`), its optimal duals as edge potentials (:meth:`_LocalPolytope.edge_potentials`) and as memory
    row prices (:meth:`_LocalPolytope.memory_prices`, ``[]`` without memory), or ``(None, None, None, None)`` when
    GLOP ends without an optimal basis.  :mod:`hloshard.solver.branch` starts its tree from them (a dual ascent
    from this reparametrisation and these prices starts at the LP's bound, less float rounding).
    (Round 35, helper proof.)"""
    lp = _LocalPolytope(red)
    res = lp.solve(time_limit, deterministic_limit)
    if res is None:
        return None, None, None, None
    prow, pcol = lp.edge_potentials(lp.duals)
    return res[0], prow, pcol, lp.memory_prices(lp.duals)


class IterationBudget:
    """GLOP simplex iterations shared by several :func:`lp_solve` calls (deterministic mode: the
    iteration count, like GLOP's deterministic time, does not depend on the load, and GLOP reports it
    per solve, which it does not for its deterministic time).  ``left``: iterations still allowed;
    each solve is given ``max_number_of_iterations`` = what is left and is charged what it used."""

    def __init__(self, iterations: int):
        self.total = self.left = max(0, int(iterations))
        self.solves = 0

    def spent(self) -> bool:
        return self.left <= 0

    def charge(self, iterations: int) -> None:
        self.left -= max(0, int(iterations))
        self.solves += 1


def lp_solve(red, time_limit: float, deterministic_limit: float | None = None, cycle_rounds: int = 0,
             stats: dict | None = None, enough: int | None = None, budget: IterationBudget | None = None):
    """``(bound, positions, integral)``: a proven lower bound of the reduced problem's optimum (presolve
    offset included; a Python int) from the LP relaxation (module docstring), or ``(None, None,
    False)`` when GLOP ends without an optimal LP basis; ``positions``: per reduced node the strategy
    with the largest LP value (``(n,)`` int64); ``integral``: whether the LP optimum is integral (then
    ``positions`` is an optimal solution of the relaxation and, if feasible, of the problem; else it
    is only a rounding, a starting point for local search).

    ``time_limit``: wall seconds for GLOP (a safety net in deterministic mode; with ``cycle_rounds``
    the limit of all the solves together); ``deterministic_limit``: GLOP's deterministic-time limit
    (then the result does not depend on the machine's load; with ``cycle_rounds`` per solve).
    ``cycle_rounds``: after the first solve, up to this many rounds of *cycle inequalities*
    (:func:`separate_cycles`) violated by the LP optimum are added and the LP solved again; the bound
    is the best certified one of all the solves (each a bound on its own: the inequalities hold for
    every integral solution); they end once the bound reaches ``enough`` (offset included), when given.
    ``stats`` (a dict): ``"cycles"`` gets one ``[inequalities added, bound
    after]`` per round.  ``budget``: an :class:`IterationBudget` the solves draw on (they are
    incremental then, so that GLOP reports its iterations); none is started once it is spent, and a
    solve that reaches it ends like one at its time limit (no optimal basis: the best bound so far).
    """
    t0 = time.monotonic()
    lp = _LocalPolytope(red)
    t1 = time.monotonic()
    incremental = cycle_rounds > 0 or budget is not None
    if budget is not None and budget.spent():
        return None, None, False
    res = lp.solve(time_limit - (t1 - t0), deterministic_limit, incremental, budget)
    if stats is not None:
        stats["lp_build_s"] = round(t1 - t0, 3)
        stats["lp_first_s"] = round(time.monotonic() - t1, 3)
        stats["lp_vars"] = lp.nvar
    if res is None:
        return None, None, False
    bound, values = res
    best = bound
    for _ in range(cycle_rounds):
        if lp.integral(values) or (enough is not None and best >= enough):
            break
        left = time_limit - (time.monotonic() - t0)
        if left <= 0.05 or (budget is not None and budget.spent()):
            break
        cuts = separate_cycles(lp, values)
        if not cuts:
            break
        for idx, coef, rhs in cuts:
            lp.add(idx, coef, rhs, 1)
        res = lp.solve(left, deterministic_limit, incremental, budget)
        if res is None:
            break
        bound, values = res
        best = max(best, bound)
        if stats is not None:
            stats.setdefault("cycles", []).append([len(cuts), bound, round(time.monotonic() - t0, 3)])
    return best, lp.positions(values), lp.integral(values)


class _LocalPolytope:
    """The LP of the module docstring for a reduced problem ``red``: variables (node strategies, then
    per edge its allowed pairs row-major), rows kept for the exact certificate; :meth:`add` appends a
    row, :meth:`solve` runs GLOP on all rows so far."""

    def __init__(self, red):
        n = red.num_nodes
        self.red, self.n = red, n
        self.sizes = sizes = np.array([len(c) for c in red.costs], dtype=np.int64)
        self.xoff = xoff = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        nx = self.nx = int(sizes.sum())
        node_cost = np.concatenate(red.costs).astype(np.int64) if n else np.zeros(0, np.int64)
        self.allowed_x = allowed_x = node_cost < INF
        # edge variables: per edge the allowed pairs (row-major), ids from nx on
        self.evars = evars = []  # (u, v, rows, cols, first id, costs)
        nvar = nx
        for (u, v), m in zip(red.edges.tolist(), red.edge_costs):
            rows, cols = np.nonzero(m < INF)
            evars.append((u, v, rows.astype(np.int64), cols.astype(np.int64), nvar, m[rows, cols].astype(np.int64)))
            nvar += len(rows)
        self.nvar = nvar
        self.cost = cost_all = np.zeros(nvar, dtype=np.int64)
        self.ub = ub_all = np.ones(nvar, dtype=np.int64)
        cost_all[:nx] = np.where(allowed_x, node_cost, 0)
        ub_all[:nx] = allowed_x
        for _, _, _, _, first, c in evars:
            cost_all[first:first + len(c)] = c
        # objective scaled by a power of two (exact in floats) so that its largest coefficient is at most
        # 2**MAX_COST_BITS: GLOP ends "abnormal" on the tie-broken costs of ``solve`` (up to 3e13); the
        # duals of the scaled LP times the scale are duals of the original one
        big = int(np.abs(cost_all).max()) if nvar else 0
        self.shift = shift = max(0, big.bit_length() - MAX_COST_BITS)
        self.model = model = linear_solver_pb2.MPModelProto()
        for j in range(nvar):
            var = model.variable.add()
            var.lower_bound = 0.0
            var.upper_bound = float(ub_all[j])
            var.objective_coefficient = math.ldexp(float(cost_all[j]), -shift)
        # constraint rows as (indices, coefficients, rhs, kind: 0 equality, 1 "<="); kept for the certificate
        self.cons_idx, self.cons_coef, self.cons_rhs, self.cons_kind = [], [], [], []
        for k in range(n):
            self.add(np.arange(xoff[k], xoff[k] + sizes[k]), np.ones(int(sizes[k])), 1, 0)
        for u, v, rows, cols, first, _ in evars:
            ids = first + np.arange(len(rows), dtype=np.int64)
            for a in range(int(sizes[u])):
                sel = ids[rows == a]
                self.add(np.append(sel, xoff[u] + a), np.append(np.ones(len(sel)), -1), 0, 0)
            for b in range(int(sizes[v])):
                sel = ids[cols == b]
                self.add(np.append(sel, xoff[v] + b), np.append(np.ones(len(sel)), -1), 0, 0)
        self.first_memory_row = len(self.cons_rhs)
        if red.memory is not None:
            profs = red.memory.profiles()
            for rhs, terms in memory_rows(red, np.arange(n, dtype=np.int64), np.ones(n, dtype=bool)):
                acc: dict = {}
                for li, q, i in terms:
                    col = profs[i][1][:, q]
                    d = col - col.min()
                    for a in np.nonzero(d)[0].tolist():
                        key = int(xoff[li] + a)
                        acc[key] = acc.get(key, 0) + int(d[a])
                keys = sorted(acc)
                self.add(keys, [acc[key] for key in keys], rhs, 1)
        self.num_memory_rows = len(self.cons_rhs) - self.first_memory_row
        self._ub0 = self.ub.copy()

    def add(self, idx, coef, rhs, kind) -> None:
        """Append the row ``sum coef * x[idx] (= or <=) rhs`` (``kind`` 0 or 1; integer coefficients)."""
        idx = np.asarray(idx, dtype=np.int64)
        coef = np.asarray(coef, dtype=np.int64)
        self.cons_idx.append(idx)
        self.cons_coef.append(coef)
        self.cons_rhs.append(int(rhs))
        self.cons_kind.append(kind)
        ct = self.model.constraint.add()
        ct.var_index.extend(idx.tolist())
        ct.coefficient.extend(coef.astype(np.float64).tolist())
        ct.upper_bound = float(rhs)
        ct.lower_bound = float(rhs) if kind == 0 else -math.inf

    def solve(self, time_limit: float, deterministic_limit: float | None, incremental: bool = False,
              budget: IterationBudget | None = None):
        """``(certified bound with the presolve offset, variable values)`` or None without an optimal basis
        (``self.infeasible`` then says whether GLOP proved the LP infeasible, rather than stopping or failing).

        ``incremental``: keep GLOP's solver between calls (rows added since the last call are appended
        to it) so that a re-solve starts from the last optimal basis (the dual simplex after added
        rows; GLOP's presolve off, which would discard the basis: decoder2's pruned LP at 2x2x2, a
        re-solve after 40-70 cycle inequalities 0.6-1.1 s instead of 2.5-3.5 s from scratch)."""
        params = [GLOP_PARAMS] + ([INCREMENTAL_PARAMS] if incremental else [])
        if deterministic_limit is not None:
            params.append(f"max_deterministic_time: {max(0.01, float(deterministic_limit))}")
        if budget is not None:
            params.append(f"max_number_of_iterations: {max(1, budget.left)}")
        if incremental:
            return self._solve_incremental(time_limit, " ".join(params), budget)
        req = linear_solver_pb2.MPModelRequest()
        req.model.CopyFrom(self.model)
        for j in np.nonzero(self.ub != self._ub0)[0].tolist():   # :meth:`restrict`'s bounds (the proto keeps the first)
            req.model.variable[j].upper_bound = float(self.ub[j])
        req.solver_type = linear_solver_pb2.MPModelRequest.GLOP_LINEAR_PROGRAMMING
        req.solver_time_limit_seconds = max(0.05, float(time_limit))
        req.solver_specific_parameters = " ".join(params)
        resp = linear_solver_pb2.MPSolutionResponse()
        pywraplp.Solver.SolveWithProto(req, resp)
        self.infeasible = resp.status == linear_solver_pb2.MPSOLVER_INFEASIBLE
        if resp.status != linear_solver_pb2.MPSOLVER_OPTIMAL or len(resp.dual_value) != len(self.cons_rhs):
            return None
        return self._result(np.array(resp.dual_value, dtype=np.float64), np.array(resp.variable_value, dtype=np.float64))

    def restrict(self, ub) -> bool:
        """Set the variables' upper bounds to ``ub`` (``(nvar,)`` 0/1 ints) in the certificate and in the kept GLOP
        solver, made here when there is none yet, so that the next incremental :meth:`solve` starts from its
        last basis (the dual simplex after bound changes: :func:`~hloshard.solver.branch.lp_branch_and_bound`'s
        nodes).  False when GLOP cannot be made."""
        ub = np.asarray(ub, dtype=np.int64)
        solver = getattr(self, "_solver", None)
        if solver is None:
            solver = self._solver = pywraplp.Solver.CreateSolver("GLOP")
            if solver is None or solver.LoadModelFromProto(self.model):
                self._solver = None
                return False
            self._loaded = len(self.cons_rhs)
        xs = solver.variables()
        for j in np.nonzero(ub != self.ub)[0].tolist():
            xs[j].SetUb(float(ub[j]))
        self.ub = ub.copy()
        return True

    def _solve_incremental(self, time_limit: float, params: str, budget: IterationBudget | None = None):
        solver = getattr(self, "_solver", None)
        if solver is None:
            solver = self._solver = pywraplp.Solver.CreateSolver("GLOP")
            if solver is None or solver.LoadModelFromProto(self.model):
                self._solver = None
                return None
            self._loaded = len(self.cons_rhs)
        else:
            xs = solver.variables()
            for k in range(self._loaded, len(self.cons_rhs)):
                ub = float(self.cons_rhs[k])
                ct = solver.Constraint(ub if self.cons_kind[k] == 0 else -solver.infinity(), ub)
                for j, c in zip(self.cons_idx[k].tolist(), self.cons_coef[k].tolist()):
                    ct.SetCoefficient(xs[j], float(c))
            self._loaded = len(self.cons_rhs)
        solver.SetSolverSpecificParametersAsString(params)
        solver.SetTimeLimit(max(50, int(1000 * float(time_limit))))
        status = solver.Solve()
        if budget is not None:
            budget.charge(solver.iterations())
        self.infeasible = status == pywraplp.Solver.INFEASIBLE
        if status != pywraplp.Solver.OPTIMAL:
            return None
        cons = solver.constraints()
        if len(cons) != len(self.cons_rhs):
            return None
        return self._result(np.array([c.dual_value() for c in cons], dtype=np.float64),
                            np.array([v.solution_value() for v in solver.variables()], dtype=np.float64))

    def _result(self, duals, values):
        y = np.ldexp(duals, self.shift)
        kind = np.array(self.cons_kind, dtype=np.int64)
        y = np.where(kind == 1, np.minimum(y, 0.0), y)  # "<=" rows of a minimisation: y <= 0
        bound = _certified(self.cost, self.ub, self.cons_idx, self.cons_coef, self.cons_rhs, y) + int(self.red.offset)
        self.duals = y
        return bound, values

    def fixable(self, y, bound: int, incumbent: int) -> np.ndarray:
        """Reduced-cost fixing: a bool mask over the LP variables that no solution costing less than ``incumbent``
        takes, from the duals ``y`` and their certified ``bound`` (:meth:`_result`: ``ceil(L(y))`` with the presolve
        offset).  Every integral ``x`` that keeps the rows costs at least ``L(y) + rc_j`` when ``x_j = 1`` (``rc_j >
        0``; the other reduced costs add at least what ``L`` counts for them), and ``L(y) > bound - 1``; ``rc_j`` is
        taken less :func:`_certified`'s float margin (Nemhauser & Wolsey, *Integer and Combinatorial
        Optimization*, I.2.5: fixing by reduced cost)."""
        aty = np.zeros(self.nvar)
        mag = np.zeros(self.nvar)
        for idx, coef, yi in zip(self.cons_idx, self.cons_coef, np.asarray(y, dtype=np.float64).tolist()):
            if yi != 0.0:
                np.add.at(aty, idx, coef * yi)
                np.add.at(mag, idx, np.abs(coef * yi))
        rc = self.cost - aty
        margin = 1e-9 * (np.abs(self.cost) + mag) + 1e-6
        return (self.ub > 0) & (float(bound) - 1.0 + rc - margin >= float(incumbent))

    def edge_potentials(self, y) -> tuple:
        """``(prow, pcol)``: per edge the duals ``y`` of its row and column marginalisation rows (``sum_b x_e(a, b) -
        x_u(a) = 0`` and ``sum_a x_e(a, b) - x_v(b) = 0``, in the order :meth:`__init__` adds them), float arrays of
        ``|S_u|`` and ``|S_v|`` values.  They are a reparametrisation: the LP reduced cost of pair ``(a, b)`` is
        ``M_e(a, b) - prow[e][a] - pcol[e][b]`` (:mod:`hloshard.solver.bounds`' ``p_e``, ``q_e``)."""
        y = np.asarray(y, dtype=np.float64)
        k = self.n
        prow, pcol = [], []
        for u, v, *_ in self.evars:
            su, sv = int(self.sizes[u]), int(self.sizes[v])
            prow.append(y[k:k + su].copy())
            pcol.append(y[k + su:k + su + sv].copy())
            k += su + sv
        return prow, pcol

    def memory_prices(self, y) -> list:
        """The LP's memory rows with their prices: per row ``(mu, rhs, [(node, d), ...])`` with ``mu = -y >= 0`` its
        dual, ``rhs`` its right-hand side and, per node in it, ``d`` (int64 per strategy) the row's coefficients
        ``U - min U`` (:func:`~hloshard.solver.cpsat.memory_rows`).  For every ``x`` that keeps the row,
        ``mu * (sum_node d[x_node] - rhs) <= 0``: a Lagrangian price of the row."""
        y = np.asarray(y, dtype=np.float64)
        out = []
        for k in range(self.first_memory_row, self.first_memory_row + self.num_memory_rows):
            idx, coef = self.cons_idx[k], self.cons_coef[k]
            node = np.searchsorted(self.xoff, idx, side="right") - 1
            per: dict = {}
            for i, j, c in zip(node.tolist(), idx.tolist(), coef.tolist()):
                d = per.setdefault(i, np.zeros(int(self.sizes[i]), dtype=np.int64))
                d[j - int(self.xoff[i])] += c
            out.append((max(0.0, -float(y[k])), int(self.cons_rhs[k]), sorted(per.items())))
        return out

    def blocks(self, values) -> list:
        return np.split(values[:self.nx], self.xoff[1:]) if self.n else []

    def integral(self, values) -> bool:
        x = values[:self.nx]
        if not self.n or not np.all(np.abs(x - np.round(x)) <= 1e-9):
            return False
        return all(b.sum() == 1 for b in np.split(np.round(x).astype(np.int64), self.xoff[1:]))

    def positions(self, values) -> np.ndarray:
        xs = np.where(self.allowed_x, values[:self.nx], -1.0)
        return np.array([int(np.argmax(b)) for b in np.split(xs, self.xoff[1:])], dtype=np.int64) if self.n else \
            np.zeros(0, dtype=np.int64)


#: a cycle inequality is added when the LP optimum violates it by more than this (its left side is a
#: sum of LP values in [0, 1]; below it a cut moves the optimum by nothing worth a re-solve)
CYCLE_VIOLATION = 1e-3


def separate_cycles(lp: _LocalPolytope, values) -> list:
    """Cycle inequalities of the binary projections that the LP optimum ``values`` violates: rows
    ``(indices, coefficients, rhs)``, each meaning ``sum coef * var <= rhs`` over LP variable ids.

    **Projection** (Sontag & Jaakkola 2007, "New outer bounds on the marginal polytope"; Sontag et al.
    2012, "Efficiently searching for frustrated cycles in MAP inference"): each node's strategies are
    split into its strategy with the largest LP value (ties: the lowest index) and the rest, so every
    solution maps to a binary labelling; ``cut_e`` is the LP mass of edge ``e``'s pairs whose two
    strategies fall on different sides (a linear form in the edge variables).  Along any closed walk
    ``C`` an integral labelling changes side an even number of times, so for every ``F`` of odd size
    among the walk's steps ``sum_{F} (1 - cut_e) + sum_{C \\ F} cut_e >= 1`` (written as ``sum_F cut_e -
    sum_{C \\ F} cut_e <= |F| - 1``; Barahona & Mahjoub 1986, the cycle inequalities of the cut
    polytope).  The local polytope's half-integral optima break exactly these: two strategies per node
    at 1/2 each, paired across the edges so that a cycle changes side an odd number of times.

    **Separation**: for each node ``s`` (in order) the shortest closed walk from ``s`` with an odd number
    of steps in ``F`` is a shortest path from ``(s, 0)`` to ``(s, 1)`` in the doubled graph (a step keeps
    the parity at weight ``cut_e`` or flips it at weight ``1 - cut_e``; Dijkstra, weights in [0, 1]);
    it is violated when shorter than ``1 - CYCLE_VIOLATION``.  Walks found twice are added once."""
    n = lp.n
    label = lp.positions(values)
    adj: list = [[] for _ in range(n)]
    side = []
    for k, (u, v, rows, cols, first, _) in enumerate(lp.evars):
        sd = (rows == label[u]) != (cols == label[v])
        side.append(sd)
        c = float(values[first:first + len(rows)][sd].sum())
        c = min(1.0, max(0.0, c))
        adj[u].append((v, k, c))
        adj[v].append((u, k, c))
    cuts, seen = [], set()
    stop = 1.0 - CYCLE_VIOLATION
    for s in range(n):
        if not adj[s]:
            continue
        dist = {(s, 0): 0.0}
        prev: dict = {}
        heap = [(0.0, s, 0)]
        while heap:
            d, i, par = heapq.heappop(heap)
            if d > dist.get((i, par), math.inf) or d >= stop:
                if d >= stop:
                    break
                continue
            if (i, par) == (s, 1):
                break
            for j, k, c in adj[i]:
                for flip, w in ((0, c), (1, 1.0 - c)):
                    key = (j, par ^ flip)
                    nd = d + w
                    if nd < dist.get(key, math.inf) - 1e-12:
                        dist[key] = nd
                        prev[key] = (i, par, k, flip)
                        heapq.heappush(heap, (nd, j, par ^ flip))
        if dist.get((s, 1), math.inf) >= stop:
            continue
        walk, at = [], (s, 1)
        while at != (s, 0):
            i, par, k, flip = prev[at]
            walk.append((k, flip))
            at = (i, par)
        key = tuple(sorted(walk))
        if key in seen:
            continue
        seen.add(key)
        acc: dict = {}
        for k, flip in walk:
            first = lp.evars[k][4]
            for j in (first + np.nonzero(side[k])[0]).tolist():
                acc[j] = acc.get(j, 0) + (1 if flip else -1)
        nf = sum(flip for _, flip in walk)
        keys = sorted(j for j in acc if acc[j])
        cuts.append((keys, [acc[j] for j in keys], nf - 1))
    return cuts


def _certified(cost, ub, cons_idx, cons_coef, cons_rhs, y) -> int:
    """``ceil(L(y))`` evaluated exactly (module docstring): ``b.y + sum_j ub_j * min(0, c_j - A_j.y)``.

    The reduced costs are computed in floats first; only those not clearly positive (below a margin
    far above the float error) are recomputed with :class:`fractions.Fraction` (the float ``y`` values
    are exact dyadic rationals), so the result is exact for the given ``y``."""
    nvar = len(cost)
    # A^T y in floats, plus a bound on its rounding error per variable
    aty = np.zeros(nvar)
    mag = np.zeros(nvar)
    for idx, coef, yi in zip(cons_idx, cons_coef, y.tolist()):
        if yi != 0.0:
            np.add.at(aty, idx, coef * yi)
            np.add.at(mag, idx, np.abs(coef * yi))
    rc = cost - aty
    margin = 1e-9 * (np.abs(cost) + mag) + 1e-6
    unsure = np.nonzero((rc <= margin) & (ub > 0))[0]
    total = sum((Fraction(r) * Fraction(yi) for r, yi in zip(cons_rhs, y.tolist()) if r and yi), Fraction(0))
    if len(unsure):
        col = {int(j): Fraction(int(cost[j])) for j in unsure.tolist()}
        pos = np.full(nvar, False)
        pos[unsure] = True
        for idx, coef, yi in zip(cons_idx, cons_coef, y.tolist()):
            if yi == 0.0:
                continue
            hit = pos[idx]
            if not hit.any():
                continue
            fy = Fraction(yi)
            for j, a in zip(idx[hit].tolist(), coef[hit].tolist()):
                col[j] -= a * fy
        total += sum((min(Fraction(0), r) * int(ub[j]) for j, r in col.items()), Fraction(0))
    return math.ceil(total)
