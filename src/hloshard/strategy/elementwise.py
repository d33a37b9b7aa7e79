"""Elementwise ops (unary, binary, compare, select, clamp, convert, copy, map ...): follow an operand.

The op follows one operand (XLA's "following"): strategy ``p`` has the followed operand's layout
``p`` as output and requires it of every operand of the same shape; scalar operands (clamp bounds,
select predicate of rank 0) are required replicated.  The followed operand is the one whose node
has the most strategies (a node pinned to one layout is followed only when every operand is; a
scalar broadcast or constant that several instructions read never is: XLA rebuilds it per reader,
``registry.read_anywhere``);
ties go to the operand produced last (closest in the schedule, like XLA's depth priority).
When no operand offers more than one layout the op enumerates its own layouts instead.
Compute: one flop per output element on each device.
"""

from __future__ import annotations

from .base import (
    Strategy, StrategyGroup, compute_cost, elementwise_strategy, is_array, is_mesh_spec, leaf_shapes, replicated_spec,
    spec_name,
)
from .registry import (
    ALL_OUTPUTS, only_output, read_anywhere, register, register_backward, register_same_layout_computes,
)
from .reshape import backward_reshape, handle_reshape
from .tuple_ops import alias_leaves

UNARY = ("abs ceil floor cos sin tan exponential exponential-minus-one log log-plus-one logistic negate not popcnt "
         "round-nearest-afz round-nearest-even rsqrt sqrt cbrt sign tanh erf is-finite real imag copy convert "
         "count-leading-zeros clz reduce-precision erf-inv domain").split()
BINARY = ("add subtract multiply divide remainder power maximum minimum and or xor shift-left "
          "shift-right-arithmetic shift-right-logical atan2 complex compare stochastic-convert").split()
TERNARY = ["select", "clamp", "map"]


def _with_opcode_table(ours: list, table) -> list:
    """``ours`` plus the opcodes of the IR's opcode table of the same arity (e.g. ``cosine``, ``sine``,
    ``acosh``, ``mulhi``: one list of elementwise opcodes, hloshard.hlo.opcodes)."""
    return ours + sorted(set(table) - set(ours))


from ..hlo.opcodes import ELEMENTWISE_BINARY, ELEMENTWISE_TERNARY, ELEMENTWISE_UNARY  # noqa: E402

UNARY = _with_opcode_table(UNARY, ELEMENTWISE_UNARY)
BINARY = _with_opcode_table(BINARY, ELEMENTWISE_BINARY)
TERNARY = _with_opcode_table(TERNARY, ELEMENTWISE_TERNARY)
ELEMENTWISE = UNARY + BINARY + TERNARY

# XLA computes these in their operands' common layout and reshards the result (registry.SAME_LAYOUT_COMPUTES;
# measured for add, multiply, compare, select, clamp: tests/test_strategy_xla_reshard_cache.py); map's
# partitioning is not measured
register_same_layout_computes(*(op for op in BINARY + TERNARY if op != "map"))


def choose_followee(instr, ctx, candidates=None):
    """Index of the operand to follow, or None when none offers more than one layout."""
    best = None
    best_key = None
    idx = candidates if candidates is not None else range(len(instr.operands))
    for i in idx:
        op = instr.operands[i]
        if not is_array(op.shape) or tuple(op.shape.dims) != tuple(instr.shape.dims) or read_anywhere(op):
            continue   # (a value XLA rebuilds per reader ties no reader's layout: registry.read_anywhere)
        r = ctx.resolve(op, 0)
        if not isinstance(r, tuple):
            continue
        n = len(r[0].strategies)
        key = (n, r[0].seq)
        if best_key is None or key > best_key:
            best, best_key = i, key
    if best is None or best_key[0] <= 1:
        return None
    return best


_SAME = object()


def _template(instr) -> tuple:
    """Per operand: None (not an array), _SAME (same dims as the output) or its replicated spec.
    (Computed once per handler call: the IR's instructions are slotted, nothing can be cached on them.)"""
    dims = tuple(instr.shape.dims)
    return tuple(None if not is_array(op.shape) else _SAME if tuple(op.shape.dims) == dims
                 else replicated_spec(len(op.shape.dims)) for op in instr.operands)


def _fill(template: tuple, spec) -> tuple:
    return tuple(spec if x is _SAME else x for x in template)


def same_dims_inputs(instr, spec):
    """Operand specs of an elementwise op with output ``spec``: same-shaped operands get ``spec``,
    others (scalars, rank-0 bounds) are required replicated."""
    return _fill(_template(instr), spec)


def follow_group(instr, ctx, operand_index: int, transform, flops_per_element: float = 1.0, multi_shapes=None):
    """Follower group: ``transform(spec) -> (out, inputs, comm)`` for each strategy of the followed
    operand's node.  ``out`` may be a tuple of specs when ``multi_shapes`` (leaf shapes) is given."""
    minfo = ctx.minfo
    op = instr.operands[operand_index]
    specs = ctx.leaf_specs(op, 0)
    strategies = []
    for p, spec in enumerate(specs):
        out, inputs, comm = transform(spec)
        if multi_shapes is not None:
            mem = sum(minfo.bytes_per_device(s, o) for s, o in zip(multi_shapes, out) if o is not None)
            elems = 0
            for s, o in zip(multi_shapes, out):
                if o is not None and is_array(s):
                    n = 1
                    for d in minfo.tile_dims(s.dims, o):
                        n *= d
                    elems += n
            st = Strategy(f"follow{p}", out, tuple(inputs), compute=compute_cost(elems * flops_per_element),
                          comm=comm, memory=mem)
        else:
            st = elementwise_strategy(f"follow{p}", out, inputs, instr.shape, minfo, flops_per_element)
            st.comm = comm
        strategies.append(st)
    g = StrategyGroup(instr, strategies, follow=(op, 0), multi=multi_shapes is not None,
                      leaf_shapes=tuple(multi_shapes) if multi_shapes is not None else (instr.shape,))
    return g


def free_group(instr, ctx, inputs_for, flops_per_element: float = 1.0):
    """Enumerate every layout of the (array) output; ``inputs_for(spec)`` gives the operand specs.
    While ``instr``'s own fixed layout is built (``ctx.only_out``, :func:`hloshard.strategy.handlers.build_group`)
    only the strategy of that layout (none for a layout outside the enumeration): what
    :func:`hloshard.strategy.registry.apply_fixed` keeps of the whole list, as every caller's further
    steps act strategy by strategy and keep each one's output; ``ctx.only_out_used`` says so."""
    minfo = ctx.minfo
    strategies = []
    want = only_output(instr, ctx)
    for spec in minfo.enumerate(instr.shape.dims):
        if want is not ALL_OUTPUTS and not (is_mesh_spec(want) and spec == want):
            continue
        inputs = inputs_for(spec)
        if inputs is None:
            continue
        strategies.append(elementwise_strategy(spec_name(spec), spec, inputs, instr.shape, minfo, flops_per_element))
    return StrategyGroup(instr, strategies, leaf_shapes=(instr.shape,))


def _memory_order(shape) -> tuple:
    """Minor-to-major order of an array shape (no layout written: XLA's default, major-to-minor)."""
    if shape.layout is not None:
        return tuple(shape.layout.minor_to_major), shape.layout.attrs
    return tuple(range(len(shape.dims) - 1, -1, -1)), ""


def _copy_is_removed(instr) -> bool:
    """True for a ``copy`` that keeps its operand's memory layout.  XLA's algebraic simplifier
    (``HandleCopy``) replaces such a copy by its operand after SPMD partitioning, so it computes nothing;
    only the resharding on its operand edge (priced there) remains, and its buffer stands for that
    resharding's result.  (``solve``'s operand pins were such copies; they are now ``Sharding``
    custom-calls, :mod:`hloshard.strategy.realize`.)"""
    if instr.opcode != "copy" or len(instr.operands) != 1 or not is_array(instr.operands[0].shape):
        return False
    return _memory_order(instr.shape) == _memory_order(instr.operands[0].shape)


@register(*ELEMENTWISE, "bitcast", "add-dependency")
def handle_elementwise(instr, ctx):
    if not is_array(instr.shape):
        if instr.opcode in ("copy", "domain") and instr.operands and instr.shape.is_tuple:
            return alias_leaves(instr, instr.operands[0], range(len(leaf_shapes(instr.shape))))
        return None
    if instr.opcode == "bitcast" and (not instr.operands or
                                      tuple(instr.operands[0].shape.dims) != tuple(instr.shape.dims)):
        return handle_reshape(instr, ctx)
    if instr.opcode == "add-dependency":
        i = 0
        if len(instr.operands) and choose_followee(instr, ctx, [0]) is None:
            return free_group(instr, ctx, lambda s: (s,) + (None,) * (len(instr.operands) - 1))
        return follow_group(instr, ctx, 0, lambda s: (s, (s,) + (None,) * (len(instr.operands) - 1), 0.0), 0.0)
    fpe = 0.0 if _copy_is_removed(instr) else 1.0
    i = choose_followee(instr, ctx)
    template = _template(instr)
    if i is None:
        return free_group(instr, ctx, lambda s: _fill(template, s), fpe)

    def transform(spec):
        if spec is None:
            spec = replicated_spec(len(instr.shape.dims))
        return spec, _fill(template, spec), 0.0

    return follow_group(instr, ctx, i, transform, fpe)


@register_backward(*ELEMENTWISE, "bitcast", "copy")
def backward_elementwise(instr, out_spec, ctx):
    if instr.opcode == "bitcast" and tuple(instr.operands[0].shape.dims) != tuple(instr.shape.dims):
        return backward_reshape(instr, out_spec, ctx)
    return same_dims_inputs(instr, out_spec)


def _bitcast_convert_specs(instr, spec):
    """(output spec, operand spec) of a bitcast-convert for the operand layout ``spec``: equal element
    sizes keep the layout; a wider operand element gains a trailing (unsplit) dim in the result; a
    narrower one loses its trailing dim, which must be unsplit.  None when the ranks do not fit."""
    in_rank, out_rank = len(instr.operands[0].shape.dims), len(instr.shape.dims)
    if out_rank == in_rank:
        return spec, spec
    if out_rank == in_rank + 1:
        return tuple(spec) + ((),), spec
    if out_rank == in_rank - 1:
        operand = tuple(spec[:-1]) + ((),)
        return tuple(spec[:-1]), operand
    return None


@register("bitcast-convert")
def handle_bitcast_convert(instr, ctx):
    """bitcast-convert: partitioned elementwise by XLA, also when the element size changes (the extra
    trailing dim stays whole; measured, tests/test_handlers_elementwise.py); follows its operand."""
    if not is_array(instr.shape) or len(instr.operands) != 1 or not is_array(instr.operands[0].shape):
        return None

    rank_in = len(instr.operands[0].shape.dims)
    r = ctx.resolve(instr.operands[0], 0)
    if not isinstance(r, tuple) or len(r[0].strategies) <= 1:
        def inputs_for(out):
            if len(out) == rank_in + 1 and out[-1]:
                return None
            res = _bitcast_convert_specs(instr, tuple(out[:rank_in]) if len(out) > rank_in else
                                         tuple(out) + ((),) * (rank_in - len(out)))
            return None if res is None else (res[1],)
        return free_group(instr, ctx, inputs_for, 0.0)

    def transform(spec):
        if spec is None or not is_mesh_spec(spec):
            spec = replicated_spec(rank_in)
        res = _bitcast_convert_specs(instr, spec)
        if res is None:
            return replicated_spec(len(instr.shape.dims)), (replicated_spec(rank_in),), 0.0
        return res[0], (res[1],), 0.0

    return follow_group(instr, ctx, 0, transform, flops_per_element=0.0)


@register_backward("bitcast-convert")
def backward_bitcast_convert(instr, out_spec, ctx):
    in_rank, out_rank = len(instr.operands[0].shape.dims), len(instr.shape.dims)
    if out_rank == in_rank:
        return (out_spec,)
    if out_rank == in_rank + 1:
        return None if out_spec[-1] else (tuple(out_spec[:-1]),)
    if out_rank == in_rank - 1:
        return (tuple(out_spec) + ((),),)
    return None
