from __future__ import annotations

from ..rule import Rule
from ..validity import site_findings


class DuplicateDeviceId(Rule):
    """A device id appears more than once in a tile assignment.

    Each device holds exactly one tile. A repeated id means one device is asked to hold two tiles
    and some other device none; XLA's parser does not catch this, the sharding verifier later
    does, or worse, a hand-rolled partitioner silently computes on the wrong data.
    (``last_tile_dim_replicate`` groups list *different* devices holding the same tile.)

    **Bad**::

        ENTRY e {
          ROOT p = f32[8] parameter(0), sharding={devices=[4]0,1,1,3}
        }

    **Good**::

        ENTRY e {
          ROOT p = f32[8] parameter(0), sharding={devices=[4]0,1,2,3}
        }
    """

    code = "HS103"
    name = "duplicate-device-id"
    severity = "error"
    groups = ("validity",)
    text_only = True

    def evaluate(self, context):
        yield from site_findings(self, context)
