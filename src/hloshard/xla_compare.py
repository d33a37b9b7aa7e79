"""Predicted collectives beside the ones XLA's SPMD partitioner really inserts, per instruction.

``hloshard cost --xla`` and ``hloshard solve --xla`` use this module; ``cost --format json`` uses
:func:`predicted_collectives` for ``predicted_bytes_per_device`` with or without XLA.

**Predicted side** (hloshard's model, for the strategy choice of a :class:`hloshard.autoshard.CostResult`):
per instruction the collectives of its chosen strategy (``Strategy.collectives``, see
:class:`hloshard.cost.collectives.PredictedCollective`) plus the resharding steps on the edges into
it (``hloshard.cost.reshard.plan(...).steps``).  Edge resharding is attributed to the *user*: XLA's
partitioner reshards an operand while it partitions the user, and the collectives it creates then carry
the user's metadata.

**XLA side**: the module is printed with a unique ``metadata={op_name="hloshard.N"}`` on every
instruction (only in the text sent to XLA; the user's module is not changed), partitioned by
:func:`hloshard.xla_check.spmd_collectives` (GSPMD, raw ``after_spmd-partitioning`` HLO, child process),
and every collective is matched to the instruction whose tag it carries.  A collective without a known
tag goes to an instruction of its computation (a ``while`` for its body's) that predicts one of its kind, group
size and bytes not accounted for otherwise (:func:`place_untagged`, ``source`` ``"xla, untagged"``); the rest
are listed as unmatched.

**Bytes**: ring-formula bytes per device (:func:`hloshard.cost.collectives.ring_bytes`, independent of
alpha and beta), ``n`` the replica-group size: all-gather ``(n-1)/n`` x result bytes, reduce-scatter
``(n-1)/n`` x operand bytes, all-reduce ``2(n-1)/n`` x bytes, all-to-all ``(n-1)/n`` x bytes,
collective-permute the bytes sent.  A collective runs ``executions`` times: the execution count the
cost graph gives its instruction (product of the enclosing while loops' trip counts); totals are
``ring bytes x executions``.

Public API::

    predicted_collectives(result) -> dict[str, list[CollectiveRecord]]   # instruction name -> predicted
    tag_module_text(module) -> (text, {op_name: Instruction})
    tags_in_metadata(module, like=None) -> {op_name: Instruction}        # tags XLA carried through
    xla_records(xla_result, tags, module, result) -> (per-instruction dict, unmatched list)
    place_untagged(matched, unmatched, predicted, schedule) -> unmatched list     # untagged ones placed
    collectives_of(xla_result, tags, instr) -> (XLA collectives of one instruction, dynamic-slice?)
    compare_module(module, mesh, evaluation, xla=None) -> Comparison       # .to_json()

**Memory** (``Comparison.memory_json()``, ``cost --xla`` / ``solve --xla``): hloshard's predicted peak
per device and the tensors live there beside XLA's ``memory_analysis()`` (argument, output, temp,
alias) and the buffers at XLA's peak (:mod:`hloshard.xla_memory`; measured when ``compare_module``
runs XLA itself).

Raises :class:`hloshard.errors.InputError` when jax is not installed (message names the ``xla``
extra) or when XLA cannot partition the module.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from .cost.collectives import COLLECTIVE_KINDS, all_to_all_transposes, hbm_units_per_byte, ring_bytes
from .hlo.loops import execution_counts
from .hlo.parser import parse_module
from . import xla_check
from .errors import InputError
from .autoshard import reshardings_of
from .hlo import print_module
from .hlo.attributes import Raw
from .hlo.inline import inline_calls
from .strategy.ties import donors_as_aliases
from .hlo.shape import parse_shape
from .peak import peak_tensors
from .sdy_mesh import SDY_RESULT_TARGETS
from .xla_memory import XlaMemory, xla_memory

#: op_name prefix of the tags written into the text sent to XLA
TAG_PREFIX = "hloshard."


@dataclass(frozen=True)
class CollectiveRecord:
    """One collective, predicted or measured.

    ``kind``: collective opcode; ``group_size``: devices per replica group; ``nbytes``: bytes per
    device as :func:`ring_bytes` takes them (all-gather result, reduce-scatter operand, all-reduce /
    all-to-all buffer, collective-permute bytes sent); ``ring_bytes``: ring-formula bytes per device for
    one execution; ``executions``: how often it runs (loop trips); ``replica_groups``: explicit groups
    (empty for collective-permute); ``source``: ``'strategy'``, ``'reshard OPERAND'`` or ``'xla'``;
    ``shape``: XLA's result shape text (XLA side); ``op_name``/``computation``: where XLA put it;
    ``transposed_bytes``: HBM bytes per execution of the partitioner's data-moving transposes around a
    resharding all-to-all on a device-priced mesh (:func:`hloshard.cost.collectives.all_to_all_transposes`,
    each reading and writing the per-device buffer), else 0.
    """

    kind: str
    group_size: int
    nbytes: float
    ring_bytes: float
    executions: float = 1.0
    replica_groups: tuple = ()
    source: str = ""
    shape: str = ""
    op_name: str | None = None
    computation: str | None = None
    transposed_bytes: float = 0.0

    @property
    def total_bytes(self) -> float:
        """Ring bytes per device over all executions."""
        return self.ring_bytes * self.executions

    def to_json(self) -> dict[str, Any]:
        out = {"kind": self.kind, "group_size": self.group_size, "nbytes": self.nbytes,
               "ring_bytes": self.ring_bytes, "executions": self.executions,
               "bytes_per_device": self.total_bytes,
               "replica_groups": [list(g) for g in self.replica_groups], "source": self.source}
        if self.shape:
            out["shape"] = self.shape
        if self.op_name is not None:
            out["op_name"] = self.op_name
        if self.computation is not None:
            out["computation"] = self.computation
        return out


def _kinds(records) -> list[str]:
    return sorted({r.kind for r in records})


@dataclass
class InstructionComparison:
    """Predicted and XLA collectives of one instruction (bytes per device, all executions)."""

    name: str
    opcode: str
    executions: float
    predicted: list = field(default_factory=list)
    xla: list = field(default_factory=list)

    @property
    def predicted_bytes(self) -> float:
        return sum(r.total_bytes for r in self.predicted)

    @property
    def xla_bytes(self) -> float:
        return sum(r.total_bytes for r in self.xla)

    @property
    def groups_agree(self) -> bool | None:
        """Same collectives on both sides as (kind, set of replica groups), collective-permutes by kind
        only; None when neither side has a collective."""
        if not self.predicted and not self.xla:
            return None

        def key(records):
            return sorted((r.kind, () if r.kind == "collective-permute" else
                           tuple(sorted(tuple(sorted(g)) for g in r.replica_groups))) for r in records)

        return key(self.predicted) == key(self.xla)

    @property
    def kinds_agree(self) -> bool | None:
        """Same set of collective kinds on both sides; None when neither side has a collective."""
        if not self.predicted and not self.xla:
            return None
        return _kinds(self.predicted) == _kinds(self.xla)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "opcode": self.opcode, "executions": self.executions,
                "predicted_bytes_per_device": self.predicted_bytes, "xla_bytes_per_device": self.xla_bytes,
                "predicted_kinds": _kinds(self.predicted), "xla_kinds": _kinds(self.xla),
                "kinds_agree": self.kinds_agree, "groups_agree": self.groups_agree,
                "predicted_collectives": [r.to_json() for r in self.predicted],
                "xla_collectives": [r.to_json() for r in self.xla]}


@dataclass
class Comparison:
    """The per-instruction comparison of one module (bytes per device; see module docstring).

    ``instructions``: every instruction of the cost graph's schedule, in schedule order;
    ``unmatched``: XLA collectives whose op_name names no instruction of the module;
    ``xla_error``: XLA's error when it could not partition the module (then the XLA side is empty);
    ``xla_compile_error``: the partitioner ran but a later compile pass failed (figures still valid).
    """

    module: str
    num_partitions: int
    instructions: list
    unmatched: list = field(default_factory=list)
    xla_error: str | None = None
    xla_compile_error: str | None = None
    #: memory per device: hloshard's predicted peak (bytes) and the tensors live there
    #: (:func:`hloshard.peak.peak_tensors`), XLA's ``memory_analysis()`` with the buffers at its peak
    #: (:class:`hloshard.xla_memory.XlaMemory`; None when not measured)
    predicted_peak: int | None = None
    predicted_peak_tensors: list = field(default_factory=list)
    xla_memory: Any = None

    def memory_json(self) -> dict[str, Any]:
        """The memory figures: predicted peak and tensors beside XLA's argument / output / temp / alias
        and its peak buffers (bytes per device)."""
        m = self.xla_memory
        return {"predicted_peak_bytes": self.predicted_peak, "predicted_peak_tensors": self.predicted_peak_tensors,
                "xla": None if m is None else m.to_json(),
                "ratio": None if m is None or m.error or not m.total or self.predicted_peak is None
                else round(self.predicted_peak / m.total, 4)}

    @property
    def predicted_bytes(self) -> float:
        return sum(i.predicted_bytes for i in self.instructions)

    @property
    def xla_bytes(self) -> float:
        return sum(i.xla_bytes for i in self.instructions) + sum(r.total_bytes for r in self.unmatched)

    @property
    def compared(self) -> list:
        """Instructions where either side has a collective."""
        return [i for i in self.instructions if i.kinds_agree is not None]

    @property
    def kind_agreement(self) -> float | None:
        """Fraction of :attr:`compared` whose collective kinds agree, instruction by instruction (None when there
        are none).  A collective XLA makes on another instruction than the one hloshard predicts it on counts as
        two disagreements here; :attr:`collective_match` pairs collectives across the program instead."""
        rows = self.compared
        if not rows:
            return None
        return sum(1 for i in rows if i.kinds_agree) / len(rows)

    @property
    def collective_match(self) -> "CollectiveMatch":
        """The predicted and XLA collectives paired by kind, group size and ring bytes (all executions) across the
        whole program (:func:`match_collectives`): a collective XLA makes on another instruction, or without any
        instruction's tag, still pairs with the one predicted (fresh-clone check 36, nit 8a: a pre-loop all-gather
        placed on ``while.15`` by the prediction and on ``while.9`` by XLA read "kinds agree on 33% of 3" beside
        195.0 = 195.0 KiB)."""
        return match_collectives(self.instructions, self.unmatched)

    def to_json(self) -> dict[str, Any]:
        return {"module": self.module, "num_partitions": self.num_partitions,
                "predicted_bytes_per_device": self.predicted_bytes, "xla_bytes_per_device": self.xla_bytes,
                "kind_agreement": self.kind_agreement, "compared_instructions": len(self.compared),
                "collective_match": None if self.xla_error else self.collective_match.to_json(),
                "xla_error": self.xla_error, "xla_compile_error": self.xla_compile_error,
                "instructions": [i.to_json() for i in self.compared],
                "unmatched_xla_collectives": [r.to_json() for r in self.unmatched],
                "memory": self.memory_json()}


@dataclass
class CollectiveMatch:
    """Predicted and XLA collectives paired across the program (:func:`match_collectives`).

    ``predicted`` / ``xla``: how many collectives each side has; ``in_place``: pairs on one instruction;
    ``moved``: pairs whose two collectives sit on different instructions (or XLA's carries no instruction's tag);
    ``moved_rows``: the instructions whose collective kinds disagree but whose every collective is in such a pair
    (the text report's ``moved``); ``matched_bytes``: ring bytes per device (all executions) of the pairs (one
    side's, equal to the other's by construction)."""

    predicted: int = 0
    xla: int = 0
    in_place: int = 0
    moved: int = 0
    moved_rows: frozenset = frozenset()
    matched_bytes: float = 0.0
    #: per XLA collective that carries no instruction's tag (``Comparison.unmatched``, in order): the instruction
    #: whose predicted collective it pairs with, or None
    unmatched_partners: tuple = ()

    @property
    def matched(self) -> int:
        return self.in_place + self.moved

    @property
    def share(self) -> float | None:
        """The collectives of both sides that are in a pair, over all of them (None when neither has one)."""
        total = self.predicted + self.xla
        return None if total == 0 else 2.0 * self.matched / total

    def to_json(self) -> dict[str, Any]:
        return {"predicted": self.predicted, "xla": self.xla, "matched": self.matched, "in_place": self.in_place,
                "moved": self.moved, "share": self.share, "matched_bytes_per_device": self.matched_bytes,
                "moved_instructions": sorted(self.moved_rows),
                "counts": "collectives paired by kind, group size and ring bytes per device (all executions) across "
                          "the program; in_place: both on one instruction"}


def _match_key(r) -> tuple:
    """:func:`_record_key` with no group size for a collective-permute (its pairs are not groups: the prediction
    counts 1, XLA's record every partition), as :attr:`InstructionComparison.groups_agree` compares them."""
    kind, n, b = _record_key(r)
    return kind, 0 if kind == "collective-permute" else n, b


def match_collectives(rows, unmatched=()) -> CollectiveMatch:
    """Pair ``rows``' (:class:`InstructionComparison`) predicted and XLA collectives by (kind, group size -- none for a
    collective-permute --, ring bytes per device over all executions, rounded to the byte): first on each
    instruction, then what is left of each side across the whole program, ``unmatched`` XLA collectives (no
    instruction's tag) included -- one collective in one pair at most.  A row is ``moved`` when its kinds disagree
    and every collective it has on either side found its pair elsewhere (the pairs are given out in row order;
    several alike: any is the same figure)."""
    left_p: list = []   # (row name, key) not paired on their own instruction
    left_x: list = []
    in_place = 0
    matched_bytes = 0.0
    n_pred = n_xla = 0
    for row in rows:
        kp = [_match_key(r) for r in row.predicted]
        kx = [_match_key(r) for r in row.xla]
        n_pred += len(kp)
        n_xla += len(kx)
        common = Counter(kp) & Counter(kx)
        in_place += sum(common.values())
        matched_bytes += sum(k[2] * n for k, n in common.items())
        rest_p, rest_x = Counter(kp) - common, Counter(kx) - common
        left_p += [(row.name, k) for k, n in sorted(rest_p.items()) for _ in range(n)]
        left_x += [(row.name, k) for k, n in sorted(rest_x.items()) for _ in range(n)]
    for r in unmatched:
        n_xla += 1
        left_x.append((None, _match_key(r)))
    waiting: dict = {}   # key -> rows whose predicted collective of that key is still without a pair, in row order
    for name, k in left_p:
        waiting.setdefault(k, []).append(name)
    unpaired: set = set()   # rows with a collective left without a pair
    partners = []   # per unmatched XLA collective: the row whose predicted collective it pairs with, or None
    moved = 0
    for name, k in left_x:
        queue = waiting.get(k)
        partner = queue.pop(0) if queue else None
        if partner is None:
            if name is not None:
                unpaired.add(name)
        else:
            moved += 1
            matched_bytes += k[2]
        if name is None:
            partners.append(partner)
    unpaired.update(name for queue in waiting.values() for name in queue)
    moved_rows = frozenset(row.name for row in rows if row.kinds_agree is False and row.name not in unpaired
                           and any(name == row.name for name, _ in left_p + left_x))
    return CollectiveMatch(n_pred, n_xla, in_place, moved, moved_rows, float(matched_bytes), tuple(partners))


# ---------------------------------------------------------------------------------------------
# predicted side


def _step_nbytes(step: dict) -> float:
    """The ``B`` of :func:`ring_bytes` for one resharding step (``ReshardStep.to_json()`` form)."""
    kind = step["kind"]
    if kind == "all-gather":
        return float(step["output_bytes"])
    if kind == "collective-permute":
        return float(step["bytes_sent"])
    return float(step["input_bytes"])


def _step_group_size(step: dict) -> int:
    n = int(step.get("group_size") or 0)
    if n <= 0 and step.get("replica_groups"):
        n = len(step["replica_groups"][0])
    return max(n, 1)


def predicted_collective_bytes(result) -> int | None:
    """Ring bytes per device of the collectives a solve's written plan predicts (all executions): of
    ``result.written`` (the written module as ``hloshard cost`` prices it) when there is one, else of
    ``result``'s own choice; None for the coarse fallback's plan left unpriced (written with pins its graph
    never held: ``hloshard cost`` of the output gives the figure).  The ``predicted_collective_bytes_per_device``
    of ``solve``'s and ``auto_shard``'s reports."""
    written = getattr(result, "written", None)
    if written is None and getattr(result.graph, "coarse_fallback", None):
        return None
    priced = written if written is not None else result
    return round(sum(r.total_bytes for recs in predicted_collectives(priced).values() for r in recs))


def predicted_collectives(result) -> dict[str, list[CollectiveRecord]]:
    """Instruction name -> the collectives hloshard predicts for it under ``result``'s choice.

    ``result``: a :class:`hloshard.autoshard.CostResult` (or anything with ``graph`` and ``choice``).
    Strategy collectives come from ``Strategy.collectives`` (empty where a handler does not fill them:
    nothing is invented); resharding steps from ``hloshard.autoshard.reshardings_of`` (the plans of
    ``hloshard.cost.reshard.plan``), attributed to the user instruction.  ``dynamic-slice`` steps move
    nothing and are left out.  Executions: the cost graph's weight of the instruction (loop trips);
    a loop back-edge's extra weight is recovered from the edge cost over the plan cost.
    """

    graph, choice = result.graph, result.choice
    ctx, mesh = graph.ctx, graph.mesh
    out: dict[str, list[CollectiveRecord]] = {}
    for v, g in enumerate(graph.nodes):
        st = g.strategies[int(choice[v])]
        w = float(ctx.weight(g.instr))
        for c in getattr(st, "collectives", ()) or ():
            groups = tuple(tuple(x) for x in c.replica_groups)
            if not groups and c.kind != "collective-permute" and c.mesh_axes:
                groups = tuple(tuple(x) for x in mesh.replica_groups(tuple(c.mesh_axes)))
            out.setdefault(g.instr.name, []).append(CollectiveRecord(
                kind=c.kind, group_size=int(c.group_size), nbytes=float(c.nbytes), ring_bytes=float(c.ring_bytes),
                executions=w, replica_groups=groups, source="strategy"))
    by_name = {i.name: i for i in graph.schedule}
    priced = hbm_units_per_byte(graph.mesh) is not None   # a device: the all-to-alls' transposes move HBM bytes
    for user, rows in reshardings_of(graph, choice).items():
        instr = by_name.get(user)
        base = float(ctx.weight(instr)) if instr is not None else 1.0
        for row in rows:
            steps = [s for s in row["steps"] if s.get("kind") in COLLECTIVE_KINDS]
            plan_cost = sum(float(s.get("cost", 0.0)) for s in row["steps"] if "cost" in s)
            w = float(row["cost"]) / plan_cost if plan_cost > 0 else base
            for s in steps:
                n = _step_group_size(s)
                nb = _step_nbytes(s)
                moved = 0.0
                if s["kind"] == "all-to-all" and priced and len(s.get("dims", ())) == 2:
                    moved = 2.0 * float(s["input_bytes"]) * all_to_all_transposes(s["input_shape"], *s["dims"], n)[0]
                out.setdefault(user, []).append(CollectiveRecord(
                    kind=s["kind"], group_size=n, nbytes=nb, ring_bytes=ring_bytes(s["kind"], nb, n), executions=w,
                    replica_groups=tuple(tuple(x) for x in s.get("replica_groups", ())),
                    source=f"reshard {row['operand']}", transposed_bytes=moved))
    return out


# ---------------------------------------------------------------------------------------------
# XLA side


def tag_module_text(module) -> tuple[str, dict]:
    """The module's text with ``metadata={op_name="hloshard.N"}`` on every instruction (N: position in
    ``module.all_instructions()``), and the map op_name -> Instruction.  Its ``call``s are inlined first
    (:func:`hloshard.hlo.inline.inline_calls`, as every pricing of the module inlines them, and as XLA does
    before partitioning): the instructions tagged are those the pricing keeps, so a collective XLA makes
    inside an inlined callee maps back to the instruction hloshard priced (and its loop trips); the module's
    own metadata is put back before returning."""

    inline_calls(module)
    tags: dict = {}
    saved = []
    header = module.attrs
    donors = donors_as_aliases(module)   # XLA frees the donated inputs as jax.jit of the module does
    if donors is not None:
        module.attrs = donors
    try:
        for k, instr in enumerate(module.all_instructions()):
            name = f"{TAG_PREFIX}{k}"
            tags[name] = instr
            saved.append((instr, dict(instr.attrs)))
            instr.set_attr("metadata", Raw(f'{{op_name="{name}"}}'))
            if instr.custom_call_target in SDY_RESULT_TARGETS and instr.sharding is not None:
                # GSPMD's form of the same constraint (XLA's partitioner rejects xla.sdy.* custom-calls)
                instr.attrs["custom_call_target"] = Raw('"Sharding"')
                instr.attrs.pop("custom_call_has_side_effect", None)
        text = print_module(module)
    finally:
        module.attrs = header
        for instr, old in saved:
            instr.attrs.clear()
            instr.attrs.update(old)
    return text, tags


def xla_nbytes(collective, num_partitions: int) -> tuple[float, int]:
    """(``B`` for :func:`ring_bytes`, group size ``n``) of one collective of XLA's partitioned HLO.

    ``B``: result bytes per device (tuple results: the sum of the leaves), times ``n`` for a
    reduce-scatter (its operand is ``n`` times its result); ``n``: size of the first replica group, or
    every partition when ``replica_groups`` is empty."""

    shape = parse_shape(collective.shape)
    n = len(collective.replica_groups[0]) if collective.replica_groups else int(num_partitions)
    b = float(shape.byte_size)
    if collective.kind == "reduce-scatter":
        b *= n
    return b, max(n, 1)


def _record(collective, num_partitions: int, executions: float) -> CollectiveRecord:
    b, n = xla_nbytes(collective, num_partitions)
    kind = collective.kind
    rb = ring_bytes(kind, b, n) if kind in COLLECTIVE_KINDS else 0.0
    return CollectiveRecord(kind=kind, group_size=n, nbytes=b, ring_bytes=rb, executions=executions,
                            replica_groups=tuple(tuple(g) for g in collective.replica_groups), source="xla",
                            shape=collective.shape, op_name=collective.op_name, computation=collective.computation)


def xla_records(xla_result, tags: dict, module, result, num_partitions: int):
    """Match XLA's collectives to instructions by their tag.

    Returns (instruction name -> list of XLA CollectiveRecord, unmatched records).  Executions: the
    cost graph's weight of the matched instruction; an unmatched collective takes the weight of the
    instructions of the computation with the same name in ``module`` (XLA keeps computation names, adding
    ``_spmd``), else its computation's execution count in XLA's partitioned module itself
    (:func:`_xla_execution_counts`: a while body the StableHLO round trip renamed, ``region_2.6_spmd``),
    else 1.
    """
    ctx = result.graph.ctx
    comp_weight: dict = {}
    for instr in result.graph.schedule:
        comp_weight.setdefault(instr.parent.name, float(ctx.weight(instr)))
    matched: dict = {}
    unmatched = []
    xla_counts = None
    for c in xla_result.collectives:
        instr = _tagged(c.op_name, tags)
        if instr is not None:
            w = float(ctx.weight(instr)) if instr in ctx.weights else comp_weight.get(instr.parent.name, 1.0)
            matched.setdefault(instr.name, []).append(_record(c, num_partitions, w))
        else:
            comp = (c.computation or "").removesuffix("_spmd")
            w = comp_weight.get(comp)
            if w is None:
                if xla_counts is None:
                    xla_counts = _xla_execution_counts(xla_result.partitioned)
                w = xla_counts.get(c.computation or "", 1.0)
            unmatched.append(_record(c, num_partitions, w))
    return matched, unmatched


#: the ``source`` of an XLA collective that carried no instruction's tag, placed by :func:`place_untagged`
UNTAGGED = "xla, untagged"


def _record_key(r) -> tuple:
    return r.kind, int(r.group_size), round(float(r.total_bytes))


def place_untagged(matched: dict, unmatched: list, predicted: dict, schedule) -> list:
    """Give each XLA collective that names no instruction (``unmatched``: XLA made it without our tag, e.g. a
    ``while``'s loop-state resharding inside its body, or a resharding its partitioner made for a value several
    users read) to an instruction of the computation it is in that predicts a collective of its kind, group size
    and bytes (all executions) which no tagged XLA collective of that instruction accounts for -- a ``while``
    counts as an instruction of its body and condition, since hloshard prices the loop state's resharding on
    the ``while``.  XLA's computation is the module's of the same name less ``_spmd``, or, where XLA renamed it,
    those of the instructions whose tagged collectives it holds.  The first such instruction in ``schedule`` order takes it (several alike: any of them is the
    same figure), as a record whose ``source`` is :data:`UNTAGGED`, added to ``matched`` (instruction name ->
    XLA records, changed in place).  Returns the collectives no instruction accounts for: still unmatched,
    listed by ``cost --xla`` as collectives no instruction predicts.  Totals are unchanged; only where a
    collective is shown moves.  (New user 31, F11: "unmatched XLA collective: all-gather ... in
    region_19.38_spmd" beside totals that agreed to the byte: the loop's own all-gather, priced on its
    ``while``.)"""
    if not unmatched:
        return unmatched
    by_comp: dict = {}
    by_name: dict = {}
    for instr in schedule:
        by_name.setdefault(instr.name, instr)
        by_comp.setdefault(instr.parent.name, []).append(instr)
        if instr.opcode == "while":
            for c in instr.called_computations:
                by_comp.setdefault(c.name, []).append(instr)
    # XLA's computation -> the module's: its own name less ``_spmd``, and the computations of the instructions whose
    # tagged collectives XLA put there (the StableHLO round trip renames while bodies: ``region_19.38_spmd``)
    ours: dict = {}
    for name, recs in matched.items():
        instr = by_name.get(name)
        for r in recs:
            if instr is not None and r.computation:
                ours.setdefault(r.computation, set()).add(instr.parent.name)
    open_keys: dict = {}   # instruction name -> predicted keys no XLA record of it accounts for yet

    def open_of(name: str) -> list:
        if name not in open_keys:
            left = [_record_key(r) for r in predicted.get(name, ())]
            for r in matched.get(name, ()):
                k = _record_key(r)
                if k in left:
                    left.remove(k)
            open_keys[name] = left
        return open_keys[name]

    rest = []
    for r in unmatched:
        comps = [(r.computation or "").removesuffix("_spmd")] + sorted(ours.get(r.computation, ()))
        k = _record_key(r)
        owner = next((i for c in comps for i in by_comp.get(c, ()) if k in open_of(i.name)), None)
        if owner is None:
            rest.append(r)
            continue
        open_keys[owner.name].remove(k)
        matched.setdefault(owner.name, []).append(replace(r, source=UNTAGGED))
    return rest


def _xla_execution_counts(text: str | None) -> dict:
    """Computation name -> how often it runs in XLA's partitioned module ``text``
    (:func:`hloshard.hlo.loops.execution_counts`: each while body's trips from its condition, the StableHLO
    round trip having dropped ``known_trip_count``); ``{}`` when the text does not parse or a loop's count
    would be a guess."""
    if not text:
        return {}
    try:
        module = parse_module(text, "<xla partitioned>")
        guessed: list = []
        counts = execution_counts(module, guessed)
    except Exception:  # noqa: BLE001 - a text our parser does not read: unmatched collectives count once
        return {}
    if guessed:
        return {}
    return {c.name: float(counts.get(id(c), 1.0)) for c in module.computations}


def tags_in_metadata(module, like: dict | None = None) -> dict:
    """op_name tag -> instruction, read back from the metadata of a module that XLA produced from a
    tagged text (e.g. GSPMD's propagated module: its instructions keep the tags, while the round trip
    through StableHLO may rename the instructions themselves).  Several instructions can carry one tag
    (a scatter's region parameters carry the scatter's); with ``like`` (the tags of the original
    module) the first one with the original's opcode wins, else the first in text order."""
    out: dict = {}
    for instr in module.all_instructions():
        name = instr.op_name
        if not name:
            continue
        parts = [p for p in name.split("/") if p.startswith(TAG_PREFIX)]
        if not parts:
            continue
        tag = parts[-1]
        old = out.get(tag)
        if old is None:
            out[tag] = instr
        elif like is not None and tag in like and old.opcode != like[tag].opcode \
                and instr.opcode == like[tag].opcode:
            out[tag] = instr
    return out


def collectives_of(xla_result, tags: dict, instr) -> tuple[list, bool]:
    """The collectives XLA created for ``instr`` (``XlaCollective`` list, matched by :func:`_tagged`, so
    also under a composed ``op_name``) and whether it dynamic-slices data for it."""
    cols = [c for c in xla_result.collectives if _tagged(c.op_name, tags) is instr]
    ds = any(_tagged(o, tags) is instr for _, o in xla_result.dynamic_slices)
    return cols, ds


def xla_ring_bytes(collective, num_partitions: int) -> float:
    """Ring-formula bytes per device of one collective of XLA's partitioned HLO (:func:`xla_nbytes`,
    :func:`hloshard.cost.collectives.ring_bytes`); 0 for a kind without a ring formula."""
    b, n = xla_nbytes(collective, num_partitions)
    kind = collective.kind.replace("-start", "")
    return ring_bytes(kind, b, n) if kind in COLLECTIVE_KINDS else 0.0


def _tagged(op_name: str | None, tags: dict):
    """The instruction an XLA op_name names: XLA's call inliner prefixes the caller's op_name
    (``hloshard.52/hloshard.19``), so the innermost known tag wins; None when there is none."""
    if not op_name:
        return None
    for part in reversed(op_name.split("/")):
        instr = tags.get(part)
        if instr is not None:
            return instr
    return None


def run_xla(texts: list[str], num_partitions: int, propagated: bool = False, timeout: float = 900.0,
            crash_as_error: bool = False) -> list:
    """:func:`hloshard.xla_check.spmd_collectives` after checking that jax is importable.
    Raises InputError naming the ``xla`` extra when it is not."""

    xla_check.require_jax()
    return xla_check.spmd_collectives(texts, num_partitions, timeout=timeout, propagated=propagated,
                                      crash_as_error=crash_as_error)


def compare_module(module, mesh, evaluation, xla=None, tagged=None, timeout: float = 900.0) -> Comparison:
    """Predicted vs XLA collectives of ``module`` on ``mesh``.

    ``evaluation``: the :class:`hloshard.autoshard.CostResult` of the module (``evaluate_module``);
    ``xla``: optionally ``(XlaResult, tags)`` from an earlier batched run of :func:`tag_module_text`
    texts (the benchmark partitions many modules in one child); without it the module is tagged and
    partitioned here.  The module is partitioned as it is: instructions without a sharding get XLA's
    own propagation there, while the prediction uses the sharding ``cost`` chose for them.
    ``tagged``: :func:`tag_module_text`'s ``(text, tags)`` of the module taken before (``solve --xla`` tags the
    GSPMD shardings before it adds Shardy's and writes its files); ``timeout``: seconds for both XLA children
    together -- the partitioning first, the memory analysis in what it leaves (one that runs out is given as
    ``XlaMemory.error``, the collectives kept).
    Raises InputError when jax is missing, the child process fails as a whole, or the partitioning runs past
    ``timeout`` ("XLA check timed out after N s"; the child is stopped)."""
    mem = None
    if xla is None:
        began = time.monotonic()
        text, tags = tagged if tagged is not None else tag_module_text(module)
        res = run_xla([text], mesh.num_devices, timeout=timeout)[0]
        left = float(timeout) - (time.monotonic() - began)
        try:
            if left < 1.0:
                raise InputError(f"XLA memory analysis not started: {timeout:.0f} s were spent")
            mem = xla_memory([text], mesh.num_devices, timeout=left)[0]
        except InputError as exc:
            if "timed out" not in str(exc) and "not started" not in str(exc):   # (run_jax_child's time-out words)
                raise
            mem = XlaMemory(error=str(exc))
    else:
        res, tags = xla
    predicted = predicted_collectives(evaluation)
    if res.error:
        matched, unmatched = {}, []
    else:
        matched, unmatched = xla_records(res, tags, module, evaluation, mesh.num_devices)
        unmatched = place_untagged(matched, unmatched, predicted, evaluation.graph.schedule)
    ctx = evaluation.graph.ctx
    rows = []
    for instr in evaluation.graph.schedule:
        rows.append(InstructionComparison(instr.name, instr.opcode, float(ctx.weight(instr)),
                                          predicted.get(instr.name, []), matched.get(instr.name, [])))
    in_schedule = {i.name for i in evaluation.graph.schedule}
    for name in sorted(set(matched) - in_schedule):  # e.g. an instruction of a fused computation
        recs = matched[name]
        opcode = next((i.opcode for i in tags.values() if i.name == name), "?")
        rows.append(InstructionComparison(name, opcode, recs[0].executions, [], recs))

    ev = evaluation.evaluation
    return Comparison(module.name, mesh.num_devices, rows, unmatched, res.error, res.compile_error,
                      predicted_peak=int(ev.peak_memory),
                      predicted_peak_tensors=peak_tensors(evaluation.graph, evaluation.choice, ev.peak_time, 5),
                      xla_memory=mem)
