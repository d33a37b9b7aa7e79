"""Coarse to fine: a plan of the 1-D mesh of the same devices as the start of a multi-axis solve.

A mesh of several axes (``2x4``, ``2x2x2``, or a mesh refined internally into sub-axes) has many more
strategies per node than the 1-D mesh of its devices (``../shared/cases/decoder2.py`` at ``--mesh
2x4``, refined to 2x2x2: 112 per node against 22), and a search in it can end above the 1-D optimum
within the same limit (issue 26: 5,243,528 at 2x4 against 5,047,663 at 8).  A layout of the 1-D mesh
(refined only at cuts of the device order the fine mesh has too, :func:`coarse_mesh`) that splits a dim
over its axes in mesh order is a layout of the fine mesh: the same dim split over the corresponding
fine axes, major to minor, in the same device order.  A layout in reversed order (the coarse mesh has
two axes, so both orders are enumerated) is the fine product with the two runs of fine axes swapped:
the fine build enumerates those orders too (:meth:`hloshard.strategy.base.MeshInfo.add_coarse_order`,
from :func:`hloshard.mesh.coarse_cuts`), so the coarse space embeds exactly in both orders
(``tests/test_coarse_to_fine.py``).

:func:`coarse_start` solves the coarse problem with a share of the limit and maps its plan node by node
onto the fine graph (:func:`map_choice`: for each node the fine strategy with the same output and
operand shardings, compared as :class:`~hloshard.hlo.sharding.HloSharding` objects, i.e.
semantically; followers on one index); the mapped plan costs on the fine graph what the coarse plan
cost on the coarse one, and is the fine solve's hint and incumbent
(:func:`hloshard.autoshard.solve.solve_graph`), so the fine answer is never costlier than it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


from ..costgraph import aliases_kept, evaluate
from ..errors import HloshardError, SolveFailed
from ..mesh import DeviceMesh, coarse_cuts, refine_for_module, sub_axis_sizes
from ..solver.api import DET_FIXED_RATE, FULL_MODEL_LIMIT, GAP_LIMIT, MIN_TIME_LIMIT, det_fixed_seconds
from ..strategy.base import MeshInfo, StrategyGroup
from .build import BuildStopped, build_graph
from .evaluate import evaluate_choice, user_mesh
from .search import solver_choice
from .start import budget_start
from .trivial import choose_allowed, complete_plan, follower_classes

#: share of the time limit the coarse solve may use (it stops earlier once proven within the solver's
#: gap limit; decoder2: 2.4 s); the fine solve gets the rest.  In wall-clock mode the shares swap when the fine
#: solve could not get past its fixed part in its share (:func:`coarse_share`)
COARSE_SHARE = 0.25
#: of a coarse ladder's solve time (:func:`rung_mesh`), the share of its first rung (the 1-D mesh); the rung above
#: gets what that solve leaves (a proven 1-D plan ends early: BERT's at 8 is optimal in seconds)
LADDER_FIRST_SHARE = 0.5
#: Wall-clock mode: the seconds :func:`map_start` takes to map one rung's plan onto the fine graph, kept inside the
#: coarse start's share (:func:`coarse_start`), as a multiple of the coarse build's seconds: both walk every
#: instruction once (the build its strategies on the coarse mesh, the mapping its fine strategies' keys and one
#: pricing of the image).  Measured (wall seconds map / coarse build, default limit, 2 cores at load 14-19): the
#: 48-layer transformer at 4x2 3.84 / 3.98 and 5.24 / 4.92, decoder2 at 2x2x2 0.60 / 0.67, at 2x4 0.62 / 1.01.
#: Before round 30 neither the coarse build nor the mapping was charged: the coarse solve got the whole share and
#: the fine solve started that much later than its limit assumed (the 48-layer transformer at 4x2, load 14: the
#: coarse start took 10.25 s where 1.94 s were taken off the fine solve: 8.3 s outside every reserve).
MAP_SHARE = 1.0
#: the least seconds a charged coarse solve gets (the solver's own floor, ``solve_problem``)
COARSE_MIN_SOLVE = MIN_TIME_LIMIT


@dataclass
class CoarseStart:
    """The coarse plan mapped onto the fine graph.

    ``choice``: one fine strategy per node of the fine ``graph.problem`` (None when some node has no
    fine strategy with the coarse plan's shardings and no finite completion exists); ``mesh``: the
    coarse mesh; ``objective``: the coarse plan's cost on the coarse graph (cost units);
    ``mapped_objective``: the mapped plan's cost on the fine graph (cost units, None without a
    choice); ``unmatched``: nodes completed greedily instead of matched; ``seconds``: wall seconds of
    the coarse build, solve and mapping; ``strategies``: strategies in the coarse graph."""

    choice: list | None
    mesh: DeviceMesh
    objective: float
    mapped_objective: float | None
    unmatched: int
    seconds: float
    strategies: int
    #: the share of the solver's time limit its solves were given (:func:`coarse_share`)
    share: float = COARSE_SHARE


def _cuts(shape) -> set:
    """The strides at which a mesh of ``shape`` cuts its flat device order: the products of every
    minor suffix of the axis sizes (``2x4``: {1, 4, 8}; ``2x2x2``: {1, 2, 4, 8})."""
    out, acc = {1}, 1
    for n in reversed(tuple(shape)):
        acc *= int(n)
        out.add(acc)
    return out


def _shape_of(cuts) -> tuple:
    c = sorted(cuts)
    return tuple(b // a for a, b in reversed(list(zip(c, c[1:])))) or (1,)


def coarse_mesh(mesh: DeviceMesh, module) -> DeviceMesh | None:
    """The 1-D mesh of ``mesh``'s devices in the same order, refined at the cuts of
    :func:`hloshard.mesh.coarse_cuts` (so that each of its sub-axes is a product of consecutive fine
    axes), with the fine mesh's largest alpha and beta (what a collective over several of its axes is
    priced with; on a device each sub-axis at the links its devices cross, :meth:`DeviceMesh.flattened`)
    and its uneven-split policy.  When that is not coarser (the same cuts as ``mesh``: the
    module's reshapes need every cut), the user's mesh of two or more axes unrefined
    (:func:`unrefined_mesh`); None when neither is coarser."""
    cuts = linked_coarse_cuts(mesh, module)
    if cuts is None:
        return unrefined_mesh(mesh)
    base = mesh.flattened()   # on a device, its sub-axes priced at the links their own devices cross
    base.source = mesh.source
    coarse = base.refine(_shape_of(cuts))
    if base.roofline_prices is None and len(set(map(float, mesh.beta))) > 1:
        # the unit model with axes of different betas (--beta 5,1): each coarse axis spans fine axes of one link
        # (hloshard.mesh.link_cuts), priced at their own alpha and beta, not every axis at the slowest
        coarse.alpha, coarse.beta = _run_prices(mesh, coarse)
    coarse.with_policy(mesh.max_padding, mesh.memory_budget, getattr(mesh, "divisible_io", False))
    coarse.whole_axes_io = getattr(mesh, "whole_axes_io", None)   # the same devices in the same order
    coarse.roofline_prices = mesh.roofline_prices
    coarse.memory_device = getattr(mesh, "memory_device", None)
    return coarse


def link_cuts(mesh: DeviceMesh) -> set[int]:
    """The cuts (strides of the flat device order) between neighbouring axes of ``mesh`` (size-1 axes skipped) on
    different links: a different beta (cost units per byte of the link) or different link levels
    (``axis_levels``).  Empty on a mesh whose axes all have one beta (the unit model's default; a device's mesh
    without a ``dcn`` axis or node boundary)."""
    levels = mesh.axis_levels or (None,) * mesh.ndim
    out: set[int] = set()
    prev = None
    stride = mesh.num_devices
    for k, size in enumerate(mesh.shape):
        stride //= int(size)
        if int(size) == 1:
            continue
        link = (float(mesh.beta[k]), levels[k])
        if prev is not None and link != prev:
            out.add(stride * int(size))   # the cut above axis k
        prev = link
    return out


def linked_coarse_cuts(mesh: DeviceMesh, module) -> set[int] | None:
    """The coarse mesh's cuts: :func:`hloshard.mesh.coarse_cuts` (the 1-D mesh refined for ``module`` at cuts
    ``mesh`` has too) and every :func:`link_cuts` of ``mesh``, so that no coarse axis merges a slow link with a
    fast one (new user 35 F2: ``--mesh data=2:dcn,model=4 --device h100-sxm``, refined to 2x2x2, was solved
    first on a coarse 4x2 whose axis of 4 was the InfiniBand axis and half of the NVLink one).  None when that is
    not coarser than ``mesh``.  The fine build's extra orders (``MeshInfo.add_coarse_order``) stay those of
    ``coarse_cuts``, so the fine space is the same with or without the rule; this mesh's layouts in mesh order are
    the fine mesh's (its cuts are some of the fine mesh's), and a reversed order of two runs the fine build does
    not enumerate is completed greedily by :func:`map_choice` (its ``unmatched``)."""
    cuts = coarse_cuts(mesh, module)
    if cuts is None:
        return None
    cuts = set(cuts) | link_cuts(mesh)
    return None if cuts == _cuts(mesh.shape) else cuts


def _run_prices(fine: DeviceMesh, coarse: DeviceMesh) -> tuple[tuple, tuple]:
    """Per axis of ``coarse`` (whose cuts are some of ``fine``'s), the largest alpha and beta of the run of
    ``fine``'s axes it spans (size-1 axes skipped)."""
    alpha, beta = [], []
    strides = []   # per fine axis, (the stride above it, its own stride)
    acc = fine.num_devices
    for n in fine.shape:
        strides.append((acc, acc // int(n)))
        acc //= int(n)
    acc = coarse.num_devices
    for n in coarse.shape:
        hi, lo = acc, acc // int(n)
        run = [k for k, (a, b) in enumerate(strides) if b >= lo and a <= hi and int(fine.shape[k]) > 1]
        alpha.append(max((float(fine.alpha[k]) for k in run), default=max(map(float, fine.alpha))))
        beta.append(max((float(fine.beta[k]) for k in run), default=max(map(float, fine.beta))))
        acc = lo
    return tuple(alpha), tuple(beta)


def unrefined_mesh(mesh: DeviceMesh) -> DeviceMesh | None:
    """The user's mesh of a refined ``mesh`` (:func:`hloshard.autoshard.evaluate.user_mesh`: the same
    devices in the same order, alpha and beta per user axis), when it has two or more axes of more than
    one device; None when ``mesh`` is not refined or the user's mesh is 1-D (the 1-D mesh refined for the
    module is then already the coarse mesh).

    Every layout of it is a layout of ``mesh``: a dim split over a user axis is the same dim split over
    that axis' sub-axes, major to minor; a dim split over the user's two axes in reversed order is
    enumerated on ``mesh`` too (:attr:`hloshard.strategy.base.MeshInfo.group_order`), and a 3-axis user
    mesh enumerates mesh order only, as ``mesh`` does.  So its plan embeds (:func:`map_choice`).  Why
    it is wanted: a refinement into sub-axes multiplies the layouts per node (a 128-partition per-device
    program at 16x8, refined to 2x8x2x4: 251,121 strategies and 61.3 M distinct resharding pairs
    against 8,195 strategies and 70,369 pairs unrefined; issue 26), and without a coarser space the
    fine build passing its deadline left no plan."""
    if not mesh.is_refined or sum(1 for n in mesh.user_shape if n > 1) < 2:
        return None
    out = user_mesh(mesh)
    return None if out is mesh else out


def node_keys(graph) -> list:
    """Per node of ``graph``, ``(instruction, k)``: the node is the ``k``-th strategy group of that
    instruction in :func:`hloshard.autoshard.build.build_graph`'s numbering (so the nodes of two
    graphs built from one module on two meshes correspond)."""
    count: dict = {}
    out = []
    for g in graph.nodes:
        instr = g.instr
        k = count.get(id(instr), 0)
        count[id(instr)] = k + 1
        out.append((id(instr), k))
    return out


def _sharding_key(minfo, spec):
    if spec is None:
        return None
    try:
        return minfo.to_sharding(spec)
    except Exception:  # noqa: BLE001 - a spec the mesh cannot write: compare it as it is
        return ("spec", str(spec))


def _is_leaf_tuple(entry) -> bool:
    """An entry of per-leaf specs (tuple operand / multi-output) rather than one array's spec: its
    elements are specs (tuples of axis tuples), raw shardings or None, not axis tuples of ints."""
    if type(entry) is not tuple or not entry:
        return False
    return any(e is None or not (type(e) is tuple and all(type(a) is int for a in e)) for e in entry)


def strategy_key(minfo, group: StrategyGroup, st) -> tuple:
    """The shardings a strategy writes and requires, as semantic HloSharding objects: ``(output,
    inputs)``, tuples per leaf where the output or an operand is a tuple."""
    def one(entry, multi=False):
        if entry is None:
            return None
        if multi or _is_leaf_tuple(entry):
            return tuple(_sharding_key(minfo, e) for e in entry)
        return _sharding_key(minfo, entry)

    return one(st.out, group.multi), tuple(one(e) for e in st.inputs)


def map_choice(coarse_graph, coarse_choice, fine_graph) -> tuple[list | None, int]:
    """``coarse_choice`` (one strategy per node of ``coarse_graph``) as a choice of ``fine_graph``
    (both built from one module): per node the fine strategy with the same output and operand
    shardings (of several, the one with the lowest node cost); a follower takes its followee's index
    when that strategy has the same shardings.  Nodes without such a strategy are completed greedily
    (the cheapest strategy given the nodes already chosen, edges included).  When that image breaks an
    alias pair of the fine problem (a tied output and its parameter on two strategies the tie does not pair),
    the same allowed indices are taken with the alias pairs and edges deciding
    (:func:`hloshard.autoshard.trivial.complete_plan`) when that finds a choice.  Returns ``(choice or
    None when no finite completion exists, number of nodes completed greedily)``."""
    ckeys = {k: v for v, k in enumerate(node_keys(coarse_graph))}
    cmin, fmin = coarse_graph.ctx.minfo, fine_graph.ctx.minfo
    n = len(fine_graph.nodes)
    # per fine node, the indices whose shardings are those of the coarse plan's strategy
    allowed: list = [None] * n
    # per fine strategy list (nodes of repeated layers share one: strategy.sharing) its indices by key
    by_key: dict = {}
    for v, (g, key) in enumerate(zip(fine_graph.nodes, node_keys(fine_graph))):
        u = ckeys.get(key)
        if u is None:
            continue
        cg = coarse_graph.nodes[u]
        want = strategy_key(cmin, cg, cg.strategies[int(coarse_choice[u])])
        lkey = (id(g.strategies), g.multi)
        hit = by_key.get(lkey)
        if hit is None or hit[0] is not g.strategies:
            index: dict = {}
            for q, st in enumerate(g.strategies):
                index.setdefault(strategy_key(fmin, g, st), []).append(q)
            hit = by_key[lkey] = (g.strategies, index)
        allowed[v] = list(hit[1].get(want, ()))
    # followers pair index p with their followee's p only (one index per class), the rest completed
    choice, open_nodes = choose_allowed(fine_graph, allowed)
    prob = fine_graph.problem
    if prob.aliases and (choice is None or not aliases_kept(prob, choice)):
        # choose_allowed takes a class's index by node cost alone, blind to the alias pairs: of several fine
        # strategies with the coarse plan's shardings a tied output and its parameter could take two that the
        # tie does not pair (keras-hub's 4-layer Gemma at 2x2x2: its 38 ties broken, the image infeasible, so
        # the fine solve had no coarse incumbent and wrote 127.4 M against the coarse plan's 114.1 M).  The
        # same allowed indices with the alias pairs deciding (complete_plan), when that finds one.  A class of
        # followers whose members allow no common index (the coarse plan splits a gradient that the fine graph's
        # update follows, and leaves the tied update replicated: Gemma's mul.961 -> sub.101 -> args_7) allows
        # each member's indices to all of them, the tie then picks one
        relaxed = list(allowed)
        for members in follower_classes(fine_graph):
            sets = [set(allowed[v]) for v in members if allowed[v]]
            if len(sets) > 1 and not set.intersection(*sets):
                union = sorted(set().union(*sets))
                for v in members:
                    relaxed[v] = union
        paired = complete_plan(prob, relaxed, getattr(fine_graph, "follows", ()))
        if paired is not None:
            return paired, sum(1 for v, a in enumerate(allowed) if not a or paired[v] not in a)
    return choice, open_nodes


def given_plan(priced):
    """The layout a module carries, priced as given before its solve (``priced``: the
    :class:`hloshard.autoshard.evaluate.CostResult` of :func:`hloshard.autoshard.evaluate.evaluate_module` on the
    mesh the solve gets), as a ``known`` of :func:`hloshard.autoshard.solve.solve_module`: ``graph -> [choice]``,
    its choice mapped onto ``graph`` (:func:`map_choice`: per node the strategy with the same shardings; any graph
    of the same module, the fine one or the coarse fallback's), ``[]`` when the image has no finite completion.
    The solver then starts from the cheapest of it, the coarse plan and the trivial plans, so its answer never
    costs more than the layout it was handed on the graph's objective.  Why (round 37, new user 36's F6): the
    fused-QKV sample's own 2x4 plan given to ``solve --mesh data=2:dcn,model=4 --device h100-sxm --time-limit 3``
    at load 24 was priced as given at 124,922,145 and the written answer at 183,774,737 (+47%): the input was
    priced for the report and never offered to the search."""

    def known(graph) -> list:
        choice, _ = map_choice(priced.graph, list(priced.choice), graph)
        return [] if choice is None else [choice]

    return known


@dataclass
class CoarseSolve:
    """The coarse graph (``graph``, on ``mesh``), the solver's Solution on it (``solution``, its
    ``strategies`` one per node of ``graph.problem``) and the wall seconds of its build and solve."""

    graph: object
    solution: object
    mesh: DeviceMesh
    seconds: float
    #: wall seconds of the coarse graph's build alone (None: not measured apart; ``seconds`` then stands for it)
    seconds_build: float | None = None
    #: the rung below on a coarse ladder (:func:`rung_mesh`): the 1-D mesh's solve whose plan started this one
    below: "CoarseSolve | None" = None


def same_space(a: DeviceMesh, b: DeviceMesh) -> bool:
    """Whether a graph built on mesh ``a`` is the one a build on ``b`` makes (same module, keep and budget):
    the same shape, device order, alpha and beta (:meth:`DeviceMesh.__eq__`), sub-axes and user mesh, and the
    same uneven-split, memory and pricing policy (max padding, memory budget, divisible / whole-axes I/O,
    roofline prices, memory device)."""
    if a is b:
        return True
    if a != b or tuple(a.sub_axes) != tuple(b.sub_axes) or tuple(a.user_shape) != tuple(b.user_shape):
        return False
    return all(getattr(a, k, None) == getattr(b, k, None) for k in (
        "max_padding", "memory_budget", "divisible_io", "whole_axes_io", "roofline_prices", "memory_device"))


def rung_mesh(mesh: DeviceMesh, module) -> DeviceMesh | None:
    """The middle rung of a coarse ladder for ``mesh`` (1-D mesh -> this -> ``mesh``): the user's mesh of
    ``mesh`` with its two minor non-trivial axes merged into one (``2x2x2`` -> ``2x4``, ``2x2x4`` -> ``2x8``), the
    same devices in the same order, refined for ``module`` (:func:`hloshard.mesh.refine_for_module`) only at cuts
    ``mesh`` has too, priced as :func:`coarse_mesh` prices a merged axis (the largest alpha and beta of the axes
    merged; the others keep theirs) and with ``mesh``'s policies.  None unless its cuts lie strictly between the
    coarse mesh's (:func:`hloshard.mesh.coarse_cuts`) and ``mesh``'s: a user mesh of fewer than three non-trivial
    axes, a mesh whose coarse mesh is its unrefined user mesh, or a rung the module's refinement makes as fine as
    ``mesh`` (new user 27's MoE: ``--mesh 2x4`` is refined to 2x2x2, so the 2x4 rung of its 2x2x2 solve would be
    the fine space again).  Why: a plan of the ``2x4`` mesh is a plan of ``2x2x2`` (its 4-axis split over the two
    minor axes, major to minor), but the 1-D plan alone was the 2x2x2 solve's start (round 28: BERT at 2x2x2 wrote
    36.27 M against 35.38 M at 2x4, within the same limit)."""
    user = tuple(int(n) for n in mesh.user_shape)
    big = [a for a, n in enumerate(user) if n > 1]
    low = linked_coarse_cuts(mesh, module)
    if len(big) < 3 or low is None:
        return None
    base = user_mesh_of(mesh)
    if base is None:
        return None
    i, j = big[-2], big[-1]   # merged: j's devices minor inside i's (the flat order is kept)
    if float(base.beta[i]) != float(base.beta[j]):
        return None   # two links never make one coarse axis (hloshard.mesh.link_cuts)
    shape = [n for a, n in enumerate(user) if a != j]
    shape[i] = user[i] * user[j]
    keep_axes = [a for a in range(len(user)) if a != j]
    alpha = [max(base.alpha[i], base.alpha[j]) if a == i else base.alpha[a] for a in keep_axes]
    beta = [max(base.beta[i], base.beta[j]) if a == i else base.beta[a] for a in keep_axes]
    merged = DeviceMesh(tuple(shape), mesh.device_ids.ravel(), alpha, beta)
    fine = _cuts(mesh.shape)
    cuts = _cuts(refine_for_module(merged, module).shape) & fine
    if not (set(low) < cuts < fine):
        return None
    out = merged.refine(sub_axis_sizes(merged.shape, cuts))   # the merged mesh's sub-axes at the kept cuts
    out.source = mesh.source
    out.with_policy(mesh.max_padding, mesh.memory_budget, getattr(mesh, "divisible_io", False))
    out.whole_axes_io = getattr(mesh, "whole_axes_io", None)
    out.roofline_prices = mesh.roofline_prices
    out.memory_device = getattr(mesh, "memory_device", None)
    return out


def user_mesh_of(mesh: DeviceMesh) -> DeviceMesh | None:
    """``mesh``'s user mesh (:func:`hloshard.autoshard.evaluate.user_mesh`), or None when its user axes cannot be
    told apart (a sub-axis list that does not cover them)."""
    out = user_mesh(mesh)
    return out if tuple(out.shape) == tuple(mesh.user_shape) else None


def coarse_solve(module, mesh: DeviceMesh, solve, keep: str, memory_budget, time_limit: float, workers: int,
                 seed: int, deterministic: bool, ladder: bool = False, charged: bool = False) -> CoarseSolve | None:
    """Build the coarse graph of ``module`` for the fine ``mesh`` (:func:`coarse_mesh`) and solve it
    with ``time_limit`` by ``solve`` (:func:`hloshard.autoshard.search.solve_graph`).  None when there is
    no coarser mesh, the coarse graph cannot be built or its solve finds nothing.

    With ``ladder`` and a middle rung (:func:`rung_mesh`): the 1-D solve gets :data:`LADDER_FIRST_SHARE` of
    ``time_limit`` (in wall-clock mode it may end earlier, proven), then the rung's graph is built and solved with
    the rest, starting from the 1-D plan mapped onto it (:func:`map_choice`; hint and incumbent of
    :func:`hloshard.autoshard.search.solve_graph`); the result is the rung's solve with ``below`` the 1-D one
    (:func:`map_start` maps both and keeps the cheaper on the fine graph).  A rung that cannot be built or solved
    leaves the 1-D solve as the result.

    ``charged`` (wall-clock mode only; :func:`coarse_start`'s): ``time_limit`` is the wall seconds of the whole
    coarse start, builds and mapping included: each solve gets what is left of it after the builds made so far and
    :data:`MAP_SHARE` x the coarse build's seconds per plan still to be mapped (one per rung), at least
    :data:`COARSE_MIN_SOLVE`; a build that would leave less than that is stopped (no coarse graph: None; a rung's:
    the 1-D solve is the result).  Deterministic mode never charges (its limits are work, not seconds)."""
    cmesh = coarse_mesh(mesh, module)
    if cmesh is None:
        return None
    rmesh = rung_mesh(mesh, module) if ladder else None
    charge = charged and not deterministic
    maps = 1 if rmesh is None else 2   # the plans map_start maps onto the fine graph
    t0 = time.monotonic()
    # charged: a coarse build that would leave no room for its solve's minimum and its mappings is stopped (no
    # start: the fine solve keeps the time; the 48-layer transformer at 4x2, load 15: a 0.66 s share, a 5.6 s build)
    stop = t0 + max(0.0, time_limit - COARSE_MIN_SOLVE) / (1.0 + MAP_SHARE * maps) if charge else None
    try:   # a start only: a module the coarse mesh cannot take is solved on the fine mesh alone
        cgraph = build_graph(module, cmesh, keep, memory_budget, deadline=stop)
    except HloshardError:
        return None
    t1 = time.monotonic()
    # charged: the solves get the share less the coarse build and the mappings still to come
    budget = max(COARSE_MIN_SOLVE, time_limit - (t1 - t0) * (1.0 + MAP_SHARE * maps)) if charge else time_limit
    first = budget if rmesh is None else max(COARSE_MIN_SOLVE, LADDER_FIRST_SHARE * budget) if charge \
        else LADDER_FIRST_SHARE * time_limit
    try:
        sol = solve(cgraph, time_limit=first, workers=workers, seed=seed, deterministic=deterministic)
    except SolveFailed:
        return None
    cs = CoarseSolve(cgraph, sol, cmesh, time.monotonic() - t0)
    if rmesh is None:
        return cs
    spent = time.monotonic() - t1
    try:   # charged: stopped where it would leave the rung's solve less than its minimum
        rgraph = build_graph(module, rmesh, keep, memory_budget, deadline=None if not charge else
                             t0 + time_limit - COARSE_MIN_SOLVE - MAP_SHARE * maps * (t1 - t0))
    except HloshardError:
        return cs
    hint, _ = map_choice(cgraph, list(sol.strategies), rgraph)
    if hint is not None and not evaluate(rgraph.problem, hint)[1]:
        hint = None
    if charge:   # what the share leaves after the two builds, the 1-D solve and the two mappings
        rest = max(COARSE_MIN_SOLVE, time_limit - (time.monotonic() - t0) - MAP_SHARE * maps * (t1 - t0))
    else:
        rest = time_limit - first if deterministic else max(time_limit - first, time_limit - spent)
    try:
        rsol = solve(rgraph, time_limit=rest, workers=workers, seed=seed, deterministic=deterministic, hint=hint)
    except SolveFailed:
        return cs
    return CoarseSolve(rgraph, rsol, rmesh, time.monotonic() - t0, below=cs)


def map_start(cs: CoarseSolve, graph) -> CoarseStart:
    """The coarse plan of ``cs`` mapped onto the fine ``graph`` (:func:`map_choice`), as a
    :class:`CoarseStart` (``seconds``: the coarse build and solve plus the mapping).  An image that breaks a tie
    of ``graph.problem`` but is a feasible plan of its solver's problem is kept as the start (``mapped_objective``
    None: a hint for the solver only, never held or compared as a plan).  On a ladder (``cs.below``
    set) each rung's plan is mapped and the image of least cost on the solver's problem (what the fine search starts
    from) is the start (a rung's plan can miss fine strategies, e.g. a split over its merged axis in reversed order,
    and is then completed greedily, which can break a tie: BERT at 2x2x2, load 13, the 2x4 rung's 36.8 M plan was
    passed over for the 1-D plan's feasible image, 40.5 M, when only feasible images counted)."""
    t0 = time.monotonic()
    best, key = None, None
    rung = cs
    while rung is not None:
        cgraph, cchoice = rung.graph, list(rung.solution.strategies)
        choice, unmatched = map_choice(cgraph, cchoice, graph)
        mapped, solver_obj = None, None
        if choice is not None:
            obj, feasible = evaluate(graph.problem, choice)
            if feasible:
                mapped = evaluate_choice(graph, choice).total
            solver_obj = _solver_objective(graph, choice)
            if solver_obj is None and not feasible:
                choice = None
        # the cheapest image on the solver's problem (what the fine search starts from), any image before none
        k = (choice is None, float("inf") if solver_obj is None else solver_obj)
        if best is None or k < key:
            best, key = (choice, rung, evaluate_choice(cgraph, cchoice).total, mapped, unmatched), k
        rung = rung.below
    choice, rung, objective, mapped, unmatched = best
    return CoarseStart(choice, rung.mesh, objective, mapped, unmatched,
                       cs.seconds + time.monotonic() - t0, sum(len(g.strategies) for g in rung.graph.nodes))


def _solver_objective(graph, choice):
    """``choice``'s (a plan of ``graph.problem``) objective on the solver's problem, on its merged nodes
    (:func:`hloshard.autoshard.search.solver_choice`; integer units with the tie-break), None when it is not a
    feasible plan there: a starved coarse plan mapped with many nodes completed greedily can break ties on the fine
    problem and still be a start for its solver (BERT at 2x2x2, default limit, load 14: the 1-D plan of a 0.4 s
    solve mapped with 152 nodes completed and ties broken, so the fine solve had no start)."""
    shint = solver_choice(graph, choice)
    if -1 in shint:
        return None
    obj, ok = evaluate(graph.solver_problem, shint)
    return obj if ok else None


def coarse_start(module, graph, solve, keep: str, memory_budget, time_limit: float, workers: int, seed: int,
                 deterministic: bool, share: float = COARSE_SHARE) -> CoarseStart | None:
    """Solve ``module`` on the coarse mesh of ``graph.mesh`` (:func:`coarse_mesh`) with
    ``share`` (:data:`COARSE_SHARE`; :func:`coarse_share` in wall-clock mode) of ``time_limit`` by ``solve``
    (:func:`hloshard.autoshard.solve.solve_graph`, passed in: that module calls this one), up a coarse ladder
    where ``graph.mesh`` has a middle rung (:func:`rung_mesh`), and map the plan onto ``graph`` (:func:`map_choice`).
    None when there is no coarser mesh, the coarse graph cannot be built or the coarse solve finds
    nothing (the fine solve then starts as it always did).  In wall-clock mode the share is the whole start's wall
    seconds (``coarse_solve``'s ``charged``: its builds and the mapping are paid from it, as the caller subtracts at
    most the share from the fine solve's limit).  Raises nothing of its own."""
    cs = coarse_solve(module, graph.mesh, solve, keep, memory_budget, share * time_limit,
                      workers, seed, deterministic, ladder=True, charged=True)
    if cs is None:
        return None
    out = map_start(cs, graph)
    out.share = share
    return out


def coarse_share(graph, time_limit: float, wall_per_cpu: float, module=None, build_seconds: float = 0.0) -> float:
    """The coarse start's share of the solver's ``time_limit`` (wall seconds) in wall-clock mode:
    :data:`COARSE_SHARE`, or ``1 -`` :data:`COARSE_SHARE` when the fine solve could not get past its fixed part in
    its share but the coarse solve can in the swapped one.  The fine solve's fixed part is :func:`fine_solve_fixed`
    of ``graph`` (modelled CPU seconds of presolve, greedy, local search and the first Lagrangian round), the coarse
    solve's the same model of :func:`solve_entries_estimate` on the coarse mesh of ``module`` (before its build; 0
    on the full-model path), both times ``wall_per_cpu`` (the fine build's wall over CPU seconds: the machine's load
    as this process sees it), the coarse one plus its build, still to come (the fine build's ``build_seconds`` scaled
    by :func:`build_cost`, as :func:`fine_build_estimate` scales the other way).  Swapped, the fine solve's answer is its greedy start after local moves or the coarse
    plan, whichever is cheaper (:func:`hloshard.solver.api._trajectory`), and the coarse plan is worth the time (new
    user 27's MoE at 2x4, default limit, load 10: the fine problem's 7.6 CPU-s fixed part ran 15-20 s wall in its
    first TRW-S round, the coarse solve's 8 s share ended at 62.26 M, where ``--mesh 8`` -- the same 4x2 space with
    the whole solver time -- found 57.63 M).  Not swapped when the coarse solve could not pass its own fixed part
    either (load 16, a 3 s solver limit: the coarse 4x2 solve given 75% ended at the replicated plan, 134.5 M, and
    the fine solve's 25% at it too, where its 75% made the greedy start, 69.2 M).  Raises nothing."""
    ratio = max(1.0, float(wall_per_cpu))
    swapped = (1.0 - COARSE_SHARE) * float(time_limit)
    if fine_solve_fixed(graph) * ratio <= swapped:
        return COARSE_SHARE
    cmesh = None if module is None else coarse_mesh(graph.mesh, module)
    if cmesh is None:
        return COARSE_SHARE
    entries = solve_entries_estimate(module, cmesh)
    coarse_fixed = det_fixed_seconds(entries) if entries > FULL_MODEL_LIMIT else 0.0
    fine_cost = build_cost(module, graph.mesh)
    coarse_build = float(build_seconds) * build_cost(module, cmesh) / fine_cost if fine_cost else 0.0
    return 1.0 - COARSE_SHARE if coarse_fixed * ratio + coarse_build <= swapped else COARSE_SHARE


def layout_counts(module, mesh: DeviceMesh) -> list[int]:
    """The number of enumerated layouts (``MeshInfo.enumerate``) of each array instruction of
    ``module`` on ``mesh``, in instruction order: what ``--mesh auto``'s candidate order
    (:func:`hloshard.mesh_search._work`) is made of."""
    info = MeshInfo(mesh)
    return [len(info.enumerate(instr.shape.dims)) for instr in module.all_instructions() if instr.shape.is_array]


#: :func:`build_cost`'s weight of one array instruction, in layout pairs: what a build spends on every node
#: (its group, its edges through the shared matrices and caches) beside the pairs of the distinct instructions.
#: Fitted (round 26, BENCHMARKS.md "Round 26, helper fine"; device CPU, one core per build) on keras-hub's 4-layer
#: Gemma at 2x4, the 48-layer transformer at 2x2x2 and 4x2 and Llama 3.1 8B at 2x2x2, 2x4 and 4x2 (log error rms
#: least at 150); held out: Gemma3 at 2x4 and from its layout map, decoder2 at 2x2x2, MaxText at 2x2x2 and 2x4
BUILD_NODE_PAIRS = 150


def build_cost(module, mesh: DeviceMesh) -> float:
    """A build's size on ``mesh`` in layout pairs, what :func:`fine_build_estimate` and ``--mesh auto``'s skip rule
    (:func:`hloshard.mesh_search.search_meshes`) scale a measured build by:
    :data:`BUILD_NODE_PAIRS` per array instruction plus, per distinct (opcode, dims, element type) of them, the
    square of its enumerated layouts (``MeshInfo.enumerate``).  Why: strategy lists and resharding matrices are
    built once per structurally equal instruction (:mod:`hloshard.strategy.sharing`) and a matrix holds source x
    target layouts, so the build grows with the distinct instructions' squared layouts, while every node costs a
    little whatever its layouts (Llama 3.1 8B's 22,088 nodes: its 1-D build 4.9 CPU-s, its 2x4 build 3.6).  The
    layouts' plain sum (round 16's estimate, ``--mesh auto``'s skip rule until round 27) put that build at 14.6x the 1-D one (61 s for 8.2 s at
    2x2x2: the 1-D plan written) and keras-hub Gemma's at 5.1x where it took 7.4x."""
    info = MeshInfo(mesh)
    arrays = [instr for instr in module.all_instructions() if instr.shape.is_array]
    distinct: dict = {}
    for instr in arrays:
        distinct.setdefault((instr.opcode, tuple(instr.shape.dims), instr.shape.element_type), instr)
    return BUILD_NODE_PAIRS * len(arrays) + sum(len(info.enumerate(i.shape.dims)) ** 2 for i in distinct.values())


def node_share(module, mesh: DeviceMesh) -> float:
    """The share of a build on ``mesh`` that grows with the nodes, not with the layouts: :data:`BUILD_NODE_PAIRS`
    x the array instructions over :func:`build_cost` (0.99 for the 48-layer transformer at 2x4, 0.08 for Gemma3 at
    2x2x2).  What :func:`hloshard.autoshard.solve.reprice_reserve_seconds` splits a build's seconds by."""
    cost = build_cost(module, mesh)
    arrays = sum(1 for instr in module.all_instructions() if instr.shape.is_array)
    return BUILD_NODE_PAIRS * arrays / cost if cost else 1.0


def fine_build_estimate(module, coarse: DeviceMesh, coarse_seconds: float, mesh: DeviceMesh) -> tuple[float, float]:
    """``(seconds, ratio)``: the fine build on ``mesh`` estimated from the coarse build on ``coarse``
    (``coarse_seconds`` wall seconds): ``ratio`` = :func:`build_cost` on the fine mesh over the coarse mesh's.
    Measured (round 26, device CPU; estimate / build): 0.49-1.47x on 11 builds of 6 modules, against 0.43-9.3x by
    the layouts' sum before (round 16's).  Raises nothing; a mesh of no layouts gives ratio 1."""
    a, b = build_cost(module, coarse), build_cost(module, mesh)
    ratio = b / a if a else 1.0
    return float(coarse_seconds) * ratio, ratio


#: deterministic mode's limit on the fine build (:func:`work_limit`), in resharding pairs per second of the
#: solving the graph serves, on meshes of at most :data:`FEW_AXES` non-trivial axes: the measured cost of a
#: large build per pair, on the slow side.  Re-measured in round 25 (one cold process each, CPU seconds of the
#: whole build, :func:`hloshard.autoshard.build.build_graph` without a limit, 2-core machine at load 7-11):
#: keras-hub's 4-layer Gemma at 2x4 -> 2x2x2 2,698,357 pairs in 5.23 s (516 k/s); new user 23's Llama 3 at
#: 2x4 -> 2x2x2 1,948,602 in 4.33 s (450 k/s); the samples at 2x2x2, whose builds are small enough that the
#: strategies' fixed part weighs: fused_qkv_train_step 468,385 in 1.59 s (294 k/s), transformer_train_step
#: 428,086 in 1.52 s (282 k/s), scan_mlp_train_step 93,720 in 0.50 s (187 k/s).  The builds of over a million
#: pairs (the ones a limit decides) run at 450-516 k/s: the slower is the figure (round 17's 250 k/s, the
#: fastest sample then, made Gemma's 5.2 s build look like 10.8 s and left it out at ``time_limit=10``)
PAIRS_PER_SECOND = 450_000
#: the most non-trivial mesh axes :data:`PAIRS_PER_SECOND` was measured on
FEW_AXES = 3
#: the same limit on meshes of more axes: a pair's plan takes one move per mesh axis it changes, so a pair
#: of a 4-axis mesh costs several times one of 3 axes whatever the rank (round 18, each sample's pre-HLO
#: without its shardings on a 16-device 2x2x2x2 mesh, one cold process each, CPU seconds in the edge
#: matrices, load 5-8: scan_mlp_train_step 814,430 pairs in 14.0 s (58 k/s), mlp_train_step 170,154 in 3.3 s
#: (51 k/s), attention_6heads 4,085,384 in 81.8 s (50 k/s), embedding_lookup 31 k/s, conv_layer 26 k/s,
#: moe_layer not done in 120 s; the same samples at 2x2x2 with their shardings 95-344 k/s): the fastest.  Rank is not what costs: a 3-instruction rank-12
#: module prices 3,074,762 pairs at 2x2x2 at 522 k/s, faster than any sample (new user 17's module: at
#: 2x2x2x2 it holds 3,847,482 pairs, priced at 137 k/s)
PAIRS_PER_SECOND_MANY_AXES = 58_000


def pairs_per_second(mesh: DeviceMesh) -> int:
    """The pairs per second :func:`work_limit` allows on ``mesh``: :data:`PAIRS_PER_SECOND` on meshes of at
    most :data:`FEW_AXES` axes of size above 1, :data:`PAIRS_PER_SECOND_MANY_AXES` on more (a 16x8 mesh
    refined as 2x8x2x4, a 2x2x2x2 mesh)."""
    axes = sum(1 for n in mesh.shape if int(n) > 1)
    return PAIRS_PER_SECOND if axes <= FEW_AXES else PAIRS_PER_SECOND_MANY_AXES


def fine_solve_fixed(graph) -> float:
    """The modelled CPU seconds of the fixed part of a deterministic solve of ``graph`` (its solver problem's
    edge-matrix entries at :data:`hloshard.solver.api.DET_FIXED_RATE`, :func:`hloshard.solver.api.det_fixed_seconds`;
    the entries before the presolve, 1.1-1.2x those after it on the measured graphs), or 0.0 where the solver
    would take the LP / full-model path (at most :data:`hloshard.solver.api.FULL_MODEL_LIMIT` entries), whose work
    budget the measurements did not find under-counted.  :func:`deterministic_first` writes the coarse plan when
    this passes the fine solve's share of the limit."""
    problem = graph.solver_problem
    entries = int(sum(int(m.size) for m in problem.edge_costs))
    graph.solver_entries = entries
    return det_fixed_seconds(entries) if entries > FULL_MODEL_LIMIT else 0.0


def solve_entries_estimate(module, mesh: DeviceMesh) -> int:
    """The edge-matrix entries of the solver problem a build of ``module`` on ``mesh`` would make, estimated before
    building anything (no strategy made, no clock read): the sum over every array instruction and each of its array
    operands of (operand layouts x instruction layouts), the layouts a
    :class:`~hloshard.strategy.base.MeshInfo` enumerates as the build's does (the coarse mesh's two orders added,
    :func:`hloshard.mesh.coarse_cuts`).  An edge matrix holds source x target strategies and, unlike a resharding
    matrix (:func:`build_cost`), one is made per edge, shared or not.  On the low side: a dot's strategies outnumber
    its output's layouts (a contracting split adds partial sums), while merged followers and all-zero matrices drop
    edges (:func:`hloshard.solver.followers.merge_followers`).  Measured (round 27, one build each, the solver
    problem's entries, followers merged, before presolve; ``benchmarks/measured/search_r27/entries.jsonl``; nothing
    fitted): estimate / entries 0.44-0.95 on 12 problems of 10 modules (keras-hub Gemma 4L at 2x4 0.67, Llama 3.1 8B
    at 2x2x2 0.92, the 48-layer transformer at 2x2x2 0.73 and 4x2 0.88, attention_6heads at 2x2x2 0.46), and 1.30 on
    one, MaxText at 2x2x2 (its followers merge 22.1 M entries to 7.3 M): so a build it rules out
    (:func:`deterministic_first`) is one the check after the build rules out too, except where that check would
    pass by less than 1.3x.  Raises nothing."""
    info = MeshInfo(mesh)
    cuts = coarse_cuts(mesh, module)
    if cuts is not None:
        info.add_coarse_order(cuts)
    memo: dict = {}

    def layouts(instr) -> int:
        dims = tuple(instr.shape.dims)
        n = memo.get(dims)
        if n is None:
            n = memo[dims] = len(info.enumerate(dims))
        return n

    pairs = 0
    for instr in module.all_instructions():
        if not instr.shape.is_array:
            continue
        mine = None
        for op in instr.operands:
            if op.shape.is_array:
                mine = layouts(instr) if mine is None else mine
                pairs += layouts(op) * mine
    return int(pairs)


def fine_solve_entries_note(fixed: float) -> str:
    """Words for :func:`deterministic_first`'s message: the entries behind a modelled fixed part of ``fixed`` s."""
    return f"{fixed * DET_FIXED_RATE / 1e6:,.1f} M edge-matrix entries at {DET_FIXED_RATE / 1e6:g} M per CPU second"


def work_limit(time_limit: float, mesh: DeviceMesh, solver_share: float = 1.0) -> int:
    """The most resharding pairs (:func:`hloshard.autoshard.build.build_graph`'s ``work_limit``) the fine
    build on ``mesh`` may price in deterministic mode (and under ``solve``'s default limit) for a solve of
    ``time_limit`` seconds (work units): :func:`pairs_per_second` of ``mesh`` per second of the solving the
    graph serves, ``time_limit / solver_share``.  The rule: the refined graph is built when its build is
    estimated to cost no more than the solving it serves, so that the call costs at most about twice its
    solving.  ``solver_share`` < 1: the first solve is that share of a caller's whole limit and the later
    phases solve on the same graph, so the graph serves the whole limit.  ``auto_shard`` in deterministic mode
    does not pass its share (round 25: sized for its whole limit, keras-hub's 4-layer Gemma at ``time_limit=10``
    got its 2.70 M-pair refined graph, a 5.2 CPU-s build, but the first solve on it used 59 s for its 5 work units
    and ended at a 27.8% gap, and the memory guard's re-solves found no plan within the baseline: auto_expert
    peaked 1.05x the expert's by XLA; at its first solve's 5 s, 2.25 M pairs, the coarse plan is written, 0.97x)."""
    share = float(solver_share) if solver_share and 0 < float(solver_share) < 1 else 1.0
    return int(pairs_per_second(mesh) * max(0.0, float(time_limit)) / share)


@dataclass
class CoarseFirst:
    """What :func:`coarse_first` returns: the fine ``graph`` and the coarse plan mapped onto it
    (``start``, None without a coarse mesh or plan), or, when the fine build passed the deadline,
    ``graph`` None, the coarse solve ``fallback`` and the fine build's ``stopped`` error (its message
    says how far it got); ``seconds_fine_build``: wall seconds of the fine build (stopped or not)."""

    graph: object
    start: CoarseStart | None
    fallback: CoarseSolve | None = None
    stopped: BuildStopped | None = None
    seconds_fine_build: float = 0.0
    #: wall seconds of the coarse build (0.0 without a coarse graph)
    seconds_coarse_build: float = 0.0


#: with a deadline, the share of what the fine build is estimated to leave (before the re-pricing) that the
#: fine solve gets; the coarse solve, run first, gets the rest and ends earlier once proven (an even split,
#: not a measured figure: the fine search starts from the coarse plan, in a space ratio times larger)
FINE_SPLIT = 0.5
#: the coarse build of :func:`coarse_first` stops this many time limits past the deadline, and not before
#: COARSE_BUILD_MIN_GRACE seconds past it (the command then fails, exit 3, instead of ending minutes late);
#: before it, a coarse plan written late is the answer (``--time-limit 0.5``: the interpreter's start alone
#: takes 1-4 s on the 2-core machine, and the small module's coarse plan is still written)
COARSE_BUILD_GRACE = 1.0
COARSE_BUILD_MIN_GRACE = 10.0
#: the least time each solve (coarse, fine) is given when the fine build is planned
FALLBACK_MIN_SECONDS = 1.0
#: and for applying, evaluating and writing the coarse plan: this share of the coarse build's seconds
#: (measured, apply + write / coarse build: Llama 3.1 8B corpus module at 2x2x2, 3.8 s / 26.8 s under
#: load 16; decoder2 at 2x4, 0.1 s / 1.0 s)
WRITE_SHARE = 0.25


def coarse_first(module, mesh: DeviceMesh, solve, keep: str, memory_budget, time_limit: float, workers: int,
                 seed: int, deadline: float, reprice_share: float = 0.0, solver_share: float = 1.0,
                 solved: CoarseSolve | None = None) -> CoarseFirst:
    """Coarse to fine under a wall-clock ``deadline`` (``time.monotonic()``; ``--time-limit`` as the whole
    command's promise): build the coarse graph, then solve it first, then build the fine graph.  Kept back
    throughout: :data:`WRITE_SHARE` of the coarse build's seconds (to write a plan) and ``reprice_share``
    times them (the re-pricing of the fine plan, which costs about what a build of the module on the 1-D
    mesh does: :data:`hloshard.autoshard.solve.REPRICE_SHARE`).  The fine build is not started when
    :func:`fine_build_estimate` (the coarse build's seconds times the layouts' ratio, ``--mesh auto``'s
    rule) says it would not leave each solve :data:`FALLBACK_MIN_SECONDS` (a 128-partition per-device
    program at 16x8: about 26x a coarse build of a few seconds; it used to run ~16 s and stop); the coarse
    solve then gets all the time, at most ``time_limit`` of solver (the ``deadline`` may be a longer
    promise's: ``auto_shard``'s whole call, a ``--mesh auto`` search's).  Else the coarse solve gets ``1 -`` :data:`FINE_SPLIT` of what the
    estimated fine build leaves (it ends earlier once proven), and the fine build is still not started
    when the coarse search found nothing cheaper than the trivial plans in that time (the coarse solve
    then goes on with the rest, from its plan: new user 18's enc_dec at 2x2x2, 30 s, whose coarse solve
    had 4 s after the fine build and the replicated plan became the answer) or when the estimate no
    longer fits.  When the fine build stops (:class:`BuildStopped`) or is not started, the coarse plan is
    the answer (``fallback``); else it is
    mapped onto the fine graph (``start``).  ``solver_share`` < 1 (:func:`hloshard.autoshard.solve.solve_module`'s:
    a later phase of the caller, auto_shard's memory guard, keeps the rest): the coarse solve gets at most that share
    of what the deadline leaves after the coarse build, writing and the re-pricing reserve.  Without a coarse mesh
    the fine graph is built without stopping
    (there is nothing else to return) but stops like the coarse build.  ``solved``: the coarse problem solved
    before (``--mesh auto``'s first candidate, the 1-D mesh of the same devices: :func:`hloshard.mesh_search.search_meshes`),
    used instead of the coarse build and solve when its mesh is the coarse mesh (:func:`same_space`); its build's
    seconds stand for the coarse build's in the estimates (the coarse solve is then re-run only where its plan is
    a trivial one the search fell back on, as below).  The coarse build stops :data:`COARSE_BUILD_GRACE` times
    ``time_limit`` (at least :data:`COARSE_BUILD_MIN_GRACE` seconds) past ``deadline``: raises :class:`BuildStopped` (exit 3, status ``"timeout"``; its
    message names the coarse mesh and how far the build got).  Non-deterministic mode only (it reads the
    clock)."""
    cmesh = coarse_mesh(mesh, module)
    cgraph = None
    t0 = time.monotonic()
    if solved is not None and (cmesh is None or not same_space(solved.mesh, cmesh)):
        solved = None
    if solved is not None:
        cgraph = solved.graph
        t0 -= solved.seconds if solved.seconds_build is None else solved.seconds_build   # its build, measured before
    elif cmesh is not None:
        try:   # a start only: a module the coarse mesh cannot take is solved on the fine mesh alone
            # the coarse build, too, stops, COARSE_BUILD_GRACE limits past the deadline: a plan written late
            # is still the answer to a limit the interpreter's start alone uses up, but not one that takes
            # minutes (a 128-partition per-device program at 16x8: its coarse build ran 3 min at 1.2 GB
            # before it was stopped by hand; issue 26)
            cgraph = build_graph(module, cmesh, keep, memory_budget,
                                 deadline=deadline + max(COARSE_BUILD_GRACE * float(time_limit), COARSE_BUILD_MIN_GRACE))
        except BuildStopped as exc:
            exc.args = (f"no plan within the time limit: the cost graph of the coarse mesh "
                        f"{'x'.join(map(str, cmesh.shape))} (the same devices as mesh "
                        f"{'x'.join(map(str, mesh.user_shape))}, solved first) could not be built in time: {exc}; "
                        f"a larger --time-limit, or a mesh of fewer devices, would let it finish",)
            raise
        except HloshardError:
            cgraph = None
    t1 = time.monotonic()
    if cgraph is None:
        # no coarse plan to fall back on: the fine build stops as the coarse one would (BuildStopped,
        # exit 3) instead of running unbounded (a 128-partition per-device program at 16x8, whose coarse
        # build fails: its fine build ran past 5 minutes)
        graph = build_graph(module, mesh, keep, memory_budget,
                            deadline=deadline + max(COARSE_BUILD_GRACE * float(time_limit), COARSE_BUILD_MIN_GRACE))
        return CoarseFirst(graph, None, seconds_fine_build=time.monotonic() - t1)
    write = WRITE_SHARE * (t1 - t0)
    # what the fine plan's re-pricing will need is kept back too
    reprice = max(0.0, float(reprice_share)) * (t1 - t0)
    now = time.monotonic()
    # the time for the coarse solve, the fine build and the fine solve
    avail = deadline - now - write - reprice
    # the fine build estimated from the coarse one (build_cost, as --mesh auto's skip rule), when it could start
    estimate, ratio = fine_build_estimate(module, cmesh, t1 - t0, mesh) if avail > 0 else (0.0, 1.0)
    now = time.monotonic()
    avail = deadline - now - write - reprice
    not_started = None
    by_estimate = False   # not started only because its estimate was longer than the time left (round 38, F5)
    if avail < 2 * FALLBACK_MIN_SECONDS:   # no time for the fine build at all: say so, not "0.0 s"
        not_started = (f"after the coarse mesh's graph ({t1 - t0:.1f} s) {max(0.0, deadline - now):.1f} s were left, "
                       f"less than the fine build and the re-pricing of its plan are estimated to need (about "
                       f"{reprice:.1f} s for the re-pricing, from the coarse build's seconds, and "
                       f"{2 * FALLBACK_MIN_SECONDS + write:.1f} s kept for the two solves and writing)")
    elif estimate > avail - 2 * FALLBACK_MIN_SECONDS:   # it would stop at its deadline: not started, its time kept
        by_estimate = True
        not_started = (f"the fine build is estimated at about {estimate:.0f} s ({ratio:.1f}x the size of the coarse "
                       f"mesh's graph by coarse.build_cost, built in {t1 - t0:.1f} s), more than the {avail - 2 * FALLBACK_MIN_SECONDS:.1f} s "
                       f"it had (the time limit less {2 * FALLBACK_MIN_SECONDS + write:.1f} s kept for the two solves and "
                       f"writing and {reprice:.1f} s for the re-pricing)")
    # the coarse solve first (it is the answer when the fine mesh is not built, and the fine solve's
    # incumbent when it is): all the time when the fine build is not started, else FINE_SPLIT of what the
    # fine build leaves; it ends earlier once proven within the solver's gap limit
    share = deadline - now - write if not_started is not None else (1.0 - FINE_SPLIT) * (avail - estimate)
    # never more than the caller's ``time_limit`` of solver: the ``deadline`` can be a longer promise's (auto_shard's
    # whole call, whose first solve gets FIRST_SHARE of it; a --mesh auto candidate's share of the search's) and
    # the phases after this solve get what it leaves (keras-hub's 4-layer Gemma at time_limit=15: the coarse
    # solve took 9.0 s of a 7.5 s share, and the memory guard found no time left for its re-solves)
    share = min(share, float(time_limit))
    if solver_share < 1:   # a later phase of the caller keeps the rest of what the builds and reserves leave
        share = min(share, solver_share * max(0.0, deadline - now - write - reprice))
    t2 = time.monotonic()
    if solved is not None:   # solved before: its plan, and its solve's time not spent again
        cs = CoarseSolve(cgraph, solved.solution, cmesh, solved.seconds, solved.seconds_build)
    else:
        try:
            # under a budget the coarse search starts from a plan that keeps it (.start), as the fine one does
            sol = solve(cgraph, time_limit=max(FALLBACK_MIN_SECONDS, share), workers=workers, seed=seed,
                        deterministic=False, hint=None if memory_budget is None else budget_start(cgraph))
            cs = CoarseSolve(cgraph, sol, cmesh, (t1 - t0) + (time.monotonic() - t2))
        except SolveFailed:
            cs = None
    if not_started is None and (cs is None or _search_behind(cs.solution)):
        # the coarse search found no plan, or none cheaper than the trivial plans, in its share: the fine
        # mesh's search, in a space ratio times larger and starting from that plan, would not in what is
        # left either (new user 18, enc_dec at 2x2x2, --time-limit 30: the coarse solve's 4 s ended at its
        # greedy plan, the replicated plan was the incumbent and the answer).  The coarse solve gets the rest
        spent = time.monotonic() - t2
        not_started = (f"the coarse mesh's search found no plan cheaper than the replicated and data-parallel "
                       f"ones in its {spent:.1f} s, so the fine mesh's (a space {ratio:.1f}x the layouts, its build "
                       f"estimated at about {estimate:.0f} s) would not in less; the coarse solve had the time instead")
        try:
            left = deadline - time.monotonic() - write
            if solver_share < 1:   # its share of the solves' time, less what its first search spent
                left = solver_share * (left - reprice + spent) - spent
            more = solve(cgraph, time_limit=max(FALLBACK_MIN_SECONDS, min(left, float(time_limit) - spent)),
                         workers=workers, seed=seed, deterministic=False,
                         hint=None if cs is None else list(cs.solution.strategies))
            cs = CoarseSolve(cgraph, more, cmesh, (t1 - t0) + (time.monotonic() - t2))
        except SolveFailed:
            pass
    t3 = time.monotonic()
    # the fine build stops where the fine solve would get less than its minimum
    fine_deadline = deadline - write - reprice - FALLBACK_MIN_SECONDS
    if not_started is None and t3 + estimate > fine_deadline:
        by_estimate = True
        not_started = (f"after the coarse mesh's graph and solve ({t3 - t0:.1f} s) the fine build, estimated at about "
                       f"{estimate:.0f} s ({ratio:.1f}x the size of the coarse mesh's graph by coarse.build_cost), would "
                       f"not end in the {max(0.0, fine_deadline - t3):.1f} s left before the re-pricing ({reprice:.1f} s) "
                       f"and writing; the coarse solve had the time instead")
        if cs is not None:
            # the coarse plan is the answer: its search goes on from its plan with the time the fine build and
            # solve would have had (new user 25's Gemma3 from its layout map, --time-limit 60: the coarse solve's
            # 0.5 s share was all it got, 42.6 s of the limit unused, a plan moving 1.9x the expert's bytes)
            spent = t3 - t2
            left = deadline - time.monotonic() - write
            if solver_share < 1:   # its share of the solves' time, less what its first search spent
                left = solver_share * (left - reprice + spent) - spent
            left = min(left, float(time_limit) - spent)
            if left >= FALLBACK_MIN_SECONDS:
                try:
                    more = solve(cgraph, time_limit=left, workers=workers, seed=seed, deterministic=False,
                                 hint=list(cs.solution.strategies))
                    cs = CoarseSolve(cgraph, more, cmesh, (t1 - t0) + (time.monotonic() - t2))
                except SolveFailed:
                    pass
    tried = None
    if by_estimate and solver_share >= 1 and cs is not None and _proven(cs.solution):
        # round 38 (new user 37's F5: `--mesh auto` on the DiT ended with 61 s of its 150 s unused, the fine build
        # estimated at 92 s against 78.5 s): the coarse plan is proven optimal in its space, so no solve has a use
        # for what is left, and the estimate is 0.49-1.47x the build (fine_build_estimate): the fine build is tried
        # in that time, stopped at the same deadline, and before it prices a pair where its edge matrices hold more
        # than that time prices (work_limit: pairs_per_second x the seconds), which bounds its memory too; stopped,
        # the coarse plan is the answer as before.  (Not under a later phase's share, solver_share < 1: that time
        # is auto_shard's memory guard's.)
        t_try = time.monotonic()
        if fine_deadline - t_try >= 2 * FALLBACK_MIN_SECONDS:
            tried = fine_deadline - t_try
            not_started = None
    if not_started is not None:
        graph, stopped = None, BuildStopped("strategies", 0, 0, 0.0, reason=f"not started: {not_started}")
    elif tried is not None:
        try:
            graph = build_graph(module, mesh, keep, memory_budget, deadline=fine_deadline,
                                work_limit=work_limit(tried, mesh))
            stopped = None
        except BuildStopped as exc:
            graph, stopped = None, exc
            exc.args = (f"tried in the {tried:.1f} s the coarse solve left after proving its plan optimal (its "
                        f"estimate, about {estimate:.0f} s, was longer), and stopped: {exc}",) + exc.args[1:]
    else:
        try:
            graph = build_graph(module, mesh, keep, memory_budget, deadline=fine_deadline)
            stopped = None
        except BuildStopped as exc:
            graph, stopped = None, exc
    t4 = time.monotonic()
    if stopped is not None:
        if cs is None:   # no coarse plan either: the fine graph after all (the command ends late)
            graph = build_graph(module, mesh, keep, memory_budget)
            return CoarseFirst(graph, None, seconds_fine_build=time.monotonic() - t3)
        return CoarseFirst(None, None, fallback=cs, stopped=stopped, seconds_fine_build=t4 - t3,
                           seconds_coarse_build=t1 - t0)
    return CoarseFirst(graph, None if cs is None else map_start(cs, graph), seconds_fine_build=t4 - t3,
                       seconds_coarse_build=t1 - t0)


def _proven(sol) -> bool:
    """Whether ``sol`` (a Solution) is proven optimal, or within the solver's gap limit
    (:data:`hloshard.solver.api.GAP_LIMIT`, where the solver stops by itself): a longer search of its space would not
    find a cheaper plan by more than that."""
    if getattr(sol, "status", None) == "optimal":
        return True
    obj, bound = getattr(sol, "objective", None), getattr(sol, "bound", None)
    if obj is None or bound is None:
        return False
    return float(obj) <= 0 or (float(obj) - float(bound)) / float(obj) <= GAP_LIMIT


def _search_behind(sol) -> bool:
    """Whether ``sol`` (a Solution of :func:`hloshard.autoshard.search.solve_graph`) is a trivial plan taken
    because the search found nothing cheaper (``stats["trivial"]["taken"]``, set without a memory limit)."""
    trivial = (getattr(sol, "stats", None) or {}).get("trivial")
    return bool(isinstance(trivial, dict) and trivial.get("taken"))


def deterministic_first(module, mesh: DeviceMesh, solve, keep: str, memory_budget, time_limit: float, workers: int,
                        seed: int, deterministic: bool = True, solver_share: float = 1.0) -> CoarseFirst:
    """Deterministic mode's fine build (no clock is read; also ``solve``'s under its default time limit, whose
    build the clock does not stop, with ``deterministic`` False for the coarse solve: a 3-instruction rank-12
    module at 2x2x2x2 built for 90 s at 1 GB before, new user 17): when ``mesh`` has a coarse mesh
    (:func:`coarse_mesh`), the fine graph is built under :func:`work_limit` of ``time_limit`` (and
    ``solver_share``: the graph serves ``time_limit / solver_share`` of solving), and when its
    edge matrices hold more pairs than that (:class:`BuildStopped` before any is priced) the coarse graph is
    solved with the whole ``time_limit`` by ``solve`` (deterministic) and its plan is the answer
    (``fallback``, ``stopped`` naming the limit), as :func:`coarse_first` falls back in wall-clock mode.
    Without a coarse mesh, or when the coarse solve finds nothing, the fine graph is built without a limit
    (as before: there is nothing else to return).  In deterministic mode without a memory budget the refined graph
    built is also given up for the coarse plan when its solve's fixed part, :func:`fine_solve_fixed`, passes the
    fine solve's share of ``time_limit`` (``1 -`` :data:`COARSE_SHARE`): its solve would cost more than the limit
    whatever its work budget (round 26); and, before any build, when :func:`solve_entries_estimate` (low on 12 of 13)
    already puts that fixed part past the share (round 27: the build is not made to be given up).  Returns a
    :class:`CoarseFirst` whose ``start`` is None (the caller's coarse start follows the fine build as it did)."""
    limit = work_limit(time_limit, mesh, solver_share) if coarse_mesh(mesh, module) is not None else None
    share = (1.0 - COARSE_SHARE) * float(time_limit)   # the fine solve's, after the coarse start's
    checked = limit is not None and deterministic and memory_budget is None
    predicted = det_fixed_seconds(solve_entries_estimate(module, mesh)) if checked else 0.0
    fine = None
    if predicted > det_fixed_seconds(FULL_MODEL_LIMIT) and predicted > share:
        # the check after the build (below), made before it from the module alone: the refined graph would be built
        # and then given up (round 26: keras-hub Gemma at time_limit 15, a 6.2 CPU-s build for nothing).  The
        # estimate is on the low side on 12 of 13 measured problems (MaxText 1.3x), so a graph it rules out is
        # nearly always one the check after the build would rule out
        stopped = BuildStopped("edges", 0, 0, 0.0, reason=(
            f"not built: its solve's fixed part (presolve, greedy and local search over about "
            f"{fine_solve_entries_note(predicted)}, estimated from the module before any build) is modelled at about "
            f"{predicted:.1f} CPU seconds, more than the {share:.1f} s of --time-limit {float(time_limit):g} the fine "
            f"solve gets in deterministic mode (coarse.solve_entries_estimate)"))
    else:
        try:
            graph = build_graph(module, mesh, keep, memory_budget, work_limit=limit)
            stopped = None
        except BuildStopped as exc:
            if limit is None:
                raise
            stopped = exc
            mode = "in deterministic mode" if deterministic else "(the default limit, which does not stop a build)"
            serves = "" if not 0 < solver_share < 1 else \
                f" over the solve's share {float(solver_share):g} (the later phases solve on the same graph)"
            stopped.args = (f"{stopped}: {pairs_per_second(mesh):,} per second of --time-limit {float(time_limit):g}"
                            f"{serves} {mode} (coarse.work_limit)",)
        if stopped is None:
            fixed = fine_solve_fixed(graph) if checked else 0.0
            if fixed <= share:
                return CoarseFirst(graph, None)
            # its first solve alone would cost more than the limit: its fixed part (presolve, greedy, local search,
            # the first Lagrangian rounds) is modelled past the fine solve's share (round 26: keras-hub Gemma's
            # refined graph, 46 M entries, cost 15.5 CPU-s to solve for 3 units of a limit of 4)
            fine = graph
            stopped = BuildStopped("edges", 0, 0, 0.0, reason=(
                f"built, but its solve's fixed part (presolve, greedy and local search over its "
                f"{fine_solve_entries_note(fixed)}) is modelled at about {fixed:.1f} CPU seconds, more than the "
                f"{share:.1f} s of --time-limit {float(time_limit):g} the fine solve gets in deterministic mode "
                f"(coarse.fine_solve_fixed)"))
    cs = coarse_solve(module, mesh, solve, keep, memory_budget, time_limit, workers, seed, deterministic)
    if cs is None:
        return CoarseFirst(fine if fine is not None else build_graph(module, mesh, keep, memory_budget), None)
    return CoarseFirst(None, None, fallback=cs, stopped=stopped)
