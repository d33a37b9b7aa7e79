"""Combine small collectives into variadic ones (``hloshard combine``).

FSDP-style programs all-gather every layer's weights and reduce-scatter every layer's gradients, one
collective per tensor; each pays the collective's latency (alpha). Since openxla/xla PR 5740
(``../shared/seeds/003_52935072611a13a9.txt``) all-gather and reduce-scatter, like all-reduce, take N
operands and return an N-tuple, so several small tensors can move in one collective (the idea behind
DDP's ``bucket_cap_mb``). :func:`combine_module` rewrites a module that way:

* **Which collectives combine**: same computation, same opcode (``all-gather``, ``reduce-scatter``,
  ``all-reduce``; synchronous forms only: async ``-start``/``-done`` pairs are already scheduled and
  are left alone), same replica groups (compared as expanded lists), same ``dimensions``, same
  channel mode (``channel_id`` present or not, ``use_global_device_ids``), for reductions a
  structurally identical reduction computation (names ignored), equal remaining attributes
  (``constrain_layout``, ``frontend_attributes``, ``backend_config`` ...), all or none annotated
  with a sharding, and no control dependencies. Already variadic collectives are flattened in.
* **Buckets**: in program (post) order, each key keeps one open bucket; a collective joins it while the
  bucket's bytes stay within ``bucket_bytes`` and it does not depend on the bucket. Bytes are the ones
  the cost model charges (all-gather: gathered result bytes; reduce-scatter and all-reduce: operand
  bytes), per device.
* **Never combine dependent collectives**, directly or through any path, *including paths created by
  other combinations*: merging a bucket into one node contracts the graph, and two buckets can be
  mutually dependent even when no two members of one bucket are (a1 -> b2 and b1 -> a2). Each
  instruction's set of buckets it depends on is kept as a bitset; the check follows bucket-to-bucket
  dependencies transitively, so the contracted graph stays acyclic by construction.
* **Rewrite**: the variadic op takes the members' operands in member order; each single-operand member
  becomes a ``get-tuple-element`` of it carrying the member's name, shape, sharding and metadata (so
  users need no change); users of a variadic member's GTEs are re-indexed, any other user of its tuple
  gets a ``tuple`` of GTEs. The combined op's sharding is the tuple of the members' (leaf) shardings.
  Its channel_id is the first member's.
* **Memory**: combining is not free: a combined all-gather makes every member's result live at once.
  The report gives each changed computation's peak live bytes per device before and after
  (:func:`peak_live_bytes`: the liveness model of :mod:`hloshard.cost.liveness`, in text order).
* **Order**: the computation is re-sorted topologically with a stable priority (an instruction's old
  position; a combined op takes its first member's position), so the combined op goes at its first
  member's place, or right after its last operand when that one comes later, always before its first
  user; everything else keeps its relative order as far as the dependencies allow.

**Costs** are ``hloshard cost``'s: every collective is priced by
:func:`hloshard.strategy.collectives.existing_collective_cost` (the alpha-beta formulas of
:mod:`hloshard.cost.collectives`; replica groups mapped to mesh axes by
:func:`~hloshard.strategy.collectives.group_axes`, irregular groups over every axis any group varies
along; cross-replica ops, i.e. without ``channel_id``, free when the module has at most one replica) on
the shapes as written, times its computation's execution count (:func:`execution_counts`: while bodies
run trip-count times). A variadic collective pays one latency over the summed bytes, so combining k
collectives saves about (k-1) alpha per execution, and ``hloshard cost`` before minus after equals the
report's ``latency_saved`` (for collectives inside ``{manual}`` regions or already replicated; a
cross-replica all-reduce of a sharded value outside manual regions is charged by ``hloshard cost`` on
its operand's layout, which combine does not know). Invalid collectives of the selected kinds (zero
operands, a dimension out of range, result shapes or element types that do not match the operands,
element types that differ from a typed reduction's) raise :class:`~hloshard.errors.InputError` naming
each one; the module is not touched.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from .cost.combiner import COMBINABLE_KINDS   # the collective opcodes XLA's combiners merge
from .errors import InputError, UsageError
from .hlo.ir import Computation, Instruction, Module
from .hlo import replica_groups as _rg
from .hlo.shape import Shape
from .cost.liveness import computation_peak_bytes
from .hlo.collective_checks import collective_problems as _problems
from .hlo.loops import execution_counts as counts
from .hlo.sharding import HloSharding
from .strategy.collectives import existing_collective_cost
from .strategy.registry import BuildContext
from .units import format_bytes

DEFAULT_BUCKET_BYTES = 25 * 2**20
#: version of the ``--format json`` report (:data:`REPORT_SCHEMA`)
SCHEMA_VERSION = 1

_KEY_EXCLUDED_ATTRS = frozenset({"channel_id", "replica_groups", "dimensions", "use_global_device_ids",
                                 "to_apply", "sharding", "metadata"})


# --------------------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------------------

@dataclass
class CombinedGroup:
    """One variadic collective made from ``members`` (their names, in operand order)."""

    name: str
    kind: str
    computation: str
    members: list[str]
    operands: int
    bytes: int                         # per device, as charged by the cost model
    #: sum of the members' costs, times their computation's execution count (cost units; None without a
    #: mesh or in a computation ``hloshard cost`` does not charge)
    cost_before: float | None = None
    cost_after: float | None = None    # the combined collective's cost, same terms

    def to_json(self) -> dict:
        return {"name": self.name, "kind": self.kind, "computation": self.computation,
                "members": list(self.members), "operands": self.operands, "bytes": self.bytes,
                "cost_before": self.cost_before, "cost_after": self.cost_after}


@dataclass
class CombineReport:
    """What :func:`combine_module` did. Costs are in cost units per execution of the entry computation,
    as ``hloshard cost`` charges them (None without a mesh)."""

    module: str
    kinds: list[str]
    bucket_bytes: int
    mesh: str | None
    collectives_before: int            # collectives of the selected kinds before
    collectives_after: int
    groups: list[CombinedGroup] = field(default_factory=list)
    cost_before: float | None = None   # all collectives of the selected kinds, before
    cost_after: float | None = None
    #: collectives of the selected kinds in computations ``hloshard cost`` does not charge (not reached
    #: from the entry through while / call / conditional, e.g. dead or async-wrapped): left out of the totals
    uncosted: int = 0
    #: per computation that changed: (peak live bytes per device before, after); see peak_live_bytes
    peak_bytes: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def merged(self) -> int:
        """How many original collectives were folded into variadic ones."""
        return sum(len(g.members) for g in self.groups)

    @property
    def latency_saved(self) -> float | None:
        """Cost before minus cost after (cost units), None without a mesh."""
        if self.cost_before is None or self.cost_after is None:
            return None
        return round(self.cost_before - self.cost_after, 6)

    def to_json(self) -> dict:
        """The ``--format json`` document (validates against :data:`REPORT_SCHEMA`)."""
        return {"schema_version": SCHEMA_VERSION, "module": self.module, "kinds": list(self.kinds),
                "bucket_bytes": self.bucket_bytes,
                "mesh": self.mesh, "collectives_before": self.collectives_before,
                "collectives_after": self.collectives_after, "merged": self.merged,
                "combined": len(self.groups), "cost_before": self.cost_before, "cost_after": self.cost_after,
                "latency_saved": self.latency_saved, "uncosted": self.uncosted,
                "peak_bytes": {c: {"before": b, "after": a} for c, (b, a) in sorted(self.peak_bytes.items())},
                "groups": [g.to_json() for g in self.groups]}

    def to_text(self) -> str:
        kinds = ", ".join(self.kinds)
        if not self.collectives_before:
            lines = [f"module {self.module}: nothing to combine: it has no {_either(self.kinds)} collective"]
        else:
            lines = [f"module {self.module}: {self.collectives_before} collectives of the kinds combined ({kinds}) -> "
                     f"{self.collectives_after} after combining (bucket {format_bytes(self.bucket_bytes)}): "
                     f"merged {self.merged} into {len(self.groups)} variadic collectives"]
        if self.latency_saved is None:
            lines.append("latency saved: unknown (no device mesh: pass --mesh or set num_partitions)")
        else:
            lines.append(f"cost on mesh {self.mesh}: {_fmt(self.cost_before)} -> {_fmt(self.cost_after)} "
                         f"cost units; latency saved {_fmt(self.latency_saved)}")
            if self.uncosted:
                lines.append(f"({self.uncosted} collectives are in computations the entry never runs "
                             "through while / call / conditional; left out of the totals)")
        for comp, (b, a) in sorted(self.peak_bytes.items()):
            lines.append(f"peak live bytes per device in {comp}: {format_bytes(b)} -> {format_bytes(a)}")
        for g in self.groups:
            cost = "" if g.cost_before is None else f"  cost {_fmt(g.cost_before)} -> {_fmt(g.cost_after)}"
            lines.append(f"  {g.name} = {g.kind} of {len(g.members)} ({g.operands} operands, "
                         f"{format_bytes(g.bytes)}) in {g.computation}{cost}: {', '.join(g.members)}")
        return "\n".join(lines) + "\n"


def _either(kinds) -> str:
    """``all-gather``, ``all-gather or all-reduce``, ``all-gather, reduce-scatter or all-reduce``."""
    kinds = list(kinds)
    return kinds[0] if len(kinds) == 1 else f"{', '.join(kinds[:-1])} or {kinds[-1]}"


_COST = {"type": ["number", "null"]}

#: JSON schema (draft 2020-12) of :meth:`CombineReport.to_json`. Costs are cost units of the
#: alpha-beta model (null without a mesh); bytes are per device.
REPORT_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "hloshard combine report",
    "type": "object",
    "additionalProperties": False,
    "required": ["schema_version", "module", "kinds", "bucket_bytes", "mesh", "collectives_before",
                 "collectives_after", "merged", "combined", "cost_before", "cost_after", "latency_saved",
                 "uncosted", "peak_bytes", "groups"],
    "properties": {
        "schema_version": {"const": SCHEMA_VERSION},
        "module": {"type": "string"},
        "kinds": {"type": "array", "items": {"enum": list(COMBINABLE_KINDS)}, "minItems": 1, "uniqueItems": True},
        "bucket_bytes": {"type": "integer", "minimum": 0},
        "mesh": {"type": ["string", "null"]},
        "collectives_before": {"type": "integer", "minimum": 0},
        "collectives_after": {"type": "integer", "minimum": 0},
        "merged": {"type": "integer", "minimum": 0},
        "combined": {"type": "integer", "minimum": 0},
        "cost_before": _COST, "cost_after": _COST, "latency_saved": _COST,
        "uncosted": {"type": "integer", "minimum": 0},
        "peak_bytes": {"type": "object", "additionalProperties": {
            "type": "object", "additionalProperties": False, "required": ["before", "after"],
            "properties": {"before": {"type": "integer", "minimum": 0}, "after": {"type": "integer", "minimum": 0}}}},
        "groups": {"type": "array", "items": {
            "type": "object", "additionalProperties": False,
            "required": ["name", "kind", "computation", "members", "operands", "bytes", "cost_before", "cost_after"],
            "properties": {
                "name": {"type": "string"}, "kind": {"enum": list(COMBINABLE_KINDS)},
                "computation": {"type": "string"},
                "members": {"type": "array", "items": {"type": "string"}, "minItems": 2},
                "operands": {"type": "integer", "minimum": 2}, "bytes": {"type": "integer", "minimum": 0},
                "cost_before": _COST, "cost_after": _COST}}},
    },
}


def _fmt(x: float | None) -> str:
    if x is None:
        return "?"
    return f"{x:,.3f}".rstrip("0").rstrip(".") if x != int(x) else f"{int(x):,}"   # as the other commands


# --------------------------------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------------------------------

def _leaves(shape: Shape) -> list[Shape]:
    return list(shape.tuple_shapes) if shape.is_tuple else [shape]


def _group_size(instr: Instruction, num_devices: int | None) -> int | None:
    """Participants per group. Empty ``replica_groups`` mean everyone in the collective's mode: all
    replicas (no channel_id; known only when the module states replica_count), all partitions
    (channel_id; ``num_devices``), or replicas x partitions (``use_global_device_ids``)."""
    groups = instr.replica_groups
    if groups:
        return len(groups[0])
    module = instr.parent.parent if instr.parent is not None else None
    replicas = module.num_replicas if module is not None else None
    if instr.channel_id is None:
        return replicas
    if instr.attrs.get("use_global_device_ids"):
        return None if num_devices is None else num_devices * (replicas or 1)
    return num_devices


def replica_id_bound(instr: Instruction, num_devices: int | None = None) -> int | None:
    """Exclusive upper bound of the ids ``instr``'s replica groups may name; None when unknown.

    The mode and bound are :func:`hloshard.hlo.replica_groups.group_mode` /
    :func:`~hloshard.hlo.replica_groups.id_bound` (XLA's verifier, shared with lint's HS304): replica
    ids below ``replica_count``, partition ids (all-to-all with ``channel_id``) below the partition
    count, flattened ``replica * num_partitions + partition`` ids (``use_global_device_ids=true``)
    below their product. The partition count is the module's ``num_partitions``, else ``num_devices``
    (the mesh size).

    One deliberate difference from XLA (and lint): with one replica, XLA does not check replica ids,
    but combine prices every group member as a mesh device, and an id with no device behind it cannot
    be priced; so combine bounds them by the partition count instead of refusing nothing.
    """
    module = instr.parent.parent if instr.parent is not None else None
    r = (module.num_replicas if module is not None else None) or 1
    p = (module.num_partitions if module is not None else None) or num_devices
    family = instr.opcode[: -len("-start")] if instr.opcode.endswith("-start") else instr.opcode
    mode = _rg.group_mode(instr.channel_id is not None,
                          instr.attrs.get("use_global_device_ids") in (True, "true"), family)
    bound = _rg.id_bound(mode, r, p)
    if bound is None and r == 1 and mode in ("cross_replica", "cross_replica_and_partition"):
        return p   # stricter than XLA: see the docstring
    return bound


def replica_group_problems(replica_groups, bound: int | None = None, limit: int = 8) -> list[str]:
    """What is wrong with replica groups; ``[]`` when valid. The check itself is
    :func:`hloshard.hlo.replica_groups.replica_group_problems` (shared with lint's HS304 rule).

    ``replica_groups`` is a :class:`~hloshard.hlo.attributes.ReplicaGroups` or a list of lists of ids;
    ``[]`` (``replica_groups={}``: one group of everyone) is valid. Problems: an empty group, groups of
    different sizes, an id named twice, an id ``< 0`` or ``>= bound`` (``bound`` None: only negative
    ids are flagged); at most ``limit`` ids are listed per problem. The iota form ``[G,S]<=[...]``
    names ``range(G*S)`` exactly once each, so it is checked from ``G`` and ``S`` alone, in O(1),
    without looking at the expanded groups.
    """
    return _rg.replica_group_problems(replica_groups, bound, limit)


def collective_problems(instr: Instruction, num_devices: int | None = None) -> list[str]:
    """What is wrong with a (possibly variadic) all-gather / reduce-scatter / all-reduce; ``[]`` if valid.

    The validator is :func:`hloshard.hlo.collective_checks.collective_problems` (shared with lint's
    HS301-HS305 and ``verify_module``): operand count, replica groups (against combine's
    :func:`replica_id_bound`, stricter than XLA's with one replica), ``dimensions``, per-operand
    result shape and element type, the reduction computation's types. ``num_devices`` stands for
    the partition count when the module does not state ``num_partitions``; without either, group
    sizes are only checked for consistency. The verifier's coverage rule (groups naming every
    participant) is ``verify_module``'s, not combine's.
    """

    module = instr.parent.parent if instr.parent is not None else None
    p = (module.num_partitions if module is not None else None) or num_devices
    r = module.num_replicas if module is not None else None
    return [pr.message for pr in _problems(instr, p, r, id_bound=replica_id_bound(instr, num_devices),
                                           coverage=False)]


def validate_collectives(module: Module, kinds: Sequence[str] = COMBINABLE_KINDS,
                         num_devices: int | None = None) -> None:
    """Raise :class:`InputError` listing every invalid collective of ``kinds`` (with its line)."""
    problems = []
    for instr in module.all_instructions():
        if instr.opcode in kinds:
            for p in collective_problems(instr, num_devices):
                loc = f"line {instr.line}: " if instr.line else ""
                problems.append(f"{loc}%{instr.name}: {p}")
    if problems:
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise InputError("refusing to combine: invalid collectives\n  " + "\n  ".join(problems[:20]) + more)


# --------------------------------------------------------------------------------------------------
# grouping keys and bytes
# --------------------------------------------------------------------------------------------------

def _computation_signature(comp: Computation, _cache: dict) -> tuple:
    """Structural identity of a reduction computation (instruction names ignored)."""
    sig = _cache.get(id(comp))
    if sig is not None:
        return sig
    order = comp.post_order()
    index = {id(i): k for k, i in enumerate(order)}
    rows = []
    for i in order:
        attrs = tuple((k, str(v)) for k, v in i.attrs.items() if k not in ("metadata", "sharding"))
        rows.append((i.opcode, i.shape.to_string(layout=False), tuple(index.get(id(o), -1) for o in i.operands),
                     i.parameter_number, i.literal, attrs, i is comp.root))
    sig = tuple(rows)
    _cache[id(comp)] = sig
    return sig


def _key(instr: Instruction, sig_cache: dict) -> tuple:
    groups = instr.replica_groups
    rg = None if groups is None else tuple(tuple(g) for g in groups)
    red = instr.attrs.get("to_apply")
    red_sig = _computation_signature(red, sig_cache) if isinstance(red, Computation) else None
    rest = tuple((k, str(v)) for k, v in instr.attrs.items() if k not in _KEY_EXCLUDED_ATTRS)
    return (instr.opcode, rg, tuple(instr.dimensions or ()), instr.channel_id is not None,
            bool(instr.attrs.get("use_global_device_ids", False)), red_sig, rest, instr.sharding is not None)


def collective_bytes(instr: Instruction) -> int:
    """Per-device bytes the cost model charges: all-gather -> result bytes (gathered), reduce-scatter and
    all-reduce -> operand bytes. Sums the leaves of variadic collectives."""
    if instr.opcode == "all-gather":
        return int(instr.shape.byte_size)
    return int(sum(o.shape.byte_size for o in instr.operands))


# --------------------------------------------------------------------------------------------------
# costs
# --------------------------------------------------------------------------------------------------

def execution_counts(module: Module) -> dict[int, float]:
    """``id(computation)`` -> how many times it runs per execution of the entry computation, the weights
    ``hloshard cost`` applies: :func:`hloshard.hlo.loops.execution_counts` (while bodies and conditions
    run their loop's trip count times, call and conditional computations their caller's count, a
    computation reached from several sites the sum). Computations not reached that way (fusion bodies,
    reducers, ``async-start`` wrapped computations, dead code) are absent: their collectives are charged
    at the caller (``async-start``) or not at all."""

    return counts(module)


class _Pricing:
    """Collective costs exactly as ``hloshard cost`` charges them: one call of
    :func:`hloshard.strategy.collectives.existing_collective_cost` per collective (replica groups to
    mesh axes by :func:`~hloshard.strategy.collectives.group_axes`, irregular groups over every axis
    they vary along, cross-replica ops free with at most one replica, variadic ops one alpha over the
    summed bytes), on the shapes as written (per device inside ``{manual}`` regions; full bytes
    outside, which is what the replicated strategy of an explicit collective charges), times the
    execution count of the computation (:func:`execution_counts`). Cost units."""

    def __init__(self, module: Module, mesh):
        self.ctx = BuildContext(mesh)
        self.weights = execution_counts(module)

    def weight(self, comp: Computation | None) -> float:
        """Execution count of ``comp`` (0.0 when ``hloshard cost`` never charges it)."""
        return self.weights.get(id(comp), 0.0) if comp is not None else 0.0

    def cost(self, instr: Instruction, weight: float | None = None) -> float:
        """Weighted cost of ``instr`` (cost units); ``weight`` defaults to its computation's."""

        w = self.weight(instr.parent) if weight is None else weight
        if w == 0.0:
            return 0.0
        return existing_collective_cost(instr, self.ctx) * w


# --------------------------------------------------------------------------------------------------
# bucketing
# --------------------------------------------------------------------------------------------------

def _bits(x: int) -> Iterable[int]:
    while x:
        low = x & -x
        yield low.bit_length() - 1
        x ^= low


class _Buckets:
    """Bucket assignment in program order with a contraction-aware dependency check."""

    def __init__(self):
        self.members: list[list[Instruction]] = []
        self.bytes: list[int] = []
        self.deps: list[int] = []      # per bucket: bitset of buckets its members' operands depend on

    def depends_on(self, dep_bits: int, target: int) -> bool:
        """Does something with direct bucket dependencies ``dep_bits`` reach bucket ``target``?"""
        tbit = 1 << target
        if dep_bits & tbit:
            return True
        seen = dep_bits
        frontier = dep_bits
        while frontier:
            nxt = 0
            for b in _bits(frontier):
                nxt |= self.deps[b]
            nxt &= ~seen
            if nxt & tbit:
                return True
            seen |= nxt
            frontier = nxt
        return False


def _plan_computation(comp: Computation, kinds: frozenset, bucket_bytes: int, sig_cache: dict
                      ) -> tuple[list[list[Instruction]], list[Instruction]]:
    """Buckets (lists of >= 2 members) for one computation, and its post order."""
    order = comp.post_order()
    control_involved: set[int] = set()
    for i in order:
        cps = i.attrs.get("control-predecessors")
        if cps:
            control_involved.add(id(i))
            control_involved.update(id(p) for p in cps)
    bk = _Buckets()
    bucket_of: dict[int, int] = {}
    dep: dict[int, int] = {}
    open_bucket: dict[tuple, int] = {}
    for v in order:
        d = 0
        preds = v.operands
        cps = v.attrs.get("control-predecessors")
        if cps:
            preds = list(preds) + list(cps)
        for o in preds:
            d |= dep.get(id(o), 0)
            b = bucket_of.get(id(o))
            if b is not None:
                d |= 1 << b
        dep[id(v)] = d
        if v.opcode not in kinds or id(v) in control_involved:
            continue
        key = _key(v, sig_cache)
        nbytes = collective_bytes(v)
        b = open_bucket.get(key)
        if (b is not None and bucket_bytes > 0 and bk.bytes[b] + nbytes <= bucket_bytes
                and not bk.depends_on(d, b)):
            bk.members[b].append(v)
            bk.bytes[b] += nbytes
            bk.deps[b] |= d
            bucket_of[id(v)] = b
            continue
        b = len(bk.members)
        bk.members.append([v])
        bk.bytes.append(nbytes)
        bk.deps.append(d)
        bucket_of[id(v)] = b
        open_bucket[key] = b
    return [m for m in bk.members if len(m) > 1], order


# --------------------------------------------------------------------------------------------------
# rewriting
# --------------------------------------------------------------------------------------------------

def _leaf_shardings(instr: Instruction) -> list:
    s = instr.sharding
    n = len(_leaves(instr.shape))
    if s is None:
        return [None] * n
    if instr.shape.is_tuple:
        elems = list(s.tuple_elements) if s.is_tuple else [s] * n
        return elems
    return [s]


def _combine_bucket(comp: Computation, members: list[Instruction], prio: dict[int, float],
                    retired: list[Instruction]) -> Instruction:
    """Add the variadic collective of ``members`` and rewire their users to it (see the module
    docstring). The members lose every user and are renamed out of the way (their names go to the GTEs
    / tuples that replace them); they are appended to ``retired`` for one
    :meth:`~hloshard.hlo.ir.Computation.remove_instructions` per computation."""

    first = members[0]
    operands: list[Instruction] = []
    leaves: list[Shape] = []
    shardings: list = []
    for m in members:
        operands.extend(m.operands)
        leaves.extend(_leaves(m.shape))
        shardings.extend(_leaf_shardings(m))
    attrs = {k: v for k, v in first.attrs.items() if k not in ("metadata",)}
    if first.sharding is not None:
        attrs["sharding"] = HloSharding.tuple(shardings)
    combined = Instruction(comp.unique_name(f"{first.opcode}-combined"), first.opcode, Shape.tuple(leaves),
                           operands, attrs)
    comp.add_instruction(combined)
    prio[id(combined)] = min(prio[id(m)] for m in members)
    offset = 0
    for m in members:
        n = len(_leaves(m.shape))
        mprio = prio[id(m)]
        if not m.shape.is_tuple:
            gte = _gte(comp, combined, offset, m.shape, m.sharding, m.attrs.get("metadata"), m.name)
            prio[id(gte)] = mprio
            comp.replace_all_uses(m, gte)
            _retire(comp, m, gte, retired)
        else:
            msh = _leaf_shardings(m)
            for user in list(m.users):
                if user.opcode == "get-tuple-element":
                    idx = user.attrs["index"]
                    user.set_operands([combined])
                    user.attrs["index"] = offset + idx
            if m.users or m.is_root:
                parts = []
                for k in range(n):
                    g = _gte(comp, combined, offset + k, m.shape.tuple_shapes[k], msh[k], None,
                             f"{m.name}.element{k}")
                    prio[id(g)] = mprio
                    parts.append(g)
                tup = Instruction(comp.unique_name(m.name + ".tuple"), "tuple", m.shape, parts,
                                  {"sharding": m.sharding} if m.sharding is not None else None)
                comp.add_instruction(tup)
                prio[id(tup)] = mprio
                comp.replace_all_uses(m, tup)
                _retire(comp, m, tup, retired)
            else:
                _retire(comp, m, None, retired)
        offset += n
    return combined


def _gte(comp, tup, index, shape, sharding, metadata, name) -> Instruction:
    attrs = {"index": index}
    if sharding is not None:
        attrs["sharding"] = sharding
    if metadata is not None:
        attrs["metadata"] = metadata
    g = Instruction(comp.unique_name(name + ".gte"), "get-tuple-element", shape, [tup], attrs)
    return comp.add_instruction(g)


def _retire(comp: Computation, old: Instruction, heir: Instruction | None, retired: list[Instruction]) -> None:
    """``old`` (now user-less) hands its name to ``heir`` and waits in ``retired`` for removal."""
    retired.append(old)
    if heir is not None:
        name = old.name
        comp.rename(old, comp.unique_name(name + ".retired"))
        comp.rename(heir, name)


def _reorder(comp: Computation, prio: dict[int, float]) -> None:
    """Stable topological order: among ready instructions, the smallest priority first."""
    live = comp.instructions
    indeg: dict[int, int] = {}
    succ: dict[int, list[Instruction]] = {id(i): [] for i in live}
    for i in live:
        preds = {id(o): o for o in i.operands if o.parent is comp}
        for p in i.attrs.get("control-predecessors", ()) or ():
            if p.parent is comp:
                preds[id(p)] = p
        indeg[id(i)] = len(preds)
        for p in preds.values():
            succ[id(p)].append(i)
    heap = []
    seq = {id(i): k for k, i in enumerate(live)}
    for i in live:
        if indeg[id(i)] == 0:
            heapq.heappush(heap, (prio.get(id(i), seq[id(i)]), seq[id(i)], i))
    out: list[Instruction] = []
    while heap:
        _, _, i = heapq.heappop(heap)
        out.append(i)
        for s in succ[id(i)]:
            indeg[id(s)] -= 1
            if indeg[id(s)] == 0:
                heapq.heappush(heap, (prio.get(id(s), seq[id(s)]), seq[id(s)], s))
    if len(out) != len(live):  # pragma: no cover - the bucketing keeps the graph acyclic
        raise RuntimeError(f"combine produced a cycle in {comp.name}")
    comp.instructions = out      # a permutation of the same instructions (names, users unchanged)


def peak_live_bytes(comp: Computation) -> int:
    """Peak bytes per device live at once in ``comp``, executing its instructions in text order: the one
    HLO liveness model, :func:`hloshard.cost.liveness.computation_peak_bytes` (parameters live
    throughout, a buffer from its definition to its last use, the root's to the end;
    ``get-tuple-element`` / ``tuple`` / ``bitcast`` allocate nothing and keep what they forward alive;
    bytes per device from the sharding, the written shape for ``{manual}`` / unannotated values).
    Called computations are not included."""

    return computation_peak_bytes(comp)


# --------------------------------------------------------------------------------------------------
# entry point
# --------------------------------------------------------------------------------------------------

def parse_kinds(text: str | Sequence[str] | None) -> list[str]:
    """``'all-gather,reduce-scatter'`` -> list of kinds; None -> all three. Raises UsageError."""
    if text is None:
        return list(COMBINABLE_KINDS)
    items = text.split(",") if isinstance(text, str) else list(text)
    kinds = []
    for k in (x.strip() for x in items):
        if not k:
            continue
        if k not in COMBINABLE_KINDS:
            raise UsageError(f"--kinds: unknown collective {k!r}; expected some of {', '.join(COMBINABLE_KINDS)}")
        if k not in kinds:
            kinds.append(k)
    if not kinds:
        raise UsageError("--kinds is empty")
    return kinds


def combine_module(module: Module, kinds: Sequence[str] = COMBINABLE_KINDS,
                   bucket_bytes: int = DEFAULT_BUCKET_BYTES, mesh=None) -> CombineReport:
    """Combine the collectives of ``kinds`` in every computation of ``module`` (mutated in place).

    ``bucket_bytes``: the most bytes per device one combined collective may move (see
    :func:`collective_bytes`; 0 disables combining); ``mesh``: a :class:`~hloshard.mesh.DeviceMesh` for the cost report
    (None: no costs). Raises InputError (invalid collectives, module untouched) or UsageError
    (unknown kind, negative bucket).
    """
    kinds = parse_kinds(list(kinds))
    if bucket_bytes < 0:
        raise UsageError(f"--bucket-bytes must be >= 0, got {bucket_bytes}")
    num_devices = mesh.num_devices if mesh is not None else module.num_partitions
    validate_collectives(module, kinds, num_devices)
    kindset = frozenset(kinds)
    pricing = _Pricing(module, mesh) if mesh is not None else None
    report = CombineReport(module=module.name, kinds=list(kinds), bucket_bytes=int(bucket_bytes),
                           mesh=str(mesh) if mesh is not None else None, collectives_before=0,
                           collectives_after=0)

    def total_cost() -> tuple[float | None, int]:
        if pricing is None:
            return None, 0
        tot, unc = 0.0, 0
        for comp in module.computations:
            w = pricing.weight(comp)
            for i in comp.instructions:
                if i.opcode in kindset:
                    if w == 0.0:
                        unc += 1
                    else:
                        tot += pricing.cost(i, w)
        return round(tot, 6), unc

    report.collectives_before = sum(1 for i in module.all_instructions() if i.opcode in kindset)
    report.cost_before, report.uncosted = total_cost()
    sig_cache: dict = {}
    for comp in list(module.computations):
        buckets, order = _plan_computation(comp, kindset, bucket_bytes, sig_cache)
        if not buckets:
            continue
        peak_before = peak_live_bytes(comp)
        prio = {id(i): float(k) for k, i in enumerate(order)}
        retired: list[Instruction] = []
        w = pricing.weight(comp) if pricing is not None else 0.0
        for members in buckets:
            nbytes = sum(collective_bytes(m) for m in members)
            before = after = None
            if pricing is not None and w != 0.0:
                before = round(sum(pricing.cost(m, w) for m in members), 6)
            names = [m.name for m in members]
            combined = _combine_bucket(comp, members, prio, retired)
            if before is not None:
                after = round(pricing.cost(combined, w), 6)
            report.groups.append(CombinedGroup(name=combined.name, kind=combined.opcode, computation=comp.name,
                                               members=names, operands=len(combined.operands), bytes=nbytes,
                                               cost_before=before, cost_after=after))
        comp.remove_instructions(retired)
        _reorder(comp, prio)
        report.peak_bytes[comp.name] = (peak_before, peak_live_bytes(comp))
    report.collectives_after = sum(1 for i in module.all_instructions() if i.opcode in kindset)
    report.cost_after, _ = total_cost()
    return report
