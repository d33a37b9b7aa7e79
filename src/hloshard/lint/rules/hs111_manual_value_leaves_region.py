from __future__ import annotations

from ...hlo.manual import manual_region_problems
from ..rule import Rule


class ManualValueLeavesRegion(Rule):
    """A manually sharded value (``{manual}`` or a manual subgroup) read where XLA's SPMD partitioner aborts.

    The value is read by an instruction annotated with another sharding than its own manual kind, or by the
    entry's output left unannotated, without ``SPMDShardToFullShape`` (``shard_map``'s end) between them.

    XLA's partitioner does not refuse such a module with a message: it aborts the process with a C++ CHECK
    (``Check failed: !IsManualLeaf() && !IsUnknownLeaf()``, or ``target.IsManualSubgroup() ==
    sharding().IsManualSubgroup()`` for a partly manual value), so ``jax.jit`` of it dies without a Python error.
    ``solve``, ``cost`` and the other commands refuse such a module with the same words (exit 2); the rule is
    :func:`hloshard.hlo.manual.manual_region_problems`, checked against XLA in
    ``tests/test_manual_regions_oracle.py``.  A ``{manual}`` sharding written by mistake on a parameter (new
    user 36: an MLP bias) shows here.

    **Bad**::

        HloModule m, num_partitions=8
        ENTRY e {
          w = f32[8,16] parameter(0), sharding={devices=[8,1]<=[8]}
          b = f32[8,16] parameter(1), sharding={manual}
          ROOT a = f32[8,16] add(w, b), sharding={devices=[8,1]<=[8]}
        }

    **Good**::

        HloModule m, num_partitions=8
        ENTRY e {
          w = f32[8,16] parameter(0), sharding={devices=[8,1]<=[8]}
          b = f32[1,16] parameter(1), sharding={manual}
          f = f32[8,16] custom-call(b), custom_call_target="SPMDShardToFullShape", sharding={devices=[8,1]<=[8]}
          ROOT a = f32[8,16] add(w, f), sharding={devices=[8,1]<=[8]}
        }
    """

    code = "HS111"
    name = "manual-value-leaves-region"
    severity = "error"
    groups = ("validity",)

    def evaluate(self, context):
        module = context.module
        if module is None or not context.spmd or module.entry.name.endswith("_spmd"):
            return
        for p in manual_region_problems(module, context.partitioned_computations):
            yield self.finding(context, p.instr, p.message)
