"""Rematerialisation (``jax.checkpoint``) in the memory model: XLA removes the optimization barrier
before it schedules.

jax lowers a ``jax.checkpoint`` region's backward behind an ``opt-barrier`` over a tuple of the
recomputation's inputs *and the cotangent flowing into the region* (jax's ``remat`` lowering,
``prevent_cse``): as written, the recomputed forward depends on the backward having reached the
block, so a scheduler that honours the barrier recomputes each block just before its backward and
keeps one block's activations at a time.

XLA's CPU compiler does not honour it when it schedules.  Its ``OptimizationBarrierExpander`` (pass
name ``cse_barrier_expander``, ``xla/hlo/transforms/expanders/optimization_barrier_expander.h``:
"removes the opt-barrier operation which is functionally a no-op") runs in the pipeline before
layout assignment, right after the ``HloCSE`` the barrier was there to stop, followed by the
``TupleSimplifier`` that folds ``get-tuple-element(tuple(...))``.  From there on each reader of a
barrier's element reads the element's producer directly: the recomputation depends only on the saved
block input and the parameters, and the breadth-first scheduler
(:func:`hloshard.cost.liveness.breadth_first_order`) runs it as soon as those exist -- in the forward
pass.  Every block's recomputed activations then live from the forward to their block's backward, at
once.  Read in XLA's pass dumps of the new user's MLP-Mixer train step (4 blocks under
``jax.checkpoint``, ``solve``'s keep plan on 2x4; ``/work/notes/remat34``): 4 ``opt-barrier`` before
``cse_barrier_expander``, 0 after; the same 65 dots and 248 all-gathers before and after every later
pass (the later ``HloCSE`` merges no dot: the recomputation reads other all-gathers than the forward);
in the scheduled module the ``rematted_computation`` instructions of the first three blocks run
before the backward of the fourth; XLA's peak 31.6 MB where a barrier-honouring schedule gives
16.5 MB.

The rule, applied wherever the memory model schedules or reads (the one liveness model,
:mod:`hloshard.cost.liveness`, calls these functions):

* :func:`barrier_source` -- a ``get-tuple-element`` of an ``opt-barrier`` reads the barrier operand's
  element: the producer of that element when the operand is a ``tuple`` (recursively through nested
  barriers), else the operand itself.  The schedule's dependencies follow it.
* :func:`removed_barrier` -- an ``opt-barrier`` allocates nothing and reads nothing (it is not in the
  module XLA schedules): it extends no value's live range.

Not modelled: the later ``HloCSE`` merging a recomputed instruction with its forward twin where both
read the same values (no collective between them); that frees one of two equal buffers made at about
the same point, which the breadth-first schedule already places together.  Backend: the same pass runs
in XLA's GPU pipeline; the TPU compiler's pipeline is not public and is not checked here.
"""

from __future__ import annotations

BARRIER_OPCODES = frozenset({"opt-barrier", "optimization-barrier"})


def removed_barrier(instr) -> bool:
    """True for an ``opt-barrier``: XLA's ``OptimizationBarrierExpander`` removes it before scheduling
    and buffer assignment (module docstring), so it defines no buffer and reads none."""
    return instr.opcode in BARRIER_OPCODES


def _tuple_index(instr) -> int:
    index = instr.attrs.get("index")
    return int(str(index)) if index is not None else 0


def barrier_source(instr):
    """The instruction whose value ``instr`` -- a ``get-tuple-element`` of an ``opt-barrier`` -- reads
    once XLA has removed the barrier and folded its tuple (module docstring): the ``index``-th operand
    of the barrier's ``tuple`` operand, itself resolved again when it is a barrier's element; the
    barrier's operand when that is no ``tuple`` (a parameter, a ``while``'s result); ``None`` when
    ``instr`` reads no barrier.  Follows at most 64 nested barriers."""
    out = None
    for _ in range(64):
        if instr.opcode != "get-tuple-element" or not instr.operands \
                or not removed_barrier(instr.operands[0]) or not instr.operands[0].operands:
            return out
        src = instr.operands[0].operands[0]
        k = _tuple_index(instr)
        if src.opcode == "tuple" and k < len(src.operands):
            out = instr = src.operands[k]
        else:
            return src
    return out


def scheduled_dependency(instr):
    """What a reader of ``instr`` waits for in XLA's schedule: :func:`barrier_source` of ``instr`` when
    ``instr`` is a barrier's element, else ``instr`` itself."""
    src = barrier_source(instr)
    return instr if src is None else src


def through_barriers(reads, fused_reads, is_fused) -> list:
    """``reads`` (what an instruction reads, :func:`hloshard.cost.liveness.fused_reads`) with each
    barrier's element replaced by what XLA's schedule makes the reader wait for
    (:func:`scheduled_dependency`); an element whose producer gets no buffer (``is_fused``) is replaced
    by what that producer reads (``fused_reads``).  Each instruction once, in order.  ``fused_reads`` and
    ``is_fused`` are the liveness model's own (passed in: this module sits below it)."""
    out: list = []
    seen: set = set()
    stack = list(reversed(list(reads)))
    while stack:
        o = stack.pop()
        s = scheduled_dependency(o)
        if s is not o and is_fused(s):
            stack.extend(reversed(fused_reads(s)))
            continue
        if id(s) not in seen:
            seen.add(id(s))
            out.append(s)
    return out


def scheduled_reads(instr, fused_reads, is_fused) -> list:
    """What ``instr`` waits for in XLA's schedule once barriers are removed: a barrier's element
    (``get-tuple-element`` of an ``opt-barrier``) waits for its source (:func:`barrier_source`), nothing
    else; any other instruction for :func:`through_barriers` of its ``fused_reads``."""
    src = barrier_source(instr)
    if src is not None:
        return through_barriers([src], fused_reads, is_fused)
    return through_barriers(fused_reads(instr), fused_reads, is_fused)
