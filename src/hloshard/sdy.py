"""Shardy (``sdy``) named meshes and shardings: read the module's named mesh, write ``xla.sdy.sharding``.

jax lowers with Shardy by default. Its HLO (``lowered.as_text(dialect="hlo")``, or StableHLO converted
by :mod:`hloshard.stablehlo`) names the mesh in the module frontend attribute
``xla.sdy.meshes={mesh = #sdy.mesh<["data"=2, "model"=4]>}`` and carries, beside ``sharding={...}``,
the frontend attribute ``xla.sdy.sharding`` that XLA's Shardy partitioner reads:
``#sdy.sharding<@mesh, [{"data"}, {}]>`` on entry parameters and
``#sdy.sharding_per_value<[<@mesh, [{"data"}, {}]>]>`` on other instructions (one ``<...>`` per result).

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

import dataclasses
import math
import re

import numpy as np

from .errors import InputError

__all__ = ["SdyMesh", "NotExpressible", "module_meshes", "module_sdy_mesh", "module_mesh", "parse_mesh",
           "dim_axes", "to_sdy", "annotate_module", "SDY_SHARDING", "SDY_MESHES"]

SDY_SHARDING = "xla.sdy.sharding"
SDY_MESHES = "xla.sdy.meshes"


class NotExpressible(InputError):
    """A sharding that no assignment of (sub-)axes of the named mesh produces. Exit code 2."""


@dataclasses.dataclass(frozen=True)
class SdyMesh:
    """A named Shardy mesh: axis ``names`` and ``sizes`` (major to minor) and the device ids in mesh
    order (None: iota ``0..N-1``)."""

    name: str
    names: tuple[str, ...]
    sizes: tuple[int, ...]
    device_ids: tuple[int, ...] | None = None

    @property
    def num_devices(self) -> int:
        if not self.names and self.device_ids:
            return len(self.device_ids)
        return math.prod(self.sizes)

    def devices(self) -> np.ndarray:
        """Device ids shaped like the mesh (int64)."""
        n = self.num_devices
        ids = np.arange(n) if self.device_ids is None else np.array(self.device_ids, dtype=np.int64)
        return ids.reshape(self.sizes) if self.sizes else ids

    def text(self) -> str:
        """``#sdy.mesh<["data"=2, "model"=4]>`` (with ``device_ids=[...]`` when not iota)."""
        axes = ", ".join(f'"{n}"={s}' for n, s in zip(self.names, self.sizes))
        extra = f", device_ids=[{', '.join(map(str, self.device_ids))}]" if self.device_ids is not None else ""
        return f"#sdy.mesh<[{axes}]{extra}>"


_MESH_BODY = re.compile(r'^\s*<\s*\[(?P<axes>[^\]]*)\]\s*(?:,\s*device_ids\s*=\s*\[(?P<ids>[^\]]*)\])?\s*>\s*$')
_AXIS = re.compile(r'^\s*"((?:[^"\\]|\\.)*)"\s*=\s*(\d+)\s*$')


def parse_mesh(body: str, name: str = "mesh") -> SdyMesh:
    """Parse a mesh body ``<["data"=2, "model"=4]>`` or ``<[], device_ids=[3]>`` (after ``#sdy.mesh``
    or ``sdy.mesh @name =``). Raises InputError on anything else."""
    m = _MESH_BODY.match(body)
    if not m:
        raise InputError(f"unrecognised sdy mesh {body.strip()!r}: expected <[\"axis\"=size, ...]>")
    names, sizes = [], []
    for part in [p for p in m.group("axes").split(",") if p.strip()]:
        a = _AXIS.match(part)
        if not a or int(a.group(2)) < 1:
            raise InputError(f"unrecognised sdy mesh axis {part.strip()!r} in {body.strip()!r}")
        names.append(a.group(1))
        sizes.append(int(a.group(2)))
    if len(set(names)) != len(names):
        raise InputError(f"sdy mesh {name!r} names an axis twice: {body.strip()!r}")
    ids = None
    if m.group("ids") is not None:
        ids = tuple(int(x) for x in re.findall(r"-?\d+", m.group("ids")))
        if names and len(ids) != math.prod(sizes):
            raise InputError(f"sdy mesh {name!r}: {len(ids)} device ids for {math.prod(sizes)} devices")
    return SdyMesh(name, tuple(names), tuple(sizes), ids)


def _split_meshes(text: str) -> list[tuple[str, str]]:
    """``{mesh = #sdy.mesh<...>, other = #sdy.mesh<...>}`` -> [(name, body)]."""
    t = text.strip()
    if t.startswith('"') and t.endswith('"'):
        t = t[1:-1].replace('\\"', '"')
    if t.startswith("{") and t.endswith("}"):
        t = t[1:-1]
    out = []
    from .stablehlo import bracketed

    for m in re.finditer(r'(?:"((?:[^"\\]|\\.)*)"|([\w.\-$]+))\s*=\s*#sdy\.mesh(<)', t):
        inner, _ = bracketed(t, m.start(3))
        out.append((m.group(1) or m.group(2), "<" + inner + ">"))
    return out


def module_meshes(module) -> dict[str, SdyMesh]:
    """The named meshes of the module's ``xla.sdy.meshes`` frontend attribute (empty when absent).
    Raises InputError on a mesh it cannot read."""
    from .hlo.attributes import decode_attr

    fa = getattr(module, "attrs", {}).get("frontend_attributes")
    if not fa:
        return {}
    try:
        pairs = dict(decode_attr("frontend_attributes", str(fa)))
    except Exception:  # noqa: BLE001 - the parser accepted it; an unreadable value names no mesh
        return {}
    value = pairs.get(SDY_MESHES)
    if not value:
        return {}
    return {name: parse_mesh(body, name) for name, body in _split_meshes(value)}


_REF = re.compile(r"<\s*@([\w.\-$]+)\s*,")


def module_sdy_mesh(module) -> SdyMesh | None:
    """The named mesh the module's shardings use: the mesh most ``xla.sdy.sharding`` attributes of the
    entry refer to (ties: first written), else the first mesh with axes; None without meshes."""
    meshes = module_meshes(module)
    if not meshes:
        return None
    counts = {k: 0 for k in meshes}
    entry = getattr(module, "entry", None)
    for instr in (entry.instructions if entry is not None else ()):
        v = _frontend(instr).get(SDY_SHARDING)
        for ref in _REF.findall(v or ""):
            if ref in counts:
                counts[ref] += 1
    with_axes = [k for k, m in meshes.items() if m.names]
    if not with_axes:
        return None
    best = max(with_axes, key=lambda k: (counts[k], -with_axes.index(k)))
    return meshes[best]


def module_mesh(module) -> tuple[tuple[str, ...], tuple[int, ...]] | None:
    """``(axis names, axis sizes)`` of :func:`module_sdy_mesh`, e.g. ``(("data", "model"), (2, 4))``;
    None when the module names no mesh. For mesh precedence (``DeviceMesh.for_module``)."""
    m = module_sdy_mesh(module)
    return None if m is None else (m.names, m.sizes)


# ------------------------------------------------------------------------------------------------
# HloSharding -> named axes

def _primes(n: int) -> list[int]:
    from .mesh import prime_factors

    return prime_factors(n)


def _atoms(mesh: SdyMesh) -> list[tuple[int, int, int]]:
    """(axis index, pre-size, size) of every prime factor of every axis, major to minor."""
    out = []
    for a, size in enumerate(mesh.sizes):
        pre = 1
        for p in _primes(size):
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

def _frontend(instr) -> dict:
    fa = instr.attrs.get("frontend_attributes")
    if not fa:
        return {}
    return dict(fa.items()) if isinstance(fa, dict) else dict(fa)


def _leaves(shape) -> list:
    return list(shape.leaves()) if shape.is_tuple else [shape]


def instruction_sdy(instr, mesh: SdyMesh) -> str | None:
    """The ``xla.sdy.sharding`` value for ``instr``'s ``sharding=``, None when it gets none (no
    sharding, a ``tuple`` instruction, a non-entry parameter)."""
    sh = instr.sharding
    if sh is None or instr.opcode == "tuple":
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
    from .autoshard import processed_computations

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
