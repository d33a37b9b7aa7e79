"""``solve`` of a training step with no ``input_output_alias`` and no ``--tie`` says when outputs of a
parameter's shape leave in another layout than the parameter comes in (a loop would reshard them before
every step, and no cost counts it), naming the ``--tie`` flags that keep them; with ties it says nothing.
A new user's T5 train step came back with its parameters in replicated and its new parameters out split
(round 14, finding 6)."""

from pathlib import Path

from click.testing import CliRunner

from hloshard.cli import main

SAMPLE = Path(__file__).resolve().parents[1] / "samples" / "mlp_train_step.pre.hlo"


def _solve(tmp_path, *extra):
    r = CliRunner().invoke(main, ["solve", str(SAMPLE), "--mesh", "2x4", "--deterministic", "--time-limit", "5",
                                  "-o", str(tmp_path / "o.hlo"), *extra])
    assert r.exit_code == 0, r.output
    return r.output + (r.stderr if r.stderr_bytes is not None else "")


def test_untied_train_step_is_noted_and_tied_one_is_not(tmp_path):
    text = " ".join(_solve(tmp_path).split())
    assert "root outputs have the shape and dtype of an entry parameter and leave in another layout" in text
    assert "--tie 1=0" in text
    tied = " ".join(_solve(tmp_path, "--tie", "1=0", "--tie", "2=1", "--tie", "3=2", "--tie", "4=3").split())
    assert "leave in another layout" not in tied
