"""Explain's checks of a re-priced plan against ``solve``'s strategy space; the local re-building and
re-pricing itself (:class:`Pricing`, :class:`Site`, :func:`edges_into`) is :mod:`hloshard.autoshard.local`
(re-exported here), which ``solve``'s post-solve local moves use too.

Against ``solve``'s space (:class:`SolveSpace`, :func:`follower_breaks`, :func:`strategies_unlisted`,
:func:`rematerialized_moved`): ``hloshard cost`` prices a written module in which every instruction is
annotated, so its plans include some that ``solve``'s graph (parameters and outputs kept, the rest free)
does not hold or prices higher: an annotated instruction may reshard an operand it would follow, and
takes the strategy XLA realizes from its operands' layouts.  The GNN of new user 17 (finding 12): the
kept re-solve of ``scatter-add.45`` gives -98,368.10 = -65,536.10 (the weight all-to-all instead of its
all-gather) - 32,768 (``dot_general.45`` fully tiled) - 131,137.10 + 131,073.10 (the all-gather moved
from ``add.99 -> add.100`` to ``add.100 -> add.104``), and ``solve`` builds ``add.104`` as a follower of
``add.100``: that move is not in its space.
"""

from __future__ import annotations

# the local re-building and re-pricing itself lives on the solver side (autoshard.local: solve's
# post-solve improvement pass uses it too); explain reads it from there
from .autoshard.local import (ENUMERATE_LIMIT, MAX_CASCADE, PLAN_BUDGET, SOLVE_SECONDS, Pricing,  # noqa: F401
                              Site, edges_into)
from .autoshard import build_graph
from .autoshard.resharder import _key, _keys
from .hlo import parse_module, print_module
from .strategy.registry import rematerialized


class SolveSpace:
    """The strategy groups ``solve`` builds for a module (``hloshard solve --keep-shardings io``, its
    default: the annotations of parameters and outputs kept, every other instruction free):
    :func:`hloshard.autoshard.build_graph` of a copy of the module, built on first use (one more graph
    build).  ``group(name)``: the group of the instruction of that name, or None."""

    def __init__(self, module, mesh):
        self.module, self.mesh = module, mesh
        self._groups = None

    def group(self, name: str):
        if self._groups is None:
            copy = parse_module(print_module(self.module), "<solve space>")
            graph = build_graph(copy, self.mesh, keep="io")
            self._groups = {i.name: g for i, g in graph.ctx.groups.items()}
        return self._groups.get(name)

    def leaf_specs(self, name: str) -> list:
        """Output spec of the instruction ``name`` (leaf 0) under each strategy of its group."""
        g = self.group(name)
        return [s.out for s in g.strategies]


def follower_breaks(pricing, space: SolveSpace, plan: dict, changed) -> list:
    """Where a plan leaves ``solve``'s strategy space: ``(X, Y)`` pairs, X an instruction that ``solve``
    builds as a follower of its operand Y (``space``: X takes a layout derived from Y's, strategy q of X
    from strategy q of Y, ``strategy.elementwise.follow_group``; the edge is diagonal and the solver
    merges the pair, ``solver.followers``) whose layouts in ``plan`` no strategy pair of the two gives.
    ``solve`` cannot choose such a plan; ``hloshard cost`` of a module written with both annotated can
    (the annotated X reshards Y's output).

    ``plan``: instruction -> output spec for the instructions it changes (the rest as given by
    ``pricing``); ``changed``: those instructions.  Checked: each changed instruction and each plain
    user of one.  Sharding constraints (``custom-call`` ``Sharding``, the form of ``solve``'s own operand
    pins, which its cost graph does not have: there the pin's layout is the user's operand requirement)
    are never X or Y: no claim is made about them.  Returns ``[(X, Y, X's spec, Y's spec)]`` in
    schedule order."""
    g, c = pricing.graph, pricing.choice

    def spec_of(instr):
        if instr in plan:
            return plan[instr]
        return g.nodes[g.ctx.groups[instr].node].strategies[c[g.ctx.groups[instr].node]].out

    xs, seen = [], set()
    for i in changed:
        for x in [i] + list(i.users):
            if id(x) not in seen and x in g.positions and pricing.plain(x) and not x.is_sharding_constraint:
                seen.add(id(x))
                xs.append(x)
    xs.sort(key=lambda i: g.positions[i])
    out = []
    for x in xs:
        gx = space.group(x.name)
        if gx is None or getattr(gx, "follow", None) is None or gx.follow[1] != 0 or gx.multi:
            continue
        y = next((o for o in x.operands if o.name == gx.follow[0].name), None)
        if y is None or y.is_sharding_constraint or y not in g.ctx.groups or not pricing.plain(y):
            continue
        if x not in plan and y not in plan:
            continue
        gy = space.group(y.name)
        if gy is None or getattr(gy, "multi", False) or getattr(gy, "operands", None) is not None:
            continue
        ys = space.leaf_specs(y.name)
        if len(ys) != len(gx.strategies):
            continue
        sx, sy = spec_of(x), spec_of(y)
        if not any(_same(a, sy) and _same(st.out, sx) for a, st in zip(ys, gx.strategies)):
            out.append((x, y, sx, sy))
    return out


def strategies_unlisted(pricing, space: SolveSpace, site, pick) -> list:
    """The re-built instructions of a priced plan (``site``, ``pick``: :meth:`Site.solve`) whose strategy
    there -- the one XLA realizes for the annotated instruction from its operands' layouts
    (``strategy.registry._realized``) -- is not among the strategies ``solve`` builds for it (``space``):
    none has the same output and operand layouts (``_keys`` of ``out`` and ``inputs``).  Only where the
    strategy differs from the as-given one (the as-given plan is priced the same way).  ``solve`` cannot
    choose that strategy; it may reach the same layouts another way (e.g. its output resharded on every
    user edge), priced per edge.  Returns ``[(instruction, strategy)]``."""

    g, c = pricing.graph, pricing.choice
    out = []
    for k, instr in enumerate(site.instrs):
        if instr.is_sharding_constraint:
            continue
        st = site.groups[k].strategies[pick[k]]
        v = g.ctx.groups[instr].node
        old = g.nodes[v].strategies[c[v]]
        sig = (_keys([st.out]), _keys(list(st.inputs)))
        if sig == (_keys([old.out]), _keys(list(old.inputs))):
            continue
        sg = space.group(instr.name)
        if sg is None or getattr(sg, "multi", False) or not hasattr(sg, "strategies"):
            continue
        if not any((_keys([t.out]), _keys(list(t.inputs))) == sig for t in sg.strategies):
            out.append((instr, st))
    return out


def rematerialized_moved(pricing, plan: dict) -> list:
    """The instructions of ``plan`` (instruction -> new output spec) that XLA rebuilds for each user in
    the user's layout (``strategy.registry.rematerialized``: a constant, a broadcast of a scalar) and
    whose layout the plan changes.  Where their layout is written (``hloshard cost``), their users
    require nothing of them (``strategy.registry._free_rematerialized``), so the change moves only their
    own compute; ``solve``'s graph keeps their edges to their users (it gives them their users' layout)
    and prices the plan's layout with those edges.  Returns the instructions in schedule order."""

    g, c = pricing.graph, pricing.choice
    out = []
    for x, spec in plan.items():
        if not rematerialized(x) or x not in g.ctx.groups:
            continue
        v = g.ctx.groups[x].node
        if not _same(g.nodes[v].strategies[c[v]].out, spec):
            out.append(x)
    return sorted(out, key=lambda i: g.positions[i])


def _same(a, b) -> bool:
    """Two output specs are the same layout (``autoshard.resharder._key``)."""

    return _key(a) == _key(b)
