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
``jax.checkpoint``, ``solve``'s keep plan on 2x4; BENCHMARKS.md, round 34 remat): 4 ``opt-barrier`` before
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
* :func:`barrier_elements` -- for fusion, a value held by a barrier's tuple is read by the readers of
  the barrier's elements (XLA's fuser sees those readers once the barrier is gone).
* :func:`removed_barrier` -- an ``opt-barrier`` allocates nothing and reads nothing (it is not in the
  module XLA schedules): it extends no value's live range.

Measured (BENCHMARKS.md, round 34 remat): the Mixer's plans 0.97-1.06 of XLA's peak (0.46-0.97 before),
held-out checkpointed transformers and MLP stacks 0.86-1.04 (0.56-1.07 before).

Not modelled: the later ``HloCSE`` merging a recomputed instruction with its forward twin where both
read the same values (no collective between them); that frees one of two equal buffers made at about
the same point, which the breadth-first schedule already places together.  Backends: XLA's CPU compiler runs the pass in
``RunHloPassesThroughLayoutAssn`` (after ``HloCSE``, before ``TupleSimplifier`` and layout
assignment); XLA's GPU compiler runs it in its ``post-scheduling-passes`` pipeline, after
``ScheduleGpuModule``, and the TPU compiler in ``final_rematerialization``, after its schedulers
(:data:`REMOVED_BEFORE_SCHEDULING`): there the barrier orders the schedule and a recomputation runs
where jax put it.  The memory model follows the CPU backend unless a module is planned for the TPU
(:func:`hloshard.cost.liveness.set_fusion_backend`) or for a GPU profile (``--device h100-sxm``...:
:func:`hloshard.cost.liveness.set_barriers_kept`, the barriers kept in the schedule as on a TPU, the
buffers otherwise XLA CPU's); without ``--device`` a GPU user's remat model is priced as XLA CPU runs it
(no GPU backend here to measure).
"""

from __future__ import annotations

BARRIER_OPCODES = frozenset({"opt-barrier", "optimization-barrier"})

#: the fusion backends (:func:`hloshard.cost.liveness.set_fusion_backend`) whose compiler removes the
#: barriers before it schedules: XLA's CPU compiler (module docstring).  Not the TPU compiler: in libtpu
#: 0.0.42.1's pass dumps (``v5e:2x4``, ahead of time, a 4-layer MLP stack under ``jax.checkpoint``) the 4
#: ``opt-barrier`` are still there after ``hlo-memory-scheduler`` and ``latency-hiding-scheduler`` and go
#: only in ``final_rematerialization``'s ``cse_barrier_expander``, after the schedule is fixed: its
#: schedule keeps the recomputation behind the cotangent, as the barrier says.
REMOVED_BEFORE_SCHEDULING = frozenset({"cpu"})


def barriers_removed(backend: str) -> bool:
    """True when the compiler of ``backend`` (``"cpu"`` or ``"tpu"``, the liveness model's fusion
    backend) schedules a module whose ``opt-barrier`` instructions are already gone
    (:data:`REMOVED_BEFORE_SCHEDULING`); then :func:`scheduled_reads` and :func:`removed_barrier` apply."""
    return backend in REMOVED_BEFORE_SCHEDULING


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
        if is_fused(s):   # an element made by a producer XLA fuses into its readers
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


def barrier_elements(value, user):
    """The ``get-tuple-element`` instructions through which readers see ``value`` once XLA has removed the
    barriers (module docstring), when ``user`` is a ``tuple`` that holds ``value`` and that only
    ``opt-barrier`` instructions read: the elements of those barriers at ``value``'s positions in the
    tuple.  ``None`` when ``user`` is no such tuple (then ``user`` reads ``value`` itself).  A value whose
    only reader is a barrier's tuple is read, for XLA's fusion, by the readers of those elements: the
    cotangent a block's backward multiplies by, fused into that multiply (``tanh`` of the last block's
    output in the hand module of ``tests/test_remat_memory.py``)."""
    if user.opcode != "tuple" or not user.users or not all(removed_barrier(b) for b in user.users):
        return None
    ks = {k for k, o in enumerate(user.operands) if o is value}
    return [g for b in user.users for g in b.users
            if g.opcode == "get-tuple-element" and _tuple_index(g) in ks]
