"""``hloshard explain``: why one instruction is sharded as it is, what it costs, what it causes, and
what the best alternatives would change.

The report is built from the cost graph ``hloshard cost`` prices (:func:`hloshard.autoshard.evaluate_as_written`):
no second cost model, and the graph is built once.

1. *As given*: the module exactly as ``hloshard cost`` evaluates it.  The instruction's strategy in that
   choice gives its compute / communication cost, memory per device, the operand shardings it requires,
   the reshardings on its operand edges (planned by :func:`hloshard.cost.reshard.plan`: kind, replica
   groups, bytes) and on its users' edges, and the collectives behind its communication cost
   (``Strategy.collectives``).
2. The *neighbourhood*: instructions within ``radius`` operand/user steps (at most :data:`MAX_FREE`,
   nearest first; entry parameters and the entry root only when they are the instruction itself;
   array instructions with a node of their own).  Their strategy groups are re-built without their
   annotations, their users' with theirs, over the as-given graph (:mod:`hloshard.explain_local`).
3. *Alternatives*: for each other output sharding the instruction's strategies offer, the neighbourhood
   is re-solved exactly with the instruction fixed to it and everything else at the as-given choice.
   The shardings that gives, and the instruction's new sharding alone, are each priced as
   ``hloshard cost`` prices the module written with them (the changed instructions and their users
   re-built with the new annotations: the strategies XLA realizes from the operands' layouts); the
   cheaper is reported.  ``total_change`` is the change of the module's TOTAL cost (cost units) that
   ``hloshard cost`` of that written module shows (:func:`rewritten_module`; exact when the
   instructions around are annotated, see :mod:`hloshard.explain_local`), with the neighbours it
   moves (``changed``).  ``why_not`` does the same for one given sharding.  The user's Sharding
   constraints stay as written (``solve`` keeps them); ``solve``'s own pins (``NAME.pin`` ...) are
   re-solved, as its graph has none.
4. *Against solve's space*: a reported plan cheaper than the module (the kept re-solve or an
   alternative) lists in ``outside_solve_space`` where it leaves the space ``solve`` searches
   (:mod:`hloshard.explain_local`: a follower pair split, a strategy ``solve`` does not build, a moved
   rematerialized value): such a plan can be cheaper than a solved module whose stated gap is small,
   since that gap is measured within solve's own graph (new user 17, finding 12).

Costs are in the mesh's cost units (alpha-beta model), memory in bytes per device.
Raises :class:`hloshard.errors.InputError` for an unknown instruction (with close names) or one that
gets no sharding of its own (inside a fusion or reducer), :class:`hloshard.errors.UsageError` for a
``why_not`` sharding that does not parse or fit the mesh.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from .cost.liveness import peak_usage
from .cost.steptime import cost_formatter
from .errors import HloSyntaxError, HloshardError, InputError, UsageError
from .hlo.inline import inline_calls
from .textout import print_table
from .units import counted, format_bytes

# the neighbourhood, what may be freed in it and its kept re-solve: the solver side's (autoshard.local,
# solve's post-solve improvement pass uses them too)
from .autoshard.local import MAX_FREE, LocalSearch, neighbourhood  # noqa: F401
from .autoshard.local import freeable as _freeable
from .autoshard.local import same_spec as _same_spec
from .autoshard.local import spec_key as _spec_key
from . import xla_compare
from .autoshard import evaluate_as_written, instruction_sharding, leaf_spec, processed_computations
from .cost.reshard import plan
from .explain_local import Pricing, SolveSpace, follower_breaks, rematerialized_moved, strategies_unlisted
from .hlo import parse_module, print_module
from .hlo.attributes import parse_metadata
from .hlo.sharding import HloSharding
from .strategy.base import LeafRef, MeshInfo, StrategyGroup, is_mesh_spec, leaf_shapes

#: most distinct output shardings re-solved as alternatives (beyond it the locally cheapest are kept)
MAX_CANDIDATES = 24
#: alternatives priced exactly (as the written module) per row listed, and at least
PRICED_PER_ROW = 2
PRICED_MIN = 8


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
        out["warnings"] = self.warnings
        return out

    @property
    def warnings(self) -> list:
        """What the pricing of the module assumed that the user should know, as ``cost`` gives it (its JSON
        ``warnings``: the cost graph's, e.g. a ``while`` whose trip count is a guess; fresh-clone check 37, #9)."""
        return list(getattr(self.cost_result, "warnings", None) or ())


# ------------------------------------------------------------------------------------------------
# strategies in words


def _user_axis_words(mesh, user_axis: int) -> str:
    names = getattr(mesh, "user_names", None)
    return names[user_axis] if names else f"axis {user_axis}"


def _part_words(mesh, user_axis: int, pre: int, size: int) -> str:
    """Part ``(pre)size`` of the user's axis ``user_axis`` in words: the whole axis by its name, else
    which of its devices the part spans, e.g. ``model (its major 2 of 4)``, ``axis 1 (its minor 2 of 4)``,
    ``axis 1 (2 of 8, after the major 2)``; Shardy's form ``model:(1)2`` in brackets for the HLO reader."""
    full = mesh.user_shape[user_axis]
    base = _user_axis_words(mesh, user_axis)
    if size == full:
        return base
    short = (getattr(mesh, "user_names", None) or [None] * len(mesh.user_shape))[user_axis]
    shardy = f"{short if short else user_axis}:({pre}){size}"
    if pre == 1:
        where = f"its major {size} of {full}"
    elif pre * size == full:
        where = f"its minor {size} of {full}"
    else:
        where = f"{size} of {full}, after the major {pre}"
    return f"{base} ({where}; {shardy})"


def axes_words(mesh, axes) -> str:
    """Mesh axes (internal axis indices, major to minor) as reports name them, joined with ``+``:
    user names (``model``) or ``axis 1`` on an unnamed mesh; the sub-axes of a refined mesh
    (:meth:`hloshard.mesh.DeviceMesh.axis_label`) in words, and consecutive sub-axes that make up a
    contiguous part of one user axis merged (``1:(1)2`` + ``1:(2)2`` = all of axis 1)."""
    subs = getattr(mesh, "sub_axes", None)
    if not subs or not hasattr(mesh, "user_shape"):
        return "+".join(f"axis {a}" for a in axes)
    merged: list[list[int]] = []            # [user_axis, pre, size]
    for a in axes:
        sub = subs[a]
        last = merged[-1] if merged else None
        if last and last[0] == sub.user_axis and last[1] * last[2] == sub.pre_size:
            last[2] *= sub.size
        else:
            merged.append([sub.user_axis, sub.pre_size, sub.size])
    return "+".join(_part_words(mesh, u, pre, size) for u, pre, size in merged)


def _is_dims_spec(spec) -> bool:
    return type(spec) is tuple and all(type(d) is tuple and all(type(a) is int for a in d) for d in spec)


def describe_spec(spec, mesh) -> str:
    """A sharding spec (per tensor dim, the mesh axes it is split over) in words: ``replicated``, ``rows
    over data, columns over model`` (rank 2), ``dim 0 over data, dim 2 over model`` (other ranks);
    several axes on one dim join with ``+``. A raw sharding (not on the mesh's axes) is printed as is."""
    if not _is_dims_spec(spec):
        return str(spec)
    names = ("rows", "columns") if len(spec) == 2 else None
    parts = []
    for d, axes in enumerate(spec):
        if axes:
            what = names[d] if names else f"dim {d}"
            parts.append(f"{what} over {axes_words(mesh, axes)}")
    return ", ".join(parts) if parts else "replicated"


_PREFIX_WORDS = {"fused:": "fused computation: "}


def describe_strategy(st, mesh) -> str:
    """A strategy (:class:`hloshard.strategy.base.Strategy`) in words for reports, instead of its internal
    label (``S0@01,S1@2|allreduce+slice``): the output layout (:func:`describe_spec`; each leaf of a tuple),
    then the collectives the strategy itself performs with their mesh axes (``all-reduce over model``) and
    what the label's suffix adds (``then each device keeps its slice`` for a reduce-scatter done as
    all-reduce + slice). E.g. ``rows over data, all-reduce over model``."""
    name = str(getattr(st, "name", ""))
    out = st.out
    if _is_dims_spec(out):
        layout = describe_spec(out, mesh)
    elif type(out) is tuple and out and all(_is_dims_spec(x) or x is None for x in out):
        layout = "; ".join(f"output {k}: {describe_spec(x, mesh) if x is not None else 'any'}" for k, x in enumerate(out))
    else:
        layout = str(out)
    prefix = next((w for p, w in _PREFIX_WORDS.items() if name.startswith(p)), "")
    if name == "user" or name.startswith("user"):
        layout += " (as annotated)"
    elif name == "manual":
        layout = "manual (inside a shard_map: not partitioned)"
    parts = [prefix + layout]
    for pc in getattr(st, "collectives", ()) or ():
        axes = tuple(getattr(pc, "mesh_axes", ()) or ())
        over = f" over {axes_words(mesh, axes)}" if axes else ""
        parts.append(f"{pc.kind}{over}")
    if name.endswith("|allreduce+slice"):
        parts.append("then each device keeps its slice of the sum")
    elif "|updates@" in name:
        parts.append("updates split, the result combined")
    elif "|rows@" in name:
        parts.append("rows of the table split" + (", then each device keeps its slice of the sum"
                                                  if name.endswith("+slice") else ""))
    return ", ".join(parts)


# ------------------------------------------------------------------------------------------------
# finding the instruction and its neighbourhood


def find_instruction(module, name: str, filename: str | None = None):
    """The instruction called ``name`` (a leading ``%`` is ignored). InputError with close names otherwise."""
    want = name.lstrip("%")
    stand_in, elements = getattr(module, "inlined_calls", {}).get(want, (None, ()))   # inlined as XLA inlines it
    if stand_in is not None:
        if stand_in.parent is None:
            raise InputError(f"{want} was a call, inlined as XLA inlines it; its result is the tuple of "
                             f"{', '.join(o.name for o in elements)}: explain one of them")
        return stand_in
    names = []
    for comp in module.computations:
        for instr in comp.instructions:
            if instr.name.lstrip("%") == want:
                return instr
            names.append(instr.name.lstrip("%"))
    close = difflib.get_close_matches(want, names, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise InputError(f"no instruction named {name!r}{' in ' + filename if filename else ''}{hint}")


# ------------------------------------------------------------------------------------------------
# spec helpers


def _nodes_of(graph, instr) -> list:
    """(node id, leaf index or None) of every cost-graph node ``instr`` owns."""

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
    return is_mesh_spec(x)


def _sharding_text(graph, spec, shape) -> str | None:
    if spec is None:
        return None
    return str(graph.ctx.minfo.to_sharding(spec, len(shape.dims)))


def _plan_json(graph, shape, src, dst, weight: float) -> dict:
    """The resharding plan from ``src`` to ``dst`` (specs) with its steps (kind, replica groups, bytes)."""

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
    g = graph.nodes[node]
    st = g.strategies[int(choice[node])]
    w = graph.ctx.weight(g.instr)
    operands = []
    for inst, lf, req in _requirements(g, st):
        shape = leaf_shapes(inst.shape)[lf]
        if not shape.is_array:
            continue

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
    collectives = [{"kind": pc.kind, "mesh_axes": list(pc.mesh_axes),
                    "mesh_axes_words": axes_words(graph.mesh, tuple(pc.mesh_axes)), "group_size": int(pc.group_size),
                    "bytes_per_device": int(pc.nbytes), "ring_bytes": round(float(pc.ring_bytes), 3),
                    "replica_groups": [list(x) for x in (pc.replica_groups or
                                                         graph.mesh.replica_groups(tuple(pc.mesh_axes)))]}
                   for pc in getattr(st, "collectives", ())]
    return {"node": int(node), "leaf": leaf, "strategy": st.name,
            "strategy_description": describe_strategy(st, graph.mesh), "executions": w,
            "compute": round(st.compute * w, 6), "communication": round(st.comm * w, 6),
            "resharding_in": round(in_cost, 6), "resharding_out": round(out_cost, 6),
            "memory_per_device": int(st.memory), "operands": operands, "collectives": collectives,
            "users_resharding": sorted(users, key=lambda r: (-r["cost"], r["user"]))}


def explain_instruction(module, mesh, name: str, alternatives: int = 5, why_not: str | None = None,
                        radius: int = 2, filename: str | None = None, time_limit: float | None = None,
                        verify: bool = False, progress=None) -> Explanation:
    """Explain instruction ``name`` of ``module`` on ``mesh`` (see the module docstring).

    ``alternatives``: how many alternative output shardings to list (best TOTAL cost change first);
    ``why_not``: a sharding text (``{devices=[1,8]<=[8]}``) to evaluate in the same way; ``radius``:
    operand/user steps re-solved around the instruction.  Costs in cost units, memory in bytes per device.
    The instruction's figures and the module cost are those of ``hloshard cost`` (the same evaluation).
    ``verify``: also price every listed alternative as ``hloshard cost`` prices the module rewritten with
    its shardings (``verified_total`` / ``verified_change``; one full evaluation each).
    ``time_limit`` / ``progress``: as :func:`hloshard.autoshard.evaluate_module` (None: its fast
    completion of what the annotations leave open; seconds: the full solver).
    """

    inline_calls(module)   # as build_graph does: a call's name then stands for its callee's root copy
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
    given = evaluate_as_written(module, mesh, time_limit=time_limit, progress=progress, deterministic=False)
    g1, c1, ev1 = given.graph, given.choice, given.evaluation
    tnodes1 = _nodes_of(g1, target)

    data = {
        "instruction": target.name, "opcode": target.opcode, "shape": str(target.shape),
        "computation": target.parent.name, "file": filename, "line": target.line, "column": target.column,
        "source": _metadata(target),
        "sharding": None if target.sharding is None else str(target.sharding),
        "sharding_used": str(instruction_sharding(g1, target, c1)) if tnodes1 else None,
        "annotated": target.sharding is not None,
        "completion": {"method": given.method, "status": given.status,
                       "description": given.completion_words(with_time=False)},
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
    if given.method == "per-device":
        notes.append(f"the module is {given.completion_words(with_time=False)}; its shapes are already one "
                     f"device's shard, so no alternative sharding of {target.name} is listed (explain the "
                     f"logical module, before SPMD partitioning, for those)")
        return Explanation(data, notes=notes, cost_result=given)

    # 2. the neighbourhood: re-built without its annotations over the as-given graph (explain_local)

    pricing = Pricing(g1, c1)
    if len(tnodes1) != 1 or not pricing.plain(target):
        notes.append(f"{target.name} is a tuple, loop state or control-flow value: alternatives are given for "
                     f"array instructions with a node of their own")
        return Explanation(data, notes=notes, cost_result=given)
    free_instrs = [i for i in neighbourhood(target, allowed, radius)
                   if _freeable(i, target, module) and pricing.plain(i)]
    data["neighbourhood"] = [i.name for i in free_instrs]

    search = _Search(pricing, target, free_instrs, SolveSpace(module, mesh))
    if search.site is None:
        notes.append(f"the neighbourhood of {target.name} could not be re-built; alternatives not computed")
        return Explanation(data, notes=notes, cost_result=given)
    cur_spec = search.given_spec[target]
    if given.unannotated:
        # "fixed": the annotations around them leave one choice each (completion_words' sentence reads as a
        # clause of its own, not after "were": fresh-clone check 31)
        one = len(given.unannotated) == 1   # one instruction: "its sharding was" (fresh-clone check 33)
        how = (f"fixed by the annotations around {'it' if one else 'them'}, nothing left to choose"
               if given.method == "fixed" else given.completion_words(with_time=False))
        notes.append(f"{len(given.unannotated):,} of the module's {counted(given.instructions, 'instruction')} "
                     f"{'carries' if one else 'carry'} no sharding ({'its sharding was' if one else 'their shardings were'} "
                     f"{how}); "
                     f"hloshard cost of a module written with an alternative chooses {'it' if one else 'them'} again "
                     f"and may be lower than the change shown (an upper bound)")

    kept = search.best(cur_spec)
    if kept is not None:
        data["neighbourhood_resolved"] = {"total_change": round(sum(kept["change"].values()), 6),
                                          "changed": kept["changed"],
                                          "outside_solve_space": kept["outside_solve_space"]}

    def evaluate_alt(spec) -> dict:
        shape = leaf_shapes(target.shape)[0]
        row = {"sharding": _sharding_text(g1, spec, shape)}
        if not search.offers(spec):
            row.update(possible=False, reason=f"no strategy of {target.opcode} {target.name} produces this sharding")
            return row
        best = search.best(spec)
        if best is None:
            row.update(possible=False, reason="the shardings kept outside the neighbourhood forbid it")
            return row
        row.update(possible=True, total_change=round(sum(best["change"].values()), 6),
                   change={k: round(v, 6) for k, v in best["change"].items()},
                   memory_per_device=int(best["memory"]), strategy=best["strategy"], changed=best["changed"],
                   peak_memory_change=best["peak_memory_change"], outside_solve_space=best["outside_solve_space"])
        return row

    if alternatives > 0:
        cands = search.candidates(cur_spec)
        if len(cands) > MAX_CANDIDATES:  # keep the locally cheapest (node cost only) for the re-solve
            notes.append(f"{len(cands)} alternative shardings; the {MAX_CANDIDATES} locally cheapest were re-solved")
            cands = cands[:MAX_CANDIDATES]
        # every candidate re-solved; the best by that estimate priced exactly
        estimated = [(search.resolve(spec), k, spec) for k, spec in enumerate(cands)]
        possible = sorted((est[0], k, spec) for est, k, spec in estimated if est is not None)
        limit = max(PRICED_MIN, PRICED_PER_ROW * alternatives)
        evaluated = [evaluate_alt(spec) for _, _, spec in possible[:limit]]
        rows = [r for r in evaluated if r.get("possible")]
        impossible = len(cands) - len(possible) + len(evaluated) - len(rows)
        if impossible:
            notes.append(f"{impossible} of {len(cands)} alternative shardings are not possible with the rest of "
                         f"the module kept as it is")
        if len(possible) > limit:
            notes.append(f"the {limit} best of {len(possible)} possible alternatives by the re-solved "
                         f"neighbourhood's estimate were priced as the written module")
        data["alternatives_priced"] = len(evaluated)
        rows.sort(key=lambda r: (r["total_change"], r["sharding"]))
        data["alternatives"] = rows[:alternatives]
        if verify:
            for r in data["alternatives"]:
                _verify(r, module, mesh, target, ev1.total, time_limit)
        data["alternatives_considered"] = len(cands)
    if want_spec is not None:
        if _same_spec(want_spec, cur_spec):
            data["why_not"] = {"sharding": why_not, "possible": True, "total_change": 0.0,
                               "reason": f"{target.name} already has this sharding"}
        else:
            data["why_not"] = evaluate_alt(want_spec)
            if verify and data["why_not"].get("possible"):
                _verify(data["why_not"], module, mesh, target, ev1.total, time_limit)
    return Explanation(data, notes=notes, cost_result=given)


class _Search(LocalSearch):
    """The alternatives of ``target``: for an output sharding of it, the neighbourhood ``free`` (built
    without annotations, their users with theirs) is re-solved exactly with everything else at the
    as-given choice; the shardings that solve gives, and the target's sharding alone, are then each
    priced as ``hloshard cost`` prices the module written with them (:class:`hloshard.autoshard.local.LocalSearch`:
    the changed instructions and their users re-built with the new annotations) and the cheaper is
    reported.  ``total change`` is therefore the change of ``hloshard cost`` of a real module, before XLA's
    reshard cache (``cost``'s ``completion.cached_resharding``), which this local re-pricing does not see
    (``--verify``'s ``verified_change`` includes it).
    ``space``: the groups ``solve`` builds for the module (:class:`hloshard.explain_local.SolveSpace`);
    a reported plan cheaper than the module gets ``outside_solve_space``: where it leaves solve's space
    (:meth:`_breaks`; empty for a plan that is not cheaper, or when ``space`` is None)."""

    def __init__(self, pricing, target, free, space=None):
        super().__init__(pricing, target, free)
        self.space = space
        if self.site is None:
            return
        g1, c1 = pricing.graph, pricing.choice
        self._priced: dict = {}
        self._sizes = [int(u[c]) for u, c in zip(g1.problem.node_usages, c1)]
        self._peak = int(peak_usage(g1.problem.intervals, self._sizes)[0])

    def offers(self, spec) -> bool:
        return any(_same_spec(o, spec) for o in self._outs(self.k_target))

    def candidates(self, cur_spec) -> list:
        """The target's other output shardings, locally cheapest (node cost) first."""
        best: dict = {}
        specs: dict = {}
        u = self.site.node_part[self.k_target]
        for q, o in enumerate(self._outs(self.k_target)):
            if o is None or _same_spec(o, cur_spec):
                continue
            k = _spec_key(o)
            c = float(u[0][q] + u[1][q])
            if k not in best or c < best[k]:
                best[k], specs[k] = c, o
        return [specs[k] for k in sorted(best, key=lambda k: (best[k], str(k)))]

    def best(self, spec):
        """The best of (the re-solved neighbourhood, the target alone) for the target sharded ``spec``,
        priced exactly: ``{"change": by kind, "changed": [...], "strategy", "memory",
        "peak_memory_change"}``, or None when it is not possible."""
        res = self.resolve(spec)
        configs = [res[1]] if res is not None else []
        configs.append({self.target: spec})   # the target alone, every neighbour as given
        out = None
        for conf in configs:
            changes = {i: o for i, o in conf.items() if i is self.target or not _same_spec(o, self.given_spec[i])}
            r = self.price(changes)
            if r is not None and (out is None or sum(r["change"].values()) < sum(out["change"].values()) - 1e-9):
                out = r
        if out is not None and "outside_solve_space" not in out:
            # only a plan cheaper than the module is checked against solve's space (the check builds
            # solve's graph once): a positive change needs no explaining beside a solver's gap
            out["outside_solve_space"] = self._breaks(*out["_plan"]) if sum(out["change"].values()) < 0 else []
        return out

    def price(self, changes: dict):
        """Exact change of the module's total cost when the instructions of ``changes`` (instruction ->
        output spec) are annotated with those shardings (:meth:`LocalSearch.price_changes`), with the
        target's strategy and the peak's change; None when no strategy choice allows it."""
        key = tuple(sorted((i.name, str(_spec_key(o))) for i, o in changes.items()))
        if key in self._priced:
            return self._priced[key]
        core = self.price_changes(changes)
        result = None
        if core is not None:
            site, pick, change, shardings = core
            minfo = self.pricing.graph.ctx.minfo
            k = site.instrs.index(self.target)
            st = site.groups[k].strategies[pick[k]]
            changed = [{"instruction": i.name, "from": str(minfo.to_sharding(self.given_spec[i], len(i.shape.dims))),
                        "to": str(shardings[i])} for i in site.instrs if i in changes and i is not self.target]
            result = {"change": change, "changed": changed, "strategy": st.name, "memory": int(st.memory),
                      "peak_memory_change": self._peak_change(site, pick), "_plan": (changes, site, pick)}
        self._priced[key] = result
        return result

    def _breaks(self, changes: dict, site, pick) -> list:
        """Where the plan ``changes`` (priced as ``site``, ``pick``) leaves ``solve``'s strategy space, as
        JSON rows: ``kind`` "follower" (:func:`hloshard.explain_local.follower_breaks`: a pair of layouts no
        ``solve`` plan has), "strategy" (:func:`hloshard.explain_local.strategies_unlisted`: a strategy
        ``solve`` does not build for the instruction) or "rematerialized"
        (:func:`hloshard.explain_local.rematerialized_moved`: a value its users rebuild, whose edges
        ``solve``'s graph prices and ``hloshard cost`` of the written module does not)."""

        if self.space is None:
            return []
        minfo = self.pricing.graph.ctx.minfo
        rows = [{"kind": "follower", "instruction": x.name, "follows": y.name,
                 "sharding": str(minfo.to_sharding(sx, len(x.shape.dims))),
                 "operand_sharding": str(minfo.to_sharding(sy, len(y.shape.dims)))}
                for x, y, sx, sy in follower_breaks(self.pricing, self.space, changes, list(changes))]
        rows += [{"kind": "strategy", "instruction": i.name, "strategy": st.name,
                  "sharding": str(minfo.to_sharding(st.out, len(i.shape.dims)))}
                 for i, st in strategies_unlisted(self.pricing, self.space, site, pick)]
        rows += [{"kind": "rematerialized", "instruction": i.name,
                  "sharding": str(minfo.to_sharding(changes[i], len(i.shape.dims)))}
                 for i in rematerialized_moved(self.pricing, changes)]
        return rows

    def _peak_change(self, site, pick) -> int:
        """Peak memory per device with the re-built groups' memory, minus as given (bytes)."""
        g1 = self.pricing.graph
        sizes = list(self._sizes)
        for k, instr in enumerate(site.instrs):
            sizes[g1.ctx.groups[instr].node] = int(site.groups[k].strategies[pick[k]].memory)
        return int(peak_usage(g1.problem.intervals, sizes)[0]) - self._peak


def rewritten_module(module, target_name: str, row: dict):
    """A copy of ``module`` with the shardings an alternative ``row`` gives the instruction and the
    neighbours it moves written as annotations."""

    copy = parse_module(print_module(module), "<alternative>")
    find_instruction(copy, target_name).sharding = HloSharding.parse(row["sharding"])
    for c in row.get("changed", ()):
        find_instruction(copy, c["instruction"]).sharding = HloSharding.parse(c["to"])
    return copy


def _verify(row: dict, module, mesh, target, given_total: float, time_limit: float) -> None:
    """``verified_total``: ``hloshard cost`` of the module rewritten with ``row``'s shardings;
    ``verified_change``: that minus the module as given (cost units)."""

    try:
        total = evaluate_as_written(rewritten_module(module, target.name, row), mesh, time_limit=time_limit).total_cost
    except HloshardError as exc:
        row["verified_error"] = str(exc)
        return
    row["verified_total"] = round(total, 6)
    row["verified_change"] = round(total - given_total, 6)


def _outside_words(rows: list) -> str:
    """Why a plan is outside ``solve``'s strategy space (``outside_solve_space`` rows of
    :meth:`_Search._breaks`), and what that means for solve's gap."""
    r = rows[0]
    more = f" (and {counted(len(rows) - 1, 'other place')})" if len(rows) > 1 else ""
    if r["kind"] == "follower":
        why = (f"without annotations {r['instruction']} follows {r['follows']} (takes a layout derived from "
               f"its operand's, so solve never reshards between them), but here {r['instruction']} is "
               f"{r['sharding']} with {r['follows']} {r['operand_sharding']}")
    elif r["kind"] == "strategy":
        why = (f"{r['instruction']} {r['sharding']} is computed as XLA partitions it from its operands' layouts "
               f"({r['strategy']}), a strategy solve does not build for it")
    else:
        return (f"this plan is priced differently by solve's graph: {r['instruction']} becomes {r['sharding']}, "
                f"but its users rebuild it in their own layouts (XLA rematerializes a constant or a broadcast "
                f"scalar), so in the written module only its own compute changes, while solve's graph prices "
                f"its edges to its users{more}; solve's gap is measured in its own graph")
    return (f"this plan is outside solve's strategy space: {why}{more}; hloshard cost prices such a written "
            f"module, solve's gap is measured within its own space")


def _parse_why_not(text: str, target, mesh):
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


#: the keys whose numbers are costs (cost units; seconds after :func:`in_seconds`)
COST_KEYS = frozenset({"total", "compute", "communication", "resharding", "resharding_in", "resharding_out", "cost",
                       "total_change", "verified_total", "verified_change"})


def in_seconds(expl: Explanation, seconds_per_unit: float, device: str) -> Explanation:
    """``expl`` with every cost in its data (:data:`COST_KEYS`, and each value of a ``change`` dict)
    multiplied by ``seconds_per_unit`` (a device's :attr:`hloshard.devices.TimeScale.seconds_per_unit`),
    ``units`` = ``'seconds'`` and ``device`` set (``hloshard explain --device``). Changed in place."""
    def conv(x, key=None, in_change=False):
        if isinstance(x, dict):
            return {k: conv(v, k, in_change or k == "change") for k, v in x.items()}
        if isinstance(x, list):
            return [conv(v, key, in_change) for v in x]
        if isinstance(x, (int, float)) and not isinstance(x, bool) and (in_change or key in COST_KEYS):
            return float(f"{x * seconds_per_unit:.6g}")
        return x

    expl.data = conv(expl.data)
    expl.data["units"], expl.data["device"] = "seconds", device
    return expl


def render_text(expl: Explanation, console) -> None:
    """Rich text rendering of :class:`Explanation` on ``console``."""
    from rich.table import Table


    d = expl.data
    f = cost_formatter(d)   # cost units, or seconds with --device (in_seconds)
    console.print(f"[bold]{d['instruction']}[/bold] = {d['shape']} {d['opcode']}   ({location_text(d)}, computation "
                  f"{d['computation']})")
    if source_text(d["source"]):
        console.print(f"  source  {source_text(d['source'])}")
    per_device = (d.get("completion") or {}).get("method") == "per-device"
    if per_device:   # a per-device program: no sharding to choose, the shape is one device's shard
        console.print(f"  sharding  {d['sharding'] or 'none'}: a per-device program's value, its shape is "
                      f"already one device's shard")
        console.print("  priced as whole on each device (the module's own collectives move the data)")
    else:
        given = d["sharding"] or "none (chosen as `hloshard cost` would)"
        console.print(f"  sharding  {given}")
        if d["sharding_used"] and d["sharding_used"] != d["sharding"]:
            console.print(f"  priced as {d['sharding_used']}")
    mc = d["module_cost"]
    timed = d.get("units") == "seconds"
    # with a device the objective's parts are named apart from `cost`'s step time, whose breakdown uses the same
    # words for other figures (fresh-clone check 33: "resharding 0.00 us" here, "resharding 30.47 us" in `cost`)
    console.print(("  (costs in seconds on " + d["device"] + ": the solver's objective, `cost`'s total_cost; `cost`'s "
                   "estimated step time is the plan's roofline, which also counts layout copies and a per-device "
                   "program's collectives as HBM traffic, so its compute and resharding differ from the "
                   "objective's)\n" if timed else "") +
                  f"  module {'objective' if timed else 'cost'} {f(mc['total'])} ("
                  + ("the objective's " if timed else "") +
                  f"compute {f(mc['compute'])}, communication "
                  f"{f(mc['communication'])}, resharding {f(mc['resharding'])}); peak memory "
                  f"{format_bytes(d['peak_memory_per_device'])} per device")
    for n in d["nodes"]:
        leaf = "" if n["leaf"] is None else f" (leaf {n['leaf']})"
        words = "whole on each device (a per-device program)" if per_device else \
            (n.get("strategy_description") or n["strategy"])
        console.print(f"\n[bold]strategy[/bold]{leaf}: {words}", soft_wrap=True)
        console.print(f"  compute {f(n['compute'])}, communication "
                      f"{f(n['communication'])}, resharding of its operands {f(n['resharding_in'])}, of its "
                      f"output by users {f(n['resharding_out'])}; memory {format_bytes(n['memory_per_device'])} "
                      f"per device" + (f"; runs {n['executions']:g}x" if n["executions"] != 1 else ""))
        if n["operands"] and not per_device:   # a per-device program's operands are whole on each device
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
                          f"{f(r['cost'])}: {steps}" if r else "none")
            print_table(console, t)
        cols = n["collectives"]
        if cols:
            t = Table(header_style="bold", title="collectives behind its communication cost", title_justify="left")
            # data: the operand (all-gather: result) bytes per device; ring bytes: what the ring moves per
            # device, the figure `cost --format json` / `--xla` give (all-reduce 2(n-1)/n x data)
            for col in ("kind", "mesh axes", "replica groups", "data / device", "ring bytes / device"):
                t.add_column(col)
            for c in cols:
                groups = c["replica_groups"]
                shown = str(groups[:2])[:-1] + (", ...]" if len(groups) > 2 else "]")
                ring = c.get("ring_bytes")
                t.add_row(c["kind"], c.get("mesh_axes_words") or ",".join(map(str, c["mesh_axes"])), shown, format_bytes(c["bytes_per_device"]),
                          "-" if ring is None else format_bytes(int(round(ring))))
            print_table(console, t)
        if n["users_resharding"]:
            console.print("  users that reshard its output: " + ", ".join(
                f"{u['user']} ({f(u['cost'])})" for u in n["users_resharding"][:6]))
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
                      f"hloshard cost of the module (the total above) by {f(nr['total_change'], True)}")
        if nr.get("outside_solve_space"):
            console.print("  " + _outside_words(nr["outside_solve_space"]))
    if d["alternatives"]:
        t = Table(header_style="bold", title="best alternatives (neighbourhood re-solved)", title_justify="left",
                  caption="changes are signed against the current plan; output / device is the instruction's "
                          "own result per device with that sharding; moved: neighbours whose sharding changes",
                  caption_justify="left")
        verified = any("verified_change" in a for a in d["alternatives"])
        cols = ("sharding", "total change") + (("as written",) if verified else ()) + \
            ("compute", "comm", "resharding", "output / device", "moved")
        for col in cols:
            t.add_column(col, justify="left" if col in ("sharding",) else "right",
                         overflow="fold", min_width=24 if col == "sharding" else None)
        for a in d["alternatives"]:
            c = a["change"]
            cells = [a["sharding"], f"{f(a['total_change'], True)}"]
            if verified:
                cells.append(f"{f(a['verified_change'], True)}" if "verified_change" in a else "-")
            t.add_row(*cells, f"{f(c['compute'], True)}", f"{f(c['communication'], True)}", f"{f(c['resharding'], True)}",
                      format_bytes(a["memory_per_device"]), str(len(a["changed"])))
        print_table(console, t)
        outside = [a for a in d["alternatives"] if a.get("outside_solve_space")]
        if outside:
            console.print(f"  {counted(len(outside), 'alternative')} of these "
                          f"{'is' if len(outside) == 1 else 'are'} outside solve's strategy space or priced "
                          f"differently by its graph (outside_solve_space in --format json), e.g. "
                          f"{outside[0]['sharding']}: "
                          + _outside_words(outside[0]["outside_solve_space"]))
    w = d.get("why_not")
    if w is not None:
        if not w.get("possible"):
            console.print(f"\nwhy not {w['sharding']}: {w['reason']}")
        elif "change" in w:
            console.print(f"\nwhy not {w['sharding']}: the total would change by {f(w['total_change'], True)} "
                          f"(compute {f(w['change']['compute'], True)}, communication {f(w['change']['communication'], True)},"
                          f" resharding {f(w['change']['resharding'], True)}) with {len(w['changed'])} neighbours moved")
        else:
            console.print(f"\nwhy not {w['sharding']}: {w['reason']}")
    for note in expl.notes:
        console.print(f"[yellow]note:[/yellow] {note}")
