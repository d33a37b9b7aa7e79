"""User shardings: the one validity rule for the shardings a module carries, and which of them
``solve`` / ``cost`` keep (``--keep-shardings``).

The rule (:func:`check_module_shardings`, per instruction :func:`_check_user_sharding`): a tuple
sharding sits on a tuple shape and has one element per leaf of it; a tiled sharding tiles as many dimensions as its
shape has, names as many devices as the mesh has, only devices of the mesh, each once; a maximal
sharding names a device of the mesh; a manual value leaves its manual region only as XLA's partitioner takes it
(:func:`hloshard.hlo.manual.manual_region_problems`: through ``SPMDShardToFullShape``, into the same manual kind,
never into the entry's output unannotated; XLA aborts elsewhere).  It applies to every annotated instruction of the
input, whether the command keeps the sharding or not: every command that reads a module's shardings
(``solve``, ``cost``, ``explain``, ``diff``, ``explain-reshape``, ``combine``, through
:func:`hloshard.commands.options.mesh_from_options`, and the cost-graph builder through
:func:`user_shardings`) exits 2 with ``FILE:LINE:COL`` on the first violation; ``lint`` reports the
same cases as findings (HS101, HS103, HS104, HS105, HS106, HS111).
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError, UsageError
from ..hlo.manual import manual_region_problems
from ..sdy_mesh import SDY_RESULT_TARGETS
from .base import leaf_shapes
from ..units import counted


KEEP_MODES = ("all", "io", "none")



def _sharding_problem(instr, sh, mesh) -> str | None:
    """What breaks the validity rule (module docstring) in ``sh`` on ``instr`` on ``mesh``, or None."""
    leaves = leaf_shapes(instr.shape)
    if sh.is_tuple:
        if not getattr(instr.shape, "is_tuple", False):   # XLA: "Sharding is tuple-shaped but validation shape is not" (lint HS106)
            return f"tuple sharding {sh} on the non-tuple shape {instr.shape}"
        elems = list(sh.tuple_elements)
        if len(elems) != len(leaves) and not (len(leaves) == 0 and len(elems) == 1):
            return f"sharding {sh} has {len(elems)} elements but the shape {instr.shape} has {len(leaves)} leaves"
    else:
        elems = [sh] * len(leaves)
    mesh_ids = None
    for shape, e in zip(leaves, elems):
        if e.is_tiled:
            if len(e.tile_dims) != len(shape.dims):
                return f"sharding {e} tiles {len(e.tile_dims)} dims but the shape {shape} has rank {len(shape.dims)}"
            if e.num_devices != mesh.num_devices:
                return (f"sharding {e} uses {counted(e.num_devices, 'device')} but the mesh [{_user_mesh(mesh)}] has "
                        f"{counted(mesh.num_devices, 'device')}: the module's shardings need a mesh of "
                        f"{counted(e.num_devices, 'device')}")
            mesh_ids = mesh_ids or set(int(x) for x in np.asarray(mesh.device_ids).reshape(-1))
            bad = [d for d in e.devices if d not in mesh_ids]
            if bad:
                return f"sharding {e} names device {bad[0]}, which is not in the mesh {_user_mesh(mesh)}"
            devs = [int(d) for d in e.devices]
            if len(set(devs)) != len(devs):   # XLA refuses such a sharding too (lint HS103; tested)
                seen: set = set()
                dup = next(d for d in devs if d in seen or seen.add(d))
                return f"sharding {e} lists device {dup} more than once: a tile assignment must name each device once"
        elif e.is_maximal:
            mesh_ids = mesh_ids or set(int(x) for x in np.asarray(mesh.device_ids).reshape(-1))
            if e.maximal_device not in mesh_ids:
                return f"sharding {e} names device {e.maximal_device}, not in the mesh {mesh}"
    return None


def _check_user_sharding(instr, sh, mesh) -> None:
    """Raise InputError (``NAME (line N): ...``) when ``sh`` breaks the validity rule on ``instr``."""
    problem = _sharding_problem(instr, sh, mesh)
    if problem is not None:
        where = f"{instr.name} (line {instr.line})" if getattr(instr, "line", 0) else instr.name
        raise InputError(f"{where}: {problem}")


def check_module_shardings(module, mesh, computations=None) -> None:
    """Apply the validity rule (module docstring) to every annotated instruction of ``computations``
    (default: every computation of ``module``) on ``mesh`` (a :class:`~hloshard.mesh.DeviceMesh`).
    Raises InputError ``NAME: ...`` located at the first offending instruction (its ``line`` and
    ``column``: the CLI prints ``FILE:LINE:COL: error: ...`` and exits 2)."""
    for comp in (getattr(module, "computations", ()) if computations is None else computations):
        for instr in comp.instructions:
            sh = instr.sharding
            if sh is None or isinstance(sh, str) or sh.is_unknown:
                continue
            problem = _sharding_problem(instr, sh, mesh)
            if problem is not None:
                _raise_at(instr, f"{instr.name}: {problem}")
    _check_manual_regions(module, computations)


def _raise_at(instr, message: str) -> None:
    line = getattr(instr, "line", 0) or 0
    raise InputError(message, line=line, column=(getattr(instr, "column", 0) or 1) if line else 0)


def _check_manual_regions(module, computations=None) -> None:
    """InputError at the first place a manual value leaves its region as XLA's partitioner cannot take it."""
    problems = manual_region_problems(module, computations)
    if problems:
        _raise_at(problems[0].instr, problems[0].message)


def user_shardings(module, keep: str, mesh, computations) -> dict:
    """Instruction -> HloSharding to keep.  ``keep``: 'all' (every annotated instruction), 'io' (entry
    parameters, the entry root, ``Sharding`` custom-calls and their Shardy forms, jax's out_shardings and
    constraints (:data:`hloshard.sdy_mesh.SDY_RESULT_TARGETS`): XLA's default keeps parameters and
    outputs; explicit constraints are user intent too), 'none'.  ``Sharding`` custom-calls feeding
    ``SPMDFullToShardShape`` are always kept (they define the manual region's layout).
    Raises InputError for any sharding of ``computations`` that breaks the validity rule
    (:func:`check_module_shardings`), kept or not."""
    if keep not in KEEP_MODES:
        raise UsageError(f"--keep-shardings must be one of {', '.join(KEEP_MODES)}, got {keep!r}")
    fixed = {}
    entry = module.entry
    for comp in computations:
        for instr in comp.instructions:
            sh = instr.sharding
            if sh is None or isinstance(sh, str):
                continue
            if sh.is_unknown:
                continue
            _check_user_sharding(instr, sh, mesh)   # the one rule, for kept and dropped shardings alike
            keep_it = False
            if keep == "all":
                keep_it = True
            elif instr.is_sharding_constraint and \
                    any(u.custom_call_target == "SPMDFullToShardShape" for u in instr.users):
                keep_it = True
            elif keep == "io":
                if comp is entry and (instr.opcode == "parameter" or instr is entry.root):
                    keep_it = True
                elif instr.is_sharding_constraint or instr.custom_call_target in SDY_RESULT_TARGETS:
                    # jax's Shardy-mode HLO: out_shardings as xla.sdy.FuncResultSharding (the entry root is
                    # then a get-tuple-element of a tuple of them, which pins nothing itself),
                    # with_sharding_constraint as xla.sdy.ShardingConstraint
                    keep_it = True
            if keep_it:
                fixed[instr] = sh
    _check_manual_regions(module, computations)
    return fixed


def _user_mesh(mesh) -> str:
    """The mesh as the user gave it (``2x4``), not an internal refinement of it (``2x2x2``)."""
    user = getattr(mesh, "user_shape", None)
    return "x".join(map(str, user)) if user else str(mesh)
