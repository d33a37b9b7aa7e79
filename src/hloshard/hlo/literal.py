"""Decoding HLO literals (the payload of ``constant(...)`` and custom-call ``literal=``) to numpy.

The parser keeps a constant's literal as its source text (:attr:`Instruction.literal`, printed back
verbatim, so a 50 MB constant costs no decoding at parse time); :func:`parse_literal` decodes it on
request and checks it against the shape as XLA does (hlo_syntax.md §5.19):

* arrays nest one ``{...}`` per dimension with exactly ``dims[i]`` entries at depth ``i``;
  ``{...}`` (elided large constant) gives zeros, like XLA's parser;
* scalars ``42``, ``-1.5e+10``, ``nan``, ``-nan``, ``nan(0x7f)`` (payload dropped), ``inf``, ``-inf``,
  ``true``/``false`` (pred also 0/1), complex ``(re, im)``;
* integers are range-checked for their type (``u64`` also accepts -1), floats are not allowed in
  integer literals;
* tuples ``( lit, lit )`` give a tuple of arrays.

The scanner is iterative, so deeply nested braces cannot overflow the stack.
"""

from __future__ import annotations

import re

import numpy as np

from .shape import COMPLEX_TYPES, FLOAT_TYPES, SIGNED_TYPES, UNSIGNED_TYPES, Shape

_TOKEN_RE = re.compile(r"\s+|/\*.*?\*/|-?nan\(0x[0-9a-fA-F]+\)|\.\.\.|[{}(),]|[^\s{}(),/]+", re.S)
_NUMPY = {"pred": np.bool_, "s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64,
          "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "f16": np.float16,
          "f32": np.float32, "f64": np.float64, "c64": np.complex64, "c128": np.complex128}


class LiteralError(ValueError):
    """A literal that does not fit its shape; ``offset`` is the 0-based position in the text."""

    def __init__(self, message: str, offset: int = 0):
        super().__init__(message)
        self.offset = offset


def numpy_dtype(element_type: str):
    """The numpy dtype used for an HLO element type (float64 for the narrow float types numpy lacks,
    int64 for s1/s2/s4, uint64 for u1/u2/u4)."""
    if element_type in _NUMPY:
        return _NUMPY[element_type]
    if element_type in FLOAT_TYPES:
        return np.float64
    if element_type in SIGNED_TYPES:
        return np.int64
    if element_type in UNSIGNED_TYPES:
        return np.uint64
    raise LiteralError(f"no literal values for element type {element_type}")


def _tokens(text: str):
    for m in _TOKEN_RE.finditer(text):
        t = m.group(0)
        if t[0].isspace() or t.startswith("/*"):
            continue
        yield t, m.start()


def _scalar(tok: str, pos: int, etype: str):
    if etype == "pred":
        if tok in ("true", "1"):
            return True
        if tok in ("false", "0"):
            return False
        raise LiteralError(f"pred literal must be true/false/0/1, got {tok!r}", pos)
    if etype in FLOAT_TYPES or etype in COMPLEX_TYPES:
        t = tok
        if "nan(" in t:
            t = t[: t.index("(")]
        try:
            return float(t)
        except ValueError:
            raise LiteralError(f"expected a number, got {tok!r}", pos) from None
    try:
        v = int(tok)
    except ValueError:
        raise LiteralError(f"expected an integer for {etype}, got {tok!r}", pos) from None
    bits = int(etype[1:])
    if etype in SIGNED_TYPES:
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    else:
        lo, hi = (-1 if etype == "u64" else 0), (1 << bits) - 1
    if not lo <= v <= hi:
        raise LiteralError(f"{v} is out of range for {etype}", pos)
    if v < 0 and etype in UNSIGNED_TYPES:
        v &= (1 << bits) - 1
    return v


def _array(toks: list, i: int, shape: Shape):
    """Decode one array literal starting at token index ``i``; returns (ndarray, next index)."""
    etype = shape.element_type
    dims = shape.dims
    rank = len(dims)
    cplx = etype in COMPLEX_TYPES
    values: list = []

    def read_scalar(i):
        tok, pos = toks[i]
        if cplx:
            if tok != "(":
                raise LiteralError("complex values are written (re, im)", pos)
            if i + 4 >= len(toks) + 1 or toks[i + 2][0] != "," or toks[i + 4][0] != ")":
                raise LiteralError("complex values are written (re, im)", pos)
            re_ = _scalar(toks[i + 1][0], toks[i + 1][1], etype)
            im = _scalar(toks[i + 3][0], toks[i + 3][1], etype)
            return complex(re_, im), i + 5
        if tok in "{}(),":
            raise LiteralError(f"expected a value, got {tok!r}", pos)
        return _scalar(tok, pos, etype), i + 1

    if rank == 0:
        if i >= len(toks):
            raise LiteralError("missing literal value", 0)
        v, i = read_scalar(i)
        return np.array(v, dtype=numpy_dtype(etype)), i
    if i >= len(toks) or toks[i][0] != "{":
        raise LiteralError(f"expected '{{' to start a rank-{rank} literal", toks[i][1] if i < len(toks) else 0)
    if i + 2 < len(toks) + 0 and toks[i + 1][0] == "..." and i + 2 < len(toks) and toks[i + 2][0] == "}":
        return np.zeros(dims, dtype=numpy_dtype(etype)), i + 3
    counts = [0]          # entries seen at each open depth
    i += 1
    depth = 1
    while depth:
        if i >= len(toks):
            raise LiteralError("unterminated literal", toks[-1][1] if toks else 0)
        tok, pos = toks[i]
        if tok == "{":
            if depth >= rank:
                raise LiteralError(f"literal nested deeper than the rank {rank}", pos)
            counts[-1] += 1
            counts.append(0)
            depth += 1
            i += 1
        elif tok == "}":
            n = counts.pop()
            expect = dims[depth - 1]
            if n != expect and not (n == 0 and expect == 0):
                raise LiteralError(f"expected {expect} elements at depth {depth - 1}, found {n}", pos)
            depth -= 1
            i += 1
        elif tok == ",":
            i += 1
        else:
            if depth != rank:
                raise LiteralError(f"expected a nested array at depth {depth} for rank {rank}", pos)
            v, i = read_scalar(i)
            values.append(v)
            counts[-1] += 1
    # an empty dimension may skip inner braces entirely ({} for f32[0,3])
    arr = np.array(values, dtype=numpy_dtype(etype))
    if arr.size != int(np.prod(dims)):
        raise LiteralError(f"literal has {arr.size} values, shape {shape} needs {int(np.prod(dims))}", 0)
    return arr.reshape(dims), i


def parse_literal(text: str, shape: Shape):
    """Decode literal ``text`` of ``shape``: an ndarray for arrays (scalars are 0-d), a tuple for
    tuple shapes. Raises :class:`LiteralError` when the text does not fit the shape."""
    toks = list(_tokens(text))
    value, i = _value(toks, 0, shape)
    if i != len(toks):
        raise LiteralError("unexpected text after the literal", toks[i][1])
    return value


def _value(toks, i, shape: Shape):
    if shape.is_tuple:
        if i >= len(toks) or toks[i][0] != "(":
            raise LiteralError("a tuple literal starts with '('", toks[i][1] if i < len(toks) else 0)
        i += 1
        out = []
        for k, sub in enumerate(shape.tuple_shapes):
            if k:
                if i >= len(toks) or toks[i][0] != ",":
                    raise LiteralError("expected ',' between tuple elements", toks[i][1] if i < len(toks) else 0)
                i += 1
            v, i = _value(toks, i, sub)
            out.append(v)
        if i >= len(toks) or toks[i][0] != ")":
            raise LiteralError("expected ')' closing the tuple literal", toks[i][1] if i < len(toks) else 0)
        return tuple(out), i + 1
    if shape.element_type in ("token", "opaque"):
        raise LiteralError(f"{shape.element_type} has no literal")
    return _array(toks, i, shape)
