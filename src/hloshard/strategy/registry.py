"""Opcode -> strategy handler registry, and the build context handlers share.

A handler is ``fn(instr, ctx) -> StrategyGroup | TupleGroup``; a *backward* function is
``fn(instr, out_spec, ctx) -> tuple | None`` giving the operand specs an instruction needs to
produce ``out_spec`` without communication (used for user-fixed outputs and inside fusions).
Handler modules register into this module's tables with :func:`register` / :func:`register_backward`
(and :func:`register_preference`, :func:`register_result_flops`, :data:`DROPPED_ANNOTATION`); this
module imports none of them.  :func:`hloshard.strategy.handlers.build_group` (the module that imports
every handler) dispatches, applies user shardings with :func:`apply_fixed` (trimming, or generating
the one strategy that matches), falls back to :func:`replicated_group` for unknown opcodes, and
guarantees with :func:`_check_nonempty` that no instruction ends up without a strategy.
"""

from __future__ import annotations

from typing import Callable

from ..cost.reshard import plan, resharding_cost
from ..errors import InputError
from .base import (
    TOKEN, LeafRef, MeshInfo, Strategy, StrategyGroup, TupleGroup, is_array, is_mesh_spec, leaf_shapes,
    replicated_spec, elementwise_strategy,
)

HANDLERS: dict[str, Callable] = {}
BACKWARD: dict[str, Callable] = {}


def register(*opcodes: str):
    def deco(fn):
        for op in opcodes:
            HANDLERS[op] = fn
        return fn
    return deco


#: opcode -> compute per result element, a number or ``fn(instr) -> number``, of the strategy
#: :func:`_generate_for_output` makes for a written layout the opcode's handler does not enumerate
#: (default 1, elementwise); registered by handler modules, as their handler prices a result element
RESULT_FLOPS: dict = {}


def register_result_flops(flops, *opcodes: str) -> None:
    """Declare the compute per result element of ``opcodes`` (see :data:`RESULT_FLOPS`)."""
    for op in opcodes:
        RESULT_FLOPS[op] = flops


def result_flops(instr) -> float:
    """Compute per result element of ``instr`` (:data:`RESULT_FLOPS`; 1 when its opcode declares none)."""
    flops = RESULT_FLOPS.get(instr.opcode, 1.0)
    return float(flops(instr) if callable(flops) else flops)


def register_backward(*opcodes: str):
    def deco(fn):
        for op in opcodes:
            BACKWARD[op] = fn
        return fn
    return deco


class BuildContext:
    """State shared while building strategy groups for one module.

    ``minfo``: :class:`MeshInfo`; ``groups``: instruction -> group; ``fixed``: instruction -> the
    user HloSharding it must keep (per ``--keep-shardings``); ``weights``: instruction -> execution
    count (product of enclosing while trip counts); ``extra_edges`` are added by control flow.
    """

    def __init__(self, mesh, fixed: dict | None = None):
        self.mesh = mesh
        self.minfo = MeshInfo(mesh)
        self.groups: dict = {}
        self.fixed: dict = fixed or {}
        self.weights: dict = {}
        self.manual_nodes: set = set()
        #: ids of computations called from inside a manual region (manual as a whole) -> the region's manual
        #: sharding (``{manual}`` or a manual subgroup: what an instruction of it reading no manual value gets)
        self.manual_comps: dict = {}
        #: small modules get the exhaustive search space (e.g. dot strategies leaving a mesh axis idle)
        self.exhaustive = False
        self.writes_loop_state = True   #: False: ``cost`` of a module as given (control_flow._captured)
        self.seq = 0
        #: set by the graph builder: visit(computation, weight) builds every instruction of a
        #: called computation (while body, call, conditional branch) after its parameters were aliased
        self.visit = None
        #: (instruction, Spec) while a fixed instruction's handler runs (handlers.build_group): the one
        #: output layout :func:`apply_fixed` keeps, so that an enumeration of output layouts may build
        #: only the strategies producing it; ``only_out_used`` is set True by one that did
        self.only_out = None
        self.only_out_used = False

    # --- leaf resolution ------------------------------------------------------------------
    def resolve(self, instr, leaf: int = 0):
        """(StrategyGroup, k) owning leaf ``leaf`` of ``instr`` (k None for a single-leaf node), or
        TOKEN for token leaves.  Follows aliases."""
        seen = 0
        while True:
            g = self.groups[instr]
            if isinstance(g, StrategyGroup):
                return (g, leaf) if g.multi else (g, None)
            child = g.children[leaf]
            if child is TOKEN:
                return TOKEN
            if isinstance(child, LeafRef):
                instr, leaf = child.instr, child.leaf
                seen += 1
                if seen > 100000:
                    raise InputError(f"{instr.name}: cyclic tuple aliasing")
                continue
            return (child, None) if not child.multi else (child, 0)

    def leaf_specs(self, instr, leaf: int = 0) -> list:
        """Spec of ``instr``'s leaf under each strategy of the node that owns it."""
        r = self.resolve(instr, leaf)
        if r is TOKEN:
            return [None]
        g, k = r
        if k is None:
            return [s.out for s in g.strategies]
        return [s.out[k] for s in g.strategies]

    def is_manual_leaf(self, instr, leaf: int = 0) -> bool:
        r = self.resolve(instr, leaf)
        if r is TOKEN:
            return False
        return id(r[0]) in self.manual_nodes

    def set_group(self, instr, group) -> None:
        """Record ``group`` for ``instr`` and number its node groups in creation order."""
        self.groups[instr] = group
        for g in ([group] if isinstance(group, StrategyGroup) else group.children):
            if isinstance(g, StrategyGroup) and g.seq < 0:
                self.seq += 1
                g.seq = self.seq

    def weight(self, instr) -> float:
        return self.weights.get(instr, 1.0)


#: :func:`only_output`'s answer when every output layout is to be built
ALL_OUTPUTS = object()


def only_output(instr, ctx):
    """The one output layout a handler building ``instr``'s group needs to produce strategies for
    (``ctx.only_out``: ``instr`` is being built with a fixed single-array sharding, of which
    :func:`apply_fixed` keeps only the strategies producing that layout), else :data:`ALL_OUTPUTS`.
    A handler that uses the answer to skip other layouts must keep its strategies' order, and must
    be one whose strategies of the fixed layout do not depend on the skipped ones; asking records
    (``ctx.only_out_used``) that the group may be partial (:func:`apply_fixed` rebuilds the whole space
    where a step reads other layouts).  The answer may be a raw HloSharding, which no axis-tuple
    layout equals."""
    only = getattr(ctx, "only_out", None)
    if only is None or only[0] is not instr:
        return ALL_OUTPUTS
    ctx.only_out_used = True
    return only[1]


def _spec_key(spec):
    return spec if is_mesh_spec(spec) else ("raw", str(spec))


def _same(a, b) -> bool:
    if is_mesh_spec(a) and is_mesh_spec(b):
        return a == b
    if is_mesh_spec(a) or is_mesh_spec(b):
        return False
    return a == b


def replicated_group(instr, ctx: BuildContext, name: str = "replicated", require_replicated_inputs: bool = True):
    """The fallback: output replicated (every leaf), every operand leaf required replicated."""
    minfo = ctx.minfo
    inputs = []
    for op in instr.operands:
        if op.shape.is_tuple:
            inputs.append(tuple(replicated_spec(len(s.dims)) if is_array(s) else None for s in leaf_shapes(op.shape)))
        else:
            inputs.append(replicated_spec(len(op.shape.dims)) if (is_array(op.shape) and require_replicated_inputs) else None)
    shape = instr.shape
    if shape.is_tuple:
        leaves = leaf_shapes(shape)
        out = tuple(replicated_spec(len(s.dims)) if is_array(s) else None for s in leaves)
        mem = sum(minfo.bytes_per_device(s, o) for s, o in zip(leaves, out) if o is not None)
        st = Strategy(name, out, tuple(inputs), memory=mem)
        return StrategyGroup(instr, [st], multi=True, leaf_shapes=tuple(leaves))
    out = replicated_spec(len(shape.dims)) if is_array(shape) else None
    st = elementwise_strategy(name, out, inputs, shape, minfo) if out is not None else Strategy(name, None, tuple(inputs))
    return StrategyGroup(instr, [st], leaf_shapes=(shape,))


def _fixed_specs(instr, ctx: BuildContext):
    """Per leaf the Spec the user sharding fixes (None for token leaves)."""
    sh = ctx.fixed[instr]
    leaves = leaf_shapes(instr.shape)
    if instr.shape.is_tuple:
        elems = list(sh.tuple_elements) if sh.is_tuple else [sh] * len(leaves)
        if len(elems) != len(leaves):
            raise InputError(f"{instr.name}: sharding has {len(elems)} elements but the shape has {len(leaves)} leaves")
    else:
        elems = [sh]
    out = []
    for s, e in zip(leaves, elems):
        out.append(ctx.minfo.from_sharding(e, len(s.dims)) if is_array(s) else None)
    return out


def _generate_for_output(instr, out_spec, ctx: BuildContext) -> Strategy:
    """One strategy producing ``out_spec`` (array instr): backward inference when the opcode has it (for
    a raw HloSharding ``out_spec`` only when the backward function says ``accepts_raw``), else every
    operand replicated (always correct: compute locally, keep the required shard).  Compute per result
    element: :data:`RESULT_FLOPS` of the opcode, so that a written layout the handler does not
    enumerate (e.g. a dim over three mesh axes in a non-ascending order) costs what an enumerated one
    would: a parameter, transpose, reshape or slice computes nothing."""
    flops = result_flops(instr)
    fn = BACKWARD.get(instr.opcode)
    inputs = None
    if fn is not None and (is_mesh_spec(out_spec) or getattr(fn, "accepts_raw", False)):
        try:
            inputs = fn(instr, out_spec, ctx)
        except (KeyError, IndexError, ValueError):
            inputs = None
    if inputs is None:
        inputs = tuple(replicated_spec(len(op.shape.dims)) if is_array(op.shape) else None for op in instr.operands)
    return elementwise_strategy("user", out_spec, inputs, instr.shape, ctx.minfo, flops)


def apply_fixed(group, instr, ctx: BuildContext, full=None):
    """Restrict ``group`` to the user sharding of ``instr`` (trim, else generate a matching strategy).
    ``full``: None when ``group`` holds the handler's whole strategy space; else a function returning
    the group with the whole space, where ``group`` was built with only the strategies producing the
    fixed layout (``BuildContext.only_out``); called only when a step reads the others
    (:func:`_resharded_outputs`)."""
    specs = _fixed_specs(instr, ctx)
    if isinstance(group, TupleGroup):
        children = []
        for leaf, (child, spec) in enumerate(zip(group.children, specs)):
            if child is TOKEN or spec is None:
                children.append(child)
                continue
            if isinstance(child, StrategyGroup):
                children.append(_trim(child, [spec], ctx, leaf_shape=leaf_shapes(instr.shape)[leaf]))
                continue
            # alias: insert a copy node that pins the sharding; the edge pays the resharding
            shape = leaf_shapes(instr.shape)[leaf]
            st = Strategy("user", spec, (spec,), memory=ctx.minfo.bytes_per_device(shape, spec))
            g = StrategyGroup(instr, [st], operands=[LeafRef(child.instr, child.leaf)], leaf_shapes=(shape,), fixed=True)
            children.append(g)
        group.children = children
        return group
    return _trim(group, specs, ctx, full=full)


def _trim(group: StrategyGroup, specs: list, ctx: BuildContext, leaf_shape=None, full=None) -> StrategyGroup:
    want = tuple(specs) if group.multi else specs[0]
    keep = []
    for st in group.strategies:
        if group.multi:
            ok = all(w is None or _same(o, w) for o, w in zip(st.out, want))
        else:
            ok = _same(st.out, want)
        if ok:
            keep.append(st)
    if not keep and not group.multi and group.operands is None:
        keep = [_generate_for_output(group.instr, want, ctx)]
    elif not keep:
        if group.multi:
            base = group.strategies[0]
            mem = sum(ctx.minfo.bytes_per_device(s, o) for s, o in zip(group.leaf_shapes, want) if o is not None)
            keep = [Strategy("user", want, tuple(None for _ in base.inputs) if group.operands is not None
                             else _replicated_inputs(group.instr), memory=mem)]
        elif group.operands is not None:
            # a while/conditional leaf: requires the same spec of each of its operand leaves
            st0 = group.strategies[0]
            keep = [Strategy("user", want, tuple(want if x is not None else None for x in st0.inputs),
                             memory=ctx.minfo.bytes_per_device(leaf_shape or group.instr.shape, want))]
        else:
            keep = [_generate_for_output(group.instr, want, ctx)]
    if not group.multi and group.operands is None:
        keep = _realized(group, keep, want, ctx, full)
    group.strategies = keep
    group.follow = None
    group.fixed = True
    return group


#: opcode -> fn(instr, operand specs, strategies) -> the strategies XLA's handler prefers (e.g. a dot
#: keeps the contracting split its operands share); registered by handler modules; a fn with the
#: attribute ``takes_ctx`` is also given the BuildContext (its mesh)
PREFERRED: dict[str, Callable] = {}

#: opcode -> fn(instr) -> True when XLA never sees ``instr``'s written sharding, so that it pins nothing
#: (the users read the aliased value's own layout); registered by handler modules (tuple_ops)
DROPPED_ANNOTATION: dict[str, Callable] = {}

#: opcodes XLA partitions with their operands' layouts and then reshards the result to the written
#: layout (measured: dot, convolution, slice); other ops reshard their operands to the written layout
#: (e.g. sort, elementwise ops)
RESHARDS_OUTPUT = {"dot", "convolution", "slice"}

#: added to a strategy that computes in its own layout and reshards its result: for equal bytes XLA
#: produces the written layout directly (measured, tests/test_handlers_dot.py)
OUTPUT_RESHARD_TIE_BREAK = 0.2

#: elementwise opcodes of more than one operand, which XLA's partitioner computes in their operands'
#: layout when every operand has the same one, then reshards the one result to the written layout
#: (``SpmdPartitioningVisitor::HandleElementwise``, jaxlib 0.10.2: its ``multi_operand_same_sharding``
#: branch); with operands in different layouts each operand is resharded to the written layout.  Filled
#: by the elementwise handler module (:func:`register_same_layout_computes`).
SAME_LAYOUT_COMPUTES: set = set()


def register_same_layout_computes(*opcodes: str) -> None:
    """Declare ``opcodes`` as :data:`SAME_LAYOUT_COMPUTES`."""
    SAME_LAYOUT_COMPUTES.update(opcodes)


def register_preference(*opcodes: str):
    def deco(fn):
        for op in opcodes:
            PREFERRED[op] = fn
        return fn
    return deco


def _realized(group: StrategyGroup, keep: list, want, ctx: BuildContext, full=None) -> list:
    """The strategies of a user-fixed node XLA's partitioner can realize, given the operands' layouts
    when they are known (every operand's node has one strategy, as under ``hloshard cost``).

    In order (measured against GSPMD, tests/test_handlers_*.py): strategies producing the written
    layout with the operands exactly as they are; the ones the op's handler prefers
    (:data:`PREFERRED`, e.g. a dot keeping the contracting split both operands have); for the ops of
    :data:`RESHARDS_OUTPUT`, strategies that compute with the operands as they are and reshard their
    result (:func:`_resharded_outputs`); else
    ``keep`` (the cheapest wins: XLA reshards the operands).  With an operand layout still open, ``keep`` unchanged.
    ``full``: see :func:`apply_fixed` (the whole space, for :func:`_resharded_outputs`)."""
    instr = group.instr
    if full is not None:
        whole = []

        def source():   # the handler's whole space, built at most once
            if not whole:
                whole.append(full())
            return whole[0]
    else:
        def source():
            return group
    actual = _operand_specs(instr, ctx)
    if actual is None:
        return keep
    exact = _exact(keep, actual)
    if exact:
        return exact
    pref = PREFERRED.get(instr.opcode)
    if pref is not None:
        # a sliced variant (partial sums reduced whole, then sliced: ``*+slice``) is XLA's realization only with the
        # operands exactly in its layouts (found above); a handler's preference never re-splits the operands into it
        # (tests/test_handlers_dot.py ``contract_then_slice``: XLA reduces over the operands' own contracting axes)
        unsliced = [st for st in keep if not st.name.endswith("+slice")] or keep
        chosen = pref(instr, actual, unsliced, ctx) if getattr(pref, "takes_ctx", False) else pref(instr, actual, unsliced)
        if chosen:
            return chosen
    free = [st for st in keep if not st.name.endswith("|allreduce+slice") and _free_edges(instr, st, actual, ctx)]
    if free:   # every operand reaches its layout by a local slice: XLA slices and partitions directly
        return free
    if instr.opcode in SAME_LAYOUT_COMPUTES and _one_operand_layout(instr, actual):
        # XLA computes in the operands' common layout and reshards the one result (not each operand)
        exact = _exact(_resharded_outputs(source(), want, ctx, tie_break=0.0), actual)
        return exact or keep
    if instr.opcode not in RESHARDS_OUTPUT:
        return keep
    exact = _exact(_resharded_outputs(source(), want, ctx), actual)
    return exact or keep


def _one_operand_layout(instr, actual) -> bool:
    """True when ``instr`` has at least two operands, all arrays that XLA does not rebuild per user
    (:func:`rematerialized`: a broadcast of a scalar or a constant, whose layout under XLA is its own
    propagation's choice, since jax's StableHLO route drops their shardings), in one known layout:
    the condition of XLA's ``HandleElementwise`` computing in the operands' layout
    (:data:`SAME_LAYOUT_COMPUTES`).  ``actual``: :func:`_operand_specs` of ``instr``."""
    if len(instr.operands) < 2 or len(actual) != len(instr.operands):
        return False
    if any(a is None for a in actual):
        return False
    return all(_same(a, actual[0]) for a in actual[1:])


def _operand_specs(instr, ctx: BuildContext):
    """Per operand its layout when its node's strategies all produce one layout (None for non-arrays);
    None if any is open.  A fixed operand often keeps several strategies that differ only in how they
    produce that layout (e.g. a reshape of a written layout reached from two operand layouts): its
    layout is known all the same."""
    actual = []
    for op in instr.operands:
        if not is_array(op.shape) or rematerialized(op):   # XLA rebuilds it in any layout
            actual.append(None)
            continue
        r = ctx.resolve(op, 0) if op in ctx.groups else None
        if not isinstance(r, tuple) or not r[0].strategies:
            return None
        g, leaf = r
        outs = [st.out if leaf is None else st.out[leaf] for st in g.strategies]
        if any(not _same(o, outs[0]) for o in outs[1:]):
            return None
        actual.append(outs[0])
    return actual


def _free_edges(instr, st, actual, ctx) -> bool:
    """Every operand of ``st`` is reached from its actual layout without communication (equal, or a
    local slice of a less split layout: the resharding plan costs nothing)."""
    minfo = ctx.minfo
    for k, a in enumerate(actual):
        req = st.inputs[k] if k < len(st.inputs) else None
        if a is None or req is None or _same(a, req):
            continue
        shape = instr.operands[k].shape
        try:
            if resharding_cost(shape, minfo.to_sharding(a, len(shape.dims)), minfo.to_sharding(req, len(shape.dims)),
                               ctx.mesh) > 0:
                return False
        except Exception:  # noqa: BLE001 - not plannable: not free
            return False
    return True


def _exact(strategies: list, actual: list) -> list:
    """The strategies requiring every operand exactly in its actual layout (no resharding)."""
    out = []
    for st in strategies:
        if all(a is None or k >= len(st.inputs) or st.inputs[k] is None or _same(a, st.inputs[k])
               for k, a in enumerate(actual)):
            out.append(st)
    return out


def _resharded_outputs(group: StrategyGroup, want, ctx: BuildContext,
                       tie_break: float = OUTPUT_RESHARD_TIE_BREAK) -> list:
    """For a user-fixed output no strategy produces: each strategy computed in its own layout and its
    result resharded to ``want`` (what XLA's partitioner does when an op's natural output layout is not
    the one written: e.g. a dot all-reduces in its own layout and dynamic-slices or collective-permutes
    the result; a slice exchanges halos in its operand's layout and gathers the small result).  The
    output resharding (``cost.reshard.plan``) is added to ``comm`` and its collectives to
    ``Strategy.collectives``.  One candidate per distinct (output, inputs).  ``tie_break``: added to each
    candidate's ``comm`` (:data:`OUTPUT_RESHARD_TIE_BREAK`; 0 where XLA has no other way, as for
    :data:`SAME_LAYOUT_COMPUTES`)."""
    instr = group.instr
    shape = instr.shape
    if not is_array(shape):
        return []
    minfo = ctx.minfo
    rank = len(shape.dims)
    try:
        dst = minfo.to_sharding(want, rank)
    except Exception:  # noqa: BLE001 - not a layout the mesh can express: no candidates
        return []
    plans: dict = minfo.memo.setdefault("output-reshard", {})
    seen: set = set()
    out = []
    for st in group.strategies:
        if st.out is None or (not is_mesh_spec(st.out) and getattr(st.out, "is_manual", False)):
            continue
        key = (_spec_key(st.out), tuple(_spec_key(x) if x is not None and not isinstance(x, tuple) or
                                        (isinstance(x, tuple) and is_mesh_spec(x)) else str(x) for x in st.inputs))
        if key in seen:
            continue
        seen.add(key)
        pk = (shape.element_type, tuple(shape.dims), _spec_key(st.out), _spec_key(want))
        if pk not in plans:
            try:
                pl = plan(shape, minfo.to_sharding(st.out, rank), dst, ctx.mesh)
                plans[pk] = (float(pl.total_cost), tuple(pl.predicted_collectives()))
            except Exception:  # noqa: BLE001 - the planner cannot express it: no candidate
                plans[pk] = None
        hit = plans[pk]
        if hit is None:
            continue
        cost, cols = hit
        out.append(Strategy(st.name + ">user", want, st.inputs, compute=st.compute,
                            comm=st.comm + cost + tie_break,
                            memory=minfo.bytes_per_device(shape, want),
                            collectives=tuple(st.collectives) + cols))
    return out


def _replicated_inputs(instr):
    out = []
    for op in instr.operands:
        if op.shape.is_tuple:
            out.append(tuple(replicated_spec(len(s.dims)) if is_array(s) else None for s in leaf_shapes(op.shape)))
        else:
            out.append(replicated_spec(len(op.shape.dims)) if is_array(op.shape) else None)
    return tuple(out)


def rematerialized(op) -> bool:
    """A value XLA's partitioner rebuilds in whatever layout a user needs instead of resharding it: a
    broadcast of a scalar (measured: a broadcast of a scalar parameter or constant split on dim 1, used
    split on dim 0, costs nothing; a broadcast of a vector is resharded with an all-to-all) and a
    constant (measured: an ``f32[4,8]`` constant annotated ``[2,4]`` used replicated costs nothing, XLA
    computes the user from the whole literal; tests/test_handlers_parameter.py)."""
    if op.opcode == "constant" and is_array(op.shape):
        return True
    return op.opcode == "broadcast" and len(op.operands) == 1 and is_array(op.operands[0].shape) \
        and not op.operands[0].shape.dims


def read_anywhere(op) -> bool:
    """A :func:`rematerialized` value that two or more instructions read: XLA rebuilds it for each
    reader in that reader's layout (measured, :func:`rematerialized`), so no reader's layout is tied to
    its own or to another reader's.  The cost graph drops those readers' requirements on it
    (:func:`_free_rematerialized`) and no elementwise reader follows it
    (:func:`hloshard.strategy.elementwise.choose_followee`).  Why: a scalar broadcast that jax's CSE
    shares between updates of differently split tensors (Adam's ``b2 * v`` of a model's every
    parameter, new user 31 F20) otherwise forces them all into one layout or charges a resharding
    XLA never does; the GN-ResNet ``solve`` keeping the user's layout was "proven optimal" at
    30,142,065 units where XLA's own completion of the same layout costs 15,445,215 (BENCHMARKS.md,
    "Loop bodies and shared broadcasts").  Counted in operand slots (a tuple holding it twice, a while's
    init of two stacked results, reads it twice).  One read: False (its edge is free to satisfy and gives
    the value its reader's layout)."""
    return rematerialized(op) and sum(u.operands.count(op) for u in {id(u): u for u in op.users}.values()) > 1


def _free_rematerialized(group, instr, ctx) -> None:
    """Drop the operand requirements on rematerialized operands whose layout is already pinned (one
    strategy, e.g. a written sharding under ``hloshard cost``) or that several instructions read
    (:func:`read_anywhere`): XLA rebuilds them for this user, so no resharding edge.  A broadcast that
    only this instruction reads and whose layout is still open keeps its edge, so that the solver gives
    it its user's layout (for free) instead of an arbitrary one."""
    if not isinstance(group, StrategyGroup) or group.operands is not None:
        return

    def pinned(op) -> bool:
        r = ctx.resolve(op, 0) if op in ctx.groups else None
        return isinstance(r, tuple) and len(r[0].strategies) == 1

    idx = [k for k, op in enumerate(instr.operands) if rematerialized(op) and (read_anywhere(op) or pinned(op))]
    if not idx:
        return
    for st in group.strategies:
        ins = list(st.inputs)
        for k in idx:
            if k < len(ins):
                ins[k] = None
        st.inputs = tuple(ins)


def _check_nonempty(group, instr, ctx):
    if isinstance(group, StrategyGroup):
        if not group.strategies:
            fb = replicated_group(instr, ctx)
            group.strategies = fb.strategies
            group.multi = fb.multi
            group.leaf_shapes = fb.leaf_shapes
            group.follow = None
            group.operands = None
    else:
        for c in group.children:
            if isinstance(c, StrategyGroup) and not c.strategies:
                raise InputError(f"{instr.name}: no sharding strategy for a tuple element")
