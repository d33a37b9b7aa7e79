"""Evaluating a strategy choice: cost breakdown, peak memory, the most expensive edges, the implicit
reshardings, per-instruction rows, and :func:`evaluate_module` behind ``hloshard cost``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..cost.liveness import peak_usage
from ..costgraph import Problem
from ..strategy.base import TOKEN, is_array, is_mesh_spec
from .apply import instruction_sharding, leaf_spec
from .build import Graph, _leaf_shape, _operand_leaves, build_graph, edge_buffers
from .resharder import _key
from .search import solve_graph


@dataclass
class Evaluation:
    """Cost breakdown of one strategy choice (cost units; memory in bytes per device)."""

    compute: float
    communication: float
    resharding: float
    peak_memory: int
    peak_time: int
    node_cost: np.ndarray       # per node: (compute + comm) * weight
    edge_cost: np.ndarray       # per edge: chosen entry

    @property
    def total(self) -> float:
        return self.compute + self.communication + self.resharding



def evaluate_choice(graph: Graph, choice) -> Evaluation:
    """Cost breakdown of ``choice`` (one strategy index per node of ``graph.problem``) on the full,
    unmerged cost graph, in float cost units (no integer rounding); peak memory in bytes per device."""
    ctx = graph.ctx
    comp = comm = 0.0
    node_cost = np.zeros(len(graph.nodes))
    for v, g in enumerate(graph.nodes):
        st = g.strategies[int(choice[v])]
        w = ctx.weight(g.instr)
        comp += st.compute * w
        comm += st.comm * w
        node_cost[v] = (st.compute + st.comm) * w
    ecost = np.zeros(len(graph.edge_float))
    for e, ((u, v), m) in enumerate(zip(graph.problem.edges, graph.edge_float)):
        ecost[e] = m[int(choice[u]), int(choice[v])]
    peak, t = peak_memory(graph.problem, choice, graph)
    return Evaluation(comp, comm, float(ecost.sum()), peak, t, node_cost, ecost)



def peak_memory(problem: Problem, choice, graph: Graph | None = None) -> tuple[int, int]:
    """(peak bytes per device over all liveness points, the point where it is reached), by
    :func:`hloshard.cost.liveness.peak_usage` over the problem's intervals, plus, with ``graph``, the
    resharding temporaries of the choice (:func:`hloshard.autoshard.build.edge_buffers`)."""
    sizes = [int(u[int(c)]) for u, c in zip(problem.node_usages, choice)]
    ivs = problem.intervals
    if graph is not None:
        eiv, esz = edge_buffers(graph, choice)
        if eiv:
            ivs = np.concatenate([np.asarray(ivs, dtype=np.int64).reshape(-1, 2),
                                  np.asarray(eiv, dtype=np.int64).reshape(-1, 2)])
            sizes = sizes + esz
    return peak_usage(ivs, sizes)


def top_edges(graph: Graph, choice, ev: Evaluation, k: int = 10) -> list[dict]:
    """The ``k`` most expensive resharding edges of a choice: src, dst, cost, shardings."""
    order = sorted(range(len(ev.edge_cost)), key=lambda e: (-ev.edge_cost[e], e))
    out = []
    minfo = graph.ctx.minfo
    for e in order[:k]:
        c = float(ev.edge_cost[e])
        if c <= 0:
            break
        for inst, leaf, g, w in graph.edge_info[e][:1]:
            src_spec = leaf_spec(graph, inst, leaf, choice)
            st = g.strategies[int(choice[g.node])]
            out.append({"from": inst.name, "to": g.instr.name, "cost": c,
                        "src_sharding": str(minfo.to_sharding(src_spec)) if src_spec is not None else None,
                        "dst_strategy": st.name})
    return out



def reshardings_of(graph: Graph, choice) -> dict:
    """Instruction name -> list of implicit reshardings on its operand edges (plan steps included)."""
    from ..cost.reshard import plan

    minfo = graph.ctx.minfo
    out: dict = {}
    for v, g in enumerate(graph.nodes):
        st = g.strategies[int(choice[v])]
        ops = g.ops()
        weights = g.operand_weights or [1.0] * len(ops)
        for i, opref in enumerate(ops):
            entry = st.inputs[i] if i < len(st.inputs) else None
            for inst, leaf, req in _operand_leaves(opref, entry):
                if req is None:
                    continue
                r = graph.ctx.resolve(inst, leaf)
                if r is TOKEN or r[0] is g:
                    continue
                src = leaf_spec(graph, inst, leaf, choice)
                shape = _leaf_shape(inst, leaf)
                if src is None or not is_array(shape):
                    continue
                if _key(src) == _key(req):
                    continue
                a, b = minfo.to_sharding(src, len(shape.dims)), minfo.to_sharding(req, len(shape.dims))
                if a == b:
                    continue
                if not is_mesh_spec(src) and a.is_manual or not is_mesh_spec(req) and b.is_manual:
                    continue
                w = graph.ctx.weight(g.instr) * weights[i]
                try:
                    pl = plan(shape, a, b, graph.mesh)
                    steps = [s.to_json() for s in pl.steps]
                    cost = float(pl.total_cost)
                except Exception as exc:  # noqa: BLE001
                    steps = [{"kind": "unplannable", "reason": str(exc)}]
                    cost = 0.0
                if cost == 0.0 and not steps:
                    continue
                out.setdefault(g.instr.name, []).append({
                    "operand": inst.name, "leaf": leaf, "from": str(a), "to": str(b),
                    "cost": cost * w, "steps": steps})
    return out



@dataclass
class CostResult:
    """``evaluate_module`` output: the module's own shardings evaluated under the cost model."""

    graph: Graph
    choice: list
    evaluation: Evaluation
    unannotated: list               # names of instructions that carried no sharding
    status: str

    @property
    def total_cost(self) -> float:
        return self.evaluation.total

    @property
    def warnings(self) -> list:
        """Messages for the report (``graph.warnings``), e.g. each ``while`` whose trip count is a guess
        (``while NAME (line N): trip count unknown (REASON); assumed 100 iterations``)."""
        return self.graph.warnings



def evaluate_module(module, mesh, time_limit: float = 30.0, seed: int = 0) -> CostResult:
    """Evaluate the shardings ``module`` carries (every annotation kept, as ``--keep-shardings all``).

    An annotated instruction keeps exactly its sharding; where several strategies produce it (e.g. a dot
    whose output layout arises with or without an all-reduce) and for unannotated instructions, the
    cheapest consistent choice is taken (a deterministic solve).  Costs in cost units, memory in bytes
    per device.  Raises InputError for annotations that do not fit the mesh / shapes."""
    graph = build_graph(module, mesh, keep="all")
    sol = solve_graph(graph, time_limit=time_limit, workers=1, seed=seed, deterministic=True)
    choice = list(sol.strategies)
    ev = evaluate_choice(graph, choice)
    unannotated = [i.name for i in graph.schedule if i.sharding is None and i.opcode not in
                   ("tuple", "get-tuple-element", "parameter")]
    return CostResult(graph, choice, ev, unannotated, sol.status)



def per_instruction_costs(graph: Graph, choice, ev: Evaluation) -> list[dict]:
    """One row per instruction of the schedule: name, opcode, sharding, cost (its nodes' compute +
    communication plus the resharding on its incoming edges, cost units), reshardings (plan steps)."""
    resh = reshardings_of(graph, choice)
    node_of: dict = {}
    for v, g in enumerate(graph.nodes):
        node_of.setdefault(id(g.instr), []).append(v)
    incoming: dict = {}
    for e, ((u, v), m) in enumerate(zip(graph.problem.edges, graph.edge_float)):
        for inst, leaf, g, w in graph.edge_info[e][:1]:
            incoming[id(g.instr)] = incoming.get(id(g.instr), 0.0) + float(ev.edge_cost[e])
    rows = []
    for instr in graph.schedule:
        c = sum(float(ev.node_cost[v]) for v in node_of.get(id(instr), []))
        c += incoming.get(id(instr), 0.0)
        rows.append({"name": instr.name, "opcode": instr.opcode,
                     "sharding": str(instruction_sharding(graph, instr, choice)),
                     "cost": c, "reshardings": resh.get(instr.name, [])})
    return rows

