"""``--mesh auto``: solve a module on every mesh shape of its device count and keep the cheapest.

The candidates are every ordered factorization of N devices into 1 to 3 axes of size > 1 (8: ``8``,
``2x4``, ``4x2``, ``2x2x2``), plus the module's own mesh (its Shardy mesh, else the mesh its user
shardings imply) when that is not one of them. Each candidate is refined for the module as every
command's mesh is (:meth:`hloshard.mesh.DeviceMesh.for_module`); candidates refined onto the same
internal mesh are solved once, as the twin whose solve has a coarser space to start from where one has
(:func:`hloshard.autoshard.coarse.coarse_mesh`: 2x4 refined to 2x2x2 starts from 2x4 unrefined, the 1-D mesh refined
onto the same 2x2x2 from nothing), and a search whose candidates are all one problem gives it the whole limit in
wall-clock mode (it is then solved as ``solve --mesh <it> --time-limit`` solves it). They are solved with :func:`hloshard.autoshard.solve_module` on the one
module, without writing anything into it (``apply=False``; only the picked candidate's choice is
written, :func:`hloshard.autoshard.solve.apply_solution`). The cheapest strategy space (:func:`_work`)
is solved first, in this process, with ``time_limit / candidates``; its plan is every later candidate's
known start (:func:`_carried`: mapped by :func:`hloshard.autoshard.coarse.map_choice`, so a finer mesh
whose solve has no time to improve on it reports that plan, not a trivial one: new user 22's CLIP at
2x4 / 4x2 / 2x2x2 ranked by the replicated plan) and, in wall-clock mode, their coarse solve where it is
their coarse mesh (``solve_module(coarse=)``; not built or solved again).  A remaining candidate whose
predicted build time (the rate measured on the first build times its size by :func:`hloshard.autoshard.coarse.build_cost`, the fine build's estimate) would exceed the time
limit is skipped and reported as such, and so is one not started before the limit ends (each candidate
gets at least 1 s: 4,096 devices have 67 candidates); the others share what is left of the limit, each
given its part when it starts (:class:`_Schedule`: one that ends early leaves its time to the next), and
with ``workers >= 2`` they are solved ``workers`` at a time: the candidate of the largest build in this
process (its graph kept), the others one after another in ``workers - 1`` forked processes that inherit
the parsed module (:func:`_solve_in_parallel`; the builds are single-threaded Python, so this is what the
second core buys): a candidate solved elsewhere is rebuilt here only when it is picked. With
``deterministic`` nothing depends on measured time: every distinct candidate is solved, each with
``time_limit / candidates`` (deterministic) seconds, and the answer does not depend on how many run
at once.
The best trial is the one whose written shardings cost least (the objective ``hloshard cost``
reports), ties broken by lower peak memory per device, then by fewer mesh axes. Costs of different meshes are comparable because alpha and beta are per axis and the
same for every axis (one value each, default 1.0).

With a device profile (``device``, ``solve --mesh auto --device NAME``) each candidate is priced as
``--mesh SHAPE --device NAME`` prices it (:func:`hloshard.devices.time_scale`): per axis the alpha /
beta of the link it crosses (the innermost axes up to the device's devices per node on the fast
links, :func:`hloshard.devices.axis_links`) and compute by the device's roofline
(:class:`hloshard.cost.roofline.RooflinePrices`).  One cost unit is then the same length of time on
every candidate (it depends on the device and the module's matmul dtype only), so the objectives
compare as seconds: :attr:`MeshSearch.seconds_per_unit` turns them into seconds
(``objective_s`` in the JSON, the table's step time column).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import multiprocessing
import os

from .autoshard import solve_module
from .autoshard.build import build_graph
from .autoshard.coarse import build_cost, layout_counts  # the one build estimate
from .autoshard.coarse import CoarseSolve, coarse_mesh, map_choice
from .autoshard.evaluate import evaluate_choice
from .autoshard.solve import REPRICE_SHARE, SolveResult, apply_solution
from .devices import get_profile
from .errors import SolveFailed, UsageError
from .hlo import parse_module
from .mesh import DeviceMesh, _sharding_device_count, infer_mesh, module_named_mesh
from .mesh_setup import priced_mesh

__all__ = ["MeshTrial", "MeshSearch", "candidate_shapes", "auto_device_count", "search_meshes"]


@dataclass
class MeshTrial:
    """One candidate mesh: ``label`` (``2x4``, or ``module mesh 2x4`` for the module's own), the
    mesh solved on (refined), ``status`` ('optimal' | 'feasible' | 'infeasible' | 'timeout'),
    ``objective`` (cost units, None when it failed or was not solved: status 'same' when the
    candidate refines onto the internal mesh of another one, whose figures stand for it, 'skipped'
    when its build would not fit in the time limit), ``peak_memory`` (bytes per device), ``gap``
    (fraction or None), ``seconds`` (build + solve), ``message`` (why it failed), and the solved
    ``module`` / ``result`` (:class:`hloshard.autoshard.SolveResult`) when it succeeded."""

    label: str
    mesh: DeviceMesh
    status: str = "infeasible"
    objective: float | None = None
    peak_memory: int | None = None
    gap: float | None = None
    seconds: float = 0.0
    message: str | None = None
    same_as: str | None = None
    module: object = None
    result: object = None
    #: a candidate solved in a forked process: its choice and Solution (:func:`_child`), from which
    #: :func:`_rebuild` makes ``result`` if it is picked
    remote: dict | None = None
    #: with a device: the :class:`hloshard.devices.TimeScale` this candidate was priced with
    scale: object = None

    def to_json(self) -> dict:
        out = {"mesh": self.label, "internal_mesh": str(self.mesh), "status": self.status,
               "objective": None if self.objective is None else round(self.objective, 6),
               "peak_memory_per_device": self.peak_memory,
               "gap": None if self.gap is None else round(self.gap, 6),
               "seconds": round(self.seconds, 3), "message": self.message, "same_as": self.same_as}
        if self.scale is not None:   # --device: the objective in seconds, and each axis' link
            out["objective_s"] = None if self.objective is None else float(f"{self.objective_seconds():.6g}")
            out["axis_links"] = list(self.scale.links)
            out["axis_link_names"] = [self.scale.profile.link_name(c) for c in self.scale.links]
        return out

    def objective_seconds(self) -> float | None:
        """The objective in seconds (with a device; None without one or without an objective)."""
        if self.scale is None or self.objective is None:
            return None
        return self.scale.seconds(self.objective)


@dataclass
class MeshSearch:
    """All trials in candidate order, the index of the best one, and the device count searched."""

    num_devices: int
    trials: list = field(default_factory=list)
    best_index: int = -1

    @property
    def best(self) -> MeshTrial:
        return self.trials[self.best_index]

    @property
    def seconds_per_unit(self) -> float | None:
        """With a device: the length of one cost unit in seconds (the same on every candidate)."""
        scale = next((t.scale for t in self.trials if t.scale is not None), None)
        return None if scale is None else scale.seconds_per_unit

    def to_json(self) -> dict:
        out = {"num_devices": self.num_devices, "best": self.best.label,
               "trials": [t.to_json() for t in self.trials]}
        if self.seconds_per_unit is not None:
            out["units"] = "objective: cost units; objective_s: seconds (the device's time model)"
        return out


def candidate_shapes(n: int, max_axes: int = 3) -> list[tuple[int, ...]]:
    """Every ordered factorization of ``n`` into 1..``max_axes`` factors > 1, fewer axes first, then
    lexicographic (``12``: (12,), (2, 6), (3, 4), (4, 3), (6, 2), (2, 2, 3), (2, 3, 2), (3, 2, 2)).
    ``n == 1`` gives [(1,)]."""
    if n == 1:
        return [(1,)]
    out = []

    def rec(rest, acc):
        if rest == 1:
            if acc:
                out.append(tuple(acc))
            return
        if len(acc) == max_axes:
            return
        for f in range(2, rest + 1):
            if rest % f == 0:
                rec(rest // f, acc + [f])

    rec(n, [])
    return sorted(set(out), key=lambda s: (len(s), s))


def auto_device_count(module, devices: int | None = None) -> int:
    """N for ``--mesh auto``: ``devices`` (``--devices``), else the module's num_partitions (> 1),
    else the device count of its user shardings. Raises UsageError when none is known or when
    ``devices`` contradicts num_partitions."""
    n = getattr(module, "num_partitions", None)
    stated = n is not None and int(n) > 1
    if devices is not None:
        if stated and int(devices) != int(n):
            raise UsageError(f"--devices {devices} but the module has num_partitions={int(n)}")
        return int(devices)
    if stated:
        return int(n)
    count = _sharding_device_count(module)
    if count is None:
        raise UsageError("--mesh auto needs the device count: pass --devices N (the module states no "
                         "num_partitions and has no tiled sharding)")
    return count


def _single(value, flag: str) -> str | None:
    if value is None:
        return None
    parts = [p.strip() for p in str(value).split(",")]
    if len(parts) != 1:
        raise UsageError(f"with --mesh auto, {flag} takes one value (used for every axis of every candidate "
                         f"mesh), got {value!r}")
    return parts[0]


def _work(counts: list[int]) -> int:
    """A cheap proxy for the cost-graph build, used to order the candidates: the sum over array
    instructions of (number of enumerated layouts)^2 (resharding matrices were the build's bulk)."""
    return sum(n * n for n in counts)


def search_meshes(module, filename: str, devices: int | None = None, alpha=None, beta=None,
                  keep: str = "io", memory_budget: int | None = None, max_padding: float | None = None,
                  time_limit: float = 60.0, workers: int = 2, seed: int = 0, deterministic: bool = False,
                  progress=None, pin_operands: bool = False, device: str | None = None,
                  local_moves: bool = False) -> MeshSearch:
    """Solve ``module`` (an IR module, or HLO text parsed here) on every candidate mesh (module
    docstring), pick the best and write its shardings into the module (in place).

    ``alpha`` / ``beta``: one value (string or float) for every axis, default 1.0. ``time_limit``:
    seconds for the whole search (builds included; the first candidate always runs, each solve gets
    at least 1 s). ``pin_operands``: as :func:`hloshard.autoshard.solve_module`. ``device``: a device
    profile name or TOML file (module docstring; with ``alpha`` / ``beta`` a UsageError; the memory
    budget is the caller's, ``solve`` defaults it to the device's HBM). Candidates are
    compared by the solver's own objective; only the one picked is re-evaluated as written
    (:func:`hloshard.autoshard.solve.reevaluate_written`: what ``hloshard cost`` says of the output).
    Raises UsageError for a bad device count or per-axis alpha/beta, and SolveFailed (exit 3) when
    no candidate has a feasible solution (the message lists each mesh's reason); the module is then
    unchanged but for :func:`hloshard.hlo.callgraph.flatten_call_graph`.

    With a device whose nodes ``n`` fills two or more of (:func:`cluster_shape`), the cluster's own shape
    (``2x8`` on 16 x h100-sxm, axes marked dcn / ici) is a candidate (labelled ``nodes x devices per node``)
    that another candidate refined onto the same priced mesh is ``same as``, never the other way round, that
    starts first after the head and that is never skipped for its build estimate (its own solve stops a fine build
    that would not fit and writes its coarse plan, coarse to fine) (new user 25b, finding 10: 2x8 was dropped as the
    same as 2x2x4, which was then skipped, and a nearly replicated 4x2x2 plan was written)."""
    first = parse_module(module, filename) if isinstance(module, str) else module
    n = auto_device_count(first, devices)
    a, b = _single(alpha, "--alpha"), _single(beta, "--beta")
    if device is not None and (a is not None or b is not None):
        raise UsageError("--alpha / --beta and --device both set the link costs: pass one of them")
    if n > 1 << 16:
        raise UsageError(f"--mesh auto: {n:,} devices; at most 65,536 are supported")
    specs = [("x".join(map(str, s)), "x".join(map(str, s))) for s in candidate_shapes(n)]
    own = module_named_mesh(first)
    if own is not None and math.prod(own[1]) == n:
        own_shape, own_spec = tuple(own[1]), ",".join(f"{k}={v}" for k, v in zip(own[0], own[1]))
    else:
        own_shape = infer_mesh(first, n)
        own_spec = None if own_shape is None else "x".join(map(str, own_shape))
    if own_shape is not None:
        label = "x".join(map(str, own_shape))
        entry = (f"{label} (module mesh{'' if own_spec == label else ' ' + own_spec})", own_spec)
        shapes = [s for s, _ in specs]
        if label in shapes:
            specs[shapes.index(label)] = entry
        else:
            specs.append(entry)
    cluster = cluster_shape(n, device)
    cluster_i = None
    if cluster is not None:   # the cluster's own shape, its links marked: nodes x devices per node
        label = "x".join(map(str, cluster))
        entry = (f"{label} (nodes x devices per node)", label)
        shapes = [sp for sp, _ in specs]
        if label in shapes:
            cluster_i = shapes.index(label)
            specs[cluster_i] = entry
        else:
            cluster_i = len(specs)
            specs.append(entry)
    meshes = []
    for k, (label, spec) in enumerate(specs):
        ndim = spec.count("x") + 1 if "=" not in spec else spec.count(",") + 1
        if device is None:
            mesh = DeviceMesh.for_module(first, spec, None, None if a is None else [a] * ndim,
                                         None if b is None else [b] * ndim)
            scale = None
        else:
            mesh, scale = _timed_mesh(first, spec, device, ("dcn", "ici") if k == cluster_i else None)
        mesh.source = "auto"
        mesh.with_policy(max_padding, memory_budget)
        meshes.append((label, mesh, scale))
    scales = [sc for _, _, sc in meshes]
    meshes = [(label, mesh) for label, mesh, _ in meshes]
    counts = [layout_counts(first, mesh) for _, mesh in meshes]
    work = [_work(c) for c in counts]
    trials: list = [None] * len(meshes)
    start = time.monotonic()
    order = sorted(range(len(meshes)), key=lambda i: (work[i], i))
    distinct = []
    # candidates refined onto the same internal mesh with the same link costs: the same problem, solved once; the
    # cluster's own shape first, so that it is the one solved and the others are the same as it
    coarser: dict = {}   # candidate -> whether its solve has a coarser space to start from (coarse.coarse_mesh)

    def has_coarser(i: int) -> bool:
        if i not in coarser:
            coarser[i] = coarse_mesh(meshes[i][1], first) is not None
        return coarser[i]

    for i in ([cluster_i] if cluster_i is not None else []) + [i for i in order if i != cluster_i]:
        label, mesh = meshes[i]
        trial = trials[i] = MeshTrial(label, mesh, scale=scales[i])
        k = next((k for k, j in enumerate(distinct) if _same_problem(trials[j].mesh, mesh)), None)
        if k is not None and distinct[k] != cluster_i and not has_coarser(distinct[k]) and has_coarser(i):
            # coarse to fine among twins (new user 33 F4): a candidate whose solve starts from a coarser space (its
            # user mesh unrefined: 2x4 refined to 2x2x2 starts from the plan of 2x4 itself) stands for twins that
            # have none (the 1-D mesh refined onto the same 2x2x2): NeoX's 8, 2x4, 4x2 and 2x2x2 were all solved
            # as 8, on the refined graph alone, 22% above what `--mesh 2x4` writes from its coarse plan
            j, distinct[k] = distinct[k], i
            for t in [trials[j]] + [t for t in trials if t is not None and t.same_as == trials[j].label]:
                t.status, t.same_as = "same", label
                t.message = f"refined to the same internal mesh {mesh} as {label}"
            continue
        if k is not None:
            twin = trials[distinct[k]]
            trial.status, trial.same_as = "same", twin.label
            trial.message = f"refined to the same internal mesh {mesh} as {twin.label}"
        else:
            distinct.append(i)
    distinct.sort(key=lambda i: (work[i], i))
    options = dict(keep=keep, memory_budget=memory_budget, workers=workers, seed=seed, deterministic=deterministic,
                   pin_operands=pin_operands)
    # the cheapest candidate first, in this process: its build measures the rate for the skip rule
    head = distinct[0]
    share = max(1.0, float(time_limit) / len(order))
    if len(distinct) == 1 and not deterministic:
        # every candidate is the same problem (NeoX: 8, 2x4, 4x2, 2x2x2 all refined to one 2x2x2): it is solved as
        # `solve --mesh <it> --time-limit T` solves it, the whole limit its deadline (coarse to fine, the fine build
        # stopped where it would not fit, the re-pricing reserve kept), not with 1/4 of it and the rest unused
        end = start + float(time_limit)
        _record(trials[head], _solve_one(first, meshes[head][1], float(time_limit), options, progress, end, end,
                                         reprice=True), first)
    else:
        _record(trials[head], _solve_one(first, meshes[head][1], share, options, progress), first)
    if trials[head].result is not None:   # coarse to fine across the candidates: the head's plan is a start of each
        options["known"] = _carried(trials[head].result)
        if not deterministic and memory_budget is None:   # and, where it is their coarse mesh, their coarse solve
            done = trials[head].result
            options["coarse"] = CoarseSolve(done.graph, done.solution, meshes[head][1], trials[head].seconds,
                                            done.seconds_build)
    # the builds' sizes by the fine build's estimate (coarse.build_cost, round 27; the layouts' sum before: 0.4-9.3x
    # the measured builds, Llama 3.1 8B's 2x2x2 build put at 14.6x its 1-D build when it took 1.6x), scaled by the
    # head's measured build
    sizes = [build_cost(first, mesh) for _, mesh in meshes]
    rate = trials[head].result.seconds_build / sizes[head] \
        if trials[head].result is not None and sizes[head] else None
    elapsed = time.monotonic() - start
    run = []
    for i in distinct[1:]:
        predicted = 0.0 if rate is None else rate * sizes[i]
        if i != cluster_i and not deterministic and rate is not None and elapsed + predicted > time_limit:
            trials[i].status = "skipped"
            trials[i].message = (f"building its cost graph would take about {predicted:.0f} s "
                                 f"({sizes[i] / sizes[head]:.1f}x the size of {meshes[head][0]}'s by "
                                 f"coarse.build_cost), "
                                 f"beyond the time limit")
        else:
            run.append(i)
    if cluster_i in run:   # the cluster's shape starts first after the head: its turn never comes too late
        run.remove(cluster_i)
        run.insert(0, cluster_i)
    jobs = _jobs(workers, len(run))
    # with forked processes, the candidate of the largest build is solved here (its graph kept), the others in
    # jobs - 1 lanes of forked processes: only theirs are rebuilt here when picked, so only theirs are reserved
    # the cluster's shape is solved here: it may write its coarse plan, whose graph a rebuild would not give back
    here = (cluster_i if cluster_i in run else max(run, key=lambda i: (sizes[i], -i))) if jobs > 1 else None
    if deterministic:   # reproducible: no decision on measured time; every candidate gets an equal share
        reserve = 0.0
        deadline = None
    else:
        longest = max((rate * sizes[i] for i in run if i != here), default=0.0) if rate is not None else 0.0
        reserve = final_reserve(trials[head].result, longest if jobs > 1 else 0.0)
        # candidates not started by then are skipped; the picked one's writing and re-pricing come after it
        deadline = start + float(time_limit) - reserve
    schedule = _Schedule(float(time_limit) / len(order) if deterministic else None, deadline)
    if jobs > 1:
        _solve_in_parallel(first, meshes, run, here, schedule, options, jobs, trials, progress)
    else:
        for k, i in enumerate(run):
            share, end = schedule.next(len(run) - k)
            _record(trials[i], _solve_one(first, meshes[i][1], share, options, progress, deadline, end), first)
    out = MeshSearch(n, trials)
    ok = [i for i, t in enumerate(out.trials) if t.objective is not None]
    if not ok:
        reasons = "; ".join(f"{t.label}: {t.message}" for t in out.trials)
        err = SolveFailed(f"--mesh auto: no mesh of {n} devices has a feasible solution ({reasons})")
        err.status = "timeout" if all(t.status == "timeout" for t in out.trials) else "infeasible"
        raise err
    out.best_index = min(ok, key=lambda i: (out.trials[i].objective, out.trials[i].peak_memory,
                                            out.trials[i].mesh.ndim, i))
    best = out.trials[out.best_index]
    if best.result is None:   # solved in a forked process
        best.result = _rebuild(best, memory_budget, keep)
    apply_solution(best.result, best.module, best.mesh, pin_operands, memory_budget, local_moves=local_moves,
                   deadline=None if deterministic else start + float(time_limit))
    if best.result.written is not None:
        best.objective = float(best.result.written.evaluation.total)
        best.peak_memory = int(best.result.written.evaluation.peak_memory)
    return out


def final_reserve(head_result, rebuild: float) -> float:
    """Seconds kept from ``--mesh auto``'s limit for what follows the candidates' solves: the picked
    plan written and priced as ``hloshard cost`` prices it (``autoshard.solve.REPRICE_SHARE`` x the first
    candidate's build, the cheapest strategy space: the re-pricing reserve ``solve_module`` keeps, from
    its 1-D build) and, when candidates are solved in forked processes, ``rebuild``: the picked one's
    cost graph built again here (the caller's estimate of the longest such build).  0 without a first
    result (nothing measured)."""
    if head_result is None:
        return float(rebuild)
    return REPRICE_SHARE * float(head_result.seconds_build) + float(rebuild)


def _timed_mesh(module, spec: str, device: str, marks=None):
    """``(DeviceMesh, TimeScale)`` of the candidate ``spec`` priced on ``device`` (module docstring), as
    ``--mesh SPEC --device`` prices it (:func:`hloshard.mesh_setup.priced_mesh`: the links the default rule
    gives the user's axes, or ``marks``; the device's roofline prices and memory model)."""
    return priced_mesh(module, spec, get_profile(device), None, marks)


def cluster_shape(n: int, device: str | None) -> tuple[int, int] | None:
    """The cluster's own shape for ``n`` devices of ``device``: ``(nodes, devices per node)`` when ``n`` fills
    two or more whole nodes (16 x h100-sxm: ``(2, 8)``, its axes InfiniBand and NVLink), else None (no device,
    one node or slice, or a partial node)."""
    if device is None:
        return None
    per = int(get_profile(device).devices_per_node)
    if per < 2 or n <= per or n % per:
        return None
    return n // per, per


def _same_problem(a: DeviceMesh, b: DeviceMesh) -> bool:
    """Whether two candidates are one problem: the same internal mesh (shape and device order) with the same
    link costs (alpha / beta per internal axis: with a device, an axis' link follows the user's axes)."""
    if a.shape != b.shape or not bool((a.device_ids == b.device_ids).all()):
        return False
    # the same latency reached through different user axes differs in the last bits (a sub-axis' share of a ring)
    return all(math.isclose(x, y, rel_tol=1e-9) for x, y in zip(tuple(a.alpha) + tuple(a.beta),
                                                                 tuple(b.alpha) + tuple(b.beta)))


def _solve_one(module, mesh, share: float, options: dict, progress=None, deadline: float | None = None,
               end: float | None = None, reprice: bool = False) -> dict:
    """Solve one candidate without writing into ``module``: a dict with the solve result or the failure.
    ``deadline`` (a ``time.monotonic()`` instant, wall-clock mode): a candidate not started by then is
    skipped (status ``"skipped"``), so the search's candidates cannot run past the limit one floor share
    at a time.  ``end`` (wall-clock mode, :class:`_Schedule`): the instant this candidate's builds and solves
    end by (its coarse build, coarse solve, fine build and fine solve fit in it, as ``solve --time-limit``'s
    fit in the command's limit); default ``deadline``.  ``reprice``: the candidate keeps its own re-pricing reserve
    before ``end`` (the only distinct candidate: the search keeps no :func:`final_reserve` after it)."""
    t0 = time.monotonic()
    if deadline is not None and t0 >= deadline:
        return {"status": "skipped", "seconds": 0.0,
                "message": "the time limit had passed before its turn came (not solved)"}
    if end is None:
        end = deadline
    try:
        # in wall-clock mode the candidate's own solve ends by its end (as `solve --time-limit` does: its fine
        # build stopped, its solver cut, when its build runs longer than the first candidate's rate predicted);
        # no re-pricing reserve is kept in it: the search keeps one for the plan it picks (final_reserve).  Under a
        # memory budget (every --device search: the device's HBM) solve_module keeps it all the same, since its
        # unbudgeted first step re-prices its written plan (solve._unbudgeted_first), and solves its own coarse mesh
        timed = dict(deadline=end, stop_build=True) if end is not None else {}
        result = solve_module(module, mesh, time_limit=share, progress=progress, reevaluate=False, apply=False,
                              reprice_reserve=bool(reprice),
                              **timed, **options)
    except SolveFailed as exc:
        return {"status": getattr(exc, "status", "infeasible"), "message": str(exc),
                "seconds": time.monotonic() - t0}
    # the coarse mesh's plan when its fine build was not started or stopped: said under the table
    return {"status": result.solution.status, "result": result, "seconds": time.monotonic() - t0,
            "message": getattr(result.graph, "coarse_fallback", None)}


def _figures(result) -> dict:
    """A trial's figures from a SolveResult: objective (cost units), peak memory, gap."""
    return {"objective": float(result.evaluation.total), "peak_memory": int(result.evaluation.peak_memory),
            "gap": result.gap}


def _record(trial: MeshTrial, outcome: dict, module) -> None:
    """Set ``trial``'s status and figures from :func:`_solve_one`'s outcome (a SolveResult in
    ``result``) or :func:`_child`'s (the figures and the choice, kept in ``remote``)."""
    trial.status, trial.seconds, trial.message = outcome["status"], outcome["seconds"], outcome.get("message")
    result = outcome.get("result")
    figures = _figures(result) if result is not None else outcome.get("figures")
    if figures is not None:
        trial.objective, trial.peak_memory, trial.gap = figures["objective"], figures["peak_memory"], figures["gap"]
        trial.module = module
        trial.result = result
        trial.remote = None if result is not None else outcome


def _jobs(workers: int, tasks: int) -> int:
    """Candidates solved at once after the first: ``workers`` (the CPU budget the user gave) capped by
    the machine's CPUs and the number of candidates; 1 where processes cannot be forked."""
    if tasks < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return 1
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(int(workers), cpus, tasks))


_SHARED: dict = {}   # what forked candidate processes inherit (the module is not pickled)


def _child(i: int, left: int) -> dict:
    """In a forked process: solve candidate ``i`` with the share the schedule gives it now, ``left`` counting it
    and the candidates after it in its lane (:meth:`_Schedule.next`), and return what the parent needs to
    rebuild it (the choice and the Solution; the graph is rebuilt in the parent only if this candidate is
    picked)."""
    module, meshes, options, schedule = _SHARED["module"], _SHARED["meshes"], _SHARED["options"], _SHARED["schedule"]
    share, end = schedule.next(left)
    outcome = _solve_one(module, meshes[i][1], share, options, deadline=schedule.deadline, end=end)
    result = outcome.pop("result", None)
    if result is not None:
        outcome.update(figures=_figures(result), choice=list(result.choice), solution=result.solution,
                       seconds_build=result.seconds_build, seconds_solve=result.seconds_solve)
    return outcome


def _solve_in_parallel(module, meshes, run: list, here: int, schedule: "_Schedule", options: dict, jobs: int,
                       trials: list, progress=None) -> None:
    """Solve the candidates ``run``: ``here`` in this process, the others in ``jobs - 1`` lanes, each a forked
    process (it inherits the parsed module) that solves its candidates one after another, each with the share
    :class:`_Schedule` gives it when it starts (what one that ended early left goes to the next in its lane).
    The solver's result is deterministic per candidate, so the outcome is the one a sequential search gets.  A
    forked candidate's graph is rebuilt here only when it is picked (:func:`_rebuild`); ``here`` is the
    candidate of the largest build, whose graph is kept (new user 22: 2x2x2's estimated rebuild, 25 s, was kept
    back from every candidate)."""
    others = [i for i in run if i != here]
    lanes = [others[k::jobs - 1] for k in range(jobs - 1)]
    _SHARED.update(module=module, meshes=meshes, options=options, schedule=schedule)
    context = multiprocessing.get_context("fork")
    pools = [context.Pool(processes=1) for lane in lanes if lane]
    try:
        pending = [(i, pool.apply_async(_child, (i, len(lane) - k)))
                   for pool, lane in zip(pools, [lane for lane in lanes if lane]) for k, i in enumerate(lane)]
        share, end = schedule.next(1)   # this process' lane: one candidate, all of the time
        _record(trials[here], _solve_one(module, meshes[here][1], share, options, progress, schedule.deadline, end),
                module)
        for i, result in pending:
            _record(trials[i], result.get(), module)
        for pool in pools:
            pool.close()
    except BaseException:
        # Ctrl-C (or an error in one candidate): stop the other candidates now instead of waiting for
        # their solves to end (new user 16: 8-12 s after the interrupt)
        for pool in pools:
            pool.terminate()
        raise
    finally:
        for pool in pools:
            pool.join()
        _SHARED.clear()


class _Schedule:
    """The time of the candidates after the first.  ``fixed`` (deterministic mode): every candidate gets that
    share (``time_limit / candidates``) and no clock is read.  Else a candidate, when it starts, gets an equal
    part of what is left before ``deadline`` (the search's; the final reserve is kept after it) among itself and
    the candidates after it in its lane (a process solving candidates one after another), at least 1 s:
    ``next(left)`` -> ``(share, end)``.  A candidate that ends early (proven, or its fine build not started) so
    leaves its time to the next ones (new user 22: fixed shares left 40% of a 90 s limit unused while three
    candidates stopped at the replicated plan)."""

    def __init__(self, fixed: float | None, deadline: float | None):
        self.fixed, self.deadline = fixed, deadline

    def next(self, left: int) -> tuple[float, float | None]:
        """``(share, end)`` for the candidate starting now, ``left`` counting it and those after it in its lane:
        ``share`` seconds (its solver's ``time_limit``), ``end`` the ``time.monotonic()`` instant its builds and
        solves end by (None in deterministic mode)."""
        if self.fixed is not None:
            return self.fixed, None
        now = time.monotonic()
        share = max(1.0, (self.deadline - now) / max(1, int(left)))
        return share, now + share


def _carried(head) -> Callable[[object], list]:
    """The ``known`` plans (:func:`hloshard.autoshard.solve_module`) of a later candidate: the first
    candidate's plan (``head``, a SolveResult; the cheapest strategy space, the 1-D mesh of the devices)
    mapped onto the candidate's graph (:func:`hloshard.autoshard.coarse.map_choice`, as coarse to fine maps
    a coarse plan).  Where every node maps, the candidate's solve starts from a plan costing what the head's
    did (same alpha and beta) and never reports a costlier one: a finer mesh is not ranked by a plan its
    solve had no time to improve (new user 22: 2x4 / 4x2 / 2x2x2 at the replicated plan, 120.4 M, the 1-D
    mesh 60.8 M).  No plan when no finite image exists."""
    def known(graph) -> list:
        choice, _ = map_choice(head.graph, list(head.choice), graph)
        return [] if choice is None else [choice]
    return known


def _rebuild(trial: MeshTrial, memory_budget, keep: str):
    """The SolveResult of a candidate solved in another process: its cost graph built again here (the
    build is deterministic, so the choice indexes the same strategies) and the choice evaluated on it."""
    outcome = trial.remote
    graph = build_graph(trial.module, trial.mesh, keep, memory_budget)
    choice = outcome["choice"]
    if len(choice) != len(graph.nodes):  # cannot happen unless the build is not deterministic
        raise AssertionError("internal error: a rebuilt cost graph differs from the candidate's")
    ev = evaluate_choice(graph, choice)
    return SolveResult(graph, outcome["solution"], choice, ev, outcome["seconds_build"], outcome["seconds_solve"])
