"""The full strategy registry: imports every handler module (their ``@register`` decorators fill the
tables of :mod:`.registry`) and dispatches an instruction to its handler (:func:`build_group`).

The layering: :mod:`.registry` holds the tables and the shared build machinery and imports no handler;
each handler module imports :mod:`.registry` and registers into it; this module imports them all.
Code that builds strategy groups imports :func:`build_group` from here (or from
:mod:`hloshard.strategy`, which re-exports it), so the registry is always complete when it is used.
"""

from __future__ import annotations

from . import (  # noqa: F401  (imported for their registrations)
    broadcast, collectives, control_flow, convolution, custom_call, dot, elementwise, fusion, gather_scatter,
    parameter, reduce, reshape, slicing, sort, transpose, tuple_ops, window,
)
from .base import is_array, leaf_shapes
from .collectives import charge_manual_collective
from .base import price_roofline
from ..cost.combiner import share_latency
from .control_flow import called, trip_count
from .custom_call import is_manual_instruction, manual_group
from ..hlo.manual import manual_kind
from ..hlo.sharding import HloSharding
from .registry import (
    DROPPED_ANNOTATION, HANDLERS, BuildContext, _check_nonempty, _free_rematerialized, apply_fixed, _fixed_specs,
    replicated_group,
)
from .tuple_ops import alias_leaves

__all__ = ["build_group", "HANDLER_MODULES"]

#: every handler module, in the order their registrations run
HANDLER_MODULES = (broadcast, collectives, control_flow, convolution, custom_call, dot, elementwise, fusion,
                   gather_scatter, parameter, reduce, reshape, slicing, sort, transpose, tuple_ops, window)


def build_group(instr, ctx: BuildContext):
    """Build (and record in ``ctx.groups``) the strategy group of ``instr``: a manual instruction gets
    its manual group (an explicit collective still charged, called computations visited as manual);
    any other the group of its opcode's handler (a replicated group when it has none or the handler
    declines), restricted to the user's sharding when the instruction is fixed.  Returns the
    StrategyGroup / TupleGroup.  Raises InputError when a tuple element ends up with no strategy."""
    if is_manual_instruction(instr, ctx):
        group = manual_group(instr, ctx)
        charge_manual_collective(instr, group, ctx)   # an explicit collective still communicates
        if instr.opcode in ("call", "while", "conditional"):
            _visit_manual_callees(instr, group, ctx)
    else:
        fn = HANDLERS.get(instr.opcode)
        full = None
        if fn is None:
            group = None
        elif _is_fixed(instr, ctx):
            group, full = _build_fixed(fn, instr, ctx)
        else:
            group = fn(instr, ctx)
        if group is None:
            group = replicated_group(instr, ctx)
        if _is_fixed(instr, ctx):   # asked again: a handler may apply the sharding itself (a while loop's)
            group = apply_fixed(group, instr, ctx, full=full)
        elif full is not None:      # (no handler that builds a partial group does: kept exact regardless)
            group = full()
        _free_rematerialized(group, instr, ctx)
        price_roofline(group, ctx.minfo)   # --device: compute = roofline (flops vs HBM bytes)
        share_latency(group, ctx.mesh, vars(ctx).setdefault("latency_classes", {}))   # --device: XLA's combiners
    _check_nonempty(group, instr, ctx)
    ctx.set_group(instr, group)
    return group


def _build_fixed(fn, instr, ctx: BuildContext):
    """(group, full) of a fixed instruction: its handler's group, told the one output layout the user
    fixes (:attr:`BuildContext.only_out`, for a single-array result) so that an enumeration of every
    output layout (:func:`hloshard.strategy.elementwise.free_group`) builds only the strategies
    :func:`apply_fixed` would keep -- the same strategies, in the same order, with the same costs.
    ``full``: None when the handler built its whole space; else a function that builds it (for the
    one step of :func:`apply_fixed` that reads strategies of other layouts:
    :func:`hloshard.strategy.registry._resharded_outputs`)."""
    if instr.shape.is_tuple or not is_array(instr.shape):
        return fn(instr, ctx), None
    saved = ctx.only_out, ctx.only_out_used   # a handler may build other instructions (called computations)
    ctx.only_out, ctx.only_out_used = (instr, _fixed_specs(instr, ctx)[0]), False
    try:
        group = fn(instr, ctx)
        used = ctx.only_out_used
    finally:
        ctx.only_out, ctx.only_out_used = saved
    if not used:
        return group, None
    return group, lambda: fn(instr, ctx)


def _is_fixed(instr, ctx: BuildContext) -> bool:
    """``instr`` keeps a user sharding (``ctx.fixed``) that XLA sees (not a dropped annotation)."""
    dropped = DROPPED_ANNOTATION.get(instr.opcode)
    return instr in ctx.fixed and not (dropped is not None and dropped(instr))


def _visit_manual_callees(instr, group, ctx) -> None:
    """A call / while / conditional inside a manual region: its computations are manual as a whole
    (every instruction keeps a manual sharding); their parameters alias the operands (the loop state
    for a while) so that the bodies are still visited and annotated."""
    ctx.set_group(instr, group)
    outs = group.strategies[0].out
    region = next((o for o in (outs if isinstance(outs, tuple) else (outs,)) if manual_kind(o) is not None),
                  HloSharding.manual())
    if instr.opcode == "call":
        pairs = [(called(instr, "to_apply", 0), list(instr.operands))]
    elif instr.opcode == "while":
        pairs = [(called(instr, "body", 0), [instr]), (called(instr, "condition", 1), [instr])]
    else:
        pairs = [(c, [instr.operands[i + 1]]) for i, c in enumerate(instr.called_computations)]
    for comp, sources in pairs:
        if comp is None:
            continue
        ctx.manual_comps[id(comp)] = region
        for k, p in enumerate(comp.parameters):
            src = sources[k] if k < len(sources) else sources[-1]
            ctx.set_group(p, alias_leaves(p, src, range(len(leaf_shapes(src.shape)))))
        w = ctx.weight(instr)
        if instr.opcode == "while":   # the body and condition run trip-count times (their collectives too)
            w *= trip_count(instr)
        ctx.visit(comp, w)
