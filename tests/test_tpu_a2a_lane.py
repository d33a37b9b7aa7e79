"""The lane rule of a resharding all-to-all on the TPU (:func:`hloshard.cost.tpu_layout.all_to_all_lane_flat`):
which all-to-alls libtpu 0.0.42.1 exchanges as a lane-flat buffer.  The observations are stored in
``benchmarks/measured/tpu_r37/a2a_lane.json`` (round 33's 40 stored plans per chip, every all-to-all of their
optimised programs; four probe sets compiled ahead of time for ``v5e:2x4``); one test compiles fresh probes
with libtpu when it is installed."""

from __future__ import annotations

import json
import pathlib
import re

import pytest

from hloshard.cost.tpu_layout import all_to_all_chunk, all_to_all_lane_flat, lane_use

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA = json.loads((ROOT / "benchmarks" / "measured" / "tpu_r37" / "a2a_lane.json").read_text())


def test_lane_use_is_the_filled_share_of_whole_lane_rows():
    assert lane_use(64) == 0.5
    assert lane_use(96) == 0.75
    assert lane_use(128) == 1.0
    assert lane_use(130) == pytest.approx(130 / 256)
    with pytest.raises(ValueError):
        lane_use(0)


def test_the_piece_is_the_split_dim_over_k_rounded_up():
    assert all_to_all_chunk([64, 256], 1, 4) == [64, 64]
    assert all_to_all_chunk([1024, 64], 0, 4) == [256, 64]
    assert all_to_all_chunk([10, 6], 1, 4) == [10, 2]
    with pytest.raises(ValueError):
        all_to_all_chunk([8, 8], 2, 4)
    with pytest.raises(ValueError):
        all_to_all_lane_flat([])


@pytest.mark.parametrize("chip", ["v5e", "v5p", "v6e"])
def test_every_all_to_all_of_the_stored_plans_follows_the_rule(chip):
    """Round 33's 40 plans per chip (samples, heads, ho: GSPMD's and solve's) as libtpu compiled them: the
    piece's dims read off the optimised text (the flattening reshape's source less its exchanged dim, or the
    all-to-all's own shape less its dimension), flat when a reshape to a ``T(s,128)`` buffer feeds it."""
    rows = DATA["programs"][chip]
    assert len(rows) >= 95
    flat = [r for r in rows if r[3]]
    assert flat and len(flat) < len(rows)          # both outcomes are in the data
    wrong = [r for r in rows if all_to_all_lane_flat(r[2]) != bool(r[3])]
    assert not wrong, wrong


@pytest.mark.parametrize("probe_set", ["grid1", "heldout1", "heldout2", "heldout3"])
def test_the_probes_follow_the_rule(probe_set):
    """One resharding all-to-all each (``[R, C]`` sharded on dim 1 -> dim 0, k = 2, 4 or 8; f32, bf16, f16, s8,
    s32; some 3-D): grid1 and held-out sets 1 and 2 were read to fix the rule, set 3 was written after it."""
    rows = DATA["probes"][probe_set]
    wrong = [(r["cfg"], r["chunk"], r["a2a"]) for r in rows if all_to_all_lane_flat(r["chunk"]) != bool(r["flat"])]
    assert not wrong, wrong
    for r in rows:   # a flat exchange has its reshape before it, and for a sub-32-bit type one after it too
        if r["flat"] and r["cfg"]["dtype"] in ("bfloat16", "float16", "int8"):
            assert "reshape" in r["post"], r


_PROBE = """HloModule a2a_{name}

ENTRY main {{
  p = {dt}[{r},{c}] parameter(0), sharding={{devices=[1,4,2]<=[8] last_tile_dim_replicate}}
  two = {dt}[] constant(2)
  b = {dt}[{r},{c}] broadcast(two), dimensions={{}}
  m = {dt}[{r},{c}] multiply(p, b), sharding={{devices=[1,4,2]<=[8] last_tile_dim_replicate}}
  s = {dt}[{r},{c}] custom-call(m), custom_call_target="Sharding", sharding={{devices=[4,1,2]<=[8] last_tile_dim_replicate}}
  ROOT o = {dt}[{r},{c}] multiply(s, b), sharding={{devices=[4,1,2]<=[8] last_tile_dim_replicate}}
}}
"""

_DEF = re.compile(r"^\s*(?:ROOT )?%?([\w.\-]+) = (\S+) ([\w\-]+)\(([^)]*)\)")


def _fed_flat(final: str) -> bool:
    """Whether the one all-to-all of an optimised TPU program is fed (through bitcasts) by a reshape to a
    ``T(s,128)`` buffer with ``s`` < 8."""
    defs = {}
    for line in final.splitlines():
        m = _DEF.match(line)
        if m:
            defs[m.group(1)] = (m.group(2), m.group(3), re.findall(r"%?([\w.\-]+)", m.group(4)))
    a2a = [v for v in defs.values() if v[1] == "all-to-all"]
    assert len(a2a) == 1, [v for v in defs.values() if v[1] == "all-to-all"]
    x = a2a[0][2][0]
    while x in defs and defs[x][1] == "bitcast":
        x = defs[x][2][0]
    return x in defs and defs[x][1] == "reshape" and re.search(r"T\([124],128\)", defs[x][0]) is not None


def test_the_tpu_compiler_flattens_what_the_rule_says():
    """libtpu ahead of time (one compile child, 8 chips of v5e): four pieces the probes did not have, two on
    each side of the rule (f32 40 x 48 and bf16 24 x 56 flat; f32 24 x 88 and f32 136 x 32 not)."""
    from tests.tpu_oracle import compile_for_tpu, tpu_available

    why = tpu_available()
    if why:
        pytest.skip(why)
    cases = [("f32", 40, 48), ("bf16", 24, 56), ("f32", 24, 88), ("f32", 136, 32)]
    texts = [_PROBE.format(name=f"{dt}_{rows}_{w}", dt=dt, r=4 * rows, c=4 * w) for dt, rows, w in cases]
    out = compile_for_tpu(texts, topology="v5e:2x4", partitions=8)
    assert all(o["ok"] for o in out), [o.get("error") for o in out if not o["ok"]]
    for (dt, rows, w), o in zip(cases, out):
        assert _fed_flat(o["final"]) == all_to_all_lane_flat(all_to_all_chunk([4 * rows, w], 0, 4)), (dt, rows, w)
