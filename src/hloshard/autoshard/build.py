"""Module -> cost graph.

:func:`build_graph` walks the entry computation (and, inlined, every while body / condition, called
computation and conditional branch) in post order, builds one strategy group per instruction
(:mod:`hloshard.strategy`), numbers the nodes, derives

* node costs: ``(compute + communication) * execution count`` per strategy (execution count = product
  of the enclosing while loops' trip counts),
* node usages: bytes per device of the node's value under each strategy,
* edges: for each (operand value, user) pair the matrix of resharding costs from every operand strategy
  to the layout every user strategy requires (:func:`hloshard.cost.reshard.resharding_cost`, cached and
  computed once per distinct (shape, source, target) triple); a follower's edge is diagonal (every other
  pairing forbidden),
* liveness intervals from the schedule position of the definition to the last use (entry parameters
  and outputs live for the whole program),
* ``input_output_alias`` pairs and ``shard_as`` groups as alias constraints (same sharding on both sides),

and packs them into a :class:`hloshard.costgraph.Problem` with integer costs (``cost_scale`` recorded).
The solver receives ``Graph.solver_problem``: the same graph with memory as a tie-breaker
(:mod:`hloshard.autoshard.tiebreak`: costs times ``K`` plus less than ``K`` in all) and every follower
merged into the node it follows (exact; skipped under a memory budget so that memory stays exact per
tensor).
:func:`solve_module` calls :func:`hloshard.solver.solve_problem` and applies the choice to the IR;
:func:`evaluate_module` evaluates the shardings a module already carries.  All costs reported are in
the mesh's cost units (alpha-beta model), memory in bytes per device.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import math

import numpy as np

from ..costgraph import INFINITY, Problem
from ..strategy.base import TOKEN, LeafRef, StrategyGroup, is_array, leaf_shapes
from ..cost.liveness import live_intervals, program_schedule
from ..hlo.callgraph import flatten_call_graph
from ..hlo.loops import execution_counts
from ..strategy.registry import BuildContext, build_group
from .aliases import _add_aliases
from ..solver.followers import merge_followers  # the one follower merge (solver/followers.py)
from .resharder import _Resharder
from .tiebreak import with_memory_tie_break
from .user_shardings import user_shardings


#: formerly the module size (instructions) up to which dot / convolution strategies that leave a mesh
#: axis idle were enumerated.  Every module now gets that full space (the search space no longer
#: depends on module size; presolve prunes dominated strategies): measured on
#: ``scripts/make_transformer.py --layers 12`` (2x4 mesh), build 4.1 s full vs 4.5 s restricted, the
#: solver problem 25,390 vs 22,222 strategies, same written objective after a 20 s solve.  Kept (None)
#: for code that imports the name.
EXHAUSTIVE_LIMIT = None



@dataclass
class Graph:
    """The cost graph of a module plus what is needed to map a solution back to the IR."""

    module: object
    mesh: object
    ctx: BuildContext
    nodes: list                      # StrategyGroup per node id
    problem: Problem
    edge_info: list                  # per edge: list of (src instr, leaf, dst group, weight) contributions
    edge_float: list                 # per edge: float matrix (cost units)
    positions: dict                  # instruction -> schedule position
    schedule: list                   # instructions in schedule order
    computations: list               # processed computations
    warnings: list = field(default_factory=list)
    #: K of the memory tie-break in ``solver_problem`` (:mod:`hloshard.autoshard.tiebreak`; 1: none)
    tie_break: int = 1

    @property
    def cost_scale(self) -> float:
        return self.problem.cost_scale



def processed_computations(module) -> list:
    """Entry plus every computation reached through while / call / conditional (their instructions get
    strategies and shardings), in order of first appearance in the program schedule
    (:func:`hloshard.cost.liveness.program_schedule`); fused computations and reducers are not."""
    out, seen = [], set()
    for instr in program_schedule(module):
        if id(instr.parent) not in seen:
            seen.add(id(instr.parent))
            out.append(instr.parent)
    return out


def _operand_leaves(opref, inputs_entry):
    """(instr, leaf, required spec) triples for one operand slot of a strategy."""
    if isinstance(opref, LeafRef):
        return [(opref.instr, opref.leaf, inputs_entry)]
    if opref.shape.is_tuple:
        shapes = leaf_shapes(opref.shape)
        if inputs_entry is None:
            return [(opref, l, None) for l in range(len(shapes))]
        return [(opref, l, inputs_entry[l]) for l in range(len(shapes))]
    return [(opref, 0, inputs_entry)]



def _leaf_shape(instr, leaf):
    return leaf_shapes(instr.shape)[leaf]



def build_graph(module, mesh, keep: str = "io", memory_budget: int | None = None, name: str | None = None,
                mesh_order_only: bool = False) -> Graph:
    """Build the cost graph of ``module`` on ``mesh`` (see module docstring).

    ``mesh_order_only``: enumerate the axes of a dim in mesh order only, also on meshes of two axes
    (:attr:`hloshard.strategy.base.MeshInfo.any_order`; the coarse space of
    :mod:`hloshard.autoshard.coarse`).

    ``keep``: which user shardings are kept ('all' | 'io' | 'none'); ``memory_budget``: bytes per
    device or None.  A computation called from several sites is first cloned per site
    (:func:`hloshard.hlo.callgraph.flatten_call_graph`, the module changes).  Raises InputError for shardings that do not fit, UsageError for a bad ``keep``.
    """
    warnings: list = []
    flatten_call_graph(module, warnings)   # one computation per call site, as XLA partitions them
    comps = processed_computations(module)
    fixed = user_shardings(module, keep, mesh, comps)
    kept = dict(fixed)
    ctx = BuildContext(mesh, fixed)
    ctx.exhaustive = True   # the full dot / convolution space whatever the module size
    if mesh_order_only:
        ctx.minfo.any_order = ctx.minfo.group_order = False
    # the schedule: entry post order with while bodies / conditions, called computations and branches
    # right after their caller (the handlers of while / call / conditional alias the parameters of the
    # computations they call before those are built); execution counts from hlo.loops
    schedule = program_schedule(module)
    counts = execution_counts(module, warnings)
    positions = {instr: t for t, instr in enumerate(schedule)}
    ctx.visit = lambda comp, weight: None
    for instr in schedule:
        ctx.weights[instr] = counts.get(id(instr.parent), 1.0)
        if instr not in ctx.groups:
            build_group(instr, ctx)

    # --- nodes --------------------------------------------------------------------------------
    nodes: list = []
    node_owner: list = []
    seen = set()
    for instr in schedule:
        g = ctx.groups[instr]
        for sg in ([g] if isinstance(g, StrategyGroup) else g.children):
            if isinstance(sg, StrategyGroup) and id(sg) not in seen:
                seen.add(id(sg))
                sg.node = len(nodes)
                nodes.append(sg)
                node_owner.append(instr)

    resh = _Resharder(ctx)
    edges: dict = {}
    info: dict = {}
    follows: list = []
    for v, g in enumerate(nodes):
        for inst, leaf, src, follow, m, scale in in_edges(g, ctx, resh):
            u = src.node
            if not follow and not np.any(m):
                continue
            if follow:
                follows.append((u, v))
            _add_edge(edges, info, u, v, m, (inst, leaf, g, scale))

    # --- liveness (hloshard.cost.liveness): a node is defined where its owner is scheduled and live to
    # its last read; entry parameters live throughout, outputs to the end -------------------------------
    n = len(nodes)
    owned: dict = {}
    for v in range(n):
        owned.setdefault(id(node_owner[v]), []).append(v)

    def leaf_nodes(instr) -> list:
        out = []
        if instr not in ctx.groups:
            return out
        for l, s in enumerate(leaf_shapes(instr.shape)):
            if is_array(s):
                r = ctx.resolve(instr, l)
                if r is not TOKEN:
                    out.append(r[0].node)
        return out

    entry = module.entry
    iv = live_intervals(schedule, lambda i: owned.get(id(i), ()),
                        lambda i: [u for op in i.operands for u in leaf_nodes(op)],
                        live_throughout=[u for p in entry.parameters for u in leaf_nodes(p)],
                        live_out=leaf_nodes(entry.root))
    lo = np.array([iv[v][0] for v in range(n)], dtype=np.int64)
    hi = np.array([iv[v][1] for v in range(n)], dtype=np.int64)

    # --- integer problem ----------------------------------------------------------------------------
    fcosts = []
    for g in nodes:
        w = ctx.weight(g.instr)
        fcosts.append(np.array([(s.compute + s.comm) * w for s in g.strategies], dtype=np.float64))
    edge_keys = sorted(edges)
    edge_float = [edges[k] for k in edge_keys]
    finite_max = 0.0
    for arr in fcosts + edge_float:
        f = arr[np.isfinite(arr)]
        if f.size:
            finite_max = max(finite_max, float(np.abs(f).max()))
    scale = choose_scale(finite_max)
    node_costs = [_to_int(c, scale) for c in fcosts]
    node_usages = [np.array([int(s.memory) for s in g.strategies], dtype=np.int64) for g in nodes]
    # equal float matrices are one object (the resharder's scaled matrices): one integer array each
    ints: dict = {}
    edge_costs = []
    for m in edge_float:
        hit = ints.get(id(m))
        if hit is None:
            hit = ints[id(m)] = _to_int(m, scale)
            hit.flags.writeable = False
        edge_costs.append(hit)
    problem = Problem(
        name=name or module.name,
        intervals=np.stack([lo, hi], axis=1) if n else np.zeros((0, 2), dtype=np.int64),
        node_costs=node_costs, node_usages=node_usages,
        edges=np.array(edge_keys, dtype=np.int64).reshape(-1, 2),
        edge_costs=edge_costs, usage_limit=memory_budget, cost_scale=scale,
    )
    graph = Graph(module, mesh, ctx, nodes, problem, [info[k] for k in edge_keys], edge_float, positions, schedule,
                  comps, warnings)
    _add_aliases(graph)
    graph.follows = follows
    graph.kept = kept
    # the solver's problem: memory as a tie-breaker (worth less than one cost unit in total), followers
    # merged into the node they follow (not under a memory budget: memory stays exact per tensor)
    tb_problem, graph.tie_break = with_memory_tie_break(problem)
    graph.solver_problem, graph.classes = merge_followers(tb_problem, follows, merge=memory_budget is None)
    return graph



def in_edges(g, ctx, resh):
    """The resharding edges into group ``g``, one per array operand leaf that some strategy constrains:
    yields ``(operand instruction, leaf, source group, follow, matrix, scale)``, the matrix (source
    strategies x ``g``'s strategies, cost units) already multiplied by ``scale`` = ``g``'s executions
    times the operand's edge weight; ``follow``: ``g`` follows that operand (a diagonal matrix).
    ``resh``: the :class:`~hloshard.autoshard.resharder._Resharder` pricing the pairs.  Used by
    :func:`build_graph` and by ``explain``'s local re-pricing (one edge loop)."""
    w = ctx.weight(g.instr)
    ops = g.ops()
    weights = g.operand_weights or [1.0] * len(ops)
    for i, opref in enumerate(ops):
        if not isinstance(opref, LeafRef) and not opref.shape.is_tuple:
            # the common case: one array operand, one requirement per strategy
            per_leaf = {(opref, 0): [st.inputs[i] if i < len(st.inputs) else None for st in g.strategies]}
        else:
            per_leaf = {}
            for q, st in enumerate(g.strategies):
                entry = st.inputs[i] if i < len(st.inputs) else None
                for (inst, leaf, req) in _operand_leaves(opref, entry):
                    per_leaf.setdefault((inst, leaf), [None] * len(g.strategies))[q] = req
        for (inst, leaf), reqs in per_leaf.items():
            if all(r is None for r in reqs):
                continue
            r = ctx.resolve(inst, leaf)
            if r is TOKEN:
                continue
            src, k = r
            if src is g:
                continue
            shape = _leaf_shape(inst, leaf)
            if not is_array(shape):
                continue
            srcs = [s.out if k is None else s.out[k] for s in src.strategies]
            follow = (g.follow is not None and g.follow[0] is inst and g.follow[1] == leaf
                      and len(srcs) == len(reqs))
            scale = w * weights[i]
            yield inst, leaf, src, follow, resh.scaled(shape, srcs, reqs, scale, diagonal_only=follow), scale


def _add_edge(edges, info, u, v, m, contribution):
    if u > v:
        u, v, m = v, u, m.T
    key = (u, v)
    if key in edges:
        edges[key] = edges[key] + m
        info[key].append(contribution)
    else:
        edges[key] = m
        info[key] = [contribution]



def choose_scale(finite_max: float) -> float:
    """Cost units per integer unit: a power of ten that keeps the largest finite cost near 1e9 (and no
    finer than 0.001), so objective sums stay far below int64 and CP-SAT's coefficients stay moderate."""
    if finite_max <= 0:
        return 1.0
    exp = math.floor(math.log10(finite_max)) - 9
    return float(10.0 ** max(exp, -3))



def _to_int(arr: np.ndarray, scale: float) -> np.ndarray:
    out = np.full(arr.shape, INFINITY, dtype=np.int64)
    fin = np.isfinite(arr)
    out[fin] = np.minimum(np.rint(arr[fin] / scale), INFINITY - 1).astype(np.int64)
    return out

