"""tuple, get-tuple-element, optimization-barrier: aliases, no node of their own.

A tuple's leaves are its operands' leaves; a get-tuple-element's leaves are the selected element's
leaves of its operand; an optimization-barrier passes its operand's leaves through.  The cost graph
therefore never charges anything for them, and the layout of each leaf is decided once, by the node
that produced the value.
"""

from __future__ import annotations

from .base import TOKEN, LeafRef, TupleGroup, is_array, leaf_range, leaf_shapes
from .registry import register


def alias_leaves(instr, operand, leaves) -> TupleGroup:
    children = []
    shapes = leaf_shapes(operand.shape)
    for l in leaves:
        children.append(LeafRef(operand, l) if is_array(shapes[l]) else TOKEN)
    return TupleGroup(instr, children)


@register("tuple")
def handle_tuple(instr, ctx):
    children = []
    for op in instr.operands:
        shapes = leaf_shapes(op.shape)
        for l, s in enumerate(shapes):
            children.append(LeafRef(op, l) if is_array(s) else TOKEN)
    return TupleGroup(instr, children)


@register("get-tuple-element")
def handle_gte(instr, ctx):
    op = instr.operands[0]
    index = instr.attrs.get("index")
    index = int(str(index)) if index is not None else 0
    return alias_leaves(instr, op, leaf_range(op.shape, index))


@register("optimization-barrier", "opt-barrier")
def handle_barrier(instr, ctx):
    op = instr.operands[0]
    return alias_leaves(instr, op, range(len(leaf_shapes(op.shape))))
