"""XLA CPU's layout copies around a convolution, and where its operands' reshardings live, on a chosen plan.

Two rules of XLA's CPU backend that the one memory model (:mod:`hloshard.cost.liveness`,
:func:`hloshard.autoshard.build.edge_buffers`) applies to convolutions through this module:

**Canonical transposes** (XLA's ``cpu/conv_canonicalization.cc``, run after SPMD partitioning, so on
per-device shapes).  The CPU convolution emitter takes one dimension order: input ``[batch, spatial...,
feature]``, kernel ``[spatial..., input feature, output feature]``, output ``[batch, spatial...,
feature]`` (``b01f_01io->b01f`` in 2-D).  Every other convolution is rewritten as a ``transpose`` of its
input, a ``transpose`` of its kernel, the canonical convolution and a ``transpose`` of its result back to
the original order.  A transpose that only moves dimensions of extent 1 is a bitcast (no bytes); every
other one is a loop fusion (``transpose_copy_fusion``) with a buffer of its own.  What jax writes:

* forward ``b01f_01io->b01f``: canonical, no copy;
* input gradient ``b01f_01oi->b01f`` (the kernel reversed, its features swapped): the **kernel** is
  copied (reverse and transpose in one fusion);
* kernel gradient ``f01b_i01o->01bf``: the **input** (a forward activation, read as ``[f, 0, 1, b]``), the
  **kernel** operand (the output gradient) and the **result** are copied.

Where the copies live, read in XLA's buffer assignment of new user 34's U-Net (FSDP layout, 8 CPU
devices: ``transpose_copy_fusion.*`` in ``*after_optimizations-live-range.txt``): XLA CPU's breadth-first
scheduler runs a transpose as soon as its operand exists, so an operand copy lives from the operand's
definition to the convolution -- a kernel gradient's transposed activation from the forward pass to the
backward (``transpose_copy_fusion.39``, ``f32[192,6,32,16]``, the halo'd activation of a rows-split
kernel gradient: live 275-316 of 544), an input gradient's transposed kernel from the all-gather at the
start of the program to the backward (``transpose_copy_fusion.24``, ``f32[3,3,256,256]``, 157-397).  The
operand itself is then read by its other readers only: where the convolution was its last reader, its
buffer ends at the last of the others and the copy stands for it after that.  An operand read by nothing
else (and not an entry parameter) is written in the transposed layout by its producer (XLA's layout
assignment, as for a dot's :func:`hloshard.cost.liveness.dot_transposed_operands`): no copy.  Identical
transposes of one value are one copy (``HloCSE``).  The result's copy is made from the canonical result
at once, which dies there: one output tile beside the result while the convolution runs
(:func:`output_copy_bytes`, added to :func:`hloshard.autoshard.build.scratch_bytes`), unless the
strategy all-reduces the result (its partial sums already stand for that second buffer).  A kernel-gradient
strategy that splits a spatial dimension (role "w", :mod:`hloshard.strategy.convolution`) copies the
halo'd tile: the local tile plus the rows its collective-permutes received.

**Reshardings made at their source.**  XLA's partitioner writes a convolution operand's resharding
(all-gather, all-to-all, halo exchange) as collectives that read the operand alone, and the
breadth-first scheduler runs them as soon as the operand exists: the resharded buffer (and its layout
copy) lives from the operand's definition to the convolution, and one resharding per user (the U-Net's
Megatron layout: ``all-gather.3`` and ``all-gather.5`` of one activation for two convolutions and the
layout copy ``wrapped_copy.8`` of the first, ``f32[8,32,32,192]`` each, live together at XLA's peak;
:func:`made_at_source`).  Users that XLA's reshard cache serves from one collective share it
(:mod:`hloshard.autoshard.reshard_cache`, unchanged).

Both are XLA CPU's (the memory model's default backend): with a TPU profile
(``graph.memory_device``) nothing here applies (the TPU compiler assigns convolution layouts itself and
schedules with its own scheduler).  Batch-grouped convolutions (a depthwise kernel gradient) are left to
:mod:`hloshard.cost.group_conv` (the group converter runs first and makes its own copies).
"""

from __future__ import annotations

from ..cost.group_conv import batch_groups
from ..cost.liveness import ELEMENTWISE, EXPENSIVE, FUSING_CONSUMERS, effective_users, made_at_entry_start, read_until
from ..strategy.base import TOKEN
from ..strategy.convolution import parse_dim_labels

__all__ = ["canonical_orders", "transposed_operands", "transposed_output", "output_copy_bytes",
           "made_at_source", "source_of", "copy_sites", "copy_bytes", "conv_copies"]


def canonical_orders(instr) -> tuple | None:
    """The dimension orders XLA CPU's ``ConvCanonicalization`` transposes a convolution's input, kernel and
    result into: ``(lhs, rhs, out)``, each the operand's (result's) dimension numbers in canonical order
    (input / result ``[batch, spatial..., feature]``, kernel ``[spatial..., i, o]``, spatial dims in the
    order of the result's spatial labels).  None for another opcode, unparsable ``dim_labels``, a
    batch-grouped convolution (:mod:`hloshard.cost.group_conv`) or a spatial label missing from an operand."""
    if getattr(instr, "opcode", None) != "convolution" or batch_groups(instr) > 1:
        return None
    labels = parse_dim_labels(instr.attrs.get("dim_labels"))
    if labels is None:
        return None
    lhs_l, rhs_l, out_l = labels
    spatial = [c for c in out_l if c.isdigit()]
    try:
        lhs = tuple([lhs_l.index("b")] + [lhs_l.index(c) for c in spatial] + [lhs_l.index("f")])
        rhs = tuple([rhs_l.index(c) for c in spatial] + [rhs_l.index("i"), rhs_l.index("o")])
        out = tuple([out_l.index("b")] + [out_l.index(c) for c in spatial] + [out_l.index("f")])
    except ValueError:
        return None
    if not (len(lhs) == len(lhs_l) and len(rhs) == len(rhs_l) and len(out) == len(out_l)):
        return None
    return lhs, rhs, out


def _moves_bytes(order, dims) -> bool:
    """True when transposing an array of extents ``dims`` into ``order`` moves data: the dimensions of
    extent > 1 are not already in that order (else the transpose is a bitcast)."""
    kept = [d for d in order if int(dims[d]) > 1]
    return kept != sorted(kept)


def transposed_operands(instr) -> list:
    """Operand numbers (0: input, 1: kernel) of convolution ``instr`` that XLA CPU transposes into a
    buffer of their own (module docstring); empty when none or not a convolution."""
    orders = canonical_orders(instr)
    if orders is None or len(instr.operands) < 2:
        return []
    return [k for k in (0, 1) if instr.operands[k].shape.is_array and
            _moves_bytes(orders[k], instr.operands[k].shape.dims)]


def transposed_output(instr) -> bool:
    """True when XLA CPU computes convolution ``instr`` in canonical order and copies the result back into
    its own order (module docstring)."""
    orders = canonical_orders(instr)
    return orders is not None and instr.shape.is_array and _moves_bytes(orders[2], instr.shape.dims)


def output_copy_bytes(instr, strategy) -> int:
    """Bytes per device beside convolution ``instr``'s result while it runs on XLA CPU under ``strategy``
    (a :class:`~hloshard.strategy.base.Strategy`): the canonical result a transposed copy is made from
    (``strategy.memory``, the per-device result tile), or 0 when the result needs no copy
    (:func:`transposed_output`) or when the strategy ends in a collective (an all-reduce of partial
    sums): its other side (:func:`hloshard.autoshard.build.scratch_bytes`) already stands for the second
    buffer -- XLA makes the canonical result, its transposed copy, then the collective's result, never
    three at once (measured, 8 CPU devices, ``tests/test_conv_copies.py``: a batch-split kernel
    gradient's canonical result sits in its output's allocation)."""
    if not transposed_output(instr) or getattr(strategy, "collectives", None):
        return 0
    return int(strategy.memory)


def made_at_source(graph, consumer) -> bool:
    """True when the resharding of an operand of ``consumer`` is made where the operand is made (module
    docstring: a convolution's operand on XLA CPU), not at the consumer."""
    return consumer.opcode == "convolution" and getattr(graph, "memory_device", None) is None


def source_of(o):
    """``o`` through forwarding copies and reshapes (the value whose buffer the convolution reads)."""
    seen = 0
    while o.opcode in ("copy", "reshape", "bitcast") and o.operands and seen < 64 and \
            not getattr(o, "is_root", False) and o.sharding is None:
        o = o.operands[0]
        seen += 1
    return o


def copy_sites(graph, positions: dict) -> list:
    """The convolution operands XLA CPU may copy into canonical order, for every plan of ``graph``
    (module docstring): ``[(src, order, lo, [(conv, k, group, t), ...])]``, one entry per source value
    and canonical order (HloCSE: one copy per value and order), ``lo`` where the copy is made (the
    source's position, 0 for an entry parameter, None when the source has no position: made at each
    convolution), and per convolution reading it through the copy its
    operand number ``k``, its strategy group and schedule position ``t``.  ``positions``:
    ``id(instruction)`` -> schedule position.  What a plan decides (the bytes, and whether the plan
    reshards the operand, so that no copy of the source is made): :func:`copy_bytes`, :func:`conv_copies`.
    The one list the evaluation (:func:`conv_copies`) and the solver's priced memory
    (:func:`hloshard.autoshard.edgememory.edge_memory_terms`) read.  Empty with a TPU profile."""
    if getattr(graph, "memory_device", None) is not None:
        return []
    entry = graph.module.entry
    sites: dict = {}
    for conv in graph.schedule:
        if conv.opcode != "convolution":
            continue
        t = positions.get(id(conv))
        ks = transposed_operands(conv)
        if t is None or not ks or conv not in graph.ctx.groups:
            continue
        r = graph.ctx.resolve(conv, 0)
        if r is TOKEN:
            continue
        orders = canonical_orders(conv)
        for k in ks:
            src = source_of(conv.operands[k])
            readers = effective_users(src)
            if src.opcode != "parameter" and len(readers) == 1 and readers[0] is conv:
                continue   # its producer writes the transposed layout (XLA's layout assignment)
            lo = 0 if made_at_entry_start(src, entry) else positions.get(id(src))
            key = (id(src), orders[k])
            if key not in sites:
                sites[key] = [src, orders[k], lo, []]
            sites[key][3].append((conv, k, r[0], t))
    return [tuple(v) for v in sites.values()]


def copy_bytes(minfo, conv, k: int, group, strategy, required) -> int:
    """Bytes per device of XLA CPU's canonical copy of operand ``k`` of convolution ``conv`` under
    ``strategy`` (of strategy group ``group``): the operand in the layout the strategy requires
    (``required(group, strategy, operand, 0)``, ``MeshInfo.bytes_per_device``), and for the input of a
    spatially split kernel gradient the halos its collective-permutes received (the halo'd tile is
    copied).  0 when the strategy requires no layout of it."""
    op = conv.operands[k]
    req = required(group, strategy, op, 0)
    try:
        b = int(minfo.bytes_per_device(op.shape, req)) if req is not None else 0
    except (ValueError, TypeError, AttributeError):
        b = 0
    if k == 0 and b > 0:
        b += sum(int(c.nbytes) for c in strategy.collectives or () if c.kind == "collective-permute")
    return b


def conv_copies(graph, choice, positions: dict, required, moved: set) -> list:
    """The canonical-transpose copies of the convolutions' operands under ``choice`` (module docstring),
    as buffers of :func:`hloshard.autoshard.build.edge_buffers`: ``[(conv, k, lo, hi, bytes)]`` (schedule
    interval ``[lo, hi)``, bytes per device).  ``positions``: ``id(instruction)`` -> schedule position;
    ``required(group, strategy, operand, leaf)``: the layout a strategy requires of an operand;
    ``moved``: ``{(id(consumer), id(operand))}`` of the operands the plan reshards for their consumer
    (their copy is made from the resharded buffer as soon as that exists, and the resharded buffer dies
    there: the resharding's buffer, from the source to the convolution (:func:`made_at_source`), stands for
    both; U-Net Megatron layout: ``all-gather.5`` live 216-218, its copy ``transpose_copy_fusion.39``
    218-257).  The sites are :func:`copy_sites`', the bytes :func:`copy_bytes`'.  Empty with a TPU profile."""
    if getattr(graph, "memory_device", None) is not None:
        return []
    minfo = graph.ctx.minfo
    entry = graph.module.entry
    groups: dict = {}   # (id(src), order) -> [conv, k, src, first position, last conv position, bytes]
    readers_via_copy: dict = {}   # id(src) -> ids of the convolutions that read it through a copy
    for src, order, lo, members in copy_sites(graph, positions):
        for conv, k, cg, t in members:
            b = copy_bytes(minfo, conv, k, cg, cg.strategies[int(choice[cg.node])], required)
            if b <= 0:
                continue
            if (id(conv), id(conv.operands[k])) in moved:
                continue   # made from the resharded buffer, which dies there: that buffer stands for it
            key = (id(src), order)
            at = t if lo is None else min(lo, t)
            readers_via_copy.setdefault(id(src), set()).add(id(conv))
            hit = groups.get(key)
            if hit is None:
                groups[key] = [conv, k, src, at, t, b]
            else:
                hit[3], hit[4], hit[5] = min(hit[3], at), max(hit[4], t), max(hit[5], b)
    out = []
    last_copy: dict = {}   # id(src) -> the key of its copy read last
    for key, (conv, k, src, lo, last, b) in groups.items():
        if id(src) not in last_copy or last > groups[last_copy[id(src)]][4]:
            last_copy[id(src)] = key
    for key, (conv, k, src, lo, last, b) in groups.items():
        hi = last + 1
        out.append((conv, k, lo, hi, b))
        if last_copy.get(id(src)) == key and not made_at_entry_start(src, entry):
            # the source's buffer ends at its last reader that is no such copy (nor a loop fusion computing it
            # again, _recomputes); its node interval beyond that is credited back (a negative buffer)
            copied = readers_via_copy.get(id(src), set())
            others = [positions.get(id(u)) if (u.opcode != "convolution" or id(u) not in copied) and
                      not _recomputes(u, src, positions) else None for u in effective_users(src)]
            others = [x for x in others if x is not None]
            end = max(others) + 1 if others else lo + 1
            node = _node(graph, src)
            if node is not None and not src.is_root:
                lo_s, hi_s = (int(x) for x in graph.problem.intervals[node])
                own = int(graph.problem.node_usages[node][int(choice[node])])
                start = max(end, lo_s + 1)
                if own > 0 and hi_s > start:
                    out.append((conv, k, start, hi_s, -own))
    return out


def _recomputes(user, src, positions: dict) -> bool:
    """True when XLA's loop fusion ``user`` computes the cheap elementwise ``src`` again from its operands
    instead of reading its buffer (XLA's fuser duplicates a cheap producer into each fusing consumer):
    ``user`` is a fusing consumer (:data:`hloshard.cost.liveness.FUSING_CONSUMERS`), ``src`` an
    elementwise op that is not expensive, and every operand of ``src`` is an entry parameter or still read
    at or after ``user``.  Read in XLA's buffer assignment of the held-out ResNet's user layout: a ``relu``
    output read by a kernel gradient (through its transposed copy) and by the backward's ``select`` ends at
    the copy; the ``select`` reads the convolution output the ``relu`` was computed from."""
    if user.opcode not in FUSING_CONSUMERS or src.opcode not in ELEMENTWISE or src.opcode in EXPENSIVE:
        return False
    at = positions.get(id(user))
    if at is None:
        return False
    for o in src.operands:
        if o.opcode in ("parameter", "constant"):
            continue
        last = read_until(o, positions)
        if last is None or last < at:
            return False
    return True


def _node(graph, src) -> int | None:
    """The node of ``src``'s value in ``graph`` (None when ``src`` is no single-leaf node of it)."""
    if src not in graph.ctx.groups:
        return None
    r = graph.ctx.resolve(src, 0)
    if r is TOKEN or r[1] is not None:
        return None
    return int(r[0].node)
