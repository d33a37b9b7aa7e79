"""fusion: strategies derived from the fused computation.

For every layout of the fusion's (array) output, the layout is pushed backwards through the fused
computation with each op's backward rule (the same rules that give operand layouts for user-fixed
outputs: elementwise, broadcast, transpose, reshape, reduce, slicing, dot ...).  A fusion parameter
reached with one consistent layout requires it of the fusion operand; a parameter reached with
conflicting layouts, or through an op without a rule, is required replicated (always correct: the
operand edge pays the gather).  Layouts no rule supports at the root are dropped; the replicated
layout always remains.  Tuple-output fusions are replicated.  Compute: one flop per output element
per device; communication inside the fusion: none (every rule used is local).
"""

from __future__ import annotations

from .base import elementwise_strategy, is_array, is_mesh_spec, replicated_spec, spec_name
from .registry import BACKWARD, register
from .control_flow import called

_CONFLICT = object()


def push_back(comp, root_spec, ctx):
    """Per fused parameter number: required spec (None when unreached, _CONFLICT when mixed)."""
    specs = {comp.root: root_spec}
    params = {}
    for instr in reversed(comp.post_order()):
        spec = specs.get(instr)
        if spec is None:
            continue
        if instr.opcode == "parameter":
            params[instr.parameter_number] = spec
            continue
        if spec is _CONFLICT:
            ins = None
        else:
            fn = BACKWARD.get(instr.opcode)
            try:
                ins = fn(instr, spec, ctx) if fn is not None else None
            except (KeyError, IndexError, ValueError, TypeError):
                ins = None
        for k, op in enumerate(instr.operands):
            if not is_array(op.shape):
                continue
            want = ins[k] if ins is not None and k < len(ins) else None
            if want is None:
                want = replicated_spec(len(op.shape.dims)) if ins is not None else _CONFLICT
            prev = specs.get(op)
            if prev is None:
                specs[op] = want
            elif prev != want:
                specs[op] = _CONFLICT
    return params


@register("fusion")
def handle_fusion(instr, ctx):
    if not is_array(instr.shape):
        return None
    comp = called(instr, "calls", 0)
    if comp is None:
        return None
    minfo = ctx.minfo
    strategies = []
    from .base import StrategyGroup

    for spec in minfo.enumerate(instr.shape.dims):
        params = push_back(comp, spec, ctx)
        inputs = []
        ok = True
        for k, op in enumerate(instr.operands):
            if not is_array(op.shape):
                inputs.append(None)
                continue
            want = params.get(k)
            if want is None or want is _CONFLICT or not is_mesh_spec(want) or not minfo.fits(op.shape.dims, want):
                if spec_axes_nonempty(spec) and want is _CONFLICT and _root_unsupported(comp):
                    ok = False
                want = replicated_spec(len(op.shape.dims))
            inputs.append(want)
        if not ok:
            continue
        strategies.append(elementwise_strategy(spec_name(spec), spec, tuple(inputs), instr.shape, minfo))
    return StrategyGroup(instr, strategies, leaf_shapes=(instr.shape,))


def spec_axes_nonempty(spec) -> bool:
    return any(spec)


def _root_unsupported(comp) -> bool:
    return comp.root.opcode not in BACKWARD and comp.root.opcode != "parameter"
