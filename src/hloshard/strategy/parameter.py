"""Sources: parameter, constant, iota, rng, rng-bit-generator and other operand-less values.

* parameter (entry): every mesh layout of its shape (replicated included); a tuple parameter gets
  one node per leaf.  Parameters of while bodies / called computations never get here: they alias
  the loop state or the call operands (``control_flow``).
* constant: replicated only (XLA does the same: a replicated source can be sliced locally for free).
* iota, rng: every layout (each device can generate its own shard); compute per element.
* rng-bit-generator, rng-get-and-update-state, partition-id, replica-id, get-dimension-size,
  after-all, infeed: replicated.
"""

from __future__ import annotations

from .base import TOKEN, StrategyGroup, TupleGroup, elementwise_strategy, is_array, leaf_shapes, spec_name
from .registry import register, register_result_flops, replicated_group


def enumerated_group(instr, shape, ctx, flops_per_element: float = 0.0, name_prefix: str = "") -> StrategyGroup:
    """A node whose strategies are all layouts of array ``shape`` (no operand requirements)."""
    minfo = ctx.minfo
    strategies = []
    for spec in minfo.enumerate(shape.dims):
        st = elementwise_strategy(name_prefix + spec_name(spec), spec, tuple(None for _ in instr.operands), shape, minfo,
                                  flops_per_element)
        strategies.append(st)
    return StrategyGroup(instr, strategies, leaf_shapes=(shape,))


@register("parameter")
def handle_parameter(instr, ctx):
    if instr.shape.is_tuple:
        children = []
        for s in leaf_shapes(instr.shape):
            children.append(enumerated_group(instr, s, ctx) if is_array(s) else TOKEN)
        return TupleGroup(instr, children)
    if not is_array(instr.shape):
        return replicated_group(instr, ctx)
    return enumerated_group(instr, instr.shape, ctx)


register_result_flops(0.0, "parameter")   # a parameter's shard is given, not computed


@register("iota", "rng")
def handle_generated(instr, ctx):
    if not is_array(instr.shape):
        return replicated_group(instr, ctx)
    g = enumerated_group(instr, instr.shape, ctx, flops_per_element=1.0)
    if instr.opcode == "rng":
        # rng's operands (bounds) are scalars: required replicated
        for st in g.strategies:
            st.inputs = tuple(((),) * len(op.shape.dims) for op in instr.operands)
    return g


@register("constant", "rng-bit-generator", "rng-get-and-update-state", "partition-id", "replica-id",
          "get-dimension-size", "after-all", "infeed")
def handle_replicated_source(instr, ctx):
    return replicated_group(instr, ctx)
