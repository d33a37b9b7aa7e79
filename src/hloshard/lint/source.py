"""Text-level view of an HLO file for the linter: sharding sites, suppression comments, header.

The parser (``hloshard.hlo``) rejects some shardings outright (an iota tile assignment whose reshape
product differs from the tile product, a transpose that is not a permutation, an explicit device
list of the wrong length), and a file it rejects has no IR.  The linter still wants to say *what* is
wrong with such a sharding, with the right code, so it reads every ``sharding={...}`` attribute
itself with the lenient reader below (:func:`parse_sharding_text`), which records structural
problems instead of raising.  Shardings that cannot be turned into a tile assignment are then
replaced by ``{unknown}`` (padded with spaces, so every line and column stays where it was) before
the text is handed to the real parser (:func:`sanitize`).

Everything here is a single regular-expression pass over the text (about 30 ms per MB), plus a
cached parse per distinct sharding text.
"""

from __future__ import annotations

import bisect
import math
import re
from itertools import accumulate
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Optional

import numpy as np

# one pass: strings and comments are skipped, `sharding=` attributes and suppression comments kept.
_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*"' + r"|'[^'\\\n]*(?:\\.[^'\\\n]*)*'"
_BLOCK = r"/\*[^*]*\*+(?:[^/*][^*]*\*+)*/"
_SHARDING_KEY = r"(?<![A-Za-z0-9_.\-])sharding="
_PORTABLE_SCAN = re.compile(
    _STRING + r"|(?P<comment>" + _BLOCK + r")|//[^\n\r]*|(?P<sharding>" + _SHARDING_KEY + ")")


def _possessive_scan() -> "re.Pattern[str] | None":
    """The fast scanner, or None where the ``re`` module cannot be trusted with it.

    Each match swallows everything uninteresting (code, strings) up to the next comment,
    `sharding=` or the end of the text with a possessive loop, so the Python-level iteration count
    is the number of sharding attributes plus comments, not the number of strings.  Possessive
    quantifiers arrived in Python 3.11, but 3.11.0-3.11.4 mis-execute this pattern (it silently
    finds nothing), so the pattern is checked at import against the portable scanner on a sample
    that has every token kind, and dropped when the two disagree.
    """
    try:
        pattern = re.compile(
            r"(?:[^\"'/s]+|s(?!harding=)|(?<=[A-Za-z0-9_.\-])sharding=|/(?![*/])|" + _STRING + r"|[\"'])*+"
            r"(?:(?P<comment>" + _BLOCK + r")|//[^\n\r]*|/\*|(?P<sharding>sharding=)|\Z)"
        )
    except re.error:  # Python 3.10: no possessive quantifiers
        return None
    if _scan_events(pattern, _SELF_TEST) != _scan_events(_PORTABLE_SCAN, _SELF_TEST):
        return None
    return pattern


def _scan_events(pattern: "re.Pattern[str]", text: str) -> list[tuple[str, int]]:
    """(group, offset) of every comment / sharding match: what :func:`scan` consumes."""
    return [(m.lastgroup, m.start(m.lastgroup)) for m in pattern.finditer(text)
            if m.lastgroup in ("comment", "sharding")]


_SELF_TEST = (
    'HloModule m, num_partitions=2\n'
    'ENTRY e {\n'
    '  p = f32[8] parameter(0), sharding={devices=[2]<=[2]} /* hloshard: ignore[HS201] */\n'
    '  s = s32[] constant(0), frontend_attributes={a="sharding={replicated}"}, xsharding={x}\n'
    "  // sharding={maximal device=0}\n"
    "  q = f32[8] copy(p), metadata={op_name='s/t'}, sharding={replicated} /* sharding= */\n"
    '  ROOT r = f32[8] add(p, q), sharding={devices=[2]0,1}\n'
    '}\n'
)

_FAST_SCAN = _possessive_scan()
#: the scanner in use: the possessive one where it works, else one match per token.
_SCAN = _FAST_SCAN or _PORTABLE_SCAN
_IGNORE = re.compile(r"/\*\s*hloshard\s*:\s*ignore\s*\[([^\]]*)\]\s*\*/", re.I)
_HEADER = re.compile(r"\A(?:\s|//[^\n]*\n|/\*.*?\*/)*HloModule\b([^\n]*)", re.S)
_HEADER_INT = re.compile(r"(?<![\w.\-])(num_partitions|replica_count)=(\d+)")
_BRACE = re.compile(r'[{}]|"(?:[^"\\]|\\.)*"|/\*.*?\*/', re.S)


# ------------------------------------------------------------------------------------------------
# lenient sharding reader
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ShardingSpec:
    """A sharding as written, read leniently (nothing is normalized).

    kind: 'replicated' | 'manual' | 'unknown' | 'unreduced' | 'maximal' | 'tiled' | 'tuple' |
    'named' (the 2026 mesh form, not checked) | 'unparsed' (not understood; the parser will say why).
    ``tile_dims`` is the full tile-assignment shape (data dims, then the replicate / subgroup dims).
    ``devices`` is the flattened device list, or None when the tile assignment cannot be built
    (``problems`` then says why) or is an iota of more than :data:`MAX_MATERIALISED_DEVICES` ids
    (the parser rejects those; the validity rules then work from the header numbers).
    ``num_devices`` is the number of device ids the tile assignment holds (``prod(tile_dims)``)
    whenever ``problems`` is empty.
    """

    kind: str
    tile_dims: tuple[int, ...] | None = None
    explicit: tuple[int, ...] | None = None
    iota_reshape: tuple[int, ...] | None = None
    iota_perm: tuple[int, ...] | None = None
    last_tile_dim_replicate: bool = False
    last_tile_dims: tuple[str, ...] = ()
    maximal_device: int | None = None
    elements: tuple["ShardingSpec", ...] = ()
    problems: tuple[str, ...] = ()
    devices: tuple[int, ...] | None = None
    num_devices: int | None = None

    @property
    def is_iota(self) -> bool:
        """The tile assignment is written ``<=[reshape]T(perm)``: a permutation of
        ``0..num_devices-1`` (no id twice, none negative) when it is structurally valid."""
        return self.iota_reshape is not None

    @property
    def num_subgroup_dims(self) -> int:
        """Trailing tile dims that are not data dims (1 for last_tile_dim_replicate, k for
        last_tile_dims={k types})."""
        return (1 if self.last_tile_dim_replicate else 0) + len(self.last_tile_dims)

    @property
    def is_tiled(self) -> bool:
        return self.kind == "tiled"

    def leaves(self) -> tuple["ShardingSpec", ...]:
        return self.elements if self.kind == "tuple" else (self,)

    @property
    def structurally_valid(self) -> bool:
        """True when every element's tile assignment can be built (no HS102 problem)."""
        return all(not leaf.problems for leaf in self.leaves())

    def tile_array(self) -> np.ndarray | None:
        """The tile assignment as an int64 array shaped ``tile_dims`` (None when invalid)."""
        if self.devices is None or self.tile_dims is None:
            return None
        return np.asarray(self.devices, dtype=np.int64).reshape(self.tile_dims)


#: the largest iota tile assignment the lenient reader expands into a device list (the parser's
#: ``hloshard.hlo.attributes.MAX_DEVICES``); larger ones keep ``devices=None``.
MAX_MATERIALISED_DEVICES = 1_000_000


_TOKEN = re.compile(
    r"(?P<ws>\s+|/\*.*?\*/)"
    r"|(?P<str>\"(?:[^\"\\]|\\.)*\")"
    r"|(?P<key>[A-Za-z_][A-Za-z0-9_.\-]*=)"
    r"|(?P<word>[A-Za-z_][A-Za-z0-9_.\-]*)"
    r"|(?P<int>-?\d+)"
    r"|(?P<punct><=|[{}\[\](),:])"
    r"|(?P<other>.)",
    re.S,
)


class _Unparsed(Exception):
    pass


class _Reader:
    def __init__(self, text: str):
        self.toks = [(m.lastgroup, m.group()) for m in _TOKEN.finditer(text) if m.lastgroup != "ws"]
        self.i = 0

    def peek(self, k: int = 0):
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else (None, "")

    def next(self):
        tok = self.peek()
        if tok[0] is None:
            raise _Unparsed("unexpected end")
        self.i += 1
        return tok

    def expect(self, text: str):
        tok = self.next()
        if tok[1] != text:
            raise _Unparsed(f"expected {text!r}")

    def ints(self, close: str) -> tuple[int, ...]:
        """comma-separated ints up to (and consuming) `close`"""
        out = []
        if self.peek()[1] == close:
            self.next()
            return ()
        while True:
            kind, text = self.next()
            if kind != "int":
                raise _Unparsed("expected an integer")
            out.append(int(text))
            kind, text = self.next()
            if text == close:
                return tuple(out)
            if text != ",":
                raise _Unparsed("expected ','")

    def skip_braced(self):
        self.expect("{")
        depth = 1
        while depth:
            _, text = self.next()
            if text == "{":
                depth += 1
            elif text == "}":
                depth -= 1


def _iota_devices(reshape: tuple[int, ...], perm: tuple[int, ...] | None) -> list[int]:
    arr = np.arange(int(np.prod(reshape, dtype=np.int64)), dtype=np.int64).reshape(reshape)
    if perm is not None:
        arr = arr.transpose(perm)
    return arr.reshape(-1).tolist()


def _single(reader: _Reader) -> ShardingSpec:
    """Read the parts of one non-tuple sharding up to (and consuming) its closing brace."""
    kind = None
    tile_dims = explicit = reshape = perm = None
    ltdr = False
    ltd: tuple[str, ...] = ()
    device = None
    while True:
        tk, text = reader.peek()
        if text == "}":
            reader.next()
            break
        if tk is None:
            raise _Unparsed("unterminated sharding")
        reader.next()
        if tk == "word" and text in ("replicated", "manual", "unknown", "unreduced", "maximal"):
            kind = text
        elif tk == "word" and text in ("mesh", "maximal_mesh"):
            # 2026 named form: skip to the closing brace of this sharding, not checked
            depth = 0
            while True:
                _, t = reader.next()
                if t == "{":
                    depth += 1
                elif t == "}":
                    if depth == 0:
                        return ShardingSpec(kind="named")
                    depth -= 1
        elif tk == "word" and text == "last_tile_dim_replicate":
            ltdr = True
        elif tk == "word" and text in ("shard_as", "shard_like"):
            if reader.next()[0] != "int":
                raise _Unparsed("expected an integer")
        elif tk == "key" and text == "device=":
            k, t = reader.next()
            if k != "int":
                raise _Unparsed("expected a device id")
            device = int(t)
        elif tk == "key" and text == "devices=":
            reader.expect("[")
            tile_dims = reader.ints("]")
            if reader.peek()[1] == "<=":
                reader.next()
                reader.expect("[")
                reshape = reader.ints("]")
                if reader.peek() == ("word", "T"):
                    reader.next()
                    reader.expect("(")
                    perm = reader.ints(")")
            else:
                devs = []
                while reader.peek()[0] == "int":
                    devs.append(int(reader.next()[1]))
                    if reader.peek()[1] == "," and reader.peek(1)[0] == "int":
                        reader.next()
                    else:
                        break
                explicit = tuple(devs)
            kind = kind or "tiled"
        elif tk == "key" and text == "last_tile_dims=":
            reader.expect("{")
            types = []
            while True:
                k, t = reader.next()
                if t == "}":
                    break
                if t == ",":
                    continue
                if k != "word":
                    raise _Unparsed("expected a subgroup type")
                types.append(t)
            ltd = tuple(types)
        elif tk == "key" and text == "metadata=":
            reader.skip_braced()
        else:
            raise _Unparsed(f"unexpected {text!r}")
    if kind is None:
        raise _Unparsed("no sharding kind")
    if kind == "maximal":
        if device is None:
            raise _Unparsed("maximal without device")
        return ShardingSpec(kind="maximal", maximal_device=device)
    if kind != "tiled":
        return ShardingSpec(kind=kind)
    problems = []
    devices = None
    tile_product = math.prod(tile_dims) if tile_dims else 0
    if not tile_dims:
        problems.append("the tile assignment has no dimensions")
    elif any(d <= 0 for d in tile_dims):
        problems.append(f"tile assignment dimensions [{','.join(map(str, tile_dims))}] must be positive")
    elif reshape is not None:
        rprod = math.prod(reshape) if reshape else 0
        if any(d <= 0 for d in reshape):
            problems.append(f"iota reshape dimensions [{','.join(map(str, reshape))}] must be positive")
        elif rprod != tile_product:
            problems.append(
                f"iota tile assignment [{','.join(map(str, tile_dims))}]<=[{','.join(map(str, reshape))}]: "
                f"the reshape dims hold {rprod} devices but the tile dims hold {tile_product}")
        if perm is not None and sorted(perm) != list(range(len(reshape))):
            problems.append(
                f"iota transpose T({','.join(map(str, perm))}) is not a permutation of "
                f"0..{len(reshape) - 1} (the reshape has {len(reshape)} dims)")
        elif perm is None and len(reshape) > 1:
            problems.append(
                f"iota reshape [{','.join(map(str, reshape))}] has {len(reshape)} dims but no transpose T(...)")
        elif perm is not None and len(reshape) == 1:
            problems.append(
                f"iota reshape [{reshape[0]}] has one dim and takes no transpose T({','.join(map(str, perm))})")
        if not problems and tile_product <= MAX_MATERIALISED_DEVICES:
            devices = tuple(_iota_devices(reshape, perm))
    else:
        if len(explicit) != tile_product:
            problems.append(
                f"tile assignment [{','.join(map(str, tile_dims))}] needs {tile_product} device ids "
                f"but {len(explicit)} are listed")
        else:
            devices = explicit
    return ShardingSpec(kind="tiled", tile_dims=tuple(tile_dims), explicit=explicit, iota_reshape=reshape,
                        iota_perm=perm, last_tile_dim_replicate=ltdr, last_tile_dims=ltd,
                        problems=tuple(problems), devices=devices,
                        num_devices=None if problems else tile_product)


@lru_cache(maxsize=65536)
def parse_sharding_text(text: str) -> ShardingSpec:
    """Read the text of one sharding attribute value (``{...}``, braces included) leniently.

    Never raises: text the reader does not understand gives ``kind='unparsed'`` (the real parser
    reports it as a syntax error). Structural problems of tile assignments (HS102) are recorded in
    ``problems`` and leave ``devices`` None.
    """
    reader = _Reader(text)
    try:
        reader.expect("{")
        nxt = reader.peek()[1]
        if nxt in ("{", "}"):
            elements = []
            if nxt == "}":
                reader.next()
            else:
                while True:
                    reader.expect("{")
                    elements.append(_single(reader))
                    t = reader.next()[1]
                    if t == "}":
                        break
                    if t != ",":
                        raise _Unparsed("expected ',' in a tuple sharding")
            spec = ShardingSpec(kind="tuple", elements=tuple(elements))
        else:
            spec = _single(reader)
        if reader.peek()[0] is not None:
            raise _Unparsed("trailing text")
        return spec
    except _Unparsed:
        return ShardingSpec(kind="unparsed")


# ------------------------------------------------------------------------------------------------
# the file scan
# ------------------------------------------------------------------------------------------------
@dataclass
class ShardingSite:
    """One ``sharding=`` attribute in the source: where it is, what it says, which instruction."""

    offset: int            # offset of 's' of sharding=
    line: int
    column: int
    value_start: int       # offset of the opening brace
    value_end: int         # offset after the closing brace
    text: str              # the value text, braces included
    spec: ShardingSpec
    instruction: Optional[object] = None   # hloshard.hlo.ir.Instruction, set after parsing


@dataclass
class IgnoreComment:
    offset: int
    line: int
    codes: tuple[str, ...]


@dataclass
class SourceScan:
    text: str
    line_starts: list[int]
    sites: list[ShardingSite] = field(default_factory=list)
    ignores: list[IgnoreComment] = field(default_factory=list)
    num_partitions: int | None = None      # from the HloModule header, when written
    replica_count: int | None = None

    def linecol(self, offset: int) -> tuple[int, int]:
        """1-based (line, column) of a character offset."""
        i = bisect.bisect_right(self.line_starts, offset) - 1
        return i + 1, offset - self.line_starts[i] + 1

    def offset(self, line: int, column: int) -> int:
        if line <= 0:
            return 0
        line = min(line, len(self.line_starts))
        return self.line_starts[line - 1] + max(column - 1, 0)


def _line_starts(text: str) -> list[int]:
    """Offsets where lines start. Only ``\\n`` ends a line, as in the parser's (lark's) line count,
    so that positions agree with ``Instruction.line``."""
    return [0, *accumulate(len(line) + 1 for line in text.split("\n")[:-1])]


def _match_brace(text: str, start: int) -> int:
    """Offset after the brace matching the '{' at `start` (strings and comments skipped); -1 when
    unbalanced."""
    # fast path: a flat value such as {devices=[2,4]<=[8]} (no nested brace, string or comment)
    close = text.find("}", start)
    if close > 0:
        inner = text[start + 1:close]
        if "{" not in inner and '"' not in inner and "/*" not in inner:
            return close + 1
    depth = 0
    for m in _BRACE.finditer(text, start):
        tok = m.group()
        if tok == "{":
            depth += 1
        elif tok == "}":
            depth -= 1
            if depth == 0:
                return m.end()
    return -1


def parse_codes(text: str) -> tuple[str, ...]:
    return tuple(c.strip().upper() for c in re.split(r"[,\s]+", text) if c.strip())


def scan(text: str) -> SourceScan:
    """One pass over the file: sharding sites (with their lenient parse), suppression comments,
    and num_partitions / replica_count from the header."""
    result = SourceScan(text=text, line_starts=_line_starts(text))
    header = _HEADER.match(text)
    if header:
        for key, value in _HEADER_INT.findall(header.group(1)):
            if key == "num_partitions":
                result.num_partitions = int(value)
            else:
                result.replica_count = int(value)
    for m in _SCAN.finditer(text):
        if m.lastgroup == "comment":
            ig = _IGNORE.fullmatch(m.group("comment"))
            if ig:
                start = m.start("comment")
                line, _ = result.linecol(start)
                result.ignores.append(IgnoreComment(start, line, parse_codes(ig.group(1))))
        elif m.lastgroup == "sharding":
            key_start = m.start("sharding")
            pos = m.end()
            while pos < len(text) and text[pos] in " \t":
                pos += 1
            if pos >= len(text) or text[pos] != "{":
                continue
            end = _match_brace(text, pos)
            if end < 0:
                continue
            value = text[pos:end]
            line, column = result.linecol(key_start)
            result.sites.append(ShardingSite(key_start, line, column, pos, end, value, parse_sharding_text(value)))
    return result


def sanitize(text: str, sites: list[ShardingSite], extra: list[ShardingSite] = ()) -> str:
    """Replace every sharding whose tile assignment cannot be built (and every site in ``extra``)
    by ``{unknown}`` padded with spaces (newlines kept), so that the parser accepts the rest and all
    positions are unchanged."""
    chosen = {id(s) for s in extra}
    bad = [s for s in sites if not s.spec.structurally_valid or id(s) in chosen]
    if not bad:
        return text
    parts = []
    last = 0
    for site in bad:
        original = text[site.value_start:site.value_end]
        filler = "".join(c if c in "\r\n" else " " for c in original[len("{unknown}"):])
        lost_newlines = "".join(c for c in original[:len("{unknown}")] if c in "\r\n")
        parts.append(text[last:site.value_start])
        parts.append("{unknown}" + lost_newlines + filler)
        last = site.value_end
    parts.append(text[last:])
    return "".join(parts)
