"""``--mesh auto``'s skip rule reads the fine build's estimate, ``coarse.build_cost`` (round 27), not the layouts'
sum (round 16's ``build_work``: 0.4-9.3x the measured builds in round 26).  A chain of structurally equal adds
shares one strategy list and one resharding matrix per mesh, so its build grows with its nodes, not with their
layouts: at 2x2x2 its layouts' sum is 16x that of the 1-D mesh of 8, its build_cost 1.27x.  The head's measured
build is set (a stub), so the rule is checked without timing anything."""

import pytest

from hloshard import mesh_search
from hloshard.autoshard.coarse import build_cost
from hloshard.hlo import parse_module
from hloshard.mesh_search import search_meshes


def _chain(n: int = 120) -> str:
    lines = ["HloModule m", "ENTRY e {", "  p = f32[64,64,64] parameter(0)"]
    prev = "p"
    for i in range(n):
        lines.append(f"  {'ROOT ' if i == n - 1 else ''}a{i} = f32[64,64,64] add({prev}, p)")
        prev = f"a{i}"
    return "\n".join(lines + ["}"])


def _search(monkeypatch, head_build: float, time_limit: float):
    solve_one = mesh_search._solve_one
    calls = []

    def stub(module, mesh, *args, **kwargs):
        out = solve_one(module, mesh, *args, **kwargs)
        if not calls and out.get("result") is not None:   # the head: its build measured at head_build seconds
            out["result"].seconds_build = head_build
        calls.append(tuple(mesh.user_shape))
        return out

    monkeypatch.setattr(mesh_search, "_solve_one", stub)
    module = parse_module(_chain())
    search = search_meshes(module, "chain.hlo", devices=8, time_limit=time_limit, workers=1)
    return search, calls


def _trial(search, label):
    return next(t for t in search.trials if t.label.split()[0] == label)


def test_a_mesh_whose_build_cost_fits_is_not_skipped_for_its_layouts(monkeypatch):
    # head (1-D 8) built in 5 s: by build_cost 2x2x2 builds in ~6.4 s of 60; by the layouts' sum ~80 s (main skipped it)
    search, calls = _search(monkeypatch, 5.0, 60.0)
    assert calls[0] == (8,)
    t = _trial(search, "2x2x2")
    assert t.status != "skipped", t.message
    assert (2, 2, 2) in calls


def test_a_mesh_whose_build_cost_passes_the_limit_is_skipped_with_that_estimate(monkeypatch):
    search, calls = _search(monkeypatch, 50.0, 60.0)
    t = _trial(search, "2x2x2")
    assert t.status == "skipped" and (2, 2, 2) not in calls
    module = parse_module(_chain())
    one_d, fine = (t2.mesh for t2 in (_trial(search, "8"), t))
    predicted = 50.0 * build_cost(module, fine) / build_cost(module, one_d)
    assert 55 < predicted < 80   # the chain's size: its nodes, not its 16x layouts
    assert f"about {predicted:.0f} s" in t.message and "build_cost" in t.message
