"""The HLO liveness model: a schedule, live intervals of values, and the peak of a usage profile.

One model for every consumer (the cost graph's node intervals in :mod:`hloshard.autoshard.build`,
``combine``'s before/after peak, ``solve``'s memory reports):

* **Schedule** (:func:`breadth_first_order`, :func:`program_schedule`): a computation runs in the
  order XLA's CPU backend gives it, breadth first over the fused computation (XLA's
  ``BFSMemoryScheduler``, the CPU compiler's scheduler by default:
  ``xla_cpu_enable_concurrency_optimized_scheduler``): an instruction runs as soon as everything it
  reads has run, first come first served, so a training step runs its whole forward pass (and every
  backward instruction that needs only parameters) before the backward reaches the activations, and
  peaks with every saved activation live.  A program is the entry computation with the computations
  each ``while`` (body, then condition), ``call`` and ``conditional`` (branches in order) calls placed
  right after the calling instruction, recursively.  Position = index in that list.  The cost graph
  numbers its nodes in the same program order with each computation in post order
  (:func:`computation_order`: operands and control predecessors before users, stable with respect to
  text order), ``program_schedule(module, breadth_first=False)``.  On XLA CPU an ``opt-barrier`` (a
  ``jax.checkpoint`` region's backward) is gone before the scheduler runs (``OptimizationBarrierExpander``):
  its elements are read, scheduled and fused as the values they hold, so a recomputation runs in the
  forward pass (:mod:`hloshard.cost.remat`; the TPU compiler keeps the barrier through its schedulers).
* **Live intervals** (:func:`live_intervals`): a value is live over the half-open interval
  ``[definition, last read + 1)`` (at least one point), where the caller says which values an
  instruction defines (allocates) and which it reads (its operands' values with aliases resolved, so
  a ``get-tuple-element`` / ``tuple`` / ``bitcast`` keeps what it forwards alive as long as it is
  used).  Parameters are live over the whole schedule ``[0, T)`` (their buffers belong to the
  caller), outputs from their definition to the end.
* **Peak** (:func:`usage_profile`, :func:`peak_usage`): the sum of the sizes of the values live at
  each point; usage only rises where an interval starts, so the starts carry every maximum.

Sizes are bytes per device (the caller chooses them: a strategy's tile bytes, or
:func:`hloshard.cost.memory.bytes_per_device` of the written sharding).

**Buffers XLA allocates** (:func:`buffer_intervals`, the one memory model: the cost graph's node
intervals, ``peak_memory``, the minimum-memory bound and combine all use it).  It follows what XLA's
**CPU backend** does after SPMD partitioning, measured against ``compiled.memory_analysis()``
(argument + output + temp - alias per device; ``hloshard.xla_memory``).  A TPU / GPU compiler fuses
more (and pads to tiles); that is not modelled here.

* *Fusion* (XLA's ``InstructionFusion`` with the CPU backend's ``CpuInstructionFusion::ShouldFuse``
  and the loop fuser's fusible set): a producer in :data:`FUSIBLE_PRODUCERS` (elementwise ops,
  ``convert``, ``compare``, ``broadcast``, ``iota``, ``reshape``, ``transpose``, ``slice``,
  ``dynamic-slice``, ``pad``, ``reverse``, ``concatenate``, identity custom calls) whose users all
  are :data:`FUSING_CONSUMERS` (the same set plus ``reduce`` and ``dynamic-update-slice``: a loop or
  reduction fusion) is computed inside each consumer and never gets a buffer; an expensive one
  (:data:`EXPENSIVE`, XLA's ``IsExpensive``) with several users is materialised (XLA does not
  duplicate it).  A producer with more than one large operand that reads more elements than it
  writes is fused only when it can be fused into every consumer on every path (XLA's
  ``InstructionFusion::ComputeGloballyUnfusible``, :func:`_globally_unfusible`): a forward activation
  that the backward combines with a gradient (which depends on it across a dot) keeps its buffer.  A
  ``reduce`` is an XNNPACK fusion on the CPU backend (``ynn_fusion``) that takes in a fusible producer
  only when every user of it is in the fusion already; one read by the reduce and by anything else
  keeps its buffer (:func:`_reduce_inputs`: a layer norm's centred input, read by the variance and by
  the normalisation, and its normalised output, read by the scale's gradient reduce); that buffer is
  read by the reductions only, a loop fusion reading the producer computes it again from its operands
  (:func:`duplicated_into_loops`).  An f32 reduce of more than 32 * 1024 elements per device is a
  YNNPACK fusion that goes on into its consumers while each has a single user and is no elementwise op
  under 4,096 elements per device (:func:`_reduce_tail`: XLA's ``LibraryRewriter``); a broadcast it
  reads there that another consumer reads too keeps a buffer (:func:`_reduce_tail_inputs`: a softmax's
  sum broadcast, kept from the forward to the gradient).  Both bounds are per device, so the tail is
  counted only where a sharding is written (a cost graph built before its plan does not count it), and
  only for a module planned for XLA CPU (:func:`set_fusion_backend`: the TPU compiler runs no YNNPACK).  A zero ``broadcast`` that a scatter-add folded into an ``add`` starts
  from is never made (:func:`folded_zero_destination`: the simplifier's ``A + scatter(0, I, U)`` ->
  ``scatter(A, I, U)``).  In a module
  with written shardings, an elementwise consumer whose operand the partitioner slices locally
  (:func:`sliced_operand`: a ``dynamic-slice``, its own loop fusion) stops a reduction's fusion there.  A
  consumer reads what its fused producers read, so those values live until the consumer.  A
  ``copy`` (a pin, a sharding annotation: removed by the algebraic simplifier) and a ``reshape``
  (a bitcast of a row-major buffer) forward their operand's buffer whatever their users.
  ``constant`` never counts (XLA keeps constants in the executable, outside argument /
  output / temp).  Dots, convolutions, collectives, gathers, scatters, sorts, custom calls and
  control flow are materialised; of those only a ``gather`` takes its producers in
  (:data:`CPU_LOOP_CONSUMERS`: a log-softmax's ``take_along_axis`` reads ``x - max - log(sum)`` without a
  buffer for it).
* *CSE* (XLA's ``HloCSE``, which runs before fusion): identical ``broadcast`` / ``reshape`` instructions
  (same operands after merging, attributes, shape with layout and written sharding; never a root) are
  one instruction, the first in post order (:func:`cse_representative`), whose users are all of theirs
  (:func:`effective_users`).  A training step's backward recomputes the forward's broadcasts
  (``jax.vjp`` of ``broadcast_in_dim``); merged, one broadcast is read by a forward consumer and by a
  backward reduce's multiply, so the reduce rule below keeps it: a Mamba-style scan LM's three
  ``[B,T,D_inner,N]`` broadcasts per layer (``/tmp/nu19``, new user 19; BENCHMARKS.md, round 19 scanmem).
  Other opcodes are not merged here (merging every fusible opcode lowers ``fused_qkv_train_step``'s
  GSPMD peak from 8,212,620 to 7,430,284 B and ``transformer_train_step``'s from 28.07 to 25.46 MB, not
  checked against XLA's buffer assignment: not applied).
* *In place* (XLA's buffer assignment, ``CanShareOperandBufferWithUser``): an elementwise result
  reuses the buffer of an operand of the same shape that it reads last; ``dynamic-update-slice``
  and ``scatter`` update their operand 0 (through a pin in its layout) in place where it is read last
  (XLA's ``HloDataflowAnalysis::GetInPlaceInputOutputPairs``: a scatter-add's zero destination is then the
  allocation of the output the update is written to, from where the zeros are made); a ``while`` takes
  over its init values' buffers; a while body's
  root values are written into the loop state (they add memory only while the old state element is
  still read); a root tuple holding its own leaves takes over the buffers of its operands read last there,
  through forwarding operands (jax's ``xla.sdy.FuncResultSharding`` markers, :func:`_forwarded_source`);
  a leaf whose written sharding reshards its operand (:func:`tuple_resharded_leaves`) is written by the
  partitioner's collective at the root, so its output allocation is free for temporaries until then.
  The operand's interval then ends where the reuse starts.  A ``while`` state leaf whose
  init the loop does not take over is a copy made as soon as the init exists (:func:`_state_copy_at_init`);
  one init value of several updated leaves of one loop (one zero broadcast, ``HloCSE``'d, for several
  accumulators or residual stacks) is taken over by the first leaf only, the others are copies
  (``CopyInsertion``: each updated leaf a buffer of its own; MaxText's two loops: six such copies).  No
  in-place write across a resharded read (:func:`_resharded_read`: a local slice, or a transposed read of
  another size per device).
* *While loops*: a loop invariant (the body passes it through) is read in its init's buffer, also
  when the body's root carries its own sharding for it (a pinned pass-through: the copy XLA removes,
  which must not take the shared buffer's interval with it).  A **bf16** loop invariant that the body
  reads is held as an **f32 copy** for the loop (:func:`widened_invariants`: XLA's CPU compiler
  computes bf16 in f32 -- float normalization -- and ``WhileLoopInvariantCodeMotion`` hoists the
  invariant's convert out of the loop; the copy is made as soon as its source is, by the breadth-first
  scheduler, and the bf16 source dies there unless it is an entry parameter; an invariant ``solve`` passes
  to the body's root through a keep pin is one too, :func:`_passed_to_root`).  Measured on hand scans
  (f16 and f32: no copy) and MaxText's backward loop (six f32 copies of its bf16 activation stacks,
  2.89 GB per device); the copy's bytes depend on the plan, so
  :func:`hloshard.autoshard.build.edge_buffers` adds them like a communication buffer.  Not on a TPU.
* *Outputs and parameters* are live over the whole run (XLA allocates entry outputs beside the temp
  heap: ``output_size``); an output aliased to a parameter (``input_output_alias``: donation) takes no
  memory of its own (``alias_size``).  An output computed in place on an operand (an elementwise
  update of a loop's gradient accumulator) shares that operand's buffer only where XLA's
  ``BufferAssigner`` puts the operand into an output's allocation: outputs first, then the operands
  largest first, each into the newest output allocation its live range fits, else the temp heap
  (:func:`_outputs_not_in_place`; two accumulators updated in the outputs' order: one of them in the
  temp heap).  It follows the model's schedule; XLA's order of the updates is its schedulers' (the
  order of a ``while``'s users), which the model does not see, so with the updates run in another
  order XLA places all of them in place (measured: BENCHMARKS.md, round 16).  The same greedy puts
  any other temporary into an output's allocation before that output is first written, newest
  allocation first, where its bytes per device fit and its live range overlaps nothing there
  (:func:`_temps_in_outputs`): a training step's forward activations sit in the allocations of the
  updated weights until the backward writes them.  It needs each buffer's bytes per device, so it
  applies where shardings are written (a plan's evaluation: ``cost``, ``solve``'s report of the written
  module, the guard's baselines); the solver's cost graph, built before a plan exists, keeps those
  temporaries in the heap (round 11 tried it with whole-array sizes: reverted, BENCHMARKS.md "Round 11:
  the output-allocation rule, reverted"; with per-device sizes, round 17).
* *Gathers and scatters* (XLA's CPU backend; the cost graph prices the copies with the plan's layouts):
  a gather whose output is not in canonical order is a canonical gather plus a transpose that a
  ``reduce`` reads as a row-major copy unless ``ReshapeMover`` sinks it (:func:`gather_relayouts`), and
  no elementwise result is computed in place on it; a scatter whose destination is read after it gets
  a copy of it made as soon as the destination is (:func:`scatter_destination_copies`); a gather or
  scatter with batching dims reads an index array with one ``iota`` column per batching dim, made as
  soon as the index value is (:func:`normalized_indices`: XLA's ``BatchedGatherScatterNormalizer``).  A
  ``select-and-scatter`` (a max-pool's gradient) is expanded (:func:`select_and_scatter_expansions`: XLA
  CPU's ``SelectAndScatterExpander``): ``rank`` s32 ``iota`` arrays of the operand's shape and a variadic
  ``reduce-window`` run where the operand is made (the forward), the selected indices live from there to
  a ``scatter`` into a broadcast of the init value, the result, which is made there too; the operand is
  not read at the select-and-scatter.
* *Communication buffers* depend on the chosen plan, not on the module alone, so they are not here:
  :func:`hloshard.autoshard.build.edge_buffers` adds them to a plan's peak (the IOPDDL cost graph has
  node memory only).  One scheduling rule is here, :func:`made_at_entry_start`: XLA's CPU memory
  scheduler (``HloMemoryScheduler`` on the partitioned, scheduled module) places the resharding of an
  entry parameter -- a collective whose operand is the parameter, through bitcasts and copies -- at the
  start of the entry computation, so its buffer lives from there to its last reader, not from its
  consumer (read in the scheduled module of ``solve``'s plan for the new user's block train step: all
  fourteen all-gathers of weights, forward and backward pins, come before the first dot).  One sharing
  rule is here too, :func:`one_buffer_per_reshard`: ``solve``'s pins are one per computation, operand and
  layout (:func:`hloshard.strategy.realize.insert_pins`), so the consumers of one pin read one buffer, live
  from the first of them to the last (:func:`hloshard.autoshard.build.pin_key` applies it to a plan before
  it is written; a written pin is an instruction of its own and gets it from the fusion rule).  XLA's
  partitioner also reuses a value's resharding to one sharding (``PartitionedHlo::Reshard``'s cache);
  applied to every consumer of an unpinned module it moved keras-hub ``gemma_small``'s guard baseline
  from 1.042 to 1.100 of XLA's peak (round 13): not applied there.
* *Resharding pins* (:func:`resharding_pin`): a written ``copy`` / ``Sharding`` custom call whose sharding
  differs from its operand's is XLA's collective (or slice), made by the breadth-first scheduler as soon
  as its operand exists: a buffer of its own (the pin's layout) from there to its last reader, the operand
  last read there, whatever its readers (:func:`communicating_pin`: a collective is never fused into an
  elementwise reader, nor computed in place); a pin that is a local slice of its operand fuses into
  elementwise readers like a ``dynamic-slice``.  A pin that all-gathers along its leading tiled dimensions
  is in the default layout, so a dot that transposes it (``DotDecomposer``) copies it beside it, also as its
  only reader (:func:`_gathered_in_default_layout`).  A pin that gathers a later dimension
  (:func:`gathered_minor`) is gathered dimension-major on XLA CPU: an elementwise reader is never computed in
  its buffer, a transpose into that physical order is a bitcast of it (:func:`_gather_bitcast`), and a reader
  that needs the default layout -- a dot or convolution, a ``while`` taking it as loop state, a ``reduce``,
  also through an elementwise producer fused into it -- reads a row-major copy made from it, the two live
  together at the copy (:func:`relayout_readers`; round 37 loopmem: a weight gathered before a loop, XLA's
  peak 1.65x the model's on fresh-clone check 36's scan).  An expensive producer (:data:`EXPENSIVE`) read by such
  a slice keeps its buffer (XLA's CPU fuser does not take it into the slice's fusion; a cheap one it
  does).  A pin in its operand's layout still forwards.
* *Compiled modules* (:func:`is_scheduled`: ``is_scheduled=true``, the text of ``compiled.as_text()`` or an
  ``*after_optimizations*`` dump; priced per device, :func:`hloshard.hlo.partitioned.is_per_device_program`):
  XLA has already run, so the module is taken as it runs.  Each computation runs in text order (the
  sequence XLA's scheduler wrote); no fusion rule is applied again (its fusions are instructions, and a
  ``copy`` or ``reshape`` left in it moves bytes); a ``bitcast`` is a view of its operand's buffer (one
  buffer, read until the last reader of any view); a loop or input fusion writes its result into an
  operand of the same shape and layout that reaches its root only through elementwise ops, or that its
  root ``dynamic-update-slice`` updates (:func:`fusion_in_place_operands`, XLA's
  ``CanShareOperandBufferWithUser``), where that operand and all its views are read last there; a
  collective the module writes adds no buffer beside its own operand and result
  (:func:`hloshard.autoshard.build.scratch_bytes`).  Measured (BENCHMARKS.md, round 19): XLA's compiled
  text of 17 samples within 0.1% of its ``memory_analysis()``.  A variadic collective is one value here
  (the strategy graph gives it one node): XLA's per-leaf sharing of it (an optimizer update written into
  each gradient's buffer) is not modelled, an over-estimate (new user 18's enc-dec auto plan: 1.15x).
* *Not modelled*: XLA's heap fragmentation (its temp heap is packed by a heap simulator: the peak here
  is the sum of live buffers, which never exceeds the packed heap), the schedule's finer points (XLA
  schedules the partitioned module, whose collectives and bitcasts are instructions of their own; here
  the logical module, fusion applied), XLA's ``HloCSE`` (identical instructions made once), layout assignment (a transposed accumulator that
  cannot be updated in place), an entry output's allocation holding the forward loop's activation stack
  before the output is written (``scan_mlp_train_step``, 128 KiB), the
  buffer of a local slice (:func:`sliced_operand`) from the point the breadth-first scheduler makes it
  to its reader (the 12-layer generated transformer's solve plan: 23 of 128 KiB at XLA's peak; the
  model counts the consumer's tile at the consumer only).  Measured error and
  the margin a memory budget keeps: :mod:`hloshard.cost.memory`.
"""

from __future__ import annotations

import functools
from typing import Callable, Hashable, Iterable, Sequence

import numpy as np

from ..hlo.loops import called, invariant_elements
from ..hlo.opcodes import ELEMENTWISE_BINARY, ELEMENTWISE_TERNARY, ELEMENTWISE_UNARY
from ..hlo.shape import element_byte_size
from .memory import bytes_per_device
from .remat import (barrier_elements, barrier_source, barriers_removed, removed_barrier, scheduled_dependency,
                    scheduled_reads)

#: answers of :func:`is_fused` and :func:`effective_users` while a :func:`_memoizing` call runs (None outside)
_MEMO: dict | None = None


def _memoizing(fn):
    """Decorator: while ``fn`` runs, :func:`is_fused` and :func:`effective_users` remember their answer per
    instruction (the shardings, users and backend they read do not change inside one schedule or one
    interval computation); nested calls share the outermost memo, and outside every call computes afresh.
    On the Llama 3.1 8B corpus module they were a third of ``solve``'s time, recomputed per reader."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        global _MEMO
        outer = _MEMO is None
        if outer:
            _MEMO = {}
        try:
            return fn(*args, **kwargs)
        finally:
            if outer:
                _MEMO = None
    return run


#: opcodes whose result forwards (a part of) an operand's buffer: they allocate nothing
ALIASING_OPCODES = frozenset({"get-tuple-element", "tuple", "bitcast"})

#: elementwise opcodes (also the in-place opcodes: their result may reuse a same-shaped operand's buffer)
ELEMENTWISE = frozenset(ELEMENTWISE_UNARY | ELEMENTWISE_BINARY | ELEMENTWISE_TERNARY
                        | {"convert", "compare", "reduce-precision", "bitcast-convert"})

#: custom calls the partitioner removes (sharding annotations): they behave like a fused copy
IDENTITY_CUSTOM_CALLS = frozenset({"Sharding", "xla.sdy.FuncResultSharding", "xla.sdy.ShardingGroup",
                                   "SPMDFullToShardShape", "SPMDShardToFullShape"})

#: producers XLA's CPU loop fuser can compute inside a consumer (see the module docstring)
FUSIBLE_PRODUCERS = ELEMENTWISE | {"broadcast", "iota", "reshape", "transpose", "slice", "dynamic-slice", "pad",
                                   "reverse", "concatenate"}

#: consumers that are the root of a loop or reduction fusion
FUSING_CONSUMERS = FUSIBLE_PRODUCERS | {"reduce", "dynamic-update-slice"}

#: further consumers XLA's CPU loop fuser computes its producers in (``CpuInstructionFusion``'s
#: ``CanBeLoopFused``): a ``gather`` (a log-softmax's ``take_along_axis`` reads its gathered elements of
#: ``x - max - log(sum)`` without a buffer for it: read in the compiled keras-hub Gemma train step).  Not in
#: :data:`FUSING_CONSUMERS`, which the TPU rule (:mod:`hloshard.cost.tpu_fusion`) extends.
CPU_LOOP_CONSUMERS = frozenset({"gather"})

#: XLA's ``HloInstruction::IsExpensive`` elementwise ops: not duplicated into several consumers
EXPENSIVE = frozenset({"divide", "remainder", "power", "atan2", "exponential", "exponential-minus-one", "log",
                       "log-plus-one", "logistic", "sqrt", "rsqrt", "cbrt", "tanh", "sine", "cosine", "tan",
                       "erf", "acos", "acosh", "asin", "asinh", "atanh", "cosh", "sinh"})

#: opcodes whose called computations run as part of the program (placed after the caller)
CONTROL_FLOW_OPCODES = ("while", "call", "conditional")


def computation_order(comp) -> list:
    """The instructions of ``comp`` in post order, then any the post order missed, in text order."""
    order = comp.post_order()
    if len(order) == len(comp.instructions):
        return order
    seen = {id(i) for i in order}
    return order + [i for i in comp.instructions if id(i) not in seen]


def _root_post_order(comp) -> list:
    """``comp``'s instructions in post order from its root (operands, then control predecessors, in
    order; depth first), then those the root does not reach, in post order: the order XLA's
    ``MakeInstructionPostOrder`` gives a module as jax hands it over (its StableHLO round trip prints
    each computation in that order, so users are listed in it too)."""
    return comp.post_order(first=[comp.root] if comp.root is not None else None)


def breadth_first_order(comp) -> list:
    """The instructions of ``comp`` in the order XLA's CPU backend runs them (module docstring,
    *Schedule*): XLA's ``BFSMemoryScheduler`` -- the CPU compiler's scheduler while
    ``xla_cpu_enable_concurrency_optimized_scheduler`` is on, its default -- on the fused computation.

    The graph scheduled is the one XLA's fusion leaves: the instructions that get a buffer or forward
    one (not :func:`is_fused`), each depending on the unique instructions it reads once its fused
    producers are inlined (:func:`fused_reads`) and on its control predecessors.  Instructions with no
    such dependency start a first-in-first-out queue in post order from the root
    (:func:`_root_post_order`); popping an instruction appends it to the schedule and makes ready each
    user whose dependencies are now all scheduled (users in that post order).  Each fused instruction (no buffer of its own) is placed right
    before the first scheduled instruction that reads it (in post order among themselves), so every
    operand still precedes its users; fused instructions nothing reads come first.

    Measured: ``samples/transformer_train_step.propagated.hlo`` on 8 CPU devices, temp 22,589,880 B by
    default and 19,298,744 B with ``--xla_cpu_enable_concurrency_optimized_scheduler=false`` (XLA's
    ``DFSMemoryScheduler``): XLA runs the breadth-first schedule."""
    post = _root_post_order(comp)
    index = {id(i): n for n, i in enumerate(post)}
    node = [not is_fused(i) for i in post]
    unbarred = _unbarred(comp.parent)   # remat.py: opt-barriers gone before scheduling
    deps: list = [None] * len(post)
    users: list = [[] for _ in post]
    for n, i in enumerate(post):
        if not node[n]:
            continue
        reads = scheduled_reads(i, fused_reads, is_fused) if unbarred else fused_reads(i)
        ds = [index[id(o)] for o in reads if id(o) in index]
        ds += [index[id(c)] for c in (i.attrs.get("control-predecessors") or ()) if id(c) in index]
        ds = sorted(set(ds))
        deps[n] = len(ds)
        for d in ds:
            users[d].append(n)
    ready = [n for n in range(len(post)) if node[n] and deps[n] == 0]
    seq: list = []
    head = 0
    while head < len(ready):
        n = ready[head]
        head += 1
        seq.append(n)
        for u in users[n]:
            deps[u] -= 1
            if deps[u] == 0:
                ready.append(u)
    if len(seq) != sum(node):   # not a DAG once fused (cannot happen for valid HLO): keep post order
        return post
    # fused instructions: before the first scheduled reader (readers through fused chains)
    slot = {n: t for t, n in enumerate(seq)}
    first = [None] * len(post)
    for n in range(len(post) - 1, -1, -1):   # reverse post order: users before their operands
        if node[n]:
            continue
        best = None
        for u in post[n].users:
            k = index.get(id(u))
            if k is None:
                continue
            t = slot[k] if node[k] else first[k]
            if t is not None and (best is None or t < best):
                best = t
        first[n] = best
    before: dict = {}
    lead: list = []
    for n in range(len(post)):
        if node[n]:
            continue
        if first[n] is None:
            lead.append(post[n])
        else:
            before.setdefault(first[n], []).append(post[n])
    out = list(lead)
    for t, n in enumerate(seq):
        out.extend(before.get(t, ()))
        out.append(post[n])
    return out


def _text_order(comp) -> list:
    """``comp``'s instructions in text order: a compiled (scheduled) module's sequence."""
    return list(comp.instructions)


def called_in_order(instr) -> list:
    """The computations a control-flow instruction runs, in schedule order (while: body, condition)."""
    if instr.opcode == "while":
        return [c for c in (called(instr, "body", 0), called(instr, "condition", 1)) if c is not None]
    if instr.opcode in CONTROL_FLOW_OPCODES:
        return list(instr.called_computations)
    return []


@_memoizing
def program_schedule(module, breadth_first: bool = True) -> list:
    """Entry order with called computations placed after their caller (see the module docstring).
    A computation reached from several call sites is placed at its first one only (flatten the call
    graph first, :func:`hloshard.hlo.callgraph.flatten_call_graph`, to give each site its own).

    ``breadth_first``: each computation in the order XLA's CPU backend runs it
    (:func:`breadth_first_order`: the memory model's time axis); False: in post order
    (:func:`computation_order`: the order the cost graph numbers its nodes in, kept from before the
    breadth-first schedule so that the solver's search is unchanged)."""
    out: list = []
    placed: set = set()
    comp_order = breadth_first_order if breadth_first else computation_order
    if breadth_first and module.entry is not None and is_scheduled(module.entry):
        comp_order = _text_order   # a compiled module runs in the order XLA's scheduler wrote

    def place(comp) -> None:
        placed.add(id(comp))
        # iterative: (computation order, index) frames
        stack = [(comp_order(comp), 0)]
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
                stack.append((comp_order(c), 0))

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

    Values are the non-aliasing instructions (:data:`ALIASING_OPCODES` forward their operands), their
    buffers as :func:`buffer_intervals` places them (parameters and the root's values live throughout,
    fusion and in-place reuse as XLA's CPU backend does).  ``size_of(instr)`` defaults to
    :func:`hloshard.cost.memory.bytes_per_device` of the instruction's sharding (its written shape when
    that fails, e.g. ``{manual}``).  Called computations are not included."""

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
        elif i.parent is not comp:
            res = ()
        else:
            res = (i,)
        memo[id(i)] = res
        return res

    def own(i):
        return () if i.opcode in ALIASING_OPCODES else (i,)

    params = [p for p in order if p.opcode == "parameter"]
    outs = values(comp.root) if comp.root is not None else ()
    iv = buffer_intervals(order, own, values, params, outs)
    keys = [k for k in iv if iv[k][1] > iv[k][0]]
    if not keys:
        return 0
    peak, _ = peak_usage([iv[k] for k in keys], [size(k) for k in keys])
    return peak


def _custom_target(instr) -> str:
    return instr.custom_call_target or ""


def _kind(instr) -> str:
    """The opcode, with identity custom calls as ``copy``."""
    if instr.opcode == "custom-call" and _custom_target(instr) in IDENTITY_CUSTOM_CALLS:
        return "copy"
    return instr.opcode


def is_scheduled(comp) -> bool:
    """True when ``comp`` belongs to a module XLA has already compiled (``is_scheduled=true``: the text of
    ``compiled.as_text()`` or an ``*after_optimizations*`` dump).  Such a module is taken as XLA runs it
    (module docstring, *Compiled modules*): its fusions are formed, each computation runs in text order,
    and every ``copy`` / ``reshape`` left in it moves bytes."""
    module = getattr(comp, "parent", None)
    return module is not None and getattr(module, "attrs", {}).get("is_scheduled") == "true"


def _forwards(instr) -> bool:
    """A ``copy`` (a pin, a sharding annotation: removed by XLA's algebraic simplifier) or a
    ``reshape`` (a bitcast of a row-major buffer) that is not a root: it forwards its operand's buffer; so
    does a ``transpose`` that is a bitcast of a :func:`gathered_minor` pin's buffer (:func:`_gather_bitcast`).
    Not in a compiled module (:func:`is_scheduled`): the simplifier has run, what is left is a real copy."""
    k = _kind(instr)
    if k == "transpose":
        if not _gather_bitcast(instr):
            return False
    elif k not in ("copy", "reshape"):
        return False
    return (bool(instr.users) and not instr.is_root
            and instr.shape.is_array and not is_scheduled(instr.parent) and not resharding_pin(instr))


def _gather_bitcast(instr) -> bool:
    """True for a ``transpose`` of a :func:`gathered_minor` pin whose dimension order is the gathered buffer's
    physical one on XLA CPU (the first gathered dimension most major, the others in their order: ``[a, b]``
    gathered on ``b`` is ``{0,1}``, and its transpose ``[b, a]`` row-major is that buffer): XLA's algebraic
    simplifier makes it a bitcast, no buffer (measured, round 37 loopmem: ``q @ K.T`` of a key matrix split on
    its features and gathered, XLA's peak holds the ``all-gather`` and one ``wrapped_copy.1`` for the other
    readers, the model had held the transpose too)."""
    if not instr.operands or not gathered_minor(instr.operands[0]):
        return False
    src = instr.operands[0]
    dims = [int(d) for d in src.shape.dims]
    try:
        a = _sharding_of(src.operands[0]).tile_shape(dims)
        b = _sharding_of(src).tile_shape(dims)
    except (ValueError, AttributeError):
        return False
    g = min(d for d in range(len(dims)) if int(b[d]) > int(a[d]))
    order = [g] + [d for d in range(len(dims)) if d != g]
    return [int(d) for d in (instr.attrs.get("dimensions") or ())] == order


def resharding_pin(instr) -> bool:
    """A ``copy`` or ``Sharding`` custom call written with a sharding other than its operand's written one
    (``solve``'s pins, a sharding constraint that moves data): XLA's partitioner makes it a collective (or
    a local slice), an instruction of its own that the breadth-first scheduler runs as soon as its
    operand exists.  Its result is a buffer of its own (the operand's bytes in the pin's layout), live
    from there to its last reader, and its operand is last read there (read in the compiled module and
    buffer assignment of the budget start's enc-dec plan: ``mul.885.pin.1``, an all-gathered activation,
    made right after ``mul.885`` in the forward pass and read by a backward dot; BENCHMARKS.md, round 19).
    Not for a value whose sharding is not written (the solver's cost graph before a plan).  Whether
    elementwise readers fuse it: :func:`communicating_pin`."""
    if _kind(instr) != "copy" or not instr.operands:
        return False
    mine, theirs = instr.sharding, instr.operands[0].sharding
    return mine is not None and theirs is not None and mine != theirs


def communicating_pin(instr) -> bool:
    """A :func:`resharding_pin` whose resharding is not a :func:`local_slice` of its operand: the
    partitioner makes it a collective (an all-gather, all-to-all, collective-permute), which no fusion
    takes in, so it is a buffer of its own whatever reads it -- also when all its readers are elementwise
    (:func:`is_fused`), and it is never computed in place on its operand.  A pin that is a local slice is
    a ``dynamic-slice``: the CPU loop fuser computes it inside elementwise readers (which then read the
    operand's buffer), and it is a loop fusion of its own before any other reader.  Measured with XLA's
    CPU backend on hand modules (``tests/test_memory_model.py``: ``PIN_GATHER`` / ``PIN_SLICE``): the
    all-gather of an exponential read by an add is a buffer made right after the exponential (the
    model's peak was 32,768 B, the gathered tile, below XLA's); the slice is fused into the add."""
    if not resharding_pin(instr):
        return False
    o = instr.operands[0]
    dims = [int(d) for d in instr.shape.dims] if instr.shape.is_array else []
    return not (_same_dims(instr, o) and local_slice(_sharding_of(o), _sharding_of(instr), dims))


#: opcodes whose identical copies XLA's ``HloCSE`` merges and the memory model follows (:func:`cse_representative`)
CSE_OPCODES = frozenset({"broadcast", "reshape"})


def _cse_classes(comp) -> tuple:
    """``(rep, members)`` for ``comp``: ``rep`` maps ``id(i)`` -> the instruction XLA's ``HloCSE`` keeps for
    ``i`` (only where that is another instruction), ``members`` maps ``id(kept)`` -> all instructions merged
    into it (itself first).  Cached on the computation (key: instruction count and root), dropped by
    :func:`forget_shardings`: two instructions are identical when opcode, shape with layout, operands (after
    merging), attributes and written sharding agree (XLA compares the partitioned instructions; two written
    shardings that differ make different ones); only :data:`CSE_OPCODES`, never a root."""
    if comp is None:
        return {}, {}
    key = (len(comp.instructions), id(comp.root))
    hit = getattr(comp, "_hloshard_cse", None)
    if hit is not None and hit[0] == key:
        return hit[1]
    rep: dict = {}
    members: dict = {}
    seen: dict = {}
    for i in computation_order(comp):   # post order: operands are merged before their users
        if i.opcode not in CSE_OPCODES or i.is_root or not i.shape.is_array:
            continue
        ident = (i.opcode, str(i.shape), tuple(id(rep.get(id(o), o)) for o in i.operands),
                 repr(sorted((k, str(v)) for k, v in i.attrs.items() if k not in ("sharding", "metadata"))),
                 str(i.sharding))
        kept = seen.setdefault(ident, i)
        if kept is not i:
            rep[id(i)] = kept
            members.setdefault(id(kept), [kept]).append(i)
    setattr(comp, "_hloshard_cse", (key, (rep, members)))
    return rep, members


def cse_representative(instr):
    """The instruction XLA's ``HloCSE`` keeps in place of ``instr`` (``instr`` itself when none is merged
    into another; module docstring, *CSE*).  A training step's backward recomputes the forward's
    broadcasts (``jax.vjp`` of a ``broadcast_in_dim``: the same reshape and broadcast of the same
    operand); XLA makes them one instruction before fusion, whose users are the forward's and the
    backward's together (:func:`effective_users`)."""
    return _cse_classes(instr.parent)[0].get(id(instr), instr)


def _cse_users(instr) -> list:
    """The users of ``instr`` and of every instruction ``HloCSE`` merges into it, each user replaced by
    the instruction kept for it (:func:`cse_representative`), in order, each once."""
    out: list = []
    seen: set = set()
    unbarred = instr.parent is not None and _unbarred(instr.parent.parent)
    for m in _cse_classes(instr.parent)[1].get(id(instr), [instr]):
        users = list(m.users)
        while users:
            u = users.pop(0)
            elements = barrier_elements(m, u) if unbarred else None
            if elements is not None:   # remat.py: a removed barrier's readers read ``m``
                users[:0] = [w for g in elements for w in g.users]
                continue
            u = cse_representative(u)
            if id(u) not in seen:
                seen.add(id(u))
                out.append(u)
    return out


def reshard_readers(consumer) -> list:
    """The instructions that read the value a resharding into ``consumer``'s layout makes: ``consumer``
    itself, or where it is fused its :func:`effective_users`, or where it is a written
    :func:`communicating_pin` (its collective a buffer of its own) the pin's readers.  A dot or convolution
    among them reads an all-gather along a dimension that is not the most major one through XLA CPU's
    relayout copy (:func:`hloshard.autoshard.build.edge_buffers`; measured on ``transformer_block``'s
    solve plan: ``p__wqkv__.1.pin``'s all-gather in layout ``{0,1}`` and its ``wrapped_copy.1`` both live
    at XLA's peak, which the model had without the copy, 0.919 of XLA)."""
    if communicating_pin(consumer):
        out: list = []
        for u in effective_users(consumer):
            out.extend(effective_users(u) if is_fused(u) else [u])
        return out
    return effective_users(consumer) if is_fused(consumer) else [consumer]


def relayout_readers(consumer) -> list:
    """The readers among :func:`reshard_readers` of ``consumer`` that read an all-gather along a dimension
    that is not the most major one through XLA CPU's relayout copy (the gathered buffer has the gathered
    dimension major; the copy is the default, row-major, layout, of the gathered size;
    :func:`hloshard.autoshard.build._relayout_bytes`): every ``dot`` and ``convolution`` among them, and, in a
    module planned for XLA CPU (:func:`set_fusion_backend`), a reader that takes the gathered value as it is
    (not through a fused slice) and needs the default layout too: a ``while`` or the ``tuple`` a ``while``
    reads (its loop state: XLA's ``LayoutAssignment`` gives the while's operand, body parameter and root one
    layout, the default one), and a ``reduce`` (an XNNPACK / YNNPACK ``ynn_fusion`` on the CPU backend, which
    reads row-major operands).  Measured (8 CPU devices, jaxlib 0.10.2, fresh-clone check 36 item 1; round 37
    loopmem, ``tests/test_loop_memory.py``): a weight split on its minor dimension, all-gathered before an
    8-trip ``fori_loop``, is ``all-gather`` ``{0,1}`` then ``wrapped_copy.1`` ``{1,0}``, the loop's operand,
    both live at XLA's peak (584.2 KiB; the model had 348.0 KiB); the same weight read by a ``reduce`` over
    its major dimension, the same pair (592.0 KiB against 341.0 KiB); read by elementwise ops or a slice,
    no copy (the loop fusion reads the gathered layout, a slice fused with the copy copies the slice only)."""
    readers = reshard_readers(consumer)
    out = [u for u in readers if u.opcode in ("dot", "convolution")]
    if fusion_backend(getattr(consumer.parent, "parent", None)) != "cpu":
        return out
    direct = [consumer] if not communicating_pin(consumer) and not is_fused(consumer) else \
        effective_users(consumer) if communicating_pin(consumer) else []
    # through an elementwise reader of the same dims that XLA fuses into its consumer (the reduce's fusion reads
    # the copy: ``tanh`` of the gathered weight summed is ``wrapped_copy.1`` and a ``ynn_fusion``); not through a
    # slice (a slice fused with the copy copies the slice only)
    direct = direct + [w for u in direct if u.opcode in ELEMENTWISE and is_fused(u) and _same_dims(u, consumer)
                       for w in effective_users(u)]
    seen = {id(u) for u in out}
    for u in direct:
        if id(u) in seen:
            continue
        if u.opcode in ("while", "reduce") or \
                (u.opcode == "tuple" and any(w.opcode == "while" for w in u.users)):
            out.append(u)
    return out


def effective_users(instr) -> list:
    """The users of ``instr``, each forwarding user replaced by its own users (recursively); with the
    users of the instructions ``HloCSE`` merges into it (:func:`cse_representative`)."""
    memo = _MEMO
    if memo is not None:
        hit = memo.get(("users", id(instr)))
        if hit is None:
            hit = memo[("users", id(instr))] = tuple(_effective_users(instr))
        return list(hit)
    return _effective_users(instr)


def _effective_users(instr) -> list:
    out: list = []
    seen: set = set()
    stack = _cse_users(instr)
    while stack:
        u = stack.pop()
        if id(u) in seen:
            continue
        seen.add(id(u))
        if _forwards(u):
            stack.extend(_cse_users(u))
        else:
            out.append(u)
    return out


def is_fused(instr) -> bool:
    """True when XLA never gives ``instr``'s result a buffer (module docstring, *Fusion*): a constant,
    a forwarding copy or reshape, or a fusible producer whose consumers (through forwarding users) all
    fuse it (and that is not a root); an instruction ``HloCSE`` merges into another (its readers read
    the one kept, :func:`cse_representative`)."""
    memo = _MEMO
    if memo is not None:
        hit = memo.get(("fused", id(instr)))
        if hit is None:
            hit = memo[("fused", id(instr))] = _is_fused(instr)
        return hit
    return _is_fused(instr)


def _is_fused(instr) -> bool:
    op = _kind(instr)
    if op == "constant" or _forwards(instr) or cse_representative(instr) is not instr:
        return True
    if is_scheduled(instr.parent):   # a compiled module: XLA's fusions are already instructions
        return False
    if folded_zero_destination(instr):
        return True
    if communicating_pin(instr):   # a collective: never fused into its readers
        return False
    if op not in FUSIBLE_PRODUCERS or instr.is_root or not instr.users or not instr.shape.is_array:
        return False
    consumers = effective_users(instr)
    if not consumers or any((_kind(u) not in FUSING_CONSUMERS and _kind(u) not in CPU_LOOP_CONSUMERS)
                            or u.parent is not instr.parent for u in consumers):
        return False
    if op in EXPENSIVE and (len(consumers) > 1 or any(resharding_pin(u) or _relaid_in_copy(u) for u in consumers)):
        # XLA's CPU fuser keeps an expensive op out of a pin's local dynamic-slice, and does not duplicate
        # it into a value's relayout copy (:func:`_relaid_in_copy`: a second fusion reading it)
        return False
    if id(instr) in _globally_unfusible(instr.parent):
        return False
    return id(instr) not in _reduce_inputs(instr.parent) and id(instr) not in _reduce_tail_inputs(instr.parent)


def duplicated_into_loops(instr) -> bool:
    """True when ``instr`` is a buffer only for the reductions that read it (:func:`_reduce_inputs`: an
    XNNPACK reduce fusion takes in no producer with a user outside it) and is otherwise fusible
    (:func:`is_fused` without that rule): XLA's loop fuser still computes it inside each loop fusion that
    reads it, so its buffer is read by the reductions alone and a loop fusion reads its operands
    (:func:`fused_reads`).  Read in XLA's compiled keras-hub BERT train step (auto_shard's plan, 2x4): a
    layer norm's ``x - mean`` is a ``broadcast_subtract_fusion`` the variance's ``ynn_fusion`` reads, and
    the backward's loop fusion (``broadcast_multiply_fusion``, ``2 (x - mean) ...``) recomputes it from
    ``x`` and the mean's sum, which stay live instead (the model held ``x - mean`` over the whole
    step; BENCHMARKS.md, round 21 memtruth).  A backward that reads it through a reduction keeps it
    (``samples/transformer_train_step``: the backward's ``ynn_fusion`` reads the forward's buffer)."""
    if _kind(instr) in EXPENSIVE or id(instr) not in _reduce_inputs(instr.parent) \
            or id(instr) in _reduce_tail_inputs(instr.parent):
        return False
    if is_scheduled(instr.parent) or communicating_pin(instr) or _forwards(instr):
        return False
    return id(instr) not in _globally_unfusible(instr.parent)


#: consumers whose loop fusion duplicates a reduction's input into itself (:func:`duplicated_into_loops`)
_LOOP_ROOTS = (FUSIBLE_PRODUCERS | {"dynamic-update-slice"} | CPU_LOOP_CONSUMERS)


def _per_computation(attr: str):
    """Decorator: ``fn(comp)`` (a set of instruction ids) computed once per computation and cached on it
    under ``attr`` as a frozenset; recomputed when the computation's instruction count or root changes;
    ``None`` gives the empty set."""
    def wrap(fn):
        @functools.wraps(fn)
        def cached(comp) -> frozenset:
            if comp is None:
                return frozenset()
            key = (len(comp.instructions), id(comp.root))
            hit = getattr(comp, attr, None)
            if hit is not None and hit[0] == key:
                return hit[1]
            result = frozenset(fn(comp))
            setattr(comp, attr, (key, result))
            return result
        return cached
    return wrap


def _sharding_of(instr):
    """``instr``'s written array sharding, or None (none written, a tuple, or one that does not name
    tiles: unknown, manual, maximal, named)."""
    sh = getattr(instr, "sharding", None)
    if sh is None or sh.is_tuple or not instr.shape.is_array:
        return None
    if sh.is_replicated or (sh.is_tiled and not sh.has_manual_subgroup):
        return sh
    return None


def sliced_operand(user, operand) -> bool:
    """True when XLA's SPMD partitioner reads ``operand`` in ``user`` through a **local slice**: both
    carry written shardings, ``user`` is elementwise on an operand of its own dims (it needs the
    operand in its own sharding), the two differ, and on every device the tile ``user`` needs lies
    inside the tile the device holds (the resharding planner's rules 2 and 6 without a permute,
    :mod:`hloshard.cost.reshard`: a ``dynamic-slice``, no communication).  That ``dynamic-slice`` is a
    loop fusion of its own on the CPU backend (``CpuInstructionFusion``: ``kDynamicSlice`` is
    loop-fusible), so the user -- and a reduction fusion the user joins -- reads the slice's buffer,
    not ``operand``'s; the slice takes the operand's fusible producers in like any loop fusion.
    Measured in XLA's buffer assignment of the 12-layer generated transformer's solve plan: a layer
    norm's centred and normalised values (``[2,1,1,4]``) read by the backward's ``[8,1,1]`` multiplies
    are 128 KiB ``subtract_dynamic-slice_fusion`` / ``multiply_dynamic-slice_fusion`` buffers made in the
    forward; the 512 KiB values themselves are not kept.  False when either sharding is missing
    (a module before a plan is chosen: the rule then never applies)."""
    if _kind(user) not in ELEMENTWISE or not _same_dims(user, operand):
        return False
    return local_slice(_sharding_of(operand), _sharding_of(user), [int(d) for d in user.shape.dims])


def local_slice(have, need, dims) -> bool:
    """True when an array of ``dims`` held in sharding ``have`` is read in sharding ``need`` through a
    local ``dynamic-slice`` (no communication): the two differ and on every device the tile of ``need``
    lies inside the tile of ``have`` (the resharding planner's rules 2 and 6 without a permute,
    :mod:`hloshard.cost.reshard`).  False when either is None (not written, or not a tiled / replicated
    array sharding: :func:`_sharding_of`) or when the devices differ."""
    a, b = have, need
    if a is None or b is None or a == b:
        return False
    try:
        devices = set(a.devices) if a.is_tiled else None
        if b.is_replicated or (devices is not None and set(b.devices) != devices):
            return False
        if a.is_replicated:
            return b.is_tiled
        for d in devices:
            held = a.shard_slices(dims, d)
            needed = b.shard_slices(dims, d)
            if any(n.start < h.start or n.stop > h.stop for h, n in zip(held, needed)):
                return False
        return a.tile_shape(dims) != b.tile_shape(dims)
    except (ValueError, IndexError):
        return False


def sliced_edges(module) -> frozenset:
    """``(id(user), id(operand))`` of every pair of ``module`` that :func:`sliced_operand` holds for:
    what the memory model reads of the written shardings (a cache of buffer intervals keyed on the
    module's structure must also key on this)."""
    out = set()
    for comp in module.computations:
        for u in comp.instructions:
            if getattr(u, "sharding", None) is None or _kind(u) not in ELEMENTWISE:
                continue
            for o in u.operands:
                if sliced_operand(u, o):
                    out.add((id(u), id(o)))
    return frozenset(out)


def written_layouts(module) -> tuple:
    """What :func:`buffer_intervals` reads of ``module``'s written shardings, as a hashable key (a cache
    of buffer intervals keyed on the module's structure must also key on this): the pairs of
    :func:`sliced_edges` and every instruction's written sharding (:func:`_temps_in_outputs` sizes
    buffers by them)."""
    layouts = tuple((id(i), i.sharding) for comp in module.computations for i in comp.instructions
                    if getattr(i, "sharding", None) is not None)
    return sliced_edges(module), layouts


def forget_shardings(comp) -> None:
    """Drop what is cached on ``comp`` that depends on its written shardings (:func:`_reduce_inputs`,
    through :func:`sliced_operand`; :func:`_kept_transposes`, through the pins that reshard): called by
    :func:`buffer_intervals` and :func:`gather_relayouts`, which a plan's new shardings reach without
    changing the computation's instructions."""
    for attr in ("_hloshard_reduce_inputs", "_hloshard_reduce_tail_inputs", "_hloshard_reduce_fusions",
                 "_hloshard_kept_gather_transposes", "_hloshard_cse"):
        if getattr(comp, attr, None) is not None:
            setattr(comp, attr, None)


def _same_dims(a, b) -> bool:
    return a.shape.is_array and b.shape.is_array and tuple(a.shape.dims) == tuple(b.shape.dims)


#: the compilers whose fusion :func:`set_fusion_backend` selects: ``"cpu"`` (XLA's CPU backend, every rule
#: of the module docstring; the default) and ``"tpu"`` (the TPU compiler: XLA CPU's YNNPACK library
#: fusions do not grow into a reduce's consumers there, :func:`_reduce_tail`)
FUSION_BACKENDS = ("cpu", "tpu")


def set_fusion_backend(module, backend: str) -> None:
    """Say which compiler ``module`` (a :class:`hloshard.hlo.ir.Module`) is planned for, as far as the
    buffers of this model depend on it: ``"cpu"`` (the default for a module never set) or ``"tpu"``
    (:data:`FUSION_BACKENDS`).  The one backend-specific rule read here is XLA CPU's ``LibraryRewriter``
    (a large f32 reduce's YNNPACK fusion goes on into its consumers, :func:`_reduce_tail`): a library of
    XLA's CPU backend, which the TPU compiler does not run, so with ``"tpu"`` no tail is taken in.  Set by
    :func:`hloshard.cost.tpu_heap.tpu_memory_device` (a module planned for a TPU profile, before its cost
    graph is built) and by ``tpu_heap``'s VMEM checks; the figures of the TPU rule are those libtpu's
    measurements confirmed (``tests/test_tpu_memory.py``).  Drops what is cached on ``module``'s
    computations when it changes (:func:`forget_shardings`).  Raises ValueError for another name."""
    if backend not in FUSION_BACKENDS:
        raise ValueError(f"fusion backend {backend!r}: expected one of {', '.join(FUSION_BACKENDS)}")
    if fusion_backend(module) == backend:
        return
    module._hloshard_fusion_backend = backend
    for comp in getattr(module, "computations", ()):
        forget_shardings(comp)


def fusion_backend(module) -> str:
    """The backend :func:`set_fusion_backend` gave ``module`` (``"cpu"`` when none, or ``module`` None)."""
    return getattr(module, "_hloshard_fusion_backend", None) or "cpu"


def set_barriers_kept(module, kept: bool) -> None:
    """Say whether the compiler ``module`` is planned for schedules it with its ``opt-barrier``
    instructions in place (True: XLA's GPU compiler, which removes them in its post-scheduling passes,
    after ``ScheduleGpuModule`` -- :mod:`hloshard.cost.remat`) although the buffers otherwise follow
    :func:`fusion_backend`'s rules (a GPU profile's memory is modelled with XLA CPU's fusion).  False (the
    default): :func:`hloshard.cost.remat.barriers_removed` of the fusion backend decides.  Drops what is
    cached on ``module``'s computations when it changes."""
    kept = bool(kept)
    if bool(getattr(module, "_hloshard_barriers_kept", False)) == kept:
        return
    module._hloshard_barriers_kept = kept
    for comp in getattr(module, "computations", ()):
        forget_shardings(comp)


def _unbarred(module) -> bool:
    """True when ``module``'s ``opt-barrier`` instructions are gone before its compiler schedules
    (:mod:`hloshard.cost.remat`): the fusion backend removes them and no GPU profile keeps them."""
    return barriers_removed(fusion_backend(module)) and not getattr(module, "_hloshard_barriers_kept", False)


@_per_computation("_hloshard_reduce_inputs")
def _reduce_inputs(comp) -> frozenset:
    """The ids of the fusible producers of ``comp`` that a ``reduce`` reads without taking them in, so
    they keep a buffer.  XLA's CPU backend makes each ``reduce`` an XNNPACK fusion (``ynn_fusion``) that
    takes in a fusible producer only when every user of it is already in the fusion (it duplicates
    nothing): starting from the reduce, a fusible operand all of whose users are in the fusion joins it,
    recursively; a fusible operand with a user outside is read from its own buffer (made once, by a
    loop fusion of its own), e.g. a layer norm's centred input ``x - mean`` that the variance's reduce
    and the normalisation both read.  Iotas, constants and broadcasts of a scalar are not counted
    (duplicated freely); a broadcast of an array is: read by the reduce's multiply and by another
    consumer it keeps a buffer (``wrapped_broadcast``, XLA's buffer assignment of a hand module, 8 CPU
    devices: ``b = broadcast(p[256])`` to f32[64,256] read by ``y = exp(x) * b`` and by ``reduce(y * b)``:
    argument 66,560 + output 65,808 + temp 65,536, the model's peak 197,904 to the byte; 132,368 without
    it; ``tests/test_scan_buffers.py``).  Read in XLA's buffer assignment of
    ``samples/transformer_train_step.propagated.hlo``
    (8 CPU devices): each layer norm's ``broadcast_subtract_fusion`` is an operand of the variance's
    ``ynn_fusion`` and of the backward's; with the rule and the breadth-first schedule the model's peak
    is 28,631,292 B against XLA's 28,381,876 (26,263,804 with post order and without it).  Cached on
    the computation like :func:`_globally_unfusible`.  A reduction reads an operand that the
    partitioner slices locally (:func:`sliced_operand`) from the slice's own loop fusion, so the walk
    stops there."""
    return _reduce_fusions(comp)[0]


@_per_computation("_hloshard_reduce_tail_inputs")
def _reduce_tail_inputs(comp) -> frozenset:
    """The ids of the fusible producers of ``comp`` that a ``reduce``'s XNNPACK fusion reads *after* the
    reduce and that something outside the fusion reads too, so they keep a buffer (:func:`is_fused`).  The
    fusion takes in the reduce's consumers while each value in it has a single user (:func:`_reduce_tail`:
    elementwise ops, broadcasts, reshapes, reductions; the fusion has one output, the first value with
    several users or a user of another kind), and reads their other operands through fusible producers
    as :func:`_reduce_inputs` reads the reduce's: one with a user outside is made by a loop fusion of its
    own and read from its buffer.  Unlike a reduce's input it is not computed again in the loop fusions
    that read it (:func:`duplicated_into_loops`): the fusion's root reads the buffer, which lives until
    then; nor is a reduce's input (:func:`_reduce_inputs`) whose other readers are all in the tail (the
    fusion reads its buffer: a masked gradient's ``select``, a loop fusion of its own that the reduce and
    the tail's divide both read).  Read in XLA's buffer assignments (XLA CPU, 8 devices) of new user 21's Falcon and DiT train
    steps (``/tmp/nu21``): per attention layer, the softmax's sum broadcast to the scores' shape is a
    ``wrapped_broadcast`` that lives from the forward divide to the backward, where the fusion of the
    ``sum(g * p)`` reduce goes on into ``add(g / broadcast(s), broadcast(-sum)) * e`` and reads it
    (2 MB per layer in Falcon, 4 MB in DiT); the forward's divide loop fusion broadcasts the sum again
    itself.  Cached on the computation like :func:`_reduce_inputs`."""
    return _reduce_fusions(comp)[1]


def _joins_reduce_fusion(o, comp) -> bool:
    """A candidate for a reduce's XNNPACK fusion: a fusible producer of ``comp`` (or a forwarding one);
    not an iota, a constant or a broadcast of a scalar (duplicated freely)."""
    k = _kind(o)
    return (o.parent is comp and o.shape.is_array and k not in ("iota", "constant")
            and (k != "broadcast" or _true_rank(o.operands[0].shape) > 0)
            and (k in FUSIBLE_PRODUCERS or _forwards(o)))


#: the consumers a reduce's XNNPACK fusion goes on into (:func:`_reduce_tail`): arithmetic, not a
#: ``select`` / ``compare`` (a predicate: XLA's fusions of Falcon's and a hand module's masked softmax
#: gradient end before the mask's ``select``, a loop fusion of its own)
_TAIL_OPCODES = (ELEMENTWISE - {"select", "compare", "clamp"}) | {"broadcast", "reshape", "reduce"}


#: XLA CPU's YNNPACK fusion takes a reduce of more input elements per device than this (XLA's
#: ``IsReduceOpOffloadedToYnn``: 32 * 1024, f32 only); measured with the XLA jax 0.10.2 runs, a
#: ``[2,4,64,64]`` f32 input (exactly 32,768 elements) is reduced without the fusion's tail, a
#: ``[4,8,128,128]`` one with it
YNN_REDUCE_MIN_ELEMENTS = 32 * 1024


#: XLA CPU's YNNPACK fusion takes in no elementwise op of fewer elements per device than this (the library
#: leaves small ops to the loop fuser; XLA's ``IsElementwiseOpSupportedByYnn`` has such a bound).  Measured
#: with hand softmax gradients (``tests/test_memory_model.py``'s ``_softmax_tail``, XLA of jax 0.10.2, 8 CPU
#: devices): sums of 4,096 elements (``[4,8,128]``, ``[8,4,128]``) fuse the tail, of 3,072 (``[4,8,96]``),
#: 2,048 (``[2,8,128]``, ``[1,8,256]``) or fewer do not
YNN_ELEMENTWISE_MIN_ELEMENTS = 4096


def _elements_per_device(instr) -> int | None:
    """Elements one device holds of ``instr``'s array result under its written sharding
    (:func:`_tile_bytes`); None where none is written: then the count per device depends on a plan not
    chosen yet (the cost graph of an unannotated module), and a rule that needs it does not apply."""
    b = _tile_bytes(instr)
    return None if b is None else b // max(1, int(instr.shape.element_size))


def _offloaded_reduce(r) -> bool:
    """True when XLA CPU makes the reduce ``r`` a YNNPACK fusion that grows into its consumers: an f32
    reduce of more than :data:`YNN_REDUCE_MIN_ELEMENTS` input elements per device under the input's
    written sharding.  False where no sharding is written on the input (:func:`_elements_per_device`):
    a module's cost graph is built before its plan, and the global count is no device's -- the
    ``[8,8,64,64]`` scores of ``tests/jax_e2e_models.py``'s transformer are 262,144 elements, 32,768 or
    fewer on each device under every plan that splits them; counted whole, the rule kept broadcasts
    XLA never keeps in the plans the solver compared (round 23: the memory guard's re-solve, priced
    with them, returned a plan moving 15% more bytes than the manual one)."""
    o = r.operands[0] if r.operands else None
    if o is None or not o.shape.is_array or not r.shape.is_array or o.shape.element_type != "f32" \
            or r.shape.element_type != "f32":
        return False
    n = _elements_per_device(o)
    return n is not None and n > YNN_REDUCE_MIN_ELEMENTS


def _reduce_tail(r, comp) -> list:
    """The consumers of the reduce ``r`` its XNNPACK fusion takes in (XLA CPU's ``LibraryRewriter``
    grows a library fusion down into the single user of its root): when :func:`_offloaded_reduce`, from
    ``r``, while the value has a single user (through HloCSE) that is an arithmetic elementwise op, a
    broadcast, a reshape or a reduce of ``comp`` (not a root, not a predicate, not reading it through a
    local slice), that user; the last one is the fusion's output.  Empty otherwise.  An elementwise op
    of fewer than :data:`YNN_ELEMENTWISE_MIN_ELEMENTS` elements per device ends it (the library leaves
    small ops to the loop fuser): the softmax gradient's ``sum -> negate -> broadcast -> add -> multiply``
    is one fusion when the sums are ``[4,8,128]`` per device (Falcon, the hand modules) or ``[2,8,256]``
    (DiT), and stops at the reduce when they are ``[4,4,128]`` (keras-hub BERT), ``[4,64]`` (Gemma's RMS
    norm, ``ynn_fusion.48`` of ``f32[4,64]``) or smaller."""
    tail: list = []
    if fusion_backend(comp.parent) != "cpu" or not _offloaded_reduce(r):   # a library of XLA CPU only
        return tail
    cur = r
    while True:
        users = _cse_users(cur)
        if len(users) != 1:
            return tail
        u = users[0]
        if u.parent is not comp or u.is_root or not u.shape.is_array or sliced_operand(u, cur) \
                or u.shape.element_type == "pred" or not (_kind(u) in _TAIL_OPCODES or _forwards(u)):
            return tail
        if _kind(u) in ELEMENTWISE and (_elements_per_device(u) or 0) < YNN_ELEMENTWISE_MIN_ELEMENTS:
            return tail   # too small for the library: loop-fused (see the docstring)
        tail.append(u)
        cur = u


def _reduce_fusions(comp) -> tuple:
    """``(inputs, tail_inputs)``: the ids :func:`_reduce_inputs` and :func:`_reduce_tail_inputs` give
    (computed once for both, cached on the computation like them)."""
    key = (len(comp.instructions), id(comp.root))
    hit = getattr(comp, "_hloshard_reduce_fusions", None)
    if hit is not None and hit[0] == key:
        return hit[1]
    result = _compute_reduce_fusions(comp)
    setattr(comp, "_hloshard_reduce_fusions", (key, result))
    return result


def _compute_reduce_fusions(comp) -> tuple:
    out: set = set()
    tail_out: set = set()
    order = computation_order(comp)
    index = {id(i): n for n, i in enumerate(order)}
    by_id = {id(i): i for i in order}
    unbarred = _unbarred(comp.parent)

    def read(x):   # what a reader of ``x`` reads once XLA removed the barriers (remat.py)
        return cse_representative(scheduled_dependency(x) if unbarred else x)

    def cone_of(seeds, stop) -> dict:
        """The fusible producers reachable from ``seeds`` through fusible producers (not in ``stop``)."""
        cone: dict = {}
        stack = list(seeds)
        while stack:
            o = stack.pop()
            if id(o) in cone or id(o) in stop or not _joins_reduce_fusion(o, comp):
                continue
            cone[id(o)] = o
            stack.extend(read(x) for x in o.operands if not sliced_operand(o, x))
        return cone

    def decide(cone, inside, kept) -> None:
        # users before operands: each candidate's users in the cone are decided when it is
        for o in sorted(cone.values(), key=lambda i: -index.get(id(i), -1)):
            users = _cse_users(o)
            if any(id(u) in inside for u in users):
                if all(id(u) in inside for u in users):
                    inside.add(id(o))
                elif not _forwards(o):
                    kept.add(id(o))

    tail_read: set = set()
    for r in comp.instructions:
        if r.opcode != "reduce":
            continue
        inside = {id(r)}
        mine: set = set()
        decide(cone_of([read(o) for o in r.operands if not sliced_operand(r, o)], ()), inside, mine)
        out |= mine
        tail = _reduce_tail(r, comp)
        if not tail:
            continue
        inside |= {id(t) for t in tail}
        seeds = [read(x) for t in tail for x in t.operands
                 if id(read(x)) not in inside and not sliced_operand(t, x)]
        decide(cone_of(seeds, inside | out), inside, tail_out)
        # a reduce input whose other readers are all in the tail: the fusion reads its buffer
        tail_read |= {k for k in mine if all(id(u) in inside for u in _cse_users(by_id[k]))}
    return out, (tail_out - out) | tail_read


def _true_rank(shape) -> int:
    """Dimensions of size > 1 (XLA's ``ShapeUtil::TrueNumDimensions``)."""
    return sum(1 for d in shape.dims if int(d) > 1) if shape.is_array else 0


def _source(instr):
    """``instr`` with forwarding copies (pins, sharding annotations) looked through: what XLA sees
    once the partitioner and the algebraic simplifier removed them."""
    while _kind(instr) == "copy" and instr.operands and instr.shape.is_array:
        instr = instr.operands[0]
    return instr


def _widens_reads(instr) -> bool:
    """True when duplicating ``instr`` into several consumers would read more memory (XLA's
    ``ComputeGloballyUnfusible`` preconditions): more than one *large* operand (true rank at least the
    result's, broadcasts / iotas / scalar constants not counted: ``EffectivelyAtMostUnary`` is false)
    and more operand elements in total than result elements."""
    if not instr.shape.is_array:
        return False
    rank = _true_rank(instr.shape)
    large = 0
    elements = 0
    seen: set = set()
    for o in instr.operands:
        src = _source(o)
        if id(o) in seen:
            continue
        seen.add(id(o))
        if o.shape.is_array:
            elements += o.shape.num_elements
        if _kind(src) in ("broadcast", "iota") or (src.opcode == "constant" and src.shape.is_array
                                                   and src.shape.num_elements == 1):
            continue
        if _true_rank(o.shape) >= rank:
            large += 1
    return large > 1 and elements > instr.shape.num_elements


@_per_computation("_hloshard_unfusible")
def _globally_unfusible(comp) -> frozenset:
    """The ids of the instructions of ``comp`` XLA's fusion never duplicates into their consumers,
    so they keep a buffer (XLA's ``InstructionFusion::ComputeGloballyUnfusible``, the CPU backend's
    ``CpuInstructionFusion`` runs it): a producer for which :func:`_widens_reads` holds is fused only
    when it can be fused into every consumer *on every path* -- each operand of a consumer that is
    reachable from the producer must itself be a fusible producer that can be fused the same way.  In
    a training step this keeps the forward activations the backward reads together with a gradient
    (which depends on them through the loss, across dots) in their own buffers.  Computed once per
    computation in reverse post order, as XLA does, and cached on the computation (recomputed when
    its instruction count changes)."""
    order = computation_order(comp)
    cands = [i for i in order if _kind(i) in FUSIBLE_PRODUCERS and not i.is_root and _widens_reads(i)]
    out: set = set()
    if cands:
        index = {id(i): n for n, i in enumerate(order)}
        desc = [0] * len(order)     # bit n: order[n] is reachable from (or is) the instruction
        for n in range(len(order) - 1, -1, -1):
            bits = 1 << n
            for u in order[n].users:
                k = index.get(id(u))
                if k is not None:
                    bits |= desc[k]
            desc[n] = bits
        memo: dict = {}

        def reach(p, o) -> bool:
            k = index.get(id(o))
            return k is not None and bool((desc[index[id(p)]] >> k) & 1)

        def on_all_paths(p, c) -> bool:
            if c is p:
                return True
            if (_kind(c) not in FUSING_CONSUMERS and _kind(c) not in CPU_LOOP_CONSUMERS and not _forwards(c)) \
                    or id(c) in out:
                return False
            hit = memo.get((id(p), id(c)))
            if hit is not None:
                return hit
            ok = True
            for o in c.operands:
                if o is p or not reach(p, o):
                    continue
                if (_kind(o) not in FUSIBLE_PRODUCERS and not _forwards(o)) or id(o) in out or \
                        not on_all_paths(p, o):
                    ok = False
                    break
            memo[(id(p), id(c))] = ok
            return ok

        cand_ids = {id(i) for i in cands}
        for i in reversed(order):   # reverse post order: consumers are decided before their producers
            if id(i) in cand_ids and not all(on_all_paths(i, u) for u in i.users):
                out.add(id(i))
    return out


def fused_reads(instr) -> list:
    """The operands whose buffers ``instr`` reads once its fused producers are inlined: operands that
    are :func:`is_fused` are replaced by what they read, recursively (each instruction once), and so, when
    ``instr`` is the root of a loop fusion, are the reductions' inputs it computes again itself
    (:func:`duplicated_into_loops`); an operand ``HloCSE`` merges into another is read as that one
    (:func:`cse_representative`)."""
    out: list = []
    seen: set = set()
    stack = list(reversed(instr.operands))
    loop = _kind(instr) in _LOOP_ROOTS and not is_scheduled(instr.parent)
    while stack:
        o = cse_representative(stack.pop())
        if id(o) in seen:
            continue
        seen.add(id(o))
        if is_fused(o) or (loop and o.parent is instr.parent and duplicated_into_loops(o)):
            stack.extend(reversed(o.operands))
        else:
            out.append(o)
    return out


def _invariant_leaves(w) -> set:
    """Positions, among the array leaves of the ``while`` ``w``'s state, of the loop invariants
    (:func:`hloshard.hlo.loops.invariant_elements`: the body passes them through unchanged, also through
    a ``Sharding`` custom-call at its root, which the SPMD partitioner drops before buffers are assigned:
    ``solve``'s :func:`hloshard.strategy.realize.keep_invariants`)."""
    inv = set(invariant_elements(w, through_pins=True))
    if not inv or not w.shape.is_tuple:
        return set()
    out: set = set()
    n = 0
    for k, elem in enumerate(w.shape.tuple_shapes):
        leaves = [x for x in ([elem] if not elem.is_tuple else elem.leaves()) if x.is_array]
        if k in inv:
            out.update(range(n, n + len(leaves)))
        n += len(leaves)
    return out


def _relaid_in_copy(instr) -> bool:
    """A cheap elementwise ``instr`` (not :data:`EXPENSIVE`) read by a dot that makes a relayout copy of it
    (:func:`dot_transposed_operands`).  XLA's fuser duplicates such a value into the copy's loop fusion
    (a transpose of it), which reads the value's own operands and which the breadth-first scheduler runs
    as soon as they are ready: the copy is made where the value is (:func:`relayout_intervals`), and the
    value is not computed in place on an operand (the copy still reads that operand).  Read in XLA's
    compiled keras-hub Gemma train step (4 layers, auto_shard's plan, 2x4): the logits' gradient
    ``add_any = scatter + p * exp`` is two loop fusions made one after the other, a ``[B*S, V]`` bitcast for
    the input-gradient dot and its transpose for the embedding's gradient, with the scatter and the
    exponential live until both (4 buffers of 8 MiB at XLA's peak; the model had 2); BENCHMARKS.md round
    20 memtruth."""
    if _kind(instr) not in ELEMENTWISE or _kind(instr) in EXPENSIVE or communicating_pin(instr):
        return False   # (a pin that communicates is a collective: no fusion takes it in)
    for u in effective_users(instr):
        if u.opcode == "dot" and any(_through_forwards(u.operands[k]) is instr for k in dot_transposed_operands(u)):
            return True
    return False


def _resharded_read(operand, user) -> bool:
    """``user`` reads ``operand`` through a local slice (:func:`local_slice` of the two written layouts,
    also through a pin fused into ``user``): the slice is fused into ``user``, which cannot be computed in
    ``operand``'s buffer (another size per device; measured: a replicated exponential read through a
    pin's slice by a sharded multiply, ``tests/test_memory_model.py`` ``PIN_SLICE``).  A read through a
    collective is not one: the collective's result is a buffer of ``user``'s layout, which ``user`` may
    overwrite (``PIN_GATHER``), and that buffer is priced as the edge's (``build.edge_buffers``).
    A read in another dimension order (a transpose folded into ``user``) of another size per device is one
    too: the partitioner reshards between the two layouts, so ``user`` is not made in ``operand``'s buffer
    (MaxText's budgeted plan: a replicated gradient accumulator out of the backward loop read transposed
    by the sharded optimizer update, which the model had computed in the accumulator's buffer and priced
    at the update's 1/8 from the program's start)."""
    if not _same_dims(operand, user):
        return _tile_bytes(operand) != _tile_bytes(user)
    return local_slice(_sharding_of(operand), _sharding_of(user), [int(d) for d in user.shape.dims])


def _tile_bytes(instr) -> int | None:
    """Bytes of ``instr``'s array per device under its written sharding (:func:`_sharding_of`), or None
    where none is written (then no size per device is known: :func:`_resharded_read` compares None alike)."""
    sh = _sharding_of(instr)
    if sh is None:
        return None
    try:
        dims = sh.tile_shape([int(d) for d in instr.shape.dims])
    except ValueError:
        return None
    n = 1
    for d in dims:
        n *= int(d)
    return int(n * instr.shape.element_size)


def _same_array(a, b) -> bool:
    """Same bytes (a transposed operand counts: XLA folds the transpose into its producer)."""
    sa, sb = a.shape, b.shape
    return sa.is_array and sb.is_array and sa.rank == sb.rank and sa.byte_size == sb.byte_size


#: ops XLA's ``IsElementwiseOnOperand`` accepts on the way from a fused parameter to the fusion's root
_ELEMENTWISE_ON_OPERAND = ELEMENTWISE | {"copy", "select", "clamp"}


def _same_layout(a, b) -> bool:
    """Same element type, dims and layout (XLA's ``ShapeUtil::Equal``; no layout written = row major)."""
    sa, sb = a.shape, b.shape
    if not (sa.is_array and sb.is_array and sa.element_type == sb.element_type and tuple(sa.dims) == tuple(sb.dims)):
        return False
    rows = tuple(range(len(sa.dims) - 1, -1, -1))
    la = sa.layout.minor_to_major if sa.layout is not None else rows
    lb = sb.layout.minor_to_major if sb.layout is not None else rows
    return tuple(la) == tuple(lb)


def fusion_in_place_operands(fusion) -> list:
    """The operand indices whose buffer an already formed ``fusion`` may write its result into
    (compiled modules, :func:`is_scheduled`), XLA's ``HloDataflowAnalysis::CanShareOperandBufferWithUser``
    (jaxlib 0.10.2): the operand has the result's shape and layout, and the fusion is a loop or input
    fusion whose fused parameter reaches the root only through ops elementwise on it (XLA's
    ``AreTransitiveUsesElementwiseOrTuple``), or its root is a ``dynamic-update-slice`` whose operand 0
    is that parameter (updated in place).  Output, custom (XNNPACK) and other fusions: none."""
    kind = fusion.attrs.get("kind")
    comps = fusion.called_computations
    if fusion.opcode != "fusion" or kind not in ("kLoop", "kInput") or not comps or not fusion.shape.is_array:
        return []
    comp = comps[0]
    params = comp.parameters
    root = comp.root
    out = []
    for n, o in enumerate(fusion.operands):
        if n >= len(params) or not _same_layout(o, fusion):
            continue
        prm = params[n]
        if root is not None and root.opcode == "dynamic-update-slice" and root.operands and root.operands[0] is prm:
            out.append(n)
            continue
        stack, seen, ok = [prm], set(), True
        while stack and ok:
            x = stack.pop()
            for u in x.users:
                if id(u) in seen:
                    continue
                seen.add(id(u))
                if u.opcode != "tuple" and _kind(u) not in _ELEMENTWISE_ON_OPERAND:
                    ok = False
                    break
                stack.append(u)
        if ok:
            out.append(n)
    return out


def in_place_user(user, operand) -> bool:
    """True when ``user`` may compute in place on ``operand``'s buffer (XLA's buffer sharing for an
    elementwise op or a ``dynamic-update-slice``'s operand 0): same dims and bytes.  Also true for a
    ``tuple`` (a computation's root whose written leaf sharding differs from its operand's: the leaf's
    value is the operand resharded, the collective writes the output buffer itself, no copy beside it;
    the operand's own buffer, which :func:`buffer_intervals` lets the tuple take over, is then live
    until the resharding: :func:`resharded_by_tuple`)."""
    op = _kind(user)
    if op == "dynamic-update-slice":
        return bool(user.operands) and user.operands[0] is operand
    if op == "tuple":
        return True
    return op in ELEMENTWISE and _same_array(operand, user)


def resharded_by_tuple(user, operand, operand_interval) -> bool:
    """True when ``user`` is a ``tuple`` that reshards ``operand`` into a pinned leaf and took over the
    operand's buffer (:func:`buffer_intervals`: the operand's interval ``operand_interval`` is empty and
    it is not fused): the operand's tile is then live from its definition until the tuple, beside the
    leaf's value, which has the leaf's layout (measured, 8 CPU devices: a split ``subtract`` under a
    replicated root leaf is a temp of its tile and the all-gather writes the output)."""
    lo, hi = (int(x) for x in operand_interval)
    return _kind(user) == "tuple" and hi <= lo and not is_fused(operand)


def read_until(instr, positions: dict) -> int | None:
    """The last schedule position at which ``instr``'s value is read once fusion is applied: its users'
    positions, a fused user's replaced by its own readers' (``positions``: ``id(instruction)`` ->
    position).  None when nothing reads it."""
    last = None
    for u in fused_readers(instr.users):
        t = positions.get(id(u))
        if t is not None and (last is None or t > last):
            last = t
    return last


def fused_readers(users) -> list:
    """The instructions that read a buffer once fusion is applied, given the instructions ``users`` that
    use it: each fused one (:func:`is_fused`) replaced by its own users, recursively (each once); one
    ``HloCSE`` merges into another by the one kept (:func:`cse_representative`)."""
    out: list = []
    stack = list(users)
    seen: set = set()
    while stack:
        u = cse_representative(stack.pop())
        if id(u) in seen:
            continue
        seen.add(id(u))
        if is_fused(u):
            stack.extend(_cse_users(u))
        else:
            out.append(u)
    return out


class BufferIntervals(dict):
    """:func:`buffer_intervals`' answer: key -> ``(lo, hi)``, and ``output_slots``, the entry outputs'
    allocations after the module's temporaries were placed in them (:func:`_temps_in_outputs`;
    :func:`place_in_outputs` places a plan's communication buffers in what is left)."""

    output_slots: tuple = ()


def buffer_intervals(order: Sequence, own: Callable[[object], Sequence[Hashable]],
                     values: Callable[[object], Sequence[Hashable]], parameters: Iterable[Hashable] = (),
                     outputs: Iterable[Hashable] = (), donated: Iterable[Hashable] = (),
                     gather_copies: bool = False) -> dict:
    """Key -> ``(lo, hi)``: the half-open schedule interval in which each buffer XLA allocates is live
    (the memory model of the module docstring; an empty interval: no buffer of its own).

    ``order``: the program schedule (:func:`program_schedule`); ``own(instr)``: the keys (leaf values)
    ``instr`` defines itself, leaf order (empty for forwarding instructions: get-tuple-element, tuple,
    a called computation's parameter); ``values(instr)``: the keys of ``instr``'s value, leaf order,
    forwarding resolved; ``parameters``: entry parameter keys (whole run); ``outputs``: entry output
    keys (whole run); ``donated``: output keys that share a parameter's buffer (``input_output_alias``):
    no memory of their own; ``gather_copies``: a ``reduce`` reads the transposed copy of a gather
    (:func:`gather_copy_readers`), not the gather's buffer, and a ``scatter`` its copy of a shared
    destination (:func:`copied_destination`) (the caller prices the copies: :func:`relayout_intervals`,
    :func:`scatter_destination_copies`, as the cost graph does for XLA's CPU backend), and a
    ``select-and-scatter``'s result is live from where its operand is made, the operand not read there
    (:func:`select_and_scatter_expansions`, whose other buffers the caller prices).  Every key of ``own``
    gets an interval."""
    for comp in {id(i.parent): i.parent for i in order if i.parent is not None}.values():
        forget_shardings(comp)
    return _buffer_intervals(order, own, values, parameters, outputs, donated, gather_copies)


@_memoizing
def _buffer_intervals(order, own, values, parameters, outputs, donated, gather_copies) -> dict:
    """:func:`buffer_intervals` once the computations' sharding caches are dropped."""
    pos = {id(i): t for t, i in enumerate(order)}
    fused = {id(i) for i in order if is_fused(i)}
    unbarred = _unbarred(order[0].parent.parent) if order else False   # remat.py

    def defined(i):   # an opt-barrier XLA removed (remat.py) defines nothing: its readers read its operands
        return () if id(i) in fused or (unbarred and removed_barrier(i)) else own(i)

    reads_of: dict = {}

    def read(i):
        if id(i) in fused or (i.opcode in ALIASING_OPCODES and not own(i)) or (unbarred and removed_barrier(i)):
            return ()   # forwarded: its readers read the values it forwards (an opt-barrier: remat.py)
        ops = scheduled_reads(i, fused_reads, is_fused) if unbarred else fused_reads(i)   # remat.py
        if gather_copies and i.opcode == "reduce":   # it reads the gather's transposed copy instead
            ops = [o for o in ops if o.opcode != "gather" or
                   not any(r is i for r in (gather_copy_readers(o) or ((),))[0])]
        elif gather_copies and i.opcode == "scatter" and copied_destination(i, pos) is not None:
            ops = [o for o in ops if o is not i.operands[0]]   # it updates its copy of the destination
        elif gather_copies and i.opcode == "select-and-scatter" and i.operands:   # XLA CPU's expansion reads
            ops = [o for o in ops if o is not i.operands[0]]   # its operand at the reduce-window, where it is made
        reads_of[id(i)] = ops
        return [k for o in ops for k in values(o)]

    params = list(parameters)
    outs = list(outputs)
    iv = live_intervals(order, defined, read, (), ())
    T = max(len(order), 1)
    definer: dict = {}
    for t, i in enumerate(order):   # fused instructions: no buffer
        for k in own(i):
            iv.setdefault(k, (t, t))
            definer.setdefault(k, i)
    if gather_copies:   # XLA CPU: a select-and-scatter's result is the broadcast its expansion makes where the
        for i in order:  # operand is (:func:`select_and_scatter_expansions`)
            lo = _expansion_start(i, pos)
            if lo is not None and id(i) not in fused:
                for k in own(i):
                    if k in iv and iv[k][0] > lo:
                        iv[k] = (lo, iv[k][1])
    defined_at = {k: iv[k][0] for k in iv}   # where each value is first written (outputs: before (0, T))
    for k in params:
        iv[k] = (0, T)
    for k in outs:
        if k in iv:
            iv[k] = (0, T)
    protected = set(params) | set(outs)
    raw = dict(iv)
    # in place (module docstring): union-find over keys that share one buffer
    parent: dict = {}

    def find(k):
        while parent.get(k, k) != k:
            parent[k] = parent.get(parent[k], parent[k])
            k = parent[k]
        return k

    param_set = set(params)
    shares: list = []   # (a, c, elementwise): each sharing, in order

    def share(a, c, read_only: bool = False, elementwise: bool = False) -> None:
        """``c``'s buffer is ``a``'s (``a`` is read last where ``c`` is made, or ``c`` is written by
        a called computation's root ``a``; ``read_only``: ``c`` never writes it, so ``a`` may be a
        parameter; ``elementwise``: ``c`` is an elementwise result computed in place, a buffer of its
        own for XLA's alias analysis, shared only by its buffer assignment)."""
        if a == c or a not in iv or c not in iv or (a in param_set and not read_only):
            return
        shares.append((a, c, elementwise))
        ra, rc = find(a), find(c)
        if ra != rc:
            parent[ra] = rc

    # a compiled module's bitcast is a view of its operand's buffer (XLA's alias analysis): one buffer,
    # read until the last reader of any view (an in-place writer must come after all of them)
    views: set = set()
    for i in order:
        if i.opcode == "bitcast" and id(i) not in fused and i.operands and is_scheduled(i.parent):
            ks, mine = values(i.operands[0]), list(own(i))
            if len(ks) == 1 and len(mine) == 1:
                share(ks[0], mine[0], read_only=True)
                views.add(id(i))
    view_end: dict = {}
    for k in {x for kv in list(parent.items()) for x in kv}:
        r = find(k)
        view_end[r] = max(view_end.get(r, 0), raw.get(k, (0, 0))[1])

    def read_last_at(k, t) -> bool:
        """``k`` (and every view of it) is read last at ``t``."""
        return raw.get(k, (0, 0))[1] == t + 1 and view_end.get(find(k), 0) <= t + 1

    written_at_tuple: set = set()   # root-tuple leaves written by a resharding collective (the tuple's own point)
    for t, i in enumerate(order):
        if id(i) in fused:
            continue
        op = _kind(i)
        mine = list(own(i))
        if not mine:
            continue
        if op == "while":
            passed = _invariant_leaves(i)
            own_set = set(mine)
            taken: set = set()   # init values one state leaf of this loop already took over
            for n, (a, c) in enumerate(zip(values(i.operands[0]) if i.operands else [], values(i))):
                if c not in own_set:   # a leaf the while forwards (captured): nothing of its own
                    continue
                if n in passed:
                    # a loop invariant (the body passes it through): the loop reads the init's buffer
                    share(a, c, read_only=True)
                elif raw.get(a, (0, 0))[1] == t + 1 and a not in protected and a not in taken:
                    share(a, c)
                    taken.add(a)
                else:   # (also one init value of several updated leaves: each but the first a copy)
                    _state_copy_at_init(iv, raw, a, c, param_set, defined_at)
            continue
        if op == "tuple":   # a tuple holding its own (pinned) leaves: a copy of its operands, in place
            srcs = [k for o in i.operands for k in values(_forwarded_source(o, fused))]
            if len(srcs) == len(mine):
                moved = tuple_resharded_leaves(i, fused)
                for n, (a, c) in enumerate(zip(srcs, mine)):
                    if raw.get(a, (0, 0))[1] == t + 1 and a not in protected:
                        share(a, c)
                        if n in moved:
                            written_at_tuple.add(c)
            continue
        if op in ("call", "conditional"):
            # the callee's root values are made in the caller's result buffer
            for comp in i.called_computations:
                if comp.root is None:
                    continue
                for a, c in zip(values(comp.root), mine):
                    d = definer.get(a)
                    if d is not None and d.parent is comp and a not in protected:
                        share(a, c)
            continue
        if op == "bitcast" and id(i) in views:
            continue   # shared above
        if op == "dynamic-update-slice":
            cands = [i.operands[0]] if not is_fused(i.operands[0]) else []
        elif op == "scatter" and i.shape.is_array and len(i.operands) == 3:
            # a scatter updates its destination (through a pin in its layout) in place where the destination
            # is read last: XLA's HloDataflowAnalysis::GetInPlaceInputOutputPairs, one buffer for its alias
            # analysis (keras-hub Mistral's written auto plan: the embedding gradient's zero destination is
            # XLA's ``wrapped_broadcast.1`` in the updated embedding's output allocation, from the forward on)
            d = _forwarded_source(i.operands[0], fused)
            cands = [d] if id(d) not in fused else []
        elif op == "fusion":   # a compiled module's fusion (:func:`fusion_in_place_operands`)
            # (not on a leaf of a tuple that is one value here: a variadic collective's one node)
            cands = [o for o in (i.operands[n] for n in fusion_in_place_operands(i))
                     if all(definer.get(k) is None or definer[k].shape.is_array for k in values(o))]
        elif (op in ELEMENTWISE and not resharding_pin(i) and not _relaid_in_copy(i)   # (see _relaid_in_copy)
              and not written_transposed(i)):
            cands = [o for o in reads_of.get(id(i), ()) if _same_array(o, i) and _transposed_gather(o) is not o
                     and not _resharded_read(o, i) and not gathered_minor(o)]
        else:
            continue
        for o in cands:
            ks = values(o)
            if len(ks) == 1 and read_last_at(ks[0], t) and ks[0] not in protected:
                share(ks[0], mine[0], elementwise=op in ELEMENTWISE)
                break
    classes: dict = {}
    for k in list(parent):
        classes.setdefault(find(k), {k}).add(k)
    for rep, members in classes.items():
        members.add(rep)
    donated_set = set(donated)
    in_temp = _outputs_not_in_place(order, classes, shares, find, raw, defined_at, param_set, donated_set,
                                    [k for k in outs if k in iv and k not in param_set], definer, own)
    holds: set = set()   # the keys that carry a shared buffer's interval for the other members
    written_from = {k: defined_at.get(k, 0) for k in outs}   # an output's allocation holds its value from here
    for rep, members in classes.items():
        keep = next((k for k in members if k in protected), rep)
        for k in members:
            iv[k] = (iv[k][0], iv[k][0])
        if rep in in_temp:
            # the output's operand keeps a temp buffer of its own: the output is written beside it
            rest = sorted(in_temp[rep], key=lambda k: (raw[k], str(k)))
            iv[rest[0]] = (min(raw[k][0] for k in rest), max(raw[k][1] for k in rest))
            holds.update((keep, rest[0]))
            iv[keep] = (0, T)
            continue
        holds.add(keep)
        lo = min(raw[k][0] for k in members if raw[k][1] > raw[k][0])
        hi = max(raw[k][1] for k in members)
        iv[keep] = (0, T) if keep in protected else (lo, hi)
        if keep in written_from and not (members & written_at_tuple):
            # an output computed in place: its allocation holds the chain from its start (not a leaf the
            # root reshards into: the collective writes the allocation at the tuple, :func:`tuple_resharded_leaves`)
            written_from[keep] = min(defined_at.get(k, T) for k in members
                                     if raw[k][1] > raw[k][0] or k == keep)
    # an output's operand that found no output allocation above stays in the temp heap
    in_heap = {min(in_temp[r], key=lambda k: (raw[k], str(k))) for r in in_temp}
    slots = _temps_in_outputs(order, iv, written_from, protected | in_heap, donated_set, definer, own, values)
    for k in donated:   # output in a parameter's buffer: no memory of its own
        if k in iv and k not in set(params):
            iv[k] = (iv[k][0], iv[k][0])
    # a while body's root values are written into the loop state
    for w in order:
        if w.opcode != "while":
            continue
        body = called(w, "body", 0)
        if body is None or body.root is None:
            continue
        state = list(values(w))
        new = list(values(body.root))
        if len(new) != len(state):
            continue
        last: dict = {}
        for i in body.instructions:
            t = pos.get(id(i))
            if t is None or id(i) in fused:
                continue
            for o in reads_of.get(id(i), ()):
                for k in values(o):
                    if last.get(k, -1) < t:
                        last[k] = t
        passed = _invariant_leaves(w)
        for n, (s_key, v) in enumerate(zip(state, new)):
            if v == s_key or v not in iv or v in protected:
                continue
            if n in passed:   # a pinned pass-through of a loop invariant: a copy XLA removes
                if v not in holds:   # (one that carries the invariant's own buffer keeps it)
                    iv[v] = (iv[v][0], iv[v][0])
                continue
            lo, hi = iv[v]
            end = last.get(s_key)
            in_place = False
            for m in classes.get(v, {v}):   # v or a value whose buffer v took over updates the state
                d = definer.get(m)
                if d is not None and _kind(d) in ELEMENTWISE | {"dynamic-update-slice", "tuple"} and \
                        pos.get(id(d)) == end and any(s_key in values(o) for o in reads_of.get(id(d), ())):
                    in_place = True
            if end is None or end < lo or (end == lo and in_place):
                # the old element is dead before v exists (or v overwrites it in place): v lives in the state
                iv[v] = (lo, lo)
            else:
                iv[v] = (lo, max(lo, min(hi, end + 1)))
    out = BufferIntervals(iv)
    out.output_slots = slots
    return out


def tuple_resharded_leaves(tup, fused: set = frozenset()) -> frozenset:
    """Operand positions ``n`` of the ``tuple`` instruction ``tup`` whose written leaf sharding lays the
    array out differently from the operand it reads (through forwarding instructions, ``fused``: ids of the
    instructions with no buffer, :func:`_forwarded_source`): the root's leaf is the operand resharded.

    XLA's SPMD partitioner reshards such an operand for the root (``SpmdPartitioningVisitor::HandleTuple``
    reads each operand in the leaf's sharding: an all-gather, all-to-all or local slice of the operand's
    tile), and buffer assignment puts the collective's result in the entry output's allocation, so the
    output allocation is first written at the tuple, not where the operand is made: until then it is
    free for temporaries (XLA's ``BufferAssigner``, :func:`_temps_in_outputs`; measured, 8 CPU devices:
    a row-split dot read by a replicated root leaf, the dot's all-gathered operand kept in that leaf's
    allocation, ``tests/test_memory_model.py`` ``ROOT_RESHARD``).  Empty where shardings are not written
    (the cost graph before a plan) or a leaf is not an array."""
    sh = getattr(tup, "sharding", None)
    if sh is None or not tup.shape.is_tuple:
        return frozenset()
    out = set()
    for n, o in enumerate(tup.operands):
        if not o.shape.is_array:
            continue
        try:
            leaf = sh.leaf(n)
        except (IndexError, AttributeError):
            continue
        src = _sharding_of(_forwarded_source(o, fused))
        if leaf is None or leaf.is_tuple or src is None:
            continue
        if not (leaf.is_replicated or (leaf.is_tiled and not leaf.has_manual_subgroup)):
            continue
        if leaf != src and not (leaf.is_replicated and src.is_replicated):
            out.add(n)
    return frozenset(out)


def _forwarded_source(instr, fused: set):
    """``instr`` through the forwarding instructions that have no buffer (``fused``: ids; a pin in its
    operand's layout, jax's ``xla.sdy.FuncResultSharding`` on an output): the value whose buffer it is.  A
    root tuple holding its own leaves shares that buffer, not the forwarding instruction's empty one (new
    user 28's ResNet hand plan: each updated weight and momentum read by the root through jax's result
    sharding was counted beside the output leaf, 1.29x XLA's peak)."""
    for _ in range(64):
        if id(instr) not in fused or not _forwards(instr) or not instr.operands:
            break
        instr = instr.operands[0]
    return instr


def _state_copy_at_init(iv: dict, raw: dict, a, c, params: set, defined_at: dict) -> None:
    """A ``while`` state leaf ``c`` whose init value ``a`` the loop does not take over (``a`` is read after
    the loop, or initialises other loops too) is a copy of ``a`` that XLA's ``CopyInsertion`` adds
    (``AddCopiesForWhile``: a loop updates its state in place, so its init must be a buffer of its own);
    XLA's breadth-first scheduler runs that copy as soon as ``a`` exists, so ``c``'s buffer is live from
    ``a``'s definition, not from the loop.  A zero-initialised stack of a scan's residuals or gradient
    accumulator (one ``broadcast`` of a constant for all loops) is therefore live from the program's start.
    Read in XLA's buffer assignment of a Mamba-style LM (``/tmp/nu19/s24.hlo``, 8 CPU devices): one
    ``wrapped_broadcast.2`` and eleven ``copy`` of it, scheduled at points 160-205 of 1,113, each live to
    its loop's end.  An entry parameter's copy is left where the model had it (at the loop; not measured:
    starting it at the program's start gives the same peaks on every sample and Mamba plan).  ``defined_at``: where each
    value is first written (an entry output's interval is the whole run).  Changes ``iv[c]`` and
    ``raw[c]`` in place."""
    if a in params or a not in raw or c not in raw:
        return
    lo = defined_at.get(a, raw[a][0])
    if lo < raw[c][0]:
        raw[c] = (lo, raw[c][1])
        iv[c] = (lo, iv[c][1])


def _post_order_positions(order: Sequence) -> dict:
    """``id(instruction)`` -> position in XLA's ``MakeInstructionPostOrder`` of the module: each
    computation of ``order`` in order of first appearance (the entry first), its instructions in post
    order from its root (:func:`_root_post_order`).  The order ``BufferAssigner`` breaks ties in."""
    pos: dict = {}
    seen: set = set()
    for i in order:
        comp = i.parent
        if comp is None or id(comp) in seen:
            continue
        seen.add(id(comp))
        for j in _root_post_order(comp):
            pos.setdefault(id(j), len(pos))
    return pos


def _logical_bytes(key, definer: dict, own: Callable) -> int:
    """Bytes of the whole (unsharded) array leaf ``key`` of its defining instruction."""
    d = definer.get(key)
    if d is None:
        return 0
    leaves = [x for x in d.shape.leaves() if x.is_array]
    keys = list(own(d))
    if len(keys) == len(leaves) and key in keys:
        return int(leaves[keys.index(key)].byte_size)
    return int(d.shape.byte_size)


def _outputs_not_in_place(order: Sequence, classes: dict, shares: list, find: Callable, raw: dict,
                          defined_at: dict, param_set: set, donated: set, outputs: list, definer: dict,
                          own: Callable) -> dict:
    """The in-place classes of :func:`buffer_intervals` whose entry output XLA does **not** compute in
    place on its operand: class representative -> the keys of that operand (they keep a temp buffer of
    their own, live from the first one's definition to the last one's read).

    XLA's ``BufferAssigner::AssignBuffersForComputations`` (the XLA of jaxlib 0.10.2,
    ``xla/service/buffer_assignment.cc``) takes the buffers largest first, live-out before others of one
    size, then by the earliest post-order position of their values (``CompareSize``, ``CompareLiveOut``,
    ``ComparePosition``).  So every entry output gets its own allocation (exactly its size) before the
    operand it is computed from is placed; that operand -- here the chain the model shares in place into
    the output through an elementwise result (a loop's gradient accumulator: its init, the ``while``
    state and the ``dynamic-update-slice`` updates, one buffer for XLA's alias analysis) -- then takes the
    **newest** existing allocation that is large enough and whose buffers its live range does not
    overlap (``DefaultBufferAllocationsManagerForComputationsWithoutOrdering::TryAssignToExistingAllocation``
    scans from the last allocation made; ``MaybeAssignBuffer`` / ``LiveRangeInterferes``: a range may
    end where another starts only when that one is its user and can share its buffer), and goes to the
    temp heap when none does.  Two accumulators live from the program's start, each read last by its own
    output's update, with the updates run in the outputs' order, therefore end up one in the last
    output's allocation and one in the temp heap (``samples/scan_mlp_train_step``'s GSPMD plan, 8 CPU
    devices: ``while.5{3}``, 524,288 B, in the preallocated temp, ``while.5{2}`` in the other output's
    allocation); run in the reverse order, both are in place.  A donated output (``input_output_alias``)
    is written into its parameter's allocation, which holds the parameter until the update reads it: it
    takes no operand.

    Modelled on the model's schedule (``raw``: half-open intervals before sharing; ``defined_at``: where
    each key is written first): the entry outputs (``outputs``, parameters left out, ``donated`` ones
    hold nothing) as the allocations, the classes with an elementwise sharing (``shares``: ``(a, c,
    elementwise)`` in the order :func:`buffer_intervals` made them; ``find``: its union-find) into an
    output as the operands placed; sizes are the arrays' unsharded bytes (:func:`_logical_bytes`: the
    intervals do not depend on the plan; a plan that tiles an output and its operand alike keeps their
    order).  The other temporaries XLA places in an output's allocation before the output is written
    are placed afterwards (:func:`_temps_in_outputs`); XLA takes all buffers in one size order, so a
    larger temporary can take an allocation before one of these operands does (not modelled); XLA's
    order of the updates where its scheduler's differs from the model's (the order of a ``while``'s
    users, not in the module's text)."""
    ew = [(a, c) for a, c, e in shares if e]
    if not ew or not outputs:
        return {}
    post = _post_order_positions(order)
    big = 1 << 62

    def position(keys) -> int:
        return min((post.get(id(definer[k]), big) for k in keys if k in definer), default=big)

    out_set = set(outputs)
    ew_of: dict = {}   # class representative -> its elementwise sharings, in order
    for a, c in ew:
        ew_of.setdefault(find(c), []).append((a, c))
    adj: dict = {}   # the sharings that are one buffer for XLA's alias analysis (not elementwise)
    for a, c, e in shares:
        if not e and find(a) in ew_of:
            adj.setdefault(a, []).append(c)
            adj.setdefault(c, []).append(a)
    out_value: dict = {}   # output key -> the keys of its own buffer (aliases, not elementwise sharing)
    cand_of: dict = {}     # output key -> (class representative, the keys computed in place into it)
    for rep, pairs in ew_of.items():
        members = classes.get(rep, {rep})
        keep = next((k for k in members if k in out_set), None)
        if keep is None or members & param_set:
            continue
        mine, stack = {keep}, [keep]
        while stack:
            for m in adj.get(stack.pop(), ()):
                if m not in mine:
                    mine.add(m)
                    stack.append(m)
        out_value[keep] = mine
        rest = [k for k in members if k not in mine and raw[k][1] > raw[k][0]]
        if rest and any(a not in mine and c in mine for a, c in pairs):
            cand_of[keep] = (rep, rest)
    if not cand_of:
        return {}
    allocs = []   # (bytes, position, index, key): a donated output is written into its parameter's
    for n, k in enumerate(dict.fromkeys(outputs)):
        if k in donated:
            continue
        allocs.append((_logical_bytes(k, definer, own), position(out_value.get(k, [k])), n, k))
    allocs.sort(key=lambda a: (-a[0], a[1], a[2]))
    occupied: list = []
    for a in allocs:   # the output's own value, from where it is first written
        occupied.append([(min(defined_at.get(k, 0) for k in out_value.get(a[3], [a[3]])), big)])
    cands = []
    for keep, (rep, rest) in cand_of.items():
        lo, hi = min(raw[k][0] for k in rest), max(raw[k][1] for k in rest)
        nbytes = _logical_bytes(keep, definer, own)   # an elementwise result in place: its operand's bytes
        cands.append((-nbytes, position(rest), lo, hi, rep, keep, nbytes, rest))
    cands.sort(key=lambda c: c[:4])
    not_placed: dict = {}
    for _, _, lo, hi, rep, keep, nbytes, rest in cands:
        for a in range(len(allocs) - 1, -1, -1):   # the newest allocation first
            if nbytes > allocs[a][0]:
                continue
            own_out = allocs[a][3] == keep
            ok = True
            for n, (s, e) in enumerate(occupied[a]):
                if n == 0:   # the output itself, from its definition on; its own operand may end there
                    ok = hi <= s + (1 if own_out else 0)
                else:
                    ok = hi <= s or e <= lo
                if not ok:
                    break
            if ok:
                occupied[a].append((lo, hi))
                break
        else:
            not_placed[rep] = rest
    return not_placed


def _written_bytes(key, definer: dict, own: Callable) -> int | None:
    """Bytes per device of value ``key`` under the sharding written on its defining instruction (a
    tuple's leaf sharding for a tuple leaf, e.g. the root tuple's outputs), or None when no array
    sharding naming tiles is written there (a plan not yet chosen: the solver's cost graph)."""
    d = definer.get(key)
    if d is None:
        return None
    if d.shape.is_array:
        sh = _sharding_of(d)
        return None if sh is None else bytes_per_device(d.shape, sh)
    leaves = [x for x in d.shape.leaves() if x.is_array]
    keys = list(own(d))
    sh = getattr(d, "sharding", None)
    if sh is None or len(keys) != len(leaves) or key not in keys:
        return None
    n = keys.index(key)
    leaf = sh.leaf(n) if sh.is_tuple else sh
    if leaf is None or not (leaf.is_replicated or (leaf.is_tiled and not leaf.has_manual_subgroup)):
        return None
    return bytes_per_device(leaves[n], leaf)


def _output_bytes(order: Sequence, values: Callable) -> dict:
    """Output key -> its allocation's bytes per device: the entry root's leaf under the root's written
    sharding (the layout the output leaves in, whatever layout its value is computed in), for the
    leaves whose root sharding names tiles or is replicated."""
    root = order[0].parent.root if order and order[0].parent is not None else None
    if root is None or getattr(root, "sharding", None) is None:
        return {}
    leaves = [x for x in root.shape.leaves() if x.is_array] if root.shape.is_tuple else [root.shape]
    keys = list(values(root))
    if len(keys) != len(leaves):
        return {}
    out: dict = {}
    for n, (k, leaf) in enumerate(zip(keys, leaves)):
        sh = root.sharding.leaf(n) if root.sharding.is_tuple else root.sharding
        if k not in out and sh is not None and (sh.is_replicated or
                                                (sh.is_tiled and not sh.has_manual_subgroup)):
            out[k] = bytes_per_device(leaf, sh)
    return out


def _temps_in_outputs(order: Sequence, iv: dict, written_from: dict, protected: set, donated: set,
                      definer: dict, own: Callable, values: Callable) -> tuple:
    """Temporaries XLA keeps in an entry output's allocation before that output is written: their
    intervals in ``iv`` are set empty (the output's bytes are counted over the whole run).  Returns
    ``(allocations, placed)``: each output allocation as ``(bytes per device, (lo, hi) of its output)``
    (oldest first) and each temporary placed as ``(lo, hi, bytes, key)``, for a plan's own buffers
    (:func:`place_in_outputs`).

    XLA's ``BufferAssigner::AssignBuffersForComputations`` (jaxlib 0.10.2, ``buffer_assignment.cc``)
    takes the buffers largest first (live-out first among equals, then by post-order position) and
    tries each on the existing allocations, newest first, before it defers a temporary to the heap
    simulator; at that point the only allocations a temporary may share are the entry outputs' (a
    parameter's is read-only, the heap is built afterwards).  A temporary fits an output's allocation
    when its bytes per device are at most the allocation's and its live range overlaps no buffer
    already there: the output's own value from where it (or the chain computed in place into it,
    ``written_from``) is first written, and the temporaries placed before it (an operand the output's
    writer computes in place on is already in that chain: the in-place rule above).  Measured
    (BENCHMARKS.md, round 17): keras-hub Gemma's ``auto_shard`` plans, whose outputs are large replicated
    weights, keep 1.5 MB (``gemma_small``) and 25.7 MB (4 layers) of forward activations in output
    allocations at XLA's peak.

    Sizes are per device under the written shardings: a temporary's by its instruction's
    (:func:`_written_bytes`), an output allocation's by the root's leaf (:func:`_output_bytes`; by its
    value's instruction where the root has none written); a value or output with none written (the
    solver's cost graph, built before a plan exists) takes no part, so that view keeps every temporary
    in the heap (an over-estimate) and the written module's evaluation, which ``solve`` reports, places
    them.  Parameters, outputs, donated outputs and the keys in
    ``protected`` are never placed; donated outputs hold no allocation of their own."""
    post = _post_order_positions(order)
    big = 1 << 62
    allocs = []
    out_bytes = _output_bytes(order, values)
    for n, k in enumerate(written_from):
        size = None if k in donated or k not in iv else out_bytes.get(k, _written_bytes(k, definer, own))
        if size:
            allocs.append((size, post.get(id(definer.get(k)), big), n, k))
    if not allocs:
        return (), ()
    allocs.sort(key=lambda a: (-a[0], a[1], a[2]))
    slots = [(a[0], [(written_from[a[3]], big)]) for a in allocs]
    temps = []
    for k, (lo, hi) in iv.items():
        if hi > lo and k not in protected and k in definer:
            size = _written_bytes(k, definer, own)
            if size:
                temps.append((-size, post.get(id(definer[k]), big), lo, hi, k))
    temps.sort(key=lambda c: c[:4])
    placed = []
    for negb, _, lo, hi, k in temps:
        if _place(slots, -negb, lo, hi):
            iv[k] = (lo, lo)
            placed.append((lo, hi, -negb, k))
    return tuple((size, occ[0]) for size, occ in slots), tuple(placed)


def _place(slots: list, size: int, lo: int, hi: int) -> bool:
    """Put a temporary of ``size`` bytes per device live over ``[lo, hi)`` into the first allocation of
    ``slots`` (``[(bytes, [occupied (lo, hi)])]``, oldest first) that it fits, trying the newest first
    (XLA's ``BufferAssigner``: :func:`_temps_in_outputs`); True when placed (its interval then occupies
    that allocation)."""
    for a in range(len(slots) - 1, -1, -1):   # the newest allocation first
        if size > slots[a][0]:
            continue
        if all(hi <= s or e <= lo for s, e in slots[a][1]):
            slots[a][1].append((lo, hi))
            return True
    return False


def place_in_outputs(slots, intervals: Sequence, sizes: Sequence, dead: dict | None = None) -> list:
    """Which of the buffers ``intervals`` / ``sizes`` (half-open schedule intervals, bytes per device; a
    plan's communication buffers and layout copies, :func:`hloshard.autoshard.build.edge_buffers`) XLA
    keeps in an entry output's allocation before that output is written: one boolean per buffer.

    ``slots``: :attr:`BufferIntervals.output_slots`, each output allocation with its output's interval
    and the module's own temporaries :func:`_temps_in_outputs` put there; ``dead``: key -> the point a
    placed temporary is dead at, earlier than its interval says (a dot's operand the plan gathers and
    copies: only the copy is live at the dot), its place free from there.  The rule of
    :func:`_temps_in_outputs` (XLA's ``BufferAssigner::AssignBuffersForComputations``: largest first,
    then the earliest, each on the newest allocation it fits by bytes per device and overlaps nothing
    already there), in what the module's temporaries left: those are placed when the intervals are
    built, before a plan's buffers exist, and keep their places (XLA takes both kinds in one size
    order: a larger buffer of the plan may take a smaller temporary's place there, which this does not
    model).  Measured: keras-hub Llama's written module (round 23's ``auto_expert`` plan) keeps the
    embedding gradient's ``[8192,512]`` partial sums (16 MiB per device, the dot's all-reduce operand) in
    the allocation of the replicated gradient output its transpose writes later; so does
    ``tests/test_memory_model.py``'s ``DOT_GATHER_REDUCE``.  Buffers of size <= 0 or empty intervals
    are never placed."""
    placed = [False] * len(sizes)
    if not slots or not slots[0]:
        return placed
    allocs, temps = slots
    dead = dead or {}
    work = [(size, [start]) for size, start in allocs]
    for lo, hi, b, key in temps:
        end = dead.get(key)
        if end is not None and lo < end and hi == end + 1:
            hi = end
        _place(work, b, lo, hi)
    order = sorted((i for i in range(len(sizes)) if sizes[i] > 0 and intervals[i][1] > intervals[i][0]),
                   key=lambda i: (-int(sizes[i]), int(intervals[i][0]), int(intervals[i][1]), i))
    for i in order:
        placed[i] = _place(work, int(sizes[i]), int(intervals[i][0]), int(intervals[i][1]))
    return placed


#: element types whose loop invariants XLA's CPU backend holds in f32 for the loop (module docstring, *While
#: loops*): measured bf16 yes, f16 and f32 no (hand scans, 8 CPU devices off, jaxlib 0.10.2)
CPU_F32_LOOP_INVARIANTS = frozenset({"bf16"})


def _element_source(instr, k: int):
    """``(instruction, index path, is_entry_parameter)``: what makes element ``k`` of the tuple value
    ``instr`` (the element at that tuple index path of its result), through ``tuple`` /
    ``get-tuple-element`` and forwarding copies / bitcasts."""
    path = [int(k)]
    for _ in range(256):
        op = instr.opcode
        if op == "tuple" and path and instr.operands and path[-1] < len(instr.operands):
            instr = instr.operands[path.pop()]
            continue
        if op == "get-tuple-element" and instr.operands:
            path.append(int(str(instr.attrs.get("index"))))
            instr = instr.operands[0]
            continue
        if not path and (_kind(instr) in ("copy", "bitcast") or _forwards(instr)) and instr.operands:
            instr = instr.operands[0]
            continue
        break
    entry_param = op == "parameter" and instr.parent is not None and getattr(instr.parent, "is_entry", False)
    return instr, tuple(path), entry_param


def _passed_to_root(instr, root) -> bool:
    """``instr`` is the loop body's ``root`` or a ``Sharding`` custom-call only the root reads (through more
    of them): ``solve``'s pin keeping a loop invariant in the state (:func:`hloshard.strategy.realize.
    keep_invariants`), which the SPMD partitioner drops -- a pass-through, not a read of the element."""
    seen = 0
    while instr is not root and seen < 64:
        if not instr.is_sharding_constraint or len(instr.users) != 1:
            return False
        instr, seen = instr.users[0], seen + 1
    return instr is root


def widened_invariants(order: Sequence, entry=None, positions: dict | None = None) -> list:
    """The f32 copies XLA's CPU backend makes of the bf16 loop invariants of each ``while`` (module
    docstring, *While loops*), as ``[(while, leaf, lo, hi, factor)]``: the invariant is flat leaf ``leaf`` of
    the while's state (:func:`hloshard.hlo.loops.invariant_elements`, of a type in
    :data:`CPU_F32_LOOP_INVARIANTS`, read in the body by something other than its root), and besides the
    buffers the model already has, a buffer of ``factor`` times that leaf's bytes per device is live over
    ``[lo, hi)``: from the point its source is made (XLA's breadth-first scheduler runs the convert as soon
    as it can) to the end of the loop's body and condition in ``order``.  ``factor`` is 1 (the f32 copy is
    twice the bf16 buffer, which dies at the convert while the model keeps it to its last read in the loop)
    or 2 when the source is an entry parameter (``entry``: the entry computation), which stays.
    Measured: a bf16 ``f32[8, 2^18]``-sized stack read by ``lax.scan`` (elementwise, a dot, or moved
    only) costs an f32 copy of the whole stack in XLA's temp (8,388,740 B; f16 and f32 none); MaxText's
    backward loop reads six bf16 activation stacks of its forward loop as f32 ``wrapped_convert``
    buffers (2.89 GB per device of its 10.08 GB temp).  XLA's CPU compiler computes bf16 in f32 (float
    normalization) and ``WhileLoopInvariantCodeMotion`` hoists the invariant convert out of the loop.
    One value read by several loops (a scan's stacked weights in the forward and the backward loop) is
    one copy over the hull of their intervals (XLA's ``HloCSE`` merges the identical converts; held-out
    bf16 scan train step: two f32 weight copies live across both loops, not four), listed at its first
    loop."""
    pos = positions if positions is not None else {id(i): t for t, i in enumerate(order)}
    out: list = []
    by_source: dict = {}
    for w in order:
        if w.opcode != "while" or not w.shape.is_tuple or not w.operands:
            continue
        body = called(w, "body", 0)
        t = pos.get(id(w))
        if body is None or t is None or not body.parameters:
            continue
        inv = set(invariant_elements(w, through_pins=True))
        if not inv:
            continue
        read: set = set()
        for u in body.parameters[0].users:
            if u.opcode == "get-tuple-element" and any(not _passed_to_root(x, body.root) for x in u.users):
                read.add(int(str(u.attrs.get("index"))))
        ends = [pos[id(i)] for c in called_in_order(w) for i in c.instructions if id(i) in pos]
        hi = max([t] + ends) + 1
        flat = 0
        for k, elem in enumerate(w.shape.tuple_shapes):
            width = len(elem.leaves()) if elem.is_tuple else 1
            if k in inv and k in read and elem.is_array and elem.element_type in CPU_F32_LOOP_INVARIANTS:
                src, path, param = _element_source(w.operands[0], k)
                if param and (entry is None or src.parent is entry):
                    lo, factor = 0, 2
                else:
                    s = pos.get(id(src))
                    if src.opcode == "while":
                        s = max([s if s is not None else t] + [pos[id(i)] for c in called_in_order(src)
                                                                for i in c.instructions if id(i) in pos])
                    lo, factor = (t if s is None or s > t else s + 1), 1
                key = (id(src), path)
                have = by_source.get(key)
                if have is None:
                    by_source[key] = len(out)
                    out.append([w, flat, min(lo, t), hi, factor])
                else:
                    have = out[have]
                    have[2], have[3] = min(have[2], lo, t), max(have[3], hi)
            flat += width
    return [tuple(x) for x in out]


def _gather_permutation(instr) -> list:
    """The output dimensions (of size > 1) of the ``gather`` ``instr`` in the order XLA's canonical gather
    writes them: the batch dimensions (those not in ``offset_dims``) first, then the offset dimensions,
    each group in order (XLA's ``GatherSimplifier``; a transpose restores the gather's own order).  The
    sizes are per device under a written sharding (a dimension split down to 1 moves for free: the
    transpose is a bitcast), else the whole array's."""
    dims = instr.shape.dims
    sh = _sharding_of(instr)
    if sh is not None:
        try:
            dims = sh.tile_shape(dims)
        except ValueError:
            pass
    offset = sorted(int(d) for d in (instr.attrs.get("offset_dims") or ()))
    batch = [d for d in range(len(dims)) if d not in offset]
    return [d for d in batch + offset if int(dims[d]) > 1]


def _transposed_gather(o):
    """``o`` (looked through forwarding copies that keep its written sharding) when it is a
    non-canonical ``gather`` (:func:`_gather_permutation` not in order: XLA computes it as a canonical
    gather and a transpose), else None."""
    while _forwards(o) and o.operands and _sharding_of(o) == _sharding_of(o.operands[0]):
        o = o.operands[0]
    if o.opcode != "gather" or not o.shape.is_array:
        return None
    perm = _gather_permutation(o)
    return o if perm != sorted(perm) else None


def _trivially_rearranged(o) -> bool:
    """A constant or a broadcast of a scalar (XLA's ``ReshapeMover``: it changes shape for free)."""
    while _forwards(o) and o.operands:
        o = o.operands[0]
    k = _kind(o)
    return k == "constant" or (k == "broadcast" and bool(o.operands) and o.operands[0].shape.is_array
                               and o.operands[0].shape.rank == 0)


def _direct_users(g) -> list:
    """The users of ``g`` that XLA's partitioned module has: forwarding copies that keep ``g``'s
    written sharding looked through (a pin that reshards is a slice or a collective: a user)."""
    out: list = []
    stack = list(g.users)
    while stack:
        u = stack.pop()
        if _forwards(u) and _sharding_of(u) == _sharding_of(g):
            stack.extend(u.users)
        elif all(u is not x for x in out):
            out.append(u)
    return out


@_per_computation("_hloshard_kept_gather_transposes")
def _kept_transposes(comp) -> set:
    """The ids of the non-canonical gathers of ``comp`` whose transpose XLA's ``ReshapeMover`` does not
    sink: an elementwise user is a candidate when each of its operands is a non-canonical gather of the
    same permutation and dimensions or trivially rearranged (:func:`_trivially_rearranged`); while a
    transpose has a user that is no candidate, every user of it stops being one (the pass's fixpoint);
    what remains is sunk, the other transposes stay."""
    gathers = [i for i in comp.instructions if _transposed_gather(i) is i]
    if not gathers:
        return set()
    users = {id(g): _direct_users(g) for g in gathers}
    cand: set = set()
    for g in gathers:
        for u in users[id(g)]:
            if _kind(u) not in ELEMENTWISE or id(u) in cand:
                continue
            ok = True
            for o in u.operands:
                t = _transposed_gather(o)
                if t is not None:
                    ok = ok and _gather_permutation(t) == _gather_permutation(g) and \
                        list(t.shape.dims) == list(g.shape.dims)
                else:
                    ok = ok and _trivially_rearranged(o)
            if ok:
                cand.add(id(u))
    changed = True
    while changed:
        changed = False
        for g in gathers:
            us = users[id(g)]
            if any(id(u) not in cand for u in us) and any(id(u) in cand for u in us):
                for u in us:
                    cand.discard(id(u))
                changed = True
    return {id(g) for g in gathers if not users[id(g)] or any(id(u) not in cand for u in users[id(g)])}


def gather_relayouts(order: Sequence, positions: dict | None = None) -> list:
    """The transposed copies XLA's CPU backend makes of non-canonical gathers, as
    ``[(reader, k, lo, hi)]``: besides the model's buffer of the gather (its tile), a copy of the gather
    in the layout its operand ``k`` of ``reader`` has (the first instruction on the way to a ``reduce``
    that reads it: the copy fuses that reader's local slice, if any) is live over ``[lo, hi)``, from just
    after the gather to the last ``reduce`` reading it.

    XLA's ``GatherSimplifier`` computes a gather whose output dimensions (of size > 1) are not in the
    canonical order -- batch dimensions first, then ``offset_dims`` (:func:`_gather_permutation`; e.g.
    a GNN's edge gather ``h[:, src, :]`` of ``h: [B, N, H]`` writes ``[E, B, H]``) -- as a canonical
    gather and a transpose.  ``ReshapeMover`` sinks that transpose past the gather's elementwise users
    only when every user of it can take it (:func:`_kept_transposes`); otherwise the transpose
    stays, layout assignment makes it a bitcast of the canonical buffer, loop fusions read that buffer
    directly, and a ``reduce`` (an XNNPACK fusion, which fuses no transpose) that reads it, directly or
    through fused elementwise producers (:func:`fused_reads`), reads a row-major copy
    (``transpose_copy_fusion``), made once (``HloCSE``) and kept until the last such reduce.  When the
    reduces are the gather's only readers, the gather fuses into the copy: one buffer, the model's own,
    no second one.  Read in XLA's buffer assignment of new user 17's GNN (8 CPU devices, its
    ``auto_shard`` plan): each ``f32[16,512,256]`` edge gather is a ``[512,4,1,128]`` gather fusion plus a
    ``[4,512,128]`` transposed copy read by the gate's ``reduce_sum``, four such copies (1 MiB each) live
    at XLA's peak; reproduced on a hand gather (a gate of ``sum(g * g2)`` multiplying ``g``: a copy; the
    same with a scalar instead of the gate, or ``g`` read by the reduce alone: none).  ``order``: the
    program schedule; ``positions``: ``id(instruction)`` -> position (built from ``order`` when None)."""
    pos = positions if positions is not None else {id(i): t for t, i in enumerate(order)}
    out: list = []
    for comp in {id(i.parent): i.parent for i in order if i.opcode == "gather" and i.parent is not None}.values():
        forget_shardings(comp)
    for g in order:
        if g.opcode != "gather" or id(g) not in pos:
            continue
        hit = gather_copy_readers(g)
        if hit is None:
            continue
        reduces, reader, k = hit
        ends = [pos[id(r)] for r in reduces if id(r) in pos]
        if ends:
            t = pos[id(g)]
            out.append((reader, k, t + 1, max(max(ends) + 1, t + 2)))
    return out


def gather_copy_readers(g) -> tuple | None:
    """``(reduces, reader, k)`` when XLA's CPU backend makes a transposed copy of the ``gather`` ``g``
    (:func:`gather_relayouts`): the ``reduce`` instructions that read the copy instead of ``g``'s own
    buffer, and the direct user ``reader`` of ``g`` on the way to the first of them with ``g`` (or a
    forwarding copy of it) its operand ``k``; None when no copy is made (a canonical gather, a transpose
    that sinks, no reduce reading it, or reduces its only readers: the gather then fuses into the copy,
    one buffer)."""
    if not g.shape.is_array or _transposed_gather(g) is not g or id(g) not in _kept_transposes(g.parent):
        return None
    reduces: list = []
    first = None
    others = False
    for d in effective_users(g):   # the readers of g's buffer once fusion is applied, by direct user
        ks = [k for k, o in enumerate(d.operands) if o is g or (_forwards(o) and _source(o) is g)]
        readers = fused_readers([d])
        hit = [u for u in readers if u.opcode == "reduce"]
        others = others or len(hit) < len(readers)
        reduces += [r for r in hit if all(r is not x for x in reduces)]
        if hit and ks and first is None:
            first = (d, ks[0])
    if not reduces or not others or first is None:
        return None
    return reduces, first[0], first[1]


def one_buffer_per_reshard(buffers: Iterable[tuple]) -> list:
    """The resharded copies of a plan as the buffers XLA makes (module docstring, *Communication
    buffers*: one per value, target layout and computation).  ``buffers``: ``(key, lo, hi, nbytes)``, one
    per consumer that reads a value in a layout other than its own, ``key`` naming the computation, the
    value (instruction and leaf) and the layout it is read in; ``[lo, hi)`` the schedule interval in which
    that consumer's copy is live, ``nbytes`` its bytes per device.  Returns ``[(lo, hi, nbytes)]``: one per
    key, over the hull of its intervals (the first consumer makes it, the last frees it), in the order of
    the keys' first appearance.  Raises ValueError when one key is given two sizes."""
    merged: dict = {}
    for key, lo, hi, nbytes in buffers:
        have = merged.get(key)
        if have is None:
            merged[key] = [int(lo), int(hi), int(nbytes)]
            continue
        if have[2] != int(nbytes):
            raise ValueError(f"one resharded value, two sizes: {have[2]} and {int(nbytes)} bytes ({key!r})")
        have[0], have[1] = min(have[0], int(lo)), max(have[1], int(hi))
    return [tuple(v) for v in merged.values()]


def made_at_entry_start(instr, entry) -> bool:
    """True when a resharding of ``instr``'s value is made at the start of the program (schedule
    position 0; module docstring, *Communication buffers*): ``instr`` is a parameter of the ``entry``
    computation, possibly through forwarding copies, reshapes, bitcasts and identity custom calls
    (:data:`IDENTITY_CUSTOM_CALLS`).  Such a buffer depends on nothing computed, and XLA's CPU
    scheduler puts it first."""
    seen = 0
    while instr is not None and seen < 64:
        if instr.opcode == "parameter":
            return instr.parent is entry
        if _kind(instr) in ("copy", "reshape", "bitcast") and instr.operands:
            instr = instr.operands[0]
            seen += 1
            continue
        src = barrier_source(instr) if _unbarred(entry.parent) else None
        if src is not None:   # an opt-barrier's element: XLA removed the barrier (remat.py)
            instr = src
            seen += 1
            continue
        return False
    return False


def dot_transposed_operands(instr) -> list:
    """Operand numbers of the ``dot`` ``instr`` whose relayout XLA materialises as a copy of the operand
    beside it while the dot runs (a buffer of the operand's size at the dot).

    XLA's ``DotDecomposer`` rewrites a dot that is not canonical (an operand with more than one
    contracting or non-contracting dimension, or batch dimensions that do not lead) into canonical
    form -- lhs ``[batch, non-contracting, contracting]``, rhs ``[batch, contracting, non-contracting]``,
    each group in the order the dimension numbers list it -- by transposing an operand whose
    dimensions (those of size > 1) are in another order; e.g. a weight gradient ``btd,btf->df``
    transposes its lhs.  A canonical dot (e.g. ``bd,bf->df``) is left alone: the GEMM reads a
    transposed operand itself.  So is an operand of a non-canonical dot whose batch dimensions lead
    and that has at most one contracting and one free dimension (e.g. the expert weight ``edf`` of
    ``edf,bsed->...``, the other operand's batch dimension not leading): its canonical transpose only
    swaps the two minor dimensions, and XLA's ``TransposeFolding`` folds it back into the dot's
    dimension numbers (measured on ``samples/moe_layer``: XLA's ``dot.5`` reads the parameter itself).  The transpose costs no buffer
    when the operand's producer can write the transposed layout itself (XLA's layout assignment gives
    it that layout): when this dot alone reads it (through forwarding copies / reshapes), or when every
    reader of it is a dot that reads it through this one transpose (:func:`written_transposed`), and it is
    not an entry parameter (whose layout is the caller's); else it is a copy.
    Empty for other opcodes and non-array operands."""
    if not _decomposed_dot(instr):
        return []
    out = []
    for k in (0, 1):
        if relayout_key(instr, k) is None:
            continue
        src = _through_forwards(instr.operands[k])
        readers = effective_users(src)
        if src.opcode != "parameter" and len(readers) == 1 and readers[0] is instr and \
                not _gathered_in_default_layout(src):
            continue
        if written_transposed(src):
            continue
        out.append(k)
    return out


def _gathered_in_default_layout(src) -> bool:
    """True when ``src`` is a :func:`communicating_pin` that gathers only along its leading tiled
    dimensions (every dimension before the first one gathered has extent 1 per device): XLA's partitioner
    makes it an ``all-gather`` whose result has the default (row-major) layout, which the CPU layout
    assignment gives a collective and no consumer's layout reaches back through, so a ``DotDecomposer``
    transpose of it is a copy beside the gathered buffer, also when that dot is its only reader
    (:func:`dot_transposed_operands`; measured, 8 CPU devices, ``tests/test_memory_model.py``
    ``PIN_GATHER_DOT``: the gathered ``[16,128,512]`` and its ``copy_bitcast_fusion`` ``[512,2048]`` live
    together at the dot; keras-hub Gemma's written ``auto_expert`` plan: the logits' gradient gathered
    over the batch for the embedding's gradient dot, 2 x 16 MiB at XLA's peak).  A pin that gathers a
    later dimension is copied for that gather already (the copy after the all-gather,
    :func:`hloshard.autoshard.build._relayout_bytes`, one loop fusion with the transpose): False.  Only for
    a module planned for XLA CPU (:func:`set_fusion_backend`): the TPU compiler's layout assignment was not
    measured for it."""
    gathered = _cpu_pin_gathers(src)
    return gathered is not None and all(int(x) == 1 for x in gathered[1][:gathered[0]])


def _cpu_pin_gathers(src):
    """``(first, tile)`` for a :func:`communicating_pin` that all-gathers, in a module planned for XLA CPU (the
    layouts below were measured on it only): the first dimension it gathers and its per-device tile after the
    gather; None for anything else (no gather, another backend, a sharding that does not tile ``src``)."""
    if not communicating_pin(src) or not src.shape.is_array or \
            fusion_backend(getattr(src.parent, "parent", None)) != "cpu":
        return None
    have, need = _sharding_of(src.operands[0]), _sharding_of(src)
    if have is None or need is None:
        return None
    dims = [int(d) for d in src.shape.dims]
    try:
        a, b = have.tile_shape(dims), need.tile_shape(dims)
    except ValueError:
        return None
    gathered = [d for d in range(len(dims)) if int(b[d]) > int(a[d])]
    return (min(gathered), b) if gathered else None


def gathered_minor(src) -> bool:
    """True when ``src`` is a :func:`communicating_pin` that all-gathers along a dimension that is not its most
    major one: some dimension before the first one gathered has extent > 1 per device (the complement of :func:`_gathered_in_default_layout` among gathering pins), in a module planned for
    XLA CPU.  XLA CPU gathers it with the gathered dimension major (``all-gather`` ``{0,1}`` of a ``[a, b]``
    gathered on ``b``), so an elementwise reader, whose result is row-major, is never computed in its buffer
    (:func:`buffer_intervals`; measured, round 37 loopmem: ``tanh`` of such a gathered weight read by a dot is
    XLA's ``copy_tanh_fusion``, a buffer beside the gathered one, where the model had put it in place: 344,064
    against XLA's 606,212), and a reader that needs the default layout reads a copy (:func:`relayout_readers`)."""
    gathered = _cpu_pin_gathers(src)
    return gathered is not None and any(int(x) > 1 for x in gathered[1][:gathered[0]])


def _decomposed_dot(instr) -> bool:
    """True for a ``dot`` of two arrays that XLA's ``DotDecomposer`` rewrites (transposes its operands
    into canonical order); False for other opcodes and for dots already canonical (batch dims leading,
    at most one non-contracting and one contracting dim each beside them: the GEMM reads either operand
    order itself)."""
    if instr.opcode != "dot" or len(instr.operands) < 2 or not all(o.shape.is_array for o in instr.operands[:2]):
        return False
    attrs = instr.attrs
    lb, rb = list(attrs.get("lhs_batch_dims") or ()), list(attrs.get("rhs_batch_dims") or ())
    lc = list(attrs.get("lhs_contracting_dims") or ())
    ranks = [len(instr.operands[0].shape.dims), len(instr.operands[1].shape.dims)]
    leading = [int(d) for d in lb] == list(range(len(lb))) and [int(d) for d in rb] == list(range(len(rb)))
    return not (ranks[0] <= len(lb) + 2 and ranks[1] <= len(rb) + 2 and (lb or lc) and leading)


def relayout_key(instr, k: int) -> tuple | None:
    """``(dims, order)`` of the transpose XLA's ``DotDecomposer`` makes of operand ``k`` of the ``dot``
    ``instr`` (the operand's dims as the dot reads it, and its dimensions in canonical order: lhs
    ``[batch, non-contracting, contracting]``, rhs ``[batch, contracting, non-contracting]``); None when
    the dot reads the operand as it is (:func:`dot_transposed_operands`: canonical dots, an operand whose
    transpose only swaps its two minor dimensions, an order that is already the operand's once its
    dimensions of size 1 are left out).  Two reads with one key are one transpose after XLA's ``HloCSE``,
    whether each reads it as lhs or as rhs."""
    if not _decomposed_dot(instr):
        return None
    attrs = instr.attrs
    batch_key, contract_key = (("lhs_batch_dims", "lhs_contracting_dims"),
                               ("rhs_batch_dims", "rhs_contracting_dims"))[k]
    dims = instr.operands[k].shape.dims
    batch = [int(d) for d in (attrs.get(batch_key) or ())]
    contract = [int(d) for d in (attrs.get(contract_key) or ())]
    free = [d for d in range(len(dims)) if d not in batch and d not in contract]
    if batch == list(range(len(batch))) and len(contract) <= 1 and len(free) <= 1:
        # batch dimensions leading and one contracting / one free dimension: DotDecomposer's
        # transpose of this operand only swaps its two minor dimensions, which XLA's TransposeFolding
        # folds back into the dot's dimension numbers (the GEMM reads either order): no copy
        return None
    canonical = batch + (free + contract if k == 0 else contract + free)
    order = [d for d in canonical if int(dims[d]) > 1]
    if order == sorted(order):
        return None
    return tuple(int(d) for d in dims), tuple(canonical)


def written_transposed(src) -> bool:
    """True when ``src`` (not an entry parameter) is read only by dots, each through the one transpose
    :func:`relayout_key` of the same key (two or more reads): XLA's ``HloCSE`` makes those transposes
    one instruction, the only user of ``src``, and ``src`` is made in the transposed layout (a cheap
    producer fused into the transpose's loop fusion, another given that layout): one buffer, no copy
    beside it, and not computed in place on an operand of the untransposed layout.  Read in XLA's
    compiled keras-hub BERT train step (auto_shard's plan, 2x4): an attention value ``add`` read by the
    forward ``probs . v`` dot as lhs and by the backward dot as rhs, both in order ``[b, h, d, s]``, is one
    ``transpose_copy_fusion``; the model held the ``add`` and two copies (BENCHMARKS.md, round 21 memtruth)."""
    keys = transposed_reads(src)
    return keys is not None and len(keys) == 1 and sum(keys.values()) > 1


def transposed_reads(src) -> dict | None:
    """``{relayout_key: reads}`` when every reader of ``src`` (through forwarding users; ``src`` not an
    entry parameter) is a dot that reads it through a ``DotDecomposer`` transpose (:func:`relayout_key`
    not None); else None.  Such a value is needed only transposed: with one key it is made in that layout
    (:func:`written_transposed`); with several, a cheap elementwise one is computed in each transpose's
    loop fusion (:func:`_relaid_in_copy`) and never on its own (:func:`relayout_intervals`)."""
    if src.opcode == "parameter" or not src.shape.is_array:
        return None
    keys: dict = {}
    for u in effective_users(src):
        if u.opcode != "dot" or u.parent is not src.parent:
            return None
        for j in (0, 1):
            if j < len(u.operands) and _through_forwards(u.operands[j]) is src:
                key = relayout_key(u, j)
                if key is None:
                    return None
                keys[key] = keys.get(key, 0) + 1
    return keys or None


def relayout_intervals(order: Sequence, positions: dict | None = None, gathers: bool = True) -> list:
    """The operand copies :func:`dot_transposed_operands` makes, as ``[(dot, k, lo, hi)]``: one per
    operand value and canonical order (XLA's ``HloCSE`` makes identical transposes of one value one
    copy), live over ``[lo, hi)`` from the first dot reading it (from the value itself for a cheap
    elementwise value, :func:`_relaid_in_copy`) to the last (``dot`` / ``k``: the first
    such dot and its operand number, whose layout gives the copy's size); with ``gathers`` (XLA's CPU
    backend), then the transposed copies of non-canonical gathers (:func:`gather_relayouts`), in the
    same form (``dot`` is the reader whose operand ``k`` in its layout sizes the copy).  ``order``: the program
    schedule; ``positions``: ``id(instruction)`` -> position (built from ``order`` when None)."""
    pos = positions if positions is not None else {id(i): t for t, i in enumerate(order)}
    groups: dict = {}
    for i in order:
        if i.opcode != "dot":
            continue
        t = pos.get(id(i))
        if t is None:
            continue
        for k in dot_transposed_operands(i):
            src = i.operands[k]
            while _forwards(src) and src.operands:
                src = src.operands[0]
            key = (id(src), relayout_key(i, k))
            hit = groups.get(key)
            # a cheap elementwise source is taken into the copy's loop fusion, which the breadth-first
            # scheduler runs where the source's own inputs are ready: the copy is made with the source
            made = pos.get(id(src), t) if _relaid_in_copy(src) else t
            if hit is None:
                groups[key] = [i, k, min(made, t), t + 1]
            else:
                hit[2], hit[3] = min(hit[2], made, t), max(hit[3], t + 1)
    # a cheap elementwise value every reader of which transposes (several orders): XLA computes it in each
    # copy's fusion and never on its own; its own buffer (the node) is the copy read last (ties: the
    # first), which is made with it and read as long (compiled BERT: a key projection's ``add`` is two
    # ``transpose_copy_fusion``s and no buffer of its own)
    last: dict = {}
    for key, g in groups.items():
        src = _through_forwards(g[0].operands[g[1]])
        if id(src) in last or not _relaid_in_copy(src) or transposed_reads(src) is None:
            continue
        last[id(src)] = max((k for k in groups if k[0] == id(src)), key=lambda k: (groups[k][3], -groups[k][2]))
    out = [tuple(g) for key, g in groups.items() if last.get(key[0]) != key]
    return out + gather_relayouts(order, pos) if gathers else out


def _through_forwards(o):
    while _forwards(o) and o.operands:
        o = o.operands[0]
    return o


def _added_into(sc) -> bool:
    """True when XLA's algebraic simplifier folds the ``scatter`` ``sc`` into its one user, an ``add``
    (``A + scatter(0, I, U)`` becomes ``scatter(A, I, U)``, updating ``A`` in place): of an add of two
    scatters, the second operand's."""
    users = effective_users(sc)
    if len(users) != 1 or _kind(users[0]) != "add" or len(users[0].operands) != 2:
        return False
    a, b = (_through_forwards(o) for o in users[0].operands)
    return b is sc or (a is sc and b.opcode != "scatter")


def folded_zero_destination(instr) -> bool:
    """True for a ``broadcast`` of a zero scalar constant that only scatters read, as their destination
    (operand 0, through forwarding copies), each folded into its one user, an ``add``
    (:func:`_added_into`): XLA's algebraic simplifier rewrites ``A + scatter(0, I, U)`` into
    ``scatter(A, I, U)``, so the zeros are never made and the scatter updates ``A`` in place.  Such a
    broadcast has no buffer (:func:`is_fused`); a training step's embedding gradient (``jnp.take``'s
    transpose) added to the momentum or to a tied embedding's dot gradient.  Read in XLA's compiled
    keras-hub BERT train step (auto_shard's plan, 2x4): the token embedding's ``scatter-add`` is a
    ``wrapped_scatter`` on the momentum's ``0.9 * m`` in its output allocation, and no 1 MiB zero
    broadcast (the model held one from the step's start; BENCHMARKS.md, round 21 memtruth)."""
    if _kind(instr) != "broadcast" or not instr.operands or not instr.shape.is_array:
        return False
    c = instr.operands[0]
    if c.opcode != "constant" or c.shape.is_tuple or c.shape.num_elements != 1:
        return False
    try:
        if float(np.asarray(c.literal_value()).reshape(-1)[0]) != 0.0:
            return False
    except Exception:  # noqa: BLE001 - a literal we cannot read is not known to be zero
        return False
    users = effective_users(instr)
    if not users:
        return False
    for sc in users:
        if (sc.opcode != "scatter" or len(sc.operands) != 3 or _through_forwards(sc.operands[0]) is not instr
                or any(_through_forwards(o) is instr for o in sc.operands[1:]) or not _added_into(sc)):
            return False
        comps = sc.called_computations
        root = comps[0].root if comps else None
        if root is None or root.opcode != "add" or {id(o) for o in root.operands} != {id(q) for q in comps[0].parameters}:
            return False   # the scatter adds its updates (the only scatter the rewrite folds)
    return True


def copied_destination(sc, positions: dict | None = None):
    """The destination (operand 0, through forwarding copies that keep its sharding) of the ``scatter``
    ``sc`` when XLA's CPU backend gives the scatter a copy of it (:func:`scatter_destination_copies`):
    the destination is no constant and is read by something else after the scatter (``positions``:
    ``id(instruction)`` -> schedule position; without them, anywhere), the scatter is not folded into
    an add (:func:`_added_into`), and its result is no entry output (an output's allocation holds the
    copy); else None."""
    if sc.opcode != "scatter" or not sc.shape.is_array or not sc.operands:
        return None
    d = sc.operands[0]
    while _forwards(d) and d.operands and _sharding_of(d) == _sharding_of(d.operands[0]):
        d = d.operands[0]
    others = [u for u in effective_users(d) if u is not sc]
    if positions is not None and id(sc) in positions:
        t = positions[id(sc)]
        others = [u for u in others if positions.get(id(u), t + 1) > t]
    if _kind(d) == "constant" or not others or _added_into(sc):
        return None   # the last reader of the destination updates it in place: no copy
    root = sc.parent.root if sc.parent is not None else None
    if sc.is_root or (root is not None and root.opcode == "tuple" and getattr(sc.parent, "is_entry", False)
                      and any(u is root for u in effective_users(sc))):
        return None
    return d


def scatter_destination_copies(order: Sequence, positions: dict | None = None) -> list:
    """The copies XLA's CPU backend makes of a ``scatter``'s destination that other instructions also
    read, as ``[(scatter, lo, hi)]``: a buffer of the scatter's result (its tile: the copy has its
    layout), live over ``[lo, hi)`` from just after the destination is made to the scatter, which then
    updates it in place (its result, the model's buffer of the scatter from there on).

    A scatter updates its operand 0 in place; where that buffer is read elsewhere too (the one zero
    ``broadcast`` every ``segment_sum`` of a step starts from, after ``HloCSE``), XLA's copy insertion
    gives each scatter a copy of it, and the breadth-first scheduler makes each copy as soon as its
    source exists.  Read in XLA's buffer assignment of new user 17's GNN (``copy.436``-``copy.442`` of
    one ``wrapped_broadcast``, each live from the start of the step to its ``wrapped_scatter``).
    ``order``: the program schedule; ``positions``: ``id(instruction)`` -> position (built from
    ``order`` when None)."""
    pos = positions if positions is not None else {id(i): t for t, i in enumerate(order)}
    out: list = []
    for sc in order:
        d = copied_destination(sc, pos)
        if d is None or id(sc) not in pos:
            continue
        src = d
        while is_fused(src) and src.operands and _kind(src) != "constant":
            src = src.operands[0]   # a fused destination is made where its own source is
        t = pos[id(sc)]
        lo = pos.get(id(src), pos.get(id(d), t - 1)) + 1
        if lo < t:
            out.append((sc, lo, t))
    return out


def _made_at(instr, positions: dict):
    """The instruction whose schedule position makes ``instr``'s buffer: ``instr`` through forwarding
    instructions and fused producers (a fused value is made where its own source is); None when that is
    not scheduled (a constant)."""
    src = instr
    while (_forwards(src) or is_fused(src)) and src.operands and _kind(src) != "constant":
        src = src.operands[0]
    return src if id(src) in positions else None


def _expansion_start(sas, positions: dict) -> int | None:
    """The schedule position where XLA CPU's expansion of the ``select-and-scatter`` ``sas`` starts (where
    its operand 0 is made, :func:`select_and_scatter_expansions`); None for another instruction, or one
    whose operand is not made before it in its computation."""
    if sas.opcode != "select-and-scatter" or id(sas) not in positions or len(sas.operands) < 2 \
            or not sas.shape.is_array or not sas.operands[1].shape.is_array:
        return None
    src = _made_at(sas.operands[0], positions)
    if src is None or src.parent is not sas.parent or positions[id(src)] >= positions[id(sas)]:
        return None
    return positions[id(src)]


def select_and_scatter_expansions(order: Sequence, positions: dict | None = None) -> list:
    """The buffers of XLA's CPU expansion of each ``select-and-scatter``, as ``[(instr, lo, hi, factor)]``:
    ``factor`` times ``instr``'s tile (the select-and-scatter's own, the operand's shape, or its source's,
    operand 1, the window output's shape) live over ``[lo, hi)``.

    XLA's CPU compiler runs ``SelectAndScatterExpander``: a select-and-scatter of operand ``O`` (shape
    ``S``, rank ``r``) and source ``W`` becomes ``r`` ``iota`` arrays ``s32[S]`` (one per dim: each a loop
    fusion of its own, ``wrapped_iota``), a variadic ``reduce-window`` of ``O`` and the iotas that selects
    each window's element and its ``r`` indices (outputs ``W`` and ``r x s32[W]``), the indices
    concatenated into ``s32[|W|, r]``, and a ``scatter`` of the source into a ``broadcast`` of the init
    value ``S`` (``wrapped_broadcast``, updated in place: the result).  The reduce-window reads only
    ``O``, so the scheduler runs it (iotas before it) as soon as ``O`` exists, in a training step's
    forward pass; the broadcast, made from a constant, is live from then to the scatter, as is the index
    array, and ``O`` is not read after the reduce-window.  So, with ``lo`` the position where ``O`` is
    made and ``t`` the select-and-scatter's: the iotas (``r * 4 / bytes(element)`` tiles of the result) and
    the reduce-window's outputs (``1 + r * 4 / bytes(element)`` tiles of the source) at ``[lo, lo + 1)``;
    the index array (``r * 4 / bytes(element)`` tiles of the source) over ``[lo + 1, t + 1)``.  Not listed
    here: the destination broadcast is the select-and-scatter's own buffer, which :func:`buffer_intervals`
    (with ``gather_copies``, XLA CPU) starts at ``lo``, and there the select-and-scatter does not read its
    operand 0.  The reduce-window's tuple pointer table (8 B per output) is not counted.  Read in XLA's buffer
    assignment of keras-hub ResNet's train step (new user 28, 2x4, max-pool 3x3 stride 2 of
    ``f32[16,18,18,64]``: four ``wrapped_iota`` and ``wrapped_broadcast.1`` of 165,888 B, the
    ``maximum_pad_fusion`` operand, live at XLA's peak at the reduce-window in the forward, the
    ``concatenate_bitcast_fusion`` ``s32[8192,4]`` from there to the ``wrapped_scatter``).
    ``order``: the program schedule; ``positions``: ``id(instruction)`` -> position (built from ``order``
    when None)."""
    pos = positions if positions is not None else {id(i): t for t, i in enumerate(order)}
    out: list = []
    for sas in order:
        lo = _expansion_start(sas, pos)
        if lo is None:
            continue
        t = pos[id(sas)]
        rank = sas.shape.rank
        out.append((sas, lo, lo + 1, _ratio(rank * 4, sas.shape.element_type)))   # the iotas
        w = sas.operands[1]
        out.append((w, lo, lo + 1, 1 + _ratio(rank * 4, w.shape.element_type)))   # the reduce-window's outputs
        if lo + 1 < t + 1:
            out.append((w, lo + 1, t + 1, _ratio(rank * 4, w.shape.element_type)))   # the index array
    return out


def _ratio(nbytes: int, element_type: str):
    """``nbytes`` per element over the bytes of one ``element_type`` element (an int where exact)."""
    eb = element_byte_size(element_type)
    r = nbytes / eb
    return int(r) if r == int(r) else r


def _attr_ints(instr, key: str) -> list:
    """``instr.attrs[key]`` (the parser's typed int or tuple of ints) as a list of ints; [] when absent."""
    v = instr.attrs.get(key)
    if v is None:
        return []
    return [int(x) for x in (v if isinstance(v, (list, tuple)) else (v,))]


#: opcodes whose results are never equal to another instruction's for :func:`_value_number` (collectives,
#: random numbers, side effects, called computations): numbered by identity
_UNIQUE_VALUE_OPCODES = frozenset({"parameter", "all-gather", "all-reduce", "reduce-scatter", "all-to-all",
                                   "collective-permute", "rng", "rng-bit-generator", "custom-call", "infeed",
                                   "recv", "send", "while", "call", "conditional", "fusion", "after-all"})


def _moved_from(operand, instr) -> bool:
    """True when ``instr`` reads ``operand`` from a split layout written otherwise than its own: the
    partitioner reshards it there, by a collective (never merged by ``HloCSE``: each has its channel) or
    a local relayout.  Both written, ``operand``'s not replicated, the two texts differing (a reshape
    keeping the same split is counted too: the numbering then merges less, never more)."""
    a, b = getattr(operand, "sharding", None), getattr(instr, "sharding", None)
    return a is not None and b is not None and not a.is_replicated and str(a) != str(b)


def _value_number(instr, numbering: dict) -> int:
    """A number equal for two instructions when ``HloCSE`` would make them one (same opcode, shape,
    attributes, written sharding and operands, recursively), ``numbering`` (``id`` -> number, and the
    structural keys) kept between calls; instructions of :data:`_UNIQUE_VALUE_OPCODES`, and those that
    read an operand resharded from a split layout (:func:`_moved_from`: the partitioner's collective per
    reader; DeBERTa's 150 MiB plan all-gathers each layer's relative positions, eight arrays in XLA), are
    their own."""
    stack = [(instr, False)]
    while stack:
        i, done = stack.pop()
        if id(i) in numbering:
            continue
        if i.opcode in _UNIQUE_VALUE_OPCODES or not i.operands and i.opcode != "constant" and i.opcode != "iota" \
                or any(_moved_from(o, i) for o in i.operands):
            numbering[id(i)] = numbering.setdefault(("id", id(i)), len(numbering))
            continue
        if not done:
            stack.append((i, True))
            stack.extend((o, False) for o in i.operands if id(o) not in numbering)
            continue
        key = (i.opcode, str(i.shape), repr(sorted((k, str(v)) for k, v in i.attrs.items()
                                                   if k not in ("sharding", "metadata"))),
               str(i.sharding), str(getattr(i, "literal", None)), tuple(numbering[id(o)] for o in i.operands))
        numbering[id(i)] = numbering.setdefault(key, len(numbering))
    return numbering[id(instr)]


#: the attribute naming a batched gather's / scatter's index batching dims (``BatchedGatherScatterNormalizer``)
_INDEX_BATCHING_DIMS = {"gather": "start_indices_batching_dims", "scatter": "scatter_indices_batching_dims"}


def normalized_indices(order: Sequence, positions: dict | None = None) -> list:
    """The index arrays XLA's CPU backend makes for the ``gather`` and ``scatter`` instructions with
    batching dims (``start_indices_batching_dims`` / ``scatter_indices_batching_dims``: jax's
    ``take_along_axis`` and its gradient), as ``[(index value, lo, hi, factor)]``: a buffer of ``factor``
    times the index value's tile (its layout: the same rows, more columns) live over ``[lo, hi)``, up to
    the gather or scatter that reads it.

    XLA's ``BatchedGatherScatterNormalizer`` rewrites such an instruction into one without batching dims:
    its indices become the original ``k`` index columns (``k``: the size of ``index_vector_dim``, 1 where
    it is the rank) with one ``iota`` column per batching dim concatenated, ``(k + nb) / k`` times the
    index value's elements.  The concatenation is a loop fusion of its own per reader (neither a gather
    nor a scatter fuses it into itself), which the breadth-first scheduler runs as soon as the index value
    exists, and the reader reads its buffer: one buffer of ``(k + nb) / k`` tiles from the index value to
    each reader.  Where the index value is a cheap fusible producer that only these readers and loop
    fusions read (a ``select`` wrapping negative indices, also read by the bounds check's ``compare``),
    the concatenations take it in and it has no buffer of its own: the model's buffer of it (kept for a
    scatter, which fuses nothing) is the last reader's concatenation, which adds ``nb / k`` tiles to it.
    Read in XLA's buffer assignments: keras-hub DeBERTaV3's train step (new user 22's 150 MiB plan, mesh
    2x4): eight ``concatenate_bitcast_fusion`` of ``s32[262144,4]`` (4 MiB per device), each the
    relative-position ``take_along_axis`` indices of ``[16,8,128,128]`` (3 batching dims), live from the
    forward to the gradient's ``wrapped_scatter``, where the model had the 1 MiB index value; and the hand
    module of ``tests/test_memory_model.py`` (``BATCHED_INDICES``: the gather's and the scatter's
    concatenations, 8 MiB each, live at XLA's peak).  ``order``: the program schedule; ``positions``:
    ``id(instruction)`` -> position (built from ``order`` when None)."""
    pos = positions if positions is not None else {id(i): t for t, i in enumerate(order)}
    readers: dict = {}
    for r in order:
        key = _INDEX_BATCHING_DIMS.get(_kind(r))
        if key is None or id(r) not in pos or len(r.operands) < 2:
            continue
        nb = len(_attr_ints(r, key))
        idx = r.operands[1]
        if nb == 0 or not idx.shape.is_array:
            continue
        ivd = (_attr_ints(r, "index_vector_dim") or [idx.shape.rank])[0]
        k = int(idx.shape.dims[ivd]) if 0 <= ivd < idx.shape.rank else 1
        src = cse_representative(idx)
        while _forwards(src) and src.operands:
            src = cse_representative(src.operands[0])
        if id(src) in pos and src.parent is r.parent and k > 0:
            readers.setdefault(id(src), (src, []))[1].append((pos[id(r)], r, k, nb))
    # index values HloCSE makes one (a called computation's clones per call site: DeBERTa's relative
    # positions, the same in every layer) share XLA's arrays, which the model's buffers of the clones
    # already over-count: no array is added for them
    numbering: dict = {}
    classes: dict = {}
    for src, _ in readers.values():
        classes.setdefault(_value_number(src, numbering), []).append(id(src))
    shared = {i for members in classes.values() if len(members) > 1 for i in members}
    out: list = []
    for src, rs in readers.values():
        if id(src) in shared:
            continue
        ids = {id(r) for _, r, _, _ in rs}
        users = effective_users(src)
        absorbed = (not is_fused(src) and _kind(src) in FUSIBLE_PRODUCERS
                    and (_kind(src) not in EXPENSIVE or len(users) == 1)
                    and all(id(u) in ids or (u.parent is src.parent and (_kind(u) in FUSING_CONSUMERS
                                                                         or _kind(u) in CPU_LOOP_CONSUMERS))
                            for u in users))
        last = max(t for t, _, _, _ in rs)
        lo = pos[id(src)]
        for t, r, k, nb in sorted(rs, key=lambda x: x[0]):
            extra = nb if (absorbed and t == last) else k + nb
            factor = extra // k if extra % k == 0 else extra / k
            out.append((src, lo, t + 1, factor))
            if absorbed and t == last:
                absorbed = False   # one reader takes the value's own buffer over
    return out
