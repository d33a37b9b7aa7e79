"""``hloshard explain``: why one instruction is sharded as it is, what it costs, what it causes, and
what the best alternatives would change.

The report is built from the same cost graph ``hloshard cost`` prices (:func:`hloshard.autoshard.build_graph`
and ``evaluate_choice``): no second cost model.

1. The instruction and its *neighbourhood* (instructions within ``radius`` operand/user steps, at most
   :data:`MAX_FREE`, nearest first; entry parameters and the entry root only when they are the
   instruction itself) are built without their annotations (full strategy space); every other
   annotation is kept exactly, as ``hloshard cost`` keeps them.
2. *As given*: each freed instruction is restricted to the strategies producing its own sharding and the
   graph is solved (a deterministic solve, as ``cost`` does): the total equals ``hloshard cost`` of the
   module.  The instruction's strategy in that choice gives its compute / communication cost, memory per
   device, the operand shardings it requires, the reshardings on its operand edges (planned by
   :func:`hloshard.cost.reshard.plan`: kind, replica groups, bytes) and on its users' edges, and the
   collectives behind its communication cost (``Strategy.collectives``).
3. *Alternatives*: for each other output sharding its strategies offer, the instruction is fixed to it and
   the neighbourhood is re-solved exactly (a small CP-SAT problem over the freed nodes, the rest fixed
   at the as-given choice: boundary edges folded into node costs).  The change of the module's TOTAL
   cost (cost units) is reported, plus which neighbours changed sharding.  ``why_not`` does the same for one
   given sharding, also when it is not among the best.

Costs are in the mesh's cost units (alpha-beta model), memory in bytes per device.
Raises :class:`hloshard.errors.InputError` for an unknown instruction (with close names) or one that
gets no sharding of its own (inside a fusion or reducer), :class:`hloshard.errors.UsageError` for a
``why_not`` sharding that does not parse or fit the mesh.
"""

from __future__ import annotations

import difflib
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from .costgraph import INFINITY, Problem
from .errors import HloSyntaxError, InputError, UsageError
from .units import counted

#: most instructions re-solved around the explained one (keeps each re-solve a small exact CP-SAT model)
MAX_FREE = 40
#: most distinct output shardings re-solved as alternatives (beyond it the locally cheapest are kept)
MAX_CANDIDATES = 24
#: wall seconds a single neighbourhood re-solve may take
RESOLVE_SECONDS = 5.0


@dataclass
class Explanation:
    """Everything ``explain`` reports; :meth:`to_json` is the ``--format json`` document."""

    data: dict
    xla: dict | None = None
    notes: list = field(default_factory=list)
    #: the module as ``hloshard cost`` evaluated it (:class:`hloshard.autoshard.CostResult`; not in the JSON)
    cost_result: object = None

    def to_json(self) -> dict:
        out = dict(self.data)
        if self.xla is not None:
            out["xla"] = self.xla
        out["notes"] = list(self.notes)
        return out


# ------------------------------------------------------------------------------------------------
# finding the instruction and its neighbourhood


def find_instruction(module, name: str, filename: str | None = None):
    """The instruction called ``name`` (a leading ``%`` is ignored). InputError with close names otherwise."""
    want = name.lstrip("%")
    names = []
    for comp in module.computations:
        for instr in comp.instructions:
            if instr.name.lstrip("%") == want:
                return instr
            names.append(instr.name.lstrip("%"))
    close = difflib.get_close_matches(want, names, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise InputError(f"no instruction named {name!r}{' in ' + filename if filename else ''}{hint}")


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


def _freeable(instr, target, module) -> bool:
    if instr is target:
        return True
    entry = module.entry
    if instr.parent is entry and (instr.opcode == "parameter" or instr is entry.root):
        return False  # the program's interface stays as the user wrote it
    sh = instr.sharding
    return sh is None or isinstance(sh, str) or not (sh.is_manual or sh.is_maximal)


# ------------------------------------------------------------------------------------------------
# spec helpers


def _same_spec(a, b) -> bool:
    from .strategy.base import is_mesh_spec

    if is_mesh_spec(a) and is_mesh_spec(b):
        return a == b
    if is_mesh_spec(a) or is_mesh_spec(b):
        return False
    return a == b


def _spec_key(spec):
    from .strategy.base import is_mesh_spec

    return spec if is_mesh_spec(spec) or spec is None else ("raw", str(spec))


def _nodes_of(graph, instr) -> list:
    """(node id, leaf index or None) of every cost-graph node ``instr`` owns."""
    from .strategy.base import StrategyGroup

    g = graph.ctx.groups.get(instr)
    if g is None:
        return []
    if isinstance(g, StrategyGroup):
        return [(g.node, None)] if g.node >= 0 else []
    out = []
    for leaf, child in enumerate(g.children):
        if isinstance(child, StrategyGroup) and child.instr is instr and child.node >= 0:
            out.append((child.node, leaf))
    return out


def _wanted_specs(graph, instr) -> list:
    """Per leaf the spec the instruction's own annotation asks for (None: token / no annotation)."""
    from .strategy.base import is_array, leaf_shapes

    sh = instr.sharding
    leaves = leaf_shapes(instr.shape)
    if sh is None or isinstance(sh, str) or sh.is_unknown:
        return [None] * len(leaves)
    elems = list(sh.tuple_elements) if sh.is_tuple else [sh] * len(leaves)
    if len(elems) != len(leaves):
        return [None] * len(leaves)
    return [graph.ctx.minfo.from_sharding(e, len(s.dims)) if is_array(s) else None for s, e in zip(leaves, elems)]


def _allowed_for(graph, node: int, leaf, spec) -> np.ndarray:
    """Boolean mask over node ``node``'s strategies whose output (leaf) is ``spec``."""
    g = graph.nodes[node]
    mask = np.zeros(len(g.strategies), dtype=bool)
    for q, st in enumerate(g.strategies):
        out = st.out if (leaf is None or not g.multi) else st.out[leaf]
        mask[q] = _same_spec(out, spec)
    return mask


# ------------------------------------------------------------------------------------------------
# solving restricted problems


def _solve_restricted(graph, masks: dict, time_limit: float) -> list:
    """Solve the whole graph with node strategies limited by ``masks`` (node -> bool array); the
    deterministic, single-worker solve ``hloshard cost`` uses.  Returns one strategy per node."""
    from .errors import SolveFailed
    from .solver import solve_problem

    sp, classes = graph.solver_problem, graph.classes
    costs = [c.copy() for c in sp.node_costs]
    for v, mask in masks.items():
        c = classes[v]
        if len(costs[c]) == len(mask):
            costs[c] = np.where(mask, costs[c], INFINITY)
    sub = Problem(name=sp.name, intervals=sp.intervals, node_costs=costs, node_usages=sp.node_usages,
                  edges=sp.edges, edge_costs=sp.edge_costs, usage_limit=None, cost_scale=sp.cost_scale,
                  aliases=sp.aliases)
    sol = solve_problem(sub, time_limit=time_limit, workers=1, seed=0, deterministic=True)
    if not sol.strategies:
        raise SolveFailed("the shardings as given admit no consistent strategy choice "
                          f"({sol.explanation or sol.status})")
    return [int(sol.strategies[c]) for c in classes]


def resolve_neighbourhood(graph, free: list, base: list, masks: dict, time_limit: float = RESOLVE_SECONDS):
    """Re-optimise the nodes ``free`` with every other node fixed at ``base``; ``masks`` limits some free
    nodes' strategies.  Exact (CP-SAT) up to ``time_limit``.  Returns the full choice, or None when no
    choice is allowed (the fixed rest forbids it)."""
    from .solver import solve_problem

    p = graph.problem
    index = {v: k for k, v in enumerate(free)}
    costs = []
    for v in free:
        c = p.node_costs[v].astype(np.int64).copy()
        m = masks.get(v)
        if m is not None:
            c = np.where(m, c, INFINITY)
        costs.append(c)
    edges, edge_costs = [], []
    for (u, v), mat in zip(p.edges, p.edge_costs):
        u, v = int(u), int(v)
        iu, iv = index.get(u), index.get(v)
        if iu is not None and iv is not None:
            edges.append((iu, iv))
            edge_costs.append(mat)
        elif iu is not None:
            costs[iu] = np.minimum(costs[iu] + mat[:, base[v]], INFINITY)
        elif iv is not None:
            costs[iv] = np.minimum(costs[iv] + mat[base[u], :], INFINITY)
    aliases = []
    for u, v, allowed in p.aliases:
        iu, iv = index.get(u), index.get(v)
        if iu is not None and iv is not None:
            aliases.append((iu, iv, allowed))
        elif iu is not None:
            costs[iu] = np.where(allowed[:, base[v]], costs[iu], INFINITY)
        elif iv is not None:
            costs[iv] = np.where(allowed[base[u], :], costs[iv], INFINITY)
    n = len(free)
    sub = Problem(name="neighbourhood", intervals=np.zeros((n, 2), dtype=np.int64), node_costs=costs,
                  node_usages=[np.zeros(len(c), dtype=np.int64) for c in costs],
                  edges=np.array(edges, dtype=np.int64).reshape(-1, 2), edge_costs=edge_costs, usage_limit=None,
                  cost_scale=p.cost_scale, aliases=aliases)
    if any(bool((c >= INFINITY).all()) for c in costs):
        return None
    sol = solve_problem(sub, time_limit=time_limit, workers=1, seed=0, deterministic=True)
    if not sol.strategies:
        return None
    choice = list(base)
    for k, v in enumerate(free):
        choice[v] = int(sol.strategies[k])
    return choice


# ------------------------------------------------------------------------------------------------
# the report


def _breakdown(ev) -> dict:
    return {"total": round(ev.total, 6), "compute": round(ev.compute, 6),
            "communication": round(ev.communication, 6), "resharding": round(ev.resharding, 6)}


def _metadata(instr) -> dict:
    raw = instr.attrs.get("metadata")
    if raw is None:
        return {}
    try:
        from .hlo.attributes import parse_metadata

        md = parse_metadata(raw if isinstance(raw, str) else str(raw))
    except Exception:  # noqa: BLE001 - metadata is informational; never fail the report on it
        return {}
    out = {k: md[k] for k in ("op_name", "op_type", "source_file", "source_line") if k in md}
    if "source_line" in out:
        try:
            out["source_line"] = int(out["source_line"])
        except (TypeError, ValueError):
            pass
    return out


def _requirements(group, st):
    """(operand instruction, leaf, required spec) for every operand leaf strategy ``st`` constrains."""
    from .strategy.base import LeafRef, leaf_shapes

    out = []
    for i, opref in enumerate(group.ops()):
        req = st.inputs[i] if i < len(st.inputs) else None
        if req is None:
            continue
        if isinstance(opref, LeafRef):
            out.append((opref.instr, opref.leaf, req))
        elif opref.shape.is_tuple:
            for leaf in range(len(leaf_shapes(opref.shape))):
                r = req[leaf] if isinstance(req, tuple) and len(req) > leaf and not _is_spec(req) else None
                if r is not None:
                    out.append((opref, leaf, r))
        else:
            out.append((opref, 0, req))
    return out


def _is_spec(x) -> bool:
    from .strategy.base import is_mesh_spec

    return is_mesh_spec(x)


def _sharding_text(graph, spec, shape) -> str | None:
    if spec is None:
        return None
    return str(graph.ctx.minfo.to_sharding(spec, len(shape.dims)))


def _plan_json(graph, shape, src, dst, weight: float) -> dict:
    """The resharding plan from ``src`` to ``dst`` (specs) with its steps (kind, replica groups, bytes)."""
    from .cost.reshard import plan

    minfo = graph.ctx.minfo
    a, b = minfo.to_sharding(src, len(shape.dims)), minfo.to_sharding(dst, len(shape.dims))
    entry = {"from": str(a), "to": str(b), "cost": 0.0, "steps": []}
    if a == b:
        return entry
    try:
        pl = plan(shape, a, b, graph.mesh)
    except Exception as exc:  # noqa: BLE001 - the planner cannot express it (e.g. manual): say so
        entry["steps"] = [{"kind": "unplannable", "reason": str(exc)}]
        return entry
    entry["cost"] = round(float(pl.total_cost) * weight, 6)
    entry["steps"] = [{"kind": s.kind, "dims": list(s.dims), "mesh_axes": list(s.mesh_axes),
                       "replica_groups": [list(g) for g in s.replica_groups],
                       "bytes_per_device": int(s.bytes_per_device), "cost": round(float(s.cost) * weight, 6)}
                      for s in pl.steps]
    return entry


def _edges_of(graph, node: int):
    """Edge ids touching ``node``."""
    return [e for e, (u, v) in enumerate(graph.problem.edges) if int(u) == node or int(v) == node]


def _strategy_json(graph, instr, node, leaf, choice, ev) -> dict:
    from .strategy.base import leaf_shapes

    g = graph.nodes[node]
    st = g.strategies[int(choice[node])]
    w = graph.ctx.weight(g.instr)
    operands = []
    for inst, lf, req in _requirements(g, st):
        shape = leaf_shapes(inst.shape)[lf]
        if not shape.is_array:
            continue
        from .autoshard import leaf_spec

        src = leaf_spec(graph, inst, lf, choice)
        row = {"operand": inst.name, "leaf": lf, "shape": str(shape),
               "required": _sharding_text(graph, req, shape), "has": _sharding_text(graph, src, shape)}
        if src is not None and not _same_spec(src, req):
            row["resharding"] = _plan_json(graph, shape, src, req, w)
        operands.append(row)
    in_cost = out_cost = 0.0
    users = []
    for e in _edges_of(graph, node):
        c = float(ev.edge_cost[e])
        for inst, lf, dst_group, wt in graph.edge_info[e]:
            if dst_group is g:
                in_cost += c / max(1, len(graph.edge_info[e]))
            elif inst is instr or (inst is g.instr):
                out_cost += c / max(1, len(graph.edge_info[e]))
                if c > 0:
                    users.append({"user": dst_group.instr.name, "cost": round(c / len(graph.edge_info[e]), 6)})
    collectives = [{"kind": pc.kind, "mesh_axes": list(pc.mesh_axes), "group_size": int(pc.group_size),
                    "bytes_per_device": int(pc.nbytes), "ring_bytes": round(float(pc.ring_bytes), 3),
                    "replica_groups": [list(x) for x in (pc.replica_groups or
                                                         graph.mesh.replica_groups(tuple(pc.mesh_axes)))]}
                   for pc in getattr(st, "collectives", ())]
    return {"node": int(node), "leaf": leaf, "strategy": st.name, "executions": w,
            "compute": round(st.compute * w, 6), "communication": round(st.comm * w, 6),
            "resharding_in": round(in_cost, 6), "resharding_out": round(out_cost, 6),
            "memory_per_device": int(st.memory), "operands": operands, "collectives": collectives,
            "users_resharding": sorted(users, key=lambda r: (-r["cost"], r["user"]))}


def _edges_touching(graph, nodes) -> list:
    """Edge ids with at least one end in ``nodes``."""
    ns = set(nodes)
    return [e for e, (u, v) in enumerate(graph.problem.edges) if int(u) in ns or int(v) in ns]


def _local_change(graph, base, choice, nodes, edges) -> dict:
    """Exact change of compute, communication and resharding (cost units) from ``base`` to ``choice``
    when only ``nodes`` differ: their strategies' costs and the ``edges`` touching them (the terms
    ``evaluate_choice`` sums; every other term is the same in both)."""
    out = {"compute": 0.0, "communication": 0.0, "resharding": 0.0}
    for v in nodes:
        if choice[v] == base[v]:
            continue
        g = graph.nodes[v]
        w = graph.ctx.weight(g.instr)
        a, b = g.strategies[int(base[v])], g.strategies[int(choice[v])]
        out["compute"] += (b.compute - a.compute) * w
        out["communication"] += (b.comm - a.comm) * w
    for e in edges:
        u, v = (int(x) for x in graph.problem.edges[e])
        m = graph.edge_float[e]
        out["resharding"] += float(m[choice[u], choice[v]] - m[base[u], base[v]])
    return out


def _changed_neighbours(graph, movable, target, base, choice) -> list:
    from .autoshard import instruction_sharding

    out = []
    for instr in movable:
        if instr is target:
            continue
        a, b = instruction_sharding(graph, instr, base), instruction_sharding(graph, instr, choice)
        if a != b:
            out.append({"instruction": instr.name, "from": str(a), "to": str(b)})
    return out


#: most nodes a neighbourhood grows to when it takes in the nodes that follow its members
MAX_FOLLOWERS = 400


def _with_followers(graph, nodes: set) -> set:
    """``nodes`` plus every node tied to one of them by following (the same decision: the follower
    merge classes of the cost graph), so that fixing the rest does not pin the neighbourhood through a
    follower chain; at most :data:`MAX_FOLLOWERS` nodes are added, nearest classes first."""
    classes = getattr(graph, "classes", None)
    if classes is None:
        return set(nodes)
    want = {classes[v] for v in nodes}
    members: dict = {}
    for v, c in enumerate(classes):
        if c in want:
            members.setdefault(c, []).append(v)
    out = set(nodes)
    for c in sorted(want, key=lambda c: len(members[c])):
        extra = [v for v in members[c] if v not in out]
        if len(out) + len(extra) - len(nodes) > MAX_FOLLOWERS:
            continue
        out.update(extra)
    return out


def _map_choice(g1, c1, g2) -> tuple[list, list]:
    """Carry the choice ``c1`` of graph ``g1`` over to ``g2`` (the same module with some annotations
    removed): per node of ``g2`` the strategy with the same name, output and operand requirements as the
    one ``c1`` picks for the same instruction leaf, else one with the same output.  Returns (choice,
    nodes without a counterpart)."""
    by_leaf = {}
    for v, g in enumerate(g1.nodes):
        by_leaf[(id(g.instr), _leaf_of(g1, v))] = (g, int(c1[v]))
    out, missing = [], []
    for v, g in enumerate(g2.nodes):
        hit = by_leaf.get((id(g.instr), _leaf_of(g2, v)))
        pick = s1 = None
        if hit is not None:
            g1_group, q1 = hit
            s1 = g1_group.strategies[q1]
            if len(g.strategies) == len(g1_group.strategies) and q1 < len(g.strategies):
                st = g.strategies[q1]  # the common case: the group was built the same way
                if st.name == s1.name and _spec_key(st.out) == _spec_key(s1.out) and \
                        _inputs_key(st.inputs) == _inputs_key(s1.inputs):
                    pick = q1
        if pick is None and s1 is not None:
            k_out, k_in = _spec_key(s1.out), _inputs_key(s1.inputs)
            for q, st in enumerate(g.strategies):
                if st.name == s1.name and _spec_key(st.out) == k_out and _inputs_key(st.inputs) == k_in:
                    pick = q
                    break
            if pick is None:
                for q, st in enumerate(g.strategies):
                    if _spec_key(st.out) == k_out:
                        pick = q
                        break
        if pick is None:
            missing.append(v)
            pick = 0
        out.append(pick)
    return out, missing


def _leaf_of(graph, v: int):
    g = graph.nodes[v]
    for node, leaf in _nodes_of(graph, g.instr):
        if node == v:
            return leaf
    return None


def _inputs_key(inputs) -> tuple:
    return tuple(_spec_key(x) if not isinstance(x, tuple) or _is_spec(x) else tuple(_spec_key(y) for y in x)
                 for x in inputs)


def explain_instruction(module, mesh, name: str, alternatives: int = 5, why_not: str | None = None,
                        radius: int = 2, filename: str | None = None, time_limit: float = 30.0,
                        verify: bool = False) -> Explanation:
    """Explain instruction ``name`` of ``module`` on ``mesh`` (see the module docstring).

    ``alternatives``: how many alternative output shardings to list (best TOTAL cost change first);
    ``why_not``: a sharding text (``{devices=[1,8]<=[8]}``) to evaluate in the same way; ``radius``:
    operand/user steps re-solved around the instruction.  Costs in cost units, memory in bytes per device.
    The instruction's figures and the module cost are those of ``hloshard cost`` (the same evaluation).
    ``verify``: also price every listed alternative as ``hloshard cost`` prices the module rewritten with
    its shardings (``verified_total`` / ``verified_change``; one full evaluation each).
    """
    from .autoshard import build_graph, evaluate_choice, evaluate_module, processed_computations

    target = find_instruction(module, name, filename)
    comps = processed_computations(module)
    allowed = {id(i) for c in comps for i in c.instructions}
    if id(target) not in allowed:
        callers = [i.name for c in comps for i in c.instructions if target.parent in i.called_computations]
        where = f" (called by {callers[0]})" if callers else ""
        raise InputError(f"{target.name} is inside computation {target.parent.name}{where}, which gets no "
                         f"shardings of its own; explain {callers[0] if callers else 'its caller'} instead")
    want_spec = _parse_why_not(why_not, target, mesh) if why_not is not None else None

    # 1. as given: exactly what `hloshard cost` evaluates
    given = evaluate_module(module, mesh, time_limit=time_limit)
    g1, c1, ev1 = given.graph, given.choice, given.evaluation
    tnodes1 = _nodes_of(g1, target)
    from .autoshard import instruction_sharding

    data = {
        "instruction": target.name, "opcode": target.opcode, "shape": str(target.shape),
        "computation": target.parent.name, "file": filename, "line": target.line, "column": target.column,
        "source": _metadata(target),
        "sharding": None if target.sharding is None else str(target.sharding),
        "sharding_used": str(instruction_sharding(g1, target, c1)) if tnodes1 else None,
        "annotated": target.sharding is not None,
        "mesh": mesh.to_json() if hasattr(mesh, "to_json") else str(mesh),
        "module_cost": _breakdown(ev1),
        "peak_memory_per_device": int(ev1.peak_memory),
        "nodes": [_strategy_json(g1, target, v, leaf, c1, ev1) for v, leaf in tnodes1],
        "neighbourhood": [], "alternatives": [], "alternatives_considered": 0, "why_not": None,
    }
    notes: list = []
    if not tnodes1:
        notes.append(f"{target.name} has no cost-graph node of its own (a tuple, token or alias of another value)")
        return Explanation(data, notes=notes, cost_result=given)
    if alternatives <= 0 and want_spec is None:
        return Explanation(data, notes=notes, cost_result=given)

    # 2. the neighbourhood without its annotations, the rest as given
    free_instrs = [i for i in neighbourhood(target, allowed, radius) if _freeable(i, target, module)]
    saved = {id(i): i.sharding for i in free_instrs}
    try:
        for i in free_instrs:
            i.sharding = None
        graph = build_graph(module, mesh, keep="all")
    finally:
        for i in free_instrs:
            i.sharding = saved[id(i)]
    mapped, missing = _map_choice(g1, c1, graph)
    masks = {}
    free_ids = {id(i) for i in free_instrs}
    for instr in free_instrs:
        wanted = _wanted_specs(graph, instr)
        for node, leaf in _nodes_of(graph, instr):
            spec = wanted[leaf if leaf is not None else 0]
            if spec is not None:
                m = _allowed_for(graph, node, leaf, spec)
                if m.any():
                    masks[node] = m
    free_nodes = {v for i in free_instrs for v, _ in _nodes_of(graph, i)} | \
        {v for v in missing if id(graph.nodes[v].instr) not in free_ids}
    free_nodes = sorted(_with_followers(graph, free_nodes))
    movable = list(free_instrs)  # every instruction whose sharding a re-solve may change (followers included)
    seen_m = {id(i) for i in movable}
    for v in free_nodes:
        instr = graph.nodes[v].instr
        if id(instr) not in seen_m:
            seen_m.add(id(instr))
            movable.append(instr)
    base = resolve_neighbourhood(graph, free_nodes, mapped, masks)
    if base is None:  # the neighbourhood's own shardings cannot be reproduced with the rest fixed
        base = _solve_restricted(graph, masks, time_limit)
        notes.append("the neighbourhood's shardings were re-priced with the whole module re-solved")
    ev = evaluate_choice(graph, base)
    data["neighbourhood"] = [i.name for i in free_instrs]
    data["alternatives_baseline"] = round(ev.total, 6)
    if abs(ev.total - ev1.total) > 1e-9 * max(1.0, abs(ev1.total)):
        notes.append(f"with its neighbourhood re-built the module as given prices at {ev.total:,.2f} instead of "
                     f"{ev1.total:,.2f} (strategies that follow an operand are tied to it once re-solved); the "
                     f"alternatives' changes are against {ev.total:,.2f}")
    tnodes = _nodes_of(graph, target)
    main = tnodes[0] if tnodes else None
    if len(tnodes) > 1:
        notes.append(f"{target.name} has {len(tnodes)} nodes (a tuple); alternatives are for leaf {main[1]}")
    cur_node = main[0] if main else None
    g = graph.nodes[cur_node] if main else None

    def out_of(st):
        return st.out if (main[1] is None or not g.multi) else st.out[main[1]]

    cur_spec = out_of(g.strategies[base[cur_node]]) if main else None
    if main is not None:
        keep_masks = dict(masks)
        keep_masks[cur_node] = _allowed_for(graph, cur_node, main[1], cur_spec)
        for v in free_nodes:
            if v != cur_node:
                keep_masks.pop(v, None)
        keep_choice = resolve_neighbourhood(graph, free_nodes, base, keep_masks)
        if keep_choice is not None:
            kev = evaluate_choice(graph, keep_choice)
            data["neighbourhood_resolved"] = {
                "total_change": round(kev.total - ev.total, 6),
                "changed": _changed_neighbours(graph, movable, target, base, keep_choice)}

    def evaluate_alt(spec) -> dict:
        from .strategy.base import leaf_shapes

        shape = leaf_shapes(target.shape)[main[1] or 0]
        m = _allowed_for(graph, cur_node, main[1], spec)
        row = {"sharding": _sharding_text(graph, spec, shape)}
        if not m.any():
            row.update(possible=False, reason=f"no strategy of {target.opcode} {target.name} produces this sharding")
            return row
        ch = resolve_neighbourhood(graph, free_nodes, base, {cur_node: m})
        if ch is None:
            row.update(possible=False, reason="the shardings kept outside the neighbourhood forbid it")
            return row
        change = _local_change(graph, base, ch, free_nodes, touching)
        st = graph.nodes[cur_node].strategies[ch[cur_node]]
        row.update(possible=True, total_change=round(sum(change.values()), 6),
                   change={k: round(v, 6) for k, v in change.items()},
                   memory_per_device=int(st.memory), strategy=st.name,
                   changed=_changed_neighbours(graph, movable, target, base, ch))
        row["_choice"] = ch
        return row

    def finish(row: dict) -> dict:
        """Peak memory of a reported alternative (a full evaluation: only for the rows shown)."""
        ch = row.pop("_choice", None)
        if ch is not None:
            row["peak_memory_change"] = int(evaluate_choice(graph, ch).peak_memory) - int(ev.peak_memory)
        return row

    touching = _edges_touching(graph, free_nodes)

    if main is not None and alternatives > 0:
        seen, cands = set(), []
        for st in g.strategies:
            spec = out_of(st)
            k = _spec_key(spec)
            if k in seen or spec is None or _same_spec(spec, cur_spec):
                continue
            seen.add(k)
            cands.append(spec)
        if len(cands) > MAX_CANDIDATES:  # keep the locally cheapest (node cost only) for the exact re-solve
            local = {}
            for q, st in enumerate(g.strategies):
                k = _spec_key(out_of(st))
                local[k] = min(local.get(k, float("inf")), float(graph.problem.node_costs[cur_node][q]))
            cands.sort(key=lambda s: local[_spec_key(s)])
            notes.append(f"{len(cands)} alternative shardings; the {MAX_CANDIDATES} locally cheapest were re-solved")
            cands = cands[:MAX_CANDIDATES]
        evaluated = [evaluate_alt(s) for s in cands]
        rows = [r for r in evaluated if r.get("possible")]
        if len(rows) < len(evaluated):
            notes.append(f"{len(evaluated) - len(rows)} of {len(evaluated)} alternative shardings are not possible "
                         f"with the rest of the module kept as it is")
        rows.sort(key=lambda r: (r["total_change"], r["sharding"]))
        data["alternatives"] = [finish(r) for r in rows[:alternatives]]
        if verify:
            for r in data["alternatives"]:
                _verify(r, module, mesh, target, ev1.total, time_limit)
        data["alternatives_considered"] = len(cands)
    if want_spec is not None:
        if main is None:
            data["why_not"] = {"sharding": why_not, "possible": False,
                               "reason": f"{target.name} cannot be re-solved here (see notes)"}
        elif _same_spec(want_spec, cur_spec):
            data["why_not"] = {"sharding": why_not, "possible": True, "total_change": 0.0,
                               "reason": f"{target.name} already has this sharding"}
        else:
            data["why_not"] = finish(evaluate_alt(want_spec))
            if verify and data["why_not"].get("possible"):
                _verify(data["why_not"], module, mesh, target, ev1.total, time_limit)
    return Explanation(data, notes=notes, cost_result=given)


def rewritten_module(module, target_name: str, row: dict):
    """A copy of ``module`` with the shardings an alternative ``row`` gives the instruction and the
    neighbours it moves written as annotations."""
    from .hlo import parse_module, print_module
    from .hlo.sharding import HloSharding

    copy = parse_module(print_module(module), "<alternative>")
    find_instruction(copy, target_name).sharding = HloSharding.parse(row["sharding"])
    for c in row.get("changed", ()):
        find_instruction(copy, c["instruction"]).sharding = HloSharding.parse(c["to"])
    return copy


def _verify(row: dict, module, mesh, target, given_total: float, time_limit: float) -> None:
    """``verified_total``: ``hloshard cost`` of the module rewritten with ``row``'s shardings;
    ``verified_change``: that minus the module as given (cost units)."""
    from .autoshard import evaluate_module
    from .errors import HloshardError

    try:
        total = evaluate_module(rewritten_module(module, target.name, row), mesh, time_limit=time_limit).total_cost
    except HloshardError as exc:
        row["verified_error"] = str(exc)
        return
    row["verified_total"] = round(total, 6)
    row["verified_change"] = round(total - given_total, 6)


def _parse_why_not(text: str, target, mesh):
    from .hlo.sharding import HloSharding
    from .strategy.base import MeshInfo

    t = text.strip()
    if not t.startswith("{"):
        t = "{" + t + "}"
    try:
        sh = HloSharding.parse(t)
    except HloSyntaxError as exc:
        raise UsageError(f"--why-not {text!r}: {exc.message}") from None
    if target.shape.is_tuple:
        raise UsageError(f"--why-not: {target.name} is a tuple; give an array instruction")
    if sh.is_tiled and len(sh.tile_dims) != len(target.shape.dims):
        raise UsageError(f"--why-not {text!r} tiles {len(sh.tile_dims)} dims but {target.name} has rank "
                         f"{len(target.shape.dims)}")
    if sh.is_tiled and sh.num_devices != mesh.num_devices:
        raise UsageError(f"--why-not {text!r} uses {counted(sh.num_devices, 'device')} but the mesh has "
                         f"{mesh.num_devices}")
    return MeshInfo(mesh).from_sharding(sh, len(target.shape.dims))


# ------------------------------------------------------------------------------------------------
# XLA


def attach_xla(expl: Explanation, module, num_partitions: int) -> None:
    """Partition the module with XLA's SPMD partitioner (child process) and record the collectives it
    inserts for the instruction beside the ones hloshard predicts for it (``expl.xla``).

    Both sides come from :mod:`hloshard.xla_compare`, the one matcher of XLA collectives to instructions
    (``cost --xla`` uses it too): every instruction gets a unique ``op_name`` tag, XLA's collectives are
    matched by the innermost known tag of their (possibly composed, ``hloshard.52/hloshard.19``)
    ``op_name``; the prediction is ``predicted_collectives`` of the as-given choice (the strategy's
    collectives and the resharding steps on its operand edges).  Bytes: ring bytes per device.
    Raises InputError when jax is missing."""
    from . import xla_compare

    text, tags = xla_compare.tag_module_text(module)
    res = xla_compare.run_xla([text], num_partitions)[0]
    target = find_instruction(module, expl.data["instruction"])
    if res.error:
        expl.xla = {"error": res.error, "collectives": []}
        return
    cols, ds = xla_compare.collectives_of(res, tags, target)
    predicted = []
    if expl.cost_result is not None:
        predicted = xla_compare.predicted_collectives(expl.cost_result).get(target.name, [])
    expl.xla = {"collectives": [dict(c.to_json(), ring_bytes=xla_compare.xla_ring_bytes(c, num_partitions))
                                for c in cols],
                "dynamic_slice": ds,
                "predicted": [r.to_json() for r in predicted],
                "predicted_kinds": sorted(r.kind for r in predicted),
                "xla_kinds": sorted(c.kind.replace("-start", "") for c in cols)}
    expl.xla["predicted_ring_bytes"] = round(sum(r.ring_bytes for r in predicted), 3)
    expl.xla["xla_ring_bytes"] = round(sum(c["ring_bytes"] for c in expl.xla["collectives"]), 3)
    expl.xla["agrees"] = expl.xla["xla_kinds"] == expl.xla["predicted_kinds"]


# ------------------------------------------------------------------------------------------------
# text


def location_text(data: dict) -> str:
    """Where the instruction is in the input: ``FILE:LINE:COL``, or ``line L, column C`` without a file."""
    if data.get("file") and data.get("line"):
        return f"{data['file']}:{data['line']}:{data['column']}"
    return f"line {data['line']}, column {data['column']}" if data.get("line") else "position unknown"


def source_text(src: dict | None) -> str:
    """The source location of the metadata: ``source_file:source_line  op_name``; the parts that are
    absent are left out (``op_name`` alone when there is no ``source_file``); '' when there is none."""
    src = src or {}
    parts = []
    if src.get("source_file"):
        line = src.get("source_line")
        parts.append(f"{src['source_file']}:{line}" if line not in (None, "") else str(src["source_file"]))
    if src.get("op_name"):
        parts.append(str(src["op_name"]))
    return "  ".join(parts)


def render_text(expl: Explanation, console) -> None:
    """Rich text rendering of :class:`Explanation` on ``console``."""
    from rich.table import Table

    from .units import format_bytes

    d = expl.data
    console.print(f"[bold]{d['instruction']}[/bold] = {d['shape']} {d['opcode']}   ({location_text(d)}, computation "
                  f"{d['computation']})")
    if source_text(d["source"]):
        console.print(f"  source  {source_text(d['source'])}")
    given = d["sharding"] or "none (chosen as `hloshard cost` would)"
    console.print(f"  sharding  {given}")
    if d["sharding_used"] and d["sharding_used"] != d["sharding"]:
        console.print(f"  priced as {d['sharding_used']}")
    mc = d["module_cost"]
    console.print(f"  module cost {mc['total']:,.2f} (compute {mc['compute']:,.2f}, communication "
                  f"{mc['communication']:,.2f}, resharding {mc['resharding']:,.2f}); peak memory "
                  f"{format_bytes(d['peak_memory_per_device'])} per device")
    for n in d["nodes"]:
        leaf = "" if n["leaf"] is None else f" (leaf {n['leaf']})"
        console.print(f"\n[bold]strategy[/bold]{leaf} {n['strategy']}: compute {n['compute']:,.2f}, communication "
                      f"{n['communication']:,.2f}, resharding of its operands {n['resharding_in']:,.2f}, of its "
                      f"output by users {n['resharding_out']:,.2f}; memory {format_bytes(n['memory_per_device'])} "
                      f"per device" + (f"; runs {n['executions']:g}x" if n["executions"] != 1 else ""))
        if n["operands"]:
            t = Table(header_style="bold", title="operand shardings it needs", title_justify="left")
            for col in ("operand", "needs", "has", "resharding"):
                t.add_column(col)
            for o in n["operands"]:
                r = o.get("resharding")
                steps = ", ".join(f"{s['kind']} ({format_bytes(s['bytes_per_device'])}, groups of "
                                  f"{len(s['replica_groups'][0]) if s.get('replica_groups') else '-'})"
                                  if s["kind"] != "unplannable" else "unplannable"
                                  for s in (r["steps"] if r else []))
                t.add_row(o["operand"], o["required"] or "-", o["has"] or "-",
                          f"{r['cost']:,.2f}: {steps}" if r else "none")
            console.print(t)
        cols = n["collectives"]
        if cols:
            t = Table(header_style="bold", title="collectives behind its communication cost", title_justify="left")
            for col in ("kind", "mesh axes", "replica groups", "bytes / device"):
                t.add_column(col)
            for c in cols:
                groups = c["replica_groups"]
                shown = str(groups[:2])[:-1] + (", ...]" if len(groups) > 2 else "]")
                t.add_row(c["kind"], ",".join(map(str, c["mesh_axes"])), shown, format_bytes(c["bytes_per_device"]))
            console.print(t)
        if n["users_resharding"]:
            console.print("  users that reshard its output: " + ", ".join(
                f"{u['user']} ({u['cost']:,.2f})" for u in n["users_resharding"][:6]))
    if expl.xla is not None:
        x = expl.xla
        if x.get("error"):
            console.print(f"\n[bold]XLA[/bold]: could not partition: {x['error']}")
        else:
            console.print(f"\n[bold]XLA[/bold] inserts for it: {', '.join(x['xla_kinds']) or 'no collectives'} "
                          f"({format_bytes(x['xla_ring_bytes'])} ring bytes per device)   hloshard predicts: "
                          f"{', '.join(x['predicted_kinds']) or 'none'} ({format_bytes(x['predicted_ring_bytes'])})")
    nr = d.get("neighbourhood_resolved")
    if nr is not None:
        console.print(f"\nre-solving its {len(d['neighbourhood']) - 1} neighbours with this sharding kept changes "
                      f"the total by {nr['total_change']:+,.2f}")
    if d["alternatives"]:
        t = Table(header_style="bold", title="best alternatives (neighbourhood re-solved)", title_justify="left")
        verified = any("verified_change" in a for a in d["alternatives"])
        cols = ("sharding", "total change") + (("as written",) if verified else ()) + \
            ("compute", "comm", "resharding", "memory", "moved")
        for col in cols:
            t.add_column(col, justify="left" if col in ("sharding",) else "right",
                         overflow="fold", min_width=24 if col == "sharding" else None)
        for a in d["alternatives"]:
            c = a["change"]
            cells = [a["sharding"], f"{a['total_change']:+,.2f}"]
            if verified:
                cells.append(f"{a['verified_change']:+,.2f}" if "verified_change" in a else "-")
            t.add_row(*cells, f"{c['compute']:+,.2f}", f"{c['communication']:+,.2f}", f"{c['resharding']:+,.2f}",
                      format_bytes(a["memory_per_device"]), str(len(a["changed"])))
        console.print(t)
    w = d.get("why_not")
    if w is not None:
        if not w.get("possible"):
            console.print(f"\nwhy not {w['sharding']}: {w['reason']}")
        elif "change" in w:
            console.print(f"\nwhy not {w['sharding']}: the total would change by {w['total_change']:+,.2f} "
                          f"(compute {w['change']['compute']:+,.2f}, communication {w['change']['communication']:+,.2f},"
                          f" resharding {w['change']['resharding']:+,.2f}) with {len(w['changed'])} neighbours moved")
        else:
            console.print(f"\nwhy not {w['sharding']}: {w['reason']}")
    for note in expl.notes:
        console.print(f"[yellow]note:[/yellow] {note}")
