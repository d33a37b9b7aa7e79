from __future__ import annotations

from ..collectives import collectives_of
from ..rule import Rule


class CollectiveDimensionOutOfRange(Rule):
    """The gather / scatter / split dimension of a collective is not a dimension of every operand.

    all-gather concatenates and reduce-scatter splits along ``dimensions={d}``, which must name
    exactly one dimension with ``0 <= d < rank`` of *every* operand (variadic forms share one d).
    The same holds for an all-to-all with ``dimensions={d}``. XLA's verifier checks
    ``dimension >= 0``; shape inference checks the upper bound, operand by operand.

    **Bad**::

        ENTRY e {
          a = f32[4,8] parameter(0)
          b = f32[4] parameter(1)
          ROOT ag = (f32[4,16], f32[8]) all-gather(a, b), channel_id=1, replica_groups={{0,1}}, dimensions={1}, use_global_device_ids=true
        }

    **Good**::

        ENTRY e {
          a = f32[4,8] parameter(0)
          b = f32[4] parameter(1)
          ROOT ag = (f32[8,8], f32[8]) all-gather(a, b), channel_id=1, replica_groups={{0,1}}, dimensions={0}, use_global_device_ids=true
        }
    """

    code = "HS302"
    name = "collective-dimension-out-of-range"
    severity = "error"
    groups = ("collectives",)

    def evaluate(self, context):
        for coll in collectives_of(context):
            instr = coll.instr
            if not instr.operands:
                continue
            dims = instr.dimensions
            if coll.family in ("all-gather", "reduce-scatter"):
                if dims is None or len(dims) != 1:
                    yield self.finding(context, instr, f"%{instr.name} ({instr.opcode}) needs exactly one "
                                                       f"dimension in dimensions={{...}}, got "
                                                       f"{'none' if not dims else len(dims)}")
                    continue
            elif coll.family != "all-to-all" or not dims:
                continue
            elif len(dims) != 1:
                yield self.finding(context, instr, f"%{instr.name} (all-to-all) takes one split dimension, "
                                                   f"got {len(dims)}")
                continue
            d = dims[0]
            for i, shape in enumerate(coll.operands):
                if shape.is_tuple or not (0 <= d < shape.rank):
                    what = f"rank {shape.rank}" if not shape.is_tuple else "a tuple"
                    yield self.finding(context, instr,
                                       f"%{instr.name} ({instr.opcode}): dimension {d} is out of range for "
                                       f"operand {i} %{instr.operands[i].name} ({shape}, {what})",
                                       key=str(i))
