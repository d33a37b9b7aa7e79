from __future__ import annotations

from collections import Counter

from ..collectives import collectives_of, group_mode, id_bound, iota_groups_shape
from ..rule import Rule


class InvalidReplicaGroups(Rule):
    """Replica groups that are empty, unequal in size, repeat an id or name an id out of range.

    ``replica_groups={}`` means one group of all participants; otherwise every group must be
    non-empty and all groups equally large (all-gather and reduce-scatter multiply / divide by
    *the* group size), and no id may appear twice across the groups. The ids are replica ids, partition
    ids or flattened ``replica * num_partitions + partition`` ids depending on channel_id and
    use_global_device_ids, and must lie below replica_count, num_partitions or their product
    (XLA does not check replica ids when replica_count is 1, and neither does this rule).

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
        for coll in collectives_of(context):
            instr = coll.instr
            iota = iota_groups_shape(instr)
            if iota is not None:
                yield from self._check_iota(context, coll, *iota)
                continue
            groups = instr.replica_groups
            if not groups:
                continue
            name = f"%{instr.name} ({instr.opcode})"
            empty = [i for i, g in enumerate(groups) if not g]
            if empty:
                yield self.finding(context, instr, f"{name}: replica group{'s' if len(empty) > 1 else ''} "
                                                   f"{', '.join(map(str, empty))} {'are' if len(empty) > 1 else 'is'} "
                                                   f"empty", key="empty")
            sizes = sorted({len(g) for g in groups if g})
            if len(sizes) > 1:
                yield self.finding(context, instr, f"{name}: replica groups have different sizes "
                                                   f"({', '.join(map(str, sizes))}); all groups must be equally large",
                                   key="sizes")
            counts = Counter(i for g in groups for i in g)
            dups = sorted(i for i, c in counts.items() if c > 1)
            if dups:
                yield self.finding(context, instr, f"{name}: id{'s' if len(dups) > 1 else ''} "
                                                   f"{', '.join(map(str, dups[:8]))} appear{'' if len(dups) > 1 else 's'} "
                                                   f"in more than one place in the replica groups", key="dups")
            mode = group_mode(instr, coll.family)
            bound = id_bound(context, mode)
            bad = sorted(i for i in counts if i < 0 or (bound is not None and i >= bound))
            if bad:
                yield self._range_finding(context, instr, mode, bound, bad[:8], len(bad))

    def _check_iota(self, context, coll, num_groups: int, size: int):
        """The iota form ``[G,S]<=[...]`` names each id of ``range(G*S)`` once in G groups of S:
        equal sizes and no duplicates by construction; only emptiness and the range can be wrong,
        and both follow from G, S and the bound (nothing is expanded)."""
        instr = coll.instr
        if size == 0 and num_groups > 0:
            yield self.finding(context, instr, f"%{instr.name} ({instr.opcode}): replica groups "
                                               f"{instr.attrs.get('replica_groups')} are all empty", key="empty")
            return
        mode = group_mode(instr, coll.family)
        bound = id_bound(context, mode)
        n = num_groups * size
        if bound is not None and n > bound:
            yield self._range_finding(context, instr, mode, bound, range(bound, min(n, bound + 8)), n - bound)

    def _range_finding(self, context, instr, mode, bound, first, count: int):
        """The out-of-range finding: the first (at most 8) offending ids, and the count when more."""
        space = {"cross_replica": "replica ids", "cross_replica_and_partition": "replica ids",
                 "cross_partition": "partition ids", "flattened_id": "flattened device ids"}[mode]
        rng = f"[0, {bound})" if bound is not None else "non-negative"
        ids = ", ".join(map(str, first)) + (f", ... ({count} in all)" if count > 8 else "")
        return self.finding(context, instr, f"%{instr.name} ({instr.opcode}): replica group "
                                            f"id{'s' if count > 1 else ''} {ids} outside {rng} ({space}: "
                                            f"{mode.replace('_', '-')} mode)", key="range")
