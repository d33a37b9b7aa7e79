from __future__ import annotations

from ..rule import Rule

#: opcodes XLA's SPMD partitioner refuses without a sharding ("Side-effect HLO must have sharding")
NEEDS_SHARDING = frozenset({"infeed", "outfeed", "send", "recv", "send-done", "recv-done"})

#: custom-call targets XLA handles without a sharding although they are marked side-effecting:
#: ``annotate_device_placement`` (memory-kind placement, jax's host offloading) compiles unsharded;
#: ``xla.sdy.*`` calls (Shardy round-trip markers) are consumed by the Shardy importer.
_EXEMPT_TARGETS = ("annotate_device_placement",)
_EXEMPT_PREFIXES = ("xla.sdy.",)


def _truthy(value) -> bool:
    return value is True or str(value).strip().lower() == "true"


def _exempt_target(target: str) -> bool:
    return target in _EXEMPT_TARGETS or target.startswith(_EXEMPT_PREFIXES)


def is_side_effecting(instr) -> bool:
    """What XLA's SPMD partitioner requires a sharding on: infeed/outfeed, send/recv(-done), and a
    ``custom-call`` with ``custom_call_has_side_effect=true`` other than ``annotate_device_placement``
    and the ``xla.sdy.*`` calls. ``rng-get-and-update-state`` is not among them: XLA compiles it
    unsharded (tests/lint/test_side_effect_oracle.py)."""
    if instr.opcode in NEEDS_SHARDING:
        return True
    return (instr.opcode == "custom-call" and _truthy(instr.attr("custom_call_has_side_effect", False))
            and not _exempt_target(str(instr.attr("custom_call_target", ""))))


class SideEffectWithoutSharding(Rule):
    """A side-effecting instruction has no sharding (or a non-maximal one) in an SPMD module.

    XLA's SPMD partitioner refuses an ``infeed``, ``outfeed``, ``send``/``recv`` (and their
    ``-done``) or a ``custom-call`` with ``custom_call_has_side_effect=true`` that carries no
    sharding ("Side-effect HLO must have sharding"): it cannot guess which devices perform the
    effect. A side-effecting custom-call must moreover name one device (``{maximal device=N}``):
    XLA rejects ``{replicated}`` on it ("side-effect HLO cannot have a replicated sharding") and a
    tiled sharding ("Side-effect ops cannot be replicated"); infeed/outfeed may be replicated.
    XLA handles these without a sharding, so they are not reported: ``rng-get-and-update-state``,
    ``annotate_device_placement`` custom-calls, the ``xla.sdy.*`` custom-calls of Shardy-mode
    dumps, an instruction whose operand is manually sharded (inside a ``shard_map`` region XLA
    propagates ``{manual}`` to it), and every instruction of an already partitioned module (entry
    computation named ``*_spmd``). Each case is checked against XLA in ``tests/lint/test_side_effect_oracle.py``. The
    module counts as SPMD when num_partitions > 1 or when any instruction carries a sharding;
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
        for instr in context.instructions_to_partition():
            if not is_side_effecting(instr) or _in_manual_region(instr):
                continue
            cc = instr.opcode == "custom-call"
            what = (f"custom-call {instr.attr('custom_call_target', '')!s} with side effects"
                    if cc else instr.opcode)
            if instr.sharding is None:
                fix = "{maximal device=N}" if cc else "{maximal device=N} or {replicated}"
                yield self.finding(context, instr,
                                   f"%{instr.name} ({what}) has no sharding in an SPMD module (XLA: "
                                   f"\"Side-effect HLO must have sharding\"): say which devices "
                                   f"perform it ({fix})")
            elif cc and not _maximal(instr.sharding):
                yield self.finding(context, instr,
                                   f"%{instr.name} ({what}) has sharding {instr.sharding}; XLA runs a "
                                   f"side-effecting custom-call on one device only (\"side-effect HLO "
                                   f"cannot have a replicated sharding\"): use {{maximal device=N}}",
                                   key="sharding")


def _maximal(sharding) -> bool:
    if sharding.is_tuple:
        return all(_maximal(e) for e in sharding.tuple_elements)
    return sharding.is_maximal or sharding.is_manual


def _in_manual_region(instr) -> bool:
    """An operand carries a manual sharding: sharding propagation gives the instruction
    ``{manual}`` too, and XLA's partitioner leaves it alone."""
    for op in instr.operands:
        sh = op.sharding
        if sh is not None and (sh.is_manual or (sh.is_tuple and any(e.is_manual for e in sh.tuple_elements))):
            return True
    return False
