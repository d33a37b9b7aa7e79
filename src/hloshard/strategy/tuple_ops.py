"""tuple, get-tuple-element, optimization-barrier: aliases, no node of their own.

A tuple's leaves are its operands' leaves; a get-tuple-element's leaves are the selected element's
leaves of its operand; an optimization-barrier passes its operand's leaves through.  The cost graph
therefore never charges anything for them, and the layout of each leaf is decided once, by the node
that produced the value.

A written sharding on a get-tuple-element, or on a tuple that is not the root of its computation, pins
nothing (:func:`annotation_dropped`): XLA never sees it.  The HLO text reaches XLA's partitioner
through StableHLO, which has no get-tuple-element of its own (tuple / get-tuple-element pairs fold away,
a tuple parameter becomes one argument per leaf, a sort's or while's results are separate values), so
the users of the element read the producer's layout and any resharding happens at the user, under the
user's ``op_name`` (measured, jaxlib 0.10.2: tests/test_handlers_tuple_ops.py; e.g. a get-tuple-element
annotated replicated between a tiled producer and a user of the same tiling costs nothing).  A
computation's root tuple keeps its sharding (the entry's is the output layout).
"""

from __future__ import annotations

from .base import TOKEN, LeafRef, TupleGroup, is_array, leaf_range, leaf_shapes
from .registry import DROPPED_ANNOTATION, register


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


def annotation_dropped(instr) -> bool:
    """True for a get-tuple-element and for a tuple that is not its computation's root: their written
    sharding does not reach XLA's partitioner (module docstring)."""
    return instr.opcode == "get-tuple-element" or (instr.opcode == "tuple" and not instr.is_root)


DROPPED_ANNOTATION["get-tuple-element"] = annotation_dropped
DROPPED_ANNOTATION["tuple"] = annotation_dropped
