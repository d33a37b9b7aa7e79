"""Ties: an entry output that is the next value of an entry parameter (a training step's state).

One tie set per module (:func:`module_ties`): its ``input_output_alias`` pairs (donated), ``solve --tie``
(:func:`parse_tie`, ``--tie matching``: :func:`matching_ties`) and ``auto_shard``'s state.  What the cost
graph makes of them (one solver node, or a paid edge) is :mod:`hloshard.autoshard.aliases`'; the pieces
here read only the module, so that a command's options (``--tie``) need no cost-graph import.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UsageError

TIE_MODES = ("tie", "pay")


@dataclass(frozen=True)
class Tie:
    """Entry output ``output`` (a ShapeIndex into the root: ``(1,)`` is element 1 of the root tuple,
    ``()`` the whole root) is the next value of parameter ``param`` at ``param_index`` (a ShapeIndex,
    ``()`` the whole parameter).  ``mode``: ``"tie"`` (same sharding, one decision) or ``"pay"`` (the
    objective pays the resharding back); ``donated``: the input buffer may be freed / reused for the
    output (``input_output_alias``, ``donate_argnums``); ``source``: where the tie came from
    (``"input_output_alias"``, ``"--tie"``, ``"donate"``, ``"state"``, ``"path"``), for messages."""

    output: tuple
    param: int
    param_index: tuple = ()
    mode: str = "tie"
    donated: bool = False
    source: str = "tie"


@dataclass(frozen=True, eq=False)
class TiedPair:
    """One tied array leaf in the cost graph (``graph.ties``): the output's node and leaf (flat leaf of
    the entry root), the parameter's node, number and flat leaf, the :class:`Tie` it comes from, and
    ``mapping``: for each strategy of ``output_node`` the strategy of ``param_node`` with the same
    sharding (-1: none), or None when some sharding has several parameter strategies (no merge)."""

    output_node: int
    param_node: int
    output_leaf: int
    param: int
    param_leaf: int
    tie: Tie
    mapping: object = None

    @property
    def donated(self) -> bool:
        return self.tie.donated

    @property
    def mode(self) -> str:
        return self.tie.mode


def parse_tie(text: str) -> Tie:
    """``OUTPUT_INDEX=PARAM_NUMBER`` (``solve --tie``): output element ``OUTPUT_INDEX`` of the root
    tuple (``1,0`` for a nested element) ties parameter ``PARAM_NUMBER`` (``2`` or ``2,1`` for an element
    of a tuple parameter).  Raises UsageError for anything else."""
    left, sep, right = str(text).partition("=")

    def index(part: str, what: str) -> tuple:
        items = [x.strip() for x in part.strip().strip("{}").split(",")]
        if not part.strip() or not all(x.isdigit() for x in items):
            raise UsageError(f"--tie {text!r}: {what} must be a non-negative integer (or a comma-separated "
                             f"index), as in --tie 1=0")
        return tuple(int(x) for x in items)

    if not sep:
        raise UsageError(f"--tie {text!r}: expected OUTPUT_INDEX=PARAM_NUMBER, as in --tie 1=0")
    out, par = index(left, "OUTPUT_INDEX"), index(right, "PARAM_NUMBER")
    return Tie(output=out, param=par[0], param_index=par[1:], source="--tie")


def matching_pairs(module) -> list:
    """``(output_index, parameter_number)`` for each top-level array output of the entry root tuple that
    has the shape and dtype (the same shape text) of an entry array parameter, each paired with the
    first unpaired such parameter in parameter order (a training step's ``(loss, new_params, new_opt)``
    returns its state in the order it takes it: jax flattens both pytrees alike).  ``[]`` when the root
    is not a tuple.  The rule of ``solve --tie matching`` and of its untied-state note."""
    root = module.entry.root
    if not root.shape.is_tuple:
        return []
    params = sorted((p for p in module.entry.parameters if p.shape.is_array), key=lambda p: p.parameter_number)
    used: set = set()
    pairs = []
    for j, sub in enumerate(root.shape.tuple_shapes):
        if not sub.is_array:
            continue
        p = next((p for p in params if p.parameter_number not in used and str(p.shape) == str(sub)), None)
        if p is not None:
            used.add(p.parameter_number)
            pairs.append((j, p.parameter_number))
    return pairs


def matching_ties(module) -> list:
    """``solve --tie matching``: a :class:`Tie` for each pair of :func:`matching_pairs`."""
    return [Tie(output=(j,), param=q, source="--tie matching") for j, q in matching_pairs(module)]


def module_ties(module) -> list:
    """The module's ties: its ``input_output_alias`` pairs (donated) then ``module.ties``."""
    try:
        pairs = module.input_output_alias
    except Exception:  # noqa: BLE001
        pairs = []
    out = [Tie(tuple(o), int(p), tuple(pi), "tie", True, "input_output_alias") for o, p, pi in pairs or []]
    return out + list(getattr(module, "ties", None) or [])
