"""The report of the coarse fallback describes the written module (new user 25, finding 8).

When the fine mesh's cost graph is not built in time, ``solve`` writes the coarse mesh's plan.  Its summary
said the coarse graph's figures for the solver's choice (Gemma3 at ``--mesh 2x4``: cost 11,436,537 and 31.3 MiB
where ``hloshard cost`` of the output says 11,430,392 and 23.6 MiB), had no ``collectives`` line
(``predicted_collective_bytes_per_device`` null), and said "on the coarse mesh 2x4 (the given mesh's strategy
space was not searched)" when the user gave 2x4 (the space not searched is its internal refinement 2x2x2).
The fallback is forced here as in tests/test_coarse_to_fine.py (the fine build's estimate past any deadline).
"""

from __future__ import annotations

import time

import pytest

from hloshard.autoshard import coarse, evaluate_module, solve_module
from hloshard.autoshard.report_json import build_report
from hloshard.hlo import parse_module, print_module
from hloshard.load import load_module
from hloshard.mesh import DeviceMesh
from hloshard.summary import render_summary, status_in_words
from hloshard.xla_compare import predicted_collective_bytes
from tests.conftest import SAMPLES
from tests.test_coarse_to_fine import TINY_RESHAPE   # 2x2x2 merged into 8: --mesh 2x4 refined, its coarse mesh 2x4


def _fallback(monkeypatch, module, mesh_text: str):
    """``solve_module`` with the fine build never started (the coarse plan written); its report as ``solve``
    builds it, and the mesh."""
    mesh = DeviceMesh.for_module(module, mesh_text)
    monkeypatch.setattr(coarse, "fine_build_estimate", lambda *a: (1e6, 99.0))
    # (round 38: a proven coarse plan has the fine build tried in the time left, tests/test_fine_build_tried.py;
    # the fallback is forced by taking it as not proven)
    monkeypatch.setattr(coarse, "_proven", lambda sol: False)
    res = solve_module(module, mesh, time_limit=20.0, deadline=time.monotonic() + 20.0, stop_build=True, workers=1)
    assert getattr(res.graph, "coarse_fallback", None), "the fallback was not taken"
    report = build_report(res, mesh, "io", None)
    report["predicted_collective_bytes_per_device"] = predicted_collective_bytes(res)   # as commands/solve.py adds it
    return res, report


def test_fallback_report_is_the_written_modules(monkeypatch):
    """MLP train step at 2x2x2 (coarse 2x4): the report's cost, peak and collectives are `cost`'s of the written
    module.  Measured: the coarse graph's own figures for the choice, 224,110.51 and 1,575,596 B, where the
    written module costs 895,852.73 and peaks at 1,837,740 B (its dots' operands resharded as XLA does from
    the written layouts: no pins)."""
    module = load_module(str(SAMPLES / "mlp_train_step.pre.hlo"))
    res, report = _fallback(monkeypatch, module, "2x2x2")
    written = evaluate_module(parse_module(print_module(module)), DeviceMesh.for_module(module, "2x2x2"))
    assert report["objective"] == pytest.approx(written.total_cost, rel=1e-9)
    assert report["peak_memory_per_device"] == int(written.evaluation.peak_memory)
    assert res.evaluation.total != pytest.approx(written.total_cost, rel=1e-3)   # the case needs the two to differ
    assert report["predicted_collective_bytes_per_device"] is not None
    assert report["predicted_collective_bytes_per_device"] == predicted_collective_bytes(written)
    text = " ".join(render_summary(report, width=200).split())
    assert f"cost {written.total_cost:,.2f}" in text
    assert "collectives" in text and "per device predicted" in text
    assert "as `hloshard cost` prices the output" in text
    # the status is of the given mesh's space, not searched: no proof, no gap
    assert report["status"] == "feasible" and report["gap"] is None and report["searched_mesh"] == "2x4"
    assert "on the coarse mesh 2x4 (the given mesh's strategy space was not searched" in text


def test_fallback_on_the_users_own_mesh_names_its_refinement(monkeypatch):
    """`--mesh 2x4` refined internally to 2x2x2, the coarse plan is 2x4's: the status says the mesh as given was
    searched and its refinement was not (it said "on the coarse mesh 2x4 (the given mesh's ... not searched)")."""
    res, report = _fallback(monkeypatch, parse_module(TINY_RESHAPE, "tiny.hlo"), "2x4")
    assert report["searched_mesh"] == "2x4" and report["mesh"]["shape"] == [2, 2, 2]
    words = status_in_words(report)
    assert "on the mesh 2x4 as given (its refinement 2x2x2, the same devices" in words
    assert "coarse mesh" not in words and "given mesh's strategy space was not searched" not in words
    assert "distance to the optimum unknown" in words


def test_status_words_of_a_one_d_coarse_mesh_unchanged():
    """A 1-D coarse mesh (8 devices for the given 2x4) keeps its wording."""
    report = {"status": "feasible", "seconds_solver": 4.5, "gap": None, "searched_mesh": "8",
              "mesh": {"shape": [2, 4], "user_shape": [2, 4]}}
    assert status_in_words(report) == ("best found in 4 s on the coarse mesh 8 (the given mesh's strategy space "
                                       "was not searched: its cost graph's build did not fit in the time limit (the "
                                       "warning on that build gives the seconds); a longer time limit searches it; "
                                       "distance to its optimum unknown)")
