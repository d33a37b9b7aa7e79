"""Weight updates the TPU runs in another layout than the weight's (issue 27, round 35):
``hloshard.cost.tpu_partitioner.update_layout_conflicts``.

In GSPMD's plan of a train step each weight gradient is ``transpose(dot(...))``; libtpu folds the pair into one
dot computed under the old dot's tile dims and reshards its result with an all-to-all, whose buffer is laid out
with the exchanged dim major-most.  The gradient therefore reaches ``subtract(w, lr * g)`` row-major when the
all-to-all gathers dim 0 and column-major when it gathers dim 1, while the weight keeps its least padded entry
layout; where the two differ libtpu copies (the weight in and the result out, or the gradient).  fused_qkv's
GSPMD plan on ``v5e:2x4``: w2 ``[128,256]`` (gradient ``{0,1}``), wqkv ``[256,192]`` (entry ``{0,1}``) and wo
``[64,256]`` conflict, w1 ``[256,128]`` does not."""

from __future__ import annotations

import pathlib

import pytest

from hloshard.cost.tpu_partitioner import resharded_updates, update_layout_conflicts, update_relayouts
from hloshard.hlo import parse_module
from hloshard.strategy.realize import insert_transpose_pins

ROOT = pathlib.Path(__file__).resolve().parent.parent


#: two weight-gradient updates GSPMD-style: ``w - 0.01 * transpose(dot(dy, x))``, each dot written split on the
#: dim its transpose moves to the weight's split dim 0 (so the folded dot is split on dim 1 and reshards).
#: Per device the folded dot computes ``[512, 128]`` for ``wa`` (row-major and ``{0,1}`` pad alike: the tie
#: keeps row-major, as ``wa``'s own ``[128, 512]``: no copy) and ``[512, 64]`` for ``wb`` (``{0,1}`` pads
#: less: the gradient arrives column-major, ``wb``'s ``[128, 256]`` is row-major: a copy)
_HAND = """HloModule upd, num_partitions=8

ENTRY e {
  x = f32[64,512]{1,0} parameter(0), sharding={replicated}
  ya = f32[64,512]{1,0} parameter(1), sharding={devices=[1,4,2]<=[8] last_tile_dim_replicate}
  yb = f32[64,256]{1,0} parameter(2), sharding={devices=[1,4,2]<=[8] last_tile_dim_replicate}
  wa = f32[512,512]{1,0} parameter(3), sharding={devices=[4,1,2]<=[8] last_tile_dim_replicate}
  wb = f32[512,256]{1,0} parameter(4), sharding={devices=[4,1,2]<=[8] last_tile_dim_replicate}
  ga = f32[512,512]{1,0} dot(ya, x), lhs_contracting_dims={0}, rhs_contracting_dims={0}, sharding={devices=[1,4,2]<=[8] last_tile_dim_replicate}
  ta = f32[512,512]{1,0} transpose(ga), dimensions={1,0}, sharding={devices=[4,1,2]<=[8] last_tile_dim_replicate}
  gb = f32[256,512]{1,0} dot(yb, x), lhs_contracting_dims={0}, rhs_contracting_dims={0}, sharding={devices=[1,4,2]<=[8] last_tile_dim_replicate}
  tb = f32[512,256]{1,0} transpose(gb), dimensions={1,0}, sharding={devices=[4,1,2]<=[8] last_tile_dim_replicate}
  c = f32[] constant(0.01)
  ca = f32[512,512]{1,0} broadcast(c), dimensions={}, sharding={devices=[4,1,2]<=[8] last_tile_dim_replicate}
  cb = f32[512,256]{1,0} broadcast(c), dimensions={}, sharding={devices=[4,1,2]<=[8] last_tile_dim_replicate}
  ma = f32[512,512]{1,0} multiply(ta, ca), sharding={devices=[4,1,2]<=[8] last_tile_dim_replicate}
  mb = f32[512,256]{1,0} multiply(tb, cb), sharding={devices=[4,1,2]<=[8] last_tile_dim_replicate}
  ua = f32[512,512]{1,0} subtract(wa, ma), sharding={devices=[4,1,2]<=[8] last_tile_dim_replicate}
  ub = f32[512,256]{1,0} subtract(wb, mb), sharding={devices=[4,1,2]<=[8] last_tile_dim_replicate}
  ROOT r = (f32[512,512]{1,0}, f32[512,256]{1,0}) tuple(ua, ub), sharding={{devices=[4,1,2]<=[8] last_tile_dim_replicate}, {devices=[4,1,2]<=[8] last_tile_dim_replicate}}
}
"""


def _module(name: str):
    return parse_module((ROOT / "samples" / f"{name}.propagated.hlo").read_text())


def _names(rows) -> dict:
    return {p.name: (gs, es) for p, _, gs, es in rows}


def test_fused_qkv_gspmd_updates_and_their_layouts():
    m = _module("fused_qkv_train_step")
    rows = _names(resharded_updates(m, "tpu-v5e"))
    assert len(rows) == 8, sorted(rows)
    for layer in (0, 1):
        assert rows[f"params_{layer}___w1__.1"] == (False, False)   # gathered dim 0, [256,128] row-major
        assert rows[f"params_{layer}___w2__.1"] == (True, False)    # gathered dim 1: the gradient {0,1}
        assert rows[f"params_{layer}___wo__.1"] == (True, False)
        assert rows[f"params_{layer}___wqkv__.1"] == (False, True)  # [256,192]: entry {0,1} pads less
    conflicts = sorted(p.name for p, *_ in update_layout_conflicts(m, "tpu-v5e"))
    assert conflicts == sorted(f"params_{i}___{w}__.1" for i in (0, 1) for w in ("w2", "wo", "wqkv"))


def test_same_shape_opposite_sides_transformer():
    """transformer_train_step's w1 and w2 are both [256,256] per device: w1's gradient is gathered on dim 0
    (no copy), w2's on dim 1 (copied) -- the shape alone does not decide."""
    rows = _names(resharded_updates(_module("transformer_train_step"), "tpu-v5e"))
    w1 = [v for k, v in rows.items() if "w1" in k]
    w2 = [v for k, v in rows.items() if "w2" in k]
    assert w1 and all(v == (False, False) for v in w1), w1
    assert w2 and all(v == (True, False) for v in w2), w2


def test_the_folded_dots_padding_decides_not_the_shape():
    rows = _names(resharded_updates(parse_module(_HAND), "tpu-v5e"))
    assert rows == {"wa": (False, False), "wb": (True, False)}, rows
    assert [p.name for p, *_ in update_layout_conflicts(parse_module(_HAND), "tpu-v5e")] == ["wb"]


def test_transpose_pins_leave_no_folded_update():
    """A plan written with solve's transpose pins keeps its dots unfolded: nothing to report."""
    m = _module("fused_qkv_train_step")
    assert insert_transpose_pins([i for c in m.computations for i in c.instructions]) > 0
    assert resharded_updates(m, "tpu-v5e") == []


def test_libtpu_copies_exactly_the_conflicts():
    """libtpu ahead of time (``v5e:2x4``): a copy around the update (of the weight or of the gradient) for
    each conflict named, none for fused_qkv's w1 and the hand module's ``wa``; and the copy libtpu makes is the
    one :func:`update_copy_choice` names (round 38)."""
    from benchmarks.tpu_update_layouts import observed
    from tests.tpu_oracle import compile_for_tpu, tpu_available

    why = tpu_available()
    if why:
        pytest.skip(why)
    text = (ROOT / "samples" / "fused_qkv_train_step.propagated.hlo").read_text()
    recs = compile_for_tpu([text, _HAND], topology="v5e:2x4")
    seen, choices = 0, set()
    for t, rec in zip((text, _HAND), recs):
        assert rec["ok"], rec["error"]
        for p, u, gs, es in resharded_updates(parse_module(t), "tpu-v5e"):
            got = observed(rec["final"], p, u.operands[1])
            assert (got != "none") == (gs != es), (p.name, gs, es, got)
            seen += 1
        for r in update_relayouts(parse_module(t), "tpu-v5e"):   # and which copy (round 38)
            got = observed(rec["final"], r.parameter, r.update.operands[1])
            assert {"param": "weight"}.get(got, got) == r.choice, (r.parameter.name, r.choice, got)
            choices.add(r.choice)
    assert seen == 10
    assert choices == {"gradient", "weight"}


# -- round 38: which copy libtpu makes, and its bytes, priced ------------------------------------------------------

DATA = ROOT / "benchmarks" / "measured" / "tpu_r38" / "update_copies.json"


def test_layout_bytes_at_the_tpu_tiles():
    from hloshard.cost.tpu_layout import layout_bytes

    assert layout_bytes("f32", [256, 192], 1) == 256 * 256 * 4      # 192 lanes padded to 256
    assert layout_bytes("f32", [256, 192], 0) == 192 * 256 * 4
    assert layout_bytes("f32", [64, 256], 0) == 256 * 128 * 4       # 64 lanes padded to 128
    assert layout_bytes("bf16", [4, 100], 1) == 4 * 128 * 2         # a 4-row tile of 128 lanes, 2 B each
    assert layout_bytes("f32", [1, 8], 1) == 512                    # one row of 128 lanes: one 512 B granule
    with pytest.raises(ValueError):
        layout_bytes("f32", [4, 4, 4], 0)
    with pytest.raises(ValueError):
        layout_bytes("f32", [4, 4], 2)


def test_copy_choice_is_the_pieces_lane_tie():
    from hloshard.cost.tpu_partitioner import update_copy_choice

    for tie in ([64, 64], [96, 96], [80, 160], [160, 80], [256, 128], [48, 48]):
        assert update_copy_choice(tie) == "gradient", tie
    for clear in ([256, 64], [64, 192], [128, 64], [320, 80], [96, 64]):
        assert update_copy_choice(clear) == "weight", clear
    with pytest.raises(ValueError):
        update_copy_choice([64])


def test_copy_choice_against_libtpus_programs():
    """Every conflicting update of the stored programs (libtpu 0.0.42.1, ahead of time): round 33's GSPMD plans on
    three chips (where the rule was read: v5e), round 35's two held-out attention sets and round 38's held-out MLP
    set (written after the rule), with libtpu's copy; the rule names it on every one, and both choices occur in
    the held-out MLP set."""
    import json

    from hloshard.cost.tpu_partitioner import update_copy_choice

    rows = json.loads(DATA.read_text())
    assert len(rows) == 271
    by_set: dict = {}
    for r in rows:
        assert update_copy_choice(r["piece"]) == r["observed"], r
        by_set.setdefault(r["set"], set()).add(r["observed"])
    assert by_set["ho38"] == {"gradient", "weight"}
    assert by_set["r33"] == {"gradient", "weight"}


def test_fused_qkv_update_copies_and_their_bytes():
    """fused_qkv's GSPMD plan on v5e: per layer wqkv and w2 copied in and back (2 x 458,752 and 2 x 262,144 B),
    wo's gradient once (196,608 B); 3,276,800 B in all, libtpu's own copies of those buffers to the byte
    (BENCHMARKS.md round 38)."""
    from hloshard.cost.tpu_partitioner import update_relayouts

    rows = {r.parameter.name: r for r in update_relayouts(_module("fused_qkv_train_step"), "tpu-v5e")}
    assert sorted(rows) == sorted(f"params_{i}___{w}__.1" for i in (0, 1) for w in ("w2", "wo", "wqkv"))
    for i in (0, 1):
        assert rows[f"params_{i}___wqkv__.1"][2:] == ("weight", 2, 458752)
        assert rows[f"params_{i}___w2__.1"][2:] == ("weight", 2, 262144)
        assert rows[f"params_{i}___wo__.1"][2:] == ("gradient", 1, 196608)
    assert sum(r.copies * r.bytes_per_copy for r in rows.values()) == 3276800


def _hand_roofline(monkeypatch=None):
    from hloshard.autoshard import evaluate_module
    from hloshard.cost.tpu_partitioner import tpu_partitioned_view
    from hloshard.mesh_setup import timed_mesh_from_options
    from hloshard.timing import plan_roofline

    module = parse_module(_HAND)
    dmesh, scale, _ = timed_mesh_from_options(module, "2x4", None, None, None, "tpu-v5e")
    view, folded = tpu_partitioned_view(module, scale.profile.name)
    assert len(folded) == 2
    return plan_roofline(evaluate_module(view, dmesh), view, scale.profile)[0], scale.profile


def test_the_copies_are_priced_in_bytes_and_seconds(monkeypatch):
    """The hand module's ``wb`` (piece ``[128,64]``: the weight in and back, 2 x 262,144 B) is one
    ``update-relayout`` row read off the TPU view (its folded dots' written shardings); switched off, the
    roofline's bytes and seconds drop by exactly that row."""
    import hloshard.timing as timing

    roof, profile = _hand_roofline()
    rows = [(r.name, r.hbm_bytes) for r in roof.rows if r.opcode == "update-relayout"]
    assert rows == [("ub", 524288.0)]
    monkeypatch.setattr(timing, "update_relayouts", lambda module, device: [])
    off, _ = _hand_roofline()
    assert roof.hbm_bytes - off.hbm_bytes == pytest.approx(524288.0)
    assert roof.seconds - off.seconds == pytest.approx(524288.0 / profile.sustained_hbm_bandwidth)
