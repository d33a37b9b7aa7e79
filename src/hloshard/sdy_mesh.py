"""Shardy (``sdy``) named meshes as written in a module: the ``xla.sdy.meshes`` frontend attribute read.

Below :mod:`hloshard.mesh` (the mesh precedence reads the module's named mesh from here) and below
:mod:`hloshard.sdy` (which converts shardings to named axes and writes ``xla.sdy.sharding``; it
re-exports every name of this module).  Imports only the HLO layer and text helpers.

Public API::

    SdyMesh(name, names, sizes, device_ids=None)    # one named mesh; .num_devices, .devices(), .text()
    module_meshes(module) -> dict[str, SdyMesh]     # every mesh of xla.sdy.meshes, in written order
    module_sdy_mesh(module) -> SdyMesh | None       # the mesh the module's shardings use
    module_mesh(module) -> (names, sizes) | None    # its axis names and sizes, as data
    parse_mesh(body, name="mesh") -> SdyMesh        # '<["data"=2, "model"=4]>' (sdy.mesh / #sdy.mesh body)

Errors: :class:`~hloshard.errors.InputError` for a mesh body it cannot read.
"""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np

from .errors import InputError
from .hlo.attributes import decode_attr
from .stablehlo import bracketed

__all__ = ["SdyMesh", "module_meshes", "module_sdy_mesh", "module_mesh", "parse_mesh", "SDY_SHARDING", "SDY_MESHES"]

SDY_SHARDING = "xla.sdy.sharding"
SDY_MESHES = "xla.sdy.meshes"


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
    for m in re.finditer(r'(?:"((?:[^"\\]|\\.)*)"|([\w.\-$]+))\s*=\s*#sdy\.mesh(<)', t):
        inner, _ = bracketed(t, m.start(3))
        out.append((m.group(1) or m.group(2), "<" + inner + ">"))
    return out


def module_meshes(module) -> dict[str, SdyMesh]:
    """The named meshes of the module's ``xla.sdy.meshes`` frontend attribute (empty when absent).
    Raises InputError on a mesh it cannot read."""
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


def _frontend(instr) -> dict:
    fa = instr.attrs.get("frontend_attributes")
    if not fa:
        return {}
    return dict(fa.items()) if isinstance(fa, dict) else dict(fa)
