"""``cost`` / ``solve`` with ``--device`` and ``--xla``: the step time of :mod:`hloshard.timing` and
XLA's ``cost_analysis()`` beside it, as report fields and summary lines (:func:`seconds_report`).
"""

from __future__ import annotations

from ..timing import body_once, plan_roofline, plan_timing
from ..summary import step_time_line
from ..xla_compare import tag_module_text
from ..xla_cost import xla_cost

__all__ = ["xla_cost_fields", "xla_cost_line", "seconds_report"]


def xla_cost_fields(roof, module_text: str, num_devices: int) -> dict:
    """``cost --xla``: XLA CPU's ``cost_analysis()`` flops and bytes accessed per device of the module
    compiled for ``num_devices`` partitions (:func:`hloshard.xla_cost.xla_cost`) beside the roofline's
    (``roof``: :func:`plan_roofline`'s): ``{"xla_cost": {"flops_per_device", "xla_flops_per_device",
    "hbm_bytes_per_device", "xla_bytes_accessed_per_device", "xla_cost_error"}}``."""

    x = xla_cost([module_text], num_devices)[0]
    flops_once, bytes_once = body_once(roof)
    return {"xla_cost": {"flops_per_device": roof.flops, "xla_flops_per_device": x.flops,
                         "hbm_bytes_per_device": roof.hbm_bytes, "xla_bytes_accessed_per_device": x.bytes_accessed,
                         "flops_per_device_body_once": flops_once, "hbm_bytes_per_device_body_once": bytes_once,
                         "xla_cost_error": x.error}}


def xla_cost_line(fields: dict) -> str:
    """``flops per device: hloshard 1.2e9, XLA 1.2e9 (x1.00); bytes accessed ...``."""
    c = fields["xla_cost"]
    if c["xla_cost_error"]:
        return f"XLA cost analysis failed: {c['xla_cost_error']}"

    def pair(mine, xla, once):
        ratio = f" (x{mine / xla:.2f})" if xla else ""
        loops = ""
        if once is not None and abs(once - mine) > 1e-9 * max(abs(mine), 1.0):
            # a while body: hloshard counts it per trip, XLA's HloCostAnalysis once
            loops = f"; loop bodies once, as XLA counts them: {once:.4g}" + (f" (x{once / xla:.2f})" if xla else "")
        return f"hloshard {mine:.4g}, XLA {'-' if xla is None else f'{xla:.4g}'}{ratio}{loops}"
    flops = pair(c["flops_per_device"], c["xla_flops_per_device"], c.get("flops_per_device_body_once"))
    hbm = pair(c["hbm_bytes_per_device"], c["xla_bytes_accessed_per_device"], c.get("hbm_bytes_per_device_body_once"))
    return f"flops per device: {flops}; HBM bytes per device: {hbm} (XLA CPU cost_analysis)"


def seconds_report(report: dict, result, module, mesh, scale, use_xla: bool, timed=None) -> list[str]:
    """``cost``'s one hook: with a device (``scale``) add :func:`plan_timing`'s fields to ``report``; with
    ``--xla`` add :func:`xla_cost_fields`. Returns the summary lines (the step time line first).
    ``timed``: ``(result, module)`` to time instead of the written plan (``cost.tpu_partitioner``'s view
    for a TPU); ``--xla`` always compiles and prices the written ``module``."""
    lines = []
    if scale is not None:
        t_result, t_module = timed if timed is not None else (result, module)
        report.update(plan_timing(t_result, t_module, scale))
        lines.append(step_time_line(report))
    if use_xla:
        roof = plan_roofline(result, module, None if scale is None else scale.profile)[0]
        report.update(xla_cost_fields(roof, tag_module_text(module)[0], int(mesh.num_devices)))
        lines.append(xla_cost_line(report))
    return lines
