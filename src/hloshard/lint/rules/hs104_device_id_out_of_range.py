from __future__ import annotations

from ..rule import Rule
from ..validity import site_findings


class DeviceIdOutOfRange(Rule):
    """A tile assignment names a device id outside ``[0, num_partitions)``.

    In an SPMD module the ids in a tile assignment are partition numbers, so they must lie in
    ``[0, num_partitions)`` (num_partitions from ``--num-partitions``, the header or ``--mesh``;
    when none is known, from the device count most shardings of the module use). An id outside
    the range names a device the program does not run on.

    **Bad**::

        HloModule m, num_partitions=4
        ENTRY e {
          ROOT p = f32[8] parameter(0), sharding={devices=[4]0,1,2,4}
        }

    **Good**::

        HloModule m, num_partitions=4
        ENTRY e {
          ROOT p = f32[8] parameter(0), sharding={devices=[4]0,1,2,3}
        }
    """

    code = "HS104"
    name = "device-id-out-of-range"
    severity = "error"
    groups = ("validity",)
    text_only = True

    def evaluate(self, context):
        yield from site_findings(self, context)
