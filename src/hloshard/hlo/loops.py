"""Loop trip counts and execution counts: the one walker every consumer uses (cost graph, combine).

:func:`trip_count` infers how many times a ``while`` body runs:

1. XLA's ``known_trip_count`` backend config (``backend_config={"known_trip_count":{"n":"5"}}``, what
   XLA's ``WhileLoopTripCountAnnotator`` writes): exact.
2. Otherwise the induction variable: the condition's root is ``compare(x, y)`` (through ``convert`` /
   ``copy`` / ``bitcast`` / ``reshape`` and ``Sharding`` custom-calls) with one side ``get-tuple-element(parameter, k)`` -- the induction variable
   -- and the other a scalar integer constant, or a loop-invariant tuple element (passed through the
   body unchanged) whose init is a constant.  The init is the constant at tuple index ``k`` of the
   while's operand (a ``tuple`` instruction); the step is the body root's element ``k``:
   ``add(gte(param, k), c)``, ``add(c, gte(param, k))`` or ``subtract(gte(param, k), c)`` with a
   constant ``c`` (any sign).  Directions ``LT LE GT GE NE EQ`` with the variable on either side.
   The count is the number of values ``init, init+step, ...`` for which the condition holds before it
   first fails (integers): for ``i < b`` with ``step > 0`` it is ``max(0, ceil((b - init) / step))``;
   ``i <= b`` is ``i < b + 1``; ``i > b`` with ``step < 0`` is ``max(0, ceil((init - b) / -step))``;
   ``i >= b`` is ``i > b - 1``; ``i != b`` counts ``(b - init) / step`` when that is a non-negative
   integer.  Exact when every piece was found.
3. Otherwise a guess: :data:`DEFAULT_TRIP_COUNT` (100, the estimate XLA's auto-sharding uses for loops
   of unknown count, ``loop_iteration_count_estimate``), ``exact=False`` with the reason.

:func:`execution_counts` gives every computation reached from the entry through ``while`` / ``call``
/ ``conditional`` the number of times it runs per execution of the entry: the entry once, a while
body and condition the loop's count times its trip count (the condition really runs once more; the
body's count is what costs are charged with), call and conditional computations their caller's count
(every branch in full).  A computation reached from several sites runs the sum of their counts.
"""

from __future__ import annotations

import json
import re
from typing import NamedTuple

DEFAULT_TRIP_COUNT = 100

_PASS = ("convert", "copy", "bitcast", "reshape")


class TripCount(NamedTuple):
    """Iterations of a while loop: ``count``, whether it is ``exact``, and ``reason`` (how it was
    found, or why it is a guess)."""

    count: int
    exact: bool
    reason: str


def called(instr, key: str, index: int = 0):
    """The computation an attribute (``body=``, ``condition=``, ``to_apply=``) names, else the
    ``index``-th called computation (None when absent)."""
    v = instr.attrs.get(key)
    if v is not None and hasattr(v, "instructions"):
        return v
    if v is not None:
        name = str(v).strip().lstrip("%")
        try:
            return instr.parent.parent.get_computation(name)
        except Exception:  # noqa: BLE001
            pass
    comps = instr.called_computations
    return comps[index] if len(comps) > index else None


def _strip(instr):
    """Through value-preserving single-operand ops (``_PASS``, and ``Sharding`` custom-calls: a layout
    annotation, e.g. ``jax.lax.with_sharding_constraint`` or a solved module's loop-state pin)."""
    while instr is not None and len(instr.operands) == 1 and (
            instr.opcode in _PASS or instr.is_sharding_constraint):
        instr = instr.operands[0]
    return instr


def _int_constant(instr):
    """The value of a scalar integer constant (through convert/copy/broadcast of a scalar), else None."""
    instr = _strip(instr)
    if instr is not None and instr.opcode == "broadcast" and len(instr.operands) == 1:
        instr = _strip(instr.operands[0])
    if instr is None or instr.opcode != "constant":
        return None
    if instr.shape.dims and any(int(d) != 1 for d in instr.shape.dims):
        return None
    if not instr.shape.element_type.startswith(("s", "u")) or instr.shape.element_type == "token":
        return None
    try:
        v = instr.literal_value()
        return int(v.reshape(-1)[0]) if hasattr(v, "reshape") else int(v)
    except Exception:  # noqa: BLE001 - undecodable literal: unknown
        return None


def _tuple_index(instr, param):
    """k when ``instr`` is (a pass-through of) ``get-tuple-element(param, k)``, else None."""
    instr = _strip(instr)
    if instr is not None and instr.opcode == "get-tuple-element" and instr.operands and \
            instr.operands[0] is param:
        try:
            return int(str(instr.attrs.get("index")))
        except ValueError:
            return None
    return None


def invariant_elements(instr, through_pins: bool = False) -> list[int]:
    """Indices ``k`` of the loop state of the ``while`` ``instr`` that the body passes through unchanged
    (its root's element ``k`` is ``get-tuple-element(parameter, k)``): loop invariants.  StableHLO's
    while canonicalization turns them into values captured from outside the loop.

    ``through_pins``: also an element whose root value is a ``Sharding`` custom-call of that read (what
    ``solve`` writes to keep the element in the loop state, :func:`hloshard.strategy.realize.keep_invariants`):
    the canonicalization does not capture it, but the SPMD partitioner drops the custom-call, so after
    partitioning the body passes the buffer through as before (what XLA's buffer assignment and its
    loop-invariant code motion see: the memory model and the trip count want this)."""
    body = called(instr, "body", 0)
    if body is None or not body.parameters or body.root is None or body.root.opcode != "tuple":
        return []
    param = body.parameters[0]
    return [k for k, o in enumerate(body.root.operands) if _tuple_index(o, param) == k and (
        o.opcode == "get-tuple-element" or (through_pins and o.is_sharding_constraint and
                                            _pinned_read(o)))]


def _pinned_read(instr) -> bool:
    """``instr`` is a chain of ``Sharding`` custom-calls over a ``get-tuple-element``."""
    while instr.is_sharding_constraint and len(instr.operands) == 1:
        instr = instr.operands[0]
    return instr.opcode == "get-tuple-element"


def _known_trip_count(instr):
    bc = instr.attrs.get("backend_config")
    if not bc:
        return None
    text = str(bc)
    try:
        data = json.loads(text)
        n = data.get("known_trip_count", {}).get("n") if isinstance(data, dict) else None
        if n is not None:
            return int(n)
    except (ValueError, AttributeError, TypeError):
        pass
    m = re.search(r'known_trip_count"?\s*:\s*\{\s*"?n"?\s*:\s*"?(-?\d+)', text)
    return int(m.group(1)) if m else None


_FLIP = {"LT": "GT", "LE": "GE", "GT": "LT", "GE": "LE", "EQ": "EQ", "NE": "NE"}


def count_iterations(init: int, step: int, direction: str, bound: int) -> int | None:
    """Iterations of ``for (i = init; i DIRECTION bound; i += step)`` over integers; None when the loop
    never ends (or the direction is unknown)."""
    d = direction
    if d == "LE":
        d, bound = "LT", bound + 1
    elif d == "GE":
        d, bound = "GT", bound - 1
    if d == "LT":
        if init >= bound:
            return 0
        return -(-(bound - init) // step) if step > 0 else None
    if d == "GT":
        if init <= bound:
            return 0
        return -(-(init - bound) // -step) if step < 0 else None
    if d == "NE":
        if init == bound:
            return 0
        if step == 0 or (bound - init) % step != 0 or (bound - init) // step < 0:
            return None
        return (bound - init) // step
    if d == "EQ":
        return 0 if init != bound else (1 if step != 0 else None)
    return None


def trip_count(instr) -> TripCount:
    """Iterations of the ``while`` instruction ``instr`` (see the module docstring)."""
    n = _known_trip_count(instr)
    if n is not None:
        return TripCount(max(0, n), True, "known_trip_count backend config")
    cond, body = called(instr, "condition", 1), called(instr, "body", 0)
    guess = lambda why: TripCount(DEFAULT_TRIP_COUNT, False, why)  # noqa: E731
    if cond is None or body is None or not instr.operands:
        return guess("the loop has no condition or body")
    root = _strip(cond.root)
    if root is None or root.opcode != "compare" or len(root.operands) != 2:
        return guess("the condition is not a compare of the induction variable")
    direction = str(root.attrs.get("direction", "")).strip().upper()
    if direction not in _FLIP:
        return guess(f"unknown compare direction {direction!r}")
    cparam = cond.parameters[0] if cond.parameters else None
    bparam = body.parameters[0] if body.parameters else None
    init_t = _strip(instr.operands[0])
    broot = body.root

    def element(tup, k):
        return tup.operands[k] if tup is not None and tup.opcode == "tuple" and k < len(tup.operands) else None

    invariant = set(invariant_elements(instr, through_pins=True))

    def invariant_bound(side):
        """The value of a loop-invariant tuple element used as the bound, else None."""
        j = _tuple_index(side, cparam)
        if j is None or j not in invariant:
            return None
        return _int_constant(element(init_t, j))

    a, b = root.operands
    k, bound = _tuple_index(a, cparam), _int_constant(b)
    if k is None or bound is None:
        if k is not None:
            bound = invariant_bound(b)
        if bound is None:
            k2, bound2 = _tuple_index(b, cparam), _int_constant(a)
            if k2 is not None and bound2 is None:
                bound2 = invariant_bound(a)
            if k2 is None or bound2 is None:
                return guess("the condition does not compare a loop-state element with a constant")
            k, bound, direction = k2, bound2, _FLIP[direction]
    init = _int_constant(element(init_t, k))
    if init is None:
        return guess(f"the initial value of loop-state element {k} is not a constant")
    upd = _strip(element(broot, k))
    step = None
    if upd is not None and upd.opcode in ("add", "subtract") and len(upd.operands) == 2:
        x, y = upd.operands
        if _tuple_index(x, bparam) == k and _int_constant(y) is not None:
            step = _int_constant(y) * (1 if upd.opcode == "add" else -1)
        elif upd.opcode == "add" and _tuple_index(y, bparam) == k and _int_constant(x) is not None:
            step = _int_constant(x)
    if step is None:
        return guess(f"the body does not add a constant to loop-state element {k}")
    n = count_iterations(init, step, direction, bound)
    if n is None:
        return guess(f"i = {init}; i {direction} {bound}; i += {step} does not terminate")
    return TripCount(n, True, f"i = {init}; i {direction} {bound}; i += {step}")


def execution_counts(module, warnings: list | None = None) -> dict[int, float]:
    """``id(computation)`` -> executions per run of the entry (see the module docstring).  Fusion
    bodies, reducers and other computations not reached through while / call / conditional are
    absent.  When ``warnings`` is a list, one message per loop whose trip count is a guess is
    appended (naming the while instruction, its line and the reason)."""
    counts: dict[int, float] = {}
    order: list = []
    calls: dict[int, list] = {}

    def callees(comp):
        out = []
        for instr in comp.instructions:
            if instr.opcode == "while":
                tc = trip_count(instr)
                if not tc.exact and warnings is not None:
                    where = f" (line {instr.line})" if getattr(instr, "line", 0) else ""
                    warnings.append(f"while {instr.name}{where}: trip count unknown ({tc.reason}); "
                                    f"assumed {tc.count} iterations")
                for key, idx in (("body", 0), ("condition", 1)):
                    c = called(instr, key, idx)
                    if c is not None:
                        out.append((c, float(tc.count)))
            elif instr.opcode in ("call", "conditional"):
                out.extend((c, 1.0) for c in instr.called_computations)
        return out

    # topological order of the call graph from the entry (callers before callees), then accumulate
    seen: set = set()
    stack = [(module.entry, False)] if module.entry is not None else []
    post: list = []
    while stack:
        comp, done = stack.pop()
        if done:
            post.append(comp)
            continue
        if id(comp) in seen:
            continue
        seen.add(id(comp))
        calls[id(comp)] = callees(comp)
        stack.append((comp, True))
        for c, _ in reversed(calls[id(comp)]):
            if id(c) not in seen:
                stack.append((c, False))
    order = list(reversed(post))
    if module.entry is not None:
        counts[id(module.entry)] = 1.0
    for comp in order:
        w = counts.get(id(comp), 0.0)
        for c, mult in calls[id(comp)]:
            counts[id(c)] = counts.get(id(c), 0.0) + w * mult
    return counts
