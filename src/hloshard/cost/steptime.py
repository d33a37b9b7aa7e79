"""An estimated step time in seconds, from a plan's cost breakdown and a device profile.

Inputs: the breakdown of a plan in cost units (``compute``, ``communication``, ``resharding``: what
``hloshard cost`` / ``solve`` report), a :class:`hloshard.devices.TimeScale` (the unit's length in
seconds for that device and mesh), the program's model flops (:func:`hloshard.cost.flops.model_flops`)
and the device count.

Communication and resharding, with a device: each collective's link time (ring formulas on the link
its axis crosses, :mod:`hloshard.devices`) plus the time its input and output take through HBM
(:func:`hloshard.cost.collectives.with_hbm`: the TPU compiler's own estimate charges a collective its HBM
bytes and no link time, measured).

The overlap model, stated: XLA runs collectives asynchronously and its latency-hiding scheduler can
overlap them with independent compute, but how much it hides depends on the schedule, which hloshard
does not model. ``estimated_step_time_s`` therefore assumes **no overlap** (compute + communication +
resharding: an upper estimate); ``overlapped_step_time_s`` = max(compute, communication + resharding)
is the step time if every collective were hidden behind compute (a lower bound under the same
model); ``exposed_communication_s`` is the difference. MFU = model flops / (step time x peak FLOP/s x
devices), with the matmul peak of the profile for the module's dtype (``TimeScale.peak_flops``).

Compute: with a roofline (:mod:`hloshard.cost.roofline`, ``roofline_s``) the sum over instructions of
max(flops / peak, HBM bytes / HBM bandwidth) (on ``tpu-v5e`` also the on-chip bytes of the results the chip
keeps in VMEM at its VMEM bandwidth, and a per-kernel overhead: :func:`hloshard.cost.roofline.roofline`);
without one, the cost model's compute (flops per device at
the matmul peak: the roofline's compute side only). ``compute_flops_s`` is always the latter (with a
roofline: its flops at the matmul peak, as the cost model's compute includes the HBM side when the
mesh carries the device's roofline prices).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["StepTime", "step_time", "format_seconds", "cost_formatter"]


def cost_formatter(report: dict):
    """``fn(value, signed=False) -> str`` for a report's cost figures: seconds (:func:`format_seconds`)
    when ``report['units'] == 'seconds'`` (a report priced with ``--device``), else cost units
    (``1,234.56``, ``+1,234.56``)."""
    if report.get("units") == "seconds":
        return format_seconds
    return lambda x, signed=False: f"{x:+,.2f}" if signed else f"{x:,.2f}"


def format_seconds(x: float | None, signed: bool = False) -> str:
    """Seconds for reports: ``1.234 s``, ``12.345 ms``, ``3.21 us`` (by magnitude); ``+`` / ``-`` first
    with ``signed``; ``-`` for None."""
    if x is None:
        return "-"
    sign = ("+" if x >= 0 else "-") if signed else ("-" if x < 0 else "")
    a = abs(float(x))
    if a >= 1:
        return f"{sign}{a:,.3f} s"
    if a >= 1e-3:
        return f"{sign}{a * 1e3:,.3f} ms"
    return f"{sign}{a * 1e6:,.2f} us"


@dataclass(frozen=True)
class StepTime:
    """Seconds per step on one device, by kind, and the figures derived from them (see module doc).

    ``flops_per_device``: floating-point operations one device runs per step (the cost model's compute
    in flops); ``model_flops``: matmul flops of the whole program; ``mfu``: a fraction in [0, 1] (None
    when the step time is 0)."""

    device: str
    compute_s: float
    communication_s: float
    resharding_s: float
    estimated_step_time_s: float
    overlapped_step_time_s: float
    exposed_communication_s: float
    flops_per_device: float
    model_flops: float
    peak_flops: float
    peak_dtype: str
    devices: int
    mfu: float | None
    compute_flops_s: float = 0.0
    hbm_bytes_per_device: float | None = None
    memory_bound_s: float | None = None

    def to_json(self) -> dict:
        """The fields as a JSON-ready dict (seconds, flops, FLOP/s)."""
        return asdict(self)


def step_time(scale, compute: float, communication: float, resharding: float, model_flops: float,
              devices: int, compute_cost_per_flop: float, roofline=None) -> StepTime:
    """:class:`StepTime` of a plan whose breakdown is ``compute`` / ``communication`` / ``resharding``
    cost units on the mesh ``scale`` priced (``scale``: :class:`hloshard.devices.TimeScale`);
    ``compute_cost_per_flop``: the cost model's units per flop (to turn compute back into flops);
    ``roofline``: a :class:`hloshard.cost.roofline.Roofline` of the plan (its seconds become the compute
    time, its HBM bytes and memory-bound seconds are reported), or None."""
    m, r = scale.seconds(communication), scale.seconds(resharding)
    flops_s = scale.seconds(compute) if roofline is None else float(roofline.flops) / scale.peak_flops
    c = flops_s if roofline is None else float(roofline.seconds)
    total = c + m + r
    overlapped = max(c, m + r)
    mfu = model_flops / (total * scale.peak_flops * devices) if total > 0 else None
    return StepTime(scale.profile.name, c, m, r, total, overlapped, total - overlapped,
                    compute / compute_cost_per_flop if roofline is None else float(roofline.flops), float(model_flops), scale.peak_flops, scale.peak_key,
                    int(devices), mfu, flops_s, None if roofline is None else float(roofline.hbm_bytes),
                    None if roofline is None else float(roofline.memory_bound_s))
