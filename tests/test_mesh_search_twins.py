"""``--mesh auto`` when candidates are twins (new user 33 F4): NeoX's reshapes refine ``8``, ``2x4``, ``4x2`` and
``2x2x2`` onto one internal mesh, 2x2x2, so one problem is solved for all four.  It was solved as ``8`` (the first in
the candidates' order), whose solve has no coarser space to start from (the 1-D mesh refined at every cut is the fine
mesh itself), with a quarter of the limit and the rest unused: 18,390,768 against the 15,095,002 that ``--mesh 2x4``
writes from the plan of 2x4 unrefined (its coarse mesh).  Now a twin with a coarser space stands for the others, and
the only distinct problem gets the whole limit in wall-clock mode.

The module below has the property (two reshapes need the cuts at 4 and at 2); a dot makes the trivial plans far
costlier than the optimum (65.7 M replicated against 8,216), so a solve with no time shows which start it had."""

from hloshard import mesh_search
from hloshard.hlo import parse_module

TWINS = """HloModule r
ENTRY e {
  p = f32[64,512] parameter(0)
  w = f32[512,512] parameter(1)
  d = f32[64,512] dot(p, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  a = f32[2,32,512] reshape(d)
  b = f32[4,16,512] reshape(d)
  na = f32[2,32,512] negate(a)
  nb = f32[4,16,512] negate(b)
  ra = f32[64,512] reshape(na)
  rb = f32[64,512] reshape(nb)
  ROOT s = f32[64,512] add(ra, rb)
}
"""


def _starved_on_refined(real):
    """A solve_graph that returns its start on every refined mesh (the hint, else the cheapest trivial plan: a solve
    with no time) and solves unrefined meshes for real (the coarse spaces)."""
    from hloshard.autoshard.trivial import cheapest_trivial
    from hloshard.costgraph import evaluate
    from hloshard.solver.api import Solution

    def solve(graph, time_limit=60.0, workers=2, seed=0, deterministic=False, progress=None, hint=None):
        if not graph.mesh.is_refined:
            return real(graph, time_limit=time_limit, workers=workers, seed=seed, deterministic=deterministic,
                        progress=progress, hint=hint)
        choice = list(hint) if hint is not None else list(cheapest_trivial(graph)[1])
        obj, feasible = evaluate(graph.problem, choice)
        assert feasible
        return Solution(choice, int(obj), 0, "feasible", 0.0)

    return solve


def test_a_twin_with_a_coarser_space_stands_for_the_others_and_is_never_worse_than_it(monkeypatch):
    from hloshard.autoshard import solve as solve_mod
    from hloshard.autoshard import solve_module
    from hloshard.mesh import DeviceMesh

    monkeypatch.setattr(solve_mod, "solve_graph", _starved_on_refined(solve_mod.solve_graph))
    module = parse_module(TWINS)
    assert {str(DeviceMesh.for_module(module, s)) for s in ("8", "2x4", "4x2", "2x2x2")} == {"2x2x2"}
    search = mesh_search.search_meshes(parse_module(TWINS), "r.hlo", devices=8, time_limit=4, workers=1,
                                       deterministic=True)
    by = {t.label: t for t in search.trials}
    assert by["2x4"].same_as is None and by["2x4"].objective is not None, [(t.label, t.status) for t in search.trials]
    assert by["8"].same_as == "2x4" and by["4x2"].same_as == "2x4" and by["2x2x2"].same_as == "2x4"
    # what `--mesh 2x4` writes with the same (starved) solver: the plan of 2x4 unrefined, mapped
    alone = solve_module(parse_module(TWINS), DeviceMesh.for_module(module, "2x4"), time_limit=4 / 4,
                         deterministic=True, apply=False, reevaluate=False)
    assert search.best.objective <= alone.evaluation.total * (1 + 1e-9)
    # and far below the trivial plan the 1-D twin's solve had as its only start (65.7 M)
    assert search.best.objective < 1e6, search.best.objective


def test_the_only_distinct_candidate_gets_the_whole_limit_in_wall_clock_mode(monkeypatch):
    seen = []
    real = mesh_search.solve_module

    def recording(module, mesh, time_limit=60.0, **kw):
        seen.append((str(mesh), float(time_limit), kw.get("deadline"), kw.get("reprice_reserve")))
        return real(module, mesh, time_limit=time_limit, **kw)

    monkeypatch.setattr(mesh_search, "solve_module", recording)
    search = mesh_search.search_meshes(parse_module(TWINS), "r.hlo", devices=8, time_limit=12, workers=1)
    assert search.best.objective is not None
    assert len(seen) == 1, seen
    _mesh, limit, deadline, reserve = seen[0]
    assert limit == 12.0 and deadline is not None and reserve is True
