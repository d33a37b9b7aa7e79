"""What a written module must pin so that XLA's partitioner realizes the strategies the solver chose.

A sharding names an instruction's result layout, not the strategy that produced it.  For most ops XLA
reshards the operands to the layout the result needs, which is what the cost graph's edges price.  A
dot or a convolution is different: XLA's handler looks at its operands' layouts and, e.g., keeps a
contracting split both operands share (an all-reduce) where the solver planned to reshard an operand
and compute without one (``registry._realized``, measured in tests/test_handlers_dot.py).  Pinning
each such operand with a ``copy`` that carries the layout the chosen strategy requires makes XLA do the
planned resharding (on the copy) and then partition the op with its operands exactly as planned.

Measured (tests/test_realize_oracle.py, raw after-spmd-partitioning ring bytes): on a 2x4 mesh the
solved ``mlp_train_step`` moves 0.84 MB unpinned and 0.17 MB pinned (GSPMD's plan: 0.84 MB), and the
pinned module's ``hloshard cost`` equals the solver's own objective; the solved MaxText step of the
corpus (8 devices) moves 2,628.7 MB unpinned (as GSPMD's plan) and 2,488.9 MB pinned, and compiles.

Public API (for the apply step)::

    operand_pins(nodes, choice, ctx) -> list[Pin]     # which operand edges to pin, with which layout
    insert_pins(pins) -> int                          # add the copies to the IR (returns how many)
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import TOKEN, LeafRef, is_array, is_mesh_spec

#: ops whose partitioning XLA decides from its operands' layouts (measured: dot, convolution, and a
#: scatter-add whose split updates XLA all-reduces into the table where the plan gathers them; a fusion
#: computing a dot gets the dot handler's strategies; gather has the same index-parallel choice)
PINNED_OPS = frozenset(("dot", "convolution", "fusion", "scatter", "gather"))


@dataclass(frozen=True)
class Pin:
    """Operand ``index`` of ``user`` must be given in ``sharding`` (an HloSharding)."""

    user: object
    index: int
    sharding: object


def operand_pins(nodes, choice, ctx) -> list:
    """The pins a choice needs: for each node of an op in :data:`PINNED_OPS`, each array operand whose
    chosen layout differs from the one the node's chosen strategy requires.  ``nodes``: the cost
    graph's StrategyGroups (node order), ``choice``: a strategy index per node, ``ctx``: the
    BuildContext.  Deterministic (node order, then operand order)."""
    minfo = ctx.minfo
    pins = []
    for v, g in enumerate(nodes):
        instr = g.instr
        if instr.opcode not in PINNED_OPS or g.operands is not None:
            continue
        st = g.strategies[int(choice[v])]
        for k, op in enumerate(instr.operands):
            req = st.inputs[k] if k < len(st.inputs) else None
            if req is None or isinstance(op, LeafRef) or not is_array(op.shape) or op.shape.is_tuple:
                continue
            r = ctx.resolve(op, 0)
            if r is TOKEN:
                continue
            src_group, leaf = r
            src_st = src_group.strategies[int(choice[src_group.node])]
            src = src_st.out if leaf is None else src_st.out[leaf]
            if is_mesh_spec(src) and is_mesh_spec(req) and src == req:
                continue
            rank = len(op.shape.dims)
            want = minfo.to_sharding(req, rank)
            if minfo.to_sharding(src, rank) == want:
                continue
            pins.append(Pin(instr, k, want))
    return pins


def insert_pins(pins) -> int:
    """Insert, before each pinned user, ``NAME.pin = copy(operand), sharding=<pin>`` and use it as the
    operand (one copy per distinct operand and layout per computation).  Returns the copies added."""
    from ..hlo.ir import Instruction

    made: dict = {}
    for pin in pins:
        op = pin.user.operands[pin.index]
        comp = pin.user.parent
        key = (id(comp), id(op), str(pin.sharding))
        cp = made.get(key)
        if cp is None:
            cp = Instruction(op.name + ".pin", "copy", op.shape, [op])
            cp.sharding = pin.sharding
            comp.add_instruction(cp, before=_first_user(comp, op, pin.user))
            made[key] = cp
        ops = list(pin.user.operands)
        ops[pin.index] = cp
        pin.user.set_operands(ops)
    return len(made)


def _first_user(comp, op, default):
    """The earliest instruction of ``comp`` using ``op`` (the copy goes before it)."""
    users = {id(u) for u in op.users}
    for instr in comp.instructions:
        if id(instr) in users:
            return instr
    return default
