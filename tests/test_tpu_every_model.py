"""benchmarks/tpu_every_model.py without a TPU compile: its verdict column and its bad-input exit.

The TPU figures themselves come from :func:`benchmarks.real_models_tpu.figures` (tests/test_real_models_tpu.py);
here only what the driver adds: a solved module is reported as losing when its collective bytes exceed the
smaller of the two GSPMD plans' (raw and final apart), a compile failure is named, and an unknown sample
is a clear error with exit 2.
"""

from __future__ import annotations

from benchmarks.tpu_every_model import all_samples, main, table


def _row(sample, plan, raw, final, ok=True):
    if not ok:
        return {"sample": sample, "plan": plan, "compiles": False, "error": "RET_CHECK failure (x)"}
    return {"sample": sample, "plan": plan, "compiles": True, "raw_bytes": raw, "final_bytes": final,
            "peak_bytes": 1e6, "optimal_seconds": 1e-5}


def test_verdict_names_a_loss_and_a_compile_failure():
    rows = [_row("a", "solved", 2e6, 1e6), _row("a", "gspmd", 3e6, 2e6), _row("a", "gspmd_tpu", 1.5e6, 2e6),
            _row("b", "solved", 1e6, 1e6), _row("b", "gspmd", 0, 0, ok=False), _row("b", "gspmd_tpu", 2e6, 2e6)]
    lines = table(rows).splitlines()
    a = next(ln for ln in lines if ln.startswith("| a |"))
    b = next(ln for ln in lines if ln.startswith("| b |"))
    assert a.endswith("| **no** (1.33x), yes |"), a          # raw 2.0 > gspmd_tpu's 1.5; final 1.0 <= 2.0
    assert "does not compile: RET_CHECK failure" in b and b.endswith("| yes, yes |"), b


def test_unknown_sample_exits_2(capsys):
    assert "mlp_train_step" in all_samples() and len(all_samples()) == 9
    assert main(["/tmp/unused", "--samples", "mlp_train_step,nope"]) == 2
    assert "no such sample: nope" in capsys.readouterr().err
