"""The summary's ``inputs`` row (new user 23, finding 5): a plan that leaves a batch input replicated although a mesh
axis divides its leading dim says so (a note, not a plan change); state leaves, split inputs, scalars and inputs no
axis divides are not named."""

from hloshard.summary import render_summary, replicated_batch_inputs, replicated_inputs_row


def test_replicated_batch_inputs_names_only_the_splittable_inputs_that_are_not_state():
    rows = replicated_batch_inputs(
        ["[0]['w']", "[1]", "[2]", "[3]", "[4]", "[5]"],
        [(256, 512), (16, 128), (16, 128), (), (7, 3), (16,)],
        [True, True, False, True, True, True],
        {0}, {"data": 2, "model": 4})
    # [0] is state, [2] is split, [3] a scalar, [4]'s 7 no axis divides; [1] and [5] are named with the axes dividing them
    assert [r["input"] for r in rows] == ["[1]", "[5]"]
    assert rows[0] == {"input": "[1]", "shape": [16, 128], "axes": ["data", "model"]}


def test_the_summary_prints_the_row_and_no_row_without_such_inputs():
    report = {"mesh": {"shape": [2, 4]}, "objective": 1.0, "status": "optimal", "peak_memory_per_device": 1000,
              "memory_budget": None,
              "breakdown": {"compute": 1.0, "communication": 0.0, "resharding": 0.0},
              "replicated_inputs": [{"input": "[1]", "shape": [16, 128], "axes": ["data"]}]}
    row = replicated_inputs_row(report)
    assert row.startswith("1 input that is not state enters replicated ([1] [16, 128])") and "'data'" in row
    assert replicated_inputs_row({"replicated_inputs": []}) is None
    text = render_summary(report, files=False, width=200)
    assert "1 input that is not state enters replicated" in text, text


def test_the_time_line_says_a_deterministic_limit_is_work_not_wall_time():
    """New user 31, F18: ``--deterministic --time-limit 10`` printed "198.3 s in all (--time-limit 10 s)", read as a
    limit overrun; the limit is a work budget there, and the line now says so (wall-clock mode unchanged)."""
    from hloshard.summary import time_line

    report = {"seconds_phases": {"total": 198.3, "build": 11.5, "solve": 74.5}, "time_limit": 10}
    assert time_line(report) == "198.3 s in all (--time-limit 10 s): build 11.5, solve 74.5"
    assert time_line({**report, "deterministic": True}) == (
        "198.3 s in all (--time-limit 10 s of work under --deterministic, not of wall time): build 11.5, solve 74.5")
