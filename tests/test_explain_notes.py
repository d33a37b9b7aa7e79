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
