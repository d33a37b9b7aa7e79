"""What a written module must pin so that XLA's partitioner realizes the strategies the solver chose.

A sharding names an instruction's result layout, not the strategy that produced it.  For most ops XLA
reshards the operands to the layout the result needs, which is what the cost graph's edges price.  A
dot or a convolution is different: XLA's handler looks at its operands' layouts and, e.g., keeps a
contracting split both operands share (an all-reduce) where the solver planned to reshard an operand
and compute without one (``registry._realized``, measured in tests/test_handlers_dot.py).  Pinning
each such operand with a ``Sharding`` custom-call (what ``jax.lax.with_sharding_constraint`` lowers to)
that carries the layout the chosen strategy requires makes XLA do the planned resharding (to the pin)
and then partition the op with its operands exactly as planned; the partitioner drops the custom-call,
so it computes nothing.  (The pins were ``copy`` instructions until the TPU compiler, on its way in
through StableHLO, rejected them: "failed to legalize operation 'mhlo.copy' that was explicitly marked
illegal"; the custom-call form compiles there and moves the same bytes on the CPU backend, measured on
every sample, BENCHMARKS.md.)

Measured (tests/test_realize_oracle.py, raw after-spmd-partitioning ring bytes): on a 2x4 mesh the
solved ``mlp_train_step`` moves 0.84 MB unpinned and 0.17 MB pinned (GSPMD's plan: 0.84 MB), and the
pinned module's ``hloshard cost`` equals the solver's own objective; the solved MaxText step of the
corpus (8 devices) moves 2,628.7 MB unpinned (as GSPMD's plan) and 2,488.9 MB pinned, and compiles (the MaxText
figures measured with the earlier ``copy`` pins).

The same holds for a ``while`` body's reads of its loop state: on the way into XLA through StableHLO
(jax, the oracle, ``--xla``) the body parameter becomes block arguments and each ``get-tuple-element`` of
it disappears, its written sharding with it; GSPMD's propagation then gives the recreated one the
layout of whichever user it reaches first.  On ``samples/scan_mlp_train_step`` solved with the operand
pins it took the layout of a pin copy (f32[64,256] split on dim 1 instead of the plan's dim 0), so XLA
resharded the carried value and back on every trip (all-to-alls on ``dot_general.9`` and the body root,
64 KiB + 64 KiB over 4 trips) and the pin did nothing.  :func:`insert_loop_state_pins` puts a
``Sharding`` custom-call (what ``jax.lax.with_sharding_constraint`` writes; GSPMD keeps it and the
partitioner drops it, no data moved) with the planned layout after each such read, so the body reads the
loop state as planned: measured, the solved module's XLA bytes then equal hloshard's prediction
(640 KiB, every instruction's collective kinds agree).  A loop invariant (an element the body passes
through unchanged) is kept in the loop state by a ``Sharding`` custom-call at the body root
(:func:`keep_invariants`, written by the apply step whether or not operands are pinned), so XLA neither
captures it nor rejects the while's sharding; new user 25's scan LM then moves under XLA what hloshard
predicts, to the byte (27.08 MB; BENCHMARKS.md round 26 "loop").  Loop invariants XLA still captures from outside the
loop (a while written without a sharding, :mod:`hloshard.strategy.control_flow`) get no read pins (their
reads are the init's value); their init values are pinned instead, before the loop (``NAME.init.pin``:
the scan LM's XLA bytes 104.8 -> 41.7 MB, round 25).

Public API (for the apply step, and for ``hloshard.jax``, which writes the same pins as
``with_sharding_constraint`` at the pinned points)::

    operand_pins(nodes, choice, ctx) -> list[Pin]     # which operands to pin, in which layout:
                                                      #   Pin(user=Instruction, index=operand number,
                                                      #       sharding=HloSharding), deterministic order
    insert_pins(pins) -> int                          # add the Sharding custom-calls to the IR
    insert_loop_state_pins(whiles) -> int             # Sharding custom-calls after loop-state reads
    keep_invariants(whiles) -> int                    # Sharding custom-calls on a body root's pass-throughs
    insert_transpose_pins(instructions, device=None) -> int   # Sharding custom-calls between a dot and its
                                                      #   transposes (on v6e not a dot its simplifier swaps)

The TPU compiler simplifies before it partitions (the CPU backend partitions first): its algebraic
simplifier folds ``transpose(dot(a, b))`` into ``dot(b, a)`` and gives the new dot the old dot's
sharding, untransposed, so the plan's layout of the transposed result is lost and GSPMD reshards around
it.  Measured on the TPU compiler ahead of time (``v5e:2x4``, libtpu 0.0.42.1, raw partitioned HLO):
``auto_shard``'s written module of tunix llama3_small moved 17.72 MB per device (``auto_expert``; 12.99
for ``auto``) against 8.03 MB (6.89) on the CPU backend, where hloshard predicts 8.04 MB (6.89);
with :func:`insert_transpose_pins` 8.04 MB (6.90), and on keras-hub gemma_small 13.23 -> 8.17 MB
(``auto_expert``) and 9.25 -> 7.48 MB (``auto``), BENCHMARKS.md "realmodels".  The custom-call keeps
the dot's layout where it is (the fold does not apply through it); the partitioner drops it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import TOKEN, LeafRef, is_array, is_mesh_spec, leaf_range, leaf_shapes
from ..cost.reshard import plan
from ..cost.tpu_partitioner import fold_applies, swaps_operands
from ..hlo.ir import Instruction
from ..hlo.loops import called, invariant_elements
from ..hlo.sharding import HloSharding
from .registry import read_anywhere, rematerialized

#: ops whose partitioning XLA decides from its operands' layouts (measured: dot, convolution, and a
#: scatter-add whose split updates XLA all-reduces into the table where the plan gathers them; a fusion
#: computing a dot gets the dot handler's strategies; gather has the same index-parallel choice)
PINNED_OPS = frozenset(("dot", "convolution", "fusion", "scatter", "gather"))


@dataclass(frozen=True)
class Pin:
    """Operand ``index`` of ``user`` must be given in ``sharding`` (an HloSharding)."""

    user: object
    index: int
    sharding: object
    #: a layout the operand is first constrained to (None: straight to ``sharding``); see
    #: :func:`replicated_stop`
    via: object = None


def as_written(pin: Pin) -> Pin:
    """``pin`` as the module now carries it: the layouts of the ``Sharding`` custom-calls :func:`insert_pins`
    wrote for it (its user's operand, and that one's operand when it is the pin's stop ``NAME.full.pin``),
    which a later pass may have re-annotated (``solve``'s local moves re-solve its own pins,
    :func:`hloshard.autoshard.local.improve_written`).  ``pin`` itself when its user no longer reads a
    ``Sharding`` custom-call there."""
    import dataclasses

    cp = pin.user.operands[pin.index]
    if not cp.is_sharding_constraint or cp.sharding is None:
        return pin
    stop = cp.operands[0] if pin.via is not None else None
    via = stop.sharding if stop is not None and stop.is_sharding_constraint and stop.sharding is not None \
        else pin.via
    return dataclasses.replace(pin, sharding=cp.sharding, via=via)


def operand_pins(nodes, choice, ctx) -> list:
    """The pins a choice needs: for each node of an op in :data:`PINNED_OPS`, each array operand whose
    chosen layout differs from the one the node's chosen strategy requires.  ``nodes``: the cost
    graph's StrategyGroups (node order), ``choice``: a strategy index per node, ``ctx``: the
    BuildContext.  Deterministic (node order, then operand order)."""
    minfo = ctx.minfo
    pins = []
    for v, g in enumerate(nodes):
        instr = g.instr
        dus = instr.opcode == "dynamic-update-slice" and update_into_shared_broadcast(instr, 0, instr.operands[0])
        if (instr.opcode not in PINNED_OPS and not dus) or g.operands is not None:
            continue
        st = g.strategies[int(choice[v])]
        for k, op in enumerate(instr.operands):
            if dus and k != 0:
                continue
            req = st.inputs[k] if k < len(st.inputs) else None
            always = scatter_into_scalar_broadcast(instr, k, op) or dus
            if always and req is None:   # the edge of a written (rematerialized) broadcast is dropped: the
                # destination is the result's layout
                req = st.out if len(instr.operands) == 3 or dus else st.out[k]
            if req is None or isinstance(op, LeafRef) or not is_array(op.shape) or op.shape.is_tuple:
                continue
            r = ctx.resolve(op, 0)
            if r is TOKEN:
                continue
            src_group, leaf = r
            src_st = src_group.strategies[int(choice[src_group.node])]
            src = src_st.out if leaf is None else src_st.out[leaf]
            if is_mesh_spec(src) and is_mesh_spec(req) and src == req and not always:
                continue
            rank = len(op.shape.dims)
            want = minfo.to_sharding(req, rank)
            if minfo.to_sharding(src, rank) == want and not always:
                continue
            pins.append(Pin(instr, k, want, replicated_stop(op.shape, minfo.to_sharding(src, rank), want, ctx.mesh)))
    return pins


def replicated_stop(shape, src, dst, mesh):
    """``{replicated}`` when the resharding of ``shape`` from ``src`` to ``dst`` (HloShardings) passes
    through the fully replicated layout (:func:`hloshard.cost.reshard.plan`: all-gather everything, then
    slice), else None.  Why: that path is GSPMD's last resort (``PartitionedHlo::ReshardNoCache`` finds no
    all-to-all or partial-replication route, openxla spmd_partitioner.cc), which it takes with the
    warning "Involuntary full rematerialization ... which is inefficient"; written as two constraints,
    to ``{replicated}`` and then to ``dst``, each step is one XLA does directly (an all-gather, then a
    local dynamic-slice): the same collectives and bytes, and no warning.  Measured on new user 17's GNN
    (a dim-0 split over ``model`` pinned to a dim-1 split over ``data``): one warning before, none after,
    XLA's bytes unchanged (BENCHMARKS.md, "Pins through the replicated layout")."""

    if not isinstance(src, HloSharding) or not isinstance(dst, HloSharding) or src.is_replicated \
            or dst.is_replicated:
        return None
    try:
        steps = plan(shape, src, dst, mesh).steps
    except Exception:   # a layout the planner does not model (manual, another device set): no stop
        return None
    for step in steps[:-1]:
        after = step.sharding_after
        if after is not None and after.is_replicated:
            return HloSharding.replicated()
    return None


def scatter_into_scalar_broadcast(instr, k: int, op) -> bool:
    """Is operand ``k`` of ``instr`` a scatter's destination (one of its first n of 2n+1 operands) that
    is a broadcast of a scalar (the zeros a ``segment_sum`` or ``.at[].add`` scatters into)?  Such an
    operand is pinned even in the layout its producer already has.  Why: XLA's pipeline merges
    identical broadcasts whatever their shardings and refines a partially replicated broadcast to the
    layout of a ``Sharding`` custom-call that reads it (so one pin of the shared zeros, for another
    scatter, moves them all to its layout), and XLA's scatter handler partitions in its *operand's*
    layout (``PartitionScatterOperandPassthroughDimensions``, openxla gather_scatter_handler.cc) and
    reshards the result to the scatter's own.  Measured (tests/test_scatter_destination_pin.py; new user 17's
    GNN, three ``segment_sum`` scatters into zeros split ``[4,1,1,2] last_tile_dim_replicate`` whose
    backward scatters pin them ``[4,1,2]``): XLA scattered in ``[4,1,2]`` and all-gathered each result
    over the replicated axis (128 KiB per device each, 3.93 MiB in all where hloshard predicted 3.6); a
    pin in the planned layout keeps it (XLA re-broadcasts the scalar there: nothing moves)."""

    if instr.opcode != "scatter" or k >= (len(instr.operands) - 1) // 2:
        return False
    return op.opcode == "broadcast" and rematerialized(op)


def update_into_shared_broadcast(instr, k: int, op) -> bool:
    """Is operand ``k`` of the dynamic-update-slice ``instr`` its buffer (operand 0) and a broadcast of a
    scalar that other instructions read too (:func:`hloshard.strategy.registry.read_anywhere`: the zeros
    a scan's backward pass writes each step's gradient into, jax's CSE sharing them between loops)?
    Such an operand is pinned in the update's planned layout (``NAME.pin``).  Why: jax's StableHLO
    route drops a scalar broadcast's sharding, so XLA's propagation gives the shared zeros one layout
    (measured: the most-tiled of its readers'), and XLA's dynamic-update-slice handler, whenever no
    split dim of the result is a slice dim, computes in its buffer's layout if that has more tiles than
    the result and reshards the whole result (XLA SPMD partitioner, ``HandleDynamicUpdateSlice``,
    "default" method: the better of the input and output shardings).  New user 35's RWKV-7 (F7): three
    writes laid out ``[4,1,1,1,2]`` into zeros shared with ``[8,1,1,1]`` writes were computed 8-way and
    all-gathered whole every trip, 4.0 MiB each where the plan priced a 64 KiB update gather; with a pin
    XLA re-broadcasts the scalar in the pin's layout and moves only the update (tests/test_dus_partition.py)."""
    if instr.opcode != "dynamic-update-slice" or k != 0:
        return False
    return op.opcode == "broadcast" and read_anywhere(op)


def insert_pins(pins) -> int:
    """Insert ``NAME.pin = custom-call(operand), custom_call_target="Sharding", sharding=<pin>`` and make
    each pinned user read it (one per distinct operand and layout per computation), just before the
    earliest of the users that read it, so the resharded value lives only as long as the plan needs it.
    The ``Sharding`` custom-call is what ``jax.lax.with_sharding_constraint`` lowers to: GSPMD (CPU, GPU
    and the TPU compiler, which rejects a sharded ``copy`` on its way through StableHLO) reshards the
    operand to it and the partitioner then drops it, so it computes nothing.  Returns the pins added.
    Deterministic (the order of ``pins``)."""

    made: dict = {}
    readers: dict = {}
    stops: dict = {}
    for pin in pins:
        op = pin.user.operands[pin.index]
        comp = pin.user.parent
        key = (id(comp), id(op), str(pin.sharding))
        cp = made.get(key)
        if cp is None:
            src = op
            if pin.via is not None:   # first to the replicated layout (:func:`replicated_stop`)
                skey = (id(comp), id(op), str(pin.via))
                src = stops[skey][1] if skey in stops else None
                if src is None:
                    src = Instruction(op.name + ".full.pin", "custom-call", op.shape, [op],
                                      attrs={"custom_call_target": "Sharding"})
                    src.sharding = pin.via
                    stops[skey] = (comp, src)
            cp = Instruction(op.name + ".pin", "custom-call", op.shape, [src],
                             attrs={"custom_call_target": "Sharding"})
            cp.sharding = pin.sharding
            made[key] = cp
            readers[key] = (comp, [])
        readers[key][1].append(pin.user)
        ops = list(pin.user.operands)
        ops[pin.index] = cp
        pin.user.set_operands(ops)
    for key, cp in made.items():
        comp, users = readers[key]
        comp.add_instruction(cp, before=_first_user(comp, cp, users[0]))
    for comp, stop in stops.values():   # just before the pins that read it
        comp.add_instruction(stop, before=_first_user(comp, stop, stop.users[0]))
    return len(made) + len(stops)


def _first_user(comp, op, default):
    """The earliest instruction of ``comp`` using ``op`` (the copy goes before it)."""
    order = comp.instructions
    first = None
    for u in op.users:   # list.index: the position by identity, a C scan (one Python loop per pin was
        try:              # 3.6 s of the 48-layer transformer's write at 2x2x2)
            k = order.index(u)
        except ValueError:   # a user in another computation
            continue
        if first is None or k < first:
            first = k
    return default if first is None else order[first]


def insert_loop_state_pins(whiles) -> int:
    """After each ``get-tuple-element`` of a ``while`` body's parameter that carries a sharding, reads
    a non-scalar array element that is not a captured loop invariant (:func:`hloshard.hlo.loops.invariant_elements`
    of a while written without a sharding) and has users besides the body root, insert
    ``NAME.sh = custom-call(NAME), custom_call_target="Sharding", sharding=<its sharding>`` and make those
    users read it.  And before a while written without a sharding, pin each captured invariant's init
    value in the init tuple's layout for it (``NAME.init.pin``, :func:`_pin_captured_inits`).
    ``whiles``: the ``while`` instructions whose shardings are written (the IR after the apply step).
    Returns the custom-calls added (both kinds).  Deterministic (the given order, then text order)."""

    count = 0
    for w in whiles:
        body = called(w, "body", 0)
        if body is None or not body.parameters or not w.shape.is_tuple:
            continue
        captured = set(invariant_elements(w)) if w.sharding is None else set()
        param = body.parameters[0]
        names = {i.name for i in body.instructions}
        for g in [i for i in body.instructions if i.opcode == "get-tuple-element" and i.operands
                  and i.operands[0] is param]:
            index = g.attrs.get("index")
            if g.sharding is None or not is_array(g.shape) or not g.shape.dims or index is None or \
                    int(str(index)) in captured:   # a scalar (the induction variable) stays replicated
                continue
            users = [u for u in g.users if u is not body.root and not _keeps(u, body)]
            if not users:
                continue
            _pin_between(body, g, users, ".sh", names)
            count += 1
        count += _pin_captured_inits(w, captured)
    return count


def _sharding_pin(comp, op, suffix: str, sharding, names: set, before):
    """A ``Sharding`` custom-call of ``op`` named ``op.name + suffix`` (``suffix2``, ``suffix3``... when taken;
    ``names``: the names in use, the new one added), carrying ``sharding``, added to ``comp`` before ``before``.
    Returns the custom-call (a pin the SPMD partitioner keeps: XLA's ``Sharding`` custom-call target)."""
    name, n = op.name + suffix, 1
    while name in names:
        n += 1
        name = f"{op.name}{suffix}{n}"
    names.add(name)
    cc = Instruction(name, "custom-call", op.shape, [op], attrs={"custom_call_target": "Sharding"})
    cc.sharding = sharding
    comp.add_instruction(cc, before=before)
    return cc


def keep_invariants(whiles) -> int:
    """For each ``while`` of ``whiles`` written with a sharding (the apply step's output) whose body passes
    loop-state elements through unchanged (:func:`hloshard.hlo.loops.invariant_elements`), make the body
    root read each such element through ``NAME.keep = custom-call(NAME), custom_call_target="Sharding"``
    in the root's layout for it.  Why: on the way in through StableHLO (jax, the oracle, ``--xla``) the
    while canonicalization turns a pass-through element into a value captured from outside the loop but
    keeps the while's tuple sharding at full length, and jaxlib 0.10.2 aborts compiling (RET_CHECK in
    hlo_sharding.cc: "Shape ... has 22 leaf nodes while this sharding has 36", the MaxText train step);
    through the custom-call the element is no longer passed through as such, stays in the loop state with
    the while's sharding, and the SPMD partitioner drops the custom-call (no data moved; XLA's buffer
    assignment still sees a pass-through).  Without it (round 25: the while written without a sharding)
    GSPMD's propagation gave a captured stack a layout of its own: new user 25's scan LM, 2x4, 41.7 MB of
    collectives under XLA against 27.1 MB predicted; with these 27.08 MB, the prediction to the byte
    (BENCHMARKS.md round 26 "loop").
    Returns the custom-calls added.  Deterministic (the given order, then tuple order)."""

    count = 0
    for w in whiles:
        body = called(w, "body", 0)
        if w.sharding is None or body is None or body.root is None or body.root.opcode != "tuple":
            continue
        inv = invariant_elements(w)
        if not inv:
            continue
        root = body.root
        sh = root.sharding if root.sharding is not None else w.sharding
        leaves = leaf_shapes(w.shape)
        names = {i.name for i in body.instructions}
        ops = list(root.operands)
        for k in inv:
            g = ops[k]
            rng = leaf_range(w.shape, k)
            if len(rng) != 1 or not is_array(g.shape) or g.shape.is_tuple:
                continue
            elem = sh.tuple_elements[rng[0]] if sh.is_tuple and len(sh.tuple_elements) == len(leaves) else sh
            ops[k] = _sharding_pin(body, g, ".keep", elem, names, before=root)
            count += 1
        root.set_operands(ops)
    return count


def _keeps(instr, body) -> bool:
    """``instr`` is a :func:`keep_invariants` pin of ``body``: a ``Sharding`` custom-call read by its root only."""
    return instr.is_sharding_constraint and bool(instr.users) and all(u is body.root for u in instr.users)


def _pin_captured_inits(w, captured) -> int:
    """Pin each captured loop invariant's init value (``w`` a ``while`` written without a sharding,
    ``captured`` the indices of its invariant elements, :func:`hloshard.hlo.loops.invariant_elements`) in the layout the init tuple's written sharding
    gives it: ``NAME.init.pin = custom-call(NAME), custom_call_target="Sharding"``, read by the init
    ``tuple`` only, just before it.  Why: the cost graph prices the body's reads of a captured element
    in the init's layout (:mod:`hloshard.strategy.control_flow`), but on the way in through StableHLO
    XLA keeps neither the tuple's sharding nor that of a ``get-tuple-element`` of another while's result
    or of a broadcast of a scalar constant, so GSPMD's propagation gives the captured value a layout of
    its own (the loop's tuple sharding is unified with the body root's, body and condition parameters'
    and the operand's, and a split layout wins a merge over ``{replicated}``) and the SPMD partitioner
    reshards it at its users inside the body on every trip.  Measured (new user 25's scan LM, 2x4, the
    solved module ``s.cli.hlo``, raw after-sharding-propagation HLO of jaxlib 0.10.2): the backward
    loop's captured ``f32[6,4,64,256]`` stack (written ``{replicated}``) became split on dim 1 and was
    all-gathered whole on each of 24 trips (18.9 MB, predicted 0); tests/test_loop_captured_pin.py.
    With the pin the value reaches the loop in the planned layout: any resharding to it happens once,
    before the loop.  An init that is an entry parameter with that very sharding (kept by XLA) or
    already a ``Sharding`` custom-call in it is left alone.  Returns the pins added."""

    init = w.operands[0] if w.operands else None
    sh = getattr(init, "sharding", None)
    if init is None or init.opcode != "tuple" or sh is None or not sh.is_tuple or not captured:
        return 0
    leaves = leaf_shapes(w.shape)
    if len(sh.tuple_elements) != len(leaves):
        return 0
    comp = init.parent
    names = {i.name for i in comp.instructions}
    entry = getattr(comp.parent, "entry", None)
    ops = list(init.operands)
    count = 0
    for k, op in enumerate(ops):
        rng = leaf_range(w.shape, k)
        if len(rng) != 1 or k not in captured or not is_array(op.shape) or op.shape.is_tuple \
                or not op.shape.dims:
            continue
        want = sh.tuple_elements[rng[0]]
        have = op.sharding
        if have is not None and have == want and (op.is_sharding_constraint or
                                                   (op.opcode == "parameter" and comp is entry)):
            continue
        ops[k] = _sharding_pin(comp, op, ".init.pin", want, names, before=init)
        count += 1
    if count:
        init.set_operands(ops)
    return count


def _pin_between(comp, src, users, suffix: str, names: set):
    """Insert ``<src.name><suffix> = custom-call(src), custom_call_target="Sharding"`` carrying ``src``'s
    sharding into ``comp`` before the first of ``users`` and make ``users`` read it; the name gets a
    number when taken (``names``: the names in use, updated).  Returns the custom-call."""
    cc = _sharding_pin(comp, src, suffix, src.sharding, names, before=_first_user(comp, src, users[0]))
    for u in users:
        u.set_operands([cc if o is src else o for o in u.operands])
    return cc


def insert_transpose_pins(instructions, device: str | None = None) -> int:
    """Between each ``dot`` that carries a sharding and the ``transpose`` instructions that read it,
    insert ``NAME.tpin = custom-call(NAME), custom_call_target="Sharding", sharding=<the dot's>`` and make
    those transposes read it (one per dot), so a compiler that folds ``transpose(dot)`` before it
    partitions (the TPU compiler's algebraic simplifier) cannot carry the dot's sharding onto a result of
    other dims (module docstring).  ``instructions``: the written module's instructions (every
    computation's).  ``device``: None (default: no device, a GPU profile) or a TPU profile's name
    (``mesh.memory_device``): on a chip whose simplifier swaps a dot's operands itself
    (:func:`hloshard.cost.tpu_partitioner.swaps_operands`, v6e: a read-only operand first, a computed one
    second) a dot it swaps and does not fold into its transpose
    (:func:`~hloshard.cost.tpu_partitioner.fold_applies`) is not pinned: the swap lays the dot out anew
    whatever the pin says, writing a transpose of its own after it, and the pin only keeps that transpose
    from merging with the written one, so the partitioner reshards the swapped dot's result into the pinned
    layout (moe_layer's ``dot(w2, relu(x w1))`` on ``v6e:2x4``: libtpu 0.0.42.1's ``optimal_seconds`` 3.49 us
    with the pin, 3.06 us -- GSPMD's program -- without; BENCHMARKS.md round 34, helper tpurows).  Every
    other dot read by a transpose is pinned, on every device: dropping the pins where the fold's rule does
    not apply was measured worse on a held-out model (qwen2_small's written modules on ``v5e:2x4``, 22
    pins -> 6: 7.62 -> 8.34 MB raw collective bytes, libtpu 144.2 -> 164.8 us for ``auto_expert``).
    Returns the custom-calls added.  Deterministic (the given order)."""
    count = 0
    names: dict = {}   # per computation the names in use (_pin_between adds the ones it takes)
    for d in list(instructions):
        if d.opcode != "dot" or d.sharding is None or not is_array(d.shape):
            continue
        users = [u for u in d.users if u.opcode == "transpose"]
        if device is not None and swaps_operands(d, str(device)):
            users = [u for u in users if fold_applies(d, u, str(device))]
        if not users:
            continue
        comp = d.parent
        if id(comp) not in names:
            names[id(comp)] = (comp, {i.name for i in comp.instructions})
        _pin_between(comp, d, users, ".tpin", names[id(comp)][1])
        count += 1
    return count


def pin_resharded_convolution_operands(written) -> list:
    """Pin the convolution operands a written module's own evaluation reshards but no pin carries, and return
    ``[(Pin, operand before the pin), ...]`` (the form of ``SolveResult.operand_pins``) for those inserted.

    ``written``: a :class:`hloshard.autoshard.evaluate.CostResult` of the module as written (its ``graph`` built
    on the module's own instructions, ``choice`` its completion).  Why: ``solve``'s post-solve local moves
    (:func:`hloshard.autoshard.local.improve_written`) re-annotate intermediates and re-solve ``solve``'s own pins,
    but write no new pin; when a move makes a convolution's chosen strategy read an operand that was not pinned
    in another layout, the written module's price assumes a resharding XLA's convolution handler does not do.
    New user 34 F12: the U-Net's first kernel gradient ``conv_general_dilated.63 = f32[3,3,3,64]
    convolution(args_67_ (batch over data), add_any.23.pin (batch over all 8 devices))``, result replicated: the
    price slices the images further (0 B, then an all-reduce of 6.9 KB: 11.8 KiB); XLA's handler, given the
    mismatched contracting splits, all-gathers the 4 MB gradient instead (3.6 MiB).  A ``Sharding`` custom-call
    of the images in the planned layout made XLA match the prediction (12.3 MiB = 12.3 MiB, every kind agreeing).
    The pins are :func:`operand_pins` of the written module's choice, convolutions only, operands that are not
    already ``Sharding`` custom-calls, and only where the planned resharding is a local slice (the planned layout
    only adds splits to the operand's: :func:`_refines`), the one resharding XLA's handler never picks for itself
    (a resharding it does anyway needs no pin); inserted by :func:`insert_pins`.  Returns [] when there are none."""

    graph, choice = written.graph, written.choice
    minfo = graph.ctx.minfo
    pins = []
    for p in operand_pins(graph.nodes, choice, graph.ctx):
        op = p.user.operands[p.index]
        if p.user.opcode != "convolution" or op.is_sharding_constraint:
            continue
        if op.sharding is not None and _refines(op.sharding, p.sharding, len(op.shape.dims), minfo):
            pins.append(p)
    out = [(p, p.user.operands[p.index]) for p in pins]
    insert_pins(pins)
    return out


def _refines(src, dst, rank: int, minfo) -> bool:
    """Does HloSharding ``dst`` only add splits to ``src`` (every dim's mesh axes in ``src`` a prefix of its axes in
    ``dst``, as mesh specs of ``minfo``): the resharding ``src -> dst`` is then a local slice, no bytes moved.
    False when either is not expressible as a mesh spec, or they are equal."""
    # MeshInfo.from_sharding raises nothing: a layout the mesh does not express comes back raw (no mesh spec)
    a, b = minfo.from_sharding(src, rank), minfo.from_sharding(dst, rank)
    if not (is_mesh_spec(a) and is_mesh_spec(b)) or a == b:
        return False
    return all(tuple(y[:len(x)]) == tuple(x) for x, y in zip(a, b))
