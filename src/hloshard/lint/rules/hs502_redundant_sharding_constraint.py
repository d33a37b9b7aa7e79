from __future__ import annotations

from ...hlo.loops import called
from ...strategy.realize import scatter_into_scalar_broadcast
from ..rule import Rule


class RedundantShardingConstraint(Rule):
    """A ``Sharding`` custom-call constrains its operand to the sharding it already has.

    ``custom-call(x), custom_call_target="Sharding"`` (``with_sharding_constraint`` in JAX) pins
    a sharding at that point of the program. When ``x`` is already annotated with the very same
    sharding the constraint does nothing but add an instruction -- often a leftover from an
    earlier layout, or a constraint that was meant to say something else.

    **Bad**::

        ENTRY e {
          a = f32[8,8] parameter(0), sharding={devices=[2,1]<=[2]}
          ROOT c = f32[8,8] custom-call(a), custom_call_target="Sharding", sharding={devices=[2,1]<=[2]}
        }

    **Good**::

        ENTRY e {
          a = f32[8,8] parameter(0), sharding={devices=[2,1]<=[2]}
          ROOT c = f32[8,8] custom-call(a), custom_call_target="Sharding", sharding={devices=[1,2]<=[2]}
        }

    Not reported between a dot or convolution and a ``transpose`` that reads the constraint: there it is
    not redundant. XLA's algebraic simplifier (run before partitioning in the TPU pipeline) folds
    ``transpose(dot(a, b))`` into ``dot(b, a)`` and keeps the old dot's sharding untransposed, and the
    constraint keeps the fold from changing the plan (``hloshard solve`` writes these as ``*.tpin``).
    Nor on a broadcast of a scalar that a scatter reads as its destination: XLA merges identical
    broadcasts whatever their shardings and moves them to the layout of a constraint reading one, so
    ``hloshard solve`` pins each scatter's zeros in its own layout
    (:func:`hloshard.strategy.realize.scatter_into_scalar_broadcast`).
    Nor after a ``get-tuple-element`` of a ``while`` body's parameter (a read of the loop state): on the
    way into XLA through StableHLO the body parameter becomes block arguments and the read's own sharding
    is lost, so the constraint is what keeps the loop state's layout (``hloshard solve`` writes these as
    ``*.sh``, :func:`hloshard.strategy.realize.insert_loop_state_pins`; new user 19 saw 24 of them reported).
    Nor on a value only a ``while``'s init tuple reads: XLA drops the tuple's sharding and that of, e.g., a
    ``get-tuple-element`` of another loop's result, and would capture a loop invariant in whatever layout its
    propagation gives it (``hloshard solve`` writes these as ``*.init.pin``, same function).
    """

    code = "HS502"
    name = "redundant-sharding-constraint"
    severity = "info"
    groups = ("consistency",)

    def evaluate(self, context):
        for instr in context.instructions():
            if not instr.is_sharding_constraint:
                continue
            if len(instr.operands) != 1 or instr.sharding is None:
                continue
            operand = instr.operands[0]
            if operand.sharding is None or not context.sharding_is_sound(instr):
                continue
            if operand.opcode in ("dot", "convolution") and any(u.opcode == "transpose" for u in instr.users):
                continue   # guards the plan against the transpose(dot) fold (docstring)
            if any(u.opcode == "scatter" and scatter_into_scalar_broadcast(u, k, operand)
                   for u in instr.users for k, o in enumerate(u.operands) if o is instr):
                continue   # a scatter's zeros, pinned against XLA's broadcast merging (docstring)
            if _reads_loop_state(operand, context):
                continue   # the loop state's layout survives StableHLO only through it (docstring)
            if instr.users and all(u.opcode == "tuple" and u.users and
                                   all(w.opcode == "while" for w in u.users) for u in instr.users):
                continue   # a loop's init value: the tuple's sharding does not reach XLA (docstring)
            if operand.sharding == instr.sharding:
                yield self.finding(context, instr,
                                   f"%{instr.name} constrains %{operand.name} to "
                                   f"{instr.sharding.to_string(False)}, the sharding it already has")


def _reads_loop_state(operand, context) -> bool:
    """Is ``operand`` a ``get-tuple-element`` of a ``while`` body's parameter?"""
    if operand.opcode != "get-tuple-element" or not operand.operands or operand.operands[0].opcode != "parameter":
        return False
    bodies = getattr(context, "_while_bodies", None)
    if bodies is None:
        bodies = {id(called(i, "body", 0)) for i in context.instructions() if i.opcode == "while"}
        context._while_bodies = bodies
    return id(operand.operands[0].parent) in bodies
