from __future__ import annotations

from ..rule import Rule
from ..validity import site_findings


class MaximalDeviceOutOfRange(Rule):
    """``{maximal device=N}`` names a device outside ``[0, num_partitions)``.

    A maximal sharding places the whole tensor and its computation on one partition, which must
    exist (num_partitions from ``--num-partitions``, the header or ``--mesh``, else the device
    count the module's tiled shardings use). ``device=-1`` (the host) is accepted.

    **Bad**::

        HloModule m, num_partitions=2
        ENTRY e {
          ROOT p = f32[8] parameter(0), sharding={maximal device=2}
        }

    **Good**::

        HloModule m, num_partitions=2
        ENTRY e {
          ROOT p = f32[8] parameter(0), sharding={maximal device=1}
        }
    """

    code = "HS107"
    name = "maximal-device-out-of-range"
    severity = "error"
    groups = ("validity",)
    text_only = True

    def evaluate(self, context):
        yield from site_findings(self, context)
