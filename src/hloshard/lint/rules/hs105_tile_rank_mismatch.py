from __future__ import annotations

from ..rule import Rule
from ..validity import site_findings


class TileRankMismatch(Rule):
    """The tile assignment's rank does not match the rank of the tensor it shards.

    A tiled sharding has one tile dimension per tensor dimension, plus one trailing dimension for
    ``last_tile_dim_replicate``, plus one per entry of ``last_tile_dims={...}``. XLA's parser does
    not check this against the shape; the verifier rejects it later. A common cause is a sharding
    copied from an instruction of another rank (e.g. across a reshape).

    **Bad**::

        ENTRY e {
          ROOT p = f32[8,16] parameter(0), sharding={devices=[2,2,2]<=[8]}
        }

    **Good**::

        ENTRY e {
          ROOT p = f32[8,16] parameter(0), sharding={devices=[2,2,2]<=[8] last_tile_dim_replicate}
        }
    """

    code = "HS105"
    name = "tile-rank-mismatch"
    severity = "error"
    groups = ("validity",)

    def evaluate(self, context):
        yield from site_findings(self, context)
