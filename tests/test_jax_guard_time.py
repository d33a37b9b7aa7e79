"""The memory guard's re-solves (:func:`hloshard.jax.guard._guard`) take the first solve's cost graph
(``solve_module(graph=...)``, :func:`hloshard.autoshard.build.with_memory_budget`) and must keep back the
re-pricing reserve that graph's own solve computed (``graph.reprice_seconds``: REPRICE_SHARE x its 1-D
build), not REPRICE_SHARE x its ``build_seconds`` (the fine build's): on new user 18's encoder-decoder
(round 18, fine build 9.8 s, reserve 3.9 s, 17 s left) that left each re-solve the 0.5 s floor of solver
and ``auto_shard`` returned the data-parallel fallback."""

import time
from pathlib import Path

from hloshard.autoshard.build import build_graph
from hloshard.autoshard.solve import MIN_SOLVE_SECONDS, REPRICE_SHARE, solve_module
from hloshard.hlo.parser import parse_file
from hloshard.mesh import DeviceMesh

SAMPLE = Path(__file__).resolve().parents[1] / "samples" / "mlp_train_step.pre.hlo"


def test_a_graph_built_before_keeps_its_own_reprice_reserve():
    module = parse_file(str(SAMPLE))
    mesh = DeviceMesh((2, 4))
    graph = build_graph(module, mesh, "io", None)
    # a fine build far longer than the time left, a small 1-D (coarse) build: as on the encoder-decoder
    graph.build_seconds = 100.0
    graph.reprice_seconds = 0.1
    left = 4.0
    assert REPRICE_SHARE * graph.build_seconds > left   # the old reserve would leave the floor only
    res = solve_module(module, mesh, graph=graph, time_limit=3.0, deadline=time.monotonic() + left, apply=False)
    assert res.solver_time_limit is not None and res.solver_time_limit > MIN_SOLVE_SECONDS
    assert res.solver_time_limit <= 3.0
