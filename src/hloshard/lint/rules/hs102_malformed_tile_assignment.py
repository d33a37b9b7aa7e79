from __future__ import annotations

from ..rule import Rule
from ..validity import site_findings


class MalformedTileAssignment(Rule):
    """The tile assignment cannot be built: wrong number of device ids, or a bad iota form.

    ``devices=[d0,...]`` needs ``prod(d)`` device ids. The iota form ``<=[r0,...]T(p...)`` means
    ``arange(prod(r)).reshape(r).transpose(p).reshape(d)``, so ``prod(r)`` must equal ``prod(d)``,
    ``p`` must be a permutation of ``0..len(r)-1``, and ``T(...)`` is required when ``r`` has more
    than one entry. XLA's text parser lets some of these through (jaxlib 0.10.2 pads a short
    explicit list with device 0 and accepts a bad transpose), so the mistake surfaces only when the
    module is compiled (a RET_CHECK in HloSharding) -- or as a silently wrong device order.
    hloshard's parser rejects them; lint reads the sharding leniently, reports it here, and lints
    the rest of the file as if the sharding were ``{unknown}``.

    **Bad**::

        ENTRY e {
          ROOT p = f32[8,8] parameter(0), sharding={devices=[4,2]<=[2,2]T(1,0)}
        }

    **Good**::

        ENTRY e {
          ROOT p = f32[8,8] parameter(0), sharding={devices=[4,2]<=[2,4]T(1,0)}
        }
    """

    code = "HS102"
    name = "malformed-tile-assignment"
    severity = "error"
    groups = ("validity",)
    text_only = True

    def evaluate(self, context):
        yield from site_findings(self, context)
