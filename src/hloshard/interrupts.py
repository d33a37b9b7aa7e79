"""Ctrl-C as data a command can read: the stop event of running CP-SAT searches, and SIGINT held back
while a module imports.

* :data:`STOP`: a ``threading.Event`` (or None) for the searches started in this context: once it is set,
  a running CP-SAT search stops at once and returns what it has, and a new one gets no time
  (:mod:`hloshard.solver.cpsat` reads it; :func:`stop_on_interrupt` sets it on Ctrl-C, for the CLI and
  ``auto_shard``).  It lives here, not in the solver package, so
  that setting it imports no OR-Tools (``hloshard fmt`` never does).
* :func:`stop_on_interrupt`: Ctrl-C stops a running CP-SAT search at once and surfaces as ``KeyboardInterrupt``,
  also where Python swallows it (the CLI's commands; :func:`interruptible` wraps ``hloshard.jax.auto_shard``).
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
import functools
import os
import signal
import sys
import threading
import time

__all__ = ["STOP", "held_interrupts", "ignore_interrupts_from_here", "interruptible", "interrupts_reach",
           "stop_on_interrupt"]

#: seconds the watcher waits before it sends SIGINT again after a ``KeyboardInterrupt`` was swallowed
#: (printed as "Exception ignored" by Python): time for the swallowing context (a garbage-collector callback,
#: a ``__del__``) to return, so the next one lands in ordinary code
REDELIVER_SECONDS = 0.05

STOP: contextvars.ContextVar = contextvars.ContextVar("hloshard_cpsat_stop", default=None)

def ignore_interrupts_from_here():
    """From here SIGINT is ignored (main thread only; elsewhere nothing happens and None is returned): a command
    that has begun writing what it was asked for (``solve``'s ``--report``, ``--html``, ``-o``) finishes, prints its
    summary and exits 0.  Returns the handler to put back when the command ends (``solve`` hands it to its click
    context's close, so that a caller running the CLI in-process gets its own handler back).  Why: a Ctrl-C after
    the first write used to print ``interrupted`` and exit 130 with the files written (the fresh-clone check of
    round 31: 4 of 4 SIGINTs sent when ``-o``'s file appeared), breaking "130: nothing written" -- a Makefile would
    keep a target it thinks failed."""
    if threading.current_thread() is not threading.main_thread():
        return None
    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return previous


@contextlib.contextmanager
def interrupts_reach():
    """Inside the block SIGINT raises ``KeyboardInterrupt`` again, also after :func:`ignore_interrupts_from_here`;
    the handler in force before is put back at its end (main thread only; elsewhere the block runs as it is).
    For work that follows the writes and only adds to them -- ``solve --xla``'s XLA run after the module and the
    report are written (fresh-clone check 38, finding 4: a Ctrl-C there was ignored and XLA ran to its end, up to
    ``xla_bound`` seconds): the caller catches the interrupt, stops that work and ends as the writes promised."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)


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


#: the byte the unraisable hook writes to the watcher's pipe: "a KeyboardInterrupt was swallowed, send again"
_AGAIN = b"\xff"


@contextlib.contextmanager
def stop_on_interrupt():
    """Make Ctrl-C stop the block at once, CP-SAT searches included, as ``KeyboardInterrupt``.

    * SIGINT is noticed by a watcher thread (``signal.set_wakeup_fd``) even while the main thread is inside
      the solver's C++ code; the watcher sets :data:`STOP` (the block's searches return at once; a new one
      gets no time), and the ``KeyboardInterrupt`` surfaces in the main thread when Python code runs again.
    * A ``KeyboardInterrupt`` that Python swallows -- raised inside a garbage-collector callback (jax's
      ``_xla_gc_callback``), a ``__del__`` or a weakref callback, printed as "Exception ignored" and the
      program runs on (new user 24, finding 8: ``auto_shard`` ran 189 s to its end after Ctrl-C) -- is
      caught by ``sys.unraisablehook`` and SIGINT is sent again after :data:`REDELIVER_SECONDS`, until it
      lands in ordinary code.  Other unraisable exceptions go to the previous hook.

    Outside the main thread (signals cannot be handled there) or where SIGINT is ignored this does nothing.
    The previous wakeup descriptor, SIGINT handler and unraisable hook are restored on exit.  Yields the stop
    event (set once SIGINT came)."""
    if threading.current_thread() is not threading.main_thread():
        yield None
        return
    event = threading.Event()
    done = threading.Event()
    r, w = os.pipe()
    os.set_blocking(w, False)
    try:
        old_fd = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    except ValueError:  # not the main interpreter thread after all
        os.close(r)
        os.close(w)
        yield None
        return
    old_handler = signal.getsignal(signal.SIGINT)
    if old_handler in (signal.SIG_IGN, None):
        signal.set_wakeup_fd(old_fd)
        os.close(r)
        os.close(w)
        yield None
        return
    if old_handler is signal.SIG_DFL:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    old_hook = sys.unraisablehook

    def hook(unraisable):
        if isinstance(unraisable.exc_value, KeyboardInterrupt) and not done.is_set():
            try:
                os.write(w, _AGAIN)   # the watcher sends SIGINT again (not from here: a handler raising
            except OSError:           # inside the hook would be swallowed as well)
                pass
            return
        old_hook(unraisable)

    def watch():
        while not done.is_set():
            try:
                data = os.read(r, 64)
            except OSError:
                return
            if signal.SIGINT in data:
                event.set()
            if _AGAIN in data and not done.is_set():
                time.sleep(REDELIVER_SECONDS)
                if not done.is_set():
                    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    watcher = threading.Thread(target=watch, name="hloshard-sigint", daemon=True)
    sys.unraisablehook = hook
    watcher.start()
    token = STOP.set(event)
    try:
        yield event
    finally:
        STOP.reset(token)
        done.set()
        if sys.unraisablehook is hook:
            sys.unraisablehook = old_hook
        signal.set_wakeup_fd(old_fd)
        os.write(w, b"\0")  # wake the watcher
        watcher.join(1.0)
        os.close(r)
        os.close(w)
        if old_handler is signal.SIG_DFL:
            signal.signal(signal.SIGINT, signal.SIG_DFL)


def interruptible(fn):
    """``fn`` run inside :func:`stop_on_interrupt`: Ctrl-C during the call stops it promptly and raises
    ``KeyboardInterrupt`` to the caller -- also when every ``KeyboardInterrupt`` delivered was swallowed or
    handled on the way (a library's ``except BaseException``, CP-SAT's own stop): a call that saw SIGINT
    never returns its result.  Used by :func:`hloshard.jax.auto_shard`."""
    @functools.wraps(fn)
    def call(*args, **kwargs):
        with stop_on_interrupt() as stop:
            out = fn(*args, **kwargs)
            if stop is not None and stop.is_set():
                raise KeyboardInterrupt
        return out

    return call
