"""Ties: an entry output that is the next value of an entry parameter (a training step's state).

One tie set per module (:func:`module_ties`): its ``input_output_alias`` pairs (donated), ``solve --tie``
(:func:`parse_tie`, ``--tie matching``: :func:`matching_ties`) and ``auto_shard``'s state.  What the cost
graph makes of them (one solver node, or a paid edge) is :mod:`hloshard.autoshard.aliases`'; the pieces
here read only the module, so that a command's options (``--tie``) need no cost-graph import.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError, UsageError
from ..hlo.attributes import AttrError, parse_buffer_donor

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


def _subshape(shape, index: tuple):
    """The sub-shape of ``shape`` at ShapeIndex ``index``, or None when it does not exist."""
    cur = shape
    for i in index:
        if not cur.is_tuple or not 0 <= i < len(cur.tuple_shapes):
            return None
        cur = cur.tuple_shapes[i]
    return cur


def _array_indices(shape, prefix: tuple = ()) -> list:
    """ShapeIndex of every array leaf of ``shape``, in pre-order (XLA's ``ForEachSubshape`` order)."""
    if shape.is_tuple:
        return [i for k, e in enumerate(shape.tuple_shapes) for i in _array_indices(e, prefix + (k,))]
    return [prefix] if shape.is_array else []


def donor_aliases(module) -> list:
    """The module's ``buffer_donor`` parameters paired with the outputs whose buffers they become, as
    ``input_output_alias`` lists them: ``[(output_index, param_number, param_index)]``.

    ``buffer_donor`` (what jax writes for ``donate_argnums`` of sharded arguments) names donated input
    buffers without saying which output reuses each; XLA's ``OptimizeInputOutputBufferAlias`` pass
    decides: each donor, in order, takes the first output array (pre-order) of the same shape (dims and
    element type; here before partitioning: a tie gives both one layout) that neither an
    ``input_output_alias`` pair nor an earlier donor took.  A donor with no such output is donated for
    nothing (no pair).  Arrays only; a donor naming no array of its parameter gives no pair.  ``[]``
    without the attribute or with text XLA's parser refuses."""
    text = getattr(module, "attrs", {}).get("buffer_donor")
    try:
        donors = parse_buffer_donor(str(text)) if text else []
    except AttrError:
        return []
    entry = getattr(module, "entry", None)
    root = getattr(entry, "root", None)
    if not donors or root is None:
        return []
    params = {p.parameter_number: p for p in entry.parameters}
    try:
        taken = {tuple(o) for o, _p, _pi in module.input_output_alias}
    except Exception:  # noqa: BLE001
        taken = set()
    outputs = [(i, _subshape(root.shape, i)) for i in _array_indices(root.shape)]
    pairs = []
    for pnum, pindex in donors:
        prm = params.get(pnum)
        sub = _subshape(prm.shape, pindex) if prm is not None else None
        if sub is None or not sub.is_array:
            continue
        for oi, osh in outputs:
            if oi in taken or osh.element_type != sub.element_type or tuple(osh.dims) != tuple(sub.dims):
                continue
            taken.add(oi)
            pairs.append((oi, pnum, tuple(pindex)))
            break
    return pairs


def donated_aliases(module) -> list:
    """Every output that reuses a donated parameter buffer: the ``input_output_alias`` pairs, then the
    ``buffer_donor`` pairs (:func:`donor_aliases`), as ``[(output_index, param_number, param_index)]``
    -- THE donation set the memory model frees and ``module_ties`` ties."""
    try:
        pairs = [(tuple(o), int(p), tuple(pi)) for o, p, pi in module.input_output_alias]
    except Exception:  # noqa: BLE001
        pairs = []
    return pairs + donor_aliases(module)


def _leaf_sharding(instr, index: tuple):
    """The written sharding of the array at ShapeIndex ``index`` of ``instr`` (its tuple element's for a
    tuple sharding), without metadata; None when unwritten or not an array sharding."""
    sh = getattr(instr, "sharding", None)
    if sh is None or isinstance(sh, str):
        return None
    if getattr(sh, "is_tuple", False):
        k = _flat_leaf(instr.shape, index)
        elems = sh.tuple_elements
        if k >= len(elems):
            return None
        sh = elems[k]
    return sh.without_metadata()


def donors_as_aliases(module) -> dict | None:
    """The module's header attributes with its ``buffer_donor`` written as the ``input_output_alias``
    pairs XLA makes of it (:func:`donor_aliases`; the module's own pairs kept first), for the XLA
    reference hloshard compiles from text (``cost --xla``, ``plan.xla()``): jaxlib's HLO -> StableHLO
    route drops ``buffer_donor`` (measured, fresh35 finding 2: alias 0 where ``jax.jit`` of the same
    module frees 133,636 B per device), while it keeps ``input_output_alias``.  Only pairs whose output and
    parameter carry the same written sharding (XLA pairs equal per-device shapes; a plan that
    leaves a donated leaf in another layout donates it for nothing).  None when the module has no
    ``buffer_donor`` pair to write."""
    entry = module.entry
    params = {p.parameter_number: p for p in entry.parameters}
    pairs = []
    for o, p, pi in donor_aliases(module):
        a, b = _leaf_sharding(entry.root, o), _leaf_sharding(params[p], pi)
        if a is not None and b is not None and a == b:
            pairs.append((o, p, pi))
    if not pairs:
        return None
    try:
        pairs = [(tuple(o), int(p), tuple(pi)) for o, p, pi in module.input_output_alias] + pairs
    except Exception:  # noqa: BLE001
        pass

    def idx(t):
        return "{" + ",".join(str(x) for x in t) + "}"

    text = "{ " + ", ".join(f"{idx(o)}: ({p}, {idx(pi)}, may-alias)" for o, p, pi in pairs) + " }"
    out = {}
    for k, v in module.attrs.items():
        if k == "buffer_donor":
            out["input_output_alias"] = text
        elif k != "input_output_alias":
            out[k] = v
    return out


def module_ties(module) -> list:
    """The module's ties: its ``input_output_alias`` pairs and its ``buffer_donor`` parameters paired
    with their outputs (:func:`donor_aliases`; not for an output ``module.ties`` ties already), all donated,
    then ``module.ties``."""
    try:
        pairs = module.input_output_alias
    except Exception:  # noqa: BLE001
        pairs = []
    out = [Tie(tuple(o), int(p), tuple(pi), "tie", True, "input_output_alias") for o, p, pi in pairs or []]
    given = list(getattr(module, "ties", None) or [])
    named = {tuple(t.output) for t in given}   # a caller's tie of the same output (auto_shard's donated state) wins
    out += [Tie(o, p, pi, "tie", True, "buffer_donor") for o, p, pi in donor_aliases(module) if o not in named]
    return out + given


def tie_words_of(tie: Tie) -> str:
    """How ``tie`` is named in messages: ``--tie 1=0`` for a ``--tie``, else its source and indices."""
    if tie.source == "--tie":
        return f"--tie {','.join(map(str, tie.output))}={','.join(map(str, (tie.param,) + tuple(tie.param_index)))}"
    return (f"{tie.source} {{{','.join(map(str, tie.output))}}} <-> parameter {tie.param} "
            f"{{{','.join(map(str, tie.param_index))}}}")


def _flat_leaf(shape, index: tuple) -> int:
    """Flat leaf index (pre-order, as tuple shardings list them) of the sub-shape at ShapeIndex ``index``."""
    flat = 0
    cur = shape
    for i in index:
        flat += sum(len(s.leaves()) for s in cur.tuple_shapes[:i])
        cur = cur.tuple_shapes[i]
    return flat


def _sub_leaves(shape, index: tuple, what: str) -> tuple[int, list]:
    """(first flat leaf, the leaf shapes) of the sub-shape at ``index``; UsageError when it does not exist."""
    cur = shape
    for i in index:
        if not cur.is_tuple or not 0 <= i < len(cur.tuple_shapes):
            # the shape in a few words: a train step's root tuple has hundreds of elements (new user 20:
            # 5,000 characters of tuple in one error line)
            where = (f"a tuple of {len(cur.tuple_shapes)} elements (valid indices 0..{len(cur.tuple_shapes) - 1})"
                     if cur.is_tuple else f"the array {cur}, which has no elements to index")
            text = str(shape)
            whole = f" of {text}" if len(text) <= 120 else ""
            raise UsageError(f"{what}: index {{{','.join(map(str, index))}}} does not exist: at that level the shape "
                             f"is {where}{whole if cur is shape else ''}")
        cur = cur.tuple_shapes[i]
    return _flat_leaf(shape, index), cur.leaves()


def _shape_text(leaves) -> str:
    return str(leaves[0]) if len(leaves) == 1 else "(" + ", ".join(map(str, leaves)) + ")"


def check_tie(module, tie: Tie) -> tuple[int, list, int, list]:
    """The one validity rule of a tie, read from the module alone (no cost graph): ``(first output leaf, the
    output's leaf shapes, first parameter leaf, the parameter's leaf shapes)`` (flat leaf indices in
    pre-order).  Raises UsageError (a ``--tie`` / ``state`` tie with a bad mode, naming no parameter or no
    output element, or tying different shapes or types) or InputError (an ``input_output_alias`` naming
    nothing; XLA's verifier judges an alias's shapes itself, so those are not compared here).  Called by the
    commands as soon as the module is parsed (:func:`hloshard.commands.options.apply_ties`: new user 33 F11, a
    bad ``--tie`` was found only after an 85 s cost-graph build) and by the build
    (:mod:`hloshard.autoshard.aliases`)."""
    entry = module.entry
    alias = tie.source == "input_output_alias"
    err = InputError if alias else UsageError
    what = tie_words_of(tie)
    if tie.mode not in TIE_MODES:
        raise UsageError(f"{what}: mode {tie.mode!r} is not one of {', '.join(TIE_MODES)}")
    params = {p.parameter_number: p for p in entry.parameters}
    param = params.get(tie.param)
    if param is None:
        raise err(f"{what}: parameter {tie.param} does not exist" if alias else
                  f"{what}: the entry computation has no parameter {tie.param} (parameters 0-{len(params) - 1})")
    try:
        ol0, oleaves = _sub_leaves(entry.root.shape, tie.output, f"{what}: output")
        pl0, pleaves = _sub_leaves(param.shape, tie.param_index, f"{what}: parameter {tie.param}")
    except UsageError as exc:
        raise err(str(exc)) from None
    same = len(oleaves) == len(pleaves) and all(
        a.element_type == b.element_type and tuple(a.dims) == tuple(b.dims) for a, b in zip(oleaves, pleaves))
    if not same and not alias:   # XLA's verifier judges an alias itself: the leaves that agree are paired
        raise UsageError(f"{what}: the output is {_shape_text(oleaves)} but the parameter is "
                         f"{_shape_text(pleaves)}: a tie needs the same shape and type")
    return ol0, oleaves, pl0, pleaves


def check_ties(module) -> None:
    """:func:`check_tie` for every tie of :func:`module_ties` (raises on the first bad one)."""
    for tie in module_ties(module):
        check_tie(module, tie)
