"""The live solver status line shared by ``solve``, ``solve-problem``, ``cost``, ``diff`` and ``explain``."""

from __future__ import annotations

import time


class SolverProgress:
    """Live solver status on stderr (rich): elapsed / limit, phase, best objective, best bound, gap.

    A no-op when ``enabled`` is false (stderr not a TTY, or ``--quiet``). Called with the solver's
    progress events (dicts with ``phase``, ``objective``, ``bound`` and, from a module's cost graph,
    ``cost_scale``). Objective and bound are shown in the units the command's report uses: integer
    units times ``scale`` -- the cost graph's ``cost_scale`` once an event carries it (cost units, two
    decimals, as the summary prints them), else the ``scale`` given (1.0 for IOPDDL files, whose
    integers are shown as they are). ``t0`` is the command's start (``time.monotonic()``) so the
    elapsed time includes loading; ``time_limit`` None shows the elapsed time alone. The line is
    re-drawn four times a second, so the clock runs during phases that send no events (the build).
    """

    def __init__(self, enabled: bool, time_limit: float | None, scale: float = 1.0, t0: float | None = None,
                 phase: str = "building"):
        self.enabled = enabled
        self.t0 = time.monotonic() if t0 is None else t0
        self.time_limit = time_limit
        self.scale = scale
        self.cost_units = False     # True once an event gave the cost graph's cost_scale
        self.best = self.bound = None
        self.phase = phase
        self.live = None
        if enabled:
            from rich.console import Console
            from rich.live import Live

            self.live = Live(console=Console(stderr=True), refresh_per_second=4, transient=True,
                             get_renderable=self._render)

    def format_value(self, v) -> str:
        """An objective or bound (as kept: cost units once an event gave ``cost_scale``, else integer
        units) in report units: ``284,395,386.22`` (cost units) or ``1,234`` (an IOPDDL integer); ``-``
        for None."""
        if v is None:
            return "-"
        if self.cost_units:
            return f"{v:,.2f}"
        if self.scale == 1.0 and isinstance(v, int):
            return f"{v:,}"
        return f"{v * self.scale:,.2f}"

    def text(self) -> str:
        """The status line as plain text."""
        gap = ""
        if self.best and self.bound is not None:
            gap = f"  gap {max(0.0, (self.best - self.bound) / self.best):.2%}"
        elapsed = time.monotonic() - self.t0
        clock = f"{elapsed:6.1f}s" + ("" if self.time_limit is None else f" / {self.time_limit:.0f}s")
        return (f"[{clock}] {self.phase:<10} objective {self.format_value(self.best)}  "
                f"bound {self.format_value(self.bound)}{gap}")

    def _render(self):
        from rich.text import Text

        return Text(self.text())

    def __enter__(self):
        if self.live is not None:
            self.live.__enter__()
        return self

    def __exit__(self, *exc):
        if self.live is not None:
            self.live.__exit__(*exc)

    def __call__(self, event: dict):
        scale = event.get("cost_scale")
        if scale is not None and not self.cost_units:   # from now on values are kept in cost units
            self.cost_units = True
            self.best = None if self.best is None else self.best * self.scale
            self.bound = None if self.bound is None else self.bound * self.scale
        if self.cost_units and scale is None:
            scale = self.scale
        self.phase = event.get("phase", self.phase)
        obj, bound = event.get("objective"), event.get("bound")
        if self.cost_units:
            self.scale = float(scale)
            obj = None if obj is None else obj * self.scale
            bound = None if bound is None else bound * self.scale
        if obj is not None and (self.best is None or obj < self.best):
            self.best = obj
        if bound is not None:
            self.bound = bound if self.bound is None else max(self.bound, bound)
        if self.live is not None:
            self.live.refresh()
