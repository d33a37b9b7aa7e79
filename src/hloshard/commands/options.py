"""Click options shared by every command that takes a device mesh, and a byte-size parameter type.

``@mesh_options`` adds ``--mesh`` (``2x4``), ``--device-ids`` (``0,2,1,3,...``; default iota), ``--alpha``
and ``--beta`` (one comma-separated value per mesh axis; default 1.0 each, cost units per collective
and per byte). Turn them into a :class:`~hloshard.mesh.DeviceMesh` with :func:`mesh_from_options`.
"""

from __future__ import annotations

import click

from ..errors import UsageError
from ..mesh import DeviceMesh
from ..units import parse_bytes

__all__ = ["mesh_options", "mesh_from_options", "ByteSize", "BYTE_SIZE"]


def mesh_options(func):
    """Click decorator: adds ``--mesh``, ``--device-ids``, ``--alpha``, ``--beta`` (passed to the command
    as ``mesh``, ``device_ids``, ``alpha``, ``beta``, each a string or None)."""
    options = [
        click.option("--mesh", "mesh", metavar="AxB", default=None,
                     help="Logical device mesh, e.g. 2x4, 2x2x2 or 8. Default: the 1-D mesh of the "
                          "module's num_partitions."),
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


def mesh_from_options(module, mesh: str | None, device_ids: str | None, alpha: str | None,
                      beta: str | None) -> DeviceMesh:
    """The :class:`DeviceMesh` the options describe.

    With a module: :meth:`DeviceMesh.for_module` (``--mesh`` or the module's num_partitions; a
    num_partitions that differs from the mesh size is an error). Without a module, ``--mesh`` is
    required. Raises UsageError with a message naming the flag.
    """
    if module is not None:
        return DeviceMesh.for_module(module, mesh, device_ids, alpha, beta)
    if mesh is None:
        if device_ids is not None or alpha is not None or beta is not None:
            raise UsageError("--device-ids / --alpha / --beta need --mesh (e.g. --mesh 2x4)")
        raise UsageError("the device mesh is unknown: pass --mesh (e.g. --mesh 2x4)")
    return DeviceMesh.parse(mesh, device_ids, alpha, beta)


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
