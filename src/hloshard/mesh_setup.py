"""The :class:`~hloshard.mesh.DeviceMesh` a command's options or ``auto_shard``'s arguments describe:
``--mesh`` / ``--device-ids`` / ``--alpha`` / ``--beta`` strings (:func:`mesh_from_options`), and with a
device profile the per-axis link costs, roofline prices and HBM budget (:func:`timed_mesh_from_options`).
The click options that collect the strings are :mod:`hloshard.commands.options`.
"""

from __future__ import annotations

from .cost.roofline import RooflinePrices
from .cost.tpu_heap import tpu_memory_device
from .devices import axis_links, get_profile, module_matmul_dtype, ring_alphas, split_link_marks, time_scale
from .errors import UsageError
from .mesh import DeviceMesh
from .strategy.base import COMPUTE_COST_PER_FLOP

__all__ = ["mesh_from_options", "timed_mesh_from_options"]


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
    # memory as the TPU compiler lays it out; the name carries the module's bound on libtpu's heap (the budget's margin)
    dmesh.memory_device = tpu_memory_device(profile.name, module) if profile.backend == "tpu" else None
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
        from .autoshard.user_shardings import check_module_shardings  # lazy: keeps `--help` fast

        dmesh = DeviceMesh.for_module(module, mesh, device_ids, alpha, beta).with_policy(max_padding, memory_budget)
        check_module_shardings(module, dmesh)
        return dmesh
    if mesh is None:
        if device_ids is not None or alpha is not None or beta is not None:
            raise UsageError("--device-ids / --alpha / --beta need --mesh (e.g. --mesh 2x4)")
        raise UsageError("the device mesh is unknown: pass --mesh (e.g. --mesh 2x4)")
    return DeviceMesh.parse(mesh, device_ids, alpha, beta).with_policy(max_padding, memory_budget)
