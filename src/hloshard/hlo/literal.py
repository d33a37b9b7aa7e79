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

import functools
import math
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
        if tok == "true":
            return True
        if tok == "false":
            return False
        try:
            return int(tok) != 0   # XLA takes any integer for pred (nonzero is true)
        except ValueError:
            raise LiteralError(f"pred literal must be true, false or an integer, got {tok!r}", pos) from None
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
    lo, hi = _int_range(etype)
    if not lo <= v <= hi:
        raise LiteralError(f"{v} is out of range for {etype}", pos)
    if v < 0 and etype in UNSIGNED_TYPES:
        v &= (1 << bits) - 1
    if etype == "s64" and v > (1 << 63) - 1:
        v -= 1 << 64   # XLA's lexer reads it as uint64 and stores the bits
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


# ---------------------------------------------------------------------------------------------
# value ranges, checked at parse time (XLA's parser rejects these; hlo_parser "out of range")
#: float types: (largest finite value, explicit mantissa bits, what overflow gives, tie rounds up).
#: A finite literal is out of range when rounding it to the type (round half to even) gives inf or
#: NaN; ``"saturate"`` types (f4e2m1fn: no inf, no NaN) never overflow. The tie at max + ulp/2 rounds
#: up when the largest value's last mantissa bit is 1 (every type but f8e4m3fn, whose largest value
#: 448 = 1.110b x 2^8 is even). These are properties of the formats (IEEE 754 and the OCP/Graphcore
#: FP8 definitions), checked against jaxlib 0.10.2 in tests/test_parser_xla_parity.py.
FLOAT_FORMATS: dict[str, tuple[float, int, str, bool]] = {
    "f16": (65504.0, 10, "inf", True),
    "bf16": (3.3895313892515355e38, 7, "inf", True),
    "f32": (3.4028234663852886e38, 23, "inf", True),
    "f64": (1.7976931348623157e308, 52, "inf", True),
    "f8e5m2": (57344.0, 2, "inf", True),
    "f8e4m3": (240.0, 3, "inf", True),
    "f8e3m4": (15.5, 4, "inf", True),
    "f8e4m3fn": (448.0, 3, "nan", False),
    "f8e4m3fnuz": (240.0, 3, "nan", True),
    "f8e5m2fnuz": (57344.0, 2, "nan", True),
    "f8e4m3b11fnuz": (30.0, 3, "nan", True),
    "f8e8m0fnu": (2.0 ** 127, 0, "nan", True),
    "f4e2m1fn": (6.0, 1, "saturate", True),
}
#: NaN payload bits a type can hold (IEEE-like types: the mantissa); absent: no payloads
_PAYLOAD_BITS = {"f16": 10, "bf16": 7, "f32": 23, "f64": 52, "f8e5m2": 2, "f8e4m3": 3, "f8e3m4": 4}
#: the integer range XLA's lexer reads (int64 or uint64); beyond it a number is not a token
_LEX_MIN, _LEX_MAX = -(1 << 63), (1 << 64) - 1

_CHECK_TOKEN_RE = re.compile(r"\s+|/\*.*?\*/|-?nan\(0x[0-9a-fA-F]+\)|\.\.\.|[{}(),]|[^\s{}(),/]+", re.S)


def _fmt(v: float) -> str:
    return f"{v:g}"


def _float_limit(etype: str) -> tuple[float, bool]:
    mx, m, _, tie_up = FLOAT_FORMATS[etype]
    return mx + 2.0 ** (math.floor(math.log2(mx)) - m - 1), tie_up


def _int_range(etype: str) -> tuple[int, int]:
    bits = int(etype[1:])
    if etype in ("s64", "u64"):
        return _LEX_MIN, _LEX_MAX   # XLA keeps what its lexer read (s64 2^63 and u64 -1 parse)
    if etype in SIGNED_TYPES:
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


_INT_TOKEN_RE = re.compile(r"-?[0-9]+")
_FLOAT_TOKEN_RE = re.compile(r"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|-?inf|-?nan")


def _check_float(tok: str, pos: int, etype: str, part: str = "", part_pos: int = 0) -> None:
    if "nan(" in tok:
        payload = int(tok[tok.index("(") + 3: -1], 16)
        if payload == 0:
            raise LiteralError("unexpected token type in a literal", pos)
        return
    if _FLOAT_TOKEN_RE.fullmatch(tok) is None:
        raise LiteralError("unexpected token type in a literal", pos)
    if "." not in tok and "e" not in tok and "E" not in tok and tok[-1].isdigit():
        if not _LEX_MIN <= int(tok) <= _LEX_MAX:
            raise LiteralError("unexpected token type in a literal", pos)
    v = float(tok)
    if math.isinf(v) and "inf" not in tok:
        raise LiteralError("Constant is out of range for double (+/-1.79769e+308) and so is unparsable.", pos)
    if etype in ("f64", "c128") or not math.isfinite(v):
        return
    ftype = "f32" if etype == "c64" else etype
    if FLOAT_FORMATS[ftype][2] == "saturate":
        return
    limit, tie_up = _float_limit(ftype)
    a = abs(v)
    if a > limit or (a == limit and tie_up):
        mx = FLOAT_FORMATS[ftype][0]
        if part:
            raise LiteralError(f"{part} part {_fmt(v)} is out of range for literal's primitive type "
                               f"{etype.upper()}, namely [{_fmt(-mx)}, {_fmt(mx)}].", part_pos)
        raise LiteralError(f"value {_fmt(v)} is out of range for literal's primitive type {etype.upper()} "
                           f"namely [{_fmt(-mx)}, {_fmt(mx)}].", pos)


def _check_nan_payload(tok: str, pos: int, shape: Shape, index: int) -> None:
    payload = int(tok[tok.index("(") + 3: -1], 16)
    etype = shape.element_type
    where = (f"tries to set NaN payload 0x{payload:x} to a literal in shape {shape.to_string(layout=False)} "
             f"at linear index {index}, but")
    bits = _PAYLOAD_BITS.get("f32" if etype == "c64" else "f64" if etype == "c128" else etype)
    if bits is None:
        raise LiteralError(f"{where} {etype} does not support payloads", pos)
    if payload > (1 << bits) - 1:
        raise LiteralError(f"{where} the NaN payload is out of range (0x{(1 << bits) - 1:x})", pos)


def _check_int(tok: str, pos: int, etype: str) -> None:
    if _INT_TOKEN_RE.fullmatch(tok) is None:
        if etype == "pred" and tok in ("true", "false"):
            return
        if _FLOAT_TOKEN_RE.fullmatch(tok) is not None or "nan(" in tok:
            raise LiteralError("expects integer", pos)
        raise LiteralError("unexpected token type in a literal", pos)
    v = int(tok)
    if not _LEX_MIN <= v <= _LEX_MAX:
        raise LiteralError("unexpected token type in a literal", pos)
    if etype == "pred":
        return
    lo, hi = _int_range(etype)
    if not lo <= v <= hi:
        raise LiteralError(f"value {v} is out of range for literal's primitive type {etype.upper()} "
                           f"namely [{lo}, {hi}].", pos)


@functools.lru_cache(maxsize=None)
def _candidates(etype: str) -> re.Pattern:
    """Text that may hold an out-of-range value of ``etype``; a literal without any is valid, so the
    common case (a constant of small numbers) costs one regular-expression search."""
    if etype in FLOAT_TYPES or etype in COMPLEX_TYPES:
        ftype = {"c64": "f32", "c128": "f64"}.get(etype, etype)
        digits = len(str(int(FLOAT_FORMATS[ftype][0])))
        return re.compile(r"[0-9]{%d,}|[^\s{}(),0-9.\-/*]" % digits)
    lo, hi = _int_range(etype) if etype != "pred" else (0, 1)
    digits = min(len(str(hi)), len(str(-lo)) if lo < 0 else 99)
    neg = "" if lo < 0 else "|-"
    return re.compile(r"[0-9]{%d,}|[^\s{}(),0-9\-/*]%s" % (digits, neg))


def check_literal_values(text: str, shape: Shape) -> None:
    """Raise :class:`LiteralError` (with the offset of the value in ``text``) when a value of the
    constant literal ``text`` does not fit ``shape``'s element type, in XLA's words:

    * integers outside the type's range ("value 16 is out of range for literal's primitive type U4
      namely [0, 15]."; s64/u64 take what XLA's lexer reads, [-2^63, 2^64-1]); a float for an integer
      type ("expects integer"); pred takes any integer or true/false;
    * finite floats that round to inf/NaN in the type (f16 -65520, bf16 1e100, f8e4m3fn 465), the
      complex parts of c64 likewise ("real part ... / imaginary part ..."), any float beyond double
      ("Constant is out of range for double ...");
    * NaN payloads the type cannot hold (``nan(0x1ff)`` for bf16, any payload for f8e4m3fn /
      f8e4m3b11fnuz / fnuz types, ``nan(0x0)``).

    Only array literals are checked (tuples are checked when decoded). The structure (brace nesting,
    element counts) is :func:`parse_literal`'s job. Cost: one regex search for ordinary literals."""
    etype = shape.element_type
    if shape.is_tuple or etype in ("token", "opaque") or (etype not in FLOAT_TYPES and etype not in COMPLEX_TYPES
                                                          and etype not in SIGNED_TYPES
                                                          and etype not in UNSIGNED_TYPES and etype != "pred"):
        return
    if _candidates(etype).search(text) is None:
        return
    is_float = etype in FLOAT_TYPES or etype in COMPLEX_TYPES
    cplx = etype in COMPLEX_TYPES
    index = 0
    part = 0          # complex: 0 outside a pair, 1 real, 2 imaginary
    pair_pos = 0
    for m in _CHECK_TOKEN_RE.finditer(text):
        tok = m.group(0)
        c = tok[0]
        if c.isspace() or tok.startswith("/*") or tok == "...":
            continue
        if c in "{},":
            continue
        if c == "(":
            if cplx:
                part = 1
                pair_pos = m.start()
            continue
        if c == ")":
            if cplx and part:
                index += 1
            part = 0
            continue
        pos = m.start()
        if is_float:
            if cplx and part:   # XLA reports a complex part's range at the pair's '('
                _check_float(tok, pos, etype, "real" if part == 1 else "imaginary", pair_pos)
            else:
                _check_float(tok, pos, etype)
            if "nan(" in tok:
                _check_nan_payload(tok, pos, shape, index)
            if cplx and part == 1:
                part = 2
            elif not cplx:
                index += 1
        else:
            _check_int(tok, pos, etype)
            index += 1
