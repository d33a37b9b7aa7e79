"""The live solver status line shared by ``solve`` and ``solve-problem``."""

from __future__ import annotations

import time


class SolverProgress:
    """Live solver status on stderr (rich): elapsed / limit, phase, best objective, best bound, gap.

    A no-op when ``enabled`` is false (stderr not a TTY, or ``--quiet``). Called with the solver's
    progress events (dicts with ``phase``, ``objective``, ``bound``). ``scale`` converts the solver's
    integer costs to cost units for display (1.0 for IOPDDL files); ``t0`` is the command's start
    (``time.monotonic()``) so the elapsed time includes loading.
    """

    def __init__(self, enabled: bool, time_limit: float, scale: float = 1.0, t0: float | None = None,
                 phase: str = "building"):
        self.enabled = enabled
        self.t0 = time.monotonic() if t0 is None else t0
        self.time_limit = time_limit
        self.scale = scale
        self.best = self.bound = None
        self.phase = phase
        self.live = None
        if enabled:
            from rich.console import Console
            from rich.live import Live

            self.live = Live(self._render(), console=Console(stderr=True), refresh_per_second=4, transient=True)

    def _format(self, v):
        if v is None:
            return "-"
        return f"{v:,}" if self.scale == 1.0 and isinstance(v, int) else f"{v * self.scale:,.1f}"

    def _render(self):
        from rich.text import Text

        gap = ""
        if self.best and self.bound is not None:
            gap = f"  gap {max(0.0, (self.best - self.bound) / self.best):.2%}"
        return Text(f"[{time.monotonic() - self.t0:6.1f}s / {self.time_limit:.0f}s] {self.phase:<10} "
                    f"objective {self._format(self.best)}  bound {self._format(self.bound)}{gap}")

    def __enter__(self):
        if self.live is not None:
            self.live.__enter__()
        return self

    def __exit__(self, *exc):
        if self.live is not None:
            self.live.__exit__(*exc)

    def __call__(self, event: dict):
        self.phase = event.get("phase", self.phase)
        if event.get("objective") is not None and (self.best is None or event["objective"] < self.best):
            self.best = event["objective"]
        if event.get("bound") is not None:
            self.bound = event["bound"] if self.bound is None else max(self.bound, event["bound"])
        if self.live is not None:
            self.live.update(self._render())
