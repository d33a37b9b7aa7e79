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
    assert "carries no sharding (their shardings were" in text or "carry no sharding (their shardings were" in text
    assert "were the annotations fix" not in text
    assert "their shardings were fixed by the annotations around them, nothing left to choose" in text


def test_reshard_cache_warning_in_seconds_with_a_device():
    """``solve --device``: the reshard-cache warning's figures in seconds, as the warning after it and the cost
    line (the fresh-clone check of round 31: cost units beside µs); without a device, unchanged."""
    from hloshard.summary import user_warning

    w = ("the solver's own figure, 2,000,000.00, pays 500,000.00 for reshardings that XLA's partitioner makes once "
         "and reuses (one value needed in one layout by several users: its reshard cache); the plan's cost counts "
         "each once")
    said = user_warning(w, {"step_time": {"seconds_per_unit": 1e-12}})
    assert said.startswith("the solver's own figure, 2.00 us, pays 0.50 us for reshardings that XLA's partitioner")
    assert "reshard cache" in said
    assert user_warning(w, {}) == w
