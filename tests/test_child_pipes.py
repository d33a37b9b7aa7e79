"""The memory guard's XLA child is ended with its pipes closed, whether it was still running or had ended by itself
(new user 30, F13: a ``ResourceWarning: unclosed file`` surfaced from an ``auto_shard`` call)."""

from __future__ import annotations

import gc
import subprocess
import sys
import warnings

from hloshard.jax.api import _stop_child


def _child(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_a_stopped_child_leaves_no_open_pipe():
    for code, wait in (("pass", True), ("import time; time.sleep(60)", False)):   # ended by itself / still running
        child = _child(code)
        if wait:
            child.wait()
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always", ResourceWarning)
            _stop_child(child)
            assert child.returncode is not None
            assert all(s.closed for s in (child.stdin, child.stdout, child.stderr))
            del child
            gc.collect()
        assert not [w for w in seen if issubclass(w.category, ResourceWarning)], [str(w.message) for w in seen]
    _stop_child(None)   # no child: nothing to do
