from __future__ import annotations

from ...hlo.replica_groups import GroupProblem
from ..collectives import problems_of
from ..rule import Rule


class InvalidReplicaGroups(Rule):
    """Replica groups that are empty, unequal in size, repeat an id or name an id out of range.

    ``replica_groups={}`` means one group of all participants; otherwise every group must be
    non-empty and all groups equally large (all-gather and reduce-scatter multiply / divide by
    *the* group size), and no id may appear twice across the groups. The ids are replica ids, partition
    ids or flattened ``replica * num_partitions + partition`` ids depending on channel_id and
    use_global_device_ids, and must lie below replica_count, num_partitions or their product
    (XLA's verifier does not check replica ids when replica_count is 1, and neither does this rule;
    ``hloshard combine`` is stricter there, see :func:`hloshard.combine.replica_id_bound`). The check is
    :func:`hloshard.hlo.replica_groups.check_groups`, shared with combine; an iota form ``[G,S]<=[...]``
    is judged from G and S without expanding it, and ``[0,S]`` / ``[G,0]`` are empty. Like XLA's
    verifier, the groups must also name every participant of their mode once the counts are known
    ("In flattened_id mode, replica groups should contain 8 flattened IDs, but found 4": a
    use_global_device_ids all-reduce over half the partitions), and ``use_global_device_ids=true``
    needs explicit groups. The validator is :mod:`hloshard.hlo.collective_checks`, which
    ``solve`` / ``cost`` run too.

    **Bad**::

        HloModule m, num_partitions=4
        sum {
          x = f32[] parameter(0)
          y = f32[] parameter(1)
          ROOT s = f32[] add(x, y)
        }
        ENTRY e {
          a = f32[4] parameter(0)
          ROOT ar = f32[4] all-reduce(a), channel_id=1, replica_groups={{0,1,2},{3}}, use_global_device_ids=true, to_apply=sum
        }

    **Good**::

        HloModule m, num_partitions=4
        sum {
          x = f32[] parameter(0)
          y = f32[] parameter(1)
          ROOT s = f32[] add(x, y)
        }
        ENTRY e {
          a = f32[4] parameter(0)
          ROOT ar = f32[4] all-reduce(a), channel_id=1, replica_groups={{0,1},{2,3}}, use_global_device_ids=true, to_apply=sum
        }
    """

    code = "HS304"
    name = "invalid-replica-groups"
    severity = "error"
    groups = ("collectives",)

    def evaluate(self, context):
        for p in problems_of(context, "HS304"):   # hloshard.hlo.collective_checks
            if p.group is None:   # coverage: the groups do not name every participant of the mode
                yield self.finding(context, p.instr, p.message, key=p.key)
            else:
                yield self._finding(context, p.instr, p.group, p.mode, p.bound)

    def _finding(self, context, instr, p: GroupProblem, mode: str, bound: int | None):
        """One finding per :class:`GroupProblem` (key = its kind), in lint's wording."""
        name = f"%{instr.name} ({instr.opcode})"
        plural = p.count > 1
        if p.kind == "empty":
            if p.detail:   # iota form [0,S] or [G,0]: an empty list of groups, not the all-devices {}
                what = "name no group" if p.detail == "no groups" else "are all empty"
                msg = f"{name}: replica groups {instr.attrs.get('replica_groups')} {what}"
            else:
                msg = (f"{name}: replica group{'s' if plural else ''} {', '.join(map(str, p.items))} "
                       f"{'are' if plural else 'is'} empty")
        elif p.kind == "sizes":
            msg = (f"{name}: replica groups have different sizes ({', '.join(map(str, p.items))}); "
                   f"all groups must be equally large")
        elif p.kind == "dups":
            msg = (f"{name}: id{'s' if plural else ''} {', '.join(map(str, p.items))} "
                   f"appear{'' if plural else 's'} in more than one place in the replica groups")
        else:
            space = {"cross_replica": "replica ids", "cross_replica_and_partition": "replica ids",
                     "cross_partition": "partition ids", "flattened_id": "flattened device ids"}[mode]
            rng = f"[0, {bound})" if bound is not None else "non-negative"
            ids = ", ".join(map(str, p.items)) + (f", ... ({p.count} in all)" if p.count > len(p.items) else "")
            msg = (f"{name}: replica group id{'s' if plural else ''} {ids} outside {rng} ({space}: "
                   f"{mode.replace('_', '-')} mode)")
        return self.finding(context, instr, msg, key=p.kind)
