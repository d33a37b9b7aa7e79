from __future__ import annotations

from ..rule import Rule

#: how many unsharded users deep the search for a manual region goes
_MAX_VISITS = 256


def _reaches_manual(instr) -> bool:
    """A user of ``instr`` (through unsharded instructions, which propagation shards like their
    neighbours) is manually sharded: the partition-id then lies inside a ``shard_map`` region."""
    stack = list(instr.users)
    seen: set[int] = set()
    while stack and len(seen) < _MAX_VISITS:
        u = stack.pop()
        if id(u) in seen:
            continue
        seen.add(id(u))
        sh = u.sharding
        if sh is None:
            stack.extend(u.users)
        elif sh.is_manual or (sh.is_tuple and any(e.is_manual for e in sh.tuple_elements)):
            return True
    return False


class PartitionIdOutsideManual(Rule):
    """A ``partition-id`` outside a manually partitioned (``shard_map``) region of an SPMD module.

    XLA's SPMD partitioner refuses it: "PartitionId instruction is not supported for SPMD
    partitioning since the meaning is ambiguous -- whether the instruction is replicated or the
    data is replicated". It is accepted where the code is already per-device: with a
    ``{manual}`` sharding, or unsharded but feeding manually sharded instructions (propagation
    makes it manual). Checked against XLA in ``tests/lint/test_side_effect_oracle.py``; partitioned
    modules (entry ``*_spmd``) are not checked. The module counts as SPMD when num_partitions > 1 or
    an instruction carries a sharding.

    **Bad**::

        HloModule m, num_partitions=2
        ENTRY e {
          a = f32[8] parameter(0), sharding={devices=[2]<=[2]}
          p = u32[] partition-id()
          c = f32[] convert(p)
          b = f32[8] broadcast(c), dimensions={}
          ROOT r = f32[8] add(a, b), sharding={devices=[2]<=[2]}
        }

    **Good**::

        HloModule m, num_partitions=2
        ENTRY e {
          a = f32[8] parameter(0), sharding={devices=[2]<=[2]}
          s = f32[4] custom-call(a), custom_call_target="SPMDFullToShardShape", sharding={manual}
          p = u32[] partition-id(), sharding={manual}
          c = f32[] convert(p), sharding={manual}
          b = f32[4] broadcast(c), dimensions={}, sharding={manual}
          x = f32[4] add(s, b), sharding={manual}
          ROOT r = f32[8] custom-call(x), custom_call_target="SPMDShardToFullShape", sharding={devices=[2]<=[2]}
        }
    """

    code = "HS110"
    name = "partition-id-outside-manual"
    severity = "error"
    groups = ("validity",)

    def evaluate(self, context):
        for instr in context.instructions_to_partition():
            if instr.opcode != "partition-id":
                continue
            sh = instr.sharding
            if (sh is not None and sh.is_manual) or (sh is None and _reaches_manual(instr)):
                continue
            yield self.finding(context, instr,
                               f"%{instr.name} (partition-id) is outside a manual region of an SPMD module; "
                               f"XLA: \"PartitionId instruction is not supported for SPMD partitioning since "
                               f"the meaning is ambiguous\" (use it inside shard_map, or pass the index in)")
