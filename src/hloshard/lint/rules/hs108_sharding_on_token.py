from __future__ import annotations

from ..rule import Rule
from ..validity import site_findings


class ShardingOnToken(Rule):
    """A token (or a token leaf of a tuple) carries a tiled sharding.

    Tokens order side effects; they hold no data, so there is nothing to tile. XLA only accepts
    shardings that place a token (``{replicated}``, ``{maximal device=N}``, ``{manual}``). A tiled
    sharding on a tuple that contains a token (``infeed``, ``recv``) usually means the sharding
    was written for the data leaf only and must be a tuple sharding instead.

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
