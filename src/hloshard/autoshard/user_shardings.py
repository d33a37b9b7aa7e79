"""User shardings: which annotations ``solve`` / ``cost`` keep (``--keep-shardings``), checked
against the mesh and the shapes.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError, UsageError
from ..strategy.base import leaf_shapes
from ..units import counted


KEEP_MODES = ("all", "io", "none")



def _check_user_sharding(instr, sh, mesh) -> None:
    """Raise InputError when a user sharding cannot apply to ``instr`` on ``mesh``."""
    where = f"{instr.name} (line {instr.line})" if getattr(instr, "line", 0) else instr.name
    leaves = leaf_shapes(instr.shape)
    if sh.is_tuple:
        elems = list(sh.tuple_elements)
        if len(elems) != len(leaves) and not (len(leaves) == 0 and len(elems) == 1):
            raise InputError(f"{where}: sharding {sh} has {len(elems)} elements but the shape {instr.shape} has "
                             f"{len(leaves)} leaves")
    else:
        elems = [sh] * len(leaves)
    for shape, e in zip(leaves, elems):
        if e.is_tiled:
            if len(e.tile_dims) != len(shape.dims):
                raise InputError(f"{where}: sharding {e} tiles {len(e.tile_dims)} dims but the shape {shape} has "
                                 f"rank {len(shape.dims)}")
            if e.num_devices != mesh.num_devices:
                raise InputError(f"{where}: sharding {e} uses {counted(e.num_devices, 'device')} but the mesh "
                                 f"[{mesh}] has {counted(mesh.num_devices, 'device')}")
            mesh_ids = set(int(x) for x in np.asarray(mesh.device_ids).reshape(-1))
            bad = [d for d in e.devices if d not in mesh_ids]
            if bad:
                raise InputError(f"{where}: sharding {e} names device {bad[0]}, which is not in the mesh {mesh}")
            devs = [int(d) for d in e.devices]
            if len(set(devs)) != len(devs):   # XLA refuses such a sharding too (lint HS103; tested)
                seen: set = set()
                dup = next(d for d in devs if d in seen or seen.add(d))
                raise InputError(f"{where}: sharding {e} lists device {dup} more than once: a tile assignment "
                                 f"must name each device once")
        elif e.is_maximal:
            mesh_ids = set(int(x) for x in np.asarray(mesh.device_ids).reshape(-1))
            if e.maximal_device not in mesh_ids:
                raise InputError(f"{where}: sharding {e} names device {e.maximal_device}, not in the mesh {mesh}")



def _target(instr) -> str:
    return str(instr.attrs.get("custom_call_target", "")).strip().strip('"')



def user_shardings(module, keep: str, mesh, computations) -> dict:
    """Instruction -> HloSharding to keep.  ``keep``: 'all' (every annotated instruction), 'io' (entry
    parameters, the entry root and ``Sharding`` custom-calls: XLA's default keeps parameters and outputs;
    explicit constraints are user intent too), 'none'.  ``Sharding`` custom-calls feeding
    ``SPMDFullToShardShape`` are always kept (they define the manual region's layout).
    Raises InputError for a kept sharding that does not fit the mesh or the shape."""
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
            keep_it = False
            if keep == "all":
                keep_it = True
            elif instr.opcode == "custom-call" and _target(instr) == "Sharding" and \
                    any(u.opcode == "custom-call" and _target(u) == "SPMDFullToShardShape" for u in instr.users):
                keep_it = True
            elif keep == "io":
                if comp is entry and (instr.opcode == "parameter" or instr is entry.root):
                    keep_it = True
                elif instr.opcode == "custom-call" and _target(instr) == "Sharding":
                    keep_it = True
            if keep_it:
                _check_user_sharding(instr, sh, mesh)
                fixed[instr] = sh
    return fixed

