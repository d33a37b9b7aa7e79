from __future__ import annotations

from ..rule import Rule

#: opcodes whose execution has an effect outside the program's data flow
SIDE_EFFECTING = frozenset({
    "rng-get-and-update-state", "infeed", "outfeed", "send", "recv", "send-done", "recv-done",
})


def _truthy(value) -> bool:
    return value is True or str(value).strip().lower() == "true"


def is_side_effecting(instr) -> bool:
    """rng state, infeed/outfeed, send/recv(-done), or a custom-call with
    ``custom_call_has_side_effect=true``."""
    if instr.opcode in SIDE_EFFECTING:
        return True
    return instr.opcode == "custom-call" and _truthy(instr.attr("custom_call_has_side_effect", False))


class SideEffectWithoutSharding(Rule):
    """A side-effecting instruction has no sharding in a module that uses SPMD partitioning.

    Sharding propagation decides where ordinary instructions run, but an instruction with a side
    effect (``rng-get-and-update-state``, ``infeed``/``outfeed``, ``send``/``recv`` and their
    ``-done``, a ``custom-call`` with ``custom_call_has_side_effect=true``) must not be duplicated
    or moved freely: without an explicit sharding the partitioner picks a placement itself
    (sharding propagation may make it replicated -- every device performs the effect -- or copy a
    neighbour's), which for an infeed, an outfeed or a send changes what the program does. The
    module counts as SPMD when num_partitions > 1 or when any instruction carries a sharding. Only
    the entry and the computations it reaches through while / conditional / call are checked.

    **Bad**::

        HloModule m, num_partitions=2
        ENTRY e {
          t = token[] after-all()
          ROOT in = (f32[8], token[]) infeed(t)
        }

    **Good**::

        HloModule m, num_partitions=2
        ENTRY e {
          t = token[] after-all()
          ROOT in = (f32[8], token[]) infeed(t), sharding={{maximal device=0}, {maximal device=0}}
        }
    """

    code = "HS109"
    name = "side-effect-without-sharding"
    severity = "error"
    groups = ("validity",)

    def evaluate(self, context):
        if not context.spmd:
            return
        for comp in context.partitioned_computations:
            for instr in comp.instructions:
                if instr.sharding is None and is_side_effecting(instr):
                    what = (f"custom-call {instr.attr('custom_call_target', '')!s} with side effects"
                            if instr.opcode == "custom-call" else instr.opcode)
                    yield self.finding(context, instr,
                                       f"%{instr.name} ({what}) has no sharding in an SPMD module: say "
                                       f"which devices perform it ({{maximal device=N}} or {{replicated}})")
