"""Collective instructions as the HS3xx rules see them, variadic (tuple) forms included.

Shapes (``shared/reference/hlo_syntax.md`` section 8):

* ``all-gather`` / ``all-reduce`` / ``reduce-scatter`` with n operands return an n-tuple (an array for
  n = 1); element i is operand i with the ``dimensions={d}`` dim multiplied (all-gather), unchanged
  (all-reduce) or divided (reduce-scatter, which must divide) by the group size;
* ``all-gather-start`` returns ``(operands, results)`` -- ``(op, res)`` for one operand,
  ``((ops...), (results...))`` for several; ``all-reduce-start`` has the all-reduce shape;
* async sugar ``reduce-scatter-start`` / ``all-to-all-start`` return ``((operands...), result, ...)``;
* ``all-to-all`` without ``dimensions`` is the tuple form (n operands, n-tuple of the same shapes);
  with ``dimensions={d}`` exactly one operand, same result shape, dim d divisible by the group size.

Replica-group id spaces (section 5.9): no channel_id -> replica ids (cross-replica); channel_id
without use_global_device_ids -> replica ids for all-reduce / all-gather / reduce-scatter
(cross-replica-and-partition), partition ids for all-to-all / collective-permute (cross-partition);
channel_id with use_global_device_ids=true -> flattened ids ``replica * num_partitions + partition``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..hlo import replica_groups as _rg

FAMILIES = ("all-gather", "reduce-scatter", "all-reduce", "all-to-all")


@dataclass
class Collective:
    instr: object
    family: str               # one of FAMILIES
    is_start: bool
    operands: list            # operand shapes
    results: list | None      # result shape per operand (None when the result structure is wrong)
    result_problem: str | None  # why `results` is None

    @property
    def dimension(self) -> int | None:
        dims = self.instr.dimensions
        return dims[0] if dims else None


_OPCODES = frozenset(FAMILIES) | frozenset(f + "-start" for f in FAMILIES)


def collectives_of(context) -> list[Collective]:
    """:func:`classify` of every collective instruction of the module, in text order (cached on the
    context: several rules walk them)."""
    cached = context.__dict__.get("_collectives")
    if cached is None:
        cached = [classify(i) for i in context.instructions() if i.opcode in _OPCODES]
        context.__dict__["_collectives"] = cached
    return cached


def _flat(shape) -> list:
    return list(shape.tuple_shapes) if shape.is_tuple else [shape]


def classify(instr) -> Collective | None:
    """The collective view of ``instr`` (None for other opcodes)."""
    op = instr.opcode
    is_start = op.endswith("-start")
    family = op[: -len("-start")] if is_start else op
    if family not in FAMILIES:
        return None
    ops = [o.shape for o in instr.operands]
    shape = instr.shape
    n = len(ops)
    results = None
    problem = None
    if is_start and family == "all-gather":
        # (operands, results)
        if not shape.is_tuple or len(shape.tuple_shapes) != 2:
            problem = f"all-gather-start must return (operands, results), got {shape}"
        else:
            res = shape.tuple_shapes[1]
            results = [res] if n == 1 else _flat(res)
    elif is_start and family != "all-reduce":
        # async sugar: ((operands...), result, context...)
        if not shape.is_tuple or len(shape.tuple_shapes) < 2:
            problem = f"{op} must return ((operands...), result, ...), got {shape}"
        else:
            res = shape.tuple_shapes[1]
            results = [res] if n == 1 and not res.is_tuple else _flat(res)
    else:
        results = [shape] if n == 1 and not shape.is_tuple else _flat(shape)
    if results is not None and n and len(results) != n:
        problem = (f"{n} operand{'s' if n != 1 else ''} but the result {shape} has {len(results)} "
                   f"element{'s' if len(results) != 1 else ''}")
        results = None
    return Collective(instr, family, is_start, ops, results, problem)


def group_mode(instr, family: str) -> str:
    """'cross_replica' | 'cross_replica_and_partition' | 'cross_partition' | 'flattened_id'
    (:func:`hloshard.hlo.replica_groups.group_mode`, shared with ``hloshard combine``)."""
    return _rg.group_mode(instr.channel_id is not None,
                          instr.attr("use_global_device_ids") in (True, "true"), family)


def id_bound(context, mode: str) -> int | None:
    """Exclusive upper bound of the ids replica groups may name in this mode (None when unknown or
    when XLA's verifier does not check it: replica ids with replica_count 1). This is
    :func:`hloshard.hlo.replica_groups.id_bound`; ``hloshard combine`` is stricter in the one-replica
    case (it bounds replica ids by the partition count, because it prices them as mesh devices)."""
    return _rg.id_bound(mode, context.num_replicas, context.device_count)


def iota_groups_shape(instr) -> tuple[int, int] | None:
    """``(num_groups, group_size)`` when ``instr``'s replica_groups are written in the iota form
    ``[G,S]<=[...]T(...)``, else None (:attr:`ReplicaGroups.iota_shape`). Read from the attribute
    text, so nothing is expanded: an iota list names every id of ``range(G*S)`` exactly once, which
    is all the validity checks (HS304, :func:`hloshard.hlo.replica_groups.check_groups`) and the
    group size need."""
    raw = instr.attrs.get("replica_groups") if hasattr(instr, "attrs") else None
    if raw is None or getattr(raw, "form", None) != "iota":
        return None
    return raw.iota_shape


def group_size(context, coll: Collective) -> int | None:
    """Devices taking part in each group (the factor all-gather multiplies / reduce-scatter divides
    by): ``|group|`` in cross-replica, cross-partition and flattened-id modes, ``|group| *
    num_partitions`` in cross-replica-and-partition mode (every partition of the listed replicas);
    for ``replica_groups={}`` all participants of the mode. None when a count is needed that neither
    the header nor the command line states (replica_count / num_partitions; the device count the
    shardings use is not taken for it), or the groups are malformed (HS304)."""
    iota = iota_groups_shape(coll.instr)
    groups = None if iota else coll.instr.replica_groups
    mode = group_mode(coll.instr, coll.family)
    # Only counts the module states (or the command line gives) size a group: a header that says
    # nothing leaves the replica count open (a pmap module runs on N replicas), and the devices
    # the shardings happen to name are not the partition count of every collective.
    p = context.num_partitions
    r = context.scan.replica_count or (1 if p else None)
    if iota:
        k = iota[1] if iota[1] else None
        if k is None:
            return None
    elif groups:
        if not groups[0] or any(len(g) != len(groups[0]) for g in groups):
            return None
        k = len(groups[0])
    else:
        k = None
    if mode == "cross_replica":
        return k if k is not None else r
    if mode == "cross_partition":
        return k if k is not None else p
    if mode == "cross_replica_and_partition":
        k = k if k is not None else r
        return k * p if k and p else None
    return k if k is not None else (r * p if r and p else None)
