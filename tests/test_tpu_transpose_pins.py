"""The transpose pin under ``--device tpu-v6e`` (issue 27, round 34): not written on a dot that v6e's simplifier
swaps itself (``hloshard.cost.tpu_partitioner.swaps_operands``) unless the fold it guards against applies.

``solve`` writes ``NAME.tpin`` (a ``Sharding`` custom-call) between a dot and the transposes that read it, so
that libtpu's algebraic simplifier cannot fold the pair into ``dot(b, a)`` carrying the old dot's sharding
untransposed (``hloshard.strategy.realize.insert_transpose_pins``).  On v6e the simplifier also swaps a dot
whose read-only operand is first and computed one second, and writes a transpose of its own after it:
moe_layer's expert dot ``dot(w2, relu(x w1))``.  The pin cannot keep that dot's layout; it only keeps the
simplifier's transpose from merging with the written one, and the partitioner reshards the swapped dot into
the pinned layout: libtpu 0.0.42.1 estimates 3.49 us with the pin, 3.06 us (GSPMD's program) without
(``v6e:2x4``).  Every other dot read by a transpose is pinned on every device (dropping the pins wherever the
fold's rule does not apply was measured worse on qwen2_small's written modules on ``v5e:2x4``), and without a
device (or on a GPU profile) the outputs do not change."""

from __future__ import annotations

import pathlib

import pytest

from hloshard.cost.tpu_partitioner import fold_applies, swaps_operands
from hloshard.hlo import parse_module, print_module
from hloshard.strategy.realize import insert_transpose_pins

ROOT = pathlib.Path(__file__).resolve().parent.parent

#: a batched weight-gradient dot transposed over its two non-contracting dims (the fold's pattern), a
#: moe-style expert dot (a weight first, a computed value second: batch dim first, two non-contracting dims
#: from the computed operand) transposed, and a dot read by a transpose and by another user
_MODULE = """HloModule t, num_partitions=8

ENTRY e {
  a = f32[8,64,32]{2,1,0} parameter(0), sharding={devices=[8,1,1]<=[8]}
  b = f32[8,64,16]{2,1,0} parameter(1), sharding={devices=[8,1,1]<=[8]}
  eb = f32[8,64,16]{2,1,0} exponential(b), sharding={devices=[8,1,1]<=[8]}
  g = f32[8,32,16]{2,1,0} dot(a, eb), lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={0}, rhs_contracting_dims={1}, sharding={devices=[8,1,1]<=[8]}
  gt = f32[8,16,32]{2,1,0} transpose(g), dimensions={0,2,1}, sharding={devices=[8,1,1]<=[8]}
  w = f32[8,16,128]{2,1,0} parameter(2), sharding={devices=[4,1,1,2]<=[8] last_tile_dim_replicate}
  h = f32[4,8,8,32]{3,2,1,0} parameter(3), sharding={devices=[1,1,8,1]<=[8]}
  k = f32[32,16]{1,0} parameter(4), sharding={replicated}
  rh = f32[4,8,8,16]{3,2,1,0} dot(h, k), lhs_contracting_dims={3}, rhs_contracting_dims={0}, sharding={devices=[1,1,8,1]<=[8]}
  m = f32[8,128,4,8]{3,2,1,0} dot(w, rh), lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={2}, rhs_contracting_dims={3}, sharding={devices=[8,1,1,1]<=[8]}
  mt = f32[4,8,8,128]{3,2,1,0} transpose(m), dimensions={2,3,0,1}, sharding={devices=[1,1,8,1]<=[8]}
  c = f32[8,32,16]{2,1,0} dot(a, eb), lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={0}, rhs_contracting_dims={1}, sharding={devices=[8,1,1]<=[8]}
  ct = f32[8,16,32]{2,1,0} transpose(c), dimensions={0,2,1}, sharding={devices=[8,1,1]<=[8]}
  cn = f32[8,32,16]{2,1,0} negate(c), sharding={devices=[8,1,1]<=[8]}
  ROOT r = (f32[8,16,32]{2,1,0}, f32[4,8,8,128]{3,2,1,0}, f32[8,16,32]{2,1,0}, f32[8,32,16]{2,1,0}) tuple(gt, mt, ct, cn)
}
"""


def _pinned(device):
    m = parse_module(_MODULE)
    n = insert_transpose_pins([i for c in m.computations for i in c.instructions], device)
    return n, {i.name for c in m.computations for i in c.instructions if i.name.endswith(".tpin")}


def test_a_dot_v6e_swaps_is_not_pinned_on_v6e_only():
    m = parse_module(_MODULE)
    by = {i.name: i for c in m.computations for i in c.instructions}
    assert fold_applies(by["g"], by["gt"], "tpu-v5e")
    assert not fold_applies(by["m"], by["mt"], "tpu-v5e")       # two non-contracting dims from rh
    assert not fold_applies(by["c"], by["ct"], "tpu-v5e")       # the dot has another user
    assert not fold_applies(by["m"], by["gt"])                  # not that dot's transpose
    assert swaps_operands(by["m"], "tpu-v6e") and swaps_operands(by["m"])
    assert not swaps_operands(by["m"], "tpu-v5e") and not swaps_operands(by["g"], "tpu-v6e")
    # without a device every dot read by a transpose is pinned (the outputs of rounds before 34), and on
    # v5e / v5p too; on v6e not the swapped one
    for dev in (None, "tpu-v5e", "tpu-v5p"):
        assert _pinned(dev) == (3, {"g.tpin", "m.tpin", "c.tpin"}), dev
    assert _pinned("tpu-v6e") == (2, {"g.tpin", "c.tpin"})


_COMPUTED_FIRST = """HloModule t, num_partitions=8

ENTRY e {
  p = f32[8,64,32]{2,1,0} parameter(0), sharding={devices=[8,1,1]<=[8]}
  q = f32[8,64,64]{2,1,0} parameter(1), sharding={devices=[8,1,1]<=[8]}
  x = f32[8,32,64]{2,1,0} dot(p, q), lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={0}, rhs_contracting_dims={1}, sharding={devices=[8,1,1]<=[8]}
  w = f32[8,64,16]{2,1,0} parameter(2), sharding={devices=[8,1,1]<=[8]}
  g = f32[8,32,16]{2,1,0} dot(x, w), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}, sharding={devices=[8,1,1]<=[8]}
  ROOT gt = f32[8,16,32]{2,1,0} transpose(g), dimensions={0,2,1}, sharding={devices=[8,1,1]<=[8]}
}
"""


def test_a_fold_v6e_does_not_take_is_still_pinned():
    """On v6e the simplifier keeps a dot whose computed operand is first and a read-only one second
    (``cost.tpu_partitioner.COMPUTED_FIRST_CHIPS``): neither folded nor swapped, so the pin stays (as on v5e)."""
    for dev, folds in (("tpu-v5e", True), ("tpu-v6e", False), (None, True)):
        m = parse_module(_COMPUTED_FIRST)
        by = {i.name: i for c in m.computations for i in c.instructions}
        assert fold_applies(by["g"], by["gt"], dev) == folds, dev
        assert not swaps_operands(by["g"], dev)
        assert insert_transpose_pins([i for c in m.computations for i in c.instructions], dev) == 1, dev


def _solved(device):
    from hloshard.autoshard import solve_module
    from hloshard.load import load_module
    from hloshard.mesh_setup import timed_mesh_from_options

    module = load_module(str(ROOT / "samples" / "moe_layer.pre.hlo"))
    dmesh, _, _ = timed_mesh_from_options(module, "2x4", None, None, None, device)
    solve_module(module, dmesh, keep="io", time_limit=10, deterministic=True, pin_operands=True)
    return print_module(module)


@pytest.fixture(scope="module")
def moe_plans():
    return {d: _solved(d) for d in (None, "tpu-v6e")}


def test_solve_writes_moes_expert_pin_without_a_device_only(moe_plans):
    assert "dot_general.6.tpin = " in moe_plans[None]
    assert ".tpin" not in moe_plans["tpu-v6e"]


def test_libtpu_v6e_runs_moes_solve_plan_as_gspmds(moe_plans):
    """libtpu ahead of time (``v6e:2x4``): the v6e plan without the pin is estimated no slower than
    GSPMD's plan of the same module, and faster than the same plan with the pin put back."""
    from tests.tpu_oracle import compile_for_tpu, tpu_available

    why = tpu_available()
    if why:
        pytest.skip(why)
    plan = moe_plans["tpu-v6e"]
    m = parse_module(plan)
    insert_transpose_pins([i for c in m.computations for i in c.instructions])   # the pins of rounds <= 33
    pinned = print_module(m)
    assert ".tpin" in pinned
    gspmd = (ROOT / "samples" / "moe_layer.propagated.hlo").read_text()
    got, old, ref = compile_for_tpu([plan, pinned, gspmd], topology="v6e:2x4")
    assert got["ok"] and old["ok"] and ref["ok"], (got["error"], old["error"], ref["error"])
    t, t_old, t_ref = (r["cost"]["optimal_seconds"] for r in (got, old, ref))
    assert t <= t_ref * (1 + 1e-6), (t, t_ref)
    assert t < t_old, (t, t_old)
