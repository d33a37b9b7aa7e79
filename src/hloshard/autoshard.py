"""Module -> cost graph -> CP-SAT -> shardings applied: the machinery behind ``solve`` and ``cost``.

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
The solver receives ``Graph.solver_problem``: the same graph with every follower merged into the node it
follows (exact; skipped under a memory budget so that memory stays exact per tensor).
:func:`solve_module` calls :func:`hloshard.solver.solve_problem` and applies the choice to the IR;
:func:`evaluate_module` evaluates the shardings a module already carries.  All costs reported are in
the mesh's cost units (alpha-beta model), memory in bytes per device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .costgraph import INFINITY, Problem
from .errors import InputError, SolveFailed, UsageError
from .strategy.base import TOKEN, LeafRef, StrategyGroup, is_array, is_mesh_spec, leaf_range, leaf_shapes
from .strategy.registry import BuildContext, build_group

KEEP_MODES = ("all", "io", "none")

#: modules with at most this many instructions (in the computations that get shardings) use the
#: exhaustive search space (dot / convolution strategies that leave a mesh axis idle)
EXHAUSTIVE_LIMIT = 500


# ---------------------------------------------------------------------------------------------
# user shardings
# ---------------------------------------------------------------------------------------------


def _check_user_sharding(instr, sh, mesh) -> None:
    """Raise InputError when a user sharding cannot apply to ``instr`` on ``mesh``."""
    where = f"{instr.name} (line {instr.line})" if getattr(instr, "line", 0) else instr.name
    leaves = leaf_shapes(instr.shape)
    if sh.is_tuple:
        elems = list(sh.tuple_elements)
        if len(elems) != len(leaves) and not (len(leaves) == 0 and len(elems) == 1):
            raise InputError(f"{where}: sharding {sh} has {len(elems)} elements but the shape {instr.shape} has "
                             f"{len(leaves)} leaves")
    else:
        elems = [sh] * len(leaves)
    for shape, e in zip(leaves, elems):
        if e.is_tiled:
            if len(e.tile_dims) != len(shape.dims):
                raise InputError(f"{where}: sharding {e} tiles {len(e.tile_dims)} dims but the shape {shape} has "
                                 f"rank {len(shape.dims)}")
            if e.num_devices != mesh.num_devices:
                raise InputError(f"{where}: sharding {e} uses {e.num_devices} devices but the mesh [{mesh}] has "
                                 f"{mesh.num_devices} devices")
            mesh_ids = set(int(x) for x in np.asarray(mesh.device_ids).reshape(-1))
            bad = [d for d in e.devices if d not in mesh_ids]
            if bad:
                raise InputError(f"{where}: sharding {e} names device {bad[0]}, which is not in the mesh {mesh}")
        elif e.is_maximal:
            mesh_ids = set(int(x) for x in np.asarray(mesh.device_ids).reshape(-1))
            if e.maximal_device not in mesh_ids:
                raise InputError(f"{where}: sharding {e} names device {e.maximal_device}, not in the mesh {mesh}")


def _target(instr) -> str:
    return str(instr.attrs.get("custom_call_target", "")).strip().strip('"')


def user_shardings(module, keep: str, mesh, computations) -> dict:
    """Instruction -> HloSharding to keep.  ``keep``: 'all' (every annotated instruction), 'io' (entry
    parameters, the entry root and ``Sharding`` custom-calls: XLA's default keeps parameters and outputs;
    explicit constraints are user intent too), 'none'.  ``Sharding`` custom-calls feeding
    ``SPMDFullToShardShape`` are always kept (they define the manual region's layout).
    Raises InputError for a kept sharding that does not fit the mesh or the shape."""
    if keep not in KEEP_MODES:
        raise UsageError(f"--keep-shardings must be one of {', '.join(KEEP_MODES)}, got {keep!r}")
    fixed = {}
    entry = module.entry
    for comp in computations:
        for instr in comp.instructions:
            sh = instr.sharding
            if sh is None or isinstance(sh, str):
                continue
            if sh.is_unknown:
                continue
            keep_it = False
            if keep == "all":
                keep_it = True
            elif instr.opcode == "custom-call" and _target(instr) == "Sharding" and \
                    any(u.opcode == "custom-call" and _target(u) == "SPMDFullToShardShape" for u in instr.users):
                keep_it = True
            elif keep == "io":
                if comp is entry and (instr.opcode == "parameter" or instr is entry.root):
                    keep_it = True
                elif instr.opcode == "custom-call" and _target(instr) == "Sharding":
                    keep_it = True
            if keep_it:
                _check_user_sharding(instr, sh, mesh)
                fixed[instr] = sh
    return fixed


# ---------------------------------------------------------------------------------------------
# the graph
# ---------------------------------------------------------------------------------------------


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

    @property
    def cost_scale(self) -> float:
        return self.problem.cost_scale


def processed_computations(module) -> list:
    """Entry plus every computation reached through while / call / conditional (their instructions get
    strategies and shardings); fused computations and reducers are not."""
    out, seen = [], set()

    def rec(comp):
        if id(comp) in seen:
            return
        seen.add(id(comp))
        out.append(comp)
        for instr in comp.instructions:
            if instr.opcode in ("while", "call", "conditional"):
                for c in instr.called_computations:
                    rec(c)

    rec(module.entry)
    return out


class _Resharder:
    """Vectorised, cached resharding-cost matrices."""

    def __init__(self, ctx: BuildContext):
        self.ctx = ctx
        self.cache: dict = {}
        self.mcache: dict = {}

    def cost(self, shape, src, dst) -> float:
        if dst is None or src is None:
            return 0.0
        if is_mesh_spec(src) and is_mesh_spec(dst) and src == dst:
            return 0.0
        for s in (src, dst):
            if not is_mesh_spec(s) and (s.is_manual or getattr(s, "subgroup_types", ())):
                return 0.0
        key = (shape.element_type, tuple(shape.dims), _key(src), _key(dst))
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        from .cost.reshard import resharding_cost

        minfo = self.ctx.minfo
        a, b = minfo.to_sharding(src, len(shape.dims)), minfo.to_sharding(dst, len(shape.dims))
        try:
            value = float(resharding_cost(shape, a, b, self.ctx.mesh))
        except Exception:  # noqa: BLE001 - planner cannot express it: gather everything, then slice
            from .cost import collectives

            value = float(collectives.all_gather_cost(self.ctx.mesh, shape.byte_size, minfo.axes)) if minfo.axes else 0.0
        self.cache[key] = value
        return value

    def matrix(self, shape, srcs: list, dsts: list, diagonal_only: bool = False) -> np.ndarray:
        """Resharding cost from each of ``srcs`` to each of ``dsts`` (cost units); ``diagonal_only``:
        only pairs (p, p), every other entry infinite (a follower edge).  Cached per distinct
        (shape, source list, target list): repeated layers reuse whole matrices."""
        mkey = (shape.element_type, tuple(shape.dims), tuple(_key(s) for s in srcs),
                tuple(_key(d) for d in dsts), diagonal_only)
        hit = self.mcache.get(mkey)
        if hit is None:
            hit = self._matrix(shape, srcs, dsts, diagonal_only)
            self.mcache[mkey] = hit
        return hit

    def _matrix(self, shape, srcs: list, dsts: list, diagonal_only: bool = False) -> np.ndarray:
        m = np.zeros((len(srcs), len(dsts)), dtype=np.float64)
        if diagonal_only:
            m[:] = np.inf
            for p in range(min(len(srcs), len(dsts))):
                m[p, p] = self.cost(shape, srcs[p], dsts[p])
            return m
        su, si = _unique(srcs)
        du, di = _unique(dsts)
        table = np.zeros((len(su), len(du)))
        for i, s in enumerate(su):
            for j, d in enumerate(du):
                table[i, j] = self.cost(shape, s, d)
        return table[np.ix_(si, di)]


def _key(spec):
    return spec if type(spec) is tuple or spec is None else ("raw", str(spec))


def _unique(specs):
    keys, index, uniq = {}, [], []
    for s in specs:
        k = _key(s) if s is not None else None
        if k not in keys:
            keys[k] = len(uniq)
            uniq.append(s)
        index.append(keys[k])
    return uniq, np.asarray(index, dtype=np.int64)


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


def build_graph(module, mesh, keep: str = "io", memory_budget: int | None = None, name: str | None = None) -> Graph:
    """Build the cost graph of ``module`` on ``mesh`` (see module docstring).

    ``keep``: which user shardings are kept ('all' | 'io' | 'none'); ``memory_budget``: bytes per
    device or None.  Raises InputError for shardings that do not fit, UsageError for a bad ``keep``.
    """
    comps = processed_computations(module)
    fixed = user_shardings(module, keep, mesh, comps)
    kept = dict(fixed)
    ctx = BuildContext(mesh, fixed)
    ctx.exhaustive = sum(len(c.instructions) for c in comps) <= EXHAUSTIVE_LIMIT
    positions: dict = {}
    schedule: list = []

    def visit(comp, weight):
        for instr in _post_order(comp):
            positions[instr] = len(schedule)
            schedule.append(instr)
            ctx.weights[instr] = weight
            if instr in ctx.groups:
                continue
            build_group(instr, ctx)

    ctx.visit = visit
    visit(module.entry, 1.0)

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
                srcs = [s.out if k is None else s.out[k] for s in src.strategies]
                shape = _leaf_shape(inst, leaf)
                if not is_array(shape):
                    continue
                follow = (g.follow is not None and g.follow[0] is inst and g.follow[1] == leaf
                          and len(srcs) == len(reqs))
                m = resh.matrix(shape, srcs, reqs, diagonal_only=follow) * (w * weights[i])
                u = src.node
                if not follow and not np.any(m):
                    continue
                if follow:
                    follows.append((u, v))
                _add_edge(edges, info, u, v, m, (inst, leaf, g, w * weights[i]))

    # --- liveness -------------------------------------------------------------------------------
    n = len(nodes)
    T = len(schedule)
    lo = np.zeros(n, dtype=np.int64)
    hi = np.zeros(n, dtype=np.int64)
    for v, g in enumerate(nodes):
        lo[v] = positions[node_owner[v]]
        hi[v] = lo[v] + 1
    for instr in schedule:
        t = positions[instr]
        for op in instr.operands:
            for l, s in enumerate(leaf_shapes(op.shape)):
                if not is_array(s) or op not in ctx.groups:
                    continue
                r = ctx.resolve(op, l)
                if r is TOKEN:
                    continue
                u = r[0].node
                if t + 1 > hi[u]:
                    hi[u] = t + 1
    entry = module.entry
    for p in entry.parameters:
        for l, s in enumerate(leaf_shapes(p.shape)):
            r = ctx.resolve(p, l) if is_array(s) else TOKEN
            if r is not TOKEN:
                lo[r[0].node] = 0
                hi[r[0].node] = T
    for l, s in enumerate(leaf_shapes(entry.root.shape)):
        r = ctx.resolve(entry.root, l) if is_array(s) else TOKEN
        if r is not TOKEN:
            hi[r[0].node] = T

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
    edge_costs = [_to_int(m, scale) for m in edge_float]
    problem = Problem(
        name=name or module.name,
        intervals=np.stack([lo, hi], axis=1) if n else np.zeros((0, 2), dtype=np.int64),
        node_costs=node_costs, node_usages=node_usages,
        edges=np.array(edge_keys, dtype=np.int64).reshape(-1, 2),
        edge_costs=edge_costs, usage_limit=memory_budget, cost_scale=scale,
    )
    graph = Graph(module, mesh, ctx, nodes, problem, [info[k] for k in edge_keys], edge_float, positions, schedule,
                  comps)
    _add_aliases(graph)
    graph.follows = follows
    graph.kept = kept
    from .solver.followers import merge_followers as merge_followers_into_followees
    graph.solver_problem, graph.classes = merge_followers_into_followees(problem, follows, merge=memory_budget is None)
    return graph


def merge_followers(problem: Problem, follows: list, merge: bool = True):
    """The problem the solver gets: every follower node merged into the node it follows (its strategy
    ``p`` is the followee's ``p``, so they share one decision, as XLA's ``Simplify`` does).  Node costs
    add up, the follow edge's diagonal and edges inside one class become node costs, other edges are
    re-attached (parallel ones summed).  A merged node is live over the union of its members' intervals
    with the largest member usage per strategy (exact enough for reporting; with a memory budget
    nothing is merged, so memory constraints stay exact).
    Returns (problem, classes) with ``classes[v]`` the reduced node of original node ``v``."""
    n = problem.num_nodes
    parent = list(range(n))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    if merge:
        for u, v in follows:
            ru, rv = find(u), find(v)
            if ru != rv and len(problem.node_costs[ru]) == len(problem.node_costs[rv]):
                parent[max(ru, rv)] = min(ru, rv)
    roots = sorted({find(v) for v in range(n)})
    if len(roots) == n:
        return problem, list(range(n))
    index = {r: i for i, r in enumerate(roots)}
    classes = [index[find(v)] for v in range(n)]
    m = len(roots)
    costs = [problem.node_costs[r].astype(np.int64).copy() for r in roots]
    usages = [problem.node_usages[r].astype(np.int64).copy() for r in roots]
    lo = np.array([problem.intervals[r, 0] for r in roots], dtype=np.int64)
    hi = np.array([problem.intervals[r, 1] for r in roots], dtype=np.int64)
    for v in range(n):
        c = classes[v]
        if roots[c] == v:
            continue
        costs[c] = _sat_add(costs[c], problem.node_costs[v])
        usages[c] = np.maximum(usages[c], problem.node_usages[v])
        if problem.intervals[v, 1] > problem.intervals[v, 0]:
            lo[c] = min(lo[c], problem.intervals[v, 0]) if hi[c] > lo[c] else problem.intervals[v, 0]
            hi[c] = max(hi[c], problem.intervals[v, 1])
    new_edges: dict = {}
    for (u, v), mat in zip(problem.edges, problem.edge_costs):
        cu, cv = classes[int(u)], classes[int(v)]
        if cu == cv:
            costs[cu] = _sat_add(costs[cu], np.diagonal(mat))
            continue
        if cu > cv:
            cu, cv, mat = cv, cu, mat.T
        key = (cu, cv)
        new_edges[key] = _sat_add(new_edges[key], mat) if key in new_edges else mat.astype(np.int64)
    keys = sorted(new_edges)
    aliases = []
    for u, v, allowed in problem.aliases:
        cu, cv = classes[u], classes[v]
        if cu == cv:
            bad = ~np.diagonal(allowed)
            costs[cu] = np.where(bad, INFINITY, costs[cu])
        else:
            aliases.append((cu, cv, allowed))
    red = Problem(name=problem.name, intervals=np.stack([lo, hi], axis=1), node_costs=costs, node_usages=usages,
                  edges=np.array(keys, dtype=np.int64).reshape(-1, 2), edge_costs=[new_edges[k] for k in keys],
                  usage_limit=problem.usage_limit, cost_scale=problem.cost_scale, aliases=aliases)
    return red, classes


def _sat_add(a, b):
    out = a.astype(np.int64) + b.astype(np.int64)
    return np.minimum(out, INFINITY)


def _post_order(comp):
    order = comp.post_order()
    if len(order) == len(comp.instructions):
        return order
    seen = set(id(i) for i in order)
    return order + [i for i in comp.instructions if id(i) not in seen]


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


def _flat_leaf(shape, index: tuple) -> int:
    """Flat leaf index of a ShapeIndex in a (nested) tuple shape."""
    flat = 0
    cur = shape
    for i in index:
        r = leaf_range(cur, i)
        flat += r.start
        cur = cur.tuple_shapes[i]
    return flat


def _add_aliases(graph: Graph) -> None:
    module, ctx = graph.module, graph.ctx
    try:
        pairs = module.input_output_alias
    except Exception:  # noqa: BLE001
        pairs = []
    entry = module.entry
    for out_index, pnum, pindex in pairs or []:
        try:
            ol = _flat_leaf(entry.root.shape, tuple(out_index))
            param = entry.parameters[pnum]
            pl = _flat_leaf(param.shape, tuple(pindex))
        except (IndexError, AttributeError):
            raise InputError(f"input_output_alias {out_index}: parameter {pnum} {pindex} does not exist") from None
        ro, rp = ctx.resolve(entry.root, ol), ctx.resolve(param, pl)
        if ro is TOKEN or rp is TOKEN:
            continue
        (go, ko), (gp, kp) = ro, rp
        if go is gp:
            continue
        so = [s.out if ko is None else s.out[ko] for s in go.strategies]
        sp = [s.out if kp is None else s.out[kp] for s in gp.strategies]
        allowed = np.array([[_key(a) == _key(b) for b in so] for a in sp], dtype=bool)
        if not allowed.any():
            graph.warnings.append(f"input_output_alias {tuple(out_index)} <-> parameter {pnum}: the kept shardings "
                                  f"differ, the alias cannot share one sharding (constraint dropped)")
            continue
        graph.problem.aliases.append((gp.node, go.node, allowed))
    _add_shard_as_groups(graph)


def _add_shard_as_groups(graph: Graph) -> None:
    """``shard_as N`` groups (a hard constraint in XLA: every member ends up with the same sharding)
    become alias constraints between the first member and each other one.  ``shard_like`` is a soft
    hint and is ignored.  Raises InputError when the members cannot share any sharding."""
    ctx = graph.ctx
    groups: dict = {}
    for instr in graph.schedule:
        sh = instr.sharding
        gid = getattr(sh, "shard_as", None) if sh is not None and not isinstance(sh, str) else None
        if gid is None or not is_array(instr.shape):
            continue
        groups.setdefault(int(gid), []).append(instr)
    for gid in sorted(groups):
        members = groups[gid]
        first = members[0]
        r0 = ctx.resolve(first, 0)
        if r0 is TOKEN:
            continue
        g0, k0 = r0
        s0 = [s.out if k0 is None else s.out[k0] for s in g0.strategies]
        for other in members[1:]:
            if tuple(other.shape.dims) != tuple(first.shape.dims):
                raise InputError(f"shard_as {gid}: {first.name} {first.shape} and {other.name} {other.shape} have "
                                 f"different shapes")
            r = ctx.resolve(other, 0)
            if r is TOKEN or r[0] is g0:
                continue
            g1, k1 = r
            s1 = [s.out if k1 is None else s.out[k1] for s in g1.strategies]
            allowed = np.array([[_key(a) == _key(b) for b in s1] for a in s0], dtype=bool)
            if not allowed.any():
                raise InputError(f"shard_as {gid}: {first.name} and {other.name} cannot take the same sharding")
            graph.problem.aliases.append((g0.node, g1.node, allowed))


# ---------------------------------------------------------------------------------------------
# evaluating a choice
# ---------------------------------------------------------------------------------------------


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
    peak, t = peak_memory(graph.problem, choice)
    return Evaluation(comp, comm, float(ecost.sum()), peak, t, node_cost, ecost)


def peak_memory(problem: Problem, choice) -> tuple[int, int]:
    """(peak bytes per device over all liveness points, the point where it is reached)."""
    n = problem.num_nodes
    if n == 0:
        return 0, 0
    T = int(problem.intervals[:, 1].max()) + 1 if n else 1
    delta = np.zeros(T + 1, dtype=np.int64)
    for v in range(n):
        lo, hi = int(problem.intervals[v, 0]), int(problem.intervals[v, 1])
        if hi <= lo:
            continue
        u = int(problem.node_usages[v][int(choice[v])])
        delta[lo] += u
        delta[hi] -= u
    prof = np.cumsum(delta)
    t = int(np.argmax(prof))
    return int(prof[t]), t


def minimum_memory_check(graph: Graph, budget: int) -> None:
    """Raise SolveFailed when even the smallest layout of every tensor exceeds ``budget`` at some
    liveness point, naming the point and the largest tensors live there."""
    p = graph.problem
    n = p.num_nodes
    if n == 0:
        return
    T = int(p.intervals[:, 1].max()) + 1
    delta = np.zeros(T + 1, dtype=np.int64)
    mins = np.array([int(u.min()) for u in p.node_usages], dtype=np.int64)
    for v in range(n):
        lo, hi = int(p.intervals[v, 0]), int(p.intervals[v, 1])
        if hi > lo:
            delta[lo] += mins[v]
            delta[hi] -= mins[v]
    prof = np.cumsum(delta)
    t = int(np.argmax(prof))
    if prof[t] <= budget:
        return
    raise _failed(infeasible_message(graph, t, mins, budget, int(prof[t])), "infeasible")


def _failed(message: str, status: str) -> SolveFailed:
    """A SolveFailed carrying ``status`` ('infeasible' | 'timeout') for the ``--report`` of exit 3."""
    err = SolveFailed(message)
    err.status = status
    return err


def infeasible_message(graph: Graph, t: int, usage, budget: int, total: int) -> str:
    from .units import format_bytes

    p = graph.problem
    live = [v for v in range(p.num_nodes) if p.intervals[v, 0] <= t < p.intervals[v, 1]]
    live.sort(key=lambda v: (-int(usage[v]), v))
    instr = graph.schedule[t] if t < len(graph.schedule) else None
    names = ", ".join(f"{graph.nodes[v].instr.name} ({format_bytes(int(usage[v]))})" for v in live[:5])
    at = f"at liveness point {t} ({instr.name})" if instr is not None else f"at liveness point {t}"
    return (f"memory budget {format_bytes(budget)} per device is infeasible: {at} the live tensors need at least "
            f"{format_bytes(total)} per device even when sharded as far as possible; largest: {names}")


# ---------------------------------------------------------------------------------------------
# applying a choice to the IR
# ---------------------------------------------------------------------------------------------


def leaf_spec(graph: Graph, instr, leaf: int, choice):
    """The spec (axes tuple or raw HloSharding) leaf ``leaf`` of ``instr`` gets under ``choice``."""
    r = graph.ctx.resolve(instr, leaf)
    if r is TOKEN:
        return None
    g, k = r
    st = g.strategies[int(choice[g.node])]
    return st.out if k is None else st.out[k]


def instruction_sharding(graph: Graph, instr, choice):
    """The HloSharding the choice gives ``instr`` (a tuple sharding for tuple shapes)."""
    from .hlo.sharding import HloSharding

    minfo = graph.ctx.minfo
    leaves = leaf_shapes(instr.shape)
    elems = []
    for l, s in enumerate(leaves):
        spec = leaf_spec(graph, instr, l, choice) if is_array(s) else None
        if spec is None:
            elems.append(HloSharding.replicated())
        else:
            elems.append(minfo.to_sharding(spec, len(s.dims)))
    if instr.shape.is_tuple:
        return HloSharding.tuple(elems if elems else [HloSharding.replicated()])
    return elems[0]


def apply_choice(graph: Graph, choice) -> int:
    """Write ``sharding=`` on every instruction of the processed computations; drop the stale
    ``xla.sdy.sharding`` frontend attribute of each re-annotated instruction.  Returns the count."""
    count = 0
    kept = getattr(graph, "kept", {})
    for instr in graph.schedule:
        sh = instruction_sharding(graph, instr, choice)
        old = kept.get(instr)
        if old is not None and _same_sharding(old, sh, instr.shape):
            sh = old  # a kept user sharding is written back exactly as the user wrote it
        instr.sharding = sh
        fa = instr.attrs.get("frontend_attributes")
        if fa:
            items = list(fa.items()) if isinstance(fa, dict) else list(fa)
            rest = [(k, v) for k, v in items if k != "xla.sdy.sharding"]
            if len(rest) != len(items):
                if rest:
                    instr.attrs["frontend_attributes"] = dict(rest) if isinstance(fa, dict) else tuple(rest)
                else:
                    instr.set_attr("frontend_attributes", None)
        count += 1
    return count


def _same_sharding(a, b, shape) -> bool:
    try:
        if a == b:
            return True
        if shape.is_tuple and not a.is_tuple and b.is_tuple:
            return all(a == e for e in b.tuple_elements)
    except Exception:  # noqa: BLE001
        return False
    return False


# ---------------------------------------------------------------------------------------------
# solve / evaluate entry points
# ---------------------------------------------------------------------------------------------


@dataclass
class SolveResult:
    """What :func:`solve_module` returns: the graph, the solver's Solution (integer units), the choice
    (one strategy per node), its float evaluation (cost units) and the build / solve wall seconds."""

    graph: Graph
    solution: object
    choice: list
    evaluation: Evaluation
    seconds_build: float
    seconds_solve: float
    #: ``evaluate_module`` of the module as written (what ``hloshard cost`` reports for the output), or
    #: None when it was not used (it exceeded the memory budget).
    written: "CostResult | None" = None

    @property
    def objective(self) -> float:
        """Total cost (cost units) of the written shardings: ``hloshard cost`` of the output."""
        return (self.written.evaluation if self.written is not None else self.evaluation).total

    @property
    def solver_objective(self) -> float:
        """Total cost of the solver's own choice (before the written shardings are re-evaluated)."""
        return self.evaluation.total

    @property
    def bound(self) -> float | None:
        b = self.solution.bound
        return None if b is None else float(b) * self.graph.cost_scale

    @property
    def gap(self) -> float | None:
        if self.solution.objective is None or self.solution.bound is None:
            return None
        o, b = float(self.solution.objective), float(self.solution.bound)
        if o <= 0:
            return 0.0
        return max(0.0, (o - b) / o)


def solve_graph(graph: Graph, time_limit: float = 60.0, workers: int = 2, seed: int = 0, deterministic: bool = False,
                progress=None):
    """Solve ``graph.solver_problem`` (followers merged unless a memory budget is set) and expand the
    choice to every node of ``graph.problem``.  Raises SolveFailed (exit 3) when the memory budget is
    infeasible (naming the liveness point and tensors) or when no solution is found in time."""
    from .solver import solve_problem

    if graph.problem.usage_limit is not None:
        minimum_memory_check(graph, graph.problem.usage_limit)
    sol = solve_problem(graph.solver_problem, time_limit=time_limit, workers=workers, seed=seed,
                        deterministic=deterministic, hint=None, progress=progress)
    if sol.strategies:
        sol.strategies = [int(sol.strategies[c]) for c in graph.classes]
    if sol.status == "infeasible":
        msg = sol.explanation or "no feasible sharding"
        msg = _name_nodes(graph, msg, sol)
        raise _failed(f"no feasible solution: {msg}", "infeasible")
    if sol.status == "timeout" or not sol.strategies:
        raise _failed(f"no feasible solution found within the time limit ({time_limit:g} s)", "timeout")
    return sol


def _name_nodes(graph: Graph, msg: str, sol) -> str:
    """Append instruction names to the solver's explanation (its node ids are solver-problem ids)."""
    detail = getattr(sol, "detail", None) or {}
    first: dict = {}
    for v, c in enumerate(graph.classes):
        first.setdefault(c, v)

    def name(node) -> str | None:
        v = first.get(int(node))
        return None if v is None else graph.nodes[v].instr.name

    parts = [msg]
    t = detail.get("time")
    if t is not None and 0 <= int(t) < len(graph.schedule):
        parts.append(f"liveness point {int(t)} is at {graph.schedule[int(t)].name}")
    nodes = detail.get("nodes") or []
    names = []
    for entry in list(nodes)[:6]:
        node = entry.get("node") if isinstance(entry, dict) else entry
        nm = name(node) if node is not None else None
        if nm:
            names.append(nm)
    if names:
        parts.append("tensors live there: " + ", ".join(names))
    if detail.get("node") is not None and name(detail["node"]):
        parts.append(f"node {int(detail['node'])} is {name(detail['node'])}")
    return "; ".join(parts)


def solve_module(module, mesh, keep: str = "io", memory_budget: int | None = None, time_limit: float = 60.0,
                 workers: int = 2, seed: int = 0, deterministic: bool = False, progress=None,
                 export_problem: str | None = None) -> SolveResult:
    """Choose shardings for ``module`` and apply them (the IR is modified in place).
    Raises SolveFailed (exit 3) when no feasible solution exists or none was found in time."""
    import time

    t0 = time.monotonic()
    graph = build_graph(module, mesh, keep, memory_budget)
    if export_problem:
        from .costgraph import save_problem

        save_problem(graph.problem, export_problem)
    t1 = time.monotonic()
    sol = solve_graph(graph, time_limit=time_limit, workers=workers, seed=seed, deterministic=deterministic,
                      progress=progress)
    choice = list(sol.strategies)
    ev = evaluate_choice(graph, choice)
    apply_choice(graph, choice)
    # A sharding does not name everything the strategy decided (e.g. whether a dot's replicated output
    # is all-reduced or its operand all-gathered); ``hloshard cost`` of the output takes the cheapest
    # choice consistent with the written shardings, which can beat a time-limited solve.  Evaluate the
    # written module the same way so the reported objective is exactly what ``cost`` says of the output.
    try:
        written = evaluate_module(module, mesh)
    except SolveFailed:  # the re-evaluation found nothing in its own time limit: report the solver's choice
        written = None
        graph.warnings.append("the written shardings could not be re-evaluated in time; the objective is the "
                              "solver's own and hloshard cost of the output may be lower")
    if written is not None and memory_budget is not None and written.evaluation.peak_memory > memory_budget:
        written = None
    elif written is not None and abs(written.total_cost - ev.total) > 1e-9 * max(1.0, abs(ev.total)):
        graph.warnings.append(f"the solver's choice costs {ev.total:,.2f}; the written shardings cost "
                              f"{written.total_cost:,.2f} with the cheapest strategies consistent with them "
                              f"(as hloshard cost evaluates the output)")
    return SolveResult(graph, sol, choice, ev, t1 - t0, time.monotonic() - t1, written)


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
    from .cost.reshard import plan

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
