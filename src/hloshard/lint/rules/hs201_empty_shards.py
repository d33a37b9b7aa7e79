from __future__ import annotations

from ..geometry import NAMED_SHARDS, all_uneven_splits
from ..rule import Rule


def _devices(devs) -> str:
    return ",".join(map(str, devs)) if len(devs) <= 8 else ",".join(map(str, devs[:8])) + ",..."


class EmptyShards(Rule):
    """A tensor dim is split so that some devices hold no data along it (empty shards).

    XLA gives every tile ``ceil(N/d)`` elements of a dim of size N split d ways, so the last tiles
    are short, and when ``i * ceil(N/d) >= N`` tile i is *empty*: its devices allocate a padded
    buffer and compute on padding only. This happens when the dim is smaller than the split
    (N=3, d=4) but also above it (N=5, d=4 gives 2,2,1,0). The finding names the empty shards and
    the devices that hold them (the first 8 of them; a split of millions of ways is described by
    its numbers without walking the shards).

    **Bad**::

        ENTRY e {
          ROOT p = f32[3,128] parameter(0), sharding={devices=[4,1]<=[4]}
        }

    **Good**::

        ENTRY e {
          ROOT p = f32[3,128] parameter(0), sharding={devices=[1,4]<=[4]}
        }
    """

    code = "HS201"
    name = "empty-shards"
    severity = "warning"
    groups = ("divisibility",)

    def evaluate(self, context):
        for site, leaf_shape, split in all_uneven_splits(context):
            if not split.num_empty:
                continue
            where = f"tuple leaf {split.leaf} ({leaf_shape})" if site.instruction.shape.is_tuple else str(leaf_shape)
            named = []
            for i in split.empty[:NAMED_SHARDS]:
                devs = split.devices_of(i)
                named.append(f"shard {i}" + (f" (devices {_devices(devs)})" if devs is not None else ""))
            shards = "; ".join(named)
            if split.num_empty > NAMED_SHARDS:
                shards += f"; and {split.num_empty - NAMED_SHARDS} more"
            held = split.held_text()
            yield self.finding(
                context, site,
                f"%{site.instruction.name} {where}: dim {split.dim} (size {split.size}) is split "
                f"{split.ways} ways; with ceil tiling ({split.per_shard} per shard: {held}) "
                f"{split.num_empty} shard{'s are' if split.num_empty > 1 else ' is'} empty: {shards}",
                key=f"{split.leaf}:{split.dim}")
