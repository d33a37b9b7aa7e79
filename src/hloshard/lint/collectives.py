"""Collective instructions as the HS3xx rules see them: the validator itself is
:mod:`hloshard.hlo.collective_checks` (shared with ``verify_module`` and ``hloshard combine``); this
module runs it once per lint context with the counts lint knows and hands each rule its problems.

Counts: ``num_partitions`` is ``--num-partitions`` / the header / ``--mesh`` (never the device count the
shardings happen to use, which is no partition count); ``replica_count`` as the header states it
(unstated: unknown). Replica-group ids are bounded by the device count lint knows
(:attr:`LintContext.device_count`).
"""

from __future__ import annotations

from ..hlo.collective_checks import COLLECTIVE_OPCODES, Collective, CollectiveProblem, classify, collective_problems

__all__ = ["collectives_of", "problems_of"]


def collectives_of(context) -> list[Collective]:
    """:func:`classify` of every collective instruction of the module, in text order (cached)."""
    cached = context.__dict__.get("_collectives")
    if cached is None:
        cached = [classify(i) for i in context.instructions() if i.opcode in COLLECTIVE_OPCODES]
        context.__dict__["_collectives"] = cached
    return cached


def problems_of(context, code: str) -> list[CollectiveProblem]:
    """The validator's problems with lint code ``code`` over the module's collectives (all codes are
    computed once per context)."""
    cached = context.__dict__.get("_collective_problems")
    if cached is None:
        cached = []
        for coll in collectives_of(context):
            cached.extend(collective_problems(coll.instr, context.num_partitions, context.scan.replica_count,
                                              id_partitions=context.device_count))
        context.__dict__["_collective_problems"] = cached
    return [p for p in cached if p.code == code]
