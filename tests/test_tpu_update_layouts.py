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

from hloshard.cost.tpu_partitioner import resharded_updates, update_layout_conflicts
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
    each conflict named, none for fused_qkv's w1 and the hand module's ``wa``."""
    from benchmarks.tpu_update_layouts import observed
    from tests.tpu_oracle import compile_for_tpu, tpu_available

    why = tpu_available()
    if why:
        pytest.skip(why)
    text = (ROOT / "samples" / "fused_qkv_train_step.propagated.hlo").read_text()
    recs = compile_for_tpu([text, _HAND], topology="v5e:2x4")
    seen = 0
    for t, rec in zip((text, _HAND), recs):
        assert rec["ok"], rec["error"]
        for p, u, gs, es in resharded_updates(parse_module(t), "tpu-v5e"):
            got = observed(rec["final"], p, u.operands[1])
            assert (got != "none") == (gs != es), (p.name, gs, es, got)
            seen += 1
    assert seen == 10
