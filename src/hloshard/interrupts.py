"""Ctrl-C as data a command can read: the stop event of running CP-SAT searches, and SIGINT held back
while a module imports.

* :data:`STOP`: a ``threading.Event`` (or None) for the searches started in this context: once it is set,
  a running CP-SAT search stops at once and returns what it has, and a new one gets no time
  (:mod:`hloshard.solver.cpsat` reads it; the CLI sets it on Ctrl-C,
  :func:`hloshard.commands.common.stop_on_interrupt`).  It lives here, not in the solver package, so
  that setting it imports no OR-Tools (``hloshard fmt`` never does).
* :func:`held_interrupts`: SIGINT received inside the block is held and raised as ``KeyboardInterrupt``
  when the block ends.  A C extension's initialisation interrupted halfway fails with an ``ImportError``
  instead of the ``KeyboardInterrupt`` (OR-Tools: "initialization failed"; new user 18: ``hloshard fmt``
  interrupted at 1.5 s printed two tracebacks and exited 1), so the CLI imports its command modules
  inside this block.

A leaf module: it imports nothing from hloshard.
"""

from __future__ import annotations

import contextlib
import contextvars
import signal
import threading

__all__ = ["STOP", "held_interrupts"]

STOP: contextvars.ContextVar = contextvars.ContextVar("hloshard_cpsat_stop", default=None)


@contextlib.contextmanager
def held_interrupts():
    """Hold SIGINT for the block; raise ``KeyboardInterrupt`` at its end if one came.  Outside the main
    thread, or where SIGINT is ignored, the block runs as it is (signals are the main thread's)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous in (signal.SIG_IGN, None):
        yield
        return
    came = []
    signal.signal(signal.SIGINT, lambda signum, frame: came.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if came:
        raise KeyboardInterrupt
