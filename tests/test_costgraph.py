"""The IOPDDL cost graph: loading, saving, evaluating (hloshard.costgraph)."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from hloshard.costgraph import INFINITY, Problem, evaluate, live_usage_profile, load_problem, save_problem
from hloshard.errors import InputError
from tests.conftest import require_shared

G = ("iopddl", "asplos-2025-iopddl-G.json.gz")  # under the shared dir, see tests.conftest.require_shared


def small_problem(limit=None) -> Problem:
    # 3 nodes (2, 3, 2 strategies), edges 0-1 and 1-2
    return Problem(
        name="small",
        intervals=np.array([[0, 2], [1, 3], [2, 2]], dtype=np.int64),  # node 2 never live
        node_costs=[np.array([1, 5]), np.array([0, 2, 4]), np.array([3, 0])],
        node_usages=[np.array([10, 4]), np.array([7, 7, 1]), np.array([100, 100])],
        edges=np.array([[0, 1], [1, 2]], dtype=np.int64),
        edge_costs=[np.array([[0, 6, 9], [2, 0, INFINITY]]), np.array([[0, 1], [5, 0], [2, 2]])],
        usage_limit=limit,
    )


def test_load_instance_g_structure():
    p = load_problem(str(require_shared(*G)))
    assert p.name == "asplos-2025-iopddl-G"
    assert p.num_nodes == 816 and p.num_edges == 1023
    assert p.usage_limit == 14392528
    assert p.intervals.shape == (816, 2) and p.intervals.dtype == np.int64
    assert [len(c) for c in p.node_costs[:3]] == [2, 8, 8]
    assert p.edge_costs[0].shape == (len(p.node_costs[1]), len(p.node_costs[2]))
    assert p.cost_scale == 1.0
    # everything against the raw JSON document, read here without the loader: every node's interval,
    # costs and usages, every edge's endpoints and its row-major flat cost list
    raw = json.loads(gzip.open(require_shared(*G)).read())["problem"]
    assert raw["name"] == p.name and raw["usage_limit"] == p.usage_limit
    assert p.intervals.tolist() == raw["nodes"]["intervals"]
    assert [c.tolist() for c in p.node_costs] == raw["nodes"]["costs"]
    assert [u.tolist() for u in p.node_usages] == raw["nodes"]["usages"]
    assert p.edges.tolist() == raw["edges"]["nodes"]
    assert [e.reshape(-1).tolist() for e in p.edge_costs] == raw["edges"]["costs"]
    for (u, v), e in zip(p.edges.tolist(), p.edge_costs):
        assert e.shape == (len(p.node_costs[u]), len(p.node_costs[v]))


def test_evaluate_by_hand():
    p = small_problem()
    # s = (0, 1, 1): node 1 + 2 + 0, edges [0,1]=6 and [1,1]=0
    assert evaluate(p, [0, 1, 1]) == (1 + 2 + 0 + 6 + 0, True)
    # forbidden pair (1, 2) on edge 0-1
    obj, feasible = evaluate(p, [1, 2, 0])
    assert not feasible and obj >= INFINITY


def test_evaluate_memory_limit_half_open_intervals():
    p = small_problem(limit=14)
    # t=1: nodes 0 ([0,2)) and 1 ([1,3)) are live; node 2 ([2,2)) never is
    assert evaluate(p, [1, 0, 0])[1] is True    # 4 + 7 = 11 <= 14
    assert evaluate(p, [0, 0, 0])[1] is False   # 10 + 7 = 17 > 14
    p.usage_limit = 10
    assert evaluate(p, [1, 0, 0])[1] is False   # 11 > 10
    p.usage_limit = 11
    assert evaluate(p, [0, 2, 0])[1] is True    # 10 + 1 = 11; node 2's 100 never counts
    times, usage = live_usage_profile(p, [0, 2, 0])
    assert times.tolist() == [0, 1] and usage.tolist() == [10, 11]


def test_evaluate_rejects_bad_strategies():
    p = small_problem()
    with pytest.raises(InputError, match="expected 3 strategies"):
        evaluate(p, [0, 0])
    with pytest.raises(InputError, match="out of range"):
        evaluate(p, [0, 3, 0])


@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
def test_save_load_round_trip(tmp_path, suffix):
    p = small_problem(limit=50)
    p.cost_scale = 0.25
    p.aliases = [(0, 2, np.array([[True, False], [False, True]]))]
    path = str(tmp_path / ("p" + suffix))
    save_problem(p, path)
    q = load_problem(path)
    assert q.name == p.name and q.usage_limit == 50 and q.cost_scale == 0.25
    assert np.array_equal(q.intervals, p.intervals)
    assert all(np.array_equal(a, b) for a, b in zip(q.node_costs, p.node_costs))
    assert all(np.array_equal(a, b) for a, b in zip(q.edge_costs, p.edge_costs))
    assert len(q.aliases) == 1 and np.array_equal(q.aliases[0][2], p.aliases[0][2])
    # an alias pair that is not allowed makes a solution infeasible
    assert evaluate(q, [0, 1, 0])[1] is True
    assert evaluate(q, [0, 1, 1])[1] is False
    if suffix == ".json.gz":  # byte-identical on a second save (no gzip timestamp)
        first = open(path, "rb").read()
        save_problem(p, path)
        assert open(path, "rb").read() == first


@pytest.mark.parametrize("extras", [False, True])
def test_streamed_problem_text_is_the_documents(extras):
    """save_problem streams the document (round 32: the 48-layer transformer's export at 2x2x2 took more than
    10 GB as Python lists): the pieces joined are json.dumps of problem_to_json, byte for byte, with and
    without the optional fields."""
    import json

    from hloshard.costgraph import problem_json_chunks, problem_to_json

    p = small_problem(limit=50 if extras else None)
    if extras:
        p.cost_scale = 0.25
        p.aliases = [(0, 2, np.array([[True, False], [False, True]])), (1, 2, np.ones((3, 2), dtype=bool))]
    want = json.dumps(problem_to_json(p), separators=(",", ":"))
    assert "".join(problem_json_chunks(p)) == want
    assert ('"aliases"' in want) == extras and ('"cost_scale"' in want) == extras


def test_json_syntax_errors_carry_their_line_and_column(tmp_path):
    from hloshard.errors import format_error

    path = tmp_path / "bad.json"
    path.write_bytes(b'{"problem":\n  {"nodes" 1}}')
    with pytest.raises(InputError) as info:
        load_problem(str(path))
    assert format_error(info.value) == f"{path}:2:12: error: not valid JSON: Expecting ':' delimiter"
    path.write_bytes(b"  \n")
    with pytest.raises(InputError, match="empty file"):
        load_problem(str(path))


@pytest.mark.parametrize("content, message", [
    (b"{not json", "not valid JSON"),
    (b"[1, 2]", "not an IOPDDL problem"),
    (b'{"problem": {"nodes": {}}}', "missing"),
    (b'{"problem": {"nodes": {"intervals": [[0,1]], "costs": [[1,2]], "usages": [[1]]},'
     b' "edges": {"nodes": [], "costs": []}}}', "2 costs but 1 usages"),
    (b'{"problem": {"nodes": {"intervals": [[0,1],[0,1]], "costs": [[1,2],[3]], "usages": [[1,1],[1]]},'
     b' "edges": {"nodes": [[0,1]], "costs": [[1,2,3]]}}}', "expected 2 x 1 = 2"),
    (b'{"problem": {"nodes": {"intervals": [[0,1]], "costs": [["a"]], "usages": [[1]]},'
     b' "edges": {"nodes": [], "costs": []}}}', "expected integers"),
    (b'{"problem": {"nodes": {"intervals": [[0,1]], "costs": [[1]], "usages": [[1]]},'
     b' "edges": {"nodes": [[0,5]], "costs": [[0]]}}}', "outside"),
    (b"\x1f\x8b\x08\x00garbage", "corrupt gzip"),
])
def test_malformed_files_raise_input_error(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(InputError, match=message):
        load_problem(str(path))


def test_missing_file():
    with pytest.raises(InputError, match="cannot read"):
        load_problem("/nonexistent/problem.json")


def test_malformed_problem_documents_are_input_errors(tmp_path):
    """Top-level structure of the wrong type, negative usages and a negative limit: one clear line."""
    import json as _json

    from hloshard.costgraph import load_problem
    from hloshard.errors import InputError

    def write(doc):
        p = tmp_path / "p.json"
        p.write_text(_json.dumps(doc))
        return str(p)

    node = {"intervals": [[0, 2]], "costs": [[3]], "usages": [[1]]}
    edges = {"nodes": [], "costs": []}
    with pytest.raises(InputError, match="expected"):
        load_problem(write({"problem": [1, 2]}))
    with pytest.raises(InputError, match="negative memory usage"):
        load_problem(write({"problem": {"nodes": {**node, "usages": [[-1]]}, "edges": edges}}))
    with pytest.raises(InputError, match="usage_limit must not be negative"):
        load_problem(write({"problem": {"nodes": node, "edges": edges, "usage_limit": -5}}))
    assert load_problem(write({"problem": {"nodes": node, "edges": edges, "usage_limit": 5}})).usage_limit == 5
