"""What a solve spends besides solving (round 27, issue 26's scale rows): the garbage collector run less often over
a build's millions of long-lived objects (autoshard.solve.fewer_collections, collect_less), and OR-Tools' cp_model
loaded without pandas (solver.cpsat._PandasLater), which it imports for helpers hloshard never calls."""

import gc
import subprocess
import sys

import pytest

from hloshard.autoshard import solve as solve_mod
from hloshard.autoshard.solve import GC_THRESHOLDS, fewer_collections, solve_module
from hloshard.hlo.parser import parse_module
from hloshard.mesh import DeviceMesh

DOT = """HloModule m
ENTRY e {
  a = f32[8,8] parameter(0)
  b = f32[8,8] parameter(1)
  ROOT d = f32[8,8] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


def test_fewer_collections_raises_the_thresholds_and_puts_the_callers_back():
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        with fewer_collections():
            inside = gc.get_threshold()
            with fewer_collections():
                assert gc.get_threshold() == inside
            assert gc.get_threshold() == inside
        assert inside == GC_THRESHOLDS and gc.get_threshold() == (700, 10, 10)
        gc.set_threshold(10 ** 6, 5, 500)   # a caller's higher threshold is kept, a lower one raised
        with pytest.raises(RuntimeError):
            with fewer_collections():
                assert gc.get_threshold() == (10 ** 6, GC_THRESHOLDS[1], 500)
                raise RuntimeError("out")
        assert gc.get_threshold() == (10 ** 6, 5, 500)
    finally:
        gc.set_threshold(*before)


def test_solve_module_runs_under_the_raised_thresholds(monkeypatch):
    seen = []
    real = solve_mod._solve_module

    def spy(*args, **kwargs):
        seen.append(gc.get_threshold())
        return real(*args, **kwargs)

    monkeypatch.setattr(solve_mod, "_solve_module", spy)
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        module = parse_module(DOT)
        res = solve_module(module, DeviceMesh.for_module(module, "2x2"), time_limit=2, workers=1, deterministic=True)
        assert res.evaluation.total >= 0
        assert seen == [GC_THRESHOLDS] and gc.get_threshold() == (700, 10, 10)
    finally:
        gc.set_threshold(*before)


def test_cp_model_loads_without_pandas_and_gets_it_at_first_use():
    code = ("import sys; import hloshard.solver.cpsat as c; print('pandas' in sys.modules); "
            "import pandas; s = pandas.Series([1, 2], index=[5, 6]); "
            "print(list(c.cp_model._get_index(s)), c.cp_model.pd.Series is pandas.Series)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "[5,", "6]", "True"], out.stdout
