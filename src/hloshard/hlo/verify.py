"""Cheap semantic checks of a parsed module, run by ``solve`` and ``cost`` before the strategy engine.

The parser accepts any well-formed text; the strategy engine then trusts shapes and dimension numbers
(it indexes ``dims[d]`` for every contracting / broadcast / transpose dimension).  A module XLA's
``HloVerifier`` would reject must fail here with one message naming the instruction, not with a
traceback deep in the engine, and must never be written back as if fine.  The checks follow the shape
rules of XLA's ``ShapeInference`` / ``ShapeVerifier`` (``shared/reference/hlo_syntax.md`` §7), restated:

* every array shape holds at most ``2**62`` bytes (sizes are int64 everywhere downstream);
* elementwise unary ops: one operand with the result's dimensions; elementwise binary ops: two
  operands, both with the result's dimensions (HLO has no implicit broadcasting, scalars included);
* ``select(pred, on_true, on_false)``: ``on_true`` / ``on_false`` with the result's dimensions,
  ``pred`` too or a scalar (XLA still compiles a scalar predicate);
  ``clamp(min, operand, max)``: ``operand`` with the result's dimensions, ``min`` / ``max`` either
  that too or scalars;
* ``dot``: contracting and batch dimension numbers in range, distinct, as many on each side, equal
  sizes pairwise; result rank = batch + lhs free + rhs free;
* ``transpose``: ``dimensions`` a permutation of ``0..rank-1`` and ``result[i] == operand[perm[i]]``;
* ``broadcast``: one entry of ``dimensions`` per operand dimension, distinct, in ``[0, result rank)``,
  and ``operand[i] == result[dimensions[i]]``;
* ``slice``: one ``[start:limit:stride]`` per dimension, ``0 <= start <= limit <= dim``,
  ``stride >= 1`` and ``result[i] == ceil((limit - start) / stride)``;
* ``reshape``: equal element counts (static shapes);
* ``concatenate``: one dimension, in range; operands equal to the result elsewhere, sizes summing to it;
* ``reduce`` (array result): ``dimensions`` in range and distinct; result = the other dimensions;
* ``reverse`` / ``iota``: ``dimensions`` / ``iota_dimension`` in range (reverse keeps the shape);
* ``pad``: one (lo, hi, interior >= 0) per dimension; result = ``lo + hi + d + interior * (d - 1)``;
* ``dynamic-slice``: ``dynamic_slice_sizes`` one per dimension, within the operand, equal to the result;
* ``get-tuple-element``: ``index`` within the tuple, result = that element; ``call``: one operand per
  parameter of the called computation; ``sort``: ``dimensions`` in range;
* parameter numbers of each computation are ``0..n-1``, each once;
* ``broadcast``: a size-1 operand dimension may expand (XLA compiles it, as ``broadcast_in_dim``);
  the element type is kept;
* ``reduce``: scalar init values; each result (a tuple for a variadic reduce) is its input without
  the reduced dimensions, of the input's type;
* async pairs: a ``-done`` returns the shape its start promised (``async-done`` / ``all-gather-done``
  / ``collective-permute-done``: element 1 of the start's shape, ``copy-done`` element 0,
  ``all-reduce-done`` / ``async-update`` all of it);
* ``xla.sdy.sharding`` names only meshes the header's ``xla.sdy.meshes`` defines (XLA aborts otherwise);
* collectives: :mod:`hloshard.hlo.collective_checks` (operand count, dimensions, result shapes,
  replica groups incl. XLA's coverage rule, reduction types) with the header's counts.

Each rule was checked against jaxlib 0.10.2 (compile for 8 partitions) in tests/test_verify_xla_parity.py.
"""

from __future__ import annotations

import math
import re

from ..errors import InputError
from .attributes import AttrError, parse_dim_labels
from .collective_checks import COLLECTIVE_OPCODES, collective_problems
from .opcodes import ELEMENTWISE_BINARY, ELEMENTWISE_UNARY, async_wrapped_opcode

__all__ = ["verify_module", "verify_problems", "MAX_ARRAY_BYTES"]

#: Largest array (bytes) accepted: byte counts and costs are int64 downstream.
MAX_ARRAY_BYTES = 2 ** 62


class _Bad(Exception):
    pass


def _array(shape) -> bool:
    return not shape.is_tuple and not shape.is_token and shape.element_type != "opaque"


def _dims(instr) -> tuple[int, ...]:
    return tuple(instr.shape.dims)


def _need_operands(instr, n: int) -> None:
    if len(instr.operands) != n:
        raise _Bad(f"expects {n} operand{'s' if n != 1 else ''}, has {len(instr.operands)}")


def _same_dims(instr, k: int, what: str) -> None:
    op = instr.operands[k]
    if _array(op.shape) and tuple(op.shape.dims) != _dims(instr):
        raise _Bad(f"{what} {op.name} has shape {op.shape} but the result has dimensions {list(_dims(instr))} "
                   f"(HLO does not broadcast implicitly)")


def _int_list(value, what: str) -> list[int]:
    if value is None:
        return []
    try:
        return [int(v) for v in value]
    except (TypeError, ValueError):
        raise _Bad(f"{what} must be a list of integers, got {value!r}") from None


def _check_dims_in_range(dims: list[int], rank: int, what: str) -> None:
    for d in dims:
        if not 0 <= d < rank:
            raise _Bad(f"{what} names dimension {d}, outside [0, {rank})")
    if len(set(dims)) != len(dims):
        raise _Bad(f"{what} {dims} repeats a dimension")


def _check_dot(instr) -> None:
    _need_operands(instr, 2)
    lhs, rhs = instr.operands
    if not (_array(lhs.shape) and _array(rhs.shape)):
        return
    ld, rd = tuple(lhs.shape.dims), tuple(rhs.shape.dims)
    lc = _int_list(instr.attr("lhs_contracting_dims"), "lhs_contracting_dims")
    rc = _int_list(instr.attr("rhs_contracting_dims"), "rhs_contracting_dims")
    lb = _int_list(instr.attr("lhs_batch_dims"), "lhs_batch_dims")
    rb = _int_list(instr.attr("rhs_batch_dims"), "rhs_batch_dims")
    _check_dims_in_range(lc + lb, len(ld), "lhs_contracting_dims + lhs_batch_dims")
    _check_dims_in_range(rc + rb, len(rd), "rhs_contracting_dims + rhs_batch_dims")
    if len(lc) != len(rc):
        raise _Bad(f"lhs_contracting_dims {lc} and rhs_contracting_dims {rc} differ in length")
    if len(lb) != len(rb):
        raise _Bad(f"lhs_batch_dims {lb} and rhs_batch_dims {rb} differ in length")
    for what, ls, rs in (("contracting", lc, rc), ("batch", lb, rb)):
        for a, b in zip(ls, rs):
            if ld[a] != rd[b]:
                raise _Bad(f"{what} dimension lhs[{a}] = {ld[a]} differs from rhs[{b}] = {rd[b]}")
    rank = len(lb) + (len(ld) - len(lc) - len(lb)) + (len(rd) - len(rc) - len(rb))
    if _array(instr.shape) and len(_dims(instr)) != rank:
        raise _Bad(f"result rank {len(_dims(instr))} should be {rank} (batch + lhs free + rhs free dimensions)")
    # XLA's dot shape: the batch dims, then lhs's free dims, then rhs's, each in operand order
    want = ([ld[a] for a in lb] + [ld[i] for i in range(len(ld)) if i not in lc and i not in lb]
            + [rd[i] for i in range(len(rd)) if i not in rc and i not in rb])
    if _array(instr.shape) and list(_dims(instr)) != want:
        raise _Bad(f"result dimensions {list(_dims(instr))} should be {want} (batch + lhs free + rhs free "
                   f"dimensions of operands {list(ld)} and {list(rd)})")


def _check_transpose(instr) -> None:
    _need_operands(instr, 1)
    op = instr.operands[0]
    if not _array(op.shape):
        return
    perm = _int_list(instr.attr("dimensions"), "dimensions")
    od = tuple(op.shape.dims)
    if sorted(perm) != list(range(len(od))):
        raise _Bad(f"dimensions={{{','.join(map(str, perm))}}} is not a permutation of the operand's "
                   f"{len(od)} dimensions")
    want = tuple(od[p] for p in perm)
    if _dims(instr) != want:
        raise _Bad(f"result dimensions {list(_dims(instr))} should be {list(want)} for operand {op.shape}")


def _check_broadcast(instr) -> None:
    _need_operands(instr, 1)
    op = instr.operands[0]
    if not _array(op.shape):
        return
    bd = _int_list(instr.attr("dimensions"), "dimensions")
    od, rd = tuple(op.shape.dims), _dims(instr)
    if len(bd) != len(od):
        raise _Bad(f"dimensions={{{','.join(map(str, bd))}}} has {len(bd)} entries but the operand has rank "
                   f"{len(od)}")
    _check_dims_in_range(bd, len(rd), "dimensions")
    for i, d in enumerate(bd):
        if od[i] != rd[d] and od[i] != 1:   # a size-1 dimension expands (XLA compiles it: broadcast_in_dim)
            raise _Bad(f"size of operand dimension {i} ({od[i]}) is not equal to 1 or size of result dimension "
                       f"{d} ({rd[d]})")
    if _array(instr.shape) and op.shape.element_type != instr.shape.element_type:
        raise _Bad(f"operand {op.name} is {op.shape.element_type} but the result is {instr.shape.element_type} "
                   "(broadcast keeps the element type)")


def _check_slice(instr) -> None:
    _need_operands(instr, 1)
    op = instr.operands[0]
    spec = instr.attr("slice")
    if not _array(op.shape) or spec is None or not hasattr(spec, "ranges"):
        return
    od, rd = tuple(op.shape.dims), _dims(instr)
    if len(spec.ranges) != len(od):
        raise _Bad(f"slice has {len(spec.ranges)} ranges but the operand has rank {len(od)}")
    want = []
    for i, (start, limit, stride) in enumerate(spec.ranges):
        if stride < 1:
            raise _Bad(f"slice dimension {i}: stride {stride} must be positive")
        if not 0 <= start <= limit <= od[i]:
            raise _Bad(f"slice dimension {i}: [{start}:{limit}] is not within the operand's size {od[i]}")
        want.append(-(-(limit - start) // stride))
    if list(rd) != want:
        raise _Bad(f"result dimensions {list(rd)} should be {want} for this slice")


def _check_reshape(instr) -> None:
    _need_operands(instr, 1)
    op = instr.operands[0]
    if not (_array(op.shape) and _array(instr.shape)) or any(op.shape.dynamic) or any(instr.shape.dynamic):
        return
    if op.shape.num_elements != instr.shape.num_elements:
        raise _Bad(f"operand {op.name} {op.shape} has {op.shape.num_elements:,} elements but the result has "
                   f"{instr.shape.num_elements:,}")


def _check_concatenate(instr) -> None:
    ops = instr.operands
    if not ops or not all(_array(o.shape) for o in ops) or not _array(instr.shape):
        return
    cd = _int_list(instr.attr("dimensions"), "dimensions")
    rd = _dims(instr)
    if len(cd) != 1:
        raise _Bad(f"dimensions must name one dimension, got {cd}")
    d = cd[0]
    _check_dims_in_range(cd, len(rd), "dimensions")
    total = 0
    for o in ops:
        od = tuple(o.shape.dims)
        if len(od) != len(rd) or any(od[i] != rd[i] for i in range(len(rd)) if i != d):
            raise _Bad(f"operand {o.name} {o.shape} does not match the result {instr.shape} outside "
                       f"dimension {d}")
        total += od[d]
    if total != rd[d]:
        raise _Bad(f"result dimension {d} is {rd[d]} but the operands' sizes there sum to {total}")


def _check_reduce(instr) -> None:
    """``reduce(inputs..., inits...)``: scalar init values (XLA: the reduction region's result type
    must match each init value); each result (a tuple for several inputs) is its input with the
    ``dimensions`` removed, of the input's element type."""
    ops = instr.operands
    if len(ops) < 2 or len(ops) % 2:
        return
    n = len(ops) // 2
    for k, init in enumerate(ops[n:]):
        if _array(init.shape) and init.shape.dims:
            raise _Bad(f"init value {init.name} has shape {init.shape}; the reduction computation returns scalars, "
                       f"so init values must be scalars (XLA: the shape of reduction-region's result type at "
                       f"index {k} differs from the op's corresponding init-value type)")
    src = ops[0]
    if not _array(src.shape):
        return
    rd = _int_list(instr.attr("dimensions"), "dimensions")
    sd = tuple(src.shape.dims)
    _check_dims_in_range(rd, len(sd), "dimensions")
    want = [sd[i] for i in range(len(sd)) if i not in set(rd)]
    results = list(instr.shape.tuple_shapes) if instr.shape.is_tuple else [instr.shape]
    if len(results) != n:
        raise _Bad(f"a reduce of {n} input{'s' if n != 1 else ''} returns {n} value{'s' if n != 1 else ''}, "
                   f"the result {instr.shape} has {len(results)}")
    for k, (res, inp) in enumerate(zip(results, ops[:n])):
        if not (_array(res) and _array(inp.shape)):
            continue
        if list(res.dims) != want or res.element_type != inp.shape.element_type:
            which = "result dimensions" if n == 1 else f"result {k}"
            raise _Bad(f"{which} {res} should be {inp.shape.element_type}{want} after reducing {rd} of "
                       f"{inp.shape}")


def _check_dims_attr(instr, key: str = "dimensions") -> None:
    """``reverse`` dimensions / ``iota`` iota_dimension: in range of the (operand's) rank."""
    if not _array(instr.shape):
        return
    value = instr.attr(key)
    dims = _int_list([value] if isinstance(value, int) else value, key)
    _check_dims_in_range(dims, len(_dims(instr)), key)
    if instr.opcode == "reverse" and instr.operands and tuple(instr.operands[0].shape.dims) != _dims(instr):
        raise _Bad(f"operand {instr.operands[0].shape} and result {instr.shape} differ")


def _check_pad(instr) -> None:
    cfg = instr.attr("padding")
    if len(instr.operands) == 2 and _array(instr.operands[1].shape) and instr.operands[1].shape.dims:
        raise _Bad(f"padding value {instr.operands[1].name} has shape {instr.operands[1].shape}; it must be a scalar")
    if len(instr.operands) != 2 or cfg is None or not hasattr(cfg, "dims") or not _array(instr.operands[0].shape):
        return
    od = tuple(instr.operands[0].shape.dims)
    if len(cfg.dims) != len(od):
        raise _Bad(f"padding has {len(cfg.dims)} entries but the operand has rank {len(od)}")
    want = []
    for i, (lo, hi, interior) in enumerate(cfg.dims):
        if interior < 0:
            raise _Bad(f"padding dimension {i}: negative interior padding {interior}")
        want.append(lo + hi + od[i] + interior * max(od[i] - 1, 0))
    if list(_dims(instr)) != want:
        raise _Bad(f"result dimensions {list(_dims(instr))} should be {want} for this padding")


def _check_dynamic_slice(instr) -> None:
    if not instr.operands or not _array(instr.operands[0].shape):
        return
    sizes = _int_list(instr.attr("dynamic_slice_sizes"), "dynamic_slice_sizes")
    od = tuple(instr.operands[0].shape.dims)
    if len(sizes) != len(od):
        raise _Bad(f"dynamic_slice_sizes has {len(sizes)} entries but the operand has rank {len(od)}")
    for i, (n, d) in enumerate(zip(sizes, od)):
        if not 0 <= n <= d:
            raise _Bad(f"dynamic_slice_sizes[{i}] = {n} is not within the operand's size {d}")
    if list(_dims(instr)) != sizes:
        raise _Bad(f"result dimensions {list(_dims(instr))} should be dynamic_slice_sizes {sizes}")


def _check_get_tuple_element(instr) -> None:
    if len(instr.operands) != 1 or not instr.operands[0].shape.is_tuple:
        return
    elems = instr.operands[0].shape.tuple_shapes
    idx = instr.attr("index")
    try:
        k = int(str(idx))
    except (TypeError, ValueError):
        raise _Bad(f"index must be an integer, got {idx!r}") from None
    if not 0 <= k < len(elems):
        raise _Bad(f"index={k} but the operand tuple has {len(elems)} elements")
    e = elems[k]
    if e.is_tuple != instr.shape.is_tuple or (not e.is_tuple and tuple(e.dims) != _dims(instr)):
        raise _Bad(f"result {instr.shape} differs from tuple element {k}, {e}")


def _check_call(instr) -> None:
    comps = instr.called_computations
    if len(comps) != 1:
        return
    n = len(comps[0].parameters)
    if len(instr.operands) != n:
        raise _Bad(f"passes {len(instr.operands)} operands to {comps[0].name}, which has {n} parameters")


#: One-operand ops beyond ELEMENTWISE_UNARY: ``convert`` / ``reduce-precision`` keep the dimensions,
#: ``bitcast-convert`` may add or drop a minor dimension when bit widths differ (operand count only).
_UNARY_SAME_DIMS = frozenset({"convert", "reduce-precision"})
_UNARY_ANY_DIMS = frozenset({"bitcast-convert"})


def _is_scalar(shape) -> bool:
    return _array(shape) and len(shape.dims) == 0


def _check_reduce_computation(instr) -> None:
    """``reduce`` with N inputs + N init values: ``to_apply`` takes 2*N scalar parameters."""
    comps = instr.called_computations
    if len(comps) != 1 or len(instr.operands) % 2:
        return
    n = len(instr.operands) // 2
    params = comps[0].parameters
    if len(params) != 2 * n:
        raise _Bad(f"to_apply={comps[0].name} has {len(params)} parameters but a reduce of {n} input"
                   f"{'s' if n != 1 else ''} needs {2 * n}")
    for prm in params:
        if not _is_scalar(prm.shape):
            raise _Bad(f"to_apply={comps[0].name} parameter {prm.name} has shape {prm.shape}; "
                       f"reduction parameters must be scalars (XLA: Reduction function must return a "
                       f"scalar or tuple of scalars)")


def _same_shape(a, b) -> bool:
    if a.is_tuple or b.is_tuple:
        return (a.is_tuple and b.is_tuple and len(a.tuple_shapes) == len(b.tuple_shapes)
                and all(_same_shape(x, y) for x, y in zip(a.tuple_shapes, b.tuple_shapes)))
    if not (_array(a) and _array(b)):
        return True
    return tuple(a.dims) == tuple(b.dims) and a.element_type == b.element_type


def _check_while(instr) -> None:
    """``while``: condition / body parameter and body root have the loop operand's shape."""
    if len(instr.operands) != 1:
        raise _Bad(f"expects 1 operand, has {len(instr.operands)}")
    shape = instr.operands[0].shape
    for key in ("condition", "body"):
        comp = _called(instr, key)
        if comp is None:
            continue
        if len(comp.parameters) != 1:
            raise _Bad(f"{key}={comp.name} has {len(comp.parameters)} parameters; a while {key} takes 1")
        if not _same_shape(comp.parameters[0].shape, shape):
            raise _Bad(f"{key}={comp.name} parameter has shape {comp.parameters[0].shape} but the loop "
                       f"operand has {shape}")
        if key == "body" and comp.root is not None and not _same_shape(comp.root.shape, shape):
            raise _Bad(f"body={comp.name} returns {comp.root.shape} but the loop operand has {shape}")


def _called(instr, key):
    ref = instr.attr(key)
    if ref is None:
        return None
    if hasattr(ref, "parameters"):
        return ref
    name = str(ref).lstrip("%")
    for c in instr.called_computations:
        if c.name == name:
            return c
    return None


def _check_tuple(instr) -> None:
    """``tuple``: declared element shapes equal the operands' shapes."""
    if not instr.shape.is_tuple:
        return
    elems = instr.shape.tuple_shapes
    if len(elems) != len(instr.operands):
        raise _Bad(f"declares {len(elems)} elements but has {len(instr.operands)} operands")
    for k, (e, o) in enumerate(zip(elems, instr.operands)):
        if not _same_shape(e, o.shape):
            raise _Bad(f"element {k} is declared {e} but operand {o.name} has shape {o.shape}")


def _check_convolution(instr) -> None:
    """``convolution``: input feature size == kernel input-feature size * feature_group_count."""
    labels = instr.attr("dim_labels")
    if labels is None or len(instr.operands) != 2:
        return
    lhs, rhs = (o.shape for o in instr.operands)
    if not (_array(lhs) and _array(rhs)):
        return
    try:
        dl = parse_dim_labels(str(labels))
    except AttrError as exc:
        raise _Bad(str(exc)) from None
    if max(dl.input_feature, dl.input_batch) >= len(lhs.dims) or \
            max(dl.kernel_input_feature, dl.kernel_output_feature) >= len(rhs.dims):
        raise _Bad(f"dim_labels={labels} does not fit operand ranks {len(lhs.dims)} and {len(rhs.dims)}")
    g = instr.attr("feature_group_count")
    try:
        g = int(str(g)) if g is not None else 1
    except ValueError:
        raise _Bad(f"feature_group_count must be an integer, got {g!r}") from None
    fin, kin = lhs.dims[dl.input_feature], rhs.dims[dl.kernel_input_feature]
    if g < 1 or fin != kin * g:
        raise _Bad(f"input feature size {fin} != kernel input-feature size {kin} x feature_group_count {g}")
    want = _convolution_result_dims(instr, lhs, rhs, dl)
    if want is not None and _array(instr.shape) and tuple(instr.shape.dims) != want:
        raise _Bad(f"dim_labels={labels} and the window give the result dimensions [{', '.join(map(str, want))}], "
                   f"but the result is declared {instr.shape}")


def _convolution_result_dims(instr, lhs, rhs, dl) -> tuple[int, ...] | None:
    """The result dimensions XLA's shape inference gives a convolution (``ShapeInference::
    InferConvolveShape``): batch = input batch / ``batch_group_count``, feature = the kernel's output
    feature, each spatial dim the window's output size over the dilated, padded input
    (``(padded - dilated window) / stride + 1``, 0 when the window does not fit).  None when the
    operands' ranks, the window or ``batch_group_count`` do not allow it (other checks say why)."""
    if len(lhs.dims) != len(rhs.dims) or dl.output_batch >= len(lhs.dims) or dl.output_feature >= len(lhs.dims) or \
            any(i >= len(lhs.dims) for i in dl.output_spatial + dl.input_spatial):
        return None
    try:
        bgc = int(str(instr.attr("batch_group_count") or 1))
    except ValueError:
        return None
    window = instr.attr("window")
    wdims = tuple(getattr(window, "dims", ()) or ())
    if bgc < 1 or lhs.dims[dl.input_batch] % bgc or len(wdims) != len(dl.input_spatial):
        return None
    out = [0] * len(lhs.dims)
    out[dl.output_batch] = lhs.dims[dl.input_batch] // bgc
    out[dl.output_feature] = rhs.dims[dl.kernel_output_feature]
    for k, w in enumerate(wdims):
        n = lhs.dims[dl.input_spatial[k]]
        padded = ((n - 1) * w.lhs_dilation + 1 if n else 0) + w.padding_low + w.padding_high
        span = (w.size - 1) * w.rhs_dilation + 1
        if w.stride < 1:
            return None
        out[dl.output_spatial[k]] = 0 if padded < span else (padded - span) // w.stride + 1
    return tuple(out)


#: -done / -update of an async pair: which part of the start's shape it returns (None: all of it),
#: as XLA's verifier requires ("The async-done expects the shape of output to match the async shape
#: at index {1}")
_ASYNC_RESULT_INDEX = {"async-done": 1, "async-update": None, "all-gather-done": 1, "collective-permute-done": 1,
                       "all-reduce-done": None, "copy-done": 0}


def _check_async_result(instr) -> None:
    op = instr.opcode
    if op in _ASYNC_RESULT_INDEX:
        index = _ASYNC_RESULT_INDEX[op]
    elif async_wrapped_opcode(op) is not None and op.endswith(("-done", "-update")):
        index = 1 if op.endswith("-done") else None
    else:
        return
    if len(instr.operands) != 1:
        return
    start = instr.operands[0].shape
    if index is None:
        want = start
    elif start.is_tuple and len(start.tuple_shapes) > index:
        want = start.tuple_shapes[index]
    else:
        return
    if not _same_shape(instr.shape, want):
        where = f" at index {{{index}}}" if index is not None else ""
        raise _Bad(f"The {op} expects the shape of output to match the async shape{where} "
                   f"({instr.shape} vs {want}) of {instr.operands[0].name}")


_SDY_REF_RE = re.compile(r"@([A-Za-z_][A-Za-z0-9_.\-]*)")
_SDY_MESH_DEF_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_.\-]*)\s*=\s*#sdy\.mesh")


def _sdy_meshes(module) -> set[str] | None:
    """Mesh names the header's ``xla.sdy.meshes`` defines (None when the module has no such attribute)."""
    text = str(module.attrs.get("frontend_attributes") or "")
    if "xla.sdy.meshes" not in text:
        return None
    return set(_SDY_MESH_DEF_RE.findall(text))


def _check_sdy_sharding(instr, meshes: set[str] | None) -> None:
    """``xla.sdy.sharding`` may name only meshes of the header's ``xla.sdy.meshes`` (XLA's Shardy
    import crashes on an undefined one; inline ``mesh<...>`` shardings name none)."""
    fa = instr.attrs.get("frontend_attributes")
    if not fa or "xla.sdy.sharding" not in fa:
        return
    for name in _SDY_REF_RE.findall(str(fa["xla.sdy.sharding"])):
        if meshes is None or name not in meshes:
            defined = ", ".join(sorted(meshes)) if meshes else "none: the header has no xla.sdy.meshes"
            raise _Bad(f"xla.sdy.sharding refers to mesh @{name}, which the module's xla.sdy.meshes does not "
                       f"define (defined: {defined}); XLA aborts on it")


def _check_instruction(instr) -> None:
    op = instr.opcode
    _check_async_result(instr)
    if op in ELEMENTWISE_UNARY:
        _need_operands(instr, 1)
        _same_dims(instr, 0, "operand")
    elif op in _UNARY_SAME_DIMS:
        _need_operands(instr, 1)
        _same_dims(instr, 0, "operand")
    elif op in _UNARY_ANY_DIMS:
        _need_operands(instr, 1)
    elif op in ELEMENTWISE_BINARY or op == "compare":
        _need_operands(instr, 2)
        if op == "compare" and instr.attr("direction") is None:
            raise _Bad("compare needs direction= (EQ, NE, LT, LE, GT or GE)")
        _same_dims(instr, 0, "operand 0")
        _same_dims(instr, 1, "operand 1")
    elif op == "select":
        _need_operands(instr, 3)
        if instr.operands[0].shape.dims:
            _same_dims(instr, 0, "predicate (neither a scalar nor the result's shape)")
        _same_dims(instr, 1, "on_true")
        _same_dims(instr, 2, "on_false")
    elif op == "clamp":
        _need_operands(instr, 3)
        _same_dims(instr, 1, "operand")
        for k, what in ((0, "min"), (2, "max")):
            if instr.operands[k].shape.dims:
                _same_dims(instr, k, what + " (neither a scalar nor the operand's shape)")
    elif op == "dot":
        _check_dot(instr)
    elif op == "transpose":
        _check_transpose(instr)
    elif op == "broadcast":
        _check_broadcast(instr)
    elif op == "slice":
        _check_slice(instr)
    elif op == "reshape":
        _check_reshape(instr)
    elif op == "concatenate":
        _check_concatenate(instr)
    elif op == "reduce":
        _check_reduce(instr)
        _check_reduce_computation(instr)
    elif op == "while":
        _check_while(instr)
    elif op == "tuple":
        _check_tuple(instr)
    elif op == "convolution":
        _check_convolution(instr)
    elif op == "reverse":
        _check_dims_attr(instr)
    elif op == "iota":
        _check_dims_attr(instr, "iota_dimension")
    elif op == "pad":
        _check_pad(instr)
    elif op == "dynamic-slice":
        _check_dynamic_slice(instr)
    elif op == "get-tuple-element":
        _check_get_tuple_element(instr)
    elif op == "call":
        _check_call(instr)
    elif op == "sort" and instr.operands and _array(instr.operands[0].shape):
        _check_dims_in_range(_int_list(instr.attr("dimensions"), "dimensions"), len(instr.operands[0].shape.dims),
                             "dimensions")


def _check_size(instr) -> None:
    shape = instr.shape
    for leaf in (shape.leaves() if shape.is_tuple else (shape,)):
        # elements are at most 16 bytes (c128), so a small element count needs no byte count
        if math.prod(leaf.dims) > MAX_ARRAY_BYTES // 16 and _array(leaf) and leaf.byte_size > MAX_ARRAY_BYTES:
            raise _Bad(f"shape {leaf} holds {leaf.byte_size:,} bytes; at most 2**62 are supported")


def verify_problems(module, num_partitions: int | None = None):
    """Every problem of ``module``, in text order: ``(instruction, code, message)`` where ``message``
    is ``instruction NAME (opcode) in computation C: what is wrong`` and ``code`` is
    ``"HS002"``, or for a collective the lint code of the rule that reports it
    (:mod:`hloshard.hlo.collective_checks`: HS301-HS305). Parameter-numbering problems name the
    parameter. This is the one verifier: :func:`verify_module` raises its first problem and lint's
    HS002 rule reports the HS002 ones. ``num_partitions``: the partition count when the header does
    not state one (``solve`` / ``cost`` know it from ``--mesh``); the header wins."""
    meshes = _sdy_meshes(module)
    parts, reps = module.num_partitions or num_partitions, module.num_replicas
    for comp in module.computations:
        seen: dict[int, object] = {}
        for instr in comp.instructions:
            where = f"instruction {instr.name} ({instr.opcode}) in computation {comp.name}"
            try:
                _check_size(instr)
                if "frontend_attributes" in instr.attrs:
                    _check_sdy_sharding(instr, meshes)
                if instr.opcode == "parameter":
                    pn = instr.parameter_number
                    if pn is not None:
                        if pn in seen:
                            raise _Bad(f"parameter number {pn} is already used by {seen[pn].name}")
                        seen[pn] = instr
                else:
                    _check_instruction(instr)
            except _Bad as exc:
                yield instr, "HS002", f"{where}: {exc}"
                continue
            if instr.opcode in COLLECTIVE_OPCODES:
                for p in collective_problems(instr, parts, reps):
                    yield instr, p.code, f"{where}: {p.message}"
        missing = sorted(set(range(len(seen))) - set(seen))
        if missing:
            last = max(seen)
            instr = seen[last]
            yield instr, "HS002", (f"computation {comp.name} has parameter({last}) but no "
                                   f"parameter({missing[0]}): parameter numbers must be 0..n-1 without gaps")


def verify_module(module, filename: str = "<input>", num_partitions: int | None = None) -> None:
    """Check ``module`` against the rules above; return None when it passes.

    Raises :class:`hloshard.errors.InputError` for the first problem :func:`verify_problems` finds
    (in text order), as ``file:line:col: instruction NAME (opcode): what is wrong``. Cost: one pass
    over the instructions, a few tuple comparisons each."""
    for instr, _, message in verify_problems(module, num_partitions):
        raise InputError(f"{filename}:{instr.line}:{instr.column}: {message}")
