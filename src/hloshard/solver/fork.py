"""Run one function in a forked child process, beside the caller, and collect its result.

The solver's heuristic phases are single-threaded Python; on a machine with two cores the second
one can run an independent search (another seed) at the same time (:mod:`~hloshard.solver.api`,
the search portfolio).  ``os.fork`` shares the reduced problem with the child copy-on-write, so
nothing is pickled on the way in; the result comes back pickled through a pipe.  Only on Linux
(``fork`` of a process that has threads is unsafe on macOS, and absent on Windows): elsewhere
:func:`start` returns None and the caller runs the work itself or not at all.

The child ignores SIGINT (the parent decides: :func:`cancel` kills it), never runs the parent's
exit handlers (it leaves by ``os._exit``) and never writes to the parent's streams.  It dies with
its parent: the kernel sends it SIGKILL when the parent goes (``prctl(PR_SET_PDEATHSIG)``, see
prctl(2); the parent's pid is checked after the call, for a parent that died during the fork), so a
killed solver leaves no LP child running until GLOP's own limit.
"""

from __future__ import annotations

import ctypes
import math
import os
import pickle
import select
import signal
import sys
import time
import warnings
from dataclasses import dataclass


@dataclass
class Child:
    pid: int  # -1 once reaped
    fd: int   # read end of the result pipe; -1 once closed


def available() -> bool:
    """Whether :func:`start` can fork here (Linux with ``os.fork``)."""
    return sys.platform.startswith("linux") and hasattr(os, "fork")


def start(fn, *args) -> Child | None:
    """Start ``fn(*args)`` in a forked child; None when forking is not available or fails.  The
    parent's streams are flushed first and SIGINT is blocked across the fork, so the child neither
    repeats buffered output nor runs the parent's Ctrl-C handling."""
    if not available():
        return None
    sys.stdout.flush()
    sys.stderr.flush()
    r, w = os.pipe()
    parent = os.getpid()
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # Python 3.12+: fork with threads
            # jax's fork hook warns of deadlocks in a child that uses jax; ours never does (it runs
            # numpy, GLOP or CP-SAT on the solver's arrays and leaves by os._exit)
            warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
            pid = os.fork()
    except BaseException:  # noqa: BLE001 - no child: clean up and run without one
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        os.close(r)
        os.close(w)
        return None
    if pid == 0:  # the child
        code = 1
        try:
            _die_with_parent(parent)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
            os.close(r)
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
    signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
    os.close(w)
    return Child(pid, r)


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _die_with_parent(parent: int) -> None:
    """In a forked child: have the kernel kill this process when the thread that forked it ends
    (the solver forks from the thread that then waits for the child); exits at once when the parent
    ``parent`` is already gone.  Without libc's ``prctl`` (not glibc/musl) nothing is set."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:
        os._exit(1)


def collect(child: Child, timeout: float):
    """The child's result, waiting at most ``timeout`` seconds for it (``math.inf``: as long as it
    takes); None when it failed (no result, or a non-zero exit) or ran out of time (then it is
    killed).  The child is reaped and its pipe closed on every path, interrupts included; calling
    :func:`cancel` afterwards does nothing."""
    end = time.monotonic() + max(0.0, timeout)
    chunks = []
    ok = False
    poller = select.poll()
    poller.register(child.fd, select.POLLIN | select.POLLHUP)
    try:
        while True:
            left = end - time.monotonic()
            if left <= 0:
                break
            if not poller.poll(None if math.isinf(left) else max(1, int(left * 1000))):
                break
            chunk = os.read(child.fd, 1 << 20)
            if not chunk:
                ok = True
                break
            chunks.append(chunk)
    finally:
        _close(child)
        status = _reap(child) if ok else _kill(child)
    if not ok or not chunks or status != 0:
        return None
    try:
        return pickle.loads(b"".join(chunks))
    except Exception:  # noqa: BLE001 - a truncated result counts as none
        return None


def ready(child: Child, timeout: float) -> bool:
    """Whether the child's result has started to arrive (or the child has ended), waiting at most
    ``timeout`` seconds; reads nothing (then :func:`collect` takes it).  False once collected."""
    if child.fd < 0:
        return False
    poller = select.poll()
    poller.register(child.fd, select.POLLIN | select.POLLHUP)
    return bool(poller.poll(max(0, int(math.ceil(max(0.0, timeout) * 1000)))))


def cancel(child: Child) -> None:
    """Kill the child and close its pipe (for the caller's error and interrupt paths); does nothing
    once :func:`collect` or :func:`cancel` has finished with it."""
    _close(child)
    _kill(child)


def _close(child: Child) -> None:
    if child.fd >= 0:
        fd, child.fd = child.fd, -1
        try:
            os.close(fd)
        except OSError:
            pass


def _kill(child: Child):
    if child.pid > 0:
        try:
            os.kill(child.pid, signal.SIGKILL)
        except OSError:
            pass
    return _reap(child)


def _reap(child: Child):
    """Wait for the child; its exit code (None when already reaped or not ours)."""
    if child.pid <= 0:
        return None
    pid, child.pid = child.pid, -1  # never signal or wait for this pid again (it may be reused)
    try:
        _, st = os.waitpid(pid, 0)
    except OSError:
        return None
    return os.waitstatus_to_exitcode(st)
