"""``--mesh auto``'s ranking and time (issue 26, new user 22 finding 4): a finer candidate whose solve had no
time to improve on its start reported the replicated plan (120.4 M) and was ranked by it, below the 1-D
mesh's 60.8 M, while fixed shares left 40% of the limit unused.  Now the first candidate's plan (the 1-D
mesh of the same devices) is every later candidate's known start (and, in wall-clock mode, their coarse
solve where it is their coarse mesh), a candidate's share is given when it starts, and the candidate of the
largest build is solved in the parent so that only the forked ones' rebuilds are reserved.

Fast and clock-free: a small sample in deterministic mode with a solver stub that returns its start (a
solve with no time), a fake clock for the schedule, counted builds for the coarse reuse."""

import pytest

from hloshard.hlo import parse_module
from tests.patching import setattr_everywhere

SAMPLE = "samples/transformer_train_step.pre.hlo"


def _module():
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / SAMPLE
    return parse_module(path.read_text(), str(path)), str(path)


def _starved(real):
    """A solve_graph that, on every mesh but the 1-D one of 8 devices, returns its start as a solve with no time
    would (the hint, else the cheapest trivial plan), and solves the 1-D mesh for real."""
    from hloshard.autoshard.trivial import cheapest_trivial
    from hloshard.costgraph import evaluate
    from hloshard.solver.api import Solution

    def solve(graph, time_limit=60.0, workers=2, seed=0, deterministic=False, progress=None, hint=None):
        if tuple(graph.mesh.user_shape) == (8,):
            return real(graph, time_limit=time_limit, workers=workers, seed=seed, deterministic=deterministic,
                        progress=progress, hint=hint)
        choice = list(hint) if hint is not None else list(cheapest_trivial(graph)[1])
        obj, feasible = evaluate(graph.problem, choice)
        assert feasible
        return Solution(choice, int(obj), 0, "feasible", 0.0)

    return solve


def test_a_finer_candidate_with_no_time_reports_no_worse_than_the_1d_mesh(monkeypatch):
    """The finer candidates' solves are starved (they return their start) and have no coarser mesh of their own
    (``coarse_mesh`` None: no coarse start): on main they reported the trivial plan (2x2x2 at 53.9 M against
    the 1-D mesh's 21.2 M); now they start from the 1-D plan mapped onto their graph, and where it maps node for
    node they report exactly its cost."""
    from hloshard.autoshard import coarse as coarse_mod
    from hloshard.autoshard import solve as solve_mod
    from hloshard.mesh_search import search_meshes

    monkeypatch.setattr(solve_mod, "solve_graph", _starved(solve_mod.solve_graph))
    monkeypatch.setattr(coarse_mod, "coarse_mesh", lambda mesh, module: None)
    module, name = _module()
    search = search_meshes(module, name, devices=8, time_limit=2.0, workers=1, deterministic=True)
    head = search.trials[0]
    assert head.label == "8" and head.objective is not None
    finer = [t for t in search.trials[1:] if t.same_as is None]
    assert finer, [t.label for t in search.trials]
    for t in finer:
        assert t.objective is not None
        assert t.objective <= head.objective * (1 + 1e-9), (t.label, t.objective, head.objective)
    assert search.best.objective <= head.objective * (1 + 1e-9)


def test_the_carried_plan_maps_node_for_node_and_costs_what_it_did():
    """``_carried``: the 1-D plan as a choice of the 2x4 graph (the module's own mesh) costs there what it cost
    on the 1-D graph (alpha and beta 1 on both)."""
    from hloshard.autoshard import solve_module
    from hloshard.autoshard.evaluate import evaluate_choice
    from hloshard.autoshard.build import build_graph
    from hloshard.mesh import DeviceMesh
    from hloshard.mesh_search import _carried

    module, _ = _module()
    head = solve_module(module, DeviceMesh.for_module(module, "8"), time_limit=1.0, deterministic=True,
                        reevaluate=False, apply=False)
    graph = build_graph(module, DeviceMesh.for_module(module, "2x4"), "io", None)
    (choice,) = _carried(head)(graph)
    assert evaluate_choice(graph, choice).total == pytest.approx(head.evaluation.total, rel=1e-9)


def test_a_candidate_that_ends_early_leaves_its_time_to_the_next_in_its_lane(monkeypatch):
    """The schedule (fake clock): two candidates in a lane with 80 s left get 40 s each when they start at
    once; one that ended after 10 s leaves the next 70 s, not its fixed 40.  Deterministic mode: the fixed
    share, no end."""
    from hloshard import mesh_search

    clock = [20.0]
    monkeypatch.setattr(mesh_search.time, "monotonic", lambda: clock[0])
    schedule = mesh_search._Schedule(None, 100.0)
    assert schedule.next(2) == (40.0, 60.0)
    clock[0] = 30.0
    assert schedule.next(1) == (70.0, 100.0)
    clock[0] = 99.8
    assert schedule.next(1) == (1.0, 100.8)   # at least 1 s
    assert mesh_search._Schedule(2.5, None).next(3) == (2.5, None)


def test_the_largest_build_is_solved_here_and_only_forked_rebuilds_are_reserved(monkeypatch):
    """Wall-clock search with two workers: the candidate of the most layouts is solved in this process (its
    graph kept, never rebuilt), the others in a forked lane one after the other, each with its share when it
    starts; the final reserve holds the re-pricing and the largest forked build only."""
    import os

    from hloshard import mesh_search

    seen = {}
    record = mesh_search._record
    solve_one = mesh_search._solve_one

    def tagged(*args, **kwargs):
        out = solve_one(*args, **kwargs)
        out["pid"] = os.getpid()
        out["end"] = kwargs.get("end", args[6] if len(args) > 6 else None)
        return out

    def noted(trial, outcome, module):
        seen[trial.label] = outcome
        record(trial, outcome, module)

    reserves = []
    final_reserve = mesh_search.final_reserve

    def kept(head, rebuild):
        reserves.append(rebuild)
        return final_reserve(head, rebuild)

    monkeypatch.setattr(mesh_search, "_solve_one", tagged)
    monkeypatch.setattr(mesh_search, "_record", noted)
    monkeypatch.setattr(mesh_search, "final_reserve", kept)
    monkeypatch.setattr(mesh_search, "_jobs", lambda workers, tasks: 2)
    module, search = _search_in_lanes()
    solved = [t for t in search.trials[1:] if t.same_as is None and t.status != "skipped"]
    assert len(solved) >= 3, [(t.label, t.status) for t in search.trials]
    here = [t.label for t in solved if seen[t.label]["pid"] == os.getpid()]
    assert len(here) == 1
    counts = {t.label: sum(mesh_search.layout_counts(module, t.mesh)) for t in solved}
    assert counts[here[0]] == max(counts.values())
    assert all(seen[t.label]["end"] is not None for t in solved)
    assert search.best.result is not None and search.best.objective is not None
    assert len(reserves) == 1 and reserves[0] >= 0.0


MLP = """HloModule mlp
ENTRY e {
  x = f32[64,128] parameter(0)
  w1 = f32[128,256] parameter(1)
  w2 = f32[256,128] parameter(2)
  h = f32[64,256] dot(x, w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  r = f32[64,256] tanh(h)
  ROOT y = f32[64,128] dot(r, w2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


def _search_in_lanes():
    """A short wall-clock search of a module with no mesh of its own over 8 devices (8, then 2x4, 4x2 and 2x2x2,
    three distinct internal meshes)."""
    from hloshard.mesh_search import search_meshes

    module = parse_module(MLP, "mlp.hlo")
    return module, search_meshes(module, "mlp.hlo", devices=8, time_limit=6.0, workers=2)


def test_a_solved_coarse_problem_is_not_built_or_solved_again(monkeypatch):
    """``coarse_first(solved=)``: the coarse problem solved before (the 1-D candidate) on the coarse mesh is used
    as it is: no coarse build, no coarse solve, its plan mapped as the fine solve's start; on another mesh it is
    ignored (the coarse mesh is built as before)."""
    import time

    from hloshard.autoshard import coarse
    from hloshard.autoshard.search import solve_graph
    from hloshard.mesh import DeviceMesh

    module = parse_module(MLP, "mlp.hlo")
    fine = DeviceMesh.for_module(module, "2x4")
    cmesh = coarse.coarse_mesh(fine, module)
    assert cmesh is not None
    cgraph = coarse.build_graph(module, cmesh, "io", None)
    sol = solve_graph(cgraph, time_limit=1.0, deterministic=True)
    solved = coarse.CoarseSolve(cgraph, sol, cmesh, 0.5, 0.2)
    built, solves = [], []
    build_graph = coarse.build_graph

    def counted_build(module_, mesh, *args, **kwargs):
        built.append(tuple(mesh.shape))
        return build_graph(module_, mesh, *args, **kwargs)

    def counted_solve(graph, **kwargs):
        solves.append(tuple(graph.mesh.shape))
        return solve_graph(graph, **kwargs)

    setattr_everywhere(monkeypatch, coarse, "build_graph", counted_build)
    first = coarse.coarse_first(module, fine, counted_solve, "io", None, 20.0, 1, 0,
                                deadline=time.monotonic() + 60.0, solved=solved)
    assert built == [tuple(fine.shape)] and solves == []
    assert first.start is not None and first.start.choice is not None and first.start.unmatched == 0
    assert first.start.mapped_objective == pytest.approx(first.start.objective, rel=1e-9)
    other = coarse.CoarseSolve(cgraph, sol, DeviceMesh((8,), None, [2.0], [2.0]), 0.5, 0.2)
    assert not coarse.same_space(other.mesh, cmesh)
    built.clear()
    coarse.coarse_first(module, fine, counted_solve, "io", None, 20.0, 1, 0, deadline=time.monotonic() + 60.0,
                        solved=other)
    assert tuple(cmesh.shape) in built and solves
