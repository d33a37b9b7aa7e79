"""``explain``'s notes read as sentences (the fresh-clone check of round 31): where the annotations leave one
choice for each open instruction, the note says so, not ``their shardings were the annotations fix every choice``
(a clause of :meth:`hloshard.autoshard.evaluate.CostResult.completion_words` pasted after "were")."""

from pathlib import Path

from click.testing import CliRunner

from hloshard.cli import main

ROOT = Path(__file__).resolve().parent.parent


def test_explain_note_on_instructions_without_a_sharding_reads_as_a_sentence():
    r = CliRunner().invoke(main, ["explain", str(ROOT / "samples" / "mlp_train_step.propagated.hlo"),
                                  "--instruction", "dot_general.9", "--mesh", "2x4"])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    # one open instruction on this sample: the singular throughout (fresh-clone check 33: "1 of ... carries no
    # sharding (their shardings were ...)")
    assert "1 of the module's" in text and "carries no sharding (its sharding was" in text, text
    assert "were the annotations fix" not in text and "their shardings" not in text
    assert "its sharding was fixed by the annotations around it, nothing left to choose" in text


def test_reshard_cache_warning_in_seconds_with_a_device():
    """``solve --device``: the reshard-cache warning's figures in seconds, as the warning after it and the cost
    line (the fresh-clone check of round 31: cost units beside µs), made from the figures the report carries
    beside the warning (``solver_objective``, ``reshard_cache_cost``; round 32: they were read back out of its
    text); without a device, or for a text whose figures are not the report's, the warning as it is."""
    from hloshard.autoshard.report import reshard_cache_warning
    from hloshard.summary import user_warning

    w = reshard_cache_warning(2_000_000.0, 500_000.0)
    assert w.startswith("the solver's own figure, 2,000,000.00, pays 500,000.00 for reshardings that XLA's")
    report = {"step_time": {"seconds_per_unit": 1e-12}, "solver_objective": 2_000_000.0, "reshard_cache_cost": 500_000.0}
    said = user_warning(w, report)
    assert said.startswith("the solver's own figure, 2.00 us, pays 0.50 us for reshardings that XLA's partitioner")
    assert said == reshard_cache_warning(2_000_000.0, 500_000.0, 1e-12) and "reshard cache" in said
    assert user_warning(w, {k: v for k, v in report.items() if k != "step_time"}) == w    # no device: units
    # the figures are the report's, not the text's: a warning of other figures is not rewritten with them
    other = reshard_cache_warning(3_000_000.0, 500_000.0)
    assert user_warning(other, report) == other


def test_solve_device_says_the_reshard_cache_warning_in_seconds(tmp_path):
    """End to end: ``solve --device h100-sxm`` of the MLP step (a plan whose pairwise edges pay 263,948.77 units
    for reshardings XLA's cache serves): the report carries the figure beside the warning, its JSON warning is
    in units, and stderr says it in seconds, from the report's ``solver_objective`` and ``reshard_cache_cost``."""
    import json

    from hloshard.autoshard.report import reshard_cache_warning
    from hloshard.cost.steptime import format_seconds

    rep = tmp_path / "r.json"
    r = CliRunner().invoke(main, ["solve", str(ROOT / "samples" / "mlp_train_step.pre.hlo"), "--mesh", "2x4",
                                  "--device", "h100-sxm", "--deterministic", "--time-limit", "5",
                                  "-o", str(tmp_path / "o.hlo"), "--report", str(rep)])
    assert r.exit_code == 0, r.output
    report = json.loads(rep.read_text())
    paid, own = report["reshard_cache_cost"], report["solver_objective"]
    assert paid > 0 and reshard_cache_warning(own, paid) in report["warnings"]
    spu = report["step_time"]["seconds_per_unit"]
    text = " ".join(r.output.split())
    assert f"warning: the solver's own figure, {format_seconds(own * spu)}, pays {format_seconds(paid * spu)} for" \
        in text
    assert f"pays {paid:,.2f}" not in text
