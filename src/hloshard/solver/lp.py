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

import math
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
MAX_COST_BITS = 34  # GLOP ended optimal on the 3-layer sample (costs up to 1.5e10 < 2**34) unscaled


def lp_size(red) -> int:
    """Number of LP variables (node strategies + allowed edge pairs): what :func:`lp_bound` costs."""
    return int(sum(len(c) for c in red.costs) + sum(int((m < INF).sum()) for m in red.edge_costs))


def lp_bound(red, time_limit: float, deterministic_limit: float | None = None):
    """``(bound, positions)`` of :func:`lp_solve`, positions only when the LP optimum is integral."""
    bound, positions, integral = lp_solve(red, time_limit, deterministic_limit)
    return bound, positions if integral else None


def lp_solve(red, time_limit: float, deterministic_limit: float | None = None):
    """``(bound, positions, integral)``: a proven lower bound of the reduced problem's optimum (presolve
    offset included; a Python int) from the LP relaxation (module docstring), or ``(None, None,
    False)`` when GLOP ends without an optimal LP basis; ``positions``: per reduced node the strategy
    with the largest LP value (``(n,)`` int64); ``integral``: whether the LP optimum is integral (then
    ``positions`` is an optimal solution of the relaxation and, if feasible, of the problem; else it
    is only a rounding, a starting point for local search).

    ``time_limit``: wall seconds for GLOP (a safety net in deterministic mode);
    ``deterministic_limit``: GLOP's deterministic-time limit (then the result does not depend on the
    machine's load).
    """
    n = red.num_nodes
    sizes = np.array([len(c) for c in red.costs], dtype=np.int64)
    xoff = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    nx = int(sizes.sum())
    node_cost = np.concatenate(red.costs).astype(np.int64) if n else np.zeros(0, np.int64)
    allowed_x = node_cost < INF

    # edge variables: per edge the allowed pairs (row-major), ids from nx on
    evars = []  # (u, v, rows, cols, first id, costs)
    nvar = nx
    for (u, v), m in zip(red.edges.tolist(), red.edge_costs):
        rows, cols = np.nonzero(m < INF)
        evars.append((u, v, rows.astype(np.int64), cols.astype(np.int64), nvar, m[rows, cols].astype(np.int64)))
        nvar += len(rows)

    model = linear_solver_pb2.MPModelProto()
    cost_all = np.zeros(nvar, dtype=np.int64)
    ub_all = np.ones(nvar, dtype=np.int64)
    cost_all[:nx] = np.where(allowed_x, node_cost, 0)
    ub_all[:nx] = allowed_x
    for _, _, _, _, first, c in evars:
        cost_all[first:first + len(c)] = c
    # objective scaled by a power of two (exact in floats) so that its largest coefficient is at most
    # 2**MAX_COST_BITS: GLOP ends "abnormal" on the tie-broken costs of ``solve`` (up to 3e13); the
    # duals of the scaled LP times the scale are duals of the original one
    big = int(np.abs(cost_all).max()) if nvar else 0
    shift = max(0, big.bit_length() - MAX_COST_BITS)
    for j in range(nvar):
        var = model.variable.add()
        var.lower_bound = 0.0
        var.upper_bound = float(ub_all[j])
        var.objective_coefficient = math.ldexp(float(cost_all[j]), -shift)
    # constraint rows as (indices, coefficients, lb, ub); kept for the exact certificate
    cons_idx, cons_coef, cons_rhs, cons_kind = [], [], [], []   # kind: 0 equality, 1 "<="

    def add(idx, coef, rhs, kind):
        cons_idx.append(np.asarray(idx, dtype=np.int64))
        cons_coef.append(np.asarray(coef, dtype=np.int64))
        cons_rhs.append(int(rhs))
        cons_kind.append(kind)

    for k in range(n):
        add(np.arange(xoff[k], xoff[k] + sizes[k]), np.ones(int(sizes[k])), 1, 0)
    for u, v, rows, cols, first, _ in evars:
        ids = first + np.arange(len(rows), dtype=np.int64)
        for a in range(int(sizes[u])):
            sel = ids[rows == a]
            add(np.append(sel, xoff[u] + a), np.append(np.ones(len(sel)), -1), 0, 0)
        for b in range(int(sizes[v])):
            sel = ids[cols == b]
            add(np.append(sel, xoff[v] + b), np.append(np.ones(len(sel)), -1), 0, 0)
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
            add(keys, [acc[key] for key in keys], rhs, 1)
    for idx, coef, rhs, kind in zip(cons_idx, cons_coef, cons_rhs, cons_kind):
        ct = model.constraint.add()
        ct.var_index.extend(idx.tolist())
        ct.coefficient.extend(coef.astype(np.float64).tolist())
        ct.upper_bound = float(rhs)
        ct.lower_bound = float(rhs) if kind == 0 else -math.inf

    req = linear_solver_pb2.MPModelRequest()
    req.model.CopyFrom(model)
    req.solver_type = linear_solver_pb2.MPModelRequest.GLOP_LINEAR_PROGRAMMING
    req.solver_time_limit_seconds = max(0.05, float(time_limit))
    params = [GLOP_PARAMS]
    if deterministic_limit is not None:
        params.append(f"max_deterministic_time: {max(0.01, float(deterministic_limit))}")
    req.solver_specific_parameters = " ".join(params)
    resp = linear_solver_pb2.MPSolutionResponse()
    pywraplp.Solver.SolveWithProto(req, resp)
    if resp.status != linear_solver_pb2.MPSOLVER_OPTIMAL or len(resp.dual_value) != len(cons_rhs):
        return None, None, False
    y = np.ldexp(np.array(resp.dual_value, dtype=np.float64), shift)
    kind = np.array(cons_kind, dtype=np.int64)
    y = np.where(kind == 1, np.minimum(y, 0.0), y)  # "<=" rows of a minimisation: y <= 0
    bound = _certified(cost_all, ub_all, cons_idx, cons_coef, cons_rhs, y) + int(red.offset)

    x = np.array(resp.variable_value[:nx], dtype=np.float64)
    integral = False
    if n and np.all(np.abs(x - np.round(x)) <= 1e-9):
        blocks = np.split(np.round(x).astype(np.int64), xoff[1:])
        integral = all(b.sum() == 1 for b in blocks)
    xs = np.where(allowed_x, x, -1.0)
    positions = np.array([int(np.argmax(b)) for b in np.split(xs, xoff[1:])], dtype=np.int64) if n else \
        np.zeros(0, dtype=np.int64)
    return bound, positions, integral


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
