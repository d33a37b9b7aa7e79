from __future__ import annotations

from collections import Counter

from ..rule import Rule

_PERMUTES = ("collective-permute", "collective-permute-start")


class InvalidSourceTargetPairs(Rule):
    """A collective-permute repeats a source or a target, or names a device out of range.

    ``source_target_pairs={{s,t},...}`` describes a partial permutation: each device sends its
    buffer at most once and receives at most one buffer (a device that receives nothing gets
    zeros), so no source and no target may repeat, and with a channel_id the ids are partition ids
    in ``[0, num_partitions)`` (replica ids in ``[0, replica_count)`` without one). Every pair must
    have exactly two ids. A repeated target makes the result depend on which message arrives last.

    **Bad**::

        HloModule m, num_partitions=4
        ENTRY e {
          a = f32[8] parameter(0)
          ROOT cp = f32[8] collective-permute(a), channel_id=1, source_target_pairs={{0,1},{2,1},{3,4}}
        }

    **Good**::

        HloModule m, num_partitions=4
        ENTRY e {
          a = f32[8] parameter(0)
          ROOT cp = f32[8] collective-permute(a), channel_id=1, source_target_pairs={{0,1},{1,2},{2,3},{3,0}}
        }
    """

    code = "HS307"
    name = "invalid-source-target-pairs"
    severity = "error"
    groups = ("collectives",)

    def evaluate(self, context):
        for instr in context.instructions():
            if instr.opcode not in _PERMUTES:
                continue
            pairs = instr.attr("source_target_pairs")
            if not pairs or isinstance(pairs, str):
                continue
            name = f"%{instr.name} ({instr.opcode})"
            malformed = [list(p) for p in pairs if len(p) != 2]
            if malformed:
                yield self.finding(context, instr, f"{name}: source_target_pairs entries must be "
                                                   f"pairs, got {malformed[:4]}", key="shape")
                continue
            for role, index in (("source", 0), ("target", 1)):
                counts = Counter(p[index] for p in pairs)
                dups = sorted(d for d, c in counts.items() if c > 1)
                if dups:
                    yield self.finding(context, instr,
                                       f"{name}: device{'s' if len(dups) > 1 else ''} "
                                       f"{', '.join(map(str, dups[:8]))} appear{'' if len(dups) > 1 else 's'} "
                                       f"as a {role} more than once", key=role)
            if instr.channel_id is not None:
                bound, space = context.device_count, "partition ids"
            else:
                bound, space = (context.num_replicas if context.num_replicas > 1 else None), "replica ids"
            ids = sorted({d for p in pairs for d in p})
            bad = [d for d in ids if d < 0 or (bound is not None and d >= bound)]
            if bad:
                rng = f"[0, {bound})" if bound is not None else "non-negative"
                yield self.finding(context, instr, f"{name}: id{'s' if len(bad) > 1 else ''} "
                                                   f"{', '.join(map(str, bad[:8]))} outside {rng} ({space})",
                                   key="range")
