"""Run one function in a forked child process, beside the caller, and collect its result.

The solver's heuristic phases are single-threaded Python; on a machine with two cores the second
one can run an independent search (another seed) at the same time (:mod:`~hloshard.solver.api`,
the search portfolio).  ``os.fork`` shares the reduced problem with the child copy-on-write, so
nothing is pickled on the way in; the result comes back pickled through a pipe.  Only on Linux
(``fork`` of a process that has threads is unsafe on macOS, and absent on Windows): elsewhere
:func:`start` returns None and the caller runs the work itself or not at all.

The child ignores SIGINT (the parent decides: :func:`cancel` kills it), never runs the parent's
exit handlers (it leaves by ``os._exit``) and never writes to the parent's streams.
"""

from __future__ import annotations

import math
import os
import pickle
import select
import signal
import sys
import time
from dataclasses import dataclass


@dataclass
class Child:
    pid: int
    fd: int  # read end of the result pipe


def available() -> bool:
    """Whether :func:`start` can fork here (Linux with ``os.fork``)."""
    return sys.platform.startswith("linux") and hasattr(os, "fork")


def start(fn, *args) -> Child | None:
    """Start ``fn(*args)`` in a forked child; None when forking is not available or fails."""
    if not available():
        return None
    r, w = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return None
    if pid == 0:  # the child
        code = 1
        try:
            os.close(r)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            try:
                signal.set_wakeup_fd(-1)  # the parent's Ctrl-C watcher pipe is not ours
            except (ValueError, OSError):
                pass
            data = pickle.dumps(fn(*args), protocol=pickle.HIGHEST_PROTOCOL)
            with os.fdopen(w, "wb") as f:
                f.write(data)
            code = 0
        except BaseException:  # noqa: BLE001 - the parent sees a missing result
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    return Child(pid, r)


def collect(child: Child, timeout: float):
    """The child's result, waiting at most ``timeout`` seconds for it (``math.inf``: as long as it
    takes); None when it failed or ran out of time (then it is killed).  The child is reaped either
    way."""
    end = time.monotonic() + max(0.0, timeout)
    chunks = []
    ok = False
    try:
        while True:
            left = end - time.monotonic()
            if left <= 0:
                break
            ready, _, _ = select.select([child.fd], [], [], None if math.isinf(left) else left)
            if not ready:
                break
            chunk = os.read(child.fd, 1 << 20)
            if not chunk:
                ok = True
                break
            chunks.append(chunk)
    finally:
        os.close(child.fd)
        if not ok:
            _kill(child.pid)
        else:
            _reap(child.pid)
    if not ok or not chunks:
        return None
    try:
        return pickle.loads(b"".join(chunks))
    except Exception:  # noqa: BLE001 - a truncated result counts as none
        return None


def cancel(child: Child) -> None:
    """Kill the child and close its pipe (for the caller's error and interrupt paths)."""
    try:
        os.close(child.fd)
    except OSError:
        pass
    _kill(child.pid)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
    _reap(pid)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, 0)
    except OSError:
        pass
