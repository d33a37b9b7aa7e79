"""Ties: a training step's state leaves in the sharding it came in with (``input_output_alias`` with
``may-alias`` / ``must-alias``, ``solve --tie``, ``module.ties``; :mod:`hloshard.autoshard.aliases`).
A tied pair is one node of the solver's problem; ``"pay"`` mode prices the resharding back instead."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
from click.testing import CliRunner

from hloshard.autoshard import build_graph, solve_module
from hloshard.autoshard.aliases import Tie, parse_tie, tie_merges
from hloshard.autoshard.tiebreak import real_part
from hloshard.cli import main
from hloshard.costgraph import evaluate
from hloshard.errors import UsageError
from hloshard.hlo import parse_module
from hloshard.mesh import DeviceMesh
from hloshard.solver.followers import expand_choice, merge_followers

SAMPLE = pathlib.Path(__file__).resolve().parent.parent / "samples" / "mlp_train_step.pre.hlo"
MESH = DeviceMesh.parse("2x4")
#: mlp_train_step returns (loss, new params 0..3): output k+1 is the next value of parameter k
STATE = [Tie((k + 1,), k) for k in range(4)]

#: a step whose cheapest plan changes the weight's layout: w comes in split on dim 1 (kept), x's dot
#: wants it split on dim 0 for the update; the alias kinds are filled in per test
ALIASED = """HloModule step, input_output_alias={ {1}: (0, {}, %s) }, num_partitions=8
add {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT s = f32[] add(p, q)
}
ENTRY e {
  w = f32[256,512] parameter(0)
  x = f32[64,256] parameter(1)
  d = f32[64,512] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  g = f32[256,512] dot(x, d), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  c = f32[] constant(0.01)
  b = f32[256,512] broadcast(c), dimensions={}
  u = f32[256,512] multiply(b, g)
  nw = f32[256,512] subtract(w, u)
  l = f32[] reduce(d, c), dimensions={0,1}, to_apply=add
  ROOT t = (f32[], f32[256,512]) tuple(l, nw)
}
"""


def _tied(module):
    e = module.entry
    params = {p.parameter_number: p for p in e.parameters}
    return [(str(params[k].sharding), str(e.root.sharding.tuple_elements[k + 1])) for k in range(4)]


def _solve(ties=None, **kw):
    m = parse_module(SAMPLE.read_text())
    if ties is not None:
        m.ties = ties
    kw.setdefault("time_limit", 10)
    return m, solve_module(m, MESH, deterministic=True, **kw)


@pytest.mark.parametrize("kind", ["may-alias", "must-alias"])
def test_input_output_alias_is_one_decision(kind):
    m = parse_module(ALIASED % kind)
    g = build_graph(m, MESH, "io")
    assert len(g.ties) == 1 and g.ties[0].donated and g.ties[0].tie.source == "input_output_alias"
    pair = g.ties[0]
    # one decision: the solver's problem has the output and the parameter in one node
    assert g.classes[pair.output_node] == g.classes[pair.param_node]
    m2 = parse_module(ALIASED % kind)
    res = solve_module(m2, MESH, time_limit=5, deterministic=True)
    e = m2.entry
    assert e.root.sharding.tuple_elements[1] == e.get("w").sharding


def test_tie_merge_prices_every_choice_as_the_full_problem():
    """The merged problem (ties through their strategy mapping, followers by index) gives every choice
    the objective and feasibility of the full problem, and their optima agree."""
    from hloshard.solver import solve_problem

    m = parse_module(SAMPLE.read_text())
    m.ties = STATE
    g = build_graph(m, MESH, "io")
    merges = tie_merges(g)
    assert len(merges) == 4 and len(g.ties) == 4
    full = g.problem
    red, classes = merge_followers(full, g.follows, ties=merges)
    assert red.num_nodes < merge_followers(full, g.follows)[0].num_nodes   # the ties merged too
    b = solve_problem(g.solver_problem, time_limit=20, deterministic=True)
    rng = np.random.default_rng(0)
    feasible = 0
    for _ in range(200):   # the optimum and choices a few moves away from it (random ones are infeasible)
        x = list(b.strategies)
        for v in rng.integers(len(x), size=int(rng.integers(0, 3))):
            x[int(v)] = int(rng.integers(len(red.node_costs[int(v)])))
        o_red, f_red = evaluate(red, x)
        o_full, f_full = evaluate(full, expand_choice(classes, x))
        assert f_red == f_full
        if f_red:
            feasible += 1
            assert o_red == o_full
    assert feasible > 20
    a = solve_problem(full, time_limit=20, deterministic=True)
    assert a.status == b.status == "optimal" and a.objective == real_part(b.objective, g.tie_break)


def test_tied_state_leaves_in_its_input_sharding_and_pay_mode_lies_between():
    m_free, free = _solve()
    assert any(p != o for p, o in _tied(m_free))        # untied, the plan changes the state's layout
    m_tie, tie = _solve(STATE)
    assert all(p == o for p, o in _tied(m_tie))
    m_pay, pay = _solve([Tie((k + 1,), k, mode="pay") for k in range(4)])
    assert not pay.graph.problem.aliases
    for r in (free, tie, pay):
        assert r.solution.status == "optimal"
    # pay prices the way back: no cheaper than ignoring it, no dearer than staying tied (a tied plan
    # pays nothing), and its written objective counts the resharding back of every differing leaf
    assert free.solver_objective <= pay.solver_objective + 1e-6
    assert pay.solver_objective <= tie.solver_objective + 1e-6
    back = [e for e, info in enumerate(pay.graph.edge_info) if any(c[0] is m_pay.entry.root for c in info)]
    assert back


def test_solve_tie_option(tmp_path):
    out, rep = tmp_path / "o.hlo", tmp_path / "r.json"
    args = ["solve", str(SAMPLE), "--mesh", "2x4", "--time-limit", "5", "--deterministic", "--quiet"]
    ties = [a for k in range(4) for a in ("--tie", f"{k + 1}={k}")]
    r = CliRunner().invoke(main, args + ties + ["-o", str(out), "--report", str(rep)])
    assert r.exit_code == 0, r.output
    assert all(p == o for p, o in _tied(parse_module(out.read_text())))
    assert json.loads(rep.read_text())["status"] == "optimal"


@pytest.mark.parametrize("value, message", [
    ("x=1", "OUTPUT_INDEX must be"), ("1", "expected OUTPUT_INDEX=PARAM_NUMBER"), ("1=-2", "PARAM_NUMBER must be"),
    ("9=0", "index {9} does not exist"), ("1=9", "no parameter 9"), ("0=0", "a tie needs the same shape"),
])
def test_solve_bad_tie_is_a_usage_error(tmp_path, value, message):
    out = tmp_path / "o.hlo"
    r = CliRunner().invoke(main, ["solve", str(SAMPLE), "--mesh", "2x4", "--time-limit", "2", "--quiet",
                                  "--tie", value, "-o", str(out)])
    assert r.exit_code == 2, r.output
    assert message in r.output and "Traceback" not in r.output
    assert not out.exists()


def test_parse_tie():
    assert parse_tie("1=0") == Tie((1,), 0, (), source="--tie")
    assert parse_tie("1,0=2,1") == Tie((1, 0), 2, (1,), source="--tie")
    with pytest.raises(UsageError):
        parse_tie("=1")
