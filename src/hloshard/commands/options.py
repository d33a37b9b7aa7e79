"""Click options shared by every command that takes a device mesh, and a byte-size parameter type.

``@mesh_options`` adds ``--mesh`` (``2x4``, ``data=2,model=4``), ``--device-ids`` (``0,2,1,3,...``; default
iota), ``--alpha`` and ``--beta`` (one comma-separated value per mesh axis; default 1.0 each, cost units
per collective and per byte); ``@space_options`` adds ``--max-padding`` (the uneven-split policy) and
``--devices`` (the device count of ``solve --mesh auto``). Turn them into a
:class:`~hloshard.mesh.DeviceMesh` with :func:`mesh_from_options`.
"""

from __future__ import annotations

import click

from ..devices import axis_links, get_profile, module_matmul_dtype, ring_alphas, split_link_marks, time_scale
from ..errors import UsageError
from ..mesh import DeviceMesh
from ..cost.roofline import RooflinePrices
from ..strategy.base import COMPUTE_COST_PER_FLOP
from ..units import parse_bytes

__all__ = ["mesh_options", "space_options", "device_option", "mesh_from_options", "timed_mesh_from_options",
           "ByteSize", "BYTE_SIZE"]




def mesh_options(func):
    """Click decorator: adds ``--mesh``, ``--device-ids``, ``--alpha``, ``--beta`` (passed to the command
    as ``mesh``, ``device_ids``, ``alpha``, ``beta``, each a string or None)."""
    options = [
        click.option("--mesh", "mesh", metavar="AxB", default=None,
                     help="Logical device mesh: axis sizes (2x4, 2x2x2, 8) or named axes "
                          "(data=2,model=4); `solve` also takes `auto` (try every mesh of 1-3 axes). "
                          "Default: the module's Shardy mesh, else the mesh its shardings imply, else "
                          "the 1-D mesh of num_partitions. An axis a user sharding splits is refined "
                          "internally (2x4 as 2x2x2) instead of resharding."),
        click.option("--device-ids", "device_ids", metavar="IDS", default=None,
                     help="Comma-separated device ids in mesh order (row-major). Default: 0,1,...,N-1."),
        click.option("--alpha", "alpha", metavar="A,..", default=None,
                     help="Collective latency per mesh axis, one comma-separated value per axis "
                          "(cost units). Default 1.0 each."),
        click.option("--beta", "beta", metavar="B,..", default=None,
                     help="Inverse bandwidth per mesh axis, one comma-separated value per axis "
                          "(cost units per byte). Default 1.0 each."),
    ]
    for opt in reversed(options):
        func = opt(func)
    return func


def space_options(func):
    """Click decorator for commands that search the strategy space (``solve``): adds ``--max-padding``
    (passed as ``max_padding``, float or None) and ``--devices`` (``devices``, int or None; the device
    count of ``--mesh auto``)."""
    options = [
        click.option("--max-padding", "max_padding", type=click.FloatRange(min=0.0), default=None,
                     metavar="RATIO",
                     help="Uneven splits (padded / empty last shards) are considered when they pad a dim "
                          "by at most this fraction of its size (default 0.5); user shardings are always "
                          "kept, and under --memory-budget uneven splits that use more devices than any "
                          "even one are considered too."),
        click.option("--devices", "devices", type=click.IntRange(min=1), default=None, metavar="N",
                     help="Device count for --mesh auto (default: num_partitions, else the user "
                          "shardings' device count)."),
    ]
    for opt in reversed(options):
        func = opt(func)
    return func


def device_option(func):
    """Click decorator: adds ``--device NAME|FILE.toml`` (passed as ``device``, a string or None): a
    device profile (:mod:`hloshard.devices`) that prices the plan in seconds."""
    return click.option(
        "--device", "device", metavar="NAME|FILE.toml", default=None,
        help="Price in seconds on this accelerator: h100-sxm, h200, a100-80gb, b200, tpu-v4, tpu-v5e, "
             "tpu-v5p, tpu-v6e, or a TOML profile file. Sets alpha/beta per mesh axis from its links "
             "(mark axes with --mesh data=16:dcn,model=8: :ici inside a node or TPU slice, NVLink on a "
             "GPU; :dcn across them, InfiniBand on a GPU; unmarked: the innermost axes up to a node's "
             "devices are intra-node) and defaults --memory-budget to its HBM.")(func)


def timed_mesh_from_options(module, mesh: str | None, device_ids: str | None, alpha: str | None,
                            beta: str | None, device: str | None, memory_budget: int | None = None,
                            max_padding: float | None = None, hbm_default: bool = True):
    """``(DeviceMesh, TimeScale | None, memory_budget)``: :func:`mesh_from_options`, and with ``device``
    the per-axis alpha / beta of :func:`hloshard.devices.time_scale` (the module's matmul dtype picks
    the peak) and the memory budget defaulted to the device's HBM (not with ``hbm_default`` False: the
    user said ``--memory-budget none``). ``--alpha`` / ``--beta`` together
    with ``--device`` is a UsageError, so are link marks (``:dcn``) without ``--device``."""
    if device is None:
        return mesh_from_options(module, mesh, device_ids, alpha, beta, memory_budget, max_padding), None, memory_budget
    if alpha is not None or beta is not None:
        raise UsageError("--alpha / --beta and --device both set the link costs: pass one of them")
    profile = get_profile(device)
    spec, marks = split_link_marks(mesh)
    shape_mesh = mesh_from_options(module, spec, device_ids, None, None) if module is not None \
        else mesh_from_options(None, spec, device_ids, None, None)
    shape = shape_mesh.user_shape if getattr(shape_mesh, "user_shape", None) else shape_mesh.shape
    links = axis_links(shape, profile.devices_per_node, marks)
    dtype = module_matmul_dtype(module) if module is not None else "bf16"
    scale = time_scale(profile, shape, links, dtype, COMPUTE_COST_PER_FLOP)
    budget = profile.hbm_bytes if memory_budget is None and hbm_default else memory_budget
    dmesh = mesh_from_options(module, spec, device_ids, list(scale.alpha), list(scale.beta), budget, max_padding)
    dmesh.roofline_prices = RooflinePrices(profile, scale.seconds_per_unit)   # compute = roofline in the objective
    dmesh.alpha = ring_alphas(scale.alpha, shape, dmesh.sub_axes)   # a sub-axis: the ring of its own size
    dmesh.memory_device = profile.name if profile.backend == "tpu" else None   # memory as the TPU compiler lays it out
    return dmesh, scale, budget


def mesh_from_options(module, mesh: str | None, device_ids: str | None, alpha: str | None,
                      beta: str | None, memory_budget: int | None = None,
                      max_padding: float | None = None) -> DeviceMesh:
    """The :class:`DeviceMesh` the options describe, with the uneven-split policy set
    (``max_padding``, ``memory_budget``: :meth:`DeviceMesh.with_policy`).

    With a module: :meth:`DeviceMesh.for_module` (``--mesh``, else the module's named mesh, else the
    mesh its shardings imply, else num_partitions; refined internally where user shardings need it;
    a num_partitions that differs from the mesh size is an error), and every sharding the module
    carries is checked on that mesh by the one validity rule
    (:func:`hloshard.autoshard.user_shardings.check_module_shardings`: InputError, exit 2, at the
    instruction). Without a module, ``--mesh`` is required. Raises UsageError with a message naming
    the flag.
    """
    if mesh is not None and split_link_marks(mesh)[1] is not None:
        raise UsageError(f"--mesh {mesh}: link marks (:ici / :dcn) need --device (e.g. --device h100-sxm)")
    if module is not None:
        from ..autoshard.user_shardings import check_module_shardings  # lazy: keeps `--help` fast

        dmesh = DeviceMesh.for_module(module, mesh, device_ids, alpha, beta).with_policy(max_padding, memory_budget)
        check_module_shardings(module, dmesh)
        return dmesh
    if mesh is None:
        if device_ids is not None or alpha is not None or beta is not None:
            raise UsageError("--device-ids / --alpha / --beta need --mesh (e.g. --mesh 2x4)")
        raise UsageError("the device mesh is unknown: pass --mesh (e.g. --mesh 2x4)")
    return DeviceMesh.parse(mesh, device_ids, alpha, beta).with_policy(max_padding, memory_budget)


class ByteSize(click.ParamType):
    """A byte size: a plain integer or a size with a suffix (``64MiB``, ``2GiB``, ``1.5GB``) -> int bytes
    (:func:`hloshard.units.parse_bytes`)."""

    name = "bytes"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            if value < 0:
                self.fail(f"byte size must be non-negative, got {value}", param, ctx)
            return value
        try:
            return parse_bytes(value)
        except UsageError as exc:
            self.fail(str(exc), param, ctx)


#: Shared instance: ``click.option('--memory-budget', type=BYTE_SIZE)``.
BYTE_SIZE = ByteSize()
