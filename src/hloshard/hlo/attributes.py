"""Typed HLO attribute values: decoding from text and printing back.

Every ``key=value`` of an instruction is one lexer token; :func:`decode_attr` turns the value text
into a Python value according to the key (cached: the same text gives the same immutable object),
and :func:`format_attr` prints it back. Keys the engine needs are typed (see the ``*_KEYS`` sets);
every other value is kept as :class:`Raw` text and printed back unchanged.

Computation references (``to_apply=%add``) and ``control-predecessors`` are resolved by the parser,
not here: :func:`decode_attr` returns them as :class:`NameRef` / tuples of names.
Value syntax follows ``shared/reference/hlo_syntax.md`` §5.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..errors import HloSyntaxError
from .lexical import MAX_DEVICES, brace_block_end  # noqa: F401  (MAX_DEVICES re-exported)
from .shape import parse_shape
from .sharding import HloSharding


class Raw(str):
    """An attribute value kept as its source text (printed back verbatim)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Raw({str.__repr__(self)})"


class NameRef(str):
    """A not-yet-resolved computation name (without ``%``)."""

    __slots__ = ()


class InlineBody(str):
    """An inline computation body ``{ ... }`` (the canonical printer's form); resolved by the parser."""

    __slots__ = ()


class AttrError(ValueError):
    """A malformed attribute value; ``offset`` is the 0-based position in the value text."""

    def __init__(self, message: str, offset: int = 0):
        super().__init__(message)
        self.offset = offset


def check_device_count(n: int, what: str) -> None:
    """Raise :class:`AttrError` ("too many devices") when an iota/mesh form names more than
    :data:`MAX_DEVICES` devices. Call it before expanding the form (``n`` is a Python int: exact)."""
    if n > MAX_DEVICES:
        raise AttrError(f"too many devices: {what} names {n} devices (at most {MAX_DEVICES:,} are supported)")


# ---------------------------------------------------------------------------------------------
# key classes
INT_LIST_KEYS = frozenset({
    "dimensions", "dynamic_slice_sizes", "fft_length", "offset_dims", "collapsed_slice_dims",
    "start_index_map", "operand_batching_dims", "start_indices_batching_dims", "update_window_dims",
    "inserted_window_dims", "scatter_dims_to_operand_dims", "input_batching_dims",
    "scatter_indices_batching_dims", "lhs_contracting_dims", "rhs_contracting_dims", "lhs_batch_dims",
    "rhs_batch_dims", "lhs_ragged_dims", "rhs_group_dims",
})
INT_KEYS = frozenset({
    "index", "iota_dimension", "channel_id", "feature_index", "feature_group_count", "batch_group_count",
    "index_vector_dim", "exponent_bits", "mantissa_bits", "delta", "k", "inferred_dimension",
    "cross_program_prefetch_index", "replica_count", "num_partitions",
})
BOOL_KEYS = frozenset({
    "is_stable", "indices_are_sorted", "unique_indices", "constrain_layout", "use_global_device_ids",
    "is_host_transfer", "custom_call_has_side_effect", "largest", "is_composite", "left_side", "lower",
    "unit_diagonal", "is_scheduled", "alias_passthrough_params",
})
STRING_KEYS = frozenset({
    "custom_call_target", "infeed_config", "outfeed_config", "async_execution_thread", "execution_thread",
    "backend_config",
})
COMPUTATION_KEYS = frozenset({
    "to_apply", "calls", "condition", "body", "true_computation", "false_computation", "select", "scatter",
})
COMPUTATION_LIST_KEYS = frozenset({"branch_computations", "called_computations"})
SHAPE_KEYS = frozenset({"outfeed_shape"})


# ---------------------------------------------------------------------------------------------
# strings
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "a": "\a", "b": "\b",
            "f": "\f", "v": "\v", "?": "?"}
_ESC_RE = re.compile(r"\\(x[0-9a-fA-F]{1,2}|[0-7]{1,3}|.)", re.S)


def unquote(text: str) -> str:
    """Decode a C-escaped ``"..."`` or ``'...'`` string literal (quotes included in ``text``)."""
    body = text[1:-1]
    if "\\" not in body:
        return body

    def rep(m):
        e = m.group(1)
        if e[0] == "x":
            return chr(int(e[1:], 16))
        if e[0] in "01234567":
            return chr(int(e, 8))
        return _ESCAPES.get(e, e)

    return _ESC_RE.sub(rep, body)


def quote(value: str) -> str:
    """C-escape ``value`` into a double-quoted HLO string."""
    out = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    out = out.replace("\r", "\\r")
    if any(ord(c) < 32 or ord(c) == 127 for c in out):
        out = "".join(f"\\x{ord(c):02x}" if ord(c) < 32 or ord(c) == 127 else c for c in out)
    return '"' + out + '"'


def is_balanced_blob(text: str) -> bool:
    """True when ``text`` is one ``{...}`` blob whose braces balance (skipping double-quoted strings),
    the rule XLA's printer uses to write backend_config / frontend-attribute values unquoted."""
    if not text.startswith("{"):
        return False
    try:
        return brace_block_end(text, 0) == len(text)
    except ValueError:
        return False


def format_blob_or_string(value: str) -> str:
    return value if is_balanced_blob(value) else quote(value)


# ---------------------------------------------------------------------------------------------
# int lists and scalars
_INT_LIST_RE = re.compile(r"\{\s*(-?\d+(?:\s*,\s*-?\d+)*)?\s*\}")


INT64_MAX = 2**63 - 1


def _i64(text: str) -> int:
    """``int(text)``, refusing values outside int64 (XLA stores every HLO integer attribute as int64)."""
    v = int(text)
    if not -INT64_MAX - 1 <= v <= INT64_MAX:
        raise AttrError(f"integer {text.strip()} is out of range (int64)")
    return v


def _int_list(text: str) -> tuple[int, ...]:
    m = _INT_LIST_RE.fullmatch(text)
    if m is None:
        raise AttrError("expected a list of integers such as {0,1}")
    return tuple(_i64(x) for x in m.group(1).split(",")) if m.group(1) else ()


def _int(text: str) -> int:
    try:
        return _i64(text)
    except AttrError:
        raise
    except ValueError:
        raise AttrError("expected an integer") from None


def _bool(text: str) -> bool:
    if text == "true":
        return True
    if text == "false":
        return False
    raise AttrError("expected true or false")


def _string(text: str) -> str:
    if text[:1] in "\"'" and len(text) >= 2 and text[-1] == text[0]:
        return unquote(text)
    if text.startswith("{"):
        return text  # raw blob (backend_config)
    raise AttrError("expected a quoted string")


def _int_list_list(text: str) -> tuple[tuple[int, ...], ...]:
    t = text.strip()
    if not (t.startswith("{") and t.endswith("}")):
        raise AttrError("expected a list of lists such as {{0,1},{1,2}}")
    inner = t[1:-1].strip()
    if not inner:
        return ()
    out = []
    for m in re.finditer(r"\{[^{}]*\}|[^\s,]", inner):
        if not m.group(0).startswith("{"):
            raise AttrError("expected a list of lists such as {{0,1},{1,2}}", m.start() + 1)
        out.append(_int_list(m.group(0)))
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# replica groups
class ReplicaGroups:
    """``replica_groups=`` in any of its three forms, printed back in the form it was written in.

    * explicit ``{{0,1},{2,3}}`` (``{}`` = one group of all participants: ``groups == []``),
    * iota ``[G,S]<=[R...]T(perm)``: ``arange(prod R).reshape(R).transpose(perm).reshape(G, S)``,
    * mesh ``mesh['x'=2,'y'=4][, device_ids=(...)] {'y'}`` (jaxlib 0.10.2): the referenced axes (or
      sub-axes ``'y':(pre)size``) vary within a group, every combination of the other axes is a group.

    ``groups`` is always the explicit list of lists of device (or replica/partition) ids.
    """

    __slots__ = ("form", "text", "_groups")

    def __init__(self, groups: Sequence[Sequence[int]] | None = None, *, form: str = "explicit",
                 text: str | None = None):
        self.form = form
        self._groups = [list(map(int, g)) for g in groups] if groups is not None else None
        if groups is None and form != "iota":
            raise ValueError("only the iota form may omit its groups (they are expanded from the text)")
        if text is None:
            if form != "explicit":
                raise ValueError("non-explicit replica groups need their text")
            text = "{" + ",".join("{" + ",".join(map(str, g)) + "}" for g in self._groups) + "}"
        self.text = text

    @classmethod
    def explicit(cls, groups: Sequence[Sequence[int]]) -> "ReplicaGroups":
        return cls(groups)

    @classmethod
    def iota(cls, num_groups: int, group_size: int, reshape_dims: Sequence[int] | None = None,
             perm: Sequence[int] | None = None) -> "ReplicaGroups":
        """Iota form ``[G,S]<=[reshape_dims]T(perm)``."""
        rd = list(reshape_dims) if reshape_dims else [num_groups * group_size]
        text = f"[{num_groups},{group_size}]<=[{','.join(map(str, rd))}]"
        if perm is not None and len(rd) > 1:
            text += f"T({','.join(map(str, perm))})"
        return _decode_replica_groups(text)

    @property
    def iota_shape(self) -> tuple[int, int] | None:
        """``(num_groups, group_size)`` of the iota form ``[G,S]<=[...]``, else None. An iota form names
        every id in ``range(G*S)`` exactly once, so validity checks need only these two numbers."""
        if self.form != "iota":
            return None
        m = _IOTA_RG_RE.fullmatch(self.text)
        dims = _ints(m.group(1)) if m else []
        return (dims[0], dims[1]) if len(dims) == 2 else None

    def _expanded(self) -> list[list[int]]:
        if self._groups is None:   # iota form, validated at decode time (at most MAX_DEVICES ids)
            m = _IOTA_RG_RE.fullmatch(self.text)
            perm = _ints(m.group(3)) if m.group(3) is not None else None
            self._groups = _expand_iota(_ints(m.group(1)), _ints(m.group(2)), perm).tolist()
        return self._groups

    @property
    def groups(self) -> list[list[int]]:
        """The groups as an explicit list of lists (a fresh copy; the iota form is expanded on first use)."""
        return [list(g) for g in self._expanded()]

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"ReplicaGroups({self.text})"

    def __eq__(self, other) -> bool:
        if isinstance(other, ReplicaGroups):
            if self.form == other.form == "iota" and self.text == other.text:
                return True
            return self._expanded() == other._expanded()
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(map(tuple, self._expanded())))


_IOTA_RG_RE = re.compile(r"\[([0-9,\s]*)\]\s*<=\s*\[([0-9,\s]*)\](?:\s*T\(([0-9,\s]*)\))?")


def _ints(text: str) -> list[int]:
    return [_i64(x) for x in text.replace(" ", "").split(",") if x]


def _check_iota(dims: Sequence[int], reshape: Sequence[int], perm: Sequence[int] | None) -> None:
    """Validate an iota list from its numbers alone (nothing is allocated); raises AttrError."""
    n = math.prod(reshape)
    if math.prod(dims) != n:
        raise AttrError(f"iota list: product of {list(dims)} ({math.prod(dims)}) differs from product of "
                        f"{list(reshape)} ({n})")
    check_device_count(n, f"iota list {list(dims)}<={list(reshape)}")
    if perm is not None and sorted(perm) != list(range(len(reshape))):
        raise AttrError(f"T({','.join(map(str, perm))}) is not a permutation of {len(reshape)} dimensions")


def _expand_iota(dims: Sequence[int], reshape: Sequence[int], perm: Sequence[int] | None) -> np.ndarray:
    _check_iota(dims, reshape, perm)
    arr = np.arange(math.prod(reshape), dtype=np.int64).reshape(reshape)
    if perm is not None:
        arr = arr.transpose(perm)
    return arr.reshape(dims)


_MESH_RE = re.compile(r"mesh\s*\[([^\[\]]*)\](?:\s*,\s*device_ids\s*=\s*\(((?:[^()]|\([^()]*\))*)\))?\s*\{([^{}]*)\}")
_MESH_AXIS_RE = re.compile(r"\s*(?:'([^']*)'|\"([^\"]*)\"|([A-Za-z_][\w.\-]*))\s*=\s*(\d+)\s*")
_MESH_REF_RE = re.compile(r"\s*(?:'([^']*)'|\"([^\"]*)\"|(\d+)|([A-Za-z_][\w.\-]*))\s*(?::\s*\(\s*(\d+)\s*\)\s*(\d+))?\s*")


def _expand_mesh(text: str) -> list[list[int]]:
    m = _MESH_RE.fullmatch(text)
    if m is None:
        raise AttrError("malformed mesh replica groups; expected mesh['x'=2,'y'=4] {'y'}")
    names: list[str] = []
    sizes: list[int] = []
    for part in m.group(1).split(","):
        if not part.strip():
            continue
        a = _MESH_AXIS_RE.fullmatch(part)
        if a is None:
            raise AttrError(f"malformed mesh axis {part.strip()!r}")
        names.append(a.group(1) if a.group(1) is not None else a.group(2) if a.group(2) is not None else a.group(3))
        sizes.append(_i64(a.group(4)))
        if sizes[-1] < 1:
            raise AttrError(f"mesh axis {names[-1]!r} has size {sizes[-1]}; sizes must be positive")
    n = math.prod(sizes)
    check_device_count(n, f"mesh{sizes}")
    ids_text = m.group(2)
    if ids_text is None:
        devices = np.arange(n, dtype=np.int64)
    else:
        t = ids_text.strip()
        im = re.fullmatch(r"\[([0-9,\s]*)\](?:\s*<=\s*\[([0-9,\s]*)\])?(?:\s*T\(([0-9,\s]*)\))?", t)
        if im:
            dims = _ints(im.group(1))
            reshape = _ints(im.group(2)) if im.group(2) else dims
            perm = _ints(im.group(3)) if im.group(3) else None
            devices = _expand_iota([math.prod(dims)], reshape, perm).reshape(-1)
        else:
            try:
                devices = np.array(_ints(t), dtype=np.int64)
            except (ValueError, OverflowError):
                raise AttrError(f"malformed device_ids ({t})") from None
        if devices.size != n:
            raise AttrError(f"device_ids has {devices.size} entries but the mesh has {n} devices")
    # referenced axes / sub-axes
    refs: list[tuple[int, int, int]] = []   # (axis, pre, size)
    body = m.group(3).strip()
    if body:
        for part in body.split(","):
            r = _MESH_REF_RE.fullmatch(part)
            if r is None:
                raise AttrError(f"malformed mesh axis reference {part.strip()!r}")
            if r.group(3) is not None:
                axis = int(r.group(3))
                if axis >= len(sizes):
                    raise AttrError(f"mesh axis index {axis} out of range")
            else:
                nm = next(g for g in (r.group(1), r.group(2), r.group(4)) if g is not None)
                if nm not in names:
                    raise AttrError(f"unknown mesh axis {nm!r}")
                axis = names.index(nm)
            if r.group(5) is not None:
                pre, size = int(r.group(5)), int(r.group(6))
                if pre < 1 or size < 1 or sizes[axis] % (pre * size):
                    raise AttrError(f"sub-axis :({pre}){size} does not divide axis of size {sizes[axis]}")
            else:
                pre, size = 1, sizes[axis]
            refs.append((axis, pre, size))
    # split every axis at the cut points its references need (major-to-minor products)
    cuts: list[list[int]] = [[1, s] for s in sizes]
    for axis, pre, size in refs:
        cuts[axis] += [pre, pre * size]
    pieces: list[int] = []
    piece_of: dict[tuple[int, int], int] = {}   # (axis, cut start) -> piece index
    for axis, cs in enumerate(cuts):
        cs = sorted(set(cs))
        for a, b in zip(cs, cs[1:]):
            if b % a:
                raise AttrError("overlapping mesh sub-axes")
            piece_of[(axis, a)] = len(pieces)
            pieces.append(b // a)
    var_pieces: list[int] = []
    for axis, pre, size in refs:
        cs = sorted(set(cuts[axis]))
        for a, b in zip(cs, cs[1:]):
            if pre <= a and b <= pre * size:
                var_pieces.append(piece_of[(axis, a)])
    fixed = [i for i in range(len(pieces)) if i not in var_pieces]
    arr = devices.reshape(pieces).transpose(fixed + var_pieces)
    group_size = math.prod(pieces[i] for i in var_pieces)
    return arr.reshape(-1, group_size).tolist()


@functools.lru_cache(maxsize=4096)
def _decode_replica_groups(text: str) -> ReplicaGroups:
    t = text.strip()
    if t.startswith("{"):
        groups = _int_list_list(t)
        return ReplicaGroups(groups, form="explicit", text=t if _canon_groups(groups) == t else _canon_groups(groups))
    if t.startswith("["):
        m = _IOTA_RG_RE.fullmatch(t)
        if m is None:
            raise AttrError("malformed iota replica groups; expected [G,S]<=[N] or [G,S]<=[a,b]T(1,0)")
        dims, reshape = _ints(m.group(1)), _ints(m.group(2))
        perm = _ints(m.group(3)) if m.group(3) is not None else None
        if len(dims) != 2:
            raise AttrError("iota replica groups need exactly 2 leading dimensions [groups,group_size]")
        if len(reshape) > 1 and perm is None:
            raise AttrError("iota replica groups with more than one reshape dimension need T(...)")
        if perm is not None and len(perm) != len(reshape):
            raise AttrError("T(...) must have one entry per reshape dimension")
        _check_iota(dims, reshape, perm)   # expanded lazily, on first use of .groups
        canon = f"[{','.join(map(str, dims))}]<=[{','.join(map(str, reshape))}]"
        if perm is not None:
            canon += f"T({','.join(map(str, perm))})"
        return ReplicaGroups(None, form="iota", text=canon)
    if t.startswith("mesh"):
        groups = _expand_mesh(t)
        return ReplicaGroups(groups, form="mesh", text=re.sub(r"\s+", " ", t))
    raise AttrError("expected replica groups: {{0,1},{2,3}}, [2,4]<=[8] or mesh[...] {...}")


def _canon_groups(groups) -> str:
    return "{" + ",".join("{" + ",".join(map(str, g)) + "}" for g in groups) + "}"


# ---------------------------------------------------------------------------------------------
# slice, padding, window
@dataclass(frozen=True)
class SliceSpec:
    """``slice={[start:limit:stride], ...}``: one (start, limit, stride) per dimension."""

    ranges: tuple[tuple[int, int, int], ...]

    @property
    def starts(self) -> tuple[int, ...]:
        return tuple(r[0] for r in self.ranges)

    @property
    def limits(self) -> tuple[int, ...]:
        return tuple(r[1] for r in self.ranges)

    @property
    def strides(self) -> tuple[int, ...]:
        return tuple(r[2] for r in self.ranges)

    def __str__(self) -> str:
        if all(r[2] == 1 for r in self.ranges):
            return "{" + ", ".join(f"[{a}:{b}]" for a, b, _ in self.ranges) + "}"
        return "{" + ", ".join(f"[{a}:{b}:{c}]" for a, b, c in self.ranges) + "}"


_SLICE_RANGE_RE = re.compile(r"\[\s*(-?\d+)\s*:\s*(-?\d+)\s*(?::\s*(-?\d+)\s*)?\]")


def _slice(text: str) -> SliceSpec:
    t = text.strip()
    if not (t.startswith("{") and t.endswith("}")):
        raise AttrError("expected slice={[start:limit], ...}")
    inner = t[1:-1].strip()
    ranges = []
    pos = 0
    while inner[pos:].strip():
        m = _SLICE_RANGE_RE.match(inner, pos)
        if m is None:
            raise AttrError("expected [start:limit] or [start:limit:stride]", pos + 1)
        ranges.append((_i64(m.group(1)), _i64(m.group(2)), _i64(m.group(3)) if m.group(3) else 1))
        pos = m.end()
        rest = re.match(r"\s*,?\s*", inner[pos:])
        pos += rest.end()
    return SliceSpec(tuple(ranges))


@dataclass(frozen=True)
class PaddingConfig:
    """``padding=lo_hi[_interior]x...`` of a pad op: one (low, high, interior) per dimension."""

    dims: tuple[tuple[int, int, int], ...]

    def __str__(self) -> str:
        if any(d[2] for d in self.dims):
            return "x".join(f"{a}_{b}_{c}" for a, b, c in self.dims)
        return "x".join(f"{a}_{b}" for a, b, _ in self.dims)


_PAD_DIM_RE = re.compile(r"(-?\d+)_(-?\d+)(?:_(\d+))?")


def _padding(text: str) -> PaddingConfig:
    dims = []
    for part in text.split("x"):
        m = _PAD_DIM_RE.fullmatch(part)
        if m is None:
            raise AttrError("expected padding such as 0_0x1_1 or 0_1_0 (low_high[_interior] per dimension)")
        dims.append((_i64(m.group(1)), _i64(m.group(2)), _i64(m.group(3)) if m.group(3) else 0))
    return PaddingConfig(tuple(dims))


@dataclass(frozen=True)
class WindowDim:
    size: int
    stride: int = 1
    padding_low: int = 0
    padding_high: int = 0
    lhs_dilation: int = 1
    rhs_dilation: int = 1
    reversal: bool = False


@dataclass(frozen=True)
class Window:
    """``window={size=3x3 stride=2x2 pad=0_1x0_1 lhs_dilate=1x2 rhs_dilate=2x2 rhs_reversal=0x1}``."""

    dims: tuple[WindowDim, ...]

    def __str__(self) -> str:
        d = self.dims
        if not d:
            return "{}"
        parts = ["size=" + "x".join(str(w.size) for w in d)]
        if any(w.stride != 1 for w in d):
            parts.append("stride=" + "x".join(str(w.stride) for w in d))
        if any(w.padding_low or w.padding_high for w in d):
            parts.append("pad=" + "x".join(f"{w.padding_low}_{w.padding_high}" for w in d))
        if any(w.lhs_dilation != 1 for w in d):
            parts.append("lhs_dilate=" + "x".join(str(w.lhs_dilation) for w in d))
        if any(w.rhs_dilation != 1 for w in d):
            parts.append("rhs_dilate=" + "x".join(str(w.rhs_dilation) for w in d))
        if any(w.reversal for w in d):
            parts.append("rhs_reversal=" + "x".join("1" if w.reversal else "0" for w in d))
        return "{" + " ".join(parts) + "}"


_WINDOW_FIELD_RE = re.compile(r"([a-z_]+)=(\S+)")


def _window(text: str) -> Window:
    t = text.strip()
    if not (t.startswith("{") and t.endswith("}")):
        raise AttrError("expected window={size=...}")
    inner = t[1:-1]
    if "," in inner:
        raise AttrError("window fields are separated by spaces, not commas", inner.index(",") + 1)
    fields: dict[str, list] = {}
    for tok in inner.split():
        m = _WINDOW_FIELD_RE.fullmatch(tok)
        if m is None:
            raise AttrError(f"malformed window field {tok!r}")
        key, val = m.group(1), m.group(2)
        if key in fields:
            raise AttrError(f"window field {key} given twice")
        try:
            if key == "pad":
                vals = []
                for p in val.split("x"):
                    lo_hi = p.split("_")
                    if len(lo_hi) != 2:
                        raise AttrError("window pad expects padding_low and padding_high separated by '_'")
                    vals.append((_i64(lo_hi[0]), _i64(lo_hi[1])))
            elif key in ("size", "stride", "lhs_dilate", "rhs_dilate", "rhs_reversal"):
                vals = [_i64(x) for x in val.split("x")]
            else:
                raise AttrError(f"unknown window field {key!r} (size, stride, pad, lhs_dilate, rhs_dilate, "
                                "rhs_reversal)")
        except ValueError:
            raise AttrError(f"malformed window field {tok!r}") from None
        fields[key] = vals
    if "size" not in fields:
        if not fields:
            return Window(())
        raise AttrError("window needs size=")
    n = len(fields["size"])
    for k, v in fields.items():
        if len(v) != n:
            raise AttrError(f"window field {k} has {len(v)} dimensions, size has {n}")
    dims = []
    for i in range(n):
        pad = fields.get("pad", [(0, 0)] * n)[i]
        dims.append(WindowDim(size=fields["size"][i], stride=fields.get("stride", [1] * n)[i],
                              padding_low=pad[0], padding_high=pad[1],
                              lhs_dilation=fields.get("lhs_dilate", [1] * n)[i],
                              rhs_dilation=fields.get("rhs_dilate", [1] * n)[i],
                              reversal=bool(fields.get("rhs_reversal", [0] * n)[i])))
    return Window(tuple(dims))


# ---------------------------------------------------------------------------------------------
# dim labels
@dataclass(frozen=True)
class ConvDimLabels:
    """``dim_labels=b01f_01io->b01f``: positions of batch/feature/spatial dims of input, kernel, output."""

    text: str
    input_batch: int
    input_feature: int
    input_spatial: tuple[int, ...]
    kernel_input_feature: int
    kernel_output_feature: int
    kernel_spatial: tuple[int, ...]
    output_batch: int
    output_feature: int
    output_spatial: tuple[int, ...]

    def __str__(self) -> str:
        return self.text


_DIM_LABELS_RE = re.compile(r"([0-9bf?]{2,})_([0-9io?]{2,})->([0-9bf?]{2,})")


@functools.lru_cache(maxsize=1024)
def parse_dim_labels(text: str) -> ConvDimLabels:
    """Decode convolution dim labels; raises AttrError when invalid (duplicate letters, spatial digits
    out of range, mismatched spatial counts)."""
    m = _DIM_LABELS_RE.fullmatch(text)
    if m is None:
        raise AttrError("expected dim_labels such as b01f_01io->b01f")
    parts = m.groups()

    def decode(s: str, a: str, b: str):
        for ch in set(s):
            if ch != "?" and s.count(ch) > 1:
                raise AttrError(f"dim_labels: {ch!r} appears twice in {s!r}")
        if a not in s or b not in s:
            raise AttrError(f"dim_labels: {s!r} needs {a!r} and {b!r}")
        digits = sorted((c, i) for i, c in enumerate(s) if c.isdigit())
        nsp = len(digits)
        if [int(c) for c, _ in digits] != list(range(nsp)):
            raise AttrError(f"dim_labels: spatial digits of {s!r} must be 0..{nsp - 1}")
        return s.index(a), s.index(b), tuple(i for _, i in digits)

    ib, if_, isp = decode(parts[0], "b", "f")
    ki, ko, ksp = decode(parts[1], "i", "o")
    ob, of, osp = decode(parts[2], "b", "f")
    if not (len(isp) == len(ksp) == len(osp)):
        raise AttrError("dim_labels: input, kernel and output need the same number of spatial dimensions")
    return ConvDimLabels(text, ib, if_, isp, ki, ko, ksp, ob, of, osp)


def _dim_labels(text: str) -> Raw:
    parse_dim_labels(text)
    return Raw(text)


# ---------------------------------------------------------------------------------------------
# frontend attributes
_FA_KEY_RE = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_.\-]*)=")
_DQ_RE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')


def _blob_end(text: str, pos: int) -> int:
    """Index just after the ``{...}`` blob starting at ``pos`` (double-quoted strings skipped):
    :func:`.lexical.brace_block_end`, its ValueError as an AttrError at ``pos``."""
    try:
        return brace_block_end(text, pos)
    except ValueError as exc:
        raise AttrError(str(exc), pos) from None


def _frontend_attributes(text: str) -> tuple[tuple[str, str], ...]:
    t = text.strip()
    if not (t.startswith("{") and t.endswith("}")):
        raise AttrError("expected frontend_attributes={key=\"value\",...}")
    inner = t[1:-1]
    out = []
    pos = 0
    n = len(inner)
    while True:
        while pos < n and inner[pos] in " \t\r\n":
            pos += 1
        if pos >= n:
            break
        m = _FA_KEY_RE.match(inner, pos)
        if m is None:
            raise AttrError("expected key=value in frontend_attributes", pos + 1)
        key = m.group(1)
        pos = m.end()
        while pos < n and inner[pos] in " \t\r\n":
            pos += 1
        if pos < n and inner[pos] == '"':
            s = _DQ_RE.match(inner, pos)
            if s is None:
                raise AttrError("unterminated string", pos + 1)
            value = unquote(s.group(0))
            pos = s.end()
        elif pos < n and inner[pos] == "{":
            end = _blob_end(inner, pos)
            value = inner[pos:end]
            pos = end
        else:
            raise AttrError("frontend attribute values are \"strings\" or {blobs}", pos + 1)
        out.append((key, value))
        while pos < n and inner[pos] in " \t\r\n":
            pos += 1
        if pos < n:
            if inner[pos] != ",":
                raise AttrError("expected ',' between frontend attributes", pos + 1)
            pos += 1
    return tuple(out)


def format_frontend_attributes(items) -> str:
    pairs = items.items() if isinstance(items, dict) else items
    return "{" + ",".join(f"{k}={format_blob_or_string(v)}" for k, v in pairs) + "}"


# ---------------------------------------------------------------------------------------------
# metadata
_META_FIELD_RE = re.compile(r'\s*,?\s*([A-Za-z_][A-Za-z0-9_]*)=("(?:[^"\\]|\\.)*"|\{[^{}]*\}|[^\s,}]+)')


@functools.lru_cache(maxsize=16384)
def parse_metadata(text: str) -> dict:
    """Fields of ``metadata={op_type="dot" op_name="jit(f)/dot" source_file="m.py" source_line=3 ...}``
    (space- or comma-separated): strings unquoted, integers as int, ``profile_type={1}`` as a tuple.
    Raises AttrError on malformed text. The IR keeps metadata as raw text; this decodes it on request."""
    t = text.strip()
    if not (t.startswith("{") and t.endswith("}")):
        raise AttrError("expected metadata={key=value ...}")
    inner = t[1:-1]
    out: dict = {}
    pos = 0
    while inner[pos:].strip(" \t\r\n,"):
        m = _META_FIELD_RE.match(inner, pos)
        if m is None:
            raise AttrError("malformed metadata field", pos + 1)
        key, val = m.group(1), m.group(2)
        if val.startswith('"'):
            out[key] = unquote(val)
        elif val.startswith("{"):
            out[key] = _int_list(val)
        else:
            try:
                out[key] = int(val)
            except ValueError:
                out[key] = val
        pos = m.end()
    return out


# ---------------------------------------------------------------------------------------------
# sharding
def _sharding(text: str):
    try:
        return HloSharding.parse(text)
    except HloSyntaxError as exc:
        raise AttrError(exc.message, max(0, exc.column - 1)) from None


# ---------------------------------------------------------------------------------------------
# names
_NAME_RE = re.compile(r"%?([A-Za-z_][A-Za-z0-9_.\-]*)")


def _computation_ref(text: str):
    t = text.strip()
    if t.startswith("{"):
        return InlineBody(t)
    m = _NAME_RE.fullmatch(t)
    if m is None:
        raise AttrError("expected a computation name")
    return NameRef(m.group(1))


def _computation_list(text: str):
    t = text.strip()
    if not (t.startswith("{") and t.endswith("}")):
        raise AttrError("expected {comp1, comp2}")
    inner = t[1:-1].strip()
    if not inner:
        return ()
    if inner.startswith("{"):  # inline bodies
        out = []
        pos = 0
        while pos < len(inner):
            if inner[pos] in " \t\r\n,":
                pos += 1
                continue
            if inner[pos] != "{":
                raise AttrError("expected an inline computation {...}", pos + 1)
            end = _blob_end(inner, pos)
            out.append(InlineBody(inner[pos:end]))
            pos = end
        return tuple(out)
    out = []
    for part in inner.split(","):
        m = _NAME_RE.fullmatch(part.strip())
        if m is None:
            raise AttrError(f"expected a computation name, got {part.strip()!r}")
        out.append(NameRef(m.group(1)))
    return tuple(out)


def _name_list(text: str) -> tuple[str, ...]:
    t = text.strip()
    if not (t.startswith("{") and t.endswith("}")):
        raise AttrError("expected {%a, %b}")
    out = []
    for part in t[1:-1].split(","):
        if not part.strip():
            continue
        m = _NAME_RE.fullmatch(part.strip())
        if m is None:
            raise AttrError(f"expected an instruction name, got {part.strip()!r}")
        out.append(m.group(1))
    if not out:
        raise AttrError("control-predecessors={} must name at least one instruction")
    return tuple(out)


def _shape(text: str):
    try:
        return parse_shape(text.strip())
    except HloSyntaxError as exc:
        raise AttrError(exc.message, max(0, exc.column - 1)) from None


def _shape_list(text: str):
    t = text.strip()
    if not (t.startswith("{") and t.endswith("}")):
        raise AttrError("expected {shape, shape, ...}")
    # split at top-level commas
    parts, depth, start = [], 0, 1
    for i, c in enumerate(t[1:-1], 1):
        if c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(t[start:i])
            start = i + 1
    if t[start:-1].strip():
        parts.append(t[start:-1])
    return tuple(_shape(p) for p in parts)


# ---------------------------------------------------------------------------------------------
_DECODERS = {}
for _k in INT_LIST_KEYS:
    _DECODERS[_k] = _int_list
for _k in INT_KEYS:
    _DECODERS[_k] = _int
for _k in BOOL_KEYS:
    _DECODERS[_k] = _bool
for _k in STRING_KEYS:
    _DECODERS[_k] = _string
for _k in COMPUTATION_KEYS:
    _DECODERS[_k] = _computation_ref
for _k in COMPUTATION_LIST_KEYS:
    _DECODERS[_k] = _computation_list
for _k in SHAPE_KEYS:
    _DECODERS[_k] = _shape
_DECODERS.update({
    "replica_groups": _decode_replica_groups,
    "source_target_pairs": _int_list_list,
    "sharding": _sharding,
    "slice": _slice,
    "padding": _padding,
    "window": _window,
    "dim_labels": _dim_labels,
    "frontend_attributes": _frontend_attributes,
    "control-predecessors": _name_list,
    "operand_layout_constraints": _shape_list,
})


def _slice_sizes(text: str):
    t = text.strip()
    if t[1:].lstrip().startswith("{"):
        return _int_list_list(t)   # collective-permute: list of lists
    return _int_list(t)            # gather


_DECODERS["slice_sizes"] = _slice_sizes


@functools.lru_cache(maxsize=65536)
def decode_attr(key: str, text: str):
    """Decode the value text of attribute ``key`` (cached). Raises :class:`AttrError`.

    Returns: tuples of ints for int lists, int, bool, str (decoded strings; backend_config blobs
    verbatim), :class:`ReplicaGroups`, tuple of pairs (source_target_pairs), HloSharding,
    :class:`SliceSpec`, :class:`PaddingConfig`, :class:`Window`, :class:`Shape`, a tuple of
    ``(key, value)`` pairs for frontend_attributes (the IR turns it into a dict), :class:`NameRef`
    / :class:`InlineBody` for computations, a tuple of names for control-predecessors, and
    :class:`Raw` for everything else.
    """
    dec = _DECODERS.get(key)
    if dec is None:
        return Raw(text)
    return dec(text)


def format_attr(key: str, value, name_of) -> str:
    """Text of an attribute value. ``name_of(obj)`` prints a computation or instruction reference.

    Accepts what :func:`decode_attr` returns and the obvious Python equivalents (lists for int lists,
    lists of lists for replica groups / source_target_pairs, a dict for frontend_attributes)."""
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if key in STRING_KEYS:
        return format_blob_or_string(value) if key == "backend_config" else quote(value)
    if key == "frontend_attributes":
        return format_frontend_attributes(value)
    if key == "control-predecessors" or key in COMPUTATION_LIST_KEYS:
        return "{" + ", ".join(name_of(v) for v in value) + "}"
    if key in COMPUTATION_KEYS:
        return name_of(value)
    if key == "operand_layout_constraints":
        return "{" + ", ".join(str(s) for s in value) + "}"
    if isinstance(value, (list, tuple)):
        if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value):
            return "{" + ",".join(str(int(v)) for v in value) + "}"
        if all(isinstance(v, (list, tuple)) for v in value):
            return _canon_groups([[int(x) for x in v] for v in value])
    if type(value) is str:
        return quote(value)
    return str(value)


# ---------------------------------------------------------------------------------------------
# module header: input_output_alias / buffer_donor (checked as XLA's parser does)
_ALIAS_TOKEN_RE = re.compile(r"\s*(?:(-?[0-9]+)|([A-Za-z_][A-Za-z0-9_\-]*)|(.))", re.S)
_IOA_FORMAT = ("Expected format: <output_shape_index>: (<input_param>, <input_param_shape_index>) OR "
               "<output_shape_index>: <input_param>")
_BD_FORMAT = "Expected format: (<input_param>, <input_param_shape_index>)"


def _alias_tokens(text: str) -> list[tuple[str, str, int]]:
    """(kind 'int'|'word'|'punct'|'end', text, offset) of an alias-list value."""
    out = []
    pos = 0
    n = len(text)
    while pos < n:
        m = _ALIAS_TOKEN_RE.match(text, pos)
        if m is None or m.lastindex is None:   # trailing whitespace
            break
        kind = ("int", "word", "punct")[m.lastindex - 1]
        out.append((kind, m.group(m.lastindex), m.start(m.lastindex)))
        pos = m.end()
    out.append(("end", "", len(text)))
    return out


class _AliasReader:
    def __init__(self, text: str, fmt: str):
        self.toks = _alias_tokens(text)
        self.i = 0
        self.fmt = fmt

    def peek(self):
        return self.toks[self.i]

    def take(self, value: str | None = None, kind: str | None = None):
        t = self.toks[self.i]
        if (value is not None and t[1] != value) or (kind is not None and t[0] != kind):
            raise AttrError(self.fmt, max(t[2] - 1, 0))   # XLA points one character before the token
        self.i += 1
        return t

    def shape_index(self) -> None:
        self.take("{")
        if self.peek()[1] == "}":
            self.take("}")
            return
        while True:
            self.take(kind="int")
            if self.peek()[1] == ",":
                self.take(",")
                continue
            self.take("}")
            return


def check_input_output_alias(text: str) -> None:
    """Raise :class:`AttrError` unless ``text`` is ``{ {out}: (param, {index}[, may-alias|must-alias]),
    ... }`` (a trailing comma is allowed), in XLA's words ("Expected format: ...", "Unexpected
    aliasing kind; expected SYSTEM or USER")."""
    r = _AliasReader(text, _IOA_FORMAT)
    r.take("{")
    while r.peek()[1] != "}":
        r.shape_index()
        r.take(":")
        r.take("(")
        r.take(kind="int")
        r.take(",")
        r.shape_index()
        if r.peek()[1] == ",":
            r.take(",")
            kind = r.peek()
            if kind[1] not in ("may-alias", "must-alias"):
                raise AttrError("Unexpected aliasing kind; expected SYSTEM or USER", kind[2] + len(kind[1]) - 1)
            r.take()
        r.take(")")
        if r.peek()[1] == ",":
            r.take(",")
    r.take("}")
    r.take(kind="end")


def check_buffer_donor(text: str) -> None:
    """Raise :class:`AttrError` unless ``text`` is ``{ (param, {index}), ... }`` (XLA's wording)."""
    r = _AliasReader(text, _BD_FORMAT)
    r.take("{")
    while r.peek()[1] != "}":
        r.take("(")
        r.take(kind="int")
        r.take(",")
        r.shape_index()
        r.take(")")
        if r.peek()[1] == ",":
            r.take(",")
    r.take("}")
    r.take(kind="end")


def parse_buffer_donor(text: str) -> list[tuple[int, tuple[int, ...]]]:
    """``buffer_donor={ (0, {}), (2, {1}) }`` (the module header: parameters whose buffers the caller
    donates, jax's ``donate_argnums`` of sharded arguments) as ``[(param_number, param_index)]`` in written
    order; ``[]`` for an empty or absent value.  Raises :class:`AttrError` for text
    :func:`check_buffer_donor` refuses."""
    if not text or not str(text).strip():
        return []
    check_buffer_donor(str(text))
    out = []
    for m in re.finditer(r"\(\s*(\d+)\s*,\s*\{([0-9,\s]*)\}\s*\)", str(text)):
        out.append((int(m.group(1)), tuple(int(x) for x in m.group(2).split(",") if x.strip())))
    return out


#: custom-call ``api_version=`` names XLA's parser knows (``API_VERSION_UNSPECIFIED`` parses as a name
#: but XLA refuses it once the instruction is built: "Invalid API version")
API_VERSIONS = frozenset({"API_VERSION_UNSPECIFIED", "API_VERSION_ORIGINAL", "API_VERSION_STATUS_RETURNING",
                          "API_VERSION_STATUS_RETURNING_UNIFIED", "API_VERSION_TYPED_FFI"})


def _api_version(text: str) -> Raw:
    t = text.strip()
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", t) is None:
        raise AttrError("expects custom-call API version")
    if t not in API_VERSIONS:
        raise AttrError(f"expects custom-call API version but sees: {t}, error: Unknown API version")
    return Raw(t)


_DECODERS["api_version"] = _api_version
