"""The rows a real-model benchmark's child measures (``benchmarks/real_models.py`` and the benchmarks built
on it run ``SCRIPT --child MODEL PLANS``, one JSON line per plan), for the real-model tests."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess

from hloshard.xla_check import child_argv

ROOT = pathlib.Path(__file__).resolve().parent.parent


def child_rows(script, model: str, plans: list, env_extra: dict | None = None, time_limit: float = 10.0,
               extra=()) -> dict:
    """plan -> row of ``script --child model plans [extra]`` run with this checkout's ``src`` first on
    PYTHONPATH; asserts the child succeeded and measured every plan without an error."""
    env = dict(os.environ, **(env_extra or {}))
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    p = subprocess.run(child_argv([str(script), "--child", model, ",".join(plans), "--time-limit", str(time_limit), *extra], env),
                       capture_output=True, text=True, timeout=900, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    out = {}
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            out[row["plan"]] = row
    assert set(out) == set(plans), (sorted(out), p.stderr[-2000:])
    for plan, row in out.items():
        assert "error" not in row, f"{plan}: {row['error']}"
    return out


def figures(row: dict) -> str:
    """One row's XLA figures in words (assertion messages)."""
    return (f"{row['plan']}: {row['comm_bytes'] / 1e6:.3f} MB moved, {row['peak_bytes'] / 1e6:.3f} MB peak per device, "
            f"rel err {row['rel_err']:.1e} (float64 {row.get('rel_err_f64', float('nan')):.1e}, float32 floor "
            f"{row.get('rel_err_f32_floor', float('nan')):.1e}), {row['tied_mismatches']} tied mismatches {row.get('tied_examples', [])}")
