from __future__ import annotations

from ..rule import Rule
from ..validity import site_findings


class ShardingOnToken(Rule):
    """A token (or a token leaf of a tuple) carries a tiled sharding.

    Tokens only order side effects; they hold no data and have no dimensions to tile, so a tiled
    sharding on one is meaningless -- XLA does not use it (jaxlib 0.10.2 drops it on import and
    compiles the module). It is still a mistake worth an error: on an ``infeed`` / ``recv``
    tuple it usually means the sharding was written for the data leaf alone, and a single tiled
    sharding on the whole tuple then also "tiles" the token. Place tokens with
    ``{replicated}``, ``{maximal device=N}`` or ``{manual}``, and give tuples a tuple sharding.

    **Bad**::

        ENTRY e {
          t = token[] after-all()
          ROOT in = (f32[8], token[]) infeed(t), sharding={devices=[2]0,1}
        }

    **Good**::

        ENTRY e {
          t = token[] after-all()
          ROOT in = (f32[8], token[]) infeed(t), sharding={{devices=[2]0,1}, {maximal device=0}}
        }
    """

    code = "HS108"
    name = "sharding-on-token"
    severity = "error"
    groups = ("validity",)

    def evaluate(self, context):
        yield from site_findings(self, context)
