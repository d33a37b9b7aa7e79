"""``--mesh auto``: solve a module on every mesh shape of its device count and keep the cheapest.

The candidates are every ordered factorization of N devices into 1 to 3 axes of size > 1 (8: ``8``,
``2x4``, ``4x2``, ``2x2x2``), plus the module's own mesh (its Shardy mesh, else the mesh its user
shardings imply) when that is not one of them. Each candidate is refined for the module as every
command's mesh is (:meth:`hloshard.mesh.DeviceMesh.for_module`); candidates refined onto the same
internal mesh are solved once. They are solved with :func:`hloshard.autoshard.solve_module` on a fresh
parse of the module (the first one on the module parsed for the estimates), cheapest strategy space first (:func:`_work`), the remaining time limit split evenly
over the remaining candidates; a candidate whose predicted build time (measured rate on the first one
times its size) would exceed the time limit is skipped and reported as such, so the search takes about
the time limit plus the first build. With ``deterministic`` nothing depends on measured time: every
distinct candidate is solved, each with ``time_limit / candidates`` (deterministic) seconds.
The best trial is the one whose written shardings cost least (the objective ``hloshard cost``
reports), ties broken by lower peak memory per device, then by fewer mesh axes. Costs of different meshes are comparable because alpha and beta are per axis and the
same for every axis (one value each, default 1.0).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from .errors import SolveFailed, UsageError
from .mesh import DeviceMesh, _sharding_device_count, infer_mesh, module_named_mesh

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

    def to_json(self) -> dict:
        return {"mesh": self.label, "internal_mesh": str(self.mesh), "status": self.status,
                "objective": None if self.objective is None else round(self.objective, 6),
                "peak_memory_per_device": self.peak_memory,
                "gap": None if self.gap is None else round(self.gap, 6),
                "seconds": round(self.seconds, 3), "message": self.message, "same_as": self.same_as}


@dataclass
class MeshSearch:
    """All trials in candidate order, the index of the best one, and the device count searched."""

    num_devices: int
    trials: list = field(default_factory=list)
    best_index: int = -1

    @property
    def best(self) -> MeshTrial:
        return self.trials[self.best_index]

    def to_json(self) -> dict:
        return {"num_devices": self.num_devices, "best": self.best.label,
                "trials": [t.to_json() for t in self.trials]}


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


def _work(module, mesh: DeviceMesh) -> int:
    """A cheap proxy for the cost-graph build of ``module`` on ``mesh``: the sum over array
    instructions of (number of enumerated layouts)^2 (resharding matrices dominate the build)."""
    from .strategy.base import MeshInfo

    info = MeshInfo(mesh)
    total = 0
    for instr in module.all_instructions():
        if instr.shape.is_array:
            total += len(info.enumerate(instr.shape.dims)) ** 2
    return total


def search_meshes(text: str, filename: str, devices: int | None = None, alpha=None, beta=None,
                  keep: str = "io", memory_budget: int | None = None, max_padding: float | None = None,
                  time_limit: float = 60.0, workers: int = 2, seed: int = 0, deterministic: bool = False,
                  progress=None, pin_operands: bool = False) -> MeshSearch:
    """Solve the module in ``text`` on every candidate mesh (module docstring) and pick the best.

    ``alpha`` / ``beta``: one value (string or float) for every axis, default 1.0. ``time_limit``:
    seconds for the whole search (builds included; the first candidate always runs, each solve gets
    at least 1 s). ``pin_operands``: as :func:`hloshard.autoshard.solve_module`. Candidates are
    compared by the solver's own objective; only the one picked is re-evaluated as written
    (:func:`hloshard.autoshard.solve.reevaluate_written`: what ``hloshard cost`` says of the output).
    Raises UsageError for a bad device count or per-axis alpha/beta, and SolveFailed (exit 3) when
    no candidate has a feasible solution (the message lists each mesh's reason)."""
    from .autoshard import solve_module
    from .autoshard.solve import reevaluate_written
    from .hlo import parse_module

    first = parse_module(text, filename)
    n = auto_device_count(first, devices)
    a, b = _single(alpha, "--alpha"), _single(beta, "--beta")
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
    meshes = []
    for label, spec in specs:
        ndim = spec.count("x") + 1 if "=" not in spec else spec.count(",") + 1
        mesh = DeviceMesh.for_module(first, spec, None, None if a is None else [a] * ndim,
                                     None if b is None else [b] * ndim)
        mesh.source = "auto"
        mesh.with_policy(max_padding, memory_budget)
        meshes.append((label, mesh))
    work = [_work(first, mesh) for _, mesh in meshes]
    trials: list = [None] * len(meshes)
    start = time.monotonic()
    rate = None  # build seconds per unit of work, measured on the cheapest candidate
    order = sorted(range(len(meshes)), key=lambda i: (work[i], i))
    for rank, i in enumerate(order):
        label, mesh = meshes[i]
        trial = MeshTrial(label, mesh)
        trials[i] = trial
        twin = next((t for t in trials if t is not None and t is not trial and t.mesh.shape == mesh.shape
                     and (t.mesh.device_ids == mesh.device_ids).all() and t.same_as is None), None)
        if twin is not None:
            # refined onto the same internal mesh as another candidate: the same problem, not solved twice
            trial.status, trial.same_as = "same", twin.label
            trial.message = f"refined to the same internal mesh {mesh} as {twin.label}"
            continue
        elapsed = time.monotonic() - start
        predicted = 0.0 if rate is None else rate * work[i]
        left = [j for j in order[rank:] if trials[j] is None or j == i]
        if deterministic:
            # reproducible: no decision on measured time; every distinct candidate gets an equal share
            predicted, elapsed = 0.0, float(time_limit) * rank / len(order)
        elif rate is not None and elapsed + predicted > time_limit:
            trial.status = "skipped"
            trial.message = (f"building its cost graph would take about {predicted:.0f} s "
                             f"({work[i] / work[order[0]]:.0f}x the strategy pairs of {meshes[order[0]][0]}), "
                             f"beyond the time limit")
            continue
        share = max(1.0, (float(time_limit) - elapsed - predicted) / max(1, len(left)))
        # the first module parsed serves the first candidate solved (nothing reads it after the meshes
        # and work estimates above); every other candidate solves a fresh parse
        module, first = (first, None) if first is not None else (parse_module(text, filename), None)
        t0 = time.monotonic()
        try:
            result = solve_module(module, mesh, keep=keep, memory_budget=memory_budget, time_limit=share,
                                  workers=workers, seed=seed, deterministic=deterministic, progress=progress,
                                  pin_operands=pin_operands, reevaluate=False)
        except SolveFailed as exc:
            trial.status = getattr(exc, "status", "infeasible")
            trial.message = str(exc)
        else:
            ev = result.evaluation
            trial.status = result.solution.status
            trial.objective = float(ev.total)
            trial.peak_memory = int(ev.peak_memory)
            trial.gap = result.gap
            trial.module, trial.result = module, result
            if rate is None and work[i] > 0:
                rate = result.seconds_build / work[i]
        trial.seconds = time.monotonic() - t0
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
    reevaluate_written(best.result, best.module, best.mesh, memory_budget)
    if best.result.written is not None:
        best.objective = float(best.result.written.evaluation.total)
        best.peak_memory = int(best.result.written.evaluation.peak_memory)
    return out
