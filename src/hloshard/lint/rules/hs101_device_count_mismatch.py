from __future__ import annotations

from ..rule import Rule
from ..validity import site_findings


class DeviceCountMismatch(Rule):
    """A tiled sharding's tile assignment does not name every partition of the module.

    In an SPMD program every tiled sharding assigns each of the module's ``num_partitions`` devices
    exactly one tile (or one replica of a tile), so the tile assignment holds exactly
    ``num_partitions`` device ids, counting the ``last_tile_dim_replicate`` / ``last_tile_dims``
    dimensions. The count comes from ``--num-partitions`` (or ``num-partitions`` in
    ``pyproject.toml``), else the ``HloModule`` header, else ``--mesh``; when none is known the
    shardings of the module must at least agree with each other (the count most of them use is
    taken as the reference). A mismatch makes XLA's SPMD partitioner reject the module.

    **Bad**::

        HloModule m, num_partitions=8
        ENTRY e {
          ROOT p = f32[16,16] parameter(0), sharding={devices=[2,2]<=[4]}
        }

    **Good**::

        HloModule m, num_partitions=8
        ENTRY e {
          ROOT p = f32[16,16] parameter(0), sharding={devices=[2,4]<=[8]}
        }
    """

    code = "HS101"
    name = "device-count-mismatch"
    severity = "error"
    groups = ("validity",)
    text_only = True

    def evaluate(self, context):
        yield from site_findings(self, context)
