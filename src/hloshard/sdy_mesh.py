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
    sharding_from_sdy(text, rank, meshes) -> HloSharding | None   # one Shardy value, whole axes
    read_result_shardings(module) -> int            # out_shardings / constraints written only in Shardy form

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
from .hlo.sharding import HloSharding

__all__ = ["SdyMesh", "module_meshes", "module_sdy_mesh", "module_mesh", "parse_mesh", "SDY_SHARDING", "SDY_MESHES",
           "SDY_RESULT_TARGETS", "sharding_from_sdy", "read_result_shardings"]

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


# ------------------------------------------------------------------------------------------------
# the sharding constraints of jax's Shardy-mode HLO read back (out_shardings, with_sharding_constraint)

#: custom-calls of jax's Shardy-mode HLO whose ``xla.sdy.sharding`` is a sharding constraint on their
#: one result (``jax.jit(out_shardings=...)``: one per output; ``with_sharding_constraint``); XLA's GSPMD
#: partitioner takes the same constraint as a ``Sharding`` custom-call (:mod:`hloshard.xla_compare`)
SDY_RESULT_TARGETS = ("xla.sdy.FuncResultSharding", "xla.sdy.ShardingConstraint")

_VALUE = re.compile(r"<\s*@([\w.\-$]+)\s*,\s*\[(.*?)\]\s*(?:,[^>]*)?>", re.S)
_DIM = re.compile(r"\{([^{}]*)\}")


def sharding_from_sdy(text: str, rank: int, meshes: dict):
    """The HloSharding of a one-value Shardy sharding, ``#sdy.sharding<@mesh, [{"data"}, {}]>`` or
    ``#sdy.sharding_per_value<[<@mesh, [{}, {"model"}]>]>``, for an array of ``rank`` dims over the
    named mesh of ``meshes`` (:func:`module_meshes`): each dim tiled by its axes (major to minor), the
    mesh's other axes replicated (``last_tile_dim_replicate``), open dims (``?``) unsharded.  None when
    the text is not one value over a known mesh of whole axes (sub-axes ``"x":(1)2``, several values,
    a dim count other than ``rank``): the caller then leaves the instruction unannotated."""

    values = _VALUE.findall(text or "")
    if len(values) != 1:
        return None
    name, body = values[0]
    mesh = meshes.get(name)
    if mesh is None or ":" in body:
        return None
    dims = _DIM.findall(body)
    if len(dims) != rank:
        return None
    index = {n: k for k, n in enumerate(mesh.names)}
    per_dim = []
    for d in dims:
        axes = [a.strip().strip('"') for a in d.split(",") if a.strip() and a.strip() != "?"]
        if any(a not in index for a in axes):
            return None
        per_dim.append([index[a] for a in axes])
    used = [a for axes in per_dim for a in axes]
    if len(set(used)) != len(used):
        return None
    if not used or all(mesh.sizes[a] == 1 for a in used):
        return HloSharding.replicated()
    rest = [a for a in range(len(mesh.sizes)) if a not in used]
    ta = mesh.devices().transpose(used + rest)
    tiles = [math.prod(mesh.sizes[a] for a in axes) for axes in per_dim]
    replicas = math.prod(mesh.sizes[a] for a in rest)
    if replicas > 1:
        return HloSharding.tiled(ta.reshape(tiles + [replicas]), last_tile_dim_replicate=True)
    return HloSharding.tiled(ta.reshape(tiles))


def read_result_shardings(module) -> int:
    """Give each sharding-constraint custom-call of jax's Shardy-mode HLO (:data:`SDY_RESULT_TARGETS`)
    that carries no ``sharding=`` the HloSharding of its ``xla.sdy.sharding``
    (:func:`sharding_from_sdy`), so that ``out_shardings`` and ``with_sharding_constraint`` written
    only in Shardy form are kept like any annotation.  Returns how many were read."""
    meshes = None
    n = 0
    for instr in module.all_instructions():
        if instr.sharding is not None or instr.custom_call_target not in SDY_RESULT_TARGETS:
            continue
        if meshes is None:
            meshes = module_meshes(module)
        shape = instr.shape
        if not shape.is_array:
            continue
        s = sharding_from_sdy(_frontend(instr).get(SDY_SHARDING), len(shape.dims), meshes)
        if s is not None:
            instr.sharding = s
            n += 1
    return n
