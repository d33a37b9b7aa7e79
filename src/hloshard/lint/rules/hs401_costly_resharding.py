from __future__ import annotations

import numpy as np

from ...units import format_bytes
from ..rule import Rule
from ...cost import reshape as rs, reshard
from ...cost.collectives import total_ring_bytes
from ...errors import HloshardError
from ...hlo.sharding import HloSharding

#: element-wise opcodes: the user needs each operand sharded exactly like its result
ELEMENTWISE = frozenset({
    "abs", "add", "and", "atan2", "cbrt", "ceil", "clamp", "compare", "complex", "convert", "copy",
    "cosine", "count-leading-zeros", "divide", "erf", "exponential", "exponential-minus-one", "floor",
    "imag", "is-finite", "log", "log-plus-one", "logistic", "maximum", "minimum", "multiply", "negate",
    "not", "or", "popcnt", "power", "real", "reduce-precision", "remainder", "round-nearest-afz",
    "round-nearest-even", "rsqrt", "select", "shift-left", "shift-right-arithmetic",
    "shift-right-logical", "sign", "sine", "sqrt", "subtract", "tan", "tanh", "xor",
})


#: the opcodes whose operand requirements this rule models (a custom-call only as a ``Sharding`` pin)
MODELLED = ELEMENTWISE | {"transpose", "broadcast", "reshape", "custom-call"}


def _is_pin(instr) -> bool:
    """A ``custom-call`` to ``Sharding``: what ``jax.lax.with_sharding_constraint`` lowers to.  Its
    operand is resharded to the pin's sharding (the partitioner's identity with a sharding)."""
    return instr.opcode == "custom-call" and (instr.custom_call_target or "") == "Sharding"


def _usable(sharding) -> bool:
    return sharding is not None and sharding.kind in ("tiled", "replicated")


def _transposed(sharding, perm):
    """The sharding of transpose(x, dimensions=perm)'s operand when the result has ``sharding``:
    result dim i is operand dim perm[i], so operand tile axis j is result tile axis perm^-1(j)."""

    if sharding.kind != "tiled":
        return sharding
    ta = sharding.tile_assignment
    rank = len(perm)
    inv = [0] * rank
    for i, p in enumerate(perm):
        inv[p] = i
    axes = inv + list(range(rank, ta.ndim))
    return HloSharding.tiled(np.transpose(ta, axes), last_tile_dim_replicate=sharding.last_tile_dim_replicate,
                             last_tile_dims=sharding.subgroup_types)


def _forward_transposed(sharding, perm):
    """Result sharding of transpose(x, perm) when x has ``sharding`` (no communication)."""

    if sharding.kind != "tiled":
        return sharding
    ta = sharding.tile_assignment
    axes = list(perm) + list(range(len(perm), ta.ndim))
    return HloSharding.tiled(np.transpose(ta, axes), last_tile_dim_replicate=sharding.last_tile_dim_replicate,
                             last_tile_dims=sharding.subgroup_types)


def _broadcast_operand(sharding, dims, out_rank):
    """The operand sharding a broadcast with result ``sharding`` needs (XLA removes the broadcast
    dims from the result sharding: their tiling becomes replication). ``dims[i]`` is the result dim
    of operand dim i. None for manual / unreduced subgroups."""

    if sharding.kind != "tiled":
        return sharding
    if any(t != "replicated" for t in sharding.subgroup_types):
        return None
    ta = sharding.tile_assignment
    dropped = [d for d in range(out_rank) if d not in dims]
    perm = list(dims) + dropped + list(range(out_rank, ta.ndim))
    kept = [ta.shape[d] for d in dims]
    rep = int(np.prod([ta.shape[a] for a in perm[len(dims):]], dtype=np.int64))
    arr = np.transpose(ta, perm).reshape(kept + [rep])
    return HloSharding.tiled(arr, last_tile_dim_replicate=True)


def _broadcast_result(sharding, dims, out_rank):
    """The result sharding a broadcast gets from its operand's ``sharding`` with no communication
    (operand tiling on the mapped dims, 1 elsewhere, replication kept)."""

    if sharding.kind != "tiled":
        return sharding
    if any(t != "replicated" for t in sharding.subgroup_types):
        return None
    ta = sharding.tile_assignment
    op_rank = len(dims)
    shape = [1] * out_rank
    for i, d in enumerate(dims):
        shape[d] = ta.shape[i]
    order = sorted(range(op_rank), key=lambda i: dims[i])  # operand dims in result order
    arr = np.transpose(ta, order + list(range(op_rank, ta.ndim)))
    rep = int(np.prod(ta.shape[op_rank:], dtype=np.int64))
    return HloSharding.tiled(arr.reshape(shape + [rep]), last_tile_dim_replicate=True)


def _cheapest_reshape_output(in_shape, out_shape, src, current, mesh, limit: int = 64):
    """Among the reshape output shardings that split whole mesh axes over evenly divisible dims
    (every assignment of each mesh axis to one output dim or to none; at most ``limit``), the one
    whose required operand sharding is cheapest to reach from ``src`` -- as
    ``("edge", sharding, plan)`` -- or None when none beats ``current``."""
    import itertools


    axes = [a for a, n in enumerate(mesh.shape) if n > 1]
    rank = len(out_shape.dims)
    best = None
    for k, choice in enumerate(itertools.product(range(rank + 1), repeat=len(axes))):
        if k >= limit:
            break
        dim_axes = [tuple(a for a, d in zip(axes, choice) if d == t) for t in range(rank)]
        if any(out_shape.dims[t] % max(1, int(np.prod([mesh.shape[a] for a in dim_axes[t]]))) for t in range(rank)):
            continue
        try:
            cand = mesh.axes_to_sharding(dim_axes)
            if cand == current:
                continue
            need = rs.required_operand_sharding(in_shape, out_shape, cand, mesh)
            plan = CostlyResharding._plan(in_shape, src, need, mesh)
        except (HloshardError, ValueError):
            continue
        if plan is None:
            continue
        key = (_bytes(plan), plan.total_cost, str(cand))
        if best is None or key < best[0]:
            best = (key, cand, plan)
    return None if best is None else ("edge", best[1], best[2])


def _bytes(plan) -> float:
    """Ring bytes per device of a plan's collectives: :func:`hloshard.cost.collectives.total_ring_bytes`,
    the one count explain-reshape reports too (and what XLA's partitioned HLO is measured in)."""

    return total_ring_bytes(plan.predicted_collectives())


def _describe(step) -> str:
    where = f" dim {','.join(map(str, step.dims))}" if step.dims else ""
    group = f" in groups of {step.group_size}" if step.group_size else ""
    axes = f" (mesh axis {','.join(map(str, step.mesh_axes))})" if step.mesh_axes and step.exact_mesh_axes else ""
    p = step.predicted()
    return f"{step.kind}{where}{group}{axes}: {format_bytes(total_ring_bytes([p] if p else []))}/device"


class CostlyResharding(Rule):
    """An operand's sharding differs from the one its user needs, and fixing that moves a lot of data.

    When an instruction's operand is sharded differently from what the instruction needs (an
    element-wise op, like a ``Sharding`` custom-call (``with_sharding_constraint``), needs its operands
    sharded like its result; a transpose needs the permuted
    sharding; a broadcast needs its result sharding without the broadcast dims; a reshape needs
    the operand sharding its output sharding implies), the SPMD partitioner silently inserts
    collectives in between -- an all-gather hidden in a reshape is the classic example. The rule
    asks the resharding planner which collectives those are and reports edges that receive more
    than ``--reshard-threshold`` bytes per device (default 64 MiB), with the cheaper alternative
    when one is known: a sharding for the user that needs no communication, resharding the
    (smaller) result instead, or -- for a reshape -- the output sharding over whole mesh axes
    whose operand requirement is cheapest to reach on this edge. The mesh is ``--mesh``, else
    num_partitions (or the module's device count) as a 1-D mesh. Dot, convolution, reduce and
    the other ops with several valid strategies are left to ``hloshard cost``.

    **Bad**::

        HloModule m, num_partitions=8
        ENTRY e {
          p = f16[32,16,1000,256] parameter(0), sharding={devices=[2,4,1,1]<=[8]}
          ROOT r = f16[512,1000,256] reshape(p), sharding={devices=[2,1,1,4]<=[8] last_tile_dim_replicate}
        }

    **Good**::

        HloModule m, num_partitions=8
        ENTRY e {
          p = f16[32,16,1000,256] parameter(0), sharding={devices=[2,4,1,1]<=[8]}
          ROOT r = f16[512,1000,256] reshape(p), sharding={devices=[8,1,1]<=[8]}
        }
    """

    code = "HS401"
    name = "costly-resharding"
    severity = "warning"
    groups = ("cost",)

    def evaluate(self, context):
        mesh = context.mesh
        if mesh is None:
            return
        threshold = context.options.reshard_threshold
        cache = {}
        memo = {}
        for comp in context.partitioned_computations:
            for user in comp.instructions:
                op = user.opcode
                if op not in MODELLED or (op == "custom-call" and not _is_pin(user)):
                    continue
                out = user.sharding
                if not _usable(out) or user.shape.is_tuple or not context.sharding_is_sound(user):
                    continue
                for k, operand in enumerate(user.operands):
                    src = operand.sharding
                    if not _usable(src) or operand.shape.is_tuple:
                        continue
                    if (op in ELEMENTWISE or op == "custom-call") and src == out:
                        continue  # the common case in annotated dumps: nothing to reshard
                    if not context.sharding_is_sound(operand):
                        continue
                    edge = self._required(user, operand, mesh, memo)
                    if edge is None:
                        continue
                    required, alternative = edge
                    src = operand.sharding
                    if required is None or required == src:
                        continue
                    key = (str(operand.shape), src, required)
                    if key not in cache:
                        cache[key] = self._plan(operand.shape, src, required, mesh)
                    plan = cache[key]
                    if plan is None or _bytes(plan) <= threshold:
                        continue
                    steps = "; ".join(_describe(s) for s in plan.collectives) or "local slicing only"
                    msg = (f"%{user.name} ({user.opcode}) needs operand {k} %{operand.name} {operand.shape} "
                           f"as {required.to_string(False)} but it is {src.to_string(False)}: resharding "
                           f"moves {format_bytes(_bytes(plan))} per device (threshold "
                           f"{format_bytes(threshold)}) via {steps}")
                    hint = self._alternative(user, operand, alternative() if callable(alternative)
                                             else alternative, plan, mesh)
                    if hint:
                        msg += f"; {hint}"
                    yield self.finding(context, user, msg, key=str(k))

    @staticmethod
    def _plan(shape, src, dst, mesh):
        try:
            return reshard.plan(shape, src, dst, mesh)
        except (HloshardError, ValueError):
            return None

    @staticmethod
    def _required(user, operand, mesh, memo):
        """(sharding the user needs for the operand, a user sharding that needs no communication --
        or a function computing it lazily) or None when this rule does not model the user's opcode.
        ``memo`` caches the inference across edges with the same shapes and shardings."""

        out = user.sharding
        op = user.opcode
        if op in ELEMENTWISE or _is_pin(user):
            if tuple(operand.shape.dims) != tuple(user.shape.dims):
                return None  # scalar predicate of select, implicit broadcast: not modelled
            return out, operand.sharding
        if op == "transpose":
            perm = user.dimensions
            if not perm or sorted(perm) != list(range(operand.shape.rank)):
                return None
            key = ("transpose", tuple(perm), out, operand.sharding)
            if key not in memo:
                try:
                    memo[key] = (_transposed(out, perm), _forward_transposed(operand.sharding, perm))
                except ValueError:
                    memo[key] = None
            return memo[key]
        if op == "broadcast":
            dims = user.dimensions or []
            if len(dims) != operand.shape.rank or len(set(dims)) != len(dims) or any(
                    not 0 <= d < user.shape.rank for d in dims):
                return None
            key = ("broadcast", tuple(dims), user.shape.rank, out, operand.sharding)
            if key not in memo:
                try:
                    memo[key] = (_broadcast_operand(out, dims, user.shape.rank),
                                 _broadcast_result(operand.sharding, dims, user.shape.rank))
                except ValueError:
                    memo[key] = None
            return memo[key]
        if op == "reshape":
            in_shape, out_shape, src = operand.shape, user.shape, operand.sharding
            key = ("reshape", tuple(in_shape.dims), tuple(out_shape.dims), out)
            if key not in memo:
                try:
                    memo[key] = rs.required_operand_sharding(in_shape, out_shape, out, mesh)
                except (HloshardError, ValueError):
                    memo[key] = None
            required = memo[key]
            if required is None:
                return None

            def alternative():
                try:
                    options = rs.output_shardings_without_communication(in_shape, out_shape, src, mesh)
                except (HloshardError, ValueError):
                    return None
                if options:
                    return options[0]
                return _cheapest_reshape_output(in_shape, out_shape, src, out, mesh)

            return required, alternative
        return None

    def _alternative(self, user, operand, alternative, plan, mesh) -> str:
        if isinstance(alternative, tuple):  # ("edge", sharding, plan): cheaper, not free
            _, cand, cand_plan = alternative
            if _bytes(cand_plan) >= _bytes(plan):
                return ""
            steps = "; ".join(_describe(s) for s in cand_plan.collectives) or "local slicing only"
            return (f"cheaper: annotating %{user.name} with {cand.to_string(False)} needs only "
                    f"{format_bytes(_bytes(cand_plan))} per device on this edge ({steps})")
        if alternative is None or alternative == user.sharding:
            return ""
        # resharding the result instead of the operand
        after = self._plan(user.shape, alternative, user.sharding, mesh)
        if after is not None and _bytes(after) < _bytes(plan):
            return (f"cheaper: compute %{user.name} as {alternative.to_string(False)} (no communication) and "
                    f"reshard its result instead ({format_bytes(_bytes(after))} per device, cost "
                    f"{after.total_cost:.4g} vs {plan.total_cost:.4g})")
        return (f"alternative: annotate %{user.name} with {alternative.to_string(False)}, which needs no "
                f"communication on this edge")
