from __future__ import annotations

from ..geometry import all_uneven_splits
from ..rule import Rule


class UnevenSharding(Rule):
    """A tensor dim is not divisible by the number of ways it is split, so shards are padded.

    With XLA's ceil tiling every device allocates ``ceil(N/d)`` elements along a dim of size N
    split d ways; the short trailing shards are padded, the partitioner inserts masking (pads,
    selects) around reductions and halo exchanges, and collectives move the padding too. The
    finding says how many elements each shard holds and how much padding each short shard
    carries. (Shards left completely empty are reported by HS201 instead.)

    The finding is a warning on what crosses the program's boundary: an entry parameter, the entry
    root, or an operand of the entry root tuple. There the padded layout is the caller's:
    ``jax.jit`` refuses an uneven ``in_shardings`` / ``out_shardings`` (``IndivisibleError``), and
    XLA's auto-sharding keeps inputs and outputs divisible by default
    (``only_allow_divisible_input_output``). Inside the program the partitioner pads and masks, which
    costs bytes and flops but is valid; ``hloshard solve`` writes such splits on purpose when they
    are cheaper (``--max-padding``), so an uneven intermediate is reported at ``info``.

    **Bad**::

        ENTRY e {
          ROOT p = f32[10,128] parameter(0), sharding={devices=[4,1]<=[4]}
        }

    **Good**::

        ENTRY e {
          ROOT p = f32[12,128] parameter(0), sharding={devices=[4,1]<=[4]}
        }
    """

    code = "HS202"
    name = "uneven-sharding"
    severity = "warning"
    groups = ("divisibility",)

    def evaluate(self, context):
        for site, leaf_shape, split in all_uneven_splits(context):
            if split.num_empty:
                continue
            where = f"tuple leaf {split.leaf} ({leaf_shape})" if site.instruction.shape.is_tuple else str(leaf_shape)
            pads = ", ".join(f"shard {i} pads {p}" for i, p in split.short)
            boundary = _at_boundary(site.instruction)
            yield self.finding(
                context, site,
                f"%{site.instruction.name} {where}: dim {split.dim} (size {split.size}) is not divisible "
                f"by {split.ways}; every shard is padded to {split.per_shard} "
                f"(held: {split.held_text()}; {pads}; {split.padding} padding elements in all)"
                + ("" if boundary else "; an intermediate: padded and masked by the partitioner"),
                key=f"{split.leaf}:{split.dim}", severity=None if boundary else "info")


def _at_boundary(instr) -> bool:
    """Whether ``instr`` is an entry parameter, the entry root or an operand of the entry root tuple
    (what a caller passes in or gets back); True when its computation is not known."""
    comp = instr.parent
    if comp is None:
        return True
    if not comp.is_entry:
        return False
    root = comp.root
    return (instr.opcode == "parameter" or instr is root
            or (root is not None and root.opcode == "tuple" and instr in root.operands))
