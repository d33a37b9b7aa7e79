"""HLO shapes: element types, array / tuple / token shapes, dynamic dimensions and layouts.

Text forms (see ``shared/reference/hlo_syntax.md`` §4)::

    f32[8,16]{1,0}            array with a minor-to-major layout
    bf16[128,1024]{1,0:T(8,128)(2,1)S(1)}   layout with tiles and memory space (kept as raw text)
    u32[<=123,?]              bounded-dynamic and unbounded dimensions
    (f32[2], (s32[], pred[]))  nested tuple; ``()`` is the empty tuple
    token[]   opaque[]        token / opaque scalars
    b(f32[8]{0})              buffer shape (kept, printed back)

:func:`parse_shape` is cached: parsing the same text twice returns the same immutable object.
Byte sizes follow XLA's ``ShapeUtil::ByteSizeOf`` for dense arrays without padding: sub-byte element
types are packed, so a tensor takes ``ceil(bits * num_elements / 8)`` bytes.
"""

from __future__ import annotations

import functools
import math
import re
from typing import Iterable, Sequence

from ..errors import HloSyntaxError

#: bits per element for every HLO primitive type (token/opaque/tuple have no data: 0 bits).
ELEMENT_BITS: dict[str, int] = {
    "pred": 8,
    "s1": 1, "s2": 2, "s4": 4, "s8": 8, "s16": 16, "s32": 32, "s64": 64,
    "u1": 1, "u2": 2, "u4": 4, "u8": 8, "u16": 16, "u32": 32, "u64": 64,
    "f16": 16, "bf16": 16, "f32": 32, "f64": 64,
    "c64": 64, "c128": 128,
    "f8e5m2": 8, "f8e4m3": 8, "f8e4m3fn": 8, "f8e4m3b11fnuz": 8, "f8e3m4": 8,
    "f8e5m2fnuz": 8, "f8e4m3fnuz": 8, "f4e2m1fn": 4, "f8e8m0fnu": 8,
    "token": 0, "opaque": 0,
}

#: element types that can appear in front of ``[`` (longest first, for regular expressions).
ELEMENT_TYPES: tuple[str, ...] = tuple(sorted(ELEMENT_BITS, key=lambda t: (-len(t), t)))

FLOAT_TYPES = frozenset({"f16", "bf16", "f32", "f64", "f8e5m2", "f8e4m3", "f8e4m3fn", "f8e4m3b11fnuz",
                         "f8e3m4", "f8e5m2fnuz", "f8e4m3fnuz", "f4e2m1fn", "f8e8m0fnu"})
COMPLEX_TYPES = frozenset({"c64", "c128"})
SIGNED_TYPES = frozenset({"s1", "s2", "s4", "s8", "s16", "s32", "s64"})
UNSIGNED_TYPES = frozenset({"u1", "u2", "u4", "u8", "u16", "u32", "u64"})

#: regular expression (text) of one array shape with an optional layout; used by the grammar too.
ARRAY_SHAPE_RE = (r"(?:" + "|".join(ELEMENT_TYPES) + r")\s*\[[^\[\]{}()]*\]"
                  r"(?:\s*\{\s*[0-9:][^{}]*\})?")


def element_byte_size(element_type: str) -> float:
    """Bytes per element of ``element_type`` (0.5 for s4/u4, 0.125 for s1; 0 for token/opaque).

    Raises KeyError for an unknown type name."""
    return ELEMENT_BITS[element_type] / 8


class Layout:
    """An array layout ``{minor_to_major[:attrs]}``.

    ``minor_to_major`` is the dimension order, fastest varying first. ``attrs`` is the raw text after
    the ``:`` (tiles ``T(8,128)``, memory space ``S(1)``, element size ``E(4)``, ...) with spaces
    removed; it is kept verbatim so that a layout prints back unchanged.
    """

    __slots__ = ("minor_to_major", "attrs")

    def __init__(self, minor_to_major: Sequence[int], attrs: str = ""):
        self.minor_to_major = tuple(minor_to_major)
        self.attrs = attrs

    @property
    def memory_space(self) -> int:
        """The ``S(n)`` memory space (0 when absent)."""
        m = re.search(r"(?<![A-Z])S\((\d+)\)", self.attrs)
        return int(m.group(1)) if m else 0

    def __str__(self) -> str:
        m2m = ",".join(map(str, self.minor_to_major))
        return "{" + m2m + (":" + self.attrs if self.attrs else "") + "}"

    def __repr__(self) -> str:
        return f"Layout({self})"

    def __eq__(self, other) -> bool:
        return (isinstance(other, Layout) and self.minor_to_major == other.minor_to_major
                and self.attrs == other.attrs)

    def __hash__(self) -> int:
        return hash((self.minor_to_major, self.attrs))


class Shape:
    """An HLO shape (immutable).

    * ``element_type``: ``'f32'``, ``'bf16'``, ``'pred'``, ``'s4'``, ..., ``'token'``, ``'opaque'``,
      or ``'tuple'`` for tuples.
    * ``dims``: dimension sizes (for ``<=N`` the bound N; for ``?`` -1); ``()`` for scalars/tuples.
    * ``dynamic``: per dimension, True when written ``<=N`` or ``?``.
    * ``layout``: :class:`Layout` or None (none written).
    * ``tuple_shapes``: element shapes of a tuple.
    * ``buffer``: True for a buffer shape ``b(...)`` (its array is described by the other fields).
    """

    __slots__ = ("element_type", "dims", "dynamic", "layout", "tuple_shapes", "buffer", "_str", "_hash")

    def __init__(self, element_type: str, dims: Sequence[int] = (), dynamic: Sequence[bool] | None = None,
                 layout: Layout | None = None, tuple_shapes: Sequence["Shape"] = (), buffer: bool = False):
        self.element_type = element_type
        self.dims = tuple(int(d) for d in dims)
        self.dynamic = tuple(dynamic) if dynamic is not None else (False,) * len(self.dims)
        self.layout = layout
        self.tuple_shapes = tuple(tuple_shapes)
        self.buffer = buffer
        self._str = None
        self._hash = None

    # -- constructors -------------------------------------------------------------------------
    @classmethod
    def array(cls, element_type: str, dims: Sequence[int], layout: Sequence[int] | Layout | None = None) -> "Shape":
        """An array shape; ``layout`` may be a minor-to-major sequence."""
        if layout is not None and not isinstance(layout, Layout):
            layout = Layout(layout)
        return cls(element_type, dims, layout=layout)

    @classmethod
    def tuple(cls, shapes: Iterable["Shape"]) -> "Shape":
        return cls("tuple", tuple_shapes=tuple(shapes))

    # -- queries --------------------------------------------------------------------------------
    @property
    def is_tuple(self) -> bool:
        return self.element_type == "tuple"

    @property
    def is_token(self) -> bool:
        return self.element_type == "token"

    @property
    def is_array(self) -> bool:
        return self.element_type not in ("tuple", "token", "opaque")

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def num_elements(self) -> int:
        """Product of the dimensions (bounds for dynamic dims; 1 for scalars, 0 for tuples)."""
        if self.is_tuple:
            return 0
        return math.prod(max(d, 0) for d in self.dims)

    @property
    def element_size(self) -> float:
        """Bytes per element (fractional for sub-byte types; 0 for token/opaque/tuple)."""
        return ELEMENT_BITS.get(self.element_type, 0) / 8

    @property
    def byte_size(self) -> int:
        """Bytes of the data: arrays ``ceil(bits * num_elements / 8)``; tuples the sum over their
        leaves (no pointer table); token/opaque 0."""
        if self.is_tuple:
            return sum(s.byte_size for s in self.tuple_shapes)
        bits = ELEMENT_BITS.get(self.element_type, 0)
        return (bits * self.num_elements + 7) // 8

    def leaves(self) -> list["Shape"]:
        """Non-tuple leaves in pre-order (tuple flattening, as tuple shardings are listed)."""
        if not self.is_tuple:
            return [self]
        out: list[Shape] = []
        stack = list(reversed(self.tuple_shapes))
        while stack:
            s = stack.pop()
            if s.is_tuple:
                stack.extend(reversed(s.tuple_shapes))
            else:
                out.append(s)
        return out

    def with_dims(self, dims: Sequence[int]) -> "Shape":
        """Same element type with new dims; keeps the layout only when the rank is unchanged."""
        layout = self.layout if self.layout is not None and len(dims) == self.rank else None
        return Shape(self.element_type, dims, layout=layout)

    def without_layout(self) -> "Shape":
        if self.is_tuple:
            return Shape.tuple(s.without_layout() for s in self.tuple_shapes)
        if self.layout is None:
            return self
        return Shape(self.element_type, self.dims, self.dynamic, None, buffer=self.buffer)

    def compatible(self, other: "Shape") -> bool:
        """Same type, dims and tuple structure; layouts ignored (XLA's ``ShapeUtil::Compatible``)."""
        if self.element_type != other.element_type:
            return False
        if self.is_tuple:
            return (len(self.tuple_shapes) == len(other.tuple_shapes)
                    and all(a.compatible(b) for a, b in zip(self.tuple_shapes, other.tuple_shapes)))
        return self.dims == other.dims and self.dynamic == other.dynamic

    # -- printing and comparison --------------------------------------------------------------
    def __str__(self) -> str:
        if self._str is None:
            self._str = self._format(True)
        return self._str

    def to_string(self, layout: bool = True) -> str:
        """HLO text; ``layout=False`` omits layouts (computation signatures)."""
        return str(self) if layout else self._format(False)

    def _format(self, with_layout: bool) -> str:
        if self.is_tuple:
            parts = []
            for i, s in enumerate(self.tuple_shapes):
                t = s._format(with_layout)
                parts.append(f"/*index={i}*/{t}" if i and i % 5 == 0 else t)
            return "(" + ", ".join(parts) + ")"
        dims = ",".join(("?" if d < 0 else f"<={d}") if dyn else str(d)
                        for d, dyn in zip(self.dims, self.dynamic))
        text = f"{self.element_type}[{dims}]"
        if with_layout and self.layout is not None and (self.layout.minor_to_major or self.layout.attrs):
            text += str(self.layout)
        if self.buffer:
            text = f"b({text})"
        return text

    def __repr__(self) -> str:
        return f"Shape({self})"

    def _key(self):
        return (self.element_type, self.dims, self.dynamic, self.layout,
                tuple(s._key() for s in self.tuple_shapes), self.buffer)

    def __eq__(self, other) -> bool:
        if self is other:
            return True
        if not isinstance(other, Shape):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(self._key())
        return self._hash


_ARRAY_RE = re.compile(r"\s*(b\s*\(\s*)?(" + "|".join(ELEMENT_TYPES) + r")\s*\[([^\[\]{}()]*)\]"
                       r"(?:\s*\{\s*([0-9][0-9,\s]*|)\s*(?::([^{}]*))?\})?\s*(\))?\s*")
_SHAPE_TOKEN_RE = re.compile(r"b\s*\(\s*" + ARRAY_SHAPE_RE + r"\s*\)|" + ARRAY_SHAPE_RE)
_DIM_RE = re.compile(r"\s*(?:(<=)\s*(\d+)|(\?)|(\d+))\s*$")


_MAX_DIM = 2**63 - 1   # XLA dimension sizes are int64
#: The highest array rank hloshard reads: a sharding's tile assignment is a numpy array of the
#: array's rank plus up to three subgroup dims (manual, replicated, unreduced), and numpy arrays have at
#: most 64 dims (``numpy.MAXDIMS``).  XLA sets no limit of its own; no real model comes near it.
MAX_RANK = 64 - 3


class _ShapeError(ValueError):
    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.offset = offset


@functools.lru_cache(maxsize=65536)
def parse_array_shape(text: str) -> Shape:
    """Decode one array/buffer shape token (``f32[8,16]{1,0}``); cached.

    Raises ValueError (with ``.offset``) for a malformed shape."""
    m = _ARRAY_RE.fullmatch(text)
    if m is None:
        raise _ShapeError(f"malformed shape {text.strip()!r}", 0)
    is_buffer = m.group(1) is not None
    if is_buffer != (m.group(6) is not None):
        raise _ShapeError(f"malformed buffer shape {text.strip()!r}", 0)
    etype, dims_text, m2m_text, attrs = m.group(2), m.group(3), m.group(4), m.group(5)
    dims: list[int] = []
    dynamic: list[bool] = []
    if dims_text.strip():
        for part in dims_text.split(","):
            d = _DIM_RE.match(part)
            if d is None:
                raise _ShapeError(f"bad dimension {part.strip()!r} in shape {text.strip()!r} "
                                  "(expected N, <=N or ?)", m.start(3))
            if d.group(1):
                dims.append(int(d.group(2)))
                dynamic.append(True)
            elif d.group(3):
                dims.append(-1)
                dynamic.append(True)
            else:
                dims.append(int(d.group(4)))
                dynamic.append(False)
    if len(dims) > MAX_RANK:
        raise _ShapeError(f"shape {text.strip()[:40]}... has rank {len(dims)}: hloshard reads arrays of rank at "
                          f"most {MAX_RANK} (a tile assignment is a numpy array of at most 64 dims)", m.start(3))
    layout = None
    if m2m_text is not None:
        try:
            m2m = tuple(int(x) for x in m2m_text.split(",") if x.strip()) if m2m_text.strip() else ()
        except ValueError:   # e.g. "{1 0}": numbers not separated by commas
            raise _ShapeError(f"malformed layout {{{m2m_text.strip()}}}", m.start(4)) from None
        if len(m2m) != len(dims):
            raise _ShapeError(f"layout {{{m2m_text.strip()}}} has {len(m2m)} entries but the shape has rank "
                              f"{len(dims)}", m.start(4))
        if sorted(m2m) != list(range(len(dims))):
            raise _ShapeError(f"layout {{{m2m_text.strip()}}} is not a permutation of the dimensions", m.start(4))
        layout = Layout(m2m, re.sub(r"\s+", "", attrs) if attrs else "")
    if any(d > _MAX_DIM for d in dims):
        raise _ShapeError(f"dimension size too large in shape {text.strip()!r} (at most {_MAX_DIM}, int64)",
                          m.start(3))
    return Shape(etype, dims, dynamic, layout, buffer=is_buffer)


@functools.lru_cache(maxsize=4096)
def parse_shape(text: str) -> Shape:
    """Parse HLO shape text (array, tuple, token, buffer; ``/*index=N*/`` comments allowed).

    Raises :class:`HloSyntaxError` (filename ``<shape>``, column of the problem) on malformed text.
    Iterative (no recursion), so deeply nested tuples cannot overflow the stack.
    """
    src = re.sub(r"/\*.*?\*/", lambda m: " " * len(m.group(0)), text, flags=re.S)
    pos = 0
    n = len(src)
    stack: list[list[Shape]] = []
    result: Shape | None = None
    expect_item = True

    def fail(msg: str, at: int):
        raise HloSyntaxError(msg, "<shape>", 1, at + 1, text)

    arr_re = _SHAPE_TOKEN_RE
    while True:
        while pos < n and src[pos].isspace():
            pos += 1
        if pos >= n:
            break
        ch = src[pos]
        if expect_item:
            if ch == "(":
                stack.append([])
                pos += 1
                continue
            if ch == ")" and stack and not stack[-1]:
                pos += 1
                done = Shape.tuple(stack.pop())
                expect_item = False
            else:
                m = arr_re.match(src, pos)
                if m is None:
                    fail("expected a shape such as f32[8,16]{1,0} or (f32[], s32[])", pos)
                try:
                    done = parse_array_shape(m.group(0))
                except _ShapeError as exc:
                    fail(str(exc), pos + exc.offset)
                pos = m.end()
                expect_item = False
            if stack:
                stack[-1].append(done)
            elif result is None:
                result = done
            else:
                fail("unexpected text after the shape", pos)
            continue
        # after an item
        if not stack:
            fail("unexpected text after the shape", pos)
        if ch == ",":
            pos += 1
            expect_item = True
        elif ch == ")":
            pos += 1
            done = Shape.tuple(stack.pop())
            if stack:
                stack[-1].append(done)
            else:
                result = done
        else:
            fail("expected ',' or ')' in a tuple shape", pos)
    if stack or result is None:
        fail("unexpected end of shape", n)
    return result
