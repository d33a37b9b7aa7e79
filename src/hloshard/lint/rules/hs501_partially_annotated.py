from __future__ import annotations

from ...hlo.loops import invariant_elements
from ...strategy.reshape import folds_onto_tuple
from ..rule import Rule

#: share of annotated instructions above which the unannotated rest is reported
MOSTLY = 0.5


def _scalar_constant(instr) -> bool:
    return instr.opcode == "constant" and not instr.shape.is_tuple and instr.shape.rank == 0


class PartiallyAnnotated(Rule):
    """Most instructions of a computation carry a sharding, but this one does not.

    When a module is (almost) fully annotated, a missing sharding is usually an oversight: the
    partitioner then propagates one from the neighbours, and which neighbour wins depends on
    propagation order -- a frequent source of unexpected resharding. Reported (as info) for every
    unannotated instruction of a computation where more than half of the instructions are
    annotated; only the entry and the computations it reaches through while / conditional / call
    are considered (fusion bodies and reducers are never annotated). Scalar constants are left
    out: XLA's own propagation leaves them unannotated (e.g. the init value of a reduce), and a
    scalar is replicated whatever its sharding says. Nor a ``while`` with loop invariants (elements the
    body passes through unchanged, :func:`hloshard.hlo.loops.invariant_elements`): ``hloshard solve``
    leaves such a loop unannotated on purpose, since the HLO -> StableHLO import turns its invariants
    into values captured from outside the loop and a sharding on the while would not reach them
    (:mod:`hloshard.strategy.control_flow`; new user 19 saw six of these reported on solve's output).  Nor an
    instruction XLA's StableHLO -> HLO translation folds onto an element of a tuple a multi-result op makes (an
    identity reshape of an opt-barrier's element, :func:`hloshard.strategy.reshape.folds_onto_tuple`): a sharding
    on it would land on the whole tuple, so ``hloshard solve`` writes none there on purpose (new user 33 F15: 36
    such reshapes inside ``jax.checkpoint`` blocks reported on solve's own output).

    **Bad**::

        ENTRY e {
          a = f32[8] parameter(0), sharding={devices=[2]<=[2]}
          b = f32[8] parameter(1), sharding={devices=[2]<=[2]}
          ROOT c = f32[8] add(a, b)
        }

    **Good**::

        ENTRY e {
          a = f32[8] parameter(0), sharding={devices=[2]<=[2]}
          b = f32[8] parameter(1), sharding={devices=[2]<=[2]}
          ROOT c = f32[8] add(a, b), sharding={devices=[2]<=[2]}
        }
    """

    code = "HS501"
    name = "partially-annotated"
    severity = "info"
    groups = ("consistency",)

    def evaluate(self, context):
        for comp in context.partitioned_computations:
            instrs = [i for i in comp.instructions if not _scalar_constant(i)]
            missing = [i for i in instrs if i.sharding is None
                       and not (i.opcode == "while" and invariant_elements(i))
                       and not (not i.is_root and folds_onto_tuple(i))]
            annotated = len(instrs) - len(missing)
            if not missing or annotated <= MOSTLY * len(instrs):
                continue
            for instr in missing:
                yield self.finding(context, instr,
                                   f"%{instr.name} ({instr.opcode}) has no sharding while {annotated} of "
                                   f"{len(instrs)} instructions in %{comp.name} have one")
