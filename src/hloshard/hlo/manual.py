"""Where a manually partitioned value leaves its manual region in a way XLA's SPMD partitioner cannot carry out.

A ``{manual}`` sharding says the value is already one device's (the body of a ``shard_map``); a tiled sharding
with ``last_tile_dims={manual, ...}`` says so for a subgroup of the devices (a ``shard_map`` over some of the
mesh's axes).  XLA's GSPMD partitioner (jaxlib 0.10.2, checked in ``tests/test_manual_regions_oracle.py``)
accepts a manual value where it is read by

* instructions that carry no sharding (its propagation makes them manual too, and so on down their users),
* instructions annotated with the same manual kind: ``{manual}`` for a wholly manual value, a sharding with a
  manual subgroup for a partly manual one (also where other operands are not manual: ``add(manual,
  replicated)`` annotated ``{manual}`` partitions),
* ``SPMDShardToFullShape``, the one way out of a manual region (``shard_map``'s end), whatever its sharding,
* the entry's unannotated root tuple of one element annotated ``{manual}`` itself (a parameter passed through,
  or any annotated instruction; with two such elements it aborts),

and, for a partly manual value, by the entry's output left unannotated (XLA all-gathers within the subgroup).
Everywhere else it aborts the whole process with a C++ CHECK: ``Check failed: !IsManualLeaf() &&
!IsUnknownLeaf()`` (hlo_sharding.cc) where a wholly manual value meets an annotated non-manual sharding or the
entry's unannotated output, ``Check failed: target.IsManualSubgroup() == sharding().IsManualSubgroup()``
(spmd_partitioner.cc) where a partly manual one meets a sharding without a manual subgroup or a wholly manual one,
``Check failed: sharding.IsManualSubgroup()`` (hlo_sharding_util.cc) where a wholly manual value meets a manual
subgroup (new user 36 F5: a ``sharding={manual}`` bias parameter of an MLP step, read by the unannotated bias add:
``array.h`` ``Check failed: new_num_elements == num_elements()``).

:func:`manual_region_problems` finds those places: the one rule every command applies (through
:func:`hloshard.strategy.user_shardings.check_module_shardings`, exit 2 at the offending instruction's
file:line:col) and ``lint`` reports (HS111).  Called computations are checked on their own (their parameters
start outside any region: jax's ``shard_map`` body is a ``call`` whose parameters carry no sharding), and
``call`` / ``while`` / ``conditional`` results carry their operands' manual state as any unannotated
instruction does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .sharding import HloSharding

__all__ = ["ManualProblem", "manual_kind", "manual_like", "manual_region_problems"]

#: a wholly manual leaf (``{manual}``) and a partly manual one (a manual subgroup)
FULL, PART = "manual", "partly manual"


def manual_kind(sharding) -> str | None:
    """:data:`FULL` for ``{manual}``, :data:`PART` for a tiled sharding with a manual subgroup
    (``last_tile_dims={manual, ...}``), None for any other (non-tuple) sharding."""
    if sharding is None:
        return None
    if getattr(sharding, "is_manual", False):
        return FULL
    if "manual" in tuple(getattr(sharding, "subgroup_types", ()) or ()):
        return PART
    return None


def manual_like(source, rank: int):
    """The sharding of a rank-``rank`` value computed inside the manual region of ``source`` (a manual
    :class:`~hloshard.hlo.sharding.HloSharding`), as XLA's partitioner takes it from an unannotated reader:
    ``{manual}`` for a wholly manual ``source``; for a partly manual one the same manual subgroups (each manual
    group: the devices that hold one manual shard) with every dim unsplit and the group's devices replicated
    (``last_tile_dims={manual, replicated}``; ``{manual}`` subgroup alone when a group is one device), the form
    jax's GSPMD export writes inside a partly manual ``shard_map`` body.  Writing ``{manual}`` there instead is
    what XLA aborts on (``target.IsManualSubgroup() == sharding().IsManualSubgroup()``, fresh 37 #5).  None when
    ``source`` is not manual."""
    kind = manual_kind(source)
    if kind == FULL:
        return HloSharding.manual()
    if kind != PART:
        return None
    ta = np.asarray(source.tile_assignment)
    types = tuple(source.subgroup_types)
    lead = ta.ndim - len(types)
    m_axis = lead + types.index("manual")
    rest = [k for k in range(ta.ndim) if k != m_axis]
    groups = ta.transpose([m_axis] + rest).reshape(ta.shape[m_axis], -1)
    within = groups.shape[1]
    if within == 1:
        return HloSharding.tiled(groups.reshape([1] * rank + [groups.shape[0]]), last_tile_dims=("manual",))
    return HloSharding.tiled(groups.reshape([1] * rank + list(groups.shape)), last_tile_dims=("manual", "replicated"))


@dataclass(frozen=True)
class ManualProblem:
    """``instr`` reads a manual value (from ``source``, the manually sharded instruction it comes from) in a way
    XLA's partitioner aborts on; ``message`` says how, in words."""

    instr: object
    source: object
    message: str
    #: the changes the message offers, each one XLA's partitioner takes (:data:`END`, :data:`ANNOTATE`,
    #: :data:`UNMANUAL`; :func:`_fixes` says which apply where)
    fixes: tuple = ()


def _leaf_count(shape) -> int:
    return len(shape.leaves()) if getattr(shape, "is_tuple", False) else 1


def _own_leaves(instr) -> list:
    """The manual kind of each leaf of ``instr`` as its sharding writes it."""
    sh = instr.sharding
    n = _leaf_count(instr.shape)
    if getattr(sh, "is_tuple", False):
        elems = list(sh.tuple_elements)
        if len(elems) != n:   # the arity rule (HS106) reports that; read every leaf as the first element
            elems = elems[:1] * n
        return [manual_kind(e) for e in elems]
    return [manual_kind(sh)] * n


def _tuple_offsets(shape) -> list[tuple[int, int]]:
    """(first leaf, leaf count) of each element of a tuple shape."""
    out, at = [], 0
    for s in getattr(shape, "tuple_shapes", ()) or ():
        k = _leaf_count(s)
        out.append((at, k))
        at += k
    return out


def _strongest(states) -> tuple | None:
    """The (kind, source) that propagation gives an unannotated reader of ``states``: wholly manual over partly."""
    best = None
    for st in states:
        if st is not None and (best is None or (st[0] == FULL and best[0] != FULL)):
            best = st
    return best


def _name(instr) -> str:
    line = getattr(instr, "line", 0) or 0
    return f"{instr.name} (line {line})" if line else instr.name


def manual_region_problems(module, computations=None) -> list[ManualProblem]:
    """The places of ``module`` (every computation, or ``computations``) where a manual value is read in a way
    XLA's SPMD partitioner aborts on (module docstring), in text order; [] for a module without manual
    shardings.  Pure IR walk, no mesh: linear in the instructions."""
    comps = list(getattr(module, "computations", ()) if computations is None else computations)
    if not any(manual_kind(e) is not None for c in comps for i in c.instructions if i.sharding is not None
               for e in (i.sharding.tuple_elements if i.sharding.is_tuple else (i.sharding,))):
        return []
    entry = getattr(module, "entry", None)
    out: list[ManualProblem] = []
    for comp in comps:
        state: dict = {}   # instruction -> per leaf: (kind, source instruction) or None
        for instr in comp.post_order():
            reads = [state.get(op) for op in instr.operands]
            sh = instr.sharding
            if sh is None or getattr(sh, "is_unknown", False):
                state[instr] = _propagated(instr, reads)
                if comp is entry and instr is comp.root:
                    out.extend(_unannotated_output(instr, state[instr]))
                continue
            own = _own_leaves(instr)
            state[instr] = [(k, instr) if k is not None else None for k in own]
            if instr.custom_call_target == "SPMDShardToFullShape":
                continue   # the way out of a manual region
            problem = _annotated_reader(instr, reads, own)
            if problem is not None:
                out.append(problem)
    order = {id(i): n for n, i in enumerate(i for c in comps for i in c.instructions)}
    return sorted(out, key=lambda p: order.get(id(p.instr), 0))


def _propagated(instr, reads) -> list:
    """The manual state of an unannotated instruction's leaves, as XLA's propagation makes it."""
    n = _leaf_count(instr.shape)
    if instr.opcode == "tuple":
        leaves = [x for r in reads for x in (r or [None])]
        return leaves if len(leaves) == n else [_strongest(leaves)] * n
    if instr.opcode == "get-tuple-element" and reads and reads[0] is not None:
        index = instr.attrs.get("index")
        spans = _tuple_offsets(instr.operands[0].shape)
        if isinstance(index, int) and 0 <= index < len(spans) and len(reads[0]) == sum(k for _, k in spans):
            first, k = spans[index]
            return list(reads[0][first:first + k])
    best = _strongest(x for r in reads for x in (r or ()))
    return [best] * n


def _annotated_reader(instr, reads, own) -> ManualProblem | None:
    """A problem when annotated ``instr`` (leaf kinds ``own``) reads a manual value of another manual kind than its
    own sharding's: XLA's partitioner takes a wholly manual value only into ``{manual}``, a partly manual one only
    into a sharding with a manual subgroup (each way round it aborts)."""
    if instr.opcode == "tuple" and len(own) == sum(len(r or [None]) for r in reads):
        pairs = zip([x for r in reads for x in (r or [None])], own)   # a tuple: leaf by leaf
    else:
        best = _strongest(x for r in reads for x in (r or ()))
        pairs = [(best, k) for k in own]
    for got, kind in pairs:
        if got is None or got[0] == kind:
            continue
        src = got[1]
        check = _CHECK[PART] if got[0] == PART else _CHECK[FULL] if kind is None else "sharding.IsManualSubgroup()"
        fixes = _fixes(src, instr)
        return ManualProblem(instr, src, _words(src, got[0], f"{instr.name}, whose sharding {instr.sharding} is "
                                                             f"{_KIND_WORDS[kind]}", check, instr.name, fixes), fixes)
    return None


def _unannotated_output(root, leaves) -> list[ManualProblem]:
    """The entry's unannotated root passes a wholly manual value out: XLA gives the output a non-manual sharding.
    A root tuple of one element that is itself annotated ``{manual}`` (a parameter, or any instruction) passes it
    out as it is annotated, which XLA accepts (a tuple of two such elements it does not: measured, round 37)."""
    leaves = leaves or []
    if root.opcode == "tuple" and len(root.operands) == 1:
        own = []
        for op in root.operands:
            own += _own_leaves(op) if op.sharding is not None else [None] * _leaf_count(op.shape)
        if len(own) == len(leaves):
            leaves = [None if (x is not None and k == x[0]) else x for x, k in zip(leaves, own)]
    sources = [x[1] for x in leaves if x is not None and x[0] == FULL]
    if not sources:
        return []
    src = sources[0]
    fixes = _fixes(src, root, root_leaves=_leaf_count(root.shape))
    return [ManualProblem(root, src, _words(src, FULL, f"the entry's output {root.name}, which carries no sharding "
                                                      f"(XLA gives it a non-manual one)", _CHECK[FULL], root.name,
                                            fixes), fixes)]


#: the fixes a message may offer: end the region before the reader (``SPMDShardToFullShape``), annotate the reader
#: with the value's manual kind, give the source a sharding that is not manual
END, ANNOTATE, UNMANUAL = "end", "annotate", "unmanual"


def _fixes(src, reader, root_leaves: int | None = None) -> tuple:
    """The fixes XLA's partitioner takes for ``src``'s manual value read by ``reader`` (jaxlib 0.10.2, checked in
    ``tests/test_manual_regions_oracle.py``): a source that is an entry parameter annotated manual is no
    ``shard_map`` value (jax enters a region through ``SPMDFullToShardShape``), and ending a region that never began
    with ``SPMDShardToFullShape`` still aborts XLA (fresh 37 #6: new user 36's MLP with a ``{manual}`` bias, every
    output ended so: ``array.h`` ``new_num_elements == num_elements()``), so only its own sharding is offered; the
    entry's output (``root_leaves`` its leaf count) annotated ``{manual}`` is taken for one leaf only (a root tuple of
    five manual leaves so annotated aborts the same way)."""
    out = []
    if src.opcode != "parameter":
        out.append(END)
    if root_leaves is None or root_leaves == 1:
        out.append(ANNOTATE)
    out.append(UNMANUAL)
    return tuple(out)


_KIND_WORDS = {FULL: "wholly manual", PART: "partly manual (over a subgroup of the devices)", None: "not manual"}


def _words(src, kind: str, reader: str, check: str, fix: str, fixes: tuple = (END, ANNOTATE, UNMANUAL)) -> str:
    """The one message of a problem: what is manual, where it goes, what XLA does, what to change (``fixes``)."""
    offers = {END: f"end the region with SPMDShardToFullShape before {fix}",
              ANNOTATE: f"annotate {fix} {_WANT[kind]}",
              UNMANUAL: f"give {src.name} a sharding that is not manual"}
    said = [offers[f] for f in fixes]
    change = said[0] if len(said) == 1 else ", ".join(said[:-1]) + ", or " + said[-1]
    return (f"{_name(src)} has sharding {src.sharding}, {_KIND_WORDS[kind]}: each device already holds its own "
            f"shard, as in a shard_map body; its value reaches {reader}, without leaving the manual region through "
            f"custom-call SPMDShardToFullShape (shard_map's end): XLA's SPMD partitioner aborts on this module "
            f"(Check failed: {check}). {change[0].upper()}{change[1:]}")


_CHECK = {FULL: "!IsManualLeaf() && !IsUnknownLeaf()",
          PART: "target.IsManualSubgroup() == sharding().IsManualSubgroup()"}
_WANT = {FULL: "sharding={manual}", PART: "with a manual subgroup (last_tile_dims={manual})"}
