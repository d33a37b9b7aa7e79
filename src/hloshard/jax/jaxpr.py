"""The jaxpr side of :func:`hloshard.jax.auto_shard`: evaluating a traced function equation by equation
under named scopes (so every HLO instruction's ``op_name`` names its equation), mapping HLO instructions
back to equations, and turning the plan's operand pins and loop-state pins into the equation inputs
``with_sharding_constraint`` is applied to (steps 2 and 5 of :mod:`hloshard.jax.api`'s flow).
"""

from __future__ import annotations
from ..hlo.attributes import parse_metadata
from ..hlo.loops import called
from ..hlo.sharding import HloSharding

import re

_EQN = re.compile(r"hloshard_eqn([0-9_]+)")


#: the primitives of a nested ``jit`` call (evaluated inline when it has no shardings of its own)
_CALLS = ("jit", "pjit")


#: primitives that stand for a loop or a call (their HLO is in other computations): no pin maps onto them
_LOOP_OR_CALL = re.compile(r"call|jit|scan|while|cond|remat|checkpoint|shard_map|custom")


def _inline(eqn) -> bool:
    """A nested ``jit`` call with no shardings, layouts or compiler options of its own: evaluated inline."""
    if eqn.primitive.name not in _CALLS or "jaxpr" not in eqn.params:
        return False
    p = eqn.params
    return (all(type(s).__name__ == "UnspecifiedValue" for s in tuple(p.get("in_shardings", ())) +
                tuple(p.get("out_shardings", ())))
            and all(x is None for x in tuple(p.get("in_layouts", ())) + tuple(p.get("out_layouts", ())))
            and not p.get("compiler_options_kvs"))


#: loop primitive -> the parameter holding its body (a ClosedJaxpr)
_LOOP_BODIES = {"scan": "jaxpr", "while": "body_jaxpr"}


def _loop_body_key(eqn) -> str | None:
    """The parameter of a loop equation (``scan`` / ``while``) whose body :func:`runner` evaluates
    equation by equation (equation ``i`` of the body of equation ``k`` is ``hloshard_eqn{k}_{i}``), None
    for any other equation."""
    key = _LOOP_BODIES.get(eqn.primitive.name)
    return key if key is not None and key in eqn.params else None


def _loop_with_body(eqn) -> bool:
    """A loop (``scan`` or ``while``) whose body :func:`runner` evaluates equation by equation."""
    return _loop_body_key(eqn) is not None


#: primitives of a region jax's lowering inlines into the enclosing computation (``jax.checkpoint`` /
#: ``jax.remat``: ``remat2`` in jax 0.10.2, lowered as its body under the name ``checkpoint``, behind an
#: optimization barrier once differentiated) -> the parameter holding the body (an open Jaxpr, no constants)
_REGIONS = {"remat2": "jaxpr", "checkpoint": "jaxpr"}


def _region_key(eqn) -> str | None:
    """The parameter of a region equation (:data:`_REGIONS`) whose body :func:`runner` evaluates equation by
    equation (equation ``i`` of the body of equation ``k`` is ``hloshard_eqn{k}_{i}``, as a loop's), None for
    any other equation or a body with constants.

    Why: the equations of a ``jax.checkpoint`` region inside a ``scan`` body (the per-step weight gradient of a
    remat'd RNN cell) were one equation to :func:`runner`, so ``plan.fn`` constrained none of them and XLA
    all-reduced the gradient on every trip: new user 32's LSTM, 436 MB by ``plan.jit()`` against 33.3 MB
    predicted (F1, F18; issue 24, round 33)."""
    key = _REGIONS.get(eqn.primitive.name)
    body = eqn.params.get(key) if key is not None else None
    if body is None or type(body).__name__ != "Jaxpr" or getattr(body, "constvars", None):
        return None
    return key


def _inner(eqn):
    """The body :func:`runner` evaluates equation by equation inside ``eqn`` (a Jaxpr: a loop's body or a
    region's, :func:`_loop_body_key`, :func:`_region_key`), or None."""
    key = _loop_body_key(eqn)
    if key is not None:
        return eqn.params[key].jaxpr
    key = _region_key(eqn)
    return None if key is None else eqn.params[key]


def equations(closed) -> dict:
    """Equation path (tuple of indices, see the module docstring) -> jaxpr equation, inlined ``jit``
    calls expanded (the call itself is not listed), ``scan`` / ``while`` bodies and ``jax.checkpoint``
    regions too (the loop / region equation is listed, :func:`_inner`)."""
    out: dict = {}

    def walk(jaxpr, prefix):
        for k, eqn in enumerate(jaxpr.eqns):
            path = prefix + (k,)
            if _inline(eqn):
                walk(eqn.params["jaxpr"].jaxpr, path)
            else:
                out[path] = eqn
                inner = _inner(eqn)
                if inner is not None:
                    walk(inner, path)

    walk(closed.jaxpr, ())
    return out


def _scope(path) -> str:
    return "hloshard_eqn" + "_".join(map(str, path))


#: the floating types :func:`runner` widens with ``promote=True`` (float64 itself stays)
_NARROW_FLOATS = ("float32", "bfloat16", "float16")


class NotPromotable(ValueError):
    """The jaxpr has an equation :func:`runner` cannot evaluate in float64 (``promote=True``): one whose
    result depends on the float's bit width (``bitcast_convert_type``) or whose parameters hold a
    function rather than a jaxpr (e.g. a ``custom_jvp_call`` left in a forward-only trace)."""


def _wide(dtype):
    """float64 for a float type of :data:`_NARROW_FLOATS`, else ``dtype`` unchanged."""
    import numpy as np

    try:
        name = np.dtype(dtype).name
    except TypeError:
        return dtype
    return np.dtype("float64") if name in _NARROW_FLOATS else dtype


def _wide_value(x):
    """A constant / literal / argument with a narrow float type cast to float64 (others unchanged)."""
    import jax.numpy as jnp
    import numpy as np

    dtype = getattr(x, "dtype", None)
    if dtype is None or _wide(dtype) is dtype:
        return x
    return jnp.asarray(x, dtype=np.float64) if hasattr(x, "devices") else np.asarray(x, dtype=np.float64)


def runner(closed, constraints: dict | None = None, operand_constraints: dict | None = None,
            body_constraints: dict | None = None, promote: bool = False):
    """A flat function evaluating ``closed`` (a ClosedJaxpr) equation by equation, each under
    ``named_scope(_scope(path))``, nested ``jit`` calls inline (:func:`_inline`);
    ``constraints[(path, j)]`` (a Sharding) constrains output j of that equation,
    ``operand_constraints[path]``: ``[(i, Sharding)]`` constrains input i as that equation reads it;
    ``body_constraints[path]``: ``[(side, i, Sharding)]`` constrains, with ``side`` ``"in"``, input i of that
    loop's body where the body starts (the loop state as each trip reads it; ``(i, Sharding)`` means the same),
    with ``"out"``, output i of the body where it ends (the state as each trip writes it, a ``ys`` slice).
    ``jax.checkpoint`` regions are evaluated equation by equation as loop bodies are (:func:`_region_key`).

    ``promote``: evaluate the same program in float64 -- every float32 / bfloat16 / float16 argument,
    constant, literal and dtype parameter (``convert_element_type``'s ``new_dtype``, ``dot_general``'s
    ``preferred_element_type``, ``iota``'s ``dtype``, ...) widened to float64, every nested jaxpr
    (loop bodies, ``cond`` branches, calls) re-traced that way, ``reduce_precision`` left out (it
    would round to the narrow type); the equations and their paths are the same, so the same
    constraints apply.  Needs jax's x64 mode on while it is traced (``jax.enable_x64(True)``).  The
    float64 program tells float rounding from a partitioning that computes another function: the
    partitioned program agrees with the unpartitioned one to float64 rounding (at most 3.7e-12 relative,
    BENCHMARKS.md "helper guard, round 15") only if it is the same function.  Raises
    :class:`NotPromotable` for an equation it cannot widen (the class docstring)."""
    import jax
    import jax.extend.core as jcore
    from jax._src import source_info_util as siu

    constraints = constraints or {}
    operand_constraints = operand_constraints or {}
    body_constraints = body_constraints or {}

    def wide_aval(aval):
        dtype = getattr(aval, "dtype", None)
        return aval if dtype is None or _wide(dtype) is dtype else aval.update(dtype=_wide(dtype))

    def wide_closed(inner, path):   # a nested ClosedJaxpr, re-traced in float64 (same equations)
        return jax.make_jaxpr(lambda *a: evaluate(inner.jaxpr, inner.consts, a, path, own=False))(
            *[wide_aval(v.aval) for v in inner.jaxpr.invars])

    def wide_params(eqn, path):
        if eqn.primitive.name == "bitcast_convert_type":
            raise NotPromotable(f"equation {'_'.join(map(str, path))} ({eqn.primitive.name}) depends on the "
                                f"float's bit width")
        out = {}
        for key, val in eqn.params.items():
            if isinstance(val, jcore.ClosedJaxpr):
                val = wide_closed(val, path)
            elif isinstance(val, tuple) and val and all(isinstance(x, jcore.ClosedJaxpr) for x in val):
                val = tuple(wide_closed(x, path) for x in val)
            elif isinstance(val, jcore.Jaxpr) and not val.constvars:   # e.g. a scatter's combiner
                val = wide_closed(jcore.ClosedJaxpr(val, []), path)
                if val.consts:
                    raise NotPromotable(f"equation {'_'.join(map(str, path))} ({eqn.primitive.name}): its "
                                        f"{key!r} re-traced in float64 has constants")
                val = val.jaxpr
            elif isinstance(val, jcore.Jaxpr) or callable(val) and not isinstance(val, type) and \
                    type(val).__name__ in ("WrappedFun", "function"):
                raise NotPromotable(f"equation {'_'.join(map(str, path))} ({eqn.primitive.name}) holds "
                                    f"{type(val).__name__} {key!r}, which cannot be re-traced in float64")
            else:
                try:
                    wide = _wide(val) if key.endswith("dtype") or key == "preferred_element_type" else val
                except TypeError:
                    wide = val
                val = wide
            out[key] = val
        return out

    def evaluate(jaxpr, consts, args, prefix, own=True):
        env: dict = {}
        args = list(args)
        if promote:
            consts = [_wide_value(c) for c in consts]
            args = [_wide_value(a) for a in args]
        body_rows = [r if len(r) == 3 else ("in",) + tuple(r) for r in body_constraints.get(prefix, ())] \
            if prefix and own else []
        for side, i, sh in body_rows:
            if side == "in":
                args[i] = jax.lax.with_sharding_constraint(args[i], sh)

        def read(v):
            if isinstance(v, jcore.Literal):
                return _wide_value(v.val) if promote else v.val
            return env[v]

        for v, c in zip(jaxpr.constvars, consts):
            env[v] = c
        for v, a in zip(jaxpr.invars, args):
            env[v] = a
        for k, eqn in enumerate(jaxpr.eqns):
            path = prefix + (k,)
            invals = [read(v) for v in eqn.invars]
            # (own False: a nested jaxpr re-traced for ``promote``; no constraints of its own)
            for i, sh in operand_constraints.get(path, ()) if own else ():
                invals[i] = jax.lax.with_sharding_constraint(invals[i], sh)
            if promote and eqn.primitive.name == "reduce_precision":
                outs = invals[:1]   # it rounds to the narrow type: the float64 program leaves it out
            elif promote and eqn.primitive.name.startswith("custom_") and \
                    isinstance(eqn.params.get("call_jaxpr"), jcore.ClosedJaxpr):
                # a custom_jvp / custom_vjp function's primal: its values (derivatives of a traced grad
                # are equations of their own already)
                inner = eqn.params["call_jaxpr"]
                outs = evaluate(inner.jaxpr, inner.consts, invals, path, own=False)
            elif _inline(eqn):
                inner = eqn.params["jaxpr"]
                outs = evaluate(inner.jaxpr, inner.consts, invals, path, own)
            else:
                params = eqn.params
                body_key = _loop_body_key(eqn) if own else None
                region_key = _region_key(eqn) if own and body_key is None else None
                if promote:
                    own_key = body_key or region_key   # re-traced below, not here
                    params = wide_params(eqn if own_key is None else _without(eqn, own_key), path)
                    params.update({own_key: eqn.params[own_key]} if own_key else {})
                if body_key is not None:   # the body re-traced equation by equation, named and constrained too
                    body = params[body_key]
                    params = dict(params, **{body_key: jax.make_jaxpr(
                        lambda *a, _b=body, _p=path: evaluate(_b.jaxpr, _b.consts, a, _p))(
                            *[wide_aval(v.aval) if promote else v.aval for v in body.jaxpr.invars])})
                if region_key is not None:   # a checkpoint region's body the same way (as an open Jaxpr)
                    region = eqn.params[region_key]
                    retraced = jax.make_jaxpr(lambda *a, _r=region, _p=path: evaluate(_r, [], a, _p))(
                        *[wide_aval(v.aval) if promote else v.aval for v in region.invars])
                    if retraced.consts:   # a region's body takes no constants: kept as it was (promote: widened)
                        params = wide_params(eqn, path) if promote else eqn.params
                    else:
                        params = dict(params, **{region_key: retraced.jaxpr})
                stack = siu.current_name_stack() + eqn.source_info.name_stack
                with siu.user_context(eqn.source_info.traceback, name_stack=stack), \
                        jax.named_scope(_scope(path)), eqn.ctx.manager:
                    outs = eqn.primitive.bind(*invals, **eqn.primitive.get_bind_params(params))
                if not eqn.primitive.multiple_results:
                    outs = [outs]
            for j, (v, o) in enumerate(zip(eqn.outvars, outs)):
                if isinstance(v, jcore.DropVar):
                    continue
                sh = constraints.get((path, j)) if own else None
                env[v] = jax.lax.with_sharding_constraint(o, sh) if sh is not None else o
        results = [read(v) for v in jaxpr.outvars]
        for side, j, sh in body_rows:
            if side == "out":
                results[j] = jax.lax.with_sharding_constraint(results[j], sh)
        return results

    def run(*args):
        return evaluate(closed.jaxpr, closed.consts, args, ())

    return run


class _without:
    """An equation seen without one parameter (:func:`runner` widens a loop's other parameters; its body
    is re-traced on its own)."""

    def __init__(self, eqn, key: str):
        self.primitive, self.params = eqn.primitive, {k: v for k, v in eqn.params.items() if k != key}


def equation_of(instr):
    """The equation path an instruction's ``op_name`` names (the innermost ``hloshard_eqn``), or None.

    An op_name of several ``;``-separated names is one instruction jax's lowering folded from several
    equations (``transpose(transpose(x))`` is one ``transpose``: ``.../hloshard_eqn1036/transpose;
    .../hloshard_eqn1021/transpose``): its value is the output of the equation evaluated last, the latest
    of the names' innermost paths in program order (paths compare as tuples: a loop body's equations
    come at their loop's).  Taking the last name instead (the earlier equation, whose output no
    instruction computes) left the later equation's output unconstrained in ``plan.jit()``: on new
    user 20's Perceiver Shardy then gave that transpose another layout than the plan's and XLA
    all-gathered 12.6 MB per device more than the written module (BENCHMARKS.md, "Round 20, helper
    jaxpins")."""
    raw = instr.attrs.get("metadata")
    if not raw:
        return None
    try:
        op_name = str(parse_metadata(str(raw)).get("op_name", ""))
    except Exception:  # noqa: BLE001 - metadata without an op_name
        return None
    paths = [tuple(int(x) for x in found[-1].split("_"))
             for found in (_EQN.findall(part) for part in op_name.split(";")) if found]
    return max(paths) if paths else None


_HLO_TYPE = re.compile(r"(float|int|uint|complex)([0-9]+)$")


def hlo_element_type(dtype) -> str | None:
    """The HLO element type of a jax/numpy dtype (``float32`` -> ``f32``, ``bool`` -> ``pred``,
    ``bfloat16`` -> ``bf16``), None for one without a plain HLO name (e.g. the float8 variants)."""
    import numpy as np

    try:
        name = np.dtype(dtype).name
    except TypeError:
        return None
    if name == "bool":
        return "pred"
    if name == "bfloat16":
        return "bf16"
    m = _HLO_TYPE.match(name)
    return None if m is None else {"float": "f", "int": "s", "uint": "u", "complex": "c"}[m.group(1)] + m.group(2)


def equation_outputs(module, eqns: dict) -> dict:
    """(equation path, output j) -> the instruction that computes it, among the instructions with a
    sharding whose op_name names that equation (innermost ``hloshard_eqn``) and whose dims and element
    type are the output's:

    * a ``scan`` / ``while`` equation's output j: the ``get-tuple-element`` of its ``while`` whose loop-state
      index :func:`loop_state` maps to output j (the HLO tuple starts with the loop counter: index j is another
      output's, or none -- round 32 pinned a scan's ``ys`` outputs one index off); a ``jax.checkpoint`` region's
      outputs: none (they are its body's outputs, constrained there; its optimization barrier's
      ``get-tuple-element``s carry the region's name and its inputs' shapes);
    * one output: the last such instruction;
    * several (a call lowered to a tuple, ``split``, ``unstack``, ...): the ``get-tuple-element`` with
      ``index=j`` when there is one; else, when the equation's outputs of that dims and type are
      exactly as many as such instructions, the one at the output's rank among them (program order);
      else none -- an ambiguous output is left to XLA's propagation rather than pinned to a sibling's
      layout (a ``jnp.where`` under ``jvp`` has f32, pred, f32 outputs of one shape).
    """
    by_eqn: dict = {}
    for instr in module.all_instructions():
        if instr.shape.is_tuple or instr.sharding is None:
            continue
        path = equation_of(instr)
        if path is not None:
            by_eqn.setdefault(path, []).append(instr)
    out = {}
    states: dict = {}   # while instruction -> loop_state of its equation
    for path, eqn in eqns.items():
        cands = by_eqn.get(path, [])
        if not cands or _region_key(eqn) is not None:   # a region's outputs are its body's (constrained there)
            continue
        kinds = [(tuple(getattr(v.aval, "shape", ())), hlo_element_type(getattr(v.aval, "dtype", "")))
                 for v in eqn.outvars]

        def fits(instr, kind):
            return tuple(instr.shape.dims) == kind[0] and kind[1] in (None, instr.shape.element_type)

        if _loop_with_body(eqn):   # output j: the loop state's element loop_state maps to it, not index j
            for instr in cands:
                w = instr.operands[0] if instr.opcode == "get-tuple-element" and instr.operands else None
                if w is None or w.opcode != "while":
                    continue
                if id(w) not in states:
                    states[id(w)] = loop_state(eqn, w)
                row = states[id(w)].get(int(str(instr.attrs.get("index"))), {})
                j = row.get("output")
                if j is not None and j < len(kinds) and fits(instr, kinds[j]):
                    out[(path, j)] = instr
            continue
        for j, kind in enumerate(kinds):
            hits = [i for i in cands if fits(i, kind)]
            if len(kinds) == 1:
                if hits:
                    out[(path, j)] = hits[-1]
                continue
            gte = [i for i in hits if i.opcode == "get-tuple-element" and str(i.attrs.get("index")) == str(j)]
            if gte:
                out[(path, j)] = gte[-1]
                continue
            same = [k for k, other in enumerate(kinds) if other == kind]
            plain = [i for i in hits if i.opcode != "get-tuple-element"]
            if len(plain) == len(same):
                out[(path, j)] = plain[same.index(j)]
    return out


def pin_operand(pin, operand, eqns: dict):
    """``(equation path, input index)`` of the jaxpr value a :class:`hloshard.strategy.realize.Pin`
    constrains: the pinned user's equation, the input with the operand's shape (the operand's own
    index first), when that equation is no loop or call (a ``scan`` body's equations are their own) and
    the operand comes from outside it; None otherwise."""
    import jax.extend.core as jcore

    path = equation_of(pin.user)
    eqn = eqns.get(path) if path is not None else None
    if eqn is None or _loop_with_body(eqn) or _LOOP_OR_CALL.search(eqn.primitive.name):
        return None   # the user is inside a loop / call this equation stands for, not the equation itself
    if operand.opcode != "parameter" and equation_of(operand) == path:
        return None
    dims = tuple(operand.shape.dims)
    order = [pin.index] + [i for i in range(len(eqn.invars)) if i != pin.index]
    for i in order:
        if i < len(eqn.invars) and not isinstance(eqn.invars[i], jcore.Literal) \
                and tuple(getattr(eqn.invars[i].aval, "shape", ())) == dims:
            return path, i
    return None


def pin_steps(pin) -> list:
    """The layouts (HloShardings, in order) a :class:`hloshard.strategy.realize.Pin` constrains its operand
    to where its user reads it: the pin's stop first when it has one (``pin.via``, the replicated layout of
    :func:`hloshard.strategy.realize.replicated_stop`, written as ``NAME.full.pin``), then ``pin.sharding``
    -- the chain :func:`hloshard.strategy.realize.insert_pins` writes, so the jax program carries the
    same two ``with_sharding_constraint`` steps as the priced module.  Without the stop XLA's partitioner
    meets a transition it cannot take in one step (e.g. ``P(('model','data'))`` -> ``P(None, 'model')``)
    and replicates the value itself ("Involuntary full rematerialization"); measured on new user 20's
    Perceiver (BENCHMARKS.md, "Round 20, helper jaxpins")."""
    via = getattr(pin, "via", None)
    return ([via] if via is not None else []) + [pin.sharding]


#: opcodes that move no element and keep the layout when they only add or drop unit dims (a
#: broadcast that expands no dim, a reshape of unit dims) or change the element type alone
_UNIT_DIM_OPS = ("broadcast", "reshape", "bitcast", "copy", "convert")


def _unit_free(dims) -> tuple:
    return tuple(int(d) for d in dims if int(d) != 1)


def broadcast_sources(module, eqns: dict) -> list:
    """``(equation path, input index, broadcast, source)`` for each HLO ``broadcast`` inside an
    equation whose operand is an input of that equation seen through unit-dim changes only
    (:data:`_UNIT_DIM_OPS` instructions of the same equation that keep the non-unit dims): the
    implicit broadcast jax lowers ``mul a b`` to when ``b`` is ``f32[8,32,1]`` and ``a`` ``f32[8,32,128]``
    (``broadcast`` -> ``reshape`` -> ``broadcast``), or an explicit ``broadcast_in_dim``.  ``source``
    is the instruction outside the equation (the input's value, shape ``input.aval.shape``).

    Why: the plan prices and writes a layout for every instruction, so it can reshard the small
    operand of such a broadcast (an all-gather of ``f32[8,32]``) where jax has no value to constrain:
    ``with_sharding_constraint`` reaches only an equation's inputs and outputs, and XLA then moves the
    broadcast result instead (``f32[8,32,128]``, 128x the bytes; keras-hub Mistral's layer norms and
    rotary embedding, new user round 16 finding 5).  :func:`broadcast_operand_spec` turns the
    broadcast's layout into the input's.  Loops and calls are left out (their bodies are equations of
    their own); the input index: the position in the equation of the operand the chain ends in first
    (its shape must be the source's), else the only input of that shape, else none.

    A ``broadcast`` that adds unit dims only (``f32[16,64]`` -> ``f32[16,64,1]``, the first step of jax's
    chain above) is not one: its layout is a step of the written module between the input and the real
    broadcast, and constraining the input to it made XLA broadcast in that layout and move the broadcast
    result (issue 24, round 31: GPT-2 given its expert layout, the held baseline plan: 25 layer-norm
    broadcasts ``f32[16,64,256]`` all-gathered, 9.8 MB of ``plan.jit()``'s 25.18 MB where the written module
    moves 15.28 MB)."""
    import jax.extend.core as jcore

    out = []
    for b in module.all_instructions():
        if b.opcode != "broadcast" or b.sharding is None or b.shape.is_tuple or not b.operands:
            continue
        path = equation_of(b)
        eqn = eqns.get(path) if path is not None else None
        if eqn is None or _loop_with_body(eqn) or _LOOP_OR_CALL.search(eqn.primitive.name):
            continue
        op = b.operands[0]
        if _unit_free(b.shape.dims) == _unit_free(op.shape.dims):
            continue   # adds unit dims only: a relabel in its operand's layout, not the broadcast (below)
        src = op
        while src.opcode in _UNIT_DIM_OPS and src.operands and equation_of(src) == path \
                and _unit_free(src.operands[0].shape.dims) == _unit_free(src.shape.dims):
            src = src.operands[0]
        if (src.opcode != "parameter" and equation_of(src) == path) or src.shape.is_tuple \
                or _unit_free(src.shape.dims) != _unit_free(op.shape.dims):
            continue
        dims = tuple(src.shape.dims)
        fits = [i for i, v in enumerate(eqn.invars) if not isinstance(v, jcore.Literal)
                and tuple(getattr(v.aval, "shape", ())) == dims]
        first = next((k for u in b.users if equation_of(u) == path
                      for k, o in enumerate(u.operands) if o is b), None)
        i = first if first in fits else fits[0] if len(fits) == 1 else None
        if i is not None:
            out.append((path, i, b, src))
    return out


def broadcast_operand_spec(out_spec, dimensions, operand_dims, source_dims):
    """The layout a ``broadcast`` needs of its source, per source dim (mesh axis names or None), from
    the broadcast's own layout: ``out_spec`` (one entry per output dim: None, an axis name or a tuple
    of them) restricted to ``dimensions`` (the operand's dims in the output); a mesh axis that splits
    a dim the broadcast adds is replicated in the operand (each device holds the whole operand rows it
    broadcasts).  ``operand_dims`` -> ``source_dims`` differ by unit dims only: the entries of the
    non-unit dims move in order, unit dims get None.  None when a unit dim of the operand would be
    split (no such layout)."""
    req = [out_spec[d] if d < len(out_spec) else None for d in dimensions]
    if len(req) != len(operand_dims):
        return None
    kept = []
    for size, entry in zip(operand_dims, req):
        if int(size) != 1:
            kept.append(entry)
        elif entry not in (None, ()):
            return None
    it = iter(kept)
    return [None if int(size) == 1 else next(it) for size in source_dims]


def _axes(entry) -> tuple:
    """A PartitionSpec entry (None, an axis name or a tuple of them) as a tuple of axis names."""
    return () if entry is None else tuple(entry) if isinstance(entry, tuple) else (entry,)


def meet_spec(have, want, rank: int):
    """The layout between two of one value's layouts that XLA's SPMD partitioner reaches from both without
    replicating the value whole, or None when none is needed (one entry per dim: None, an axis name or a
    tuple of them).  ``have`` -> ``want`` (PartitionSpecs, or lists of entries, ``rank`` dims) that takes
    some mesh axes off the value's dims and puts others on, none of them the same axis (no all-to-all can
    move it), is not one step XLA can take: it replicates the value and partitions it again ("Involuntary
    full rematerialization", new user 17's GNN: ``P('model')`` -> ``P(None, 'data')`` of a mean).  Through
    the meet -- per dim the axes both layouts split it by, as far as they agree from the first -- it is an
    all-gather of what ``have`` has beyond the meet, then a slice to ``want``, at no more bytes than the
    whole replication.  None when ``have`` -> ``want`` only takes axes off, only puts axes on, moves an
    axis between dims, or changes nothing."""
    a = [_axes(x) for x in list(have) + [None] * (rank - len(have))]
    b = [_axes(x) for x in list(want) + [None] * (rank - len(want))]
    meet = []
    for x, y in zip(a, b):
        k = 0
        while k < min(len(x), len(y)) and x[k] == y[k]:
            k += 1
        meet.append(x[:k])
    off = {ax for x, m in zip(a, meet) for ax in x[len(m):]}
    on = {ax for y, m in zip(b, meet) for ax in y[len(m):]}
    if not off or not on or off & on:
        return None
    out = [None if not m else m[0] if len(m) == 1 else m for m in meet]
    while out and out[-1] is None:
        out.pop()
    return out


def loop_state(eqn, w) -> dict:
    """Where each element of the loop state of ``w`` (the HLO ``while`` a ``scan`` or ``while`` equation
    ``eqn`` lowered to) is in the equation: HLO tuple index t -> a dict with ``operand`` (the equation's input
    that enters the loop there), ``input`` (the body's input that reads it), ``output`` (the body's output
    that writes it, which is the equation's output of that index) and ``stacked`` (a scan's ``xs`` / ``ys``
    buffer ``(length,) + body shape``: the body reads or writes one slice along dim 0), the keys that apply;
    ``{}`` when the state cannot be matched with the equation by shape and element type.

    jax 0.10.2 lowers ``scan`` (``jax._src.lax.control_flow.loops._scan_impl``) as a ``while`` over
    ``(counter, carry..., ys buffers...)`` whose body captures the ``xs`` arrays and the consts; captured
    values come last in the HLO loop state (:func:`_while_body_inputs`), ``xs`` first (the body reads them
    first); both orders of ``xs`` and consts are tried, one taken only when it alone fits (or both give the
    same map).  A ``while`` equation: :func:`_while_body_inputs`.

    Why the whole state: the loop-state pins alone (read pins of the written module) left a scan's ``ys``
    buffers, its outputs and the layouts its operands enter in to XLA, and an ``xs`` element was matched one
    index off when the scan had ``ys`` (consts were assumed last): on new user 32's scan repro ``plan.jit()``
    moved 1.8-12 MB where the priced module moves 0.4-0.6 MB (issue 24, round 33)."""
    import jax.extend.core as jcore

    body_hlo = called(w, "body", 0)
    if not w.shape.is_tuple or body_hlo is None or not body_hlo.parameters:
        return {}
    shapes = list(w.shape.tuple_shapes)
    if eqn.primitive.name == "while":
        nbody, ncond = int(eqn.params.get("body_nconsts", 0)), int(eqn.params.get("cond_nconsts", 0))
        out = {}
        for t, b in _while_body_inputs(eqn, w, body_hlo).items():
            row = {"operand": ncond + b, "input": b}
            if b >= nbody:
                row["output"] = b - nbody
            out[t] = row
        return out
    if eqn.primitive.name != "scan":
        return {}
    p = eqn.params
    nc, ncarry, length = int(p.get("num_consts", 0)), int(p.get("num_carry", 0)), int(p.get("length", 0))
    nxs, nys = len(eqn.invars) - nc - ncarry, len(eqn.outvars) - ncarry
    if len(shapes) < 1 + ncarry + nys or shapes[0].is_tuple or tuple(shapes[0].dims):
        return {}

    def kind(aval) -> tuple:
        return tuple(getattr(aval, "shape", ())), hlo_element_type(getattr(aval, "dtype", ""))

    def fits(t, aval) -> bool:
        s, (dims, et) = shapes[t], kind(aval)
        return not s.is_tuple and tuple(s.dims) == dims and et in (None, s.element_type)

    head = [({"operand": nc + c, "input": nc + c, "output": c}, eqn.invars[nc + c].aval) for c in range(ncarry)]
    head += [({"output": ncarry + j, "stacked": True}, eqn.outvars[ncarry + j].aval) for j in range(nys)]
    if not all(fits(1 + k, aval) for k, (_, aval) in enumerate(head)):
        return {}
    out = {1 + k: row for k, (row, _) in enumerate(head)}
    seen: set = set()

    def captured(k):   # an operand the body captures: a variable, once (jax captures a repeated one once)
        v = eqn.invars[k]
        if isinstance(v, jcore.Literal) or id(v) in seen:
            return False
        seen.add(id(v))
        return True

    xs = [({"operand": k, "input": k, "stacked": True}, eqn.invars[k].aval)
          for k in range(nc + ncarry, len(eqn.invars)) if captured(k)]
    consts = [({"operand": k, "input": k}, eqn.invars[k].aval) for k in range(nc) if captured(k)]
    start = 1 + ncarry + nys
    maps = []
    for order in (xs + consts, consts + xs):
        m = _in_order(order, list(range(start, len(shapes))), fits, kind)
        if m is not None and m not in maps:
            maps.append(m)
    if len(maps) == 1:
        out.update(maps[0])
    return out


def _in_order(cands: list, slots: list, fits, kind) -> dict | None:
    """``slot -> row``: ``cands`` (``(row, aval)``, in order) laid onto ``slots`` (HLO loop-state indices, in
    order) as a subsequence, each slot the next candidate that ``fits`` it; a candidate may be left out (jax
    lowers a constant it knows -- a scalar of a ``jvp`` -- inside the body, not as loop state) only when no
    candidate of its ``kind`` is laid (else which of them is left out is not known); None when a slot stays
    empty or that rule breaks."""
    out, left, j = {}, [], 0
    for t in slots:
        while j < len(cands) and not fits(t, cands[j][1]):
            left.append(cands[j])
            j += 1
        if j == len(cands):
            return None
        out[t] = cands[j]
        j += 1
    left += cands[j:]
    laid = {kind(aval) for _, aval in out.values()}
    if any(kind(aval) in laid for _, aval in left):
        return None
    return {t: row for t, (row, _) in out.items()}


def loop_layouts(module, eqns: dict) -> dict:
    """Loop equation path -> ``{"operands": [...], "inputs": [...], "outputs": [...]}``, each a list of
    ``(index, HloSharding, rank)``: the plan's loop-state layouts (the ``while`` instruction's tuple sharding,
    one element per loop-state element, :func:`loop_state`) as constraints on the equation's operands where it
    reads them (the layout the state enters the loop in: a scan's ``xs`` whole), on the body's inputs where
    the body starts and on the body's outputs where it ends (a scan's ``xs`` / ``ys`` as the body's slice: the
    layout without the stacked dim, only when that dim is not split, :func:`_drop_leading`).  The counter
    (a scalar) and elements whose sharding is not a plain array sharding get none.

    So ``plan.fn`` carries out the loop as the written module does: its state pins
    (:func:`hloshard.strategy.realize.insert_loop_state_pins`), and the loop's sharding, which the SPMD
    partitioner keeps for the whole state -- ``jax.jit`` otherwise lets Shardy / GSPMD choose the ``ys``
    buffers' and the captured ``xs``' layouts inside the loop (new user 32, F3/F8: whole stacked sequences
    resharded on every trip)."""
    out: dict = {}
    for w in module.all_instructions():
        if w.opcode != "while" or not w.shape.is_tuple or w.sharding is None or not w.sharding.is_tuple:
            continue
        path = equation_of(w)
        eqn = eqns.get(path) if path is not None else None
        if eqn is None or not _loop_with_body(eqn):
            continue
        elements = list(w.sharding.tuple_elements)
        shapes = list(w.shape.tuple_shapes)
        if len(elements) != len(shapes):
            continue
        rows = out.setdefault(path, {"operands": [], "inputs": [], "outputs": []})
        for t, row in sorted(loop_state(eqn, w).items()):
            sh, s = elements[t], shapes[t]
            if sh.is_tuple or s.is_tuple or not (sh.is_replicated or sh.is_tiled) or sh.is_manual:
                continue
            rank = len(s.dims)
            if "operand" in row:
                rows["operands"].append((row["operand"], sh, rank))
            inner = _drop_leading(sh, rank) if row.get("stacked") else sh
            if inner is None:
                continue
            inner_rank = rank - 1 if row.get("stacked") else rank
            if "input" in row:
                rows["inputs"].append((row["input"], inner, inner_rank))
            if "output" in row:
                rows["outputs"].append((row["output"], inner, inner_rank))
    for b in module.all_instructions():   # checkpoint regions: their inputs as the optimization barrier holds them
        path = equation_of(b) if b.opcode == "opt-barrier" else None
        eqn = eqns.get(path) if path is not None else None
        if eqn is None or _region_key(eqn) is None or b.sharding is None or not b.sharding.is_tuple:
            continue
        rows = out.setdefault(path, {"operands": [], "inputs": [], "outputs": []})
        rows["inputs"].extend(region_barrier_inputs(eqn, b))
    return out


def region_barrier_inputs(eqn, barrier) -> list:
    """``[(body input i, HloSharding, rank)]`` of a ``jax.checkpoint`` region ``eqn`` differentiated with
    ``prevent_cse`` (jax lowers it behind an optimization barrier over the inputs ``prevent_cse`` names, in
    their order: ``jax._src.ad_checkpoint._remat_lowering``): the layouts ``barrier`` (that ``opt-barrier``
    instruction of the plan's module) holds them in, as the body reads them; ``[]`` when the barrier's
    elements do not match those inputs by shape.

    Why: the body's inputs are the barrier's results, which ``jax.jit``'s propagation otherwise lays out from
    their readers: on new user 32's scan repro Shardy gave the barrier's copy of the recurrent weight the
    layout of one of its two readers and all-to-all'ed it into the other's on every trip (1.6 MB of the 2.3
    MB ``plan.jit()`` moved; the plan keeps it replicated and slices it locally twice)."""
    prevent = eqn.params.get("prevent_cse", True)
    n = len(eqn.invars)
    prevent = (bool(prevent),) * n if isinstance(prevent, bool) else tuple(bool(x) for x in prevent)
    if len(prevent) != n or not eqn.params.get("differentiated", False):
        return []
    through = [i for i in range(n) if prevent[i]]
    shapes = list(barrier.shape.tuple_shapes) if barrier.shape.is_tuple else []
    elements = list(barrier.sharding.tuple_elements)
    if len(shapes) != len(through) or len(elements) != len(through):
        return []
    out = []
    for k, i in enumerate(through):
        aval, s, sh = eqn.invars[i].aval, shapes[k], elements[k]
        if s.is_tuple or tuple(s.dims) != tuple(getattr(aval, "shape", ())):
            return []
        if not sh.is_tuple and (sh.is_replicated or sh.is_tiled) and not sh.is_manual:
            out.append((i, sh, len(s.dims)))
    return out


def _while_body_inputs(eqn, w, body) -> dict:
    """HLO loop-state index -> body input of a ``while`` equation (``jax.lax.while_loop``), for the
    elements the body reads; ``{}`` when the HLO loop state cannot be matched with the equation.

    jax lowers the loop state as the equation's operands, ``(cond consts, body consts, carry)``; the
    body's inputs are ``(body consts, carry)``.  Lowered to HLO, the operands the body passes through
    unchanged (the consts, and a carry element returned as it came) may be captured from the enclosing
    computation instead, and then come last, in their order (seen with jaxlib 0.10.2).  Both orders are
    tried; one is taken only when every element's shape and element type is the operand's and no
    element the equation's body changes is passed through unchanged by the HLO body."""
    import jax.extend.core as jcore

    body_jaxpr = eqn.params["body_jaxpr"].jaxpr
    ncond, nbody = int(eqn.params.get("cond_nconsts", 0)), int(eqn.params.get("body_nconsts", 0))
    operands = list(eqn.invars)
    n = len(operands)
    shapes = list(w.shape.tuple_shapes)
    root = body.root
    if len(shapes) != n or len(body_jaxpr.outvars) != n - ncond - nbody or root is None \
            or root.opcode != "tuple" or len(root.operands) != n:
        return {}
    carry_in = body_jaxpr.invars[nbody:]

    def passthrough(k: int) -> bool:   # operand k is the same value after every trip
        if k < ncond + nbody:
            return True
        c = k - ncond - nbody
        out = body_jaxpr.outvars[c]
        return not isinstance(out, jcore.Literal) and out is carry_in[c]

    def passed_in_hlo(t: int) -> bool:
        o = root.operands[t]
        return o.opcode == "get-tuple-element" and o.operands and o.operands[0] is body.parameters[0] \
            and int(str(o.attrs.get("index"))) == t

    def fits(order) -> bool:
        for t, k in enumerate(order):
            aval = operands[k].aval
            if shapes[t].is_tuple or tuple(shapes[t].dims) != tuple(getattr(aval, "shape", ())) or \
                    hlo_element_type(getattr(aval, "dtype", "")) not in (None, shapes[t].element_type):
                return False
            if not passthrough(k) and passed_in_hlo(t):
                return False
        return True

    moved = [k for k in range(n) if not passthrough(k)] + [k for k in range(n) if passthrough(k)]
    for order in (list(range(n)), moved):
        if fits(order):
            return {t: k - ncond for t, k in enumerate(order) if k >= ncond}
    return {}


def _drop_leading(sharding, rank: int):
    """The sharding of one slice along dim 0 of an array of rank ``rank`` sharded ``sharding``: the tile
    assignment without its first dim, which must be 1 (not split); None otherwise (or for a form without
    a tile assignment)."""
    if sharding.is_replicated:
        return sharding
    text = str(sharding)
    m = re.search(r"devices=\[([0-9,]+)\]", text)
    if m is None or rank < 2:
        return None
    dims = m.group(1).split(",")
    if dims[0] != "1" or len(tuple(sharding.tile_dims)) != rank:
        return None
    try:
        return HloSharding.parse(text[:m.start(1)] + ",".join(dims[1:]) + text[m.end(1):])
    except Exception:  # noqa: BLE001 - a form this rewrite does not handle: not pinned
        return None



#: jaxpr primitives whose output element i depends on input element i alone (every non-literal input has the
#: output's shape): a layout on the inputs is the output's layout, and XLA's propagation (Shardy's elementwise
#: sharding rule: one factor per dim, shared by operands and result) carries it through unchanged
ELEMENTWISE = frozenset({
    "abs", "acos", "acosh", "add", "and", "asin", "asinh", "atan", "atan2", "atanh", "cbrt", "ceil", "clamp",
    "convert_element_type", "copy", "copy_p", "cos", "cosh", "div", "eq", "erf", "erf_inv", "erfc", "exp", "exp2",
    "expm1", "floor", "ge", "gt", "imag", "integer_pow", "is_finite", "le", "lgamma", "digamma", "log", "log1p",
    "logistic", "lt", "max", "min", "mul", "ne", "neg", "nextafter", "not", "or", "pow", "real", "reduce_precision",
    "rem", "round", "rsqrt", "select_n", "shift_left", "shift_right_arithmetic", "shift_right_logical", "sign",
    "sin", "sinh", "sqrt", "square", "stop_gradient", "sub", "tan", "tanh", "xor",
})


def _entries(spec, rank: int) -> tuple:
    """A PartitionSpec as one entry per dim (trailing dims None), for comparing two layouts of one value."""
    out = list(spec) + [None] * (rank - len(spec))
    return tuple(tuple(e) if isinstance(e, list) else e for e in out[:rank])


def _consumers(jaxpr) -> dict:
    """Var -> ``[(equation, input index)]`` of every equation of ``jaxpr`` that reads it (loops and calls as
    the equations they are, not their bodies)."""
    out: dict = {}
    for eqn in jaxpr.eqns:
        for i, v in enumerate(eqn.invars):
            if hasattr(v, "aval") and not hasattr(v, "val"):
                out.setdefault(v, []).append((eqn, i))
    return out


def carried_outputs(closed, eqns: dict, constraints: dict, operand_constraints: dict, in_sh: list,
                    out_sh: list) -> set:
    """The output constraints (``(equation path, 0)`` keys of ``constraints``: equation path, output j ->
    NamedSharding) that XLA's propagation reaches without them, from the constraints kept: an equation of
    :data:`ELEMENTWISE` at the top level of ``closed`` whose output is inside a region of one layout --

    * its non-literal inputs (at least one; each of the output's shape) are all read in the layout its output
      is constrained to: an input's layout is the argument's sharding (``in_sh``, one per ``closed.jaxpr``
      invar), the operand constraint the equation reads it through (``operand_constraints``, the last of its
      steps), or the output constraint of the equation that made it (kept, or itself carried);
    * every equation that reads the output is of :data:`ELEMENTWISE` too, reads it without an operand
      constraint and has its output constrained to the same layout, and where the output is a result of
      ``closed`` its sharding (``out_sh``, one per outvar) is that layout too;
    * it has no literal input, unless its output is a scalar: jax lowers a literal of an array-valued equation
      as a broadcast constant, one instruction for every use of that value and shape in the module, to which
      GSPMD's propagation (which, unlike Shardy's, does not split constants per use) gives one layout, from
      another region, and the open output took it: a 4-layer Megatron MLP (gelu's ``0.5 * ...``, ``1.0 + ...``)
      compiled to 1,941,514 B of collectives per device under GSPMD against the written module's 1,446,922, and
      with each layer under ``jax.checkpoint`` 2,135,044 against 1,643,524 (issue 24, round 34; Shardy agreed).

    Then no neighbour offers XLA's propagation another layout for the value.  Both conditions are needed: new
    user 24's MoE plan compiled to 15.02 MB of collectives instead of 13.43 MB with the first alone (a value
    whose reader pinned another layout took the reader's, and its inputs were resharded instead).  An input
    whose layout is not known here (a constant, an output left unconstrained) keeps the constraint; loop bodies
    and inlined calls are not looked into (their equations keep theirs).

    Why: ``plan.fn`` constrains every equation's output, thousands on a real model (new user 24's BART:
    2,754 output constraints; jax traces and lowers each, Shardy and the SPMD partitioner carry each), most of
    them on an optimizer's elementwise update whose operands are already in that layout.  The CPU compiler's
    bytes and peak with and without the ones left out are in BENCHMARKS.md (round 25, helper jitfast).
    Returns the set of keys to leave out."""
    import jax.extend.core as jcore

    jaxpr = closed.jaxpr
    made: dict = {v: sh for v, sh in zip(jaxpr.invars, in_sh)}
    readers = _consumers(jaxpr)
    path_of = {id(eqn): (k,) for k, eqn in enumerate(jaxpr.eqns)}
    results: dict = {}
    for v, sh in zip(jaxpr.outvars, out_sh):
        if not isinstance(v, jcore.Literal):
            results.setdefault(v, []).append(sh)

    def same(a, b, rank: int) -> bool:
        return a is not None and b is not None and _entries(a.spec, rank) == _entries(b.spec, rank)

    out: set = set()
    for k, eqn in enumerate(jaxpr.eqns):
        path = (k,)
        sh = constraints.get((path, 0))
        if sh is not None and eqns.get(path) is eqn and eqn.primitive.name in ELEMENTWISE and len(eqn.outvars) == 1:
            v_out = eqn.outvars[0]
            shape = tuple(getattr(v_out.aval, "shape", ()))
            rank = len(shape)
            pins = {}
            for i, s in operand_constraints.get(path, ()):
                pins[i] = s   # the last step is the layout the equation reads
            inputs = [(i, v) for i, v in enumerate(eqn.invars) if not isinstance(v, jcore.Literal)]
            # a literal operand of a non-scalar output: jax lowers it as a broadcast constant that the module's
            # other uses of that value and shape share, and GSPMD's propagation (no constant splitting, unlike
            # Shardy's) gives the shared broadcast one layout, from whichever region it meets first -- then the
            # equation's output, left open, takes that layout (issue 24, round 34: below)
            ok = bool(inputs) and not (rank and len(inputs) < len(eqn.invars)) and all(tuple(getattr(v.aval, "shape", ())) == shape and
                                      same(pins.get(i, made.get(v)), sh, rank) for i, v in inputs)
            for user, i in readers.get(v_out, ()) if ok else ():
                upath = path_of.get(id(user))
                if user.primitive.name not in ELEMENTWISE or upath is None or \
                        any(j == i for j, _ in operand_constraints.get(upath, ())) or \
                        not same(constraints.get((upath, 0)), sh, rank):
                    ok = False
                    break
            if ok and all(same(r, sh, rank) for r in results.get(v_out, ())):
                out.add((path, 0))
        for j, v in enumerate(eqn.outvars):
            s = constraints.get((path, j))
            if s is not None:
                made[v] = s
    return out
