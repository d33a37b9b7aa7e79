"""``--mesh auto`` in wall-clock mode does not start a candidate after its time limit: every candidate
gets at least 1 s, so 4,096 devices (67 candidate shapes) of a 3-instruction module ran 156.6 s under
the default 60 s limit (new user 14, finding 3).  Not a timing test: it checks that candidates are
skipped, and says so, once the limit has passed."""

from hloshard.hlo import parse_module
from hloshard.mesh_search import _solve_one, search_meshes

DOT = """HloModule m
ENTRY e {
  a = f32[4,4] parameter(0)
  b = f32[4,4] parameter(1)
  ROOT d = f32[4,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


def test_a_candidate_not_started_by_the_deadline_is_skipped():
    import time

    out = _solve_one(parse_module(DOT), None, 1.0, {}, deadline=time.monotonic() - 1.0)
    assert out["status"] == "skipped" and "time limit" in out["message"]


def test_many_candidates_end_near_the_limit(monkeypatch):
    # each candidate made to take at least 0.05 s, so that 67 of them cannot all run in a 0.5 s limit on
    # any machine (unpatched they take about 0.02 s each or less: a fast machine ran them all in time)
    import time

    from hloshard import mesh_search

    solve_one = mesh_search._solve_one

    def slow(*args, **kwargs):
        time.sleep(0.05)
        return solve_one(*args, **kwargs)

    monkeypatch.setattr(mesh_search, "_solve_one", slow)
    search = search_meshes(parse_module(DOT), "dot.hlo", devices=4096, time_limit=0.5, workers=1)
    statuses = [t.status for t in search.trials]
    assert len(statuses) >= 60
    skipped = [t for t in search.trials if t.status == "skipped"]
    assert skipped and all(t.message for t in skipped)
    assert search.best.objective is not None     # the candidates that ran still give a plan


def test_auto_mesh_candidates_on_a_tpu_use_its_memory_model():
    """A candidate mesh of ``--mesh auto --device tpu-v5e`` carries the TPU's memory model (its layout and
    libtpu's heap bound, the budget's margin) as ``--mesh SPEC --device tpu-v5e`` does; round 21: it carried
    none, so a budget under ``--mesh auto`` got the CPU's margin.  A GPU profile has none on either path."""
    from hloshard.mesh_search import _timed_mesh
    from hloshard.mesh_setup import timed_mesh_from_options

    module = parse_module(DOT)
    for device in ("tpu-v5e", "h100-sxm"):
        auto, _ = _timed_mesh(module, "2x4", device)
        given, _, _ = timed_mesh_from_options(module, "2x4", None, None, None, device, None)
        assert auto.memory_device == given.memory_device, device
        assert (auto.memory_device is not None) == device.startswith("tpu"), (device, auto.memory_device)
