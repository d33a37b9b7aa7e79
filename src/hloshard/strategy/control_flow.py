"""while, call, conditional.

* while: one node per leaf of the loop state, every layout of the leaf; a strategy requires the same
  layout of the init value's leaf (once) and of the body root's leaf (a back edge weighted by the
  trip count).  The body and condition parameters alias the while's leaves, so they follow the
  loop tuple child by child (required for correctness, as in XLA).  Everything inside the body and
  condition has its costs multiplied by the trip count (:func:`hloshard.hlo.loops.trip_count`: the
  ``known_trip_count`` backend config, else the induction variable's init, step and bound, else a
  guess of 100 iterations that ``solve`` and ``cost`` report as a warning).  The execution counts
  themselves are assigned by the graph builder (:func:`hloshard.hlo.loops.execution_counts`).
  A loop invariant (an element the body passes through unchanged, :func:`hloshard.hlo.loops.invariant_elements`)
  is loop state like any other in the graph of a plan ``solve`` writes (``ctx.writes_loop_state``): the
  while is written with its whole state's sharding and the body root reads the element through a
  ``Sharding`` custom-call (:func:`hloshard.strategy.realize.keep_invariants`), so StableHLO's while
  canonicalization does not capture it and XLA keeps the loop's layout for it (new user 25's scan LM,
  2x4: 27,075,600 B of collectives under XLA per trip, the prediction to the byte, kinds 100%; written
  without a sharding, round 25: 41.7 MB, counted before unmatched body collectives counted their trips;
  tests/test_loop_kept_state.py).
  Exception, the invariants of a while that reaches XLA without a sharding of its own (``cost`` of a
  module as given, e.g. jax's export, and a loop ``solve`` cannot write whole, :func:`keeps_whole_state`):
  the leaf is not a node but the init's leaf itself, so the body reads it in the init's layout and every
  body user that needs another layout pays the resharding once per trip.  This is what XLA realizes: on
  the way in through StableHLO (jax, the oracle, ``--xla``) the while canonicalization of the HLO ->
  StableHLO import turns such elements into values captured from outside the loop, the body parameter's
  sharding goes with them, and the SPMD partitioner reshards the captured value at its users inside the
  body on every iteration (raw after-spmd-partitioning HLO of jaxlib 0.10.2: an all-to-all of the whole
  f32[4,64,256] element per trip on the body's dynamic-slice, not one at the loop entry;
  tests/test_handlers_control_flow.py).  For such a loop ``solve`` pins the init value of each captured
  element in the layout priced here (``NAME.init.pin``, :func:`hloshard.strategy.realize.insert_loop_state_pins`):
  XLA keeps no tuple sharding through StableHLO, and GSPMD's propagation would otherwise capture the
  value in a layout of its own (tests/test_loop_captured_pin.py).
* call: the computation's parameters alias the call operands, the call's leaves alias the
  computation root: the callee is laid out as if inlined.
* conditional: each branch's parameter aliases its operand; one node per output leaf (every layout)
  requires that layout of each branch root (edges weighted 1/number of branches: the expected cost).
"""

from __future__ import annotations

from ..hlo import loops
from ..hlo.loops import DEFAULT_TRIP_COUNT, called  # noqa: F401  (re-exported)
from .base import TOKEN, LeafRef, Strategy, StrategyGroup, TupleGroup, is_array, leaf_range, leaf_shapes, spec_name
from .registry import DROPPED_ANNOTATION, apply_fixed, read_anywhere, register, rematerialized
from ..hlo.sharding import HloSharding

def trip_count(instr) -> int:
    """Iterations of a while loop as an int (:func:`hloshard.hlo.loops.trip_count`, which also says
    whether the count is exact and how it was found)."""
    return loops.trip_count(instr).count


def _alias_all(instr, source) -> TupleGroup:
    shapes = leaf_shapes(source.shape)
    return TupleGroup(instr, [LeafRef(source, l) if is_array(s) else TOKEN for l, s in enumerate(shapes)])


def _leaf_node(instr, shape, sources, weights, ctx, free=()) -> StrategyGroup:
    """One loop-state / branch-output leaf: every layout, each requiring itself of every source but those
    in ``free`` (indices of ``sources`` XLA rebuilds in any layout: :func:`_rebuilt_init`)."""
    strategies = []
    for spec in ctx.minfo.enumerate(shape.dims):
        strategies.append(Strategy(spec_name(spec), spec, tuple(None if k in free else spec
                                                                 for k in range(len(sources))),
                                   memory=ctx.minfo.bytes_per_device(shape, spec)))
    return StrategyGroup(instr, strategies, operands=list(sources), operand_weights=list(weights),
                         leaf_shapes=(shape,))


def keeps_whole_state(instr) -> bool:
    """Can ``solve`` write the ``while`` ``instr`` with the sharding of its whole state: every loop
    invariant (:func:`hloshard.hlo.loops.invariant_elements`) is an array element (not a tuple or a
    token), so that a ``Sharding`` custom-call at the body root can keep it in the loop state
    (:func:`hloshard.strategy.realize.keep_invariants`)."""
    if not instr.shape.is_tuple:
        return False
    elems = instr.shape.tuple_shapes
    return all(k < len(elems) and is_array(elems[k]) and not elems[k].is_tuple
               for k in loops.invariant_elements(instr))


def _captured(instr, ctx) -> set:
    """Flat leaf indices of the loop state of ``instr`` that XLA captures from outside the loop: its
    loop invariants when the while reaches XLA without a sharding of its own -- in a module priced as
    given (``ctx.writes_loop_state`` False: ``cost``), or one ``solve`` cannot write whole
    (:func:`keeps_whole_state`; ``autoshard.apply`` writes no sharding then).  None for a user-fixed
    while."""
    if instr in ctx.fixed or not instr.shape.is_tuple:
        return set()
    if getattr(ctx, "writes_loop_state", False) and keeps_whole_state(instr):
        return set()
    return {l for k in loops.invariant_elements(instr) for l in leaf_range(instr.shape, k)}


def _release_captured(comp, init, leaves, ctx) -> None:
    """Written shardings that do not reach XLA for a captured element: the body root's element is
    dropped with the loop operand, so it is held to the init's layout when that is known (otherwise
    its written layout would be charged a resharding XLA does not do).  (A ``get-tuple-element`` of the
    body / condition parameter reading it, the captured value itself in StableHLO, pins nothing
    anyway: ``tuple_ops.annotation_dropped``.)  XLA reshards at the element's users instead
    (measured, tests/test_handlers_control_flow.py)."""

    root = comp.root
    sh = ctx.fixed.get(root)
    shapes = leaf_shapes(root.shape)
    if sh is None or not sh.is_tuple or len(sh.tuple_elements) != len(shapes) or not leaves:
        return
    elems = list(sh.tuple_elements)
    for l in leaves:
        r = ctx.resolve(init, l)
        if r is TOKEN or len(r[0].strategies) != 1:
            continue
        st = r[0].strategies[0]
        elems[l] = ctx.minfo.to_sharding(st.out if r[1] is None else st.out[r[1]], len(shapes[l].dims))
    ctx.fixed[root] = HloSharding.tuple(elems)


def _rebuilt_init(init, leaf: int, ctx) -> bool:
    """Is leaf ``leaf`` of a while's ``init`` a value XLA's partitioner rebuilds in the loop state's layout
    instead of resharding it (:func:`hloshard.strategy.registry.rematerialized`: a scalar broadcast or a
    constant -- the zeros a ``lax.scan`` stacks its per-step results or gradients into) that is pinned to one
    layout or read more than once (:func:`hloshard.strategy.registry.read_anywhere`; the rule of
    ``registry._free_rematerialized`` for every other reader)?  Then the loop-state leaf requires nothing of
    it.  Measured (new user 31's GN-ResNet, backward scan: one ``broadcast`` of zeros initialising two
    stacked gradients of different layouts; XLA moves nothing at the while where an init edge priced
    1,769,472 B of all-to-all)."""
    r = ctx.resolve(init, leaf) if init in ctx.groups else None
    if not isinstance(r, tuple):
        return False
    src = r[0].instr
    return rematerialized(src) and (read_anywhere(src) or len(r[0].strategies) == 1)


def _hold_propagated(instr, children, ctx) -> None:
    """A while priced as given (``cost``) whose loop state XLA's propagation chose (``hloshard cost --complete
    xla``: ``module.xla_loop_states``, :func:`hloshard.partition_specs.complete_with_xla`): each loop-state
    leaf node keeps only that layout, as XLA partitions the loop -- chosen freely, the cheapest layout for the
    body XLA sharded was another (new user 31 F15's backward scan: an activation carried split on the batch
    alone, 983,040 B of all-gathers predicted at the while where XLA keeps the init's layout and moves
    nothing there).  Nothing changes for a user-fixed while, a leaf with no recorded layout, or ``solve``'s
    graph."""
    states = getattr(getattr(instr.parent, "parent", None), "xla_loop_states", None)
    want = states.get(instr.name) if states and not getattr(ctx, "writes_loop_state", False) else None
    if want is None or instr in ctx.fixed or len(want) != len(children):
        return
    for l, g in enumerate(children):
        if not isinstance(g, StrategyGroup) or want[l] is None:
            continue
        spec = ctx.minfo.from_sharding(want[l], len(g.leaf_shapes[0].dims))
        same = [st for st in g.strategies if st.out == spec]
        if same:
            g.strategies = same[:1]
        else:
            st = g.strategies[0]
            g.strategies = [Strategy(spec_name(spec), spec, tuple(None if i is None else spec for i in st.inputs),
                                     memory=ctx.minfo.bytes_per_device(g.leaf_shapes[0], spec))]


@register("while")
def handle_while(instr, ctx):
    body = called(instr, "body", 0)
    cond = called(instr, "condition", 1)
    init = instr.operands[0]
    trips = trip_count(instr)
    shapes = leaf_shapes(instr.shape)
    captured = _captured(instr, ctx)
    children = []
    for l, s in enumerate(shapes):
        if not is_array(s):
            children.append(TOKEN)
            continue
        if l in captured:   # the init's value itself, in the init's layout, inside and after the loop
            children.append(LeafRef(init, l))
            continue
        children.append(_leaf_node(instr, s, [LeafRef(init, l), LeafRef(body.root, l)], [1.0, float(trips)], ctx,
                                   free=(0,) if _rebuilt_init(init, l, ctx) else ()))
    _hold_propagated(instr, children, ctx)
    group = TupleGroup(instr, children)
    if instr in ctx.fixed:
        group = apply_fixed(group, instr, ctx)
        ctx.fixed.pop(instr)  # applied here, before the body is built
    ctx.set_group(instr, group)
    w = ctx.weight(instr) * trips
    for comp in (body, cond):
        if comp is None:
            continue
        for p in comp.parameters:
            ctx.set_group(p, _alias_all(p, instr))
        if captured and comp is body:
            _release_captured(comp, init, captured, ctx)
        ctx.visit(comp, w)
    return group


@register("call")
def handle_call(instr, ctx):
    comp = called(instr, "to_apply", 0)
    if comp is None:
        return None
    for k, p in enumerate(comp.parameters):
        ctx.set_group(p, _alias_all(p, instr.operands[k]))
    ctx.visit(comp, ctx.weight(instr))
    return _alias_all(instr, comp.root)


def call_annotation_redundant(instr) -> bool:
    """True for a ``call`` whose written sharding is its callee root's (what ``solve`` writes): it pins
    nothing the root does not, and XLA, which inlines the call, keeps no second buffer for it, so the
    call stays an alias of the root instead of becoming a node that would count its bytes twice."""
    comp = called(instr, "to_apply", 0)
    root = comp.root if comp is not None else None
    return root is not None and instr.sharding is not None and root.sharding is not None and \
        instr.sharding.without_metadata() == root.sharding.without_metadata()


DROPPED_ANNOTATION["call"] = call_annotation_redundant


@register("conditional")
def handle_conditional(instr, ctx):
    branches = [c for c in instr.called_computations]
    if not branches:
        return None
    for i, comp in enumerate(branches):
        for p in comp.parameters:
            ctx.set_group(p, _alias_all(p, instr.operands[i + 1]))
        ctx.visit(comp, ctx.weight(instr))
    shapes = leaf_shapes(instr.shape)
    w = 1.0 / len(branches)
    children = []
    for l, s in enumerate(shapes):
        if not is_array(s):
            children.append(TOKEN)
            continue
        children.append(_leaf_node(instr, s, [LeafRef(c.root, l) for c in branches], [w] * len(branches), ctx))
    if not instr.shape.is_tuple:
        return children[0]
    return TupleGroup(instr, children)
