"""Applying a choice to the IR: the sharding each instruction gets, written as ``sharding=``.
"""

from __future__ import annotations

from ..hlo.loops import invariant_elements
from ..strategy.base import TOKEN, is_array, leaf_shapes
from ..strategy.control_flow import keeps_whole_state
from ..strategy.realize import keep_invariants
from ..strategy.reshape import folds_onto_tuple
from .graph import Graph
from ..hlo.sharding import HloSharding


def leaf_spec(graph: Graph, instr, leaf: int, choice):
    """The spec (axes tuple or raw HloSharding) leaf ``leaf`` of ``instr`` gets under ``choice``."""
    r = graph.ctx.resolve(instr, leaf)
    if r is TOKEN:
        return None
    g, k = r
    st = g.strategies[int(choice[g.node])]
    return st.out if k is None else st.out[k]



def instruction_sharding(graph: Graph, instr, choice):
    """The HloSharding the choice gives ``instr`` (a tuple sharding for tuple shapes)."""

    minfo = graph.ctx.minfo
    leaves = leaf_shapes(instr.shape)
    elems = []
    for l, s in enumerate(leaves):
        spec = leaf_spec(graph, instr, l, choice) if is_array(s) else None
        if spec is None:
            elems.append(HloSharding.replicated())
        else:
            elems.append(minfo.to_sharding(spec, len(s.dims)))
    if instr.shape.is_tuple:
        return HloSharding.tuple(elems if elems else [HloSharding.replicated()])
    return elems[0]



def _same_sharding(a, b, shape) -> bool:
    try:
        if a == b:
            return True
        if shape.is_tuple and not a.is_tuple and b.is_tuple:
            return all(a == e for e in b.tuple_elements)
    except Exception:  # noqa: BLE001
        return False
    return False



def apply_choice(graph: Graph, choice) -> int:
    """Write ``sharding=`` on every instruction of the processed computations; drop the stale
    ``xla.sdy.sharding`` frontend attribute of each re-annotated instruction.  Returns the count.

    A ``while`` whose body passes some loop-state elements through unchanged
    (:func:`hloshard.hlo.loops.invariant_elements`) gets the sharding of its whole state, and the body
    root reads each such element through a ``Sharding`` custom-call in the loop's layout
    (:func:`hloshard.strategy.realize.keep_invariants`, also without operand pins): on the way into XLA
    through StableHLO (jax, the oracle, ``--xla``) the while canonicalization would otherwise turn those
    elements into captured values and keep the while's tuple sharding at full length, and jaxlib 0.10.2
    aborts compiling (RET_CHECK in hlo_sharding.cc: "Shape ... has 22 leaf nodes while this sharding has
    36" on the MaxText train step, 22 state elements of which 14 invariant).  Exception: a loop with an
    invariant :func:`hloshard.strategy.control_flow.keeps_whole_state` cannot keep (a tuple or a token)
    gets no ``sharding=`` of its own (unless the user's is kept); the cost graph then prices its
    invariants as captured, in the init's layout, and their init values are pinned in it
    (:func:`hloshard.strategy.realize.insert_loop_state_pins`).

    An instruction XLA's StableHLO -> HLO translation removes onto an element of a tuple-shaped producer
    (:func:`hloshard.strategy.reshape.folds_onto_tuple`: an identity reshape, a reshape chain back to its
    start's type, ... of an opt-barrier's element) is written without a sharding (unless the user's is
    kept, or it is a computation's root): XLA would put its array sharding on every element of the tuple,
    rejecting the module where their ranks differ (round 26's held-out remat MLP) and re-laying the tuple
    out where they agree (the MoE layer's topk indices: written replicated, split by a folded reshape's
    sharding)."""
    count = 0
    kept = getattr(graph, "kept", {})
    whiles = []
    for instr in graph.schedule:
        sh = instruction_sharding(graph, instr, choice)
        old = kept.get(instr)
        if old is not None and _same_sharding(old, sh, instr.shape):
            sh = old  # a kept user sharding is written back exactly as the user wrote it
        elif old is None and instr.opcode == "while" and invariant_elements(instr) and \
                not keeps_whole_state(instr):
            sh = None
        elif old is None and not instr.is_root and folds_onto_tuple(instr):
            sh = None  # XLA removes it on the way in and would put its sharding on a whole tuple
        instr.sharding = sh
        if instr.opcode == "while":
            whiles.append(instr)
        fa = instr.attrs.get("frontend_attributes")
        if fa:
            items = list(fa.items()) if isinstance(fa, dict) else list(fa)
            rest = [(k, v) for k, v in items if k != "xla.sdy.sharding"]
            if len(rest) != len(items):
                if rest:
                    instr.attrs["frontend_attributes"] = dict(rest) if isinstance(fa, dict) else tuple(rest)
                else:
                    instr.set_attr("frontend_attributes", None)
        count += 1
    keep_invariants(whiles)
    return count
