"""The collective validator: what is wrong with an all-gather / reduce-scatter / all-reduce / all-to-all
(and their ``-start`` forms), variadic (tuple) forms included. One implementation, used by lint
(HS301-HS305, each rule reports the problems of its code), by :func:`hloshard.hlo.verify.verify_module`
(``solve`` / ``cost`` refuse the first problem) and by ``hloshard combine``
(:func:`hloshard.combine.collective_problems`).

Shapes (``shared/reference/hlo_syntax.md`` section 8):

* ``all-gather`` / ``all-reduce`` / ``reduce-scatter`` with n operands return an n-tuple (an array for
  n = 1); element i is operand i with the ``dimensions={d}`` dim multiplied (all-gather), unchanged
  (all-reduce) or divided (reduce-scatter, which must divide) by the group size;
* ``all-gather-start`` returns ``(operands, results)`` -- ``(op, res)`` for one operand,
  ``((ops...), (results...))`` for several; ``all-reduce-start`` has the all-reduce shape;
* async sugar ``reduce-scatter-start`` / ``all-to-all-start`` return ``((operands...), result, ...)``;
* ``all-to-all`` without ``dimensions`` is the tuple form (n operands, n-tuple of the same shapes);
  with ``dimensions={d}`` exactly one operand, same result shape, dim d divisible by the group size.

Replica groups (:mod:`hloshard.hlo.replica_groups`): the group mode decides the id space; besides
the structural checks, XLA's verifier requires the groups to cover every participant of the mode
("In flattened_id mode, replica groups should contain 8 flattened IDs, but found 4"): replicas
(cross-replica and cross-replica-and-partition modes, checked when replica_count > 1), partitions
(cross-partition), replicas x partitions (flattened ids); and ``use_global_device_ids=true`` needs
explicit groups (jaxlib 0.10.2: "if `use_global_device_ids` is set, the replica groups cannot be
empty"). Those are the ``coverage`` problems.

Each problem carries the lint code of the rule that reports it and a key (for lint's
suppression-stable identity).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import replica_groups as _rg

__all__ = ["FAMILIES", "Collective", "CollectiveProblem", "classify", "group_mode", "group_size",
           "collective_problems", "COLLECTIVE_OPCODES"]

FAMILIES = ("all-gather", "reduce-scatter", "all-reduce", "all-to-all")
COLLECTIVE_OPCODES = frozenset(FAMILIES) | frozenset(f + "-start" for f in FAMILIES)


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


@dataclass
class CollectiveProblem:
    """One thing wrong with a collective: ``code`` (HS301 operand count, HS302 dimension, HS303 result
    shape, HS304 replica groups, HS305 reduction types), ``key`` and the sentence. Replica-group
    problems also carry the structured :class:`~hloshard.hlo.replica_groups.GroupProblem` (``group``),
    the mode and the id bound, so a caller may word them its own way."""

    instr: object
    code: str
    key: str
    message: str
    group: object | None = None
    mode: str | None = None
    bound: int | None = None
    extra: dict = field(default_factory=dict)


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
        if not shape.is_tuple or len(shape.tuple_shapes) != 2:
            problem = f"all-gather-start must return (operands, results), got {shape}"
        else:
            res = shape.tuple_shapes[1]
            results = [res] if n == 1 else _flat(res)
    elif is_start and family != "all-reduce":
        if not shape.is_tuple or len(shape.tuple_shapes) < 2:
            problem = f"{op} must return ((operands...), result, ...), got {shape}"
        else:
            res = shape.tuple_shapes[1]
            results = [res] if n == 1 and not res.is_tuple else _flat(res)
    else:
        results = [shape] if n == 1 and not shape.is_tuple else _flat(shape)
    if results is not None and n and len(results) != n:
        problem = (f"{op} has {n} operands but its result {shape} has {len(results)} "
                   f"element{'s' if len(results) != 1 else ''}")
        results = None
    return Collective(instr, family, is_start, ops, results, problem)


def group_mode(instr, family: str) -> str:
    """XLA's group mode of ``instr`` (:func:`hloshard.hlo.replica_groups.group_mode`)."""
    return _rg.group_mode(instr.channel_id is not None,
                          instr.attr("use_global_device_ids") in (True, "true"), family)


def _iota_shape(instr):
    raw = instr.attrs.get("replica_groups")
    return raw.iota_shape if getattr(raw, "form", None) == "iota" else None


def group_size(coll: Collective, num_partitions: int | None, replica_count: int | None) -> int | None:
    """Devices taking part in each group (the factor all-gather multiplies / reduce-scatter divides
    by): ``|group|`` in cross-replica, cross-partition and flattened-id modes, ``|group| *
    num_partitions`` in cross-replica-and-partition mode; for ``replica_groups={}`` all participants
    of the mode. ``replica_count`` / ``num_partitions``: as the module (or the command line) states
    them, None when unstated. An unstated partition count leaves the size unknown (None); an unstated
    replica count is 1 when a channel_id makes it an SPMD collective (XLA's default) and unknown
    without one (a pmap-style module runs on as many replicas as it is compiled for)."""
    iota = _iota_shape(coll.instr)
    mode = group_mode(coll.instr, coll.family)
    r, p = replica_count, num_partitions
    if iota:
        k = iota[1] or None
        if k is None:
            return None
    else:
        groups = coll.instr.replica_groups
        if groups:
            if not groups[0] or any(len(g) != len(groups[0]) for g in groups):
                return None
            k = len(groups[0])
        else:
            k = None
    if mode == "cross_replica":   # no channel_id: a pmap-style program, replicas unknown unless stated
        return k if k is not None else r
    if mode == "cross_partition":
        return k if k is not None else p
    if mode == "cross_replica_and_partition":   # an SPMD program: one replica unless stated
        k = k if k is not None else (r or 1)
        return k * p if p else None
    return k if k is not None else ((r or 1) * p if p else None)


def _dims(shape) -> str:
    return f"{shape.element_type}[{','.join(map(str, shape.dims))}]"


def collective_problems(instr, num_partitions: int | None = None, replica_count: int | None = None, *,
                        id_partitions: int | None = None, id_bound: int | None = None,
                        coverage: bool = True) -> list[CollectiveProblem]:
    """Everything wrong with collective ``instr`` (``[]`` for a valid one or another opcode).

    ``num_partitions`` / ``replica_count``: the counts the module states (None: unknown; group sizes
    that need them are then only checked for consistency). ``id_partitions``: the partition count
    that bounds ids (default ``num_partitions``; lint passes the device count its shardings use).
    ``id_bound``: an explicit exclusive id bound (combine's stricter one), else XLA's
    (:func:`hloshard.hlo.replica_groups.id_bound`). ``coverage``: also XLA's verifier rule that the
    groups name every participant of the mode (needs the counts)."""
    coll = classify(instr)
    if coll is None:
        return []
    out: list[CollectiveProblem] = []
    name = f"%{instr.name} ({instr.opcode})"

    def add(code, key, msg, **kw):
        out.append(CollectiveProblem(instr, code, key, msg, **kw))

    n = len(instr.operands)
    # HS301: operand count
    if n == 0:
        add("HS301", "", f"{name} has no operands: a collective needs at least one")
        return out
    dims = instr.dimensions
    if coll.family == "all-to-all" and dims and n != 1:
        add("HS301", "", f"%{instr.name}: an all-to-all with dimensions={{...}} takes exactly one operand, got {n} "
                         f"(drop dimensions for the tuple form)")
    # HS304: replica groups (structure, then coverage)
    groups_ok = _group_checks(instr, coll, name, num_partitions, replica_count, id_partitions, id_bound,
                              coverage, add)
    # HS302: dimensions
    dim_ok = True
    if coll.family in ("all-gather", "reduce-scatter"):
        if dims is None or len(dims) != 1:
            add("HS302", "", f"{name} needs exactly one dimension in dimensions={{...}}, got "
                             f"{'none' if not dims else len(dims)}")
            dim_ok = False
    elif coll.family == "all-to-all" and dims and len(dims) != 1:
        add("HS302", "", f"%{instr.name} (all-to-all) takes one split dimension, got {len(dims)}")
        dim_ok = False
    if dim_ok and dims and coll.family in ("all-gather", "reduce-scatter", "all-to-all"):
        d = dims[0]
        for i, shape in enumerate(coll.operands):
            if shape.is_tuple or not (0 <= d < shape.rank):
                what = f"rank {shape.rank}" if not shape.is_tuple else "a tuple"
                add("HS302", str(i), f"{name}: dimensions={{{d}}} is out of range for operand {i} "
                                     f"%{instr.operands[i].name} ({shape}, {what})")
    # HS303: result shapes
    if coll.results is None:
        add("HS303", "", f"%{instr.name}: {coll.result_problem}")
    else:
        g = group_size(coll, num_partitions, replica_count) if groups_ok else None
        _shape_checks(instr, coll, g, add)
    # HS305: reduction types
    if coll.family in ("all-reduce", "reduce-scatter"):
        _reduction_checks(instr, coll, add)
    return out


def _group_checks(instr, coll, name, num_partitions, replica_count, id_partitions, id_bound, coverage,
                  add) -> bool:
    """Replica-group problems (HS304); True when the groups give a usable group size."""
    iota = _iota_shape(instr)
    groups = None if iota is not None else instr.replica_groups
    mode = group_mode(instr, coll.family)
    if iota is not None or groups:
        bound = id_bound if id_bound is not None else _rg.id_bound(
            mode, replica_count or 1, id_partitions if id_partitions is not None else num_partitions)
        found = _rg.check_groups(groups, bound, iota_shape=iota, limit=8)
        for p in found:
            text = instr.attrs.get("replica_groups").text if iota is not None else None
            add("HS304", p.kind, f"{instr.opcode}: {_rg.describe(p, bound, text)}", group=p, mode=mode, bound=bound)
        if found:
            return False
    if not coverage:
        return True
    if mode == "flattened_id" and iota is None and not groups:
        add("HS304", "coverage", f"{name}: use_global_device_ids=true needs explicit replica groups "
                                 f"(XLA: if `use_global_device_ids` is set, the replica groups cannot be empty)")
        return True
    r = replica_count or 1
    want = {"cross_replica": (r, "replicas"), "cross_replica_and_partition": (r, "replicas"),
            "cross_partition": (num_partitions, "partitions"),
            "flattened_id": (r * num_partitions if num_partitions else None, "flattened IDs")}[mode]
    total = iota[0] * iota[1] if iota is not None else sum(len(g) for g in groups) if groups else None
    if total is not None and want[0] is not None and want[0] != 1 and total != want[0]:
        add("HS304", "coverage", f"{name}: In {mode} mode, replica groups should contain {want[0]} {want[1]}, "
                                 f"but found {total} (XLA's verifier: the groups must name every participant)")
    return True


def _shape_checks(instr, coll, g, add) -> None:
    fam = coll.family
    d = coll.dimension
    name = f"%{instr.name} ({instr.opcode})"
    factors = {}
    for i, (o, r) in enumerate(zip(coll.operands, coll.results)):
        label = f"element {i}" if len(coll.operands) > 1 else "the result"
        if o.is_tuple or r.is_tuple:
            continue
        if o.element_type != r.element_type:
            add("HS303", f"type{i}", f"{name}: {label} is {_dims(r)} but operand {i} is {_dims(o)}: a collective "
                                     f"keeps the element type")
            continue
        if fam in ("all-reduce", "all-to-all") or d is None or not (0 <= d < o.rank):
            if fam in ("all-gather", "reduce-scatter"):
                continue  # dimension problems are HS302's
            if tuple(o.dims) != tuple(r.dims):
                add("HS303", f"shape{i}", f"{name}: {label} is {_dims(r)} but must equal operand {i} {_dims(o)}")
            elif fam == "all-to-all" and d is not None and 0 <= d < o.rank and g and o.dims[d] % g:
                add("HS303", f"div{i}", f"%{instr.name} (all-to-all): dimension {d} of operand {i} {_dims(o)} (size "
                                        f"{o.dims[d]}) is not divisible by the group size {g}")
            continue
        if r.rank != o.rank or any(a != b for k, (a, b) in enumerate(zip(o.dims, r.dims)) if k != d):
            add("HS303", f"shape{i}", f"{name}: {label} {_dims(r)} must equal operand {i} {_dims(o)} except in "
                                      f"dimension {d}")
            continue
        od, rd = o.dims[d], r.dims[d]
        if fam == "all-gather":
            if g:
                if rd != od * g:
                    add("HS303", f"size{i}", f"{name}: all-gather result dimension {d} is {rd}, expected {od * g} "
                                             f"(operand {i} {_dims(o)} gathered over {g} devices)")
            elif od and rd % od == 0:
                factors[i] = rd // od
            else:
                add("HS303", f"size{i}", f"{name}: all-gather result dimension {d} ({rd}) of {label} is not a "
                                         f"multiple of operand {i}'s ({od})")
        else:  # reduce-scatter
            if g:
                if od % g:
                    add("HS303", f"div{i}", f"{name}: reduce-scatter result dimension {d}: operand {i} {_dims(o)} "
                                            f"(size {od}) is not divisible by the group size {g}")
                elif rd != od // g:
                    add("HS303", f"size{i}", f"{name}: reduce-scatter result dimension {d} is {rd}, expected "
                                             f"{od // g} (operand {i} {_dims(o)} scattered over {g} devices)")
            elif rd and od % rd == 0:
                factors[i] = od // rd
            else:
                add("HS303", f"size{i}", f"{name}: reduce-scatter result dimension {d} ({rd}) of {label}: operand "
                                         f"{i}'s ({od}) is not a multiple of it")
    if len(set(factors.values())) > 1:
        desc = ", ".join(f"element {i}: x{f}" for i, f in sorted(factors.items()))
        add("HS303", "factors", f"{name}: the elements imply different group sizes ({desc}); every element is "
                                f"gathered/scattered over the same group")


def _reduction_checks(instr, coll, add) -> None:
    comp = instr.attr("to_apply")
    name = f"%{instr.name} ({instr.opcode})"
    if comp is None or not hasattr(comp, "parameters"):
        add("HS305", "signature", f"{name} has no reduction computation (to_apply)")
        return
    params = comp.parameters
    root = comp.root
    ptypes = [p.shape.element_type for p in params if not p.shape.is_tuple]
    if len(params) != 2 or len(ptypes) != 2 or any(p.shape.rank for p in params) or root.shape.is_tuple:
        sig = ", ".join(str(p.shape) for p in params)
        add("HS305", "signature", f"%{instr.name}: the reduction computation %{comp.name} must take two scalars of "
                                  f"one type and return one, it takes ({sig}) -> {root.shape}")
        return
    t = ptypes[0]
    if ptypes[1] != t or root.shape.element_type != t:
        add("HS305", "signature", f"%{instr.name}: the reduction computation %{comp.name} mixes types "
                                  f"({ptypes[0]}, {ptypes[1]}) -> {root.shape.element_type}")
        return
    for i, shape in enumerate(coll.operands):
        if not shape.is_tuple and shape.element_type != t:
            add("HS305", str(i), f"{name}: operand {i} %{instr.operands[i].name} is {shape.element_type} but the "
                                 f"reduction computation %{comp.name} is typed {t}")
