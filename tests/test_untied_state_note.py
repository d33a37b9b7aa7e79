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


def test_tie_matching_ties_every_output_of_a_parameters_shape(tmp_path):
    """``--tie matching`` (new user 15: a 133-leaf state needed 66 flags by hand) ties the pairs the note
    names, and the written outputs leave in their parameters' layouts; a bad --tie value is the CLI's one
    error form."""
    from hloshard.autoshard.aliases import matching_pairs
    from hloshard.hlo import parse_module

    assert matching_pairs(parse_module(SAMPLE.read_text())) == [(1, 0), (2, 1), (3, 2), (4, 3)]
    text = " ".join(_solve(tmp_path, "--tie", "matching").split())
    assert "leave in another layout" not in text
    out = parse_module((tmp_path / "o.hlo").read_text())
    params = {p.parameter_number: p.sharding for p in out.entry.parameters}
    elements = out.entry.root.sharding.tuple_elements
    assert all(elements[j] == params[q] for j, q in [(1, 0), (2, 1), (3, 2), (4, 3)])
    r = CliRunner().invoke(main, ["solve", str(SAMPLE), "--mesh", "2x4", "--tie", "abc"])
    assert r.exit_code == 2 and "hloshard: error:" in r.output and "Usage:" not in r.output, r.output
