"""Hostile numbers in HLO text: the parser raises HloSyntaxError (never ValueError/MemoryError) and
never expands an iota / mesh form naming more than MAX_DEVICES devices."""

from __future__ import annotations

import time
import tracemalloc

import pytest

from hloshard.errors import HloSyntaxError
from hloshard.hlo import parse_module
from hloshard.hlo.attributes import MAX_DEVICES

ADD = "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n\n"


def _module(line: str, header: str = "num_partitions=8") -> str:
    return f"HloModule m, {header}\n\n{ADD}ENTRY e {{\n  p = f32[8] parameter(0)\n  {line}\n}}\n"


BIG = "99999999999999999999999"   # > int64

CASES = {
    "iota groups > cap": ("ROOT a = f32[8] all-reduce(p), replica_groups=[2,99999999999]<=[199999999998], "
                          "to_apply=add", "too many devices", "replica_groups="),
    "iota groups just over cap": (f"ROOT a = f32[8] all-reduce(p), replica_groups=[1,{MAX_DEVICES + 1}]"
                                  f"<=[{MAX_DEVICES + 1}], to_apply=add", "too many devices", "replica_groups="),
    "iota groups > int64": (f"ROOT a = f32[8] all-reduce(p), replica_groups=[1,{BIG}]<=[{BIG}], to_apply=add",
                            r"integer 9+ is out of range \(int64\)", "replica_groups="),
    "mesh groups > cap": ('ROOT a = f32[8] all-reduce(p), replica_groups=mesh["x"=99999999999,"y"=4] {"y"}, '
                          "to_apply=add", "too many devices", "replica_groups="),
    "mesh device_ids > int64": (f'ROOT a = f32[8] all-reduce(p), replica_groups=mesh["x"=2] {{"x"}} '
                                f"device_ids=[{BIG},1], to_apply=add", "device_ids", "replica_groups="),
    "tile iota > cap": ("ROOT a = f32[8] negate(p), sharding={devices=[99999999999,2]<=[199999999998]}",
                        "too many devices", "<=["),
    "tile iota > int64": (f"ROOT a = f32[8] negate(p), sharding={{devices=[{BIG}]<=[{BIG}]}}",
                          "too many devices", "<=["),
    "dimension > int64": (f"ROOT a = f32[{BIG}] negate(p)", "too large", f"f32[{BIG}]"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_numbers_are_syntax_errors_at_the_attribute(name):
    line, message, anchor = CASES[name]
    text = _module(line)
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(HloSyntaxError, match=message) as info:
            parse_module(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # hang guard only (speed is benchmarks/parse_bench.py's): a linear-time failure takes milliseconds
    assert time.perf_counter() - t0 < 120, "the parser hung on hostile input"
    assert peak < 50 * 2**20, f"parse allocated {peak} bytes before failing"
    err = info.value
    lines = text.splitlines()
    assert err.line == len(lines) - 1   # the instruction's line
    assert lines[err.line - 1].find(anchor) + 1 <= err.column


@pytest.mark.parametrize("header", ["num_partitions=0", f"num_partitions={BIG}", "replica_count=2000000"])
def test_device_counts_in_the_header_are_bounded(header):
    with pytest.raises(HloSyntaxError, match="between 1 and"):
        parse_module(_module("ROOT a = f32[8] negate(p)", header))


def test_groups_at_the_cap_still_parse():
    m = parse_module(_module("ROOT a = f32[8] all-reduce(p), replica_groups=[1000,1000]<=[1000,1000]T(1,0), "
                             "to_apply=add", "num_partitions=1000000"))
    rg = m.entry.root.attrs["replica_groups"]
    groups = rg.groups
    assert len(groups) == 1000 and groups[1][:3] == [1, 1001, 2001]


@pytest.mark.parametrize("line, message", [
    ('ROOT a = f32[8] all-reduce(p), replica_groups=mesh["x"=2,"y"=0] {"y"}, to_apply=add', "sizes must be positive"),
    (f"ROOT a = f32[8] all-reduce(p), channel_id={BIG}, replica_groups={{}}, to_apply=add", "out of range"),
    (f"ROOT a = f32[8] all-reduce(p), replica_groups={{{{0,{BIG}}}}}, to_apply=add", "out of range"),
    (f"ROOT a = f32[8] slice(p), slice={{[0:{BIG}]}}", "out of range"),
    (f"ROOT a = f32[8] broadcast(p), dimensions={{{BIG}}}", "out of range"),
    (f"ROOT a = f32[8] pad(p, p), padding={BIG}_0", "out of range"),
    (f"ROOT a = f32[8] reduce-window(p, p), window={{size={BIG}}}, to_apply=add", "window field"),
    (f"ROOT a = f32[8] parameter({BIG})", "out of range"),
])
def test_integers_beyond_int64_and_zero_mesh_axes_are_syntax_errors(line, message):
    with pytest.raises(HloSyntaxError, match=message):
        parse_module(_module(line))


@pytest.mark.parametrize("layout", ["{1\n0}", "{1 0}"])
def test_layout_numbers_without_commas_are_syntax_errors(layout):
    """Found by mutation fuzzing: int("1\\n0") used to escape as ValueError."""
    text = f"HloModule m\n\nENTRY e {{\n  ROOT p = f32[2,2]{layout} parameter(0)\n}}\n"
    with pytest.raises(HloSyntaxError, match="malformed layout"):
        parse_module(text)


def test_control_characters_are_not_echoed_raw():
    """The error's context line shows a control character (NUL, ESC) as '?', one column, the caret under it (round
    30's fresh-clone check: a file of NULs had 200 raw NUL bytes written to the terminal)."""
    for junk in ("\x00\x00\x00", "\x1b[2J"):
        text = f"HloModule m\n\nENTRY e {{\n  p = f32[4] parameter(0)\n  {junk}x\n}}\n"
        with pytest.raises(HloSyntaxError) as exc:
            parse_module(text, "c.hlo")
        shown = str(exc.value)
        assert "\x00" not in shown and "\x1b" not in shown, repr(shown)
        context, caret = shown.splitlines()[1:3]
        assert context.strip().startswith("?") and context[len(caret.rstrip()) - 1] == "?", (context, caret)
