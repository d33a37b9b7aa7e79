"""The HLO liveness model: a schedule, live intervals of values, and the peak of a usage profile.

One model for every consumer (the cost graph's node intervals in :mod:`hloshard.autoshard.build`,
``combine``'s before/after peak, ``solve``'s memory reports):

* **Schedule** (:func:`computation_order`, :func:`program_schedule`): a computation runs in post order
  (operands and control predecessors before users, stable with respect to text order; instructions
  the root does not reach follow in text order).  A program is the entry computation with the
  computations each ``while`` (body, then condition), ``call`` and ``conditional`` (branches in order)
  calls placed right after the calling instruction, recursively -- the order in which the cost graph
  is built.  Position = index in that list.
* **Live intervals** (:func:`live_intervals`): a value is live over the half-open interval
  ``[definition, last read + 1)`` (at least one point), where the caller says which values an
  instruction defines (allocates) and which it reads (its operands' values with aliases resolved, so
  a ``get-tuple-element`` / ``tuple`` / ``bitcast`` keeps what it forwards alive as long as it is
  used).  Parameters are live over the whole schedule ``[0, T)`` (their buffers belong to the
  caller), outputs from their definition to the end.
* **Peak** (:func:`usage_profile`, :func:`peak_usage`): the sum of the sizes of the values live at
  each point; usage only rises where an interval starts, so the starts carry every maximum.

Sizes are bytes per device (the caller chooses them: a strategy's tile bytes, or
:func:`hloshard.cost.memory.bytes_per_device` of the written sharding).  This is a model of live
buffers in program order, not XLA's buffer assignment (which reuses and schedules differently).
"""

from __future__ import annotations

from typing import Callable, Hashable, Iterable, Sequence

import numpy as np

#: opcodes whose result forwards (a part of) an operand's buffer: they allocate nothing
ALIASING_OPCODES = frozenset({"get-tuple-element", "tuple", "bitcast"})

#: opcodes whose called computations run as part of the program (placed after the caller)
CONTROL_FLOW_OPCODES = ("while", "call", "conditional")


def computation_order(comp) -> list:
    """The instructions of ``comp`` in post order, then any the post order missed, in text order."""
    order = comp.post_order()
    if len(order) == len(comp.instructions):
        return order
    seen = {id(i) for i in order}
    return order + [i for i in comp.instructions if id(i) not in seen]


def called_in_order(instr) -> list:
    """The computations a control-flow instruction runs, in schedule order (while: body, condition)."""
    if instr.opcode == "while":
        from ..hlo.loops import called

        return [c for c in (called(instr, "body", 0), called(instr, "condition", 1)) if c is not None]
    if instr.opcode in CONTROL_FLOW_OPCODES:
        return list(instr.called_computations)
    return []


def program_schedule(module) -> list:
    """Entry order with called computations placed after their caller (see the module docstring).
    A computation reached from several call sites is placed at its first one only (flatten the call
    graph first, :func:`hloshard.hlo.callgraph.flatten_call_graph`, to give each site its own)."""
    out: list = []
    placed: set = set()

    def place(comp) -> None:
        placed.add(id(comp))
        # iterative: (computation order, index) frames
        stack = [(computation_order(comp), 0)]
        while stack:
            order, i = stack[-1]
            if i == len(order):
                stack.pop()
                continue
            stack[-1] = (order, i + 1)
            instr = order[i]
            out.append(instr)
            callees = [c for c in called_in_order(instr) if id(c) not in placed]
            for c in callees:
                placed.add(id(c))
            # callees run one after another: push in reverse so the first runs first
            for c in reversed(callees):
                stack.append((computation_order(c), 0))

    if module.entry is not None:
        place(module.entry)
    return out


def live_intervals(order: Sequence, defined: Callable[[object], Iterable[Hashable]],
                   read: Callable[[object], Iterable[Hashable]],
                   live_throughout: Iterable[Hashable] = (), live_out: Iterable[Hashable] = ()) -> dict:
    """Value -> ``(lo, hi)`` half-open interval of schedule positions (see the module docstring).

    ``order``: instructions in execution order; ``defined(instr)``: the values it allocates;
    ``read(instr)``: the values it reads.  A value read before (or without) its definition starts at
    its first read.  ``live_throughout`` values (parameters) get ``(0, T)``, ``live_out`` values
    (outputs) live from their definition to ``T`` (``T = len(order)``)."""
    lo: dict = {}
    hi: dict = {}
    for t, instr in enumerate(order):
        for k in defined(instr):
            if k not in lo:
                lo[k] = t
                hi[k] = max(hi.get(k, t + 1), t + 1)
        for k in read(instr):
            if k not in lo:
                lo[k] = t
            if hi.get(k, 0) < t + 1:
                hi[k] = t + 1
    T = max(len(order), 1)
    for k in live_out:
        if k in lo:
            hi[k] = T
    for k in live_throughout:
        lo[k], hi[k] = 0, T
    return {k: (lo[k], hi[k]) for k in lo}


def usage_profile(intervals, sizes) -> tuple[np.ndarray, np.ndarray]:
    """``(times, usage)``: the sorted distinct interval starts and the total size live at each
    (``intervals``: (N, 2) half-open ``[lo, hi)``; ``sizes``: N bytes).  Empty intervals are ignored."""
    iv = np.asarray(intervals, dtype=np.int64).reshape(-1, 2)
    use = np.asarray(sizes, dtype=np.int64).reshape(-1)
    lo, hi = iv[:, 0], iv[:, 1]
    live = hi > lo
    times = np.unique(lo[live])
    if len(times) == 0:
        return times, np.zeros(0, dtype=np.int64)
    diff = np.zeros(len(times) + 1, dtype=np.int64)
    np.add.at(diff, np.searchsorted(times, lo[live]), use[live])
    np.add.at(diff, np.searchsorted(times, hi[live]), -use[live])
    return times, np.cumsum(diff)[:-1]


def peak_usage(intervals, sizes) -> tuple[int, int]:
    """``(peak bytes, first point where it is reached)``; ``(0, 0)`` when nothing is live."""
    times, usage = usage_profile(intervals, sizes)
    if len(times) == 0:
        return 0, 0
    k = int(np.argmax(usage))
    return int(usage[k]), int(times[k])


def computation_peak_bytes(comp, order: Sequence | None = None, size_of: Callable | None = None) -> int:
    """Peak bytes per device live at once in one computation, run in ``order`` (default: text order).

    Values are the non-aliasing instructions (:data:`ALIASING_OPCODES` forward their operands); the
    parameters are live throughout, the root's values from their definition to the end.  ``size_of(instr)`` defaults to
    :func:`hloshard.cost.memory.bytes_per_device` of the instruction's sharding (its written shape when
    that fails, e.g. ``{manual}``).  Called computations are not included."""
    from .memory import bytes_per_device

    order = list(comp.instructions if order is None else order)

    def size(i) -> int:
        if size_of is not None:
            return int(size_of(i))
        try:
            return int(bytes_per_device(i.shape, i.sharding))
        except (ValueError, AttributeError):
            return int(i.shape.byte_size)

    memo: dict = {}

    def values(i) -> tuple:
        """The buffers ``i``'s value consists of (aliases resolved within ``comp``)."""
        hit = memo.get(id(i))
        if hit is not None:
            return hit
        if i.opcode in ALIASING_OPCODES and i.parent is comp:
            out: list = []
            for o in i.operands:
                out.extend(values(o))
            res = tuple(dict.fromkeys(out))
        else:
            res = (i,)
        memo[id(i)] = res
        return res

    def defined(i):
        return () if i.opcode in ALIASING_OPCODES else (i,)

    def read(i):
        out: list = []
        for o in i.operands:
            if o.parent is comp:
                out.extend(values(o))
        return out

    params = [p for p in order if p.opcode == "parameter"]
    outs = values(comp.root) if comp.root is not None else ()
    iv = live_intervals(order, defined, read, params, outs)
    keys = [k for k in iv if k.opcode not in ALIASING_OPCODES]
    if not keys:
        return 0
    peak, _ = peak_usage([iv[k] for k in keys], [size(k) for k in keys])
    return peak
