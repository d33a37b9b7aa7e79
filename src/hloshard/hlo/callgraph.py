"""Flattening the call graph: one computation per call site of ``while`` / ``call`` / ``conditional``.

XLA partitions every call site on its own: ``CallInliner`` inlines each ``call`` before the SPMD
partitioner runs (checked with the oracle: two calls of one computation on operands sharded
``[8,1]`` and ``[1,8]`` come out of ``spmd-partitioning`` as two inlined copies, each partitioned
its own way; hloshard inlines them too, :func:`hloshard.hlo.inline.inline_calls`, before this runs,
so the calls left here are those XLA keeps), and ``FlattenCallGraph`` clones a while body / branch
reached from several sites.  The
cost graph does the same (:func:`flatten_call_graph` before building): each site's computation is
costed with that site's execution count and gets its own shardings, which the written module
carries in the clones.  Fusion bodies and reducers (``to_apply`` of reduce, sort comparators ...)
are not cloned: they are priced with their caller and never carry shardings of their own.
"""

from __future__ import annotations

from .ir import Computation, Instruction
from .attributes import COMPUTATION_KEYS, COMPUTATION_LIST_KEYS

#: the opcodes whose called computations run as program parts (cloned per call site)
CONTROL_FLOW_OPCODES = ("while", "call", "conditional")


def _sites(instr) -> list[tuple[str, int | None, Computation]]:
    """(attribute key, list index or None, computation) for each computation ``instr`` calls."""

    out = []
    for k, v in instr.attrs.items():
        if k in COMPUTATION_KEYS and isinstance(v, Computation):
            out.append((k, None, v))
        elif k in COMPUTATION_LIST_KEYS:
            out.extend((k, j, c) for j, c in enumerate(v) if isinstance(c, Computation))
    return out


def clone_computation(comp: Computation, name: str, suffix: str, taken: set) -> Computation:
    """A copy of ``comp`` called ``name`` (added to the module right after ``comp``): every instruction
    copied with its attributes (called computations shared, control predecessors mapped) and renamed
    ``<name><suffix>`` (module-wide unique against ``taken``, which is updated)."""
    module = comp.parent
    new = Computation(name, is_entry=False)
    new.has_signature = comp.has_signature
    new.execution_thread = comp.execution_thread
    mapping: dict[int, Instruction] = {}
    for instr in comp.instructions:
        nm = instr.name + suffix
        while nm in taken:
            nm += "_"
        taken.add(nm)
        attrs = dict(instr.attrs)
        cps = attrs.get("control-predecessors")
        clone = Instruction(nm, instr.opcode, instr.shape, [mapping[id(o)] for o in instr.operands], attrs,
                            literal=instr.literal, parameter_number=instr.parameter_number,
                            line=instr.line, column=instr.column, ignore_codes=instr.ignore_codes)
        if cps:
            clone.attrs["control-predecessors"] = [mapping[id(p)] for p in cps]
        mapping[id(instr)] = clone
        new.add_instruction(clone)
    new.root = mapping[id(comp.root)] if comp.root is not None else None
    idx = module.computations.index(comp)
    nxt = module.computations[idx + 1] if idx + 1 < len(module.computations) else None
    module.add_computation(new, before=nxt)
    return new


#: at most this many instructions are created by cloning (nested sharing grows exponentially: a
#: hostile module must not exhaust memory); beyond it computations stay shared
MAX_CLONED_INSTRUCTIONS = 1_000_000


def flatten_call_graph(module, warnings: list | None = None,
                       max_instructions: int = MAX_CLONED_INSTRUCTIONS) -> list[tuple[str, str]]:
    """Clone every computation that ``while`` / ``call`` / ``conditional`` instructions reach from more
    than one call site (counting the sites in computations reachable from the entry, clones
    included), so that each site has its own; the first site in text order keeps the original.  The
    module is changed in place; returns ``(original, clone)`` name pairs in creation order.

    Order: callers before callees (a clone's callees become shared and are cloned in turn).  When the
    clones would exceed ``max_instructions`` instructions in all, the remaining computations stay
    shared (one sharding for all their sites, costed with the summed execution count) and a message
    naming them is appended to ``warnings``."""
    created: list[tuple[str, str]] = []
    if module.entry is None:
        return created
    budget = int(max_instructions)
    taken = {i.name for i in module.all_instructions()}
    names = {c.name for c in module.computations}
    done: set[int] = set()
    # repeat until no computation is reached from two sites (clones add sites for their callees)
    while True:
        order = reverse_post_order(module)
        reached = {id(c) for c in order}
        sites: dict[int, list] = {}
        for comp in module.computations:       # sites in text order: the first one keeps the original
            if id(comp) not in reached:
                continue
            for instr in comp.instructions:
                if instr.opcode in CONTROL_FLOW_OPCODES:
                    for key, j, callee in _sites(instr):
                        sites.setdefault(id(callee), []).append((instr, key, j, callee))
        target = next((c for c in order if len(sites.get(id(c), ())) > 1 and id(c) not in done), None)
        if target is None:
            return created
        done.add(id(target))
        extra = sites[id(target)][1:]
        if len(extra) * len(target.instructions) > budget:
            if warnings is not None:
                warnings.append(f"computation {target.name} is called from {len(extra) + 1} sites; cloning it "
                                f"per site would exceed {max_instructions:,} instructions, so its sites share "
                                f"one sharding (costed with their summed execution count)")
            continue
        budget -= len(extra) * len(target.instructions)
        for n, (instr, key, j, callee) in enumerate(extra, start=1):
            name = f"{callee.name}.clone{n}"
            while name in names:
                name += "_"
            names.add(name)
            clone = clone_computation(callee, name, f".clone{n}", taken)
            if j is None:
                instr.attrs[key] = clone
            else:
                lst = list(instr.attrs[key])
                lst[j] = clone
                instr.attrs[key] = type(instr.attrs[key])(lst) if isinstance(instr.attrs[key], tuple) else lst
            created.append((callee.name, clone.name))


def reverse_post_order(module) -> list[Computation]:
    """Computations reached from the entry through control flow, callers before callees."""
    seen: set[int] = set()
    post: list[Computation] = []
    seen.add(id(module.entry))

    def callees(comp):
        out = []
        for instr in comp.instructions:
            if instr.opcode in CONTROL_FLOW_OPCODES:
                out.extend(c for _, _, c in _sites(instr))
        return out

    stack = [(module.entry, iter(callees(module.entry)))]
    while stack:
        comp, it = stack[-1]
        nxt = next(it, None)
        if nxt is None:
            stack.pop()
            post.append(comp)
        elif id(nxt) not in seen:
            seen.add(id(nxt))
            stack.append((nxt, iter(callees(nxt))))
    return list(reversed(post))
