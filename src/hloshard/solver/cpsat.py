"""The CP-SAT model of a (reduced) IOPDDL problem, built in bulk on the ``CpModelProto``.

Formulation (variables are 0/1):

* ``x[i, a]``: node ``i`` takes strategy ``a``; ``sum_a x[i, a] = 1`` (exactly-one per node);
* ``e[u, v, a, b]`` for each edge and each *allowed* pair (finite cost) only: forbidden pairs have
  no variable, so they cannot be chosen;
* tight (local-marginal) edge linking: ``sum_b e[u, v, a, b] = x[u, a]`` for every ``a`` and
  ``sum_a e[u, v, a, b] = x[v, b]`` for every ``b``.  Its LP relaxation is much stronger than XLA's
  ``e >= x_u + x_v - 1`` (see ``reference/xla_autosharding.md`` §3.2, which also lists the I-era /
  Alpa variant this generalises);
* memory: one constraint per elementary interval between consecutive segment boundaries of the
  model's nodes' usage profiles (inside one, every node's usage is fixed for a given strategy), at
  the interval's smallest capacity, and only where the constraint can be violated:
  ``sum_i sum_a (U_i[a, q] - min_a U_i[a, q]) x[i, a] <= cap - sum_i min_a U_i[a, q]``;
* objective ``sum c[i, a] x[i, a] + sum M[a, b] e[u, v, a, b]``, integer; divided by a common
  ``scale`` (rounded) when the sum of the largest possible terms would not fit comfortably in int64.

The model is written straight into the proto arrays (``model.proto``): variables by text-format
bulk parse, constraints and objective with ``extend`` over numpy-built index arrays.  The same
builder makes LNS sub-models: a subset of nodes is free, the others are fixed to the current solution
(their edges to free nodes become node costs, their usage lowers the capacities).
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
import types
from dataclasses import dataclass

import numpy as np


def _load_ortools():
    """Import OR-Tools' native modules (CP-SAT here, GLOP for :mod:`.lp`) so that they bind to their own
    protobuf runtime.  A library loaded earlier in the process can put another protobuf version's symbols
    in the global scope (tensorflow does, and keras-hub imports it): OR-Tools' extension modules then
    resolve against those and crash in native code (google/or-tools#3230; measured here with tensorflow
    2.21: GLOP's parsing of its text-format parameters segfaults, tests/test_tf_import.py).  Loading them
    with ``RTLD_DEEPBIND`` (Linux) puts their own dependencies' symbols first, whatever was imported
    before; where the platform has no such flag the plain import is used.  Returns the ``cp_model`` module.
    Every hloshard import of OR-Tools goes through the solver package, whose first module is this one."""
    deep = getattr(os, "RTLD_DEEPBIND", 0)
    flags = sys.getdlopenflags() if deep and hasattr(sys, "getdlopenflags") else None
    if flags is not None:
        sys.setdlopenflags(flags | deep)
    # cp_model imports pandas at its top for its pandas helpers (new_int_var_series and the like), which hloshard
    # never calls: a third of every solving command's imports (0.3 of ~1.0 CPU-s, measured round 27).  Unless
    # pandas is loaded already, cp_model gets a stand-in while it loads (_PandasLater) and, after, a module that
    # imports the real pandas at its first use
    stand_in = "pandas" not in sys.modules
    if stand_in:
        sys.modules["pandas"] = _PandasLater("pandas")
    try:
        from ortools.linear_solver import pywraplp  # noqa: F401  (the LP bound's solver, same flags)
        from ortools.sat.python import cp_model as module
    finally:
        if flags is not None:
            sys.setdlopenflags(flags)
        if stand_in and isinstance(sys.modules.get("pandas"), _PandasLater):
            del sys.modules["pandas"]   # a later `import pandas` gets the real one
    if isinstance(getattr(module, "pd", None), _PandasLater):
        module.pd.loaded = True   # from now on an attribute read imports the real pandas
    return module


class _PandasLater(types.ModuleType):
    """What ``import pandas`` gives OR-Tools' ``cp_model`` while :func:`_load_ortools` loads it: ``Index`` and
    ``Series`` as placeholder classes (cp_model's module level only names them in type hints); once ``loaded``,
    any attribute read imports the real pandas and reads it there (cp_model's pandas helpers, if a caller uses
    them, get pandas itself)."""

    loaded = False

    class Index:   # noqa: D106 - placeholders for cp_model's type hints while it loads
        pass

    class Series:  # noqa: D106
        pass

    def __getattribute__(self, name):
        if name not in ("loaded", "__class__", "__dict__") and object.__getattribute__(self, "loaded"):
            import pandas   # noqa: PLC0415 - the deferral itself: imported at first use, never at load

            return getattr(pandas, name)
        return object.__getattribute__(self, name)


cp_model = _load_ortools()

from ..costgraph import INFINITY
from ..interrupts import STOP
from .presolve import Reduced

INF = np.int64(INFINITY)

_SAFE_OBJECTIVE = 2**60  # sum of the largest objective terms must stay below this


@dataclass
class Model:
    """A built CP-SAT model and how to read its solutions.

    ``nodes``: reduced node ids that are free in this model; ``xoff[k]``: index of the first ``x``
    variable of ``nodes[k]`` (its strategies are consecutive); ``scale``: objective divisor;
    ``num_terms``: number of objective-carrying groups (nodes + edges: bounds the rounding error).
    """

    model: cp_model.CpModel
    nodes: np.ndarray
    xoff: np.ndarray
    sizes: np.ndarray
    edge_vars: list  # per model edge: (u_local, v_local, rows, cols, first var)
    scale: int
    num_terms: int
    num_vars: int

    def hint(self, positions) -> None:
        """Set a complete solution hint (positions indexed like ``nodes``)."""
        pos = np.asarray(positions, dtype=np.int64)
        values = np.zeros(self.num_vars, dtype=np.int64)
        values[self.xoff + pos] = 1
        for ul, vl, rows, cols, first in self.edge_vars:
            hit = np.nonzero((rows == pos[ul]) & (cols == pos[vl]))[0]
            if len(hit):
                values[first + hit[0]] = 1
        proto = self.model.proto
        proto.clear_solution_hint()
        proto.solution_hint.vars.extend(range(self.num_vars))
        proto.solution_hint.values.extend(values.tolist())

    def decode(self, solution) -> np.ndarray:
        """Strategy positions (per model node) from a CP-SAT solution vector."""
        sol = np.asarray(solution, dtype=np.int64)
        out = np.empty(len(self.nodes), dtype=np.int64)
        for k in range(len(self.nodes)):
            block = sol[self.xoff[k]:self.xoff[k] + self.sizes[k]]
            out[k] = int(np.argmax(block))
        return out


def build_model(red: Reduced, subset=None, current=None, allowed=None) -> Model:
    """Build the CP-SAT model of ``red`` (all nodes free), or of the LNS neighbourhood ``subset``
    (reduced node ids) with every other node fixed at ``current`` (positions per reduced node).
    ``allowed``: optional per reduced node a boolean mask over its strategies (None: all); a free
    node's strategies outside its mask are forbidden, and edge pairs using them get no variable
    (solution merging, :mod:`~hloshard.solver.merge`, keeps its model small this way)."""
    n = red.num_nodes
    if subset is None:
        nodes = np.arange(n, dtype=np.int64)
        local = nodes
    else:
        nodes = np.unique(np.asarray(subset, dtype=np.int64))
        local = np.full(n, -1, dtype=np.int64)
        local[nodes] = np.arange(len(nodes))
    free = local >= 0 if subset is not None else np.ones(n, dtype=bool)
    sizes = np.array([len(red.costs[i]) for i in nodes.tolist()], dtype=np.int64)
    xoff = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    nx = int(sizes.sum())
    costs = [red.costs[i].copy() for i in nodes.tolist()]

    if allowed is not None:
        for k, i in enumerate(nodes.tolist()):
            if allowed[i] is not None:
                costs[k] = np.where(allowed[i], costs[k], INF)
    inner = []  # (ul, vl, matrix)
    if subset is None:
        edge_ids = range(len(red.edge_costs))
    else:
        node_edges = red.incidence()
        edge_ids = sorted({e for i in nodes.tolist() for e in node_edges[i]})
    for e in edge_ids:
        u, v = (int(x) for x in red.edges[e])
        m = red.edge_costs[e]
        fu, fv = free[u], free[v]
        if fu and fv:
            inner.append((int(local[u]), int(local[v]), m))
        elif fu:
            lu = local[u]
            costs[lu] = np.minimum(costs[lu] + m[:, current[v]], INF)
        elif fv:
            lv = local[v]
            costs[lv] = np.minimum(costs[lv] + m[current[u], :], INF)

    # objective scale
    biggest = sum(int(c[c < INF].max()) if (c < INF).any() else 0 for c in costs)
    for _, _, m in inner:
        fin = m[m < INF]
        biggest += int(fin.max()) if fin.size else 0
    scale = 1 if biggest < _SAFE_OBJECTIVE else int(math.ceil(biggest / _SAFE_OBJECTIVE))

    model = cp_model.CpModel()
    proto = model.proto
    edge_vars = []
    e_first = nx
    obj_vars = []
    obj_coefs = []
    # node variables and their costs (forbidden node strategies are fixed to 0)
    node_cost = np.concatenate(costs) if costs else np.zeros(0, dtype=np.int64)
    forbidden_x = node_cost >= INF
    row_groups = []
    for ul, vl, m in inner:
        fin = m < INF
        if allowed is not None:  # pairs using a strategy outside a mask get no variable
            mu_, mv_ = allowed[int(nodes[ul])], allowed[int(nodes[vl])]
            if mu_ is not None:
                fin &= mu_[:, None]
            if mv_ is not None:
                fin &= mv_[None, :]
        rows, cols = np.nonzero(fin)
        cnt = len(rows)
        edge_vars.append((ul, vl, rows.astype(np.int64), cols.astype(np.int64), e_first))
        ids = e_first + np.arange(cnt, dtype=np.int64)
        c = m[rows, cols]
        nz = c != 0
        obj_vars.append(ids[nz])
        obj_coefs.append(c[nz])
        row_groups.append((ul, vl, rows, cols, ids))
        e_first += cnt
    nvars = e_first
    # variables: all boolean
    proto.merge_text_format("variables{domain:[0,1]}" * nx)
    if nvars > nx:
        proto.merge_text_format("variables{domain:[0,1]}" * (nvars - nx))
    cons = proto.constraints
    for idx in np.nonzero(forbidden_x)[0].tolist():  # e.g. an LNS boundary edge forbids it
        lin = cons.add().linear
        lin.vars.append(idx)
        lin.coeffs.append(1)
        lin.domain.extend([0, 0])
    for k in range(len(nodes)):
        c = cons.add()
        c.exactly_one.literals.extend(range(int(xoff[k]), int(xoff[k] + sizes[k])))
    for ul, vl, rows, cols, ids in row_groups:
        ku, kv = int(sizes[ul]), int(sizes[vl])
        # rows: nonzero() is row-major, so each row's entries are contiguous
        rstarts = np.searchsorted(rows, np.arange(ku + 1))
        ids_l = ids.tolist()
        for a in range(ku):
            s0, s1 = int(rstarts[a]), int(rstarts[a + 1])
            lin = cons.add().linear
            lin.vars.extend(ids_l[s0:s1])
            lin.vars.append(int(xoff[ul] + a))
            lin.coeffs.extend([1] * (s1 - s0))
            lin.coeffs.append(-1)
            lin.domain.extend([0, 0])
        order = np.argsort(cols, kind="stable")
        cs = cols[order]
        cstarts = np.searchsorted(cs, np.arange(kv + 1))
        ids_c = ids[order].tolist()
        for b in range(kv):
            s0, s1 = int(cstarts[b]), int(cstarts[b + 1])
            lin = cons.add().linear
            lin.vars.extend(ids_c[s0:s1])
            lin.vars.append(int(xoff[vl] + b))
            lin.coeffs.extend([1] * (s1 - s0))
            lin.coeffs.append(-1)
            lin.domain.extend([0, 0])
    # memory
    mem = red.memory
    if mem is not None:
        _memory_constraints(red, mem, nodes, xoff, subset, current, free, cons)
    # objective
    nzx = np.nonzero((node_cost != 0) & ~forbidden_x)[0]
    allv = [nzx] + obj_vars
    allc = [node_cost[nzx]] + obj_coefs
    ov = np.concatenate(allv) if allv else np.zeros(0, np.int64)
    oc = np.concatenate(allc) if allc else np.zeros(0, np.int64)
    if scale > 1:
        oc = (oc + scale // 2) // scale
    obj = proto.objective
    obj.vars.extend(ov.tolist())
    obj.coeffs.extend(oc.tolist())
    return Model(model=model, nodes=nodes, xoff=xoff, sizes=sizes, edge_vars=edge_vars, scale=scale,
                 num_terms=len(nodes) + len(inner), num_vars=nvars)


def memory_rows(red, nodes, free, current=None):
    """The memory constraints a model over ``nodes`` needs, as rows.

    Between consecutive segment boundaries of the free nodes' usage profiles every free node's usage
    is constant, so one constraint per such elementary interval suffices, at its smallest capacity
    (fixed nodes' usage at ``current`` lowers the capacities).  Rows that cannot be violated are
    dropped.  Returns a list of ``(rhs, [(local node, segment column)...])`` with ``rhs`` the bytes
    available above the free nodes' per-segment minimum usage.
    """
    mem = red.memory
    if mem is None:
        return []
    profs = mem.profiles()
    free_nodes = [int(i) for i in nodes.tolist() if profs[i] is not None]
    if not free_nodes:
        return []
    caps = mem.caps.astype(np.int64)
    if current is not None:
        caps = caps - mem.loads(current, exclude=free)
    bounds = np.unique(np.concatenate([profs[i][0] for i in free_nodes]))
    npts = mem.num_points
    starts = bounds[:-1]
    lens = np.diff(bounds)
    nint = len(starts)
    capmin = np.minimum.reduceat(caps, starts) if nint else np.zeros(0, np.int64)
    base = np.zeros(nint, dtype=np.int64)
    excess = np.zeros(nint, dtype=np.int64)
    members = []  # per free node: (local id, first interval, last interval, segment index per interval)
    local = {int(v): k for k, v in enumerate(nodes.tolist())}
    for i in free_nodes:
        b, U = profs[i]
        a0 = int(np.searchsorted(bounds, b[0]))
        a1 = int(np.searchsorted(bounds, b[-1]))
        seg = np.searchsorted(b, bounds[a0:a1], side="right") - 1
        mins = U.min(axis=0)[seg]
        base[a0:a1] += mins
        excess[a0:a1] += (U.max(axis=0) - U.min(axis=0))[seg]
        members.append((local[i], a0, a1, seg, i))
    rhs = capmin - base
    active = np.nonzero(excess > rhs)[0]
    if len(active) == 0:
        return []
    act = np.zeros(nint, dtype=bool)
    act[active] = True
    rows = {int(a): [] for a in active.tolist()}
    for li, a0, a1, seg, i in members:
        hit = np.nonzero(act[a0:a1])[0]
        for h in hit.tolist():
            rows[a0 + h].append((li, int(seg[h]), i))
    del npts, lens
    return [(int(rhs[a]), rows[a]) for a in active.tolist()]


def _memory_constraints(red, mem, nodes, xoff, subset, current, free, cons):
    """Add the rows of :func:`memory_rows` as linear constraints on the x variables."""
    profs = mem.profiles()
    rows = memory_rows(red, nodes, free, current if subset is not None else None)
    cache = {}
    for rhs, terms in rows:
        lin = cons.add().linear
        for li, q, i in terms:
            key = (li, q)
            if key not in cache:
                col = profs[i][1][:, q]
                d = col - col.min()
                nz = np.nonzero(d)[0]
                cache[key] = ((xoff[li] + nz).tolist(), d[nz].tolist())
            v, c = cache[key]
            lin.vars.extend(v)
            lin.coeffs.extend(c)
        lin.domain.extend([-(2**62), rhs])


class _Callback(cp_model.CpSolverSolutionCallback):
    def __init__(self, progress, scale, offset, t0):
        super().__init__()
        self.progress = progress
        self.scale = scale
        self.offset = offset
        self.t0 = t0
        self.count = 0

    def on_solution_callback(self):
        self.count += 1
        if self.progress is not None:
            self.progress({"phase": "cpsat", "objective": int(round(self.ObjectiveValue())) * self.scale + self.offset,
                           "bound": int(math.floor(self.BestObjectiveBound())) * self.scale + self.offset,
                           "elapsed": time.monotonic() - self.t0})


@dataclass
class CpResult:
    status: str               # 'optimal' | 'feasible' | 'infeasible' | 'unknown'
    positions: np.ndarray | None
    objective: int | None     # model objective in integer units (times scale), None without solution
    bound: int | None         # valid lower bound of the model objective (integer units)
    wall: float
    deterministic_time: float


def solve(mdl: Model, time_limit: float, workers: int = 2, seed: int = 0, deterministic: bool = False,
          deterministic_limit: float | None = None, hint=None, progress=None, offset: int = 0,
          t0: float | None = None, extra_params: dict | None = None) -> CpResult:
    """Run CP-SAT on a built model.

    ``time_limit``: wall seconds (always set, a safety net in deterministic mode); with
    ``deterministic`` the search is interleaved (reproducible for a given seed and worker count) and
    stopped by ``deterministic_limit`` (CP-SAT deterministic-time units).  ``hint``: positions per
    model node.  ``progress(event)`` is called on each improving solution (objective includes
    ``offset``).
    """
    if hint is not None:
        mdl.hint(hint)
    solver = cp_model.CpSolver()
    p = solver.parameters
    p.num_workers = max(1, int(workers))
    p.random_seed = int(seed)
    p.max_time_in_seconds = max(0.01, float(time_limit))
    if deterministic:
        p.interleave_search = True
        p.share_binary_clauses = False
        if deterministic_limit is not None:
            p.max_deterministic_time = max(0.01, float(deterministic_limit))
    for k, v in (extra_params or {}).items():
        setattr(p, k, v)
    cb = _Callback(progress, mdl.scale, offset, t0 if t0 is not None else time.monotonic())
    stop = STOP.get()
    if stop is not None:
        p.catch_sigint_signal = False  # the caller handles Ctrl-C (CP-SAT's own handler would swallow it)
        if stop.is_set():
            p.max_time_in_seconds = 0.0
    finished = _stop_watcher(stop, solver) if stop is not None else None
    try:
        status = solver.solve(mdl.model, cb)
    finally:
        if finished is not None:
            finished.set()
    name = {cp_model.OPTIMAL: "optimal", cp_model.FEASIBLE: "feasible", cp_model.INFEASIBLE: "infeasible",
            cp_model.MODEL_INVALID: "invalid"}.get(status, "unknown")
    if name == "invalid":
        raise RuntimeError("CP-SAT rejected the model: " + cp_model_helper_validate(mdl))
    positions = objective = bound = None
    if name in ("optimal", "feasible"):
        resp = solver.response_proto
        positions = mdl.decode(list(resp.solution))
        objective = int(round(solver.objective_value)) * mdl.scale
    if name not in ("infeasible", "unknown"):   # stopped before any solution, CP-SAT reports a bound of 0
        b = solver.best_objective_bound
        if math.isfinite(b):
            bound = int(math.ceil(b - 1e-6)) * mdl.scale
            if mdl.scale > 1:  # rounding of each coefficient is at most scale/2 per active term
                bound -= mdl.num_terms * mdl.scale
    return CpResult(status=name, positions=positions, objective=objective, bound=bound,
                    wall=solver.wall_time, deterministic_time=solver.deterministic_time)


def _stop_watcher(stop, solver) -> threading.Event:
    """Call ``solver.stop_search()`` as soon as ``stop`` is set, until the returned event is set."""
    finished = threading.Event()

    def run():
        while not finished.is_set():
            if stop.wait(0.05):
                solver.stop_search()
                return

    threading.Thread(target=run, name="hloshard-cpsat-stop", daemon=True).start()
    return finished


def cp_model_helper_validate(mdl: Model) -> str:
    from ortools.sat.python import cp_model_helper

    return cp_model_helper.CpSatHelper.validate_model(mdl.model.proto)
