"""A transposed dot on the TPU: the TPU pipeline computes ``transpose(dot(a, b))`` as ``dot(b, a)`` before its
SPMD partitioner and the new dot keeps the old one's sharding (``cost.tpu_partitioner``; BENCHMARKS.md,
round 20: all of the 15.9 MB by which the TPU partitions ``transformer_train_step``'s GSPMD plan beyond the
CPU's).  The weight-gradient shape of that sample, reduced: the gradient ``dot`` written split over
``model`` on its second dim, the transpose (what the update reads) on its first.
"""

from __future__ import annotations

import pytest

from hloshard.hlo import parse_module
from hloshard.hlo.sharding import parse_sharding

DOT_S = "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}"   # dim 1 over model (4), data (2) replicated
T_S = "{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}"     # dim 0 over model
ACT = "{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}"           # batch over data, model replicated

WEIGHT_GRADIENT = f"""HloModule wgrad, num_partitions=8

ENTRY e {{
  x = f32[8,128,256] parameter(0), sharding={ACT}
  g = f32[8,128,1024] parameter(1), sharding={ACT}
  d = f32[256,1024] dot(x, g), lhs_contracting_dims={{0,1}}, rhs_contracting_dims={{0,1}}, sharding={DOT_S}
  t = f32[1024,256] transpose(d), dimensions={{1,0}}, sharding={T_S}
  c = f32[] constant(0.001)
  b = f32[1024,256] broadcast(c), dimensions={{}}, sharding={T_S}
  ROOT m = f32[1024,256] multiply(t, b), sharding={T_S}
}}
"""


def _ring(result) -> dict:
    """Ring bytes per device of hloshard's predicted collectives, by kind."""
    from hloshard.xla_compare import predicted_collectives

    out: dict = {}
    for recs in predicted_collectives(result).values():
        for r in recs:
            out[r.kind] = out.get(r.kind, 0.0) + r.ring_bytes * r.executions
    return out


def test_the_pair_is_found_and_the_view_moves_the_shardings():
    from hloshard.cost.tpu_partitioner import folded_transposes, tpu_partitioned_view

    module = parse_module(WEIGHT_GRADIENT)
    assert [(d.name, t.name) for d, t in folded_transposes(module)] == [("d", "t")]
    view, pairs = tpu_partitioned_view(module)
    assert pairs == [("d", "t")]
    by = {i.name: i for i in view.entry.instructions}
    assert by["d"].sharding == parse_sharding(T_S)       # the dot computes the transposed layout
    assert by["t"].sharding == parse_sharding(DOT_S)     # the transpose hands on the dot's written one
    assert by["m"].sharding == parse_sharding(T_S)
    # the written module is untouched
    assert {i.name: i.sharding for i in module.entry.instructions}["d"] == parse_sharding(DOT_S)


def test_no_fold_without_the_pattern():
    from hloshard.cost.tpu_partitioner import folded_transposes, tpu_partitioned_view

    # the dot read by the transpose and by another op: the simplifier leaves it
    two_users = WEIGHT_GRADIENT.replace("ROOT m = f32[1024,256] multiply(t, b), sharding={T_S}".format(T_S=T_S),
                                        f"m = f32[1024,256] multiply(t, b), sharding={T_S}\n"
                                        f"  ROOT r = (f32[1024,256], f32[256,1024]) tuple(m, d)")
    assert folded_transposes(parse_module(two_users)) == []
    # unannotated: nothing for the partitioner to carry over
    bare = parse_module(WEIGHT_GRADIENT.replace(f", sharding={DOT_S}", ""))
    assert folded_transposes(bare) == []
    assert tpu_partitioned_view(bare)[0] is bare


def test_the_view_prices_the_tpu_partitioners_all_to_all():
    """Priced as the TPU partitions it: the same all-reduce (over data, 256 x 256 floats per device either way)
    and an all-to-all of the transpose's 1024 x 64 floats over model that the written plan does not ask for."""
    from hloshard.autoshard import evaluate_module
    from hloshard.cost.tpu_partitioner import tpu_partitioned_view
    from hloshard.mesh_setup import timed_mesh_from_options

    module = parse_module(WEIGHT_GRADIENT)
    mesh, _, _ = timed_mesh_from_options(module, "2x4", None, None, None, "tpu-v5e")
    written = _ring(evaluate_module(module, mesh))
    tpu = _ring(evaluate_module(tpu_partitioned_view(module)[0], mesh))
    ar = 2 * (2 - 1) / 2 * 256 * 256 * 4
    assert written == pytest.approx({"all-reduce": ar})
    assert tpu == pytest.approx({"all-reduce": ar, "all-to-all": (4 - 1) / 4 * 1024 * 256 * 4 / 4})


def test_the_tpu_compiler_partitions_it_so():
    """libtpu ahead of time (v5e:2x4): the partitioned program's ring bytes by kind equal the view's
    prediction (the CPU partitioner's equal the written module's: no all-to-all)."""
    from tests.conftest import require_jax

    require_jax()
    from tests.tpu_oracle import compile_for_tpu, tpu_available
    from tests.xla_bytes import collective_bytes

    why = tpu_available()
    if why:
        pytest.skip(why)
    from hloshard.autoshard import evaluate_module
    from hloshard.cost.tpu_partitioner import tpu_partitioned_view
    from hloshard.mesh_setup import timed_mesh_from_options

    module = parse_module(WEIGHT_GRADIENT)
    (rec,) = compile_for_tpu([WEIGHT_GRADIENT])
    assert rec["ok"], rec["error"]
    measured: dict = {}
    for c in collective_bytes(rec["partitioned"]):
        measured[c["kind"]] = measured.get(c["kind"], 0.0) + c["bytes"]
    mesh, _, _ = timed_mesh_from_options(module, "2x4", None, None, None, "tpu-v5e")
    assert _ring(evaluate_module(tpu_partitioned_view(module)[0], mesh)) == pytest.approx(measured)
    assert "all-to-all" in measured


def test_cost_prices_the_tpus_partitioning_with_a_tpu_device_only(tmp_path):
    """``cost --device tpu-v5e`` names the pair and prices the all-to-all as resharding seconds; on a GPU
    profile (whose backend partitions the plan as written) nothing is rewritten and no resharding is
    priced."""
    import json

    from click.testing import CliRunner

    from hloshard.cli import main

    path = tmp_path / "wgrad.hlo"
    path.write_text(WEIGHT_GRADIENT)
    tpu = CliRunner().invoke(main, ["cost", str(path), "--mesh", "2x4", "--device", "tpu-v5e", "--format", "json",
                                    "--quiet"])
    assert tpu.exit_code == 0, tpu.output
    rep = json.loads(tpu.output)
    assert rep["tpu_folded_transposes"] == [["d", "t"]]
    assert rep["step_time"]["breakdown_s"]["resharding_s"] > 0
    gpu = json.loads(CliRunner().invoke(main, ["cost", str(path), "--mesh", "2x4", "--device", "h100-sxm", "--format",
                                               "json", "--quiet"]).output)
    assert "tpu_folded_transposes" not in gpu and gpu["step_time"]["breakdown_s"]["resharding_s"] == 0
    text = CliRunner().invoke(main, ["cost", str(path), "--mesh", "2x4", "--device", "tpu-v5e", "--quiet"]).output
    assert "1 transposed dot(s) priced as the TPU computes them" in text
