"""``auto_shard``: lower a JAX function, choose shardings with hloshard, hand them back to ``jax.jit``.

Flow:

1. ``jax.make_jaxpr(fn)`` on the example arguments (``jax.ShapeDtypeStruct``; an argument the user
   already sharded keeps its ``NamedSharding``).
2. The jaxpr is evaluated equation by equation, equation ``k`` inside ``jax.named_scope(f"hloshard_eqn{k}")``
   (source info kept); a nested ``jit`` call without shardings of its own is evaluated inline, its
   equation ``i`` as ``hloshard_eqn{k}_{i}``, so every dot / gather / scatter is an equation of its own.
   That function is lowered with ``jax.jit(..., keep_unused=True)``: entry parameter i is flattened
   argument leaf i, output j flattened result leaf j, and every HLO instruction's
   ``metadata={op_name=...}`` names the equation it came from.
3. The step's state is tied (:func:`_state_ties`): each result leaf that is the next value of an
   argument leaf leaves in that leaf's sharding (``module.ties``, :mod:`hloshard.autoshard.aliases`).
4. :func:`hloshard.autoshard.solve_module` chooses a sharding for every instruction on the mesh
   (logical device ids = positions in ``mesh.devices.flat``, the order of jax's device assignment) and
   writes it with the operand pins (:mod:`hloshard.strategy.realize`), as ``hloshard solve
   --pin-operands`` does.
5. Entry parameter / output shardings become ``NamedSharding(mesh, PartitionSpec)`` over the mesh's axis
   names (:func:`hloshard.sdy.dim_axes`).  :attr:`AutoShardResult.fn` re-evaluates the jaxpr with
   ``jax.lax.with_sharding_constraint`` (a) on each equation's outputs (the sharding of the last
   instruction of that equation with the output's shape) and (b) on each operand the plan pins: the
   equation's input value in the pinned layout, seen by that equation only (what the CLI's pin copy /
   ``Sharding`` custom-call does), and (c) on a loop body's inputs (``scan``, ``while_loop``) where the
   body starts, for the loop-state pins (:func:`_loop_state_pins`), so XLA carries out the plan that
   was priced, not its own variant from the operands' layouts.  Loop bodies are re-traced equation by
   equation for this (their operand pins and outputs are constrained as the top level's).
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import re
from typing import Any, Callable

__all__ = ["AutoShardResult", "auto_shard"]

_EQN = re.compile(r"hloshard_eqn([0-9_]+)")
#: the primitives of a nested ``jit`` call (evaluated inline when it has no shardings of its own)
_CALLS = ("jit", "pjit")
STATE_MODES = ("tie", "pay")
#: primitives that stand for a loop or a call (their HLO is in other computations): no pin maps onto them
_LOOP_OR_CALL = re.compile(r"call|jit|scan|while|cond|remat|checkpoint|shard_map|custom")


@dataclasses.dataclass
class AutoShardResult:
    """What :func:`auto_shard` returns.

    ``in_shardings``: a tuple (one entry per positional argument) of pytrees of ``NamedSharding``;
    ``out_shardings``: a pytree of ``NamedSharding`` shaped like ``fn``'s result (both ready for
    ``jax.jit(result.fn, in_shardings=..., out_shardings=...)``, which :meth:`jit` does); a result leaf
    tied to an argument leaf (``ties``) has that argument's sharding, so the step's outputs can be fed
    back as its next inputs without resharding.
    ``fn``: ``fn`` with hloshard's plan as ``with_sharding_constraint`` (equation outputs and pinned
    operands; same arguments and results); ``constraints``: the intermediate shardings XLA's
    propagation from the parameter / output shardings alone does not reach
    (:func:`hloshard.partition_specs.partition_specs` dicts: instruction, opcode, shape, sharding,
    partition_spec, xla_propagation, op_name, source); ``report``: the ``hloshard solve --report`` JSON
    (cost units; bytes per device; ``peak_tensors``; ``ties``, ``pins``;
    ``predicted_collective_bytes_per_device``: ring bytes of the collectives the plan predicts, the figure
    to hold beside XLA's); ``module``: the annotated
    HLO as a parsed :class:`hloshard.hlo.Module` (:attr:`hlo_text` is its text, what ``hloshard solve
    --pin-operands`` writes); ``solve_result``: the :class:`~hloshard.autoshard.SolveResult`;
    ``ties``: one dict per tied result leaf (``output`` / ``input``: jax key paths, ``mode``,
    ``donated``, ``source``); ``pins``: one dict per operand pin of the plan (``instruction``,
    ``operand``, ``sharding``, ``equation``: the jaxpr equation path it is applied to, None when it
    could not be carried into ``fn``); ``donate_argnums``: the donated positional arguments
    (:meth:`jit` passes them to ``jax.jit``)."""

    in_shardings: Any
    out_shardings: Any
    fn: Callable
    constraints: list
    report: dict
    module: Any
    solve_result: Any = None
    ties: list = dataclasses.field(default_factory=list)
    pins: list = dataclasses.field(default_factory=list)
    donate_argnums: tuple = ()

    @property
    def hlo_text(self) -> str:
        """The annotated HLO module's text (shardings and operand pins written), as ``hloshard solve``
        writes it."""
        from ..hlo import print_module

        return print_module(self.module)

    def jit(self, **kwargs):
        """``jax.jit(self.fn, in_shardings=self.in_shardings, out_shardings=self.out_shardings,
        donate_argnums=self.donate_argnums, **kwargs)``."""
        import jax

        kwargs.setdefault("donate_argnums", self.donate_argnums)
        return jax.jit(self.fn, in_shardings=self.in_shardings, out_shardings=self.out_shardings, **kwargs)


def _is_sharded(leaf, mesh) -> bool:
    from jax.sharding import NamedSharding

    sh = getattr(leaf, "sharding", None)
    if not isinstance(sh, NamedSharding):
        return False
    if sh.mesh.devices.size != mesh.devices.size:
        raise ValueError(f"an example argument is sharded over {sh.mesh.devices.size} devices "
                         f"({dict(sh.mesh.shape)}) but the mesh has {mesh.devices.size} "
                         f"({dict(mesh.shape)}): the mesh's device count must match the function's")
    return True


def _spec(sharding, rank: int, sdy_mesh):
    """HloSharding -> PartitionSpec over the mesh axis names (None: replicated dim). Raises
    ValueError when it needs Shardy sub-axes (no PartitionSpec form) or has no named-axis form."""
    from jax.sharding import PartitionSpec

    from ..sdy import NotExpressible, dim_axes

    try:
        dims = dim_axes(sharding, rank, sdy_mesh)
    except NotExpressible as exc:
        raise ValueError(str(exc)) from None
    out = []
    for refs in dims:
        if any(":" in r for r in refs):
            raise ValueError(f"sharding {sharding} splits a mesh axis into sub-axes ({refs}); "
                             f"PartitionSpec cannot say that")
        names = [r.strip('"') for r in refs]
        out.append(None if not names else names[0] if len(names) == 1 else tuple(names))
    while out and out[-1] is None:
        out.pop()
    return PartitionSpec(*out)


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
    """The parameter of a loop equation (``scan`` / ``while``) whose body :func:`_runner` evaluates
    equation by equation (equation ``i`` of the body of equation ``k`` is ``hloshard_eqn{k}_{i}``), None
    for any other equation."""
    key = _LOOP_BODIES.get(eqn.primitive.name)
    return key if key is not None and key in eqn.params else None


def _loop_with_body(eqn) -> bool:
    """A loop (``scan`` or ``while``) whose body :func:`_runner` evaluates equation by equation."""
    return _loop_body_key(eqn) is not None


def _equations(closed) -> dict:
    """Equation path (tuple of indices, see the module docstring) -> jaxpr equation, inlined ``jit``
    calls expanded (the call itself is not listed), ``scan`` bodies too (the scan is listed)."""
    out: dict = {}

    def walk(jaxpr, prefix):
        for k, eqn in enumerate(jaxpr.eqns):
            path = prefix + (k,)
            if _inline(eqn):
                walk(eqn.params["jaxpr"].jaxpr, path)
            else:
                out[path] = eqn
                if _loop_with_body(eqn):
                    walk(eqn.params[_loop_body_key(eqn)].jaxpr, path)

    walk(closed.jaxpr, ())
    return out


def _scope(path) -> str:
    return "hloshard_eqn" + "_".join(map(str, path))


def _runner(closed, constraints: dict | None = None, operand_constraints: dict | None = None,
            body_constraints: dict | None = None):
    """A flat function evaluating ``closed`` (a ClosedJaxpr) equation by equation, each under
    ``named_scope(_scope(path))``, nested ``jit`` calls inline (:func:`_inline`);
    ``constraints[(path, j)]`` (a Sharding) constrains output j of that equation,
    ``operand_constraints[path]``: ``[(i, Sharding)]`` constrains input i as that equation reads it;
    ``body_constraints[path]``: ``[(i, Sharding)]`` constrains input i of that loop's body where the
    body starts (the loop state as each trip reads it)."""
    import jax
    import jax.extend.core as jcore
    from jax._src import source_info_util as siu

    constraints = constraints or {}
    operand_constraints = operand_constraints or {}
    body_constraints = body_constraints or {}

    def evaluate(jaxpr, consts, args, prefix):
        env: dict = {}
        args = list(args)
        for i, sh in body_constraints.get(prefix, ()) if prefix else ():
            args[i] = jax.lax.with_sharding_constraint(args[i], sh)

        def read(v):
            return v.val if isinstance(v, jcore.Literal) else env[v]

        for v, c in zip(jaxpr.constvars, consts):
            env[v] = c
        for v, a in zip(jaxpr.invars, args):
            env[v] = a
        for k, eqn in enumerate(jaxpr.eqns):
            path = prefix + (k,)
            invals = [read(v) for v in eqn.invars]
            for i, sh in operand_constraints.get(path, ()):
                invals[i] = jax.lax.with_sharding_constraint(invals[i], sh)
            if _inline(eqn):
                inner = eqn.params["jaxpr"]
                outs = evaluate(inner.jaxpr, inner.consts, invals, path)
            else:
                params = eqn.params
                if _loop_with_body(eqn):   # the body re-traced equation by equation, named and constrained too
                    key = _loop_body_key(eqn)
                    body = params[key]
                    params = dict(params, **{key: jax.make_jaxpr(
                        lambda *a, _b=body, _p=path: evaluate(_b.jaxpr, _b.consts, a, _p))(
                            *[v.aval for v in body.jaxpr.invars])})
                stack = siu.current_name_stack() + eqn.source_info.name_stack
                with siu.user_context(eqn.source_info.traceback, name_stack=stack), \
                        jax.named_scope(_scope(path)), eqn.ctx.manager:
                    outs = eqn.primitive.bind(*invals, **eqn.primitive.get_bind_params(params))
                if not eqn.primitive.multiple_results:
                    outs = [outs]
            for j, (v, o) in enumerate(zip(eqn.outvars, outs)):
                if isinstance(v, jcore.DropVar):
                    continue
                sh = constraints.get((path, j))
                env[v] = jax.lax.with_sharding_constraint(o, sh) if sh is not None else o
        return [read(v) for v in jaxpr.outvars]

    def run(*args):
        return evaluate(closed.jaxpr, closed.consts, args, ())

    return run


def _equation_of(instr):
    """The equation path an instruction's ``op_name`` names (the innermost ``hloshard_eqn``), or None."""
    from ..hlo.attributes import parse_metadata

    raw = instr.attrs.get("metadata")
    if not raw:
        return None
    try:
        found = _EQN.findall(str(parse_metadata(str(raw)).get("op_name", "")))
    except Exception:  # noqa: BLE001 - metadata without an op_name
        return None
    return tuple(int(x) for x in found[-1].split("_")) if found else None


_HLO_TYPE = re.compile(r"(float|int|uint|complex)([0-9]+)$")


def _hlo_element_type(dtype) -> str | None:
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


def _equation_outputs(module, eqns: dict) -> dict:
    """(equation path, output j) -> the instruction that computes it, among the instructions with a
    sharding whose op_name names that equation (innermost ``hloshard_eqn``) and whose dims and element
    type are the output's:

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
        path = _equation_of(instr)
        if path is not None:
            by_eqn.setdefault(path, []).append(instr)
    out = {}
    for path, eqn in eqns.items():
        cands = by_eqn.get(path, [])
        if not cands:
            continue
        kinds = [(tuple(getattr(v.aval, "shape", ())), _hlo_element_type(getattr(v.aval, "dtype", "")))
                 for v in eqn.outvars]

        def fits(instr, kind):
            return tuple(instr.shape.dims) == kind[0] and kind[1] in (None, instr.shape.element_type)

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


def _pin_operand(pin, operand, eqns: dict):
    """``(equation path, input index)`` of the jaxpr value a :class:`hloshard.strategy.realize.Pin`
    constrains: the pinned user's equation, the input with the operand's shape (the operand's own
    index first), when that equation is no loop or call (a ``scan`` body's equations are their own) and
    the operand comes from outside it; None otherwise."""
    import jax.extend.core as jcore

    path = _equation_of(pin.user)
    eqn = eqns.get(path) if path is not None else None
    if eqn is None or _loop_with_body(eqn) or _LOOP_OR_CALL.search(eqn.primitive.name):
        return None   # the user is inside a loop / call this equation stands for, not the equation itself
    if operand.opcode != "parameter" and _equation_of(operand) == path:
        return None
    dims = tuple(operand.shape.dims)
    order = [pin.index] + [i for i in range(len(eqn.invars)) if i != pin.index]
    for i in order:
        if i < len(eqn.invars) and not isinstance(eqn.invars[i], jcore.Literal) \
                and tuple(getattr(eqn.invars[i].aval, "shape", ())) == dims:
            return path, i
    return None


def _loop_state_pins(module, eqns: dict) -> dict:
    """Loop equation path -> ``[(body input i, HloSharding, rank)]``: the loop-state pins
    (:func:`hloshard.strategy.realize.insert_loop_state_pins`, ``Sharding`` custom-calls after a body's
    reads of its loop state) of each ``while`` a ``scan`` or ``while`` equation lowered to, as
    constraints on the loop body's inputs (a ``while`` equation's: :func:`_while_body_inputs`).  jax's
    scan loop state is ``(counter, carry..., ys buffers..., consts and xs...)``: a carry element is body input ``num_consts + c``; a stacked ``xs`` array (the tuple's last elements,
    checked by shape: ``(length,) + body input shape``) is the body's slice of it, pinned in the layout
    without the stacked dim (only when that dim is not split); ys buffers have no body input."""
    from ..hlo.loops import called

    out: dict = {}
    for w in module.all_instructions():
        if w.opcode != "while" or not w.shape.is_tuple:
            continue
        path = _equation_of(w)
        eqn = eqns.get(path) if path is not None else None
        if eqn is None or not _loop_with_body(eqn):
            continue
        body = called(w, "body", 0)
        if body is None or not body.parameters:
            continue
        if eqn.primitive.name == "while":
            inputs = _while_body_inputs(eqn, w, body)
            for cc, g in _state_read_pins(body):
                i = inputs.get(int(str(g.attrs.get("index"))))
                if i is not None and not cc.sharding.is_tuple:
                    out.setdefault(path, []).append((i, cc.sharding, len(g.shape.dims)))
            continue
        invars = eqn.params["jaxpr"].jaxpr.invars
        nc, ncarry = int(eqn.params.get("num_consts", 0)), int(eqn.params.get("num_carry", 0))
        nxs = len(invars) - nc - ncarry
        n = len(w.shape.tuple_shapes)
        length = int(eqn.params.get("length", 0))
        for cc, g in _state_read_pins(body):
            t = int(str(g.attrs.get("index")))
            dims = tuple(g.shape.dims)
            if 1 <= t <= ncarry and tuple(getattr(invars[nc + t - 1].aval, "shape", ())) == dims:
                out.setdefault(path, []).append((nc + t - 1, cc.sharding, len(dims)))
            elif t >= n - nxs:
                i = nc + ncarry + (t - (n - nxs))
                inner = tuple(getattr(invars[i].aval, "shape", ()))
                if dims == (length,) + inner and not cc.sharding.is_tuple:
                    sliced = _drop_leading(cc.sharding, len(dims))
                    if sliced is not None:
                        out.setdefault(path, []).append((i, sliced, len(inner)))
    return out


def _state_read_pins(body):
    """``(pin, read)`` for each sharding constraint (a ``Sharding`` custom-call with a sharding) of a loop
    ``body`` whose operand is a ``get-tuple-element`` of the body's parameter (a read of the loop
    state), in text order."""
    for cc in body.instructions:
        if not cc.is_sharding_constraint or not cc.operands or cc.sharding is None:
            continue
        g = cc.operands[0]
        if g.opcode == "get-tuple-element" and g.operands and g.operands[0] is body.parameters[0]:
            yield cc, g


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
                    _hlo_element_type(getattr(aval, "dtype", "")) not in (None, shapes[t].element_type):
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
    from ..hlo.sharding import HloSharding

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


def _donated(fn, nargs: int, donate_argnums, donate_argnames) -> tuple:
    """The donated positional argument numbers, as ``jax.jit`` reads ``donate_argnums`` /
    ``donate_argnames``; ValueError for a number or name that is not an argument."""
    nums = (donate_argnums,) if isinstance(donate_argnums, int) else tuple(donate_argnums or ())
    names = (donate_argnames,) if isinstance(donate_argnames, str) else tuple(donate_argnames or ())
    out = set()
    for n in nums:
        if not -nargs <= int(n) < nargs:
            raise ValueError(f"donate_argnums {n}: the function is called with {nargs} positional arguments")
        out.add(int(n) % nargs)
    if names:
        try:
            params = [p.name for p in inspect.signature(fn).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        except (TypeError, ValueError):
            params = []
        for name in names:
            if name not in params[:nargs]:
                raise ValueError(f"donate_argnames {name!r}: not a positional argument of the function "
                                 f"({', '.join(params[:nargs]) or 'no signature'})")
            out.add(params.index(name))
    return tuple(sorted(out))


def _state_ties(args, out, donated: tuple, state, state_mode: str) -> list:
    """``(output leaf, input leaf, mode, donated, source)`` for every result leaf that is the next value
    of an argument leaf (flat leaf indices of ``out`` and of the ``args`` tuple; ``args`` / ``out``:
    pytrees of ``ShapeDtypeStruct``).

    ``state`` None: by path -- the whole result, else each top-level element of it, is tied to the first
    positional argument (not yet tied) with the same pytree structure and leaf shapes and dtypes (the
    ``(loss, new_params)`` pattern; a single array only when exactly one argument matches it); a dict: exactly its pairs, ``{output path: input path}`` or
    ``{output path: (input path, mode)}`` with jax key paths (``jax.tree_util.keystr``: ``"[1]['w']"``
    of the result, ``"[0]['w']"`` of the argument tuple) or flat leaf numbers.  Then every leaf of a
    donated argument not yet tied is tied to the first untied result leaf of its shape and dtype (as
    ``jax.jit`` pairs donated buffers).  ValueError for a path that names no leaf or a pair whose shapes
    or dtypes differ."""
    import jax

    in_flat = jax.tree_util.tree_flatten_with_path(args)[0]
    out_flat = jax.tree_util.tree_flatten_with_path(out)[0]
    in_paths = [jax.tree_util.keystr(k) for k, _ in in_flat]
    out_paths = [jax.tree_util.keystr(k) for k, _ in out_flat]

    def aval(leaf):
        return tuple(leaf.shape), str(leaf.dtype)

    ties: dict = {}   # output leaf -> (input leaf, mode, source)
    if state is None:
        used: set = set()
        groups = [((), out)]
        if isinstance(out, (tuple, list)):
            groups += [((jax.tree_util.SequenceKey(j),), o) for j, o in enumerate(out)]
        elif isinstance(out, dict):
            groups += [((jax.tree_util.DictKey(k),), out[k]) for k in sorted(out)]
        for prefix, sub in groups:
            leaves = [j for j, (k, _) in enumerate(out_flat) if tuple(k[:len(prefix)]) == prefix]
            if not leaves or any(j in ties for j in leaves):
                continue
            matches = []
            for i, a in enumerate(args):
                if i in used or jax.tree_util.tree_structure(a) != jax.tree_util.tree_structure(sub):
                    continue
                ins = [q for q, (k, _) in enumerate(in_flat) if k[0] == jax.tree_util.SequenceKey(i)]
                if len(ins) == len(leaves) and all(aval(in_flat[q][1]) == aval(out_flat[j][1])
                                                   for q, j in zip(ins, leaves)):
                    matches.append((i, ins))
            # a bare array matching several arguments (f(w, x) -> x @ w, all square) names no state
            if matches and (len(leaves) > 1 or len(matches) == 1):
                i, ins = matches[0]
                used.add(i)
                for q, j in zip(ins, leaves):
                    ties[j] = (q, state_mode, "path")
    else:
        if not isinstance(state, dict):
            raise ValueError(f"state must be a dict {{output path: input path}} or None, got {type(state).__name__}")

        def index(key, paths, what):
            if isinstance(key, int) and 0 <= key < len(paths):
                return key
            if isinstance(key, str) and key in paths:
                return paths.index(key)
            raise ValueError(f"state: {key!r} is not a {what} leaf (one of {', '.join(paths)})")

        for o, v in state.items():
            src, mode = (v if isinstance(v, tuple) else (v, state_mode))
            if mode not in STATE_MODES:
                raise ValueError(f"state {o!r}: mode {mode!r} is not one of {', '.join(STATE_MODES)}")
            j, q = index(o, out_paths, "result"), index(src, in_paths, "argument")
            if aval(in_flat[q][1]) != aval(out_flat[j][1]):
                raise ValueError(f"state {out_paths[j]} -> {in_paths[q]}: shapes / dtypes differ "
                                 f"({aval(out_flat[j][1])} vs {aval(in_flat[q][1])})")
            ties[j] = (q, mode, "state")
    tied_in = {q for q, _, _ in ties.values()}
    don = set()
    for q, (k, leaf) in enumerate(in_flat):
        if k[0].idx not in donated:
            continue
        don.add(q)
        if q in tied_in:
            continue
        for j, (_, o) in enumerate(out_flat):
            if j not in ties and aval(o) == aval(leaf):
                ties[j] = (q, "tie", "donate")
                tied_in.add(q)
                break
    return [(j, q, mode, q in don, source) for j, (q, mode, source) in sorted(ties.items())]


def _user_sharded(module) -> bool:
    """Whether an entry parameter of ``module`` carries a sharding that is not replicated (an argument
    the user sharded)."""
    return any(p.sharding is not None and not p.sharding.is_replicated for p in module.entry.parameters)


def _plan_entry(result, module) -> dict:
    """Instruction name -> HloSharding the plan ``result`` (a :class:`~hloshard.autoshard.SolveResult`
    built from ``module``, not yet applied) gives each entry parameter and the entry root: the
    ``in_shardings`` / ``out_shardings`` :func:`auto_shard` hands to ``jax.jit``."""
    from ..autoshard.apply import instruction_sharding

    scheduled = set(result.graph.schedule)
    return {i.name: instruction_sharding(result.graph, i, result.choice)
            for i in list(module.entry.parameters) + [module.entry.root] if i in scheduled}


def baseline_peak(module, dmesh, timeout: float = 600.0, entry: dict | None = None) -> dict:
    """The baseline a plan for ``module`` is meant to improve on, priced by hloshard's memory model:
    what XLA does with only the entry shardings (GSPMD propagation from the entry parameters' and
    outputs' shardings, :func:`hloshard.partition_specs.xla_propagate`, in a child process), the plan
    ``jax.jit(fn, in_shardings=..., out_shardings=...)`` runs.  The entry shardings are

    * ``entry`` None: the user's, as ``module`` carries them on its parameters, each tied state output
      (``module.ties``) leaving in its argument's sharding and every other output replicated; with
      nothing sharded every instruction is replicated (no XLA run);
    * ``entry`` given (instruction name -> HloSharding of entry parameters and the root, e.g. a plan's,
      :func:`_plan_entry`): exactly those, the intermediates left to XLA's propagation.

    The propagated shardings are written on a copy of ``module`` and priced by
    :func:`hloshard.autoshard.evaluate_module` (the one liveness model).

    Returns ``{"plan": "gspmd" | "gspmd_from_plan" | "replicated", "peak_bytes": int (predicted peak
    per device), "collective_cost": float (cost units)}``.  Raises InputError when jax is missing or
    XLA rejects the module, SolveFailed when the propagated shardings cannot be priced."""
    from ..autoshard import evaluate_module
    from ..hlo import parse_module, print_module
    from ..hlo.sharding import HloSharding
    from ..partition_specs import xla_propagate

    copy = parse_module(print_module(module), "<baseline>")
    entry_comp = copy.entry
    params = {p.parameter_number: p for p in entry_comp.parameters}
    root = entry_comp.root
    leaves = list(root.shape.tuple_shapes) if root.shape.is_tuple else [root.shape]
    if entry is not None:
        for ins in list(params.values()) + [root]:
            if ins.name in entry:
                ins.sharding = entry[ins.name]
        outs = None
    else:
        outs = [HloSharding.replicated() for _ in leaves]
        for tie in getattr(module, "ties", None) or []:
            j = tie.output[0] if tie.output else 0
            p = params.get(tie.param)
            if p is not None and p.sharding is not None and j < len(outs) and not tie.param_index:
                outs[j] = p.sharding
        root.sharding = HloSharding.tuple(outs) if root.shape.is_tuple else outs[0]
    shardings = [p.sharding for p in params.values()] + (
        list(root.sharding.tuple_elements) if root.sharding is not None and root.sharding.is_tuple
        else [root.sharding])
    if all(sh is None or sh.is_replicated for sh in shardings):
        for ins in entry_comp.instructions:
            ins.sharding = None if ins.shape.is_tuple else HloSharding.replicated()
        plan = "replicated"
    else:
        kept = root.sharding
        for name, sh in xla_propagate(copy, dmesh.num_devices, timeout=timeout).items():
            if sh is not None and name in entry_comp:
                entry_comp.get(name).sharding = sh
        root.sharding = kept
        plan = "gspmd" if entry is None else "gspmd_from_plan"
    if outs is not None:
        root.sharding = HloSharding.tuple(outs) if root.shape.is_tuple else outs[0]
    ev = evaluate_module(copy, dmesh)
    return {"plan": plan, "peak_bytes": int(ev.evaluation.peak_memory), "collective_cost": float(ev.total_cost)}


def _memory_guard(result, module, dmesh, keep: str, time_limit: float, seed: int, deterministic: bool):
    """``(result, guard)``: :func:`auto_shard`'s memory guard (its docstring) applied to the unguarded
    ``result`` of :func:`hloshard.autoshard.solve_module` (not yet applied to ``module``)."""
    from ..autoshard import solve_module
    from ..cost.memory import budget_for_model_limit, xla_lower_bound
    from ..errors import HloshardError, SolveFailed
    from ..units import format_bytes

    device = getattr(dmesh, "memory_device", None)
    plan_peak = int(result.evaluation.peak_memory)
    try:
        # the user's shardings when there are any; else the plan's own entry shardings with XLA's
        # intermediates (auto_shard's docstring, "Memory guard": why not the replicated plan)
        base = baseline_peak(module, dmesh) if _user_sharded(module) else \
            baseline_peak(module, dmesh, entry=_plan_entry(result, module))
    except (HloshardError, SolveFailed) as exc:
        return result, {"baseline": None, "applied": False,
                        "note": f"memory guard off: the baseline could not be priced ({exc})"}
    limit = base["peak_bytes"]
    guard = {"baseline": base["plan"], "baseline_peak_bytes": limit, "limit_bytes": limit,
             "plan_peak_bytes": plan_peak, "applied": False, "note": None}
    if plan_peak <= limit:
        return result, guard
    if base["plan"] == "gspmd_from_plan" and xla_lower_bound(plan_peak, device) <= limit:
        # the baseline is the plan's own parameters with XLA's intermediates: re-solve only when the plan
        # peaks above it even read at the model's measured worst over-estimate (auto_shard's docstring)
        guard["note"] = (f"memory guard: the plan peaks at {format_bytes(plan_peak)} per device, above the "
                         f"{base['plan']} baseline's {format_bytes(limit)} (both predicted) by less than the "
                         f"memory model's measured over-estimate of XLA (at least {format_bytes(xla_lower_bound(plan_peak, device))} "
                         f"by XLA): kept")
        return result, guard
    # within the baseline's peak; when nothing is found there (the communication buffers are outside the
    # solver's node memory), bisect towards the unguarded plan's peak: at most two more limits, halfway
    guarded, tried, reason = None, [], None
    lo, hi = limit, plan_peak
    for _ in range(3):
        at = lo if not tried else (lo + hi) // 2
        tried.append(at)
        try:
            guarded = solve_module(module, dmesh, keep=keep, memory_budget=budget_for_model_limit(at, device),
                                   time_limit=time_limit, seed=seed, deterministic=deterministic, apply=False)
            break
        except SolveFailed as exc:
            reason = reason or str(exc)
            lo = at
    if guarded is None or int(guarded.evaluation.peak_memory) >= plan_peak:
        guard["note"] = (f"memory guard: the plan peaks at {format_bytes(plan_peak)} per device, above the "
                         f"{base['plan']} baseline's {format_bytes(limit)} (both predicted), and no plan was "
                         f"found within it ({reason}); the unguarded plan is kept")
        return result, guard
    guard["applied"] = True
    guard["limit_bytes"] = tried[-1]
    within = "within it" if tried[-1] == limit else (
        f"none within it ({reason}); within {format_bytes(tried[-1])}, halfway to the unguarded peak")
    guard["note"] = (f"memory guard: the plan found first peaks at {format_bytes(plan_peak)} per "
                     f"device, above the {base['plan']} baseline's {format_bytes(limit)} (both predicted); "
                     f"re-solved {within}: {format_bytes(int(guarded.evaluation.peak_memory))}")
    guarded.graph.memory_budget = None   # an implicit limit, not the user's budget
    return guarded, guard


def auto_shard(fn, *example_args, mesh, memory_budget=None, keep_shardings: str = "io",
               time_limit: float = 20.0, seed: int = 0, deterministic: bool = True,
               with_constraints: bool = True, donate_argnums=(), donate_argnames=(), state=None,
               state_mode: str = "tie", pin_operands: bool = True,
               device: str | None = None, memory_guard: bool = True) -> AutoShardResult:
    """Choose shardings for ``fn(*example_args)`` on ``mesh`` (a ``jax.sharding.Mesh``).

    ``example_args``: arrays or ``jax.ShapeDtypeStruct`` pytrees (only shapes and dtypes are used;
    a leaf with a ``NamedSharding`` keeps it under ``keep_shardings="io"`` or ``"all"``, ``"none"``
    lets hloshard change it). ``memory_budget``: bytes per device, a size string (``"64MiB"``) or a
    device name (``"tpu-v5e"``, ``"h100-80gb"``; :data:`hloshard.units.DEVICE_MEMORY`), None for no
    budget. ``time_limit``: solver seconds. ``with_constraints``: also run XLA's sharding propagation
    from the chosen parameter / output shardings (a child process) to list the intermediate shardings it
    does not reach (``constraints``, as ``hloshard solve --partition-specs`` writes them).

    **State** (a training step is a loop): a result leaf that is the next value of an argument leaf
    (parameters, optimizer state, counters, RNG keys) leaves in the sharding it came in with
    (``state_mode="tie"``: one decision in the cost graph) or the objective pays the resharding back
    to the argument's layout once per step (``"pay"``).  Which leaves: ``state`` None finds them by
    pytree path, shape and dtype (the whole result or a top-level element of it shaped like a
    positional argument: ``return loss, new_params``); a dict ``{result path: argument path}`` (or
    ``{result path: (argument path, mode)}``) names them (jax key paths such as ``"[1]['w']"`` /
    ``"[0]['w']"``, or flat leaf numbers; ``{}``: no state); ``donate_argnums`` / ``donate_argnames``
    (as ``jax.jit`` takes them; :meth:`AutoShardResult.jit` passes them on) tie every donated leaf
    not tied yet to the first result leaf of its shape and dtype, and mark the tie donated.
    ``pin_operands``: write the operand pins (:mod:`hloshard.strategy.realize`) and carry them into
    ``fn`` as sharding constraints (False: equation outputs only).

    **Memory guard** (``memory_guard``, on by default, with or without ``memory_budget``): a plan must
    not peak above the baseline it is meant to improve on, priced by the same memory model
    (:func:`baseline_peak`, GSPMD propagation in a child process):

    * some argument sharded by the user: what XLA does with only the user's shardings (GSPMD propagation
      from the kept argument shardings, tied state leaving as it came) -- the plan the user had;
    * nothing sharded: the plan's own parameter and output shardings with the intermediates left to XLA
      (GSPMD propagation from them; ``"gspmd_from_plan"``) -- ``jax.jit(fn, in_shardings=...,
      out_shardings=...)`` without hloshard's constraints.  Choosing the intermediates is what the solver
      adds to the parameter layouts, and it must not cost memory against XLA's own choice for the same
      layouts.  (The replicated plan, the baseline before, bounds nothing: any plan that splits a weight
      peaks below it, and the solver, which minimises collective cost only, was free to trade peak for
      bytes: keras-hub ``gemma_small`` peaked at 13.48 MB by XLA against its expert's 12.46.)  Both
      figures are predictions, and the model's peak errs on both sides of XLA's
      (:mod:`hloshard.cost.memory`); a plan whose peak, read at the model's measured worst over-estimate
      (:func:`hloshard.cost.memory.xla_lower_bound`), is not above this baseline is kept, since a
      smaller excess is no evidence that XLA's peak is higher (on keras-hub's 4-layer Gemma, re-solving
      at a predicted excess of 10% raised XLA's peak, 132.8 -> 136.0 MB, and the bytes, 72.9 -> 79.8 MB,
      BENCHMARKS.md "helper peak, round 11").

    When the plan found first peaks above the baseline's predicted peak, the search is repeated with that
    peak as an implicit memory limit in the model's own bytes (it enters the solver as the budget
    :func:`hloshard.cost.memory.budget_for_model_limit` of it, so ``model_limit`` is the baseline's peak
    exactly; with a ``memory_budget`` it is below the budget's limit): the solver then only trades
    collective bytes within the baseline's memory.  If no plan is found under it (the communication
    buffers are outside the solver's node memory), the limit is bisected towards the first plan's peak
    (at most two more solves; ``limit_bytes`` is the one used); if none is found, the first plan is kept
    and a warning says so.  ``report["memory_guard"]``: ``{"baseline": "gspmd" | "gspmd_from_plan" |
    "replicated", "baseline_peak_bytes", "limit_bytes", "plan_peak_bytes" (before the guard), "applied",
    "note"}``; the XLA run costs one child process (none when the baseline is all replicated).

    Raises ValueError naming the problem: a mesh whose device count differs from the function's
    (an argument sharded on another device count), ``fn`` that does not trace with these arguments,
    a bad ``memory_budget`` / ``time_limit`` / ``keep_shardings`` / ``state`` / ``donate_argnums``; a tie whose kept
    shardings differ is dropped with a report warning; :class:`hloshard.errors.SolveFailed` when no
    sharding fits the budget (its message names the liveness point and tensors).
    """
    import jax
    import numpy as np
    from jax.sharding import NamedSharding

    from ..autoshard import solve_module
    from ..autoshard.aliases import Tie
    from ..autoshard.solve import apply_solution
    from ..commands.solve import build_report
    from ..errors import HloshardError, SolveFailed
    from ..hlo import parse_module
    from ..load import SourceInfo
    from ..mesh import DeviceMesh
    from ..peak import peak_tensors_of
    from ..sdy import SdyMesh
    from ..strategy.realize import operand_pins
    from ..units import parse_memory_budget
    from ..xla_compare import predicted_collectives

    if keep_shardings not in ("io", "all", "none"):
        raise ValueError(f"keep_shardings must be 'io', 'all' or 'none', got {keep_shardings!r}")
    if state_mode not in STATE_MODES:
        raise ValueError(f"state_mode must be one of {', '.join(STATE_MODES)}, got {state_mode!r}")
    if not isinstance(mesh, jax.sharding.Mesh):
        raise ValueError(f"mesh must be a jax.sharding.Mesh, got {type(mesh).__name__}")
    if isinstance(time_limit, bool) or not isinstance(time_limit, (int, float, np.integer, np.floating)) \
            or not math.isfinite(time_limit) or time_limit <= 0:
        raise ValueError(f"time_limit must be a positive finite number of seconds, got {time_limit!r}")
    budget = None
    if memory_budget is not None:
        try:
            budget = int(memory_budget) if isinstance(memory_budget, (int, np.integer)) else \
                parse_memory_budget(str(memory_budget))
        except HloshardError as exc:
            raise ValueError(str(exc)) from None
    donated = _donated(fn, len(example_args), donate_argnums, donate_argnames)
    leaves, in_tree = jax.tree_util.tree_flatten(example_args)

    def abstract(leaf):
        shape, dtype = np.shape(leaf), getattr(leaf, "dtype", None) or np.asarray(leaf).dtype
        if _is_sharded(leaf, mesh):
            return jax.ShapeDtypeStruct(shape, dtype, sharding=leaf.sharding)
        return jax.ShapeDtypeStruct(shape, dtype)

    flat_abstract = [abstract(x) for x in leaves]
    abstract_args = jax.tree_util.tree_unflatten(in_tree, flat_abstract)
    name = getattr(fn, "__name__", "fn")
    try:
        closed, out_struct = jax.make_jaxpr(fn, return_shape=True)(*abstract_args)
        lowered = jax.jit(_runner(closed), keep_unused=True).lower(*flat_abstract)
    except Exception as exc:  # noqa: BLE001 - any tracing error is the user's function's
        raise ValueError(f"{name} does not trace with these arguments: {type(exc).__name__}: {exc}") from exc
    out_leaves, out_tree = jax.tree_util.tree_flatten(out_struct)
    state_ties = _state_ties(tuple(abstract_args), out_struct, donated, state, state_mode)
    from jax._src.lib import xla_client as xc

    opts = xc.hlo.HloPrintOptions()
    opts.print_metadata = True
    module = parse_module(lowered.compiler_ir("hlo").get_hlo_module().to_string(opts), f"<{name}>")
    in_paths = [jax.tree_util.keystr(k) for k, _ in jax.tree_util.tree_flatten_with_path(example_args)[0]]
    out_paths = [jax.tree_util.keystr(k) for k, _ in jax.tree_util.tree_flatten_with_path(out_struct)[0]]
    module.source_info = SourceInfo("jax", module.name, in_paths, out_paths)
    tuple_root = module.entry.root.shape.is_tuple
    module.ties = [Tie((j,) if tuple_root else (), q, (), mode, don, source)
                   for j, q, mode, don, source in state_ties]
    # the user's axis names and device order, so reports and constraints speak of "data" / "model"
    dmesh = DeviceMesh.parse(",".join(f"{n}={int(s)}" for n, s in zip(mesh.axis_names, mesh.devices.shape)),
                             device_ids=",".join(str(d.id) for d in mesh.devices.flat))
    sdy_mesh = SdyMesh("mesh", tuple(mesh.axis_names), tuple(int(s) for s in mesh.devices.shape))
    if device is not None:  # ``device``: a profile name / TOML path, as ``--device`` (hloshard.commands.timing)
        from ..commands.options import timed_mesh_from_options
        try:
            dmesh, scale, budget = timed_mesh_from_options(module, ",".join(f"{n}={int(s)}" for n, s in zip(
                mesh.axis_names, mesh.devices.shape)), ",".join(str(d.id) for d in mesh.devices.flat), None, None,
                device, budget)
        except HloshardError as exc:   # e.g. an unknown device: a bad argument, as a bad memory_budget
            raise ValueError(str(exc)) from None
    try:
        result = solve_module(module, dmesh, keep=keep_shardings, memory_budget=budget, time_limit=time_limit,
                              seed=seed, deterministic=deterministic, apply=False)
        guard = None
        if memory_guard:
            result, guard = _memory_guard(result, module, dmesh, keep_shardings, time_limit, seed, deterministic)
        graph = result.graph
        pins = [(p, p.user.operands[p.index]) for p in operand_pins(graph.nodes, result.choice, graph.ctx)] \
            if pin_operands else []
        apply_solution(result, module, dmesh, pin_operands=pin_operands, memory_budget=budget)
    except SolveFailed:
        raise
    except HloshardError as exc:
        raise ValueError(str(exc)) from None
    report = build_report(result, dmesh, keep_shardings, budget)
    if device is not None:
        from ..commands.timing import plan_timing
        report.update(plan_timing(result.written or result, module, scale))
    report["peak_tensors"] = peak_tensors_of(result)
    if guard is not None:
        report["memory_guard"] = guard
        if guard.get("note"):
            report.setdefault("warnings", []).append(guard["note"])
    # the collectives the plan predicts, ring bytes per device (as xla_compare / cost --xla count them)
    priced = result.written if result.written is not None else result
    report["predicted_collective_bytes_per_device"] = round(sum(
        r.total_bytes for rows in predicted_collectives(priced).values() for r in rows))

    params = sorted(module.entry.parameters, key=lambda p: p.parameter_number)
    if len(params) != len(leaves):
        raise ValueError(f"the lowered function has {len(params)} parameters for {len(leaves)} argument leaves")
    in_sh = [NamedSharding(mesh, _spec(p.sharding, len(p.shape.dims), sdy_mesh)) for p in params]
    root = module.entry.root
    if root.shape.is_tuple:
        outs = list(root.sharding.tuple_elements) if root.sharding.is_tuple else [root.sharding] * len(out_leaves)
        shapes = list(root.shape.tuple_shapes)
    else:
        outs, shapes = [root.sharding], [root.shape]
    if len(outs) != len(out_leaves):
        raise ValueError(f"the lowered function has {len(outs)} outputs for {len(out_leaves)} result leaves")
    out_sh = [NamedSharding(mesh, _spec(s, len(shp.dims), sdy_mesh)) for s, shp in zip(outs, shapes)]
    ties = []
    for j, q, mode, don, source in state_ties:
        same = out_sh[j].spec == in_sh[q].spec
        if same:
            out_sh[j] = in_sh[q]    # the very object: the output feeds the next step as it is
        ties.append({"output": out_paths[j], "input": in_paths[q], "mode": mode, "donated": don, "source": source,
                     "same_sharding": bool(same)})
    report["ties"] = {"tied": len(ties), "mismatches": sum(1 for t in ties if t["mode"] == "tie"
                                                           and not t["same_sharding"])}

    eqns = _equations(closed)
    pinned = {}
    for key, instr in _equation_outputs(module, eqns).items():
        if instr.sharding is None:
            continue
        try:
            pinned[key] = NamedSharding(mesh, _spec(instr.sharding, len(instr.shape.dims), sdy_mesh))
        except ValueError:  # a sub-axis sharding: left to XLA's propagation
            continue
    operand_constraints: dict = {}
    pin_rows = []
    for pin, operand in pins:
        at = _pin_operand(pin, operand, eqns)
        sh = None
        if at is not None:
            try:
                sh = NamedSharding(mesh, _spec(pin.sharding, len(operand.shape.dims), sdy_mesh))
            except ValueError:
                at = None
        if at is not None:
            operand_constraints.setdefault(at[0], []).append((at[1], sh))
        pin_rows.append({"instruction": pin.user.name, "operand": operand.name, "sharding": str(pin.sharding),
                         "equation": None if at is None else "_".join(map(str, at[0])),
                         "input": None if at is None else at[1]})
    body_constraints: dict = {}
    for path, rows in (_loop_state_pins(module, eqns) if pin_operands else {}).items():
        for i, sh, rank in rows:
            try:
                body_constraints.setdefault(path, []).append((i, NamedSharding(mesh, _spec(sh, rank, sdy_mesh))))
            except ValueError:
                continue
    report["pins"] = {"operand_pins": len(pin_rows), "carried": sum(1 for r in pin_rows if r["equation"]),
                      "loop_state_pins": int(getattr(result.graph, "loop_pins", 0) or 0),
                      "loop_state_carried": sum(len(v) for v in body_constraints.values())}
    run = _runner(closed, pinned, operand_constraints, body_constraints)

    def constrained(*args):
        return jax.tree_util.tree_unflatten(out_tree, run(*jax.tree_util.tree_leaves(args)))

    constrained.__name__ = f"{name}_hloshard"
    constraints = []
    if with_constraints:
        from ..partition_specs import partition_specs

        constraints = partition_specs(module, dmesh)["intermediates"]
    return AutoShardResult(in_shardings=tuple(jax.tree_util.tree_unflatten(in_tree, in_sh)),
                           out_shardings=jax.tree_util.tree_unflatten(out_tree, out_sh), fn=constrained,
                           constraints=constraints, report=report, module=module, solve_result=result,
                           ties=ties, pins=pin_rows, donate_argnums=donated)
