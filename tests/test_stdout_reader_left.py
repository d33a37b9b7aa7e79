"""A reader that leaves standard output while a large write is under way (``| head -1``) is said in one line and
exit 1, not a silently cut output with exit 0 (fresh-clone check 33: CPython's buffered writer dropped the rest
of a short write; :func:`hloshard.io.whole_writes_to_stdout`)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT

BIG = ROOT / "samples" / "transformer_train_step.pre.hlo"   # its canonical text is larger than a Linux pipe (64 KiB)


def _run_and_leave(args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    proc = subprocess.Popen([sys.executable, "-m", "hloshard", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=ROOT)
    first = proc.stdout.read(16)   # the reader takes a little, then leaves (as head does)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    return proc.wait(timeout=120), first, err


def test_fmt_to_a_reader_that_leaves_is_exit_1_and_one_line():
    assert BIG.stat().st_size > 65536
    code, first, err = _run_and_leave(["fmt", str(BIG)])
    assert first.startswith(b"HloModule")
    assert code == 1, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "standard output was closed" in lines[0], err
    assert "Traceback" not in err


def test_a_reader_that_reads_everything_sees_exit_0():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    out = subprocess.run([sys.executable, "-m", "hloshard", "fmt", str(BIG)], capture_output=True, env=env, cwd=ROOT,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.startswith(b"HloModule") and out.stderr == b""
    assert len(out.stdout) > 65536
