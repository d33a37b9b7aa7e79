"""Shardy (``sdy``) named meshes and shardings: read the module's named mesh, write ``xla.sdy.sharding``.

jax lowers with Shardy by default. Its HLO (``lowered.as_text(dialect="hlo")``, or StableHLO converted
by :mod:`hloshard.stablehlo`) names the mesh in the module frontend attribute
``xla.sdy.meshes={mesh = #sdy.mesh<["data"=2, "model"=4]>}`` and carries, beside ``sharding={...}``,
the frontend attribute ``xla.sdy.sharding`` that XLA's Shardy partitioner reads:
``#sdy.sharding<@mesh, [{"data"}, {}]>`` on entry parameters and
``#sdy.sharding_per_value<[<@mesh, [{"data"}, {}]>]>`` on other instructions (one ``<...>`` per result).

The module's named mesh is read by :mod:`hloshard.sdy_mesh` (below :mod:`hloshard.mesh`, which
reads it for the mesh precedence); its names are re-exported here.  This module is above
:mod:`hloshard.autoshard` (it annotates the computations the solver processed).

Public API::

    SdyMesh(name, names, sizes, device_ids=None)    # one named mesh; .num_devices, .text()
    module_meshes(module) -> dict[str, SdyMesh]     # every mesh of xla.sdy.meshes, in written order
    module_sdy_mesh(module) -> SdyMesh | None       # the mesh the module's shardings use (see below)
    module_mesh(module) -> (names, sizes) | None    # its axis names and sizes, as data
    parse_mesh(body, name="mesh") -> SdyMesh        # '<["data"=2, "model"=4]>' (sdy.mesh / #sdy.mesh body)
    dim_axes(sharding, rank, mesh) -> list[list[str]]   # per tensor dim the axis refs, major to minor
    to_sdy(sharding, rank, mesh) -> '<@mesh, [{"data"}, {}]>'
    annotate_module(module, mesh=None) -> int       # write xla.sdy.sharding beside every sharding=

The HloSharding -> named axes conversion is our own derivation: split every mesh axis into its prime
factors ("atoms", major to minor, Shardy's sub-axes ``"x":(pre)size`` are runs of them), find for
each atom which tile dim moving along it advances (the device one step along the atom, from the mesh
origin), order each dim's atoms by stride (major first), rebuild the tile assignment from that
assignment and accept it only when every tile holds the same devices as the sharding's. A sharding no
axis assignment reproduces (an arbitrary device permutation, a maximal or manual sharding, a device
count that differs from the mesh's) raises :class:`NotExpressible` (an InputError).
"""

from __future__ import annotations

import math

import numpy as np

from .autoshard import processed_computations
from .errors import InputError
from .mesh import prime_factors
from .sdy_mesh import (  # noqa: F401  (re-exported: the module's named mesh is read in sdy_mesh, below mesh.py)
    SDY_MESHES, SDY_SHARDING, SdyMesh, _frontend, module_mesh, module_meshes, module_sdy_mesh, parse_mesh,
)

__all__ = ["SdyMesh", "NotExpressible", "module_meshes", "module_sdy_mesh", "module_mesh", "parse_mesh",
           "dim_axes", "to_sdy", "annotate_module", "SDY_SHARDING", "SDY_MESHES"]


class NotExpressible(InputError):
    """A sharding that no assignment of (sub-)axes of the named mesh produces. Exit code 2."""


# ------------------------------------------------------------------------------------------------
# HloSharding -> named axes

def _atoms(mesh: SdyMesh) -> list[tuple[int, int, int]]:
    """(axis index, pre-size, size) of every prime factor of every axis, major to minor."""
    out = []
    for a, size in enumerate(mesh.sizes):
        pre = 1
        for p in prime_factors(size):
            out.append((a, pre, p))
            pre *= p
    return out


def _axis_ref(mesh: SdyMesh, axis: int, pre: int, size: int) -> str:
    name = mesh.names[axis]
    if pre == 1 and size == mesh.sizes[axis]:
        return f'"{name}"'
    return f'"{name}":({pre}){size}'


def dim_axes(sharding, rank: int, mesh: SdyMesh) -> list[list[str]]:
    """Per tensor dim the Shardy axis references (``'"data"'``, ``'"model":(1)2'``), major to minor.

    ``rank`` is the tensor rank. Replicated -> ``[[]] * rank``. Raises NotExpressible for maximal,
    manual, tuple or unknown shardings, a device count other than the mesh's, or a device order no
    assignment of mesh (sub-)axes produces.
    """
    if sharding is None or sharding.is_replicated:
        return [[] for _ in range(rank)]
    if not sharding.is_tiled or sharding.subgroup_types:
        raise NotExpressible(f"sharding {sharding} has no named-axis form (only tiled shardings do)")
    tile_dims = tuple(sharding.tile_dims)
    if len(tile_dims) != rank:
        raise NotExpressible(f"sharding {sharding} has {len(tile_dims)} tile dims for rank {rank}")
    ta = np.asarray(sharding.tile_assignment)
    n = mesh.num_devices
    if ta.size != n:
        raise NotExpressible(f"sharding {sharding} uses {ta.size} devices but mesh @{mesh.name} "
                             f"{mesh.text()} has {n}")
    flat = ta.reshape(tile_dims + (-1,))
    coords = {int(d): idx for idx, d in np.ndenumerate(flat)}
    atoms = _atoms(mesh)
    arr = mesh.devices().reshape([p for _, _, p in atoms]) if atoms else mesh.devices().reshape(())
    origin_idx = (0,) * len(atoms)
    try:
        origin = np.array(coords[int(arr[origin_idx])])
    except KeyError:
        raise NotExpressible(f"sharding {sharding} does not use the devices of mesh @{mesh.name}") from None
    per_dim: list[list[tuple[int, int]]] = [[] for _ in range(rank)]   # (stride, atom)
    replicated: list[int] = []
    for k in range(len(atoms)):
        idx = list(origin_idx)
        idx[k] = 1
        dev = int(arr[tuple(idx)])
        if dev not in coords:
            raise NotExpressible(f"sharding {sharding} does not use the devices of mesh @{mesh.name}")
        delta = np.array(coords[dev]) - origin
        moved = [d for d in range(rank) if delta[d] != 0]
        if not moved:
            replicated.append(k)
        elif len(moved) == 1 and delta[moved[0]] > 0:
            per_dim[moved[0]].append((int(delta[moved[0]]), k))
        else:
            raise NotExpressible(f"sharding {sharding} is not a product of axes of mesh @{mesh.name} "
                                 f"{mesh.text()}")
    order = [[k for _, k in sorted(lst, key=lambda t: (-t[0], t[1]))] for lst in per_dim]
    perm = [k for ks in order for k in ks] + replicated
    rebuilt = arr.transpose(perm).reshape(tile_dims + (-1,)) if atoms else arr.reshape(tile_dims + (-1,))
    if not all(sorted(rebuilt[i].tolist()) == sorted(flat[i].tolist()) for i in np.ndindex(*tile_dims)):
        raise NotExpressible(f"sharding {sharding} is not a product of axes of mesh @{mesh.name} "
                             f"{mesh.text()}")
    out = []
    for ks in order:
        refs: list[str] = []
        run: list[int] = []

        def flush():
            if run:
                a, pre, _ = atoms[run[0]]
                refs.append(_axis_ref(mesh, a, pre, math.prod(atoms[j][2] for j in run)))

        for k in ks:
            if run and atoms[k][0] == atoms[run[-1]][0] and k == run[-1] + 1:
                run.append(k)
            else:
                flush()
                run = [k]
        flush()
        out.append(refs)
    return out


def to_sdy(sharding, rank: int, mesh: SdyMesh) -> str:
    """``<@mesh, [{"data"}, {}]>``: the per-value Shardy sharding of one array (all dims closed)."""
    dims = dim_axes(sharding, rank, mesh)
    return f"<@{mesh.name}, [" + ", ".join("{" + ", ".join(d) + "}" for d in dims) + "]>"


# ------------------------------------------------------------------------------------------------
# writing the attribute

def _leaves(shape) -> list:
    return list(shape.leaves()) if shape.is_tuple else [shape]


def _is_manual(sh) -> bool:
    """``{manual}`` or a manual subgroup, on any leaf."""
    if sh.is_tuple:
        return any(_is_manual(e) for e in sh.tuple_elements)
    return bool(sh.is_manual or "manual" in tuple(sh.subgroup_types or ()))


def instruction_sdy(instr, mesh: SdyMesh) -> str | None:
    """The ``xla.sdy.sharding`` value for ``instr``'s ``sharding=``, None when it gets none (no
    sharding, a ``tuple`` instruction, a non-entry parameter, a manual value: a ``shard_map``'s region, which
    Shardy writes by its ``xla.sdy.*`` custom-calls and hloshard by GSPMD's, :mod:`hloshard.sdy_manual`)."""
    sh = instr.sharding
    if sh is None or instr.opcode == "tuple" or _is_manual(sh):
        return None
    entry_param = instr.opcode == "parameter" and instr.parent is not None and instr.parent.is_entry
    if instr.opcode == "parameter" and not entry_param:
        return None
    leaves = _leaves(instr.shape)
    if instr.shape.is_tuple:
        if entry_param:
            return None
        elems = list(sh.tuple_elements) if sh.is_tuple else [sh] * len(leaves)
        if len(elems) != len(leaves):
            raise NotExpressible(f"{instr.name}: tuple sharding with {len(elems)} elements for {len(leaves)} leaves")
        values = [to_sdy(e, len(s.dims), mesh) for e, s in zip(elems, leaves)]
    else:
        if sh.is_tuple:
            return None
        values = [to_sdy(sh, len(instr.shape.dims), mesh)]
    if entry_param:
        return "#sdy.sharding" + values[0]
    return "#sdy.sharding_per_value<[" + ", ".join(values) + "]>"


def annotate_module(module, mesh: SdyMesh | None = None) -> int:
    """Write ``xla.sdy.sharding`` (named axes of ``mesh``, default :func:`module_sdy_mesh`) beside
    ``sharding={...}`` on every instruction of the entry and the computations it calls through
    while / call / conditional; tuple instructions and non-entry parameters get none (Shardy derives
    them). Does nothing for a module that names no mesh (GSPMD mode). Returns the count written.

    Raises NotExpressible when a sharding has no named-axis form on the mesh (the CLI: exit 2).
    """
    mesh = mesh or module_sdy_mesh(module)
    if mesh is None:
        return 0
    count = 0
    for comp in processed_computations(module):
        for instr in comp.instructions:
            value = instruction_sdy(instr, mesh)
            fa = _frontend(instr)
            if value is None:
                if SDY_SHARDING in fa and instr.sharding is not None and instr.opcode != "parameter":
                    fa.pop(SDY_SHARDING)  # stale: it would contradict sharding={...}
                    instr.set_attr("frontend_attributes", fa or None)
                continue
            fa[SDY_SHARDING] = value
            instr.set_attr("frontend_attributes", fa)
            count += 1
    return count
