"""What the TPU compiler's SPMD partitioner is given: a written plan as the TPU pipeline rewrites it first.

The CPU backend partitions a module as written; the TPU compiler (libtpu 0.0.42.1, read off its
``after_tpu-spmd-partitioning`` dumps ahead of time for ``v5e:2x4``) simplifies the module before its
partitioner runs, and one of those rewrites changes what the partitioner moves:

* **a transposed dot is computed transposed** (XLA's algebraic simplifier turns
  ``transpose(dot(a, b))`` into ``dot(b, a)`` when the dot's only user is a transpose that swaps the
  two non-contracting dims of a dot with batch dims first and one non-contracting dim per operand).
  The new dot is derived from the old one -- it keeps the old dot's ``op_name`` **and its sharding**,
  whose tile dims now fall on the swapped dims -- and it replaces the transpose, whose own sharding is
  dropped.  So the partitioner computes the dot with the transpose of its written layout and hands the
  transpose's users the dot's written layout in the transposed dims, resharding there to what they
  read.  Measured on ``samples/transformer_train_step.propagated.hlo`` (GSPMD's plan): each weight
  gradient ``dot(f32[8,128,256] {data}, f32[8,128,1024] {data, model on dim 2})`` written
  ``[1,4]`` over ``model`` and transposed to the ``[4,1]`` its update reads: the CPU partitioner
  all-reduces ``f32[256,256]`` over ``data`` (262,144 ring bytes); the TPU's all-gathers the
  ``f32[4,128,1024]`` operand over ``model``, all-reduces ``f32[4,256,64]`` over ``data`` and
  all-to-alls ``f32[4,256,64]`` over ``model`` (1,835,008 + 196,608 ring bytes) -- 18 such dots, all
  of the 15.9 MB of ring bytes by which the TPU's partitioned program exceeds the CPU's (16.53 MB).

* **on v6e, a dot's computed operand goes first** (:func:`operand_swaps`, :data:`COMPUTED_FIRST_CHIPS`):
  ``dot(w, h)`` with ``w`` read straight from memory and ``h`` computed becomes ``dot(h, w)``, again under
  the written tile dims; a transposed dot whose computed operand is first is not folded there.  Counted
  on libtpu 0.0.42.1's dumps of 37 plans (788 dots): the dots v6e's ``simplification-1`` rewrites, 79,
  and v5e's, 90, are the ones these two rules name, file by file.

:func:`folded_transposes` finds the pairs; :func:`tpu_partitioned_view` returns a copy of the module
with the two shardings as the TPU's partitioner sees them (the dot: its written layout transposed;
the transpose: the dot's written layout), which ``evaluate_module`` then prices as written -- the
dot's operand resharding, its partial sums and the transpose users' resharding are priced by the same
strategies and resharding plans as any other plan.  Only for ``--device tpu-*`` reports
(``DeviceProfile.backend == 'tpu'``); the solver's objective does not use it.  The written plan's transpose
pins read the two predicates (:func:`fold_applies`, :func:`swaps_operands`): on v6e a dot the simplifier swaps
and does not fold gets none (:func:`hloshard.strategy.realize.insert_transpose_pins`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..hlo import parse_module, print_module
from ..hlo.opcodes import ELEMENTWISE_BINARY, ELEMENTWISE_TERNARY, ELEMENTWISE_UNARY
from ..hlo.sharding import HloSharding
from .tpu_layout import lane_use, layout_bytes, minor_pair

#: the TPU chips whose algebraic simplifier puts a dot's computed operand first (:func:`operand_swaps`):
#: read off libtpu 0.0.42.1's ``simplification-1.after_algsimp`` dumps, compiled ahead of time for
#: ``v6e:2x4`` and ``v5e:2x4`` (BENCHMARKS.md round 32, helper tpurows): ``dot(w, h)`` with ``w`` a
#: parameter and ``h`` the result of a dot, a reduce or a dynamic-slice is rewritten ``dot(h, w)`` on v6e
#: and kept on v5e; the same module with the operands the other way round is kept on both.
COMPUTED_FIRST_CHIPS = frozenset({"tpu-v6e"})

#: what a value may pass through and still be read straight from memory (:func:`_read_only`): the
#: elementwise opcodes (fused into the dot's operand read), a type conversion, a bitcast, and the
#: ``Sharding`` custom-call that only annotates.
_PASS_THROUGH = ELEMENTWISE_UNARY | ELEMENTWISE_BINARY | ELEMENTWISE_TERNARY | frozenset(
    {"convert", "bitcast", "bitcast-convert", "reduce-precision"})


def _ints(instr, key: str) -> list[int]:
    v = instr.attrs.get(key)
    if v is None:
        return []
    if isinstance(v, (list, tuple)):
        return [int(x) for x in v]
    text = str(v).strip().strip("{}")
    return [int(x) for x in text.split(",") if x.strip()]


def _swap_perm(dot, transpose) -> list[int] | None:
    """The transpose's permutation when ``transpose(dot)`` is the rewritten form (batch dims first and kept in
    place, the last two output dims -- lhs's and rhs's one non-contracting dim each -- swapped); else None."""
    if dot.opcode != "dot" or len(dot.operands) != 2:
        return None
    lb, lc = _ints(dot, "lhs_batch_dims"), _ints(dot, "lhs_contracting_dims")
    rb, rc = _ints(dot, "rhs_batch_dims"), _ints(dot, "rhs_contracting_dims")
    lrank, rrank = len(dot.operands[0].shape.dims), len(dot.operands[1].shape.dims)
    if lrank - len(lb) - len(lc) != 1 or rrank - len(rb) - len(rc) != 1:
        return None
    nb = len(lb)
    perm = list(transpose.dimensions or [])
    want = list(range(nb)) + [nb + 1, nb]
    return perm if perm == want else None


def fold_applies(dot, transpose, device: str | None = None) -> bool:
    """Whether the TPU's algebraic simplifier computes ``transpose(dot)`` as one transposed dot
    ``dot(b, a)`` before its partitioner runs (module docstring; shardings not read): ``transpose``
    reads ``dot``, ``dot``'s only user, and swaps its two non-contracting output dims (batch dims first,
    one non-contracting dim per operand; :func:`_swap_perm`).  ``device``: a TPU profile's name; on a
    :data:`COMPUTED_FIRST_CHIPS` chip a dot whose computed operand is first and a read-only one second
    (:func:`_read_only`) is not folded (the simplifier keeps the computed operand first).  Source:
    libtpu 0.0.42.1's ``simplification-1.after_algsimp`` dumps, 37 plans, 788 dots (BENCHMARKS.md round
    32, helper tpurows: the dots each chip rewrites are the ones this names, file by file)."""
    if transpose.opcode != "transpose" or len(transpose.operands) != 1 or transpose.operands[0] is not dot:
        return False
    if dot.opcode != "dot" or len(dot.users) != 1 or _swap_perm(dot, transpose) is None:
        return False
    return not (device in COMPUTED_FIRST_CHIPS and _read_only(dot.operands[1])
                and not _read_only(dot.operands[0]))


def folded_transposes(module) -> list[tuple]:
    """``(dot, transpose)`` pairs of ``module`` that the TPU pipeline computes as one transposed dot: the
    transpose's operand is a dot whose only user it is, and it swaps the dot's two non-contracting
    output dims (batch dims first, one non-contracting dim per operand; :func:`fold_applies` on any
    chip), both written with a tiled sharding (a replicated or unannotated one gives the partitioner
    nothing to transpose).  In computation order."""
    out = []
    for comp in module.computations:
        for t in comp.instructions:
            if t.opcode != "transpose" or len(t.operands) != 1:
                continue
            d = t.operands[0]
            if not fold_applies(d, t):
                continue
            s = d.sharding
            if s is None or not getattr(s, "is_tiled", False) or s.has_manual_subgroup or t.sharding is None:
                continue
            out.append((d, t))
    return out


def _read_only(x, depth: int = 0) -> bool:
    """Whether ``x`` is a value that reads only parameters: a parameter (of any computation: a loop
    body's state too), a constant, an iota, a ``get-tuple-element`` of such a value, or an elementwise
    op / conversion / bitcast / ``Sharding`` annotation of such values (:data:`_PASS_THROUGH`).  A dot, a
    reduce, a slice, a reshape, a broadcast of a non-constant or anything else computes it."""
    if depth > 64:
        return False
    op = x.opcode
    if op in ("parameter", "constant", "iota"):
        return True
    if op == "get-tuple-element" or (op == "custom-call" and x.custom_call_target == "Sharding") or \
            op in _PASS_THROUGH:
        return bool(x.operands) and all(_read_only(o, depth + 1) for o in x.operands)
    return False


def _swap_dims(dot) -> list[int] | None:
    """For ``dot(a, b)`` (result dims: batch, a's non-contracting, b's non-contracting), the permutation
    ``perm`` such that ``dot(b, a)``'s result dim i holds the original result's dim ``q[i]``, given as
    its inverse (``transposed_layout(sh, perm)`` lays the original dims out as ``dot(b, a)`` under
    ``sh``).  None when the dot's dims are not given as two operands' batch / contracting lists."""
    if dot.opcode != "dot" or len(dot.operands) != 2:
        return None
    lb, lc = _ints(dot, "lhs_batch_dims"), _ints(dot, "lhs_contracting_dims")
    rb, rc = _ints(dot, "rhs_batch_dims"), _ints(dot, "rhs_contracting_dims")
    lrank, rrank = len(dot.operands[0].shape.dims), len(dot.operands[1].shape.dims)
    nb, na, nr = len(lb), lrank - len(lb) - len(lc), rrank - len(rb) - len(rc)
    if nb != len(rb) or na + nr == 0 or nb + na + nr != len(dot.shape.dims):
        return None
    q = list(range(nb)) + [nb + na + i for i in range(nr)] + [nb + i for i in range(na)]
    inv = [0] * len(q)
    for k, j in enumerate(q):
        inv[j] = k
    return inv


def operand_swaps(module) -> list:
    """The dots of ``module`` that a :data:`COMPUTED_FIRST_CHIPS` chip's algebraic simplifier rewrites
    as ``dot(b, a)`` (a transpose back to the written dims after it): ``dot(a, b)`` whose ``a`` reads
    only parameters (:func:`_read_only`: a weight, a loop's carried value) and whose ``b`` is computed
    (a dot, a reduce, a dynamic-slice ...), written with a tiled sharding.  As with
    :func:`folded_transposes`, the rewritten dot keeps the written sharding's tile dims, which now fall
    on ``dot(b, a)``'s dims: b's non-contracting dims take the tiles written for a's.  Read off libtpu
    0.0.42.1's dumps (``simplification-1.after_algsimp``, ``v6e:2x4`` beside ``v5e:2x4``; BENCHMARKS.md
    round 32, helper tpurows): moe_layer's ``dot(w2, relu(x w1))`` and scan_mlp's three loop-body dots
    whose weight is a dynamic-slice of the stacked weights; hand modules: a parameter first and a dot /
    reduce / dynamic-slice second is swapped on v6e, kept on v5e; both operands read-only, both computed,
    or the computed one first: kept on both."""
    return [d for comp in module.computations for d in comp.instructions if swaps_operands(d)]


def swaps_operands(dot, device: str | None = None) -> bool:
    """Whether ``dot`` is one of :func:`operand_swaps`' dots -- ``dot(a, b)`` with ``a`` read-only, ``b``
    computed, a tiled written sharding -- that the simplifier of ``device`` rewrites as ``dot(b, a)``:
    any such dot when ``device`` is None (the pattern alone), else only on a :data:`COMPUTED_FIRST_CHIPS`
    chip."""
    if device is not None and device not in COMPUTED_FIRST_CHIPS:
        return False
    if dot.opcode != "dot" or len(dot.operands) != 2 or _swap_dims(dot) is None:
        return False
    s = dot.sharding
    if s is None or not getattr(s, "is_tiled", False) or s.has_manual_subgroup:
        return False
    return _read_only(dot.operands[0]) and not _read_only(dot.operands[1])


def transposed_layout(sh: HloSharding, perm: list[int]) -> HloSharding:
    """``sh`` (a tiled HloSharding of rank ``len(perm)``) with its data tile dims permuted by ``perm``
    (dim i takes ``sh``'s dim ``perm[i]``; replica / subgroup dims kept last): the layout a transpose by
    ``perm`` gives a value laid out as ``sh``."""
    ta = np.asarray(sh.tile_assignment)
    ta = np.transpose(ta, list(perm) + list(range(len(perm), ta.ndim)))
    return HloSharding.tiled(ta, last_tile_dim_replicate=sh.last_tile_dim_replicate,
                             last_tile_dims=sh.subgroup_types)


def tpu_partitioned_view(module, device: str | None = None):
    """A copy of ``module`` with the shardings the TPU's SPMD partitioner is given for each of
    :func:`folded_transposes`' pairs: the dot takes its written layout transposed by the transpose's
    permutation (the rewritten dot computes the transposed result under the old dot's tile dims), the
    transpose takes the dot's written layout (the rewritten dot replaces it; its readers reshard from
    that).  ``device``: the profile's name; on a :data:`COMPUTED_FIRST_CHIPS` chip a pair whose dot has
    its computed operand first and a read-only one second is not folded (the simplifier keeps the
    computed operand first), and each of :func:`operand_swaps`' dots takes its written layout laid out
    as ``dot(b, a)`` (:func:`_swap_dims`), its readers resharding from that.  Returns ``(copy, pairs)``
    with ``pairs`` the ``(dot name, transpose name)`` rewritten (``(dot name, "")`` for a swap);
    ``(module, [])`` itself when there is none.  ``module`` is not changed.  The copy's
    ``tpu_written_shardings`` maps each folded dot's name to its written sharding (what
    :func:`resharded_updates` reads of a view)."""
    pairs = folded_transposes(module)
    swaps = []
    if device in COMPUTED_FIRST_CHIPS:
        pairs = [(d, t) for d, t in pairs if fold_applies(d, t, device)]
        folded = {id(d) for d, _ in pairs}
        swaps = [d for d in operand_swaps(module) if id(d) not in folded]
    if not pairs and not swaps:
        return module, []
    names = [(d.name, t.name) for d, t in pairs]
    copy = parse_module(print_module(module))
    by_name = {i.name: i for c in copy.computations for i in c.instructions}
    written_of = copy.__dict__.setdefault("tpu_written_shardings", {})
    for dn, tn in names:
        d, t = by_name[dn], by_name[tn]
        written = d.sharding
        perm = list(t.dimensions or [])
        d.sharding = transposed_layout(written, perm)
        t.sharding = written
        written_of[dn] = written
    for d0 in swaps:
        d = by_name[d0.name]
        d.sharding = transposed_layout(d.sharding, _swap_dims(d))
        names.append((d.name, ""))
    return copy, names


#: what a weight gradient may pass through between its folded dot's transpose and the update that reads it
#: (:func:`update_layout_conflicts`): a learning-rate scale, a sign, a type conversion -- each elementwise
#: with one computed operand, laid out as its operand
_UPDATE_CHAIN = frozenset({"multiply", "divide", "negate", "convert"})


def update_layout_conflicts(module, device: str | None = None) -> list[tuple]:
    """The weight updates of ``module`` that the TPU compiler runs in another layout than the weight's own,
    with a layout copy: ``(parameter, subtract, gradient_swapped, entry_swapped)`` per update
    ``subtract(P, g)`` of an entry parameter ``P`` of rank 2 by a gradient ``g`` that is a folded dot's
    transpose (:func:`fold_applies` on ``device``), through at most four :data:`_UPDATE_CHAIN` ops, whose
    dot's written tile dims differ from ``P``'s in one dim each way (the partitioner reshards the folded
    dot's result with an all-to-all).  Only the updates whose two layouts differ are returned
    (:func:`resharded_updates`: all of them).

    The rule (libtpu 0.0.42.1, read off its layout-assignment dumps of fused_qkv_train_step's GSPMD plan on
    ``v5e:2x4``; BENCHMARKS.md round 35, helper tpurows): the folded dot writes its per-device result (``P``'s
    dims under the dot's tile dims) in its least padded layout (:func:`hloshard.cost.tpu_layout.minor_pair`,
    ties row-major); the all-to-all lays its buffer out with the exchanged dim major-most and the rest in the
    dot's order (326 of 326 all-to-alls of round 33's compiled plans have the exchanged dim major-most), so
    the gradient reaches the update with the dot's minor dim still minor: ``{0,1}`` when the dot's layout
    is (``gradient_swapped``).  ``P`` keeps its own least padded layout (``minor_pair`` of its per-device
    tile; ``entry_swapped``: ``{0,1}``; round 34's entry-layout rule).  When they differ libtpu copies either
    the gradient into ``P``'s layout or ``P`` into the gradient's and the result back (which of the two is
    not modelled).  Checked (``benchmarks/tpu_update_layouts.py``) on every such update of the compiled
    samples, attention-heads and make_transformer GSPMD plans of round 33 (a solve plan's transpose pins
    keep its dots unfolded): a copy exactly where this names a conflict, 90 / 90 updates on ``v5e:2x4``,
    90 / 90 on ``v5p:2x2x2``, 74 / 74 on ``v6e:2x4``; held out (round 35's attention train steps at new
    shapes): see BENCHMARKS.md.  Not priced yet: a diagnosis the benchmarks list."""
    return [r for r in resharded_updates(module, device) if r[2] != r[3]]


def resharded_updates(module, device: str | None = None) -> list[tuple]:
    """Every update :func:`update_layout_conflicts` looks at, ``(parameter, subtract, gradient_swapped,
    entry_swapped)``, its two layouts equal or not (a copy only where they differ).  ``module``: a written
    plan or its :func:`tpu_partitioned_view` (whose folded dots' written shardings it reads)."""
    return [(r.parameter, r.update, r.gradient_swapped, r.entry_swapped) for r in _updates(module, device)]


class ResharedUpdate(NamedTuple):
    """One weight update of :func:`_updates`: ``subtract(parameter, g)``, ``g`` a folded dot's gradient.
    ``local``: the weight's per-device dims; ``piece``: what each peer of the all-to-all that reshards the
    folded dot's result sends (``local`` with the gathered dim -- split by the dot's tile, not by the
    weight's -- divided by that tile's factor; XLA SPMD partitioner, ``ReshardWithAllToAll``)."""
    parameter: object
    update: object
    gradient_swapped: bool
    entry_swapped: bool
    local: tuple
    piece: tuple


def _updates(module, device: str | None = None) -> list[ResharedUpdate]:
    """The updates :func:`resharded_updates` lists, with their exchange's geometry (:class:`ResharedUpdate`)."""
    written_of = getattr(module, "tpu_written_shardings", None) or {}
    out = []
    for comp in module.computations:
        if not getattr(comp, "is_entry", False):
            continue
        for t in comp.instructions:
            if t.opcode != "transpose" or len(t.operands) != 1 or len(t.shape.dims) != 2:
                continue
            d = t.operands[0]
            if not fold_applies(d, t, device):
                continue
            g, hops = t, 0
            while len(g.users) == 1 and g.users[0].opcode in _UPDATE_CHAIN and hops < 4:
                g, hops = g.users[0], hops + 1
            for u in g.users:
                if u.opcode != "subtract" or len(u.operands) != 2 or u.operands[1] is not g:
                    continue
                p = u.operands[0]
                if p.opcode != "parameter" or len(p.shape.dims) != 2:
                    continue
                sd, sp = written_of.get(d.name, d.sharding), p.sharding
                if sd is None or sp is None or not sd.is_tiled or not sp.is_tiled or sd.has_manual_subgroup:
                    continue
                td, tp = sd.tile_dims[:2], sp.tile_dims
                gathered = [i for i in range(2) if td[i] > 1 and tp[i] == 1]
                target = [i for i in range(2) if tp[i] > 1 and td[i] == 1]
                if len(gathered) != 1 or len(target) != 1:
                    continue
                dt = str(p.shape.element_type)
                local_dot = tuple(-(-int(n) // k) for n, k in zip(p.shape.dims, td))
                local = tuple(int(n) for n in sp.tile_shape(p.shape.dims))
                k = int(td[gathered[0]])
                piece = tuple(-(-n // k) if i == gathered[0] else n for i, n in enumerate(local))
                grad_swapped = minor_pair(dt, local_dot) == (0, 1)
                entry_swapped = minor_pair(dt, local) == (0, 1)
                out.append(ResharedUpdate(p, u, grad_swapped, entry_swapped, local, piece))
    return out


def update_copy_choice(piece) -> str:
    """Which copy libtpu makes for a conflicting update (:func:`update_layout_conflicts`) whose all-to-all
    sends pieces of ``piece`` (two per-device dims, :class:`ResharedUpdate`): ``"gradient"`` -- the gradient
    copied once into the weight's layout -- when the piece's two dims fill their 128-lane rows equally as a
    minor dim (:func:`hloshard.cost.tpu_layout.lane_use` equal: ``[64,64]``, ``[96,96]``, ``[80,160]``), else
    ``"weight"`` -- the weight copied into the gradient's layout and the updated weight copied back (two
    copies: ``[256,64]``, ``[64,192]``, ``[128,64]``).  Read off libtpu 0.0.42.1's optimised programs
    (ahead of time) of round 33's GSPMD plans on ``v5e:2x4`` (77 conflicts: 62 gradient, 15 weight), then
    checked on v5p (77 / 77), v6e (62 / 62), round 35's two held-out attention sets (35 / 35 on v5e + v6e)
    and a held-out MLP set written after the rule (BENCHMARKS.md round 38, helper tpu).  Raises ValueError for
    a piece that is not two dims of at least 1."""
    dims = [int(n) for n in piece]
    if len(dims) != 2:
        raise ValueError(f"an update's all-to-all piece has two dims, not {dims}")
    return "gradient" if lane_use(dims[0]) == lane_use(dims[1]) else "weight"


class UpdateRelayout(NamedTuple):
    """The layout copies libtpu makes around one conflicting weight update (:func:`update_relayouts`):
    ``copies`` (1: the gradient; 2: the weight in and the result back), each reading the buffer in one layout
    and writing it in the other: ``bytes_per_copy`` (bytes per device, at the TPU's tiles)."""
    parameter: object
    update: object
    choice: str
    copies: int
    bytes_per_copy: int


def update_relayouts(module, device: str | None = None) -> list[UpdateRelayout]:
    """The layout copies of the weight updates that ``module`` (a written plan, or its
    :func:`tpu_partitioned_view`) runs in another layout than the weight's (:func:`update_layout_conflicts`),
    as libtpu makes them (:func:`update_copy_choice`): per conflicting update, 1 or 2 copies of
    :func:`hloshard.cost.tpu_layout.layout_bytes` in the gradient's layout plus the same in the weight's
    (the weight's per-device dims; the gradient's minor dim is the folded dot's, the weight's its entry
    layout's).  fused_qkv's GSPMD plan on ``v5e:2x4``: wqkv ``[256,192]`` two copies of 458,752 B, w2
    ``[128,256]`` two of 262,144 B, wo ``[64,256]`` one of 196,608 B (per layer), libtpu's own copies to the
    byte.  What ``HloCostAnalysis`` counts of a copy is its operand and result at their layouts; priced
    (:func:`hloshard.timing.plan_roofline`, ``--device tpu-*`` reports only) at the HBM bandwidth."""
    out = []
    for r in _updates(module, device):
        if r.gradient_swapped == r.entry_swapped:
            continue
        dt = str(r.parameter.shape.element_type)
        moved = layout_bytes(dt, r.local, 0 if r.gradient_swapped else 1) + \
            layout_bytes(dt, r.local, 0 if r.entry_swapped else 1)
        choice = update_copy_choice(r.piece)
        out.append(UpdateRelayout(r.parameter, r.update, choice, 1 if choice == "gradient" else 2, moved))
    return out
