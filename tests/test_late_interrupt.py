"""A Ctrl-C once ``solve`` has begun writing its outputs (the fresh-clone check of round 31: SIGINT sent when
``-o``'s file appeared gave ``interrupted``, exit 130, with the files written, 4 of 4 times): the command
finishes, prints its summary and exits 0 (:func:`hloshard.interrupts.ignore_interrupts_from_here`)."""

import signal
from pathlib import Path

from click.testing import CliRunner

import hloshard.commands.solve as solve_cmd
from hloshard.cli import main
from tests.patching import setattr_everywhere

ROOT = Path(__file__).resolve().parent.parent


def test_ctrl_c_after_the_first_write_finishes_the_command(tmp_path, monkeypatch):
    real = solve_cmd.write_text_atomic
    sent = []

    def write_then_ctrl_c(path, text, *a, **k):   # the report's write, the first of the command's writes
        real(path, text, *a, **k)
        sent.append(path)
        signal.raise_signal(signal.SIGINT)

    setattr_everywhere(monkeypatch, solve_cmd, "write_text_atomic", write_then_ctrl_c)
    before = signal.getsignal(signal.SIGINT)
    try:
        r = CliRunner().invoke(main, ["solve", str(ROOT / "samples" / "mlp_train_step.pre.hlo"), "--mesh", "2x4",
                                      "-o", str(tmp_path / "out.hlo"), "--report", str(tmp_path / "r.json")])
        after = signal.getsignal(signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, before)
    assert after is before   # the caller's handler is back when the command ends (in-process use)
    assert sent, "the report was not written through write_text_atomic: update this test"
    assert r.exit_code == 0, r.output
    assert "interrupted" not in r.output
    assert (tmp_path / "out.hlo").read_text().startswith("HloModule")
    assert "cost" in r.output   # the summary was printed
