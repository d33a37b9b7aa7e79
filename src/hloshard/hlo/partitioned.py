"""Whether an HLO module is already partitioned: a per-device program (XLA's SPMD partitioner's output,
the corpus' train steps) rather than a logical module with sharding annotations.  ``cost``,
``explain``, ``diff`` and ``solve`` price such a module as it runs on every device
(:func:`hloshard.autoshard.evaluate.evaluate_module`); ``lint`` skips the divisibility rules there,
whose shapes are already one device's."""

from __future__ import annotations

__all__ = ["CROSS_PARTITION", "is_per_device_program"]

#: opcodes whose replica groups cross partitions (a per-device program writes them; a logical one does not)
CROSS_PARTITION = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
                   "all-reduce-start", "all-gather-start", "collective-permute-start")


def is_per_device_program(module) -> bool:
    """True when ``module`` is already partitioned: it has a collective across more than one partition,
    no manual region (``{manual}`` or a manual subgroup: shard_map, the one place a logical module
    writes collectives) and no sharding on any instruction but the entry parameters -- the form of
    XLA's ``after_spmd-partitioning`` dumps and the corpus' train steps, whose parameters keep their
    global shardings while every shape is one device's.  A GSPMD module that writes collectives beside
    annotated instructions is a logical module (its annotations are kept).  Shardings inside fusion
    computations do not count: XLA's optimised (compiled) modules keep a fused instruction's attribute
    there (a layout ``copy`` of a parameter, measured on ``jax.jit(...).lower(...).compile().as_text()``),
    and a logical module has no fusions yet.  A scheduled module (``is_scheduled=true``: XLA's compiled
    text, ``compiled.as_text()``) is one whether or not it communicates: XLA schedules after partitioning."""
    if getattr(module, "attrs", {}).get("is_scheduled") == "true":
        return True   # XLA schedules a module after partitioning it: a compiled module runs per device
    has_collective = False
    params = set(module.entry.parameters) if getattr(module, "entry", None) is not None else set()
    fused = {id(c) for i in module.all_instructions() if i.opcode == "fusion" for c in i.called_computations}
    for instr in module.all_instructions():
        s = instr.sharding
        if s is not None and (_manual(s) or (instr not in params and id(instr.parent) not in fused)):
            return False
        if instr.opcode in CROSS_PARTITION and not has_collective:
            groups = getattr(instr, "replica_groups", None)
            has_collective = instr.opcode.startswith("collective-permute") or not groups or \
                any(len(g) > 1 for g in groups)
    return has_collective


def _manual(s) -> bool:
    if getattr(s, "is_tuple", False):
        return any(_manual(e) for e in s.tuple_elements)
    return bool(getattr(s, "is_manual", False) or getattr(s, "has_manual_subgroup", False))
