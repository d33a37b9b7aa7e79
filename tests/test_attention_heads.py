"""Attention whose head count does not divide the mesh axis (issue 24, item 2), through XLA: for GSPMD's
plan and for ``solve``'s, hloshard's predicted bytes per device are within 10% (or 0.1 MB) of what XLA's
partitioner moves, and solve's plan moves no more than GSPMD's.

The modules are written by ``benchmarks/attention_heads.py`` with real jax in a child process (8 fake CPU
devices); two of its cases run here (10 heads over a 4-way axis: a train step and a forward pass),
the benchmark runs all eight (BENCHMARKS.md).  Held out of the fix they check: the GSPMD plan of the
10-over-4 forward pass, where a dot's operands kept several strategies producing one layout and the
contracting split they share was not recognised (predicted an all-gather, XLA all-reduces)."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

from hloshard.autoshard import evaluate_module, solve_module
from hloshard.hlo import parse_file, print_module
from hloshard.mesh import DeviceMesh
from hloshard.xla_compare import predicted_collectives
from tests.conftest import require_jax
from tests.xla_bytes import xla_ring_bytes

ROOT = pathlib.Path(__file__).resolve().parent.parent
CASES = ["attn_h10m4_d32_s64_train", "attn_h10m4_d32_s128_fwd"]
MB = 1e6


def _bench():
    spec = importlib.util.spec_from_file_location("attention_heads", ROOT / "benchmarks" / "attention_heads.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    require_jax()
    out = tmp_path_factory.mktemp("attn")
    _bench().write_cases(out, CASES)
    return out


def _predicted(result) -> float:
    return float(sum(r.total_bytes for rs in predicted_collectives(result).values() for r in rs))


def _within(pred: float, xla: float) -> bool:
    return abs(pred - xla) <= max(0.1 * MB, 0.1 * xla)


@pytest.mark.oracle
@pytest.mark.parametrize("name", CASES)
def test_attention_heads_predicted_and_no_worse_than_gspmd(cases, name):
    mesh_spec = (cases / f"{name}.mesh").read_text().strip()
    gspmd = parse_file(str(cases / f"{name}.propagated.hlo"))
    mesh = DeviceMesh.for_module(gspmd, mesh_spec)
    n = mesh.num_devices
    g_pred = _predicted(evaluate_module(gspmd, mesh))
    g_xla = xla_ring_bytes(print_module(gspmd), n)
    assert _within(g_pred, g_xla), (name, "gspmd", g_pred, g_xla)

    solved = parse_file(str(cases / f"{name}.pre.hlo"))
    res = solve_module(solved, DeviceMesh.for_module(solved, mesh_spec), keep="io", time_limit=5.0,
                       deterministic=True, pin_operands=True)
    s_pred = _predicted(res.written or res)
    s_xla = xla_ring_bytes(print_module(solved), n)
    assert _within(s_pred, s_xla), (name, "solve", s_pred, s_xla)
    assert s_xla <= g_xla * (1 + 1e-9), (name, s_xla, g_xla)
