from __future__ import annotations

from ..collectives import collectives_of, group_size
from ..rule import Rule


def _dims(shape) -> str:
    return f"{shape.element_type}[{','.join(map(str, shape.dims))}]"


class CollectiveResultShape(Rule):
    """A collective's result shape does not follow from its operands and group size.

    Per operand i (variadic forms return one tuple element per operand): all-gather returns the
    operand with dimension d multiplied by the group size; reduce-scatter returns it with d divided
    by the group size, which must divide it; all-reduce and all-to-all return the operand's shape
    (an array-form all-to-all also needs d divisible by the group size). Element types never
    change. The group size is the size of each replica group -- times num_partitions in
    cross-replica-and-partition mode (channel_id without use_global_device_ids) -- or all
    participants for ``replica_groups={}``; when it cannot be known (num_partitions unknown), the
    factor must at least be the same for every element.

    **Bad**::

        sum {
          x = f32[] parameter(0)
          y = f32[] parameter(1)
          ROOT s = f32[] add(x, y)
        }
        ENTRY e {
          a = f32[4,8] parameter(0)
          b = f32[6] parameter(1)
          ROOT rs = (f32[2,8], f32[2]) reduce-scatter(a, b), channel_id=1, replica_groups={{0,1},{2,3}}, use_global_device_ids=true, dimensions={0}, to_apply=sum
        }

    **Good**::

        sum {
          x = f32[] parameter(0)
          y = f32[] parameter(1)
          ROOT s = f32[] add(x, y)
        }
        ENTRY e {
          a = f32[4,8] parameter(0)
          b = f32[6] parameter(1)
          ROOT rs = (f32[2,8], f32[3]) reduce-scatter(a, b), channel_id=1, replica_groups={{0,1},{2,3}}, use_global_device_ids=true, dimensions={0}, to_apply=sum
        }
    """

    code = "HS303"
    name = "collective-result-shape"
    severity = "error"
    groups = ("collectives",)

    def evaluate(self, context):
        for coll in collectives_of(context):
            instr = coll.instr
            if not instr.operands:
                continue
            if coll.results is None:
                yield self.finding(context, instr, f"%{instr.name}: {coll.result_problem}")
                continue
            yield from self._check(context, coll)

    def _check(self, context, coll):
        instr = coll.instr
        fam = coll.family
        d = coll.dimension
        g = group_size(context, coll)
        factors = {}
        for i, (o, r) in enumerate(zip(coll.operands, coll.results)):
            label = f"element {i}" if len(coll.operands) > 1 else "the result"
            if o.is_tuple or r.is_tuple:
                continue
            if o.element_type != r.element_type:
                yield self.finding(context, instr, f"%{instr.name} ({instr.opcode}): {label} is {_dims(r)} but "
                                                   f"operand {i} is {_dims(o)}: a collective keeps the "
                                                   f"element type", key=f"type{i}")
                continue
            if fam in ("all-reduce", "all-to-all") or (d is not None and not (0 <= d < o.rank)) or d is None:
                if fam in ("all-gather", "reduce-scatter"):
                    continue  # dimension problems are HS302's
                if tuple(o.dims) != tuple(r.dims):
                    yield self.finding(context, instr, f"%{instr.name} ({instr.opcode}): {label} is {_dims(r)} "
                                                       f"but must equal operand {i} {_dims(o)}", key=f"shape{i}")
                elif fam == "all-to-all" and d is not None and 0 <= d < o.rank and g and o.dims[d] % g:
                    yield self.finding(context, instr, f"%{instr.name} (all-to-all): dimension {d} of operand "
                                                       f"{i} {_dims(o)} (size {o.dims[d]}) is not divisible by "
                                                       f"the group size {g}", key=f"div{i}")
                continue
            if r.rank != o.rank or any(a != b for k, (a, b) in enumerate(zip(o.dims, r.dims)) if k != d):
                yield self.finding(context, instr, f"%{instr.name} ({instr.opcode}): {label} {_dims(r)} must "
                                                   f"equal operand {i} {_dims(o)} except in dimension {d}",
                                   key=f"shape{i}")
                continue
            od, rd = o.dims[d], r.dims[d]
            if fam == "all-gather":
                if g:
                    if rd != od * g:
                        yield self.finding(context, instr,
                                           f"%{instr.name} (all-gather): {label} has dimension {d} of size {rd} "
                                           f"but operand {i} {_dims(o)} gathered over {g} devices gives "
                                           f"{od * g}", key=f"size{i}")
                elif od and rd % od == 0:
                    factors[i] = rd // od
                else:
                    yield self.finding(context, instr,
                                       f"%{instr.name} (all-gather): {label} dimension {d} ({rd}) is not a "
                                       f"multiple of operand {i}'s ({od})", key=f"size{i}")
            else:  # reduce-scatter
                if g:
                    if od % g:
                        yield self.finding(context, instr,
                                           f"%{instr.name} (reduce-scatter): dimension {d} of operand {i} "
                                           f"{_dims(o)} (size {od}) is not divisible by the group size {g}",
                                           key=f"div{i}")
                    elif rd != od // g:
                        yield self.finding(context, instr,
                                           f"%{instr.name} (reduce-scatter): {label} has dimension {d} of size "
                                           f"{rd} but operand {i} {_dims(o)} scattered over {g} devices "
                                           f"gives {od // g}", key=f"size{i}")
                elif rd and od % rd == 0:
                    factors[i] = od // rd
                else:
                    yield self.finding(context, instr,
                                       f"%{instr.name} (reduce-scatter): operand {i} dimension {d} ({od}) is "
                                       f"not a multiple of {label}'s ({rd})", key=f"size{i}")
        if len(set(factors.values())) > 1:
            desc = ", ".join(f"element {i}: x{f}" for i, f in sorted(factors.items()))
            yield self.finding(context, instr,
                               f"%{instr.name} ({instr.opcode}): the elements imply different group sizes "
                               f"({desc}); every element is gathered/scattered over the same group",
                               key="factors")
