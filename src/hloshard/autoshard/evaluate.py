"""Evaluating a strategy choice: cost breakdown, peak memory, the most expensive edges, the implicit
reshardings, per-instruction rows, and :func:`evaluate_module` behind ``hloshard cost``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..cost.collectives import COLLECTIVE_KINDS
from ..cost.liveness import peak_usage
from ..cost.tpu_heap import spill_heap_slots
from ..cost.tpu_layout import hbm_peak, header_heap_bound, vmem_bytes
from ..costgraph import INFINITY, Problem, evaluate
from ..devices import whole_axis_alpha
from ..hlo.partitioned import is_per_device_program
from ..hlo.sharding import HloSharding
from ..mesh import DeviceMesh, refine_for_module
from ..solver.bounds import lower_bound
from ..solver.followers import expand_choice
from ..solver.heuristic import LARGE_NODES, LocalSearch, lagrangian_search
from ..solver.presolve import Infeasible, presolve
from ..strategy.base import TOKEN, is_array, is_mesh_spec
from .apply import instruction_sharding, leaf_spec
from .build import Graph, build_graph, chosen_operand_leaves, moved_leaf_shape, edge_buffers, processed_computations
from .reshard_cache import cached_reshards
from .resharder import _key
from .search import solve_graph
from .tiebreak import real_part
from ..cost.reshard import plan


@dataclass
class Evaluation:
    """Cost breakdown of one strategy choice (cost units; memory in bytes per device)."""

    compute: float
    communication: float
    resharding: float
    peak_memory: int
    peak_time: int
    node_cost: np.ndarray       # per node: (compute + comm) * weight
    edge_cost: np.ndarray       # per edge: chosen entry, less what XLA's reshard cache serves
    #: what the graph's pairwise edges charge beyond ``resharding`` for reshardings XLA's cache serves
    #: (:mod:`.reshard_cache`): ``total + cached`` is the solver's problem objective of the choice
    cached: float = 0.0
    #: bytes per device that libtpu's ``memory_analysis()`` is predicted to report beyond ``peak_memory``
    #: for a written plan planned for a TPU (``mesh.memory_device``): its HBM temp heap when a
    #: partition-offset scalar spills into it (:func:`hloshard.cost.tpu_heap.spill_heap_slots`, slots x
    #: 32,256 B, :func:`hloshard.cost.tpu_layout.header_heap_bound`); 0 elsewhere and where none is
    #: predicted.  Set by :func:`evaluate_module`; not part of ``peak_memory``, which a memory budget
    #: checks against its model limit (that limit already leaves the heap's bound,
    #: :func:`hloshard.cost.memory.model_limit`).
    tpu_heap: int = 0

    @property
    def reported_peak(self) -> int:
        """``peak_memory + tpu_heap``: the peak per device the TPU compiler is predicted to report (bytes)."""
        return int(self.peak_memory) + int(self.tpu_heap)

    @property
    def total(self) -> float:
        return self.compute + self.communication + self.resharding



def evaluate_choice(graph: Graph, choice) -> Evaluation:
    """Cost breakdown of ``choice`` (one strategy index per node of ``graph.problem``) on the full,
    unmerged cost graph, in float cost units (no integer rounding); peak memory in bytes per device.
    A resharding XLA's partitioner takes from its cache (the same value to the same layout for an earlier
    user: :func:`.reshard_cache.cached_reshards`) is counted once: ``resharding`` and ``edge_cost`` leave
    the repeats out, ``cached`` holds what the pairwise edges charge for them."""
    ctx = graph.ctx
    comp = comm = 0.0
    node_cost = np.zeros(len(graph.nodes))
    for v, g in enumerate(graph.nodes):
        st = g.strategies[int(choice[v])]
        w = ctx.weight(g.instr)
        comp += st.compute * w
        comm += st.comm * w
        node_cost[v] = (st.compute + st.comm) * w
    ecost = np.zeros(len(graph.edge_float))
    for e, ((u, v), m) in enumerate(zip(graph.problem.edges, graph.edge_float)):
        ecost[e] = m[int(choice[u]), int(choice[v])]
    pairwise = float(ecost.sum())
    for c in cached_reshards(graph, choice):   # XLA reshards one value to one layout once (reshard_cache)
        ecost[c.edge] = max(0.0, ecost[c.edge] - c.saved)
    peak, t = peak_memory(graph.problem, choice, graph)
    resharding = float(ecost.sum())
    return Evaluation(comp, comm, resharding, peak, t, node_cost, ecost, pairwise - resharding)



def peak_memory(problem: Problem, choice, graph: Graph | None = None) -> tuple[int, int]:
    """(peak bytes per device over all liveness points, the point where it is reached), by
    :func:`hloshard.cost.liveness.peak_usage` over the problem's intervals, plus, with ``graph``, the
    resharding temporaries of the choice (:func:`hloshard.autoshard.build.edge_buffers`)."""
    sizes = [int(u[int(c)]) for u, c in zip(problem.node_usages, choice)]
    ivs = problem.intervals
    n = len(sizes)
    if graph is not None:
        eiv, esz = edge_buffers(graph, choice)
        if eiv:
            ivs = np.concatenate([np.asarray(ivs, dtype=np.int64).reshape(-1, 2),
                                  np.asarray(eiv, dtype=np.int64).reshape(-1, 2)])
            sizes = sizes + esz
        device = getattr(graph, "memory_device", None)
        if device is not None and len(getattr(graph, "persistent", ())) == n:   # --device tpu-*: temporaries in VMEM first (cost/tpu_layout)
            iv = np.asarray(ivs, dtype=np.int64).reshape(-1, 2)
            sz = np.asarray(sizes, dtype=np.int64)
            keep = np.zeros(len(sz), dtype=bool)
            keep[:n] = graph.persistent
            temp, t = peak_usage(iv[~keep], sz[~keep])
            fixed = int(sz[keep & (iv[:, 1] > iv[:, 0])].sum())
            return hbm_peak(fixed, temp, vmem_bytes(device)), t
    return peak_usage(ivs, sizes)


def spilled_heap_bytes(module, graph: Graph, choice) -> int:
    """What libtpu's ``memory_analysis()`` is predicted to add to the model's peak for ``module`` written
    with ``choice`` on ``graph`` (bytes per device): :func:`hloshard.cost.tpu_layout.header_heap_bound` of
    :func:`hloshard.cost.tpu_heap.spill_heap_slots` (its asynchronous collectives counted from
    :func:`reshardings_of`, computed only where a spill is predicted); 0 unless the graph was built for a
    TPU (``graph.memory_device``)."""
    if getattr(graph, "memory_device", None) is None:
        return 0

    memo: dict = {}

    def steps() -> dict:   # computed once: both callbacks read it
        if "steps" not in memo:
            memo["steps"] = {name: [s.get("kind") for r in lst for s in r["steps"]]
                             for name, lst in reshardings_of(graph, choice).items()}
        return memo["steps"]

    def collectives() -> dict:   # per instruction: its strategy's collectives + its operands' resharding steps
        out: dict = {}
        for v, g in enumerate(graph.nodes):
            k = len(g.strategies[int(choice[v])].collectives or ())
            if k:
                out[g.instr.name] = out.get(g.instr.name, 0) + k
        for name, kinds in steps().items():
            k = sum(1 for kind in kinds if kind in COLLECTIVE_KINDS)
            if k:
                out[name] = out.get(name, 0) + k
        return out

    def partial_sums() -> dict:   # per instruction: its strategy's all-reduces / reduce-scatters
        out: dict = {}
        for v, g in enumerate(graph.nodes):
            st = g.strategies[int(choice[v])]
            split = {a for d in st.out if type(d) is tuple for a in d if type(a) is int} \
                if is_mesh_spec(st.out) else set()
            for c in st.collectives or ():
                if c.kind in ("all-reduce", "reduce-scatter"):
                    out.setdefault(g.instr.name, []).append((c.kind, tuple(c.mesh_axes),
                                                             bool(split & set(c.mesh_axes))))
        return out

    return header_heap_bound(spill_heap_slots(module, graph.mesh.num_devices, steps, collectives, partial_sums))


def top_edges(graph: Graph, choice, ev: Evaluation, k: int = 10) -> list[dict]:
    """The ``k`` most expensive resharding edges of a choice: src, dst, cost, shardings."""
    order = sorted(range(len(ev.edge_cost)), key=lambda e: (-ev.edge_cost[e], e))
    out = []
    minfo = graph.ctx.minfo
    for e in order[:k]:
        c = float(ev.edge_cost[e])
        if c <= 0:
            break
        for inst, leaf, g, w in graph.edge_info[e][:1]:
            src_spec = leaf_spec(graph, inst, leaf, choice)
            st = g.strategies[int(choice[g.node])]
            out.append({"from": inst.name, "to": g.instr.name, "cost": c,
                        "src_sharding": str(minfo.to_sharding(src_spec)) if src_spec is not None else None,
                        "dst_strategy": st.name})
    return out



def reshardings_of(graph: Graph, choice) -> dict:
    """Instruction name -> list of implicit reshardings on its operand edges (plan steps included); a
    resharding XLA takes from its cache (an earlier user's identical one: :mod:`.reshard_cache`) is not
    listed, and one the cache serves part-way (``CachedReshard.rest``) lists the rest, from that layout."""

    minfo = graph.ctx.minfo
    cached = {(c.node, c.index, id(c.operand), c.leaf): c.rest for c in cached_reshards(graph, choice)}
    out: dict = {}
    for v, g, i, inst, leaf, req, weight in chosen_operand_leaves(graph, choice):
        k = (v, i, id(inst), leaf)
        if req is None or k in cached and cached[k] is None:
            continue
        r = graph.ctx.resolve(inst, leaf)
        if r is TOKEN or r[0] is g:
            continue
        src = cached.get(k) or leaf_spec(graph, inst, leaf, choice)
        shape = moved_leaf_shape(graph.mesh, g.instr, inst, leaf)
        if src is None or not is_array(shape):
            continue
        if _key(src) == _key(req):
            continue
        a, b = minfo.to_sharding(src, len(shape.dims)), minfo.to_sharding(req, len(shape.dims))
        if a == b:
            continue
        if not is_mesh_spec(src) and a.is_manual or not is_mesh_spec(req) and b.is_manual:
            continue
        w = graph.ctx.weight(g.instr) * weight
        try:
            pl = plan(shape, a, b, graph.mesh)
            steps = [s.to_json() for s in pl.steps]
            cost = float(pl.total_cost)
        except Exception as exc:  # noqa: BLE001
            steps = [{"kind": "unplannable", "reason": str(exc)}]
            cost = 0.0
        if cost == 0.0 and not steps:
            continue
        out.setdefault(g.instr.name, []).append({
            "operand": inst.name, "leaf": leaf, "from": str(a), "to": str(b),
            "cost": cost * w, "steps": steps})
    return out



@dataclass
class CostResult:
    """``evaluate_module`` output: the module's own shardings evaluated under the cost model.

    ``method``: how the choices the annotations leave open were made -- ``"fixed"`` (nothing was left
    open: every node has one allowed strategy), ``"per-device"`` (the module is already a per-device
    program, priced as it runs: :func:`evaluate_as_written`), ``"exact"`` (the fast default's exact presolve
    reductions alone chose them: an optimal completion), ``"heuristic"`` (the fast default's heuristics:
    :func:`complete_choice`), ``"solver"`` (the full solver within a time limit); ``bound``: a proven
    lower bound (cost units) on the cheapest consistent completion, None when unknown;
    ``seconds_build`` / ``seconds_choose``: wall seconds of the cost-graph build and of the choice."""

    graph: Graph
    choice: list
    evaluation: Evaluation
    unannotated: list               # names of the counted instructions that carried no sharding
    status: str
    method: str = "solver"
    bound: float | None = None
    seconds_build: float = 0.0
    seconds_choose: float = 0.0
    #: how many instructions the input has, counted as :func:`counted_instructions` counts them
    instructions: int = 0

    @property
    def total_cost(self) -> float:
        return self.evaluation.total

    @property
    def gap(self) -> float | None:
        """(objective - bound) / objective, 0 when proven optimal, None without a bound.  The objective
        is the problem's (``total + cached``: the pairwise edges charge every user's resharding, also
        those XLA's reshard cache serves), the figure ``bound`` is a bound on; ``total`` itself may be
        below ``bound`` (a plan whose FSDP weights are gathered once for several dots)."""
        if self.status == "optimal":
            return 0.0
        if self.bound is None:
            return None
        t = self.evaluation.total + self.evaluation.cached
        return 0.0 if t <= 0 else max(0.0, (t - self.bound) / t)

    def completion_words(self, with_time: bool = True) -> str:
        """How the open choices were made, in words (for the reports of cost / diff / explain), e.g.
        ``chosen by greedy + local search + one message-passing round (the fast default; no CP-SAT) in
        1.2 s, within 1.4% of a proven lower bound``; ``with_time=False`` leaves the wall time out (the
        JSON reports, which stay byte-identical from run to run)."""
        took = f" in {self.seconds_choose:.1f} s" if with_time else ""
        if self.method == "fixed":
            return "the annotations fix every choice (nothing left to choose)"
        if self.method == "per-device":
            return ("already a per-device program (its collectives cross partitions): priced as it runs, "
                    "every instruction whole on each device, each collective by the axes its replica groups "
                    "cross")
        if self.method == "exact":
            return f"chosen by exact presolve reductions (the fast default; no CP-SAT){took}, proven optimal"
        how = ("chosen by greedy + local search + one message-passing round (the fast default; no CP-SAT)"
               if self.method == "heuristic" else "chosen by the full solver (CP-SAT) within --time-limit")
        how += took
        gap = self.gap
        if self.status == "optimal" or (gap is not None and gap <= 0.0):
            return how + ", proven optimal"
        if gap is None:
            return how + ", distance to the optimum unknown"
        pct = f"{gap:.0%}" if gap >= 0.01 else (f"{gap:.2%}" if gap >= 1e-4 else "0.01%")
        return how + f", within {pct} of a proven lower bound"

    @property
    def warnings(self) -> list:
        """Messages for the report (``graph.warnings``), e.g. each ``while`` whose trip count is a guess
        (``while NAME (line N): trip count unknown (REASON); assumed 100 iterations``)."""
        return self.graph.warnings


#: dual-ascent passes for the fast completion's lower bound (stops earlier once converged)
FAST_BOUND_PASSES = 32
#: joint-move sweeps per local search of the fast completion (a work limit: deterministic)
FAST_PAIR_SWEEPS = 2


@dataclass
class Completion:
    """What :func:`complete_choice` returns: ``strategies`` (one strategy index per node of
    ``graph.problem``), ``objective`` and ``bound`` in integer units of ``graph.problem`` (tie-break
    removed; ``bound`` a proven lower bound), ``status`` ('optimal' when objective == bound, else
    'feasible'), ``method``: 'fixed' (every node has one allowed strategy), 'exact' (presolve's exact
    reductions chose everything) or 'heuristic'."""

    strategies: list
    objective: int
    bound: int
    status: str
    method: str


def complete_choice(graph: Graph, progress=None, seed: int = 0, with_bound: bool = True) -> Completion | None:
    """The fast completion behind ``hloshard cost``: a cheap consistent choice of every strategy the
    kept annotations leave open, without CP-SAT.

    On ``graph.solver_problem`` (memory tie-break, followers merged): exact presolve
    (:func:`hloshard.solver.presolve.presolve`), then the solver's own heuristics
    (:mod:`hloshard.solver.heuristic`): breadth-first greedy, local search (single-node, forest and
    ``FAST_PAIR_SWEEPS`` sweeps of joint moves), one round of message passing (min-sum or TRW-S) with
    local search (:func:`~hloshard.solver.heuristic.lagrangian_search`, ``max_rounds=1``: no memory
    limit binds here); the lower bound is the dual ascent of :func:`hloshard.solver.bounds.lower_bound`
    (at most ``FAST_BOUND_PASSES`` passes, fewer once it stalls).  Work-limited, never clock-limited:
    the answer is deterministic.  ``progress(event)``: solver-style events (``phase``, ``objective``,
    ``bound`` in integer units, ``cost_scale``).  ``with_bound=False``: no dual ascent (the completion alone;
    ``bound`` is then the objective, a placeholder, not a proven bound).  Returns None when presolve proves
    no consistent choice exists or the heuristics find none (the caller then runs the full solver, which
    explains)."""
    problem = graph.solver_problem
    k = getattr(graph, "tie_break", 1)
    scale = graph.cost_scale

    def emit(phase, objective=None, bound=None):
        if progress is not None:
            progress({"phase": phase, "objective": real_part(objective, k), "bound": real_part(bound, k),
                      "cost_scale": scale})

    try:
        red = presolve(problem)
    except Infeasible:
        return None
    emit("presolve")
    if red.num_nodes == 0:
        method = "fixed" if all(int((np.asarray(c) < INFINITY).sum()) <= 1 for c in problem.node_costs) else "exact"
        positions = []
        bound = None
    else:
        method = "heuristic"
        ls = LocalSearch(red, seed=seed)
        ls.greedy()
        emit("greedy", ls.objective() + red.offset if ls.feasible() else None)
        big = red.num_nodes >= LARGE_NODES
        ls.improve(float("inf"), pairs=not big, max_pair_sweeps=FAST_PAIR_SWEEPS)
        best = best_obj = None
        if ls.feasible():
            best, best_obj = ls.s.copy(), ls.objective()
            emit("local search", best_obj + red.offset)
        ps, po, _mu = lagrangian_search(ls, float("inf"), incumbent=None if best is None else (best, best_obj),
                                        max_rounds=1, max_pair_sweeps=FAST_PAIR_SWEEPS)
        if po is not None and (best_obj is None or po < best_obj):
            best, best_obj = ps, po
        if best is None:
            return None
        emit("message passing", best_obj + red.offset)
        positions = best
    if red.num_nodes and not with_bound:
        bound = None
    elif red.num_nodes:
        target = best_obj + red.offset
        bound, dual = lower_bound(red, None, None, passes=8)
        done = 8
        while done < FAST_BOUND_PASSES and target - bound > 1e-4 * abs(target):
            b, dual = lower_bound(red, None, None, passes=8, dual=dual)
            done += 8
            stalled = b - bound <= 1e-5 * max(abs(b), 1)
            bound = max(bound, b)
            if stalled:
                break
        bound = max(bound, red.offset + sum(int(c.min()) for c in red.costs))
        emit("bound", best_obj + red.offset, bound)
    strategies = red.expand(positions)
    obj, feasible = evaluate(problem, strategies)
    if not feasible:
        return None
    if bound is None or bound >= obj:
        bound = obj
    objective, bound = real_part(obj, k), real_part(bound, k)
    # through the tie mappings too: a tied parameter's index is not its output's (solver.followers)
    return Completion(expand_choice(graph.classes, strategies), objective, bound,
                      "optimal" if bound >= objective else "feasible", method)


def counted_instructions(module) -> list:
    """The instructions the reports count (``N of M instructions``): every instruction of the
    computations that get shardings (the entry, loop bodies and conditions, called computations and
    branches: :func:`hloshard.autoshard.build.processed_computations`; not fusion or reducer bodies),
    each computation once as written in the input (before computations called from several sites are
    cloned per call site), parameters, tuples and get-tuple-elements included."""
    return [i for c in processed_computations(module) for i in c.instructions]


def module_mesh(module, mesh):
    """The mesh ``hloshard cost`` prices ``module`` on when the user's mesh is ``mesh``'s: the user's mesh
    (``mesh.user_shape``, its device order, alpha / beta per user axis) refined for ``module`` itself
    (:func:`hloshard.mesh.refine_for_module`: its shardings on whole axes, its reshapes' sub-axes).
    ``mesh`` itself when that is the same mesh (always so when ``mesh`` was derived from ``module``, as
    the commands derive it); a different refinement when ``mesh`` was refined for another module, e.g.
    ``solve``'s input, whose written output can need finer sub-axes (``--mesh 8``: the input's
    reshapes need 2x4, the written shardings 2x2x2).  So the re-evaluation of a written module prices it
    exactly as ``hloshard cost`` of the written file does."""
    user = user_mesh(mesh)
    if user is mesh:
        return mesh
    out = refine_for_module(user, module)
    return mesh if out == mesh else out


def user_mesh(mesh):
    """The user's mesh that ``mesh`` refines (its sub-axes merged back into the user's axes, each with
    the alpha / beta of its first sub-axis (on a device, the alpha of its whole ring:
    :func:`hloshard.devices.whole_axis_alpha`), the refinement note dropped), or ``mesh`` itself when it is
    not refined."""
    if not isinstance(mesh, DeviceMesh) or not getattr(mesh, "sub_axes", None):
        return mesh
    first: dict = {}
    for k, sub in enumerate(mesh.sub_axes):
        first.setdefault(sub.user_axis, k)
    user_shape = tuple(mesh.user_shape)
    if any(a not in first for a in range(len(user_shape))):
        return mesh
    alpha = [mesh.alpha[first[a]] for a in range(len(user_shape))]
    if mesh.roofline_prices is not None:   # priced on a device: sub-axes carry their own ring's latency
        for a, size in enumerate(user_shape):
            k = max(range(mesh.ndim), key=lambda k: (mesh.sub_axes[k].user_axis == a, mesh.sub_axes[k].size))
            if mesh.sub_axes[k].size > 1:
                alpha[a] = whole_axis_alpha(mesh.alpha[k], size, mesh.sub_axes[k].size)
    user = DeviceMesh(user_shape, mesh.device_ids.ravel(), alpha,
                      [mesh.beta[first[a]] for a in range(len(user_shape))], axis_names=mesh.user_names)
    user.source = mesh.source
    user.notes = [n for n in mesh.notes if not n.startswith(f"mesh {user} refined internally")]
    user.max_padding, user.memory_budget = mesh.max_padding, mesh.memory_budget
    user.divisible_io = getattr(mesh, "divisible_io", False)
    user.roofline_prices = mesh.roofline_prices
    user.memory_device = getattr(mesh, "memory_device", None)
    if mesh.user_levels is not None:   # an axis spanning nodes keeps the links inside it
        user.apply_levels(mesh.user_levels)
    return user


def evaluate_module(module, mesh, time_limit: float | None = None, seed: int = 0, progress=None,
                    deterministic: bool = True, refine: bool = True) -> CostResult:
    """Evaluate the shardings ``module`` carries (every annotation kept, as ``--keep-shardings all``).

    An annotated instruction keeps exactly its sharding; where several strategies produce it (e.g. a dot
    whose output layout arises with or without an all-reduce) and for unannotated instructions, a
    cheap consistent choice is taken: with ``time_limit`` None (the default) the fast completion of
    :func:`complete_choice` (deterministic; its gap to a proven lower bound in ``CostResult.bound``),
    with ``time_limit`` seconds the build and the full solver (:func:`hloshard.autoshard.solve.solve_graph`,
    CP-SAT included; ``deterministic`` as for ``solve``) share that limit: a build that passes it raises
    :class:`~hloshard.autoshard.build.BuildStopped` (exit 3).  ``progress(event)``: solver-style progress
    events, ``{"phase": "building"}`` first.  Costs in cost units, memory in bytes per device.
    The module is priced on :func:`module_mesh` (``mesh`` itself unless ``mesh`` was refined for
    another module; ``refine=False``: on ``mesh`` as given).  Raises InputError for annotations that do
    not fit the mesh / shapes, SolveFailed when no consistent choice exists."""
    t0 = time.monotonic()
    if refine:
        mesh = module_mesh(module, mesh)
    if progress is not None:
        progress({"phase": "building"})
    counted = counted_instructions(module)    # before build_graph clones called computations
    unannotated = [i.name for i in counted if i.sharding is None]
    # with a time limit the build shares it: past it, BuildStopped (exit 3) rather than an unbounded build
    # (a new user's 919-instruction module on a 4x4x4x4 mesh built for > 300 s under --time-limit 30)
    graph = build_graph(module, mesh, keep="all", deadline=None if time_limit is None else t0 + time_limit,
                        as_given=True)
    t1 = time.monotonic()
    done = None if time_limit is not None else complete_choice(graph, progress=progress, seed=seed)
    if done is not None:
        choice, status = done.strategies, done.status
        method = done.method
        bound = float(done.bound) * graph.cost_scale
    else:
        # what the build left of the limit, at least a tenth of it (the solver needs some time to return
        # a first consistent choice; deterministic mode counts work, not seconds)
        left = max(time_limit - (t1 - t0), 0.1 * time_limit)
        sol = solve_graph(graph, time_limit=left, workers=1, seed=seed,
                          deterministic=deterministic, progress=progress)
        choice, status, method = list(sol.strategies), sol.status, "solver"
        bound = None if sol.bound is None else float(sol.bound) * graph.cost_scale
    if progress is not None:
        progress({"phase": "pricing"})
    ev = evaluate_choice(graph, choice)
    ev.tpu_heap = spilled_heap_bytes(module, graph, choice)
    return CostResult(graph, choice, ev, unannotated, status, method, bound, t1 - t0, time.monotonic() - t1,
                      len(counted))





def replicated_evaluation(module, mesh) -> CostResult:
    """``evaluate_module`` of ``module`` with every instruction of every computation annotated
    replicated (the module is restored before returning, also on an error): a per-device program as it
    runs, whole on every device, each written collective priced by the mesh axes its replica groups
    cross.  ``unannotated`` keeps the instructions the input left without a sharding.  Priced on the
    user's mesh (:func:`user_mesh`): nothing is split, so no sub-axes are needed (a group along part of
    an axis costs over that axis' link either way, :func:`hloshard.strategy.collectives.group_axes`)."""
    counted = counted_instructions(module)
    unannotated = [i.name for i in counted if i.sharding is None]
    saved = [(i, i.sharding) for i in module.all_instructions()]
    try:
        for instr, _ in saved:
            if instr.shape.is_tuple:
                n = max(1, len(instr.shape.leaves()))
                instr.sharding = HloSharding.tuple([HloSharding.replicated()] * n)
            else:
                instr.sharding = HloSharding.replicated()
        result = evaluate_module(module, user_mesh(mesh), refine=False)
    finally:
        for instr, s in saved:
            instr.sharding = s
    result.unannotated = unannotated
    return result


def evaluate_as_written(module, mesh, time_limit: float | None = None, seed: int = 0, progress=None,
                        deterministic: bool = True) -> CostResult:
    """What ``cost``, ``diff`` and ``explain`` price: :func:`evaluate_module` of a logical module (its
    open choices completed), and a per-device program (:func:`is_per_device_program`: its shapes are
    already one device's shard) as it runs -- :func:`replicated_evaluation`, ``method`` ``"per-device"``
    -- since splitting a shard again is not what the program does.  Same arguments, units and errors
    as :func:`evaluate_module` (``time_limit`` and ``deterministic`` are unused for a per-device
    program: nothing is left to choose)."""
    if is_per_device_program(module):
        if progress is not None:
            progress({"phase": "building"})
        result = replicated_evaluation(module, mesh)
        result.method = "per-device"
        return result
    return evaluate_module(module, mesh, time_limit=time_limit, seed=seed, progress=progress,
                           deterministic=deterministic)


def per_instruction_costs(graph: Graph, choice, ev: Evaluation) -> list[dict]:
    """One row per instruction of the schedule: name, opcode, sharding, cost (its nodes' compute +
    communication plus the resharding on its incoming edges, cost units), reshardings (plan steps)."""
    resh = reshardings_of(graph, choice)
    node_of: dict = {}
    for v, g in enumerate(graph.nodes):
        node_of.setdefault(id(g.instr), []).append(v)
    incoming: dict = {}
    for e, ((u, v), m) in enumerate(zip(graph.problem.edges, graph.edge_float)):
        for inst, leaf, g, w in graph.edge_info[e][:1]:
            incoming[id(g.instr)] = incoming.get(id(g.instr), 0.0) + float(ev.edge_cost[e])
    rows = []
    for instr in graph.schedule:
        c = sum(float(ev.node_cost[v]) for v in node_of.get(id(instr), []))
        c += incoming.get(id(instr), 0.0)
        rows.append({"name": instr.name, "opcode": instr.opcode,
                     "sharding": str(instruction_sharding(graph, instr, choice)),
                     "cost": c, "reshardings": resh.get(instr.name, [])})
    return rows

