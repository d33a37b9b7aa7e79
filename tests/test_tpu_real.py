"""``benchmarks/tpu_real.py``'s local side (issue 27), without a chip: the join of the device run's JSON with
hloshard's and libtpu-AOT's predictions, hloshard's side read from ``cost --format json`` of a real module,
and the committed chip run's calibration rows against the v5e profile's datasheet peaks."""

from __future__ import annotations

import importlib.util
import json
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
MEASURED = ROOT / "benchmarks" / "measured" / "tpu_real"


def _bench():
    spec = importlib.util.spec_from_file_location("tpu_real", ROOT / "benchmarks" / "tpu_real.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def bench():
    return _bench()


def _measured_row(**kw):
    row = {"median_s": 2e-3, "p10_s": 1.9e-3, "p90_s": 2.3e-3, "pipelined_s": 1.5e-3, "device_s": None,
           "flops": 2e9, "bytes_accessed": 4e6, "optimal_seconds": 1e-3}
    row.update(kw)
    return row


def test_join_ratios_missing_figures_and_order(bench):
    predicted = {"rows": {
        "mm": {"hloshard": {"seconds": 3e-3, "flops": 2.2e9, "breakdown_s": {"compute_bound_s": 3e-3,
                                                                              "memory_bound_s": 1e-3}},
               "aot": {"optimal_seconds": -1.5, "concat_bitcasts": 2, "estimate_seconds": 0.5}},
        "ew": {"hloshard": {"error": "bad"}, "aot": {"error": "TPU cost analysis failed: x"}},
        "only_predicted": {"hloshard": {"seconds": 1.0}}}}
    measured = {"rows": {"mm": _measured_row(device_s=1e-3, optimal_seconds=-2.75, concat_bitcasts=3),
                         "ew": _measured_row(optimal_seconds=-3.0),
                         "skipped": {"skipped": "budget"}}}
    modules = {"mm": {"kind": "program"}, "ew": {"kind": "calibration"}}
    rows = {r["name"]: r for r in bench.join(predicted, measured, modules)}
    # calibration first, then programs, then modules of no known kind (by name)
    assert [r["name"] for r in bench.join(predicted, measured, modules)] == ["ew", "mm", "only_predicted", "skipped"]
    mm = rows["mm"]
    assert mm["measured_s"] == 1e-3                       # the profiler's device time wins over the wall time
    assert mm["hloshard_ratio"] == pytest.approx(3.0) and mm["aot_ratio"] == pytest.approx(500.0)
    assert mm["chip_opt_s"] == pytest.approx(0.25)          # -2.75 + 3 ConcatBitcasts
    assert mm["flops_ratio"] == pytest.approx(1.1) and mm["tflops"] == pytest.approx(2.0)
    assert mm["hbm_gbs"] == pytest.approx(4.0) and mm["spread"] == pytest.approx(0.2)
    assert mm["bound"] == "compute" and mm["status"] == "ok"
    ew = rows["ew"]
    assert ew["measured_s"] == 1.5e-3                       # no device time: back-to-back wall time per call
    assert ew["hloshard_s"] is None and ew["hloshard_ratio"] is None and ew["aot_s"] is None
    assert ew["chip_opt_s"] is None                          # a negative sentinel without its count: unknown
    assert "hloshard: bad" in ew["status"] and "aot: TPU cost analysis failed" in ew["status"]
    assert rows["skipped"]["measured_s"] is None and "skipped: budget" in rows["skipped"]["status"]
    assert "not run on the chip" in rows["only_predicted"]["status"]
    text = bench.table(list(rows.values()), {"device_kind": "TPU v5 lite", "platform": "tpu"})
    assert "TPU v5 lite" in text and "skipped: budget" in text
    assert [ln.split()[0] for ln in text.splitlines()[2:4]] == ["ew", "mm"] and "--" in text


def test_hloshard_estimate_reads_the_cost_json(bench, tmp_path):
    m, k, n = 256, 512, 128
    hlo = tmp_path / "dot.hlo"
    hlo.write_text(f"HloModule dot\n\nENTRY main {{\n  a = bf16[{m},{k}] parameter(0)\n  b = bf16[{k},{n}] parameter(1)\n"
                   f"  ROOT d = bf16[{m},{n}] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n}}\n")
    est = bench.hloshard_estimate(hlo)
    assert est["flops"] == 2 * m * k * n
    assert est["peak_dtype"] == "bf16" and est["peak_flops"] > 0 and est["hbm_bandwidth"] > 0
    bd = est["breakdown_s"]
    # one chip, no collectives: the estimate is the roofline, the larger of flops / peak and bytes / bandwidth
    assert est["seconds"] >= max(2 * m * k * n / est["peak_flops"], bd["memory_bound_s"]) * (1 - 1e-9)
    assert bd["communication_s"] == 0.0
    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule x\nENTRY main {\n  ROOT a = f32[ parameter(0)\n}\n")
    assert "error" in bench.hloshard_estimate(bad)


def test_committed_chip_run_within_the_datasheet(bench):
    """The committed v5e run: achieved FLOP/s of the bf16 matmul and bytes/s of the HBM-bound passes (the chip
    compiler's own counts over the profiler's device time) are below the profile's datasheet peaks and above
    half of them -- a timer off by a factor (a missing wait, a wrong unit) fails one side."""
    from hloshard.devices import get_profile

    data = json.loads((MEASURED / "tpu_real_v5e_r31.json").read_text())
    assert data["meta"]["platform"] == "tpu"
    prof = get_profile("tpu-v5e")
    rows = {r["name"]: r for r in bench.join({"rows": {}}, data)}
    mm = rows["calib_matmul_bf16_8192"]
    assert 0.5 * prof.peak_flops["bf16"] < mm["tflops"] * 1e12 <= prof.peak_flops["bf16"]
    for name in ("calib_ew_f32_256mib", "calib_ew_bf16_256mib", "calib_reduce_f32_256mib"):
        assert 0.5 * prof.hbm_bandwidth < rows[name]["hbm_gbs"] * 1e9 <= prof.hbm_bandwidth, name
