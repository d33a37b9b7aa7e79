"""The solver's memory refusal in the user's words (autoshard.report._name_nodes): when the tensors live at the
tightest point fit the limit each at its smallest layout (solver.presolve.tightest_point: infeasible only in
combination), the message must not say they "need at least" a figure below the limit it says cannot be met
(fresh-clone check 34: "limit 2.4 MiB ... cannot be met ...: need at least 2.0 MiB")."""

from types import SimpleNamespace as NS

from hloshard.autoshard.report import _name_nodes


def _graph():
    nodes = [NS(instr=NS(name=n, opcode="add")) for n in ("params_0", "params_1", "x")]
    return NS(classes=[0, 1, 2], nodes=nodes, schedule=[NS(name=f"op.{i}") for i in range(5)],
              module=NS(source_info=None))


def _solution(minimum, limit):
    return NS(detail={"time": 3, "limit": limit, "minimum_usage": minimum,
                      "nodes": [{"node": 0, "minimum_usage": 262144}, {"node": 1, "minimum_usage": 262144},
                                {"node": 2, "minimum_usage": 131072}]})


def test_a_combination_refusal_does_not_quote_a_need_below_the_limit():
    msg = _name_nodes(_graph(), "raw", _solution(2 * 2**20, int(2.4 * 2**20)))
    assert "cannot be met by any plan the solver may choose" in msg
    assert "need at least" not in msg
    assert "at the tightest liveness point, at liveness point 3 (op.3)" in msg
    assert "cannot all be chosen together" in msg and "params_0 (256.0 KiB)" in msg


def test_a_refusal_whose_smallest_layouts_exceed_the_limit_states_the_floor():
    msg = _name_nodes(_graph(), "raw", _solution(3 * 2**20, int(2.4 * 2**20)))
    assert "need at least 3.0 MiB even at their smallest layouts" in msg
    assert "cannot all be chosen together" not in msg
