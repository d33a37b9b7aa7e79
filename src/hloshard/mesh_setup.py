"""The :class:`~hloshard.mesh.DeviceMesh` a command's options or ``auto_shard``'s arguments describe:
``--mesh`` / ``--device-ids`` / ``--alpha`` / ``--beta`` strings (:func:`mesh_from_options`), and with a
device profile the per-axis link costs, roofline prices and HBM budget (:func:`timed_mesh_from_options`,
whose mesh is :func:`priced_mesh`'s: the one rule ``--mesh SPEC --device`` and ``--mesh auto --device``'s
candidates are priced by).  The click options that collect the strings are :mod:`hloshard.commands.options`.

A ``--mesh`` string may mark axes with their link (``data=2:dcn,model=8``, on an unnamed mesh ``2:dcnx8``):
:func:`hloshard.devices.split_link_marks` takes the marks off, :meth:`DeviceMesh.parse` reads the rest, and
an error about the mesh string echoes it as the user wrote it, marks included (:func:`_parse_errors`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from contextlib import contextmanager

from .strategy.user_shardings import check_module_shardings
from .cost.liveness import set_barriers_kept
from .cost.roofline import RooflinePrices
from .cost.tpu_heap import tpu_memory_device
from .devices import (LINK_CLASSES, axis_links, axis_pieces, check_matmul_peaks, get_profile, module_matmul_dtype,
                      node_spans, ring_alphas, split_link_marks, time_scale)
from .errors import UsageError
from .mesh import AXIS_NAME, DeviceMesh
from .strategy.base import COMPUTE_COST_PER_FLOP

__all__ = ["mesh_from_options", "timed_mesh_from_options", "priced_mesh", "straddle_notes", "named_mesh_spec"]


@contextmanager
def _parse_errors(given: str | None, clean: str | None):
    """Errors about the mesh string ``clean`` (``given`` without its link marks) said about ``given``, as the
    user wrote it: ``invalid --mesh 'data=2:dcn,data=4': axis name listed twice`` (new user 25b, finding 7:
    the echo dropped the marks)."""
    try:
        yield
    except UsageError as exc:
        if given is None or clean is None or given == clean or repr(clean) not in str(exc):
            raise
        raise UsageError(str(exc).replace(repr(clean), repr(given))) from None


def named_mesh_spec(names, sizes, links=None, device=None) -> str:
    """The mesh string of a mesh given by its axes -- ``auto_shard``'s jax ``Mesh``: ``names`` its ``axis_names``,
    ``sizes`` its ``devices.shape`` -- with the link of each axis ``links`` names marked as ``--mesh`` marks it
    (``names=("data", "model")``, ``sizes=(2, 4)``, ``links={"data": "dcn"}`` -> ``'data=2:dcn,model=4'``), read
    by the one mesh parser (:func:`timed_mesh_from_options`: :func:`hloshard.devices.split_link_marks`, then
    :meth:`DeviceMesh.parse`).  ``links``: a mapping axis name -> ``'ici'`` (inside a node or TPU slice: NVLink on a
    GPU) or ``'dcn'`` (across them: InfiniBand on a GPU), any case; an axis it does not name follows the device's
    rule (:func:`hloshard.devices.axis_links`: the innermost axes up to a node's devices inside a node).  ``device``:
    the device profile the links are priced on (``auto_shard(device=)``): links without one are an error, as
    ``--mesh data=2:dcn`` without ``--device`` is (:func:`mesh_from_options`), since nothing else prices a link.

    Raises ValueError, naming the argument (the Python API's error; new user 31, F14: ``auto_shard`` had no way to
    mark an axis, and an axis named ``"data:dcn"`` raised the CLI's error about ``--mesh``): ``links`` not a
    mapping, an axis it names that the mesh lacks, a link other than ici / dcn, links without ``device``, an axis
    name the mesh string cannot carry (:data:`hloshard.mesh.AXIS_NAME`; a name with a ``:`` mark in it is told to
    use ``links``)."""
    names, sizes = [str(n) for n in names], [int(s) for s in sizes]
    for n in names:
        if re.fullmatch(AXIS_NAME, n):
            continue
        base, colon, mark = n.partition(":")
        if colon and re.fullmatch(AXIS_NAME, base.strip()) and mark.strip().lower() in LINK_CLASSES:
            raise ValueError(f"mesh axis name {n!r} carries a link mark: name the axis {base.strip()!r} and pass "
                             f"links={{{base.strip()!r}: {mark.strip().lower()!r}}} with device=")
        raise ValueError(f"mesh axis name {n!r} cannot name an axis of a plan: a letter or '_' first, then letters, "
                         f"digits, '_', '.' or '-'")
    marks = [None] * len(names)
    if links is not None:
        if not isinstance(links, Mapping):
            raise ValueError(f"links must map mesh axis names to 'ici' or 'dcn' (e.g. links={{'data': 'dcn'}}), got "
                             f"{type(links).__name__}")
        for axis, link in links.items():
            if axis not in names:
                raise ValueError(f"links names {axis!r}, which is not an axis of the mesh ({', '.join(names)})")
            cls = link.strip().lower() if isinstance(link, str) else None
            if cls not in LINK_CLASSES:
                raise ValueError(f"links[{axis!r}] must be 'ici' (inside a node or TPU slice) or 'dcn' (across "
                                 f"them), got {link!r}")
            marks[names.index(axis)] = cls
        if links and device is None:
            raise ValueError("links says which link each mesh axis crosses, which only a device profile prices: "
                             "pass device= too (e.g. device='h100-sxm')")
    return ",".join(f"{n}={s}" + (f":{m}" if m else "") for n, s, m in zip(names, sizes, marks))


def timed_mesh_from_options(module, mesh: str | None, device_ids: str | None, alpha: str | None,
                            beta: str | None, device: str | None, memory_budget: int | None = None,
                            max_padding: float | None = None, hbm_default: bool = True):
    """``(DeviceMesh, TimeScale | None, memory_budget)``: :func:`mesh_from_options`, and with ``device``
    :func:`priced_mesh` (the per-axis alpha / beta of :func:`hloshard.devices.time_scale`, the module's
    matmul dtype picking the peak) with the module's shardings checked on it and the memory budget defaulted
    to the device's HBM (not with ``hbm_default`` False: the user said ``--memory-budget none``).
    ``--alpha`` / ``--beta`` together with ``--device`` is a UsageError, so are link marks (``:dcn``)
    without ``--device`` and a TOML profile without an f32 peak for a module with f32 dots
    (:func:`hloshard.devices.check_matmul_peaks`)."""
    if device is None:
        return mesh_from_options(module, mesh, device_ids, alpha, beta, memory_budget, max_padding), None, memory_budget
    if alpha is not None or beta is not None:
        raise UsageError("--alpha / --beta and --device both set the link costs: pass one of them")
    profile = get_profile(device)
    spec, marks = split_link_marks(mesh)
    with _parse_errors(mesh, spec):
        dmesh, scale = priced_mesh(module, spec, profile, device_ids, marks)
    if module is not None:
        check_module_shardings(module, dmesh)
    budget = profile.hbm_bytes if memory_budget is None and hbm_default else memory_budget
    dmesh.with_policy(max_padding, budget)
    return dmesh, scale, budget


def priced_mesh(module, spec: str | None, profile, device_ids: str | None = None, marks=None):
    """``(DeviceMesh, TimeScale)``: the mesh ``spec`` (no link marks: ``marks``, one per user axis, ``'ici'`` /
    ``'dcn'`` / None, say them) for ``module`` (:meth:`DeviceMesh.for_module`; without a module
    :meth:`DeviceMesh.parse`, whose matmul dtype is then bf16) priced on ``profile``: per user axis the alpha /
    beta of the link :func:`hloshard.devices.axis_links` gives it, a sub-axis the ring of its own size
    (:func:`hloshard.devices.ring_alphas`), compute by the device's roofline, memory as a TPU lays it out
    (``memory_device``), an axis whose groups straddle nodes priced by the links inside it
(:func:`hloshard.devices.axis_pieces`, :meth:`DeviceMesh.apply_levels`: its sub-axes inside a node at the fast
link, the whole axis as :func:`hloshard.cost.collectives.link_levels` prices levels) and a note per such axis
(:func:`straddle_notes`).  No policy
    set and the module's shardings not checked (the caller's).  Raises UsageError for a bad mesh string and
    for a profile without the f32 peak the module's dots need."""
    check_matmul_peaks(profile, module)

    def build(alpha=None, beta=None):
        if module is None:
            if spec is None:
                raise UsageError("the device mesh is unknown: pass --mesh (e.g. --mesh 2x4)")
            return DeviceMesh.parse(spec, device_ids, alpha, beta)
        return DeviceMesh.for_module(module, spec, device_ids, alpha, beta)

    first = build()
    shape = first.user_shape if getattr(first, "user_shape", None) else first.shape
    links = axis_links(shape, profile.devices_per_node, marks)
    dtype = module_matmul_dtype(module) if module is not None else "bf16"
    scale = time_scale(profile, shape, links, dtype, COMPUTE_COST_PER_FLOP)
    dmesh = build(list(scale.alpha), list(scale.beta))
    dmesh.roofline_prices = RooflinePrices(profile, scale.seconds_per_unit)   # compute = roofline in the objective
    dmesh.alpha = ring_alphas(scale.alpha, shape, dmesh.sub_axes)   # a sub-axis: the ring of its own size
    # an axis whose groups span nodes: the links inside it (NVLink within a node, InfiniBand between), per sub-axis too
    dmesh.apply_levels([axis_pieces(profile, scale, shape, i) for i in range(len(shape))])
    dmesh = _cut_at_nodes(dmesh)
    # memory as the TPU compiler lays it out; the name carries the module's bound on libtpu's heap (the budget's margin)
    dmesh.memory_device = tpu_memory_device(profile.name, module) if profile.backend == "tpu" else None
    # XLA's GPU compiler removes jax.checkpoint's opt-barriers only after it schedules (cost.remat): said on
    # the module before anything prices its memory
    dmesh.barriers_kept = profile.backend == "gpu"
    if module is not None:
        set_barriers_kept(module, dmesh.barriers_kept)
    names = getattr(dmesh, "user_names", None) or getattr(dmesh, "axis_names", None)
    dmesh.notes.extend(straddle_notes(profile, shape, links, names))
    return dmesh, scale


def _cut_at_nodes(dmesh):
    """``dmesh`` refined so that no axis spans a node boundary: an axis with link levels inside it
    (``axis_levels``, an axis whose groups span nodes) split into one sub-axis per level, major (across
    nodes) first (``16`` on 8-GPU nodes -> sub-axes ``(1)2`` on InfiniBand and ``(2)8`` on NVLink).  A plan
    may then keep a collective inside a node (tensor parallelism over the in-node sub-axis) or span both
    (the whole axis, priced by :func:`hloshard.cost.collectives.link_levels` over the two sub-axes), as on
    the user's own ``2x8``; the written shardings stay shardings of the user's mesh.  ``dmesh`` itself when
    no axis spans nodes."""
    if dmesh.axis_levels is None:
        return dmesh
    shape = []
    for k, size in enumerate(dmesh.shape):
        pieces = dmesh.axis_levels[k]
        shape.extend([int(p.size) for p in reversed(pieces)] if pieces else [int(size)])
    return dmesh.refine(shape)


def straddle_notes(profile, shape, links, names=None) -> list[str]:
    """One note per mesh axis priced on the slow link (``dcn``) whose groups have members inside one node too
    (:func:`hloshard.devices.node_spans`: ``4x2x2`` on 8-GPU nodes, axis 0's groups hold 2 devices of each of 2
    nodes): its collectives are priced by the links inside the axis (:func:`hloshard.devices.axis_pieces`; a
    ring through the nodes or level by level, :func:`hloshard.cost.collectives.link_levels`), and the note
    names the mesh with the axis boundary at the node that :func:`priced_mesh` refines it to internally
    (new user 25b, finding 10)."""
    out = []
    for i, (size, cls) in enumerate(zip(shape, links)):
        span = node_spans(shape, i, profile.devices_per_node)
        if cls != "dcn" or span is None:
            continue
        nodes, per_node = span
        name = names[i] if names and i < len(names) else f"axis{i}"
        out.append(f"mesh axis {name} ({size} devices) straddles nodes: each of its groups holds {per_node} devices "
                   f"of each of {nodes} nodes ({profile.devices_per_node} devices per node); its collectives are "
                   f"priced as a ring through the nodes ({profile.link_name('ici')} inside a node, "
                   f"{profile.link_name('dcn')} between) or level by level, whichever is faster, and the axis is "
                   f"split at the node boundary internally ({_node_shape(shape, i, profile.devices_per_node)}), "
                   f"so that a plan may keep a collective inside a node")
    return out


def _node_shape(shape, i: int, devices_per_node: int) -> str:
    """``shape`` with axis ``i`` split at the node boundary (``4x2x2`` -> ``2x2x2x2``, ``16`` -> ``2x8``)."""
    nodes, per_node = node_spans(shape, i, devices_per_node)
    out = list(shape[:i]) + [nodes, per_node] + list(shape[i + 1:])
    return "x".join(str(int(n)) for n in out)


def mesh_from_options(module, mesh: str | None, device_ids: str | None, alpha: str | None,
                      beta: str | None, memory_budget: int | None = None,
                      max_padding: float | None = None) -> DeviceMesh:
    """The :class:`DeviceMesh` the options describe, with the uneven-split policy set
    (``max_padding``, ``memory_budget``: :meth:`DeviceMesh.with_policy`).

    With a module: :meth:`DeviceMesh.for_module` (``--mesh``, else the module's named mesh, else the
    mesh its shardings imply, else num_partitions; refined internally where user shardings need it;
    a num_partitions that differs from the mesh size is an error), and every sharding the module
    carries is checked on that mesh by the one validity rule
    (:func:`hloshard.strategy.user_shardings.check_module_shardings`: InputError, exit 2, at the
    instruction). Without a module, ``--mesh`` is required. Raises UsageError with a message naming
    the flag.
    """
    if mesh is not None and split_link_marks(mesh)[1] is not None:
        raise UsageError(f"--mesh {mesh}: link marks (:ici / :dcn) need --device (e.g. --device h100-sxm)")
    if module is not None:
        dmesh = DeviceMesh.for_module(module, mesh, device_ids, alpha, beta).with_policy(max_padding, memory_budget)
        check_module_shardings(module, dmesh)
        return dmesh
    if mesh is None:
        if device_ids is not None or alpha is not None or beta is not None:
            raise UsageError("--device-ids / --alpha / --beta need --mesh (e.g. --mesh 2x4)")
        raise UsageError("the device mesh is unknown: pass --mesh (e.g. --mesh 2x4)")
    return DeviceMesh.parse(mesh, device_ids, alpha, beta).with_policy(max_padding, memory_budget)
