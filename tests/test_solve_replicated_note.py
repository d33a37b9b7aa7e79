"""``hloshard solve`` says when the written plan computes the whole step on every device (new user 25: `--mesh
2x2x2` on Gemma3 wrote the replicated plan, 129.8 MiB per device, and said nothing); one rule and one note with
``auto_shard`` (hloshard.autoshard.report: _replicated_step, _all_replicated_note), in the CLI's words."""

from hloshard.autoshard.build import build_graph
from hloshard.autoshard.report import written_replicated_note
from hloshard.commands.solve import _replicated_cost
from hloshard.autoshard.trivial import trivial_plans
from hloshard.autoshard.evaluate import evaluate_choice
from hloshard.hlo.parser import parse_module
from hloshard.mesh import DeviceMesh

from tests.test_coarse_to_fine import TINY_RESHAPE


def test_a_replicated_written_plan_is_told_in_the_cli_words():
    module = parse_module(TINY_RESHAPE, "tiny.hlo")   # no parameter carries a sharding
    report = {"objective": 1000.0, "breakdown": {"compute": 1000.0, "communication": 0.0},
              "predicted_collective_bytes_per_device": 0, "peak_memory_per_device": 4 << 20}
    note = written_replicated_note(report, module, 8)
    assert note.startswith("the plan replicates the whole step: every argument stays replicated, so each of the 8 "
                           "devices computes all of it (objective 1,000 cost units, peak 4.0 MiB per device)"), note
    assert "--memory-budget" in note and "--time-limit" in note and "memory_budget=" not in note, note
    assert "--device" in written_replicated_note(report, module, 8)
    # a plan that moves bytes, or one device, is not told so
    assert written_replicated_note(dict(report, predicted_collective_bytes_per_device=4096), module, 8) is None
    assert written_replicated_note(report, module, 1) is None


def test_split_parameters_that_divide_no_flop_are_still_the_whole_step():
    """Some parameters split, nothing moved: told only when the plan's compute is the replicated plan's (no flop
    divided), priced on the graph (trivial_plans' replicated plan)."""
    text = TINY_RESHAPE.replace("p1 = f32[64,32]{1,0} parameter(1)",
                                "p1 = f32[64,32]{1,0} parameter(1), sharding={devices=[8,1]<=[8]}")
    module = parse_module(text, "tiny.hlo")
    mesh = DeviceMesh.for_module(module, "8")
    graph = build_graph(module, mesh)
    compute = _replicated_cost(graph)
    assert compute == evaluate_choice(graph, dict(trivial_plans(graph))["replicated"]).total
    report = {"objective": compute, "breakdown": {"compute": compute, "communication": 0.0},
              "predicted_collective_bytes_per_device": 0}
    note = written_replicated_note(report, module, 8, lambda: _replicated_cost(graph))
    assert note is not None and note.startswith("the plan replicates the whole step: 1 of 2 arguments stay replicated")
    assert written_replicated_note(dict(report, breakdown={"compute": compute / 8}), module, 8,
                                   lambda: _replicated_cost(graph)) is None
    assert written_replicated_note(report, module, 8) is None   # nothing to price the replicated plan with
