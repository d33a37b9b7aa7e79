"""``explain-reshape``: what resharding around a reshape costs, and who pays for it.

Given an operand (shape + sharding), the reshape's output shape and (optionally) its output sharding on
a device mesh, :func:`explain_reshape` builds an :class:`ExplainReport`:

* the operand and output shardings with per-device shapes and bytes, and the mesh axes each tensor dim
  is split over (or why it needs a sub-axis);
* the operand sharding the output requires (:func:`hloshard.cost.reshape.required_operand_sharding`);
* the resharding plan from the operand's sharding to that one (:func:`hloshard.cost.reshard.plan`),
  its total cost and the memory per device before / at the peak / after;
* the *accounting*: XLA's auto-sharding charges this cost as a resharding cost on the operand edge
  (operand -> required sharding), and an accounting that derives the reshape's strategy from the
  operand's strategy (``ReshapeSharding`` of the operand sharding, required input = the operand's own
  sharding) sees zero edge cost and zero op cost: the gather is then charged nowhere (openxla/xla
  issue #12392, ``../shared/seeds/000_b639b7df27fa914f.txt``);
* alternatives: other output shardings on the mesh, each with the operand plan it needs, ranked by
  cost (e.g. an all-to-all that keeps the data sharded);
* optionally XLA's own answer (:mod:`hloshard.xla_check`).

:func:`report_to_json` gives the stable JSON schema documented in ``docs/explain-reshape.md``;
:func:`render_text` the rich text report (with tile maps: which device holds which tile).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Any

import numpy as np

from .cost import reshape as R
from .cost.memory import bytes_per_device
from .cost.reshard import ReshardPlan, autosharding_resharding_cost, plan as make_plan
from .errors import InputError
from .hlo.shape import Shape
from .hlo.sharding import HloSharding
from .units import counted, format_bytes
from . import xla_check
from .cost.collectives import total_ring_bytes

SCHEMA_VERSION = 1


@dataclasses.dataclass
class ReshapePlan:
    """How the reshape gets its output sharding, as GSPMD partitions it:

    * ``tensor == 'operand'``: reshard the operand to the sharding the output requires, then reshape
      locally (and slice locally when the output splits more than the operand can express);
    * ``tensor == 'result'``: when the output's splits cannot be expressed on the operand but the
      operand's own sharding carries over exactly, reshape locally into ``natural_result`` and reshard
      the result (GSPMD does this: e.g. an all-to-all instead of an all-gather).

    ``plan`` is the :class:`ReshardPlan` on that tensor; memory figures are bytes per device.
    """

    tensor: str
    plan: ReshardPlan
    natural_result: HloSharding | None
    memory_before: int
    memory_peak: int
    memory_after: int

    @property
    def steps(self):
        return self.plan.steps

    @property
    def collectives(self):
        return self.plan.collectives

    @property
    def total_cost(self) -> float:
        return self.plan.total_cost

    @property
    def bytes_per_device(self) -> int:
        return self.plan.bytes_per_device

    @property
    def conservative(self) -> bool:
        return self.plan.conservative

    @property
    def notes(self) -> list[str]:
        return self.plan.notes


def reshape_plan(operand_shape: Shape, result_shape: Shape, src: HloSharding, out: HloSharding, mesh,
                 required: R.ReshapeInference | None = None) -> ReshapePlan:
    """The resharding a reshape ``operand_shape -> result_shape`` needs to turn an operand sharded
    ``src`` into an output sharded ``out`` (see :class:`ReshapePlan`)."""
    if required is None:
        required = R.infer_operand(operand_shape, result_shape, out)
    if not required.exact:
        natural = R.infer_output(operand_shape, result_shape, src)
        if natural.exact and natural.sharding.kind in ("tiled", "replicated"):
            p = make_plan(result_shape, natural.sharding, out, mesh)
            before = bytes_per_device(operand_shape, src)
            mid = bytes_per_device(result_shape, natural.sharding)
            return ReshapePlan("result", p, natural.sharding, before, max(before + mid, p.memory_peak),
                               p.memory_after)
    p = make_plan(operand_shape, src, required.sharding, mesh)
    after = bytes_per_device(result_shape, out) if not required.exact else p.memory_after
    return ReshapePlan("operand", p, None, p.memory_before, p.memory_peak, after)


@dataclasses.dataclass
class Alternative:
    """One candidate output sharding: the operand sharding it requires and the plan to get there."""

    result_sharding: HloSharding
    required_operand_sharding: HloSharding
    plan: ReshapePlan
    exact: bool  # the output's splits all carry over to the operand (else: local slice after reshape)
    is_requested: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "result_sharding": str(self.result_sharding),
            "required_operand_sharding": str(self.required_operand_sharding),
            "total_cost": self.plan.total_cost,
            "ring_bytes_per_device": plan_ring_bytes(self.plan.plan),
            "collectives": [s.kind for s in self.plan.collectives],
            "plan_tensor": self.plan.tensor,
            "plan": [s.to_json() for s in self.plan.steps],
            "memory_per_device": {"before": self.plan.memory_before, "peak": self.plan.memory_peak,
                                  "after": self.plan.memory_after},
            "slice_after_reshape": not self.exact,
            "is_requested": self.is_requested,
        }


@dataclasses.dataclass
class ExplainReport:
    """Everything ``explain-reshape`` reports (see the module docstring)."""

    operand_shape: Shape
    result_shape: Shape
    operand_sharding: HloSharding
    result_sharding: HloSharding
    result_given: bool
    required: R.ReshapeInference
    plan: ReshapePlan
    operand_plan: ReshardPlan
    mesh: Any
    alternatives: list[Alternative]
    instruction: str | None = None
    operand_name: str | None = None
    xla: dict[str, Any] | None = None
    notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def required_operand_sharding(self) -> HloSharding:
        return self.required.sharding

    def accounting(self) -> dict[str, Any]:
        """Where an XLA-style auto-sharding accounting charges the plan, and where a follow-the-operand
        accounting would (not)."""
        src, req = self.operand_sharding, self.required.sharding
        op = self.operand_plan
        mem_edge = max(op.memory_before, op.memory_after) - op.memory_before
        derived = R.infer_output(self.operand_shape, self.result_shape, src)
        hidden = make_plan(self.operand_shape, src, derived.source_needed, self.mesh)
        matches = derived.sharding == self.result_sharding
        cost = op.total_cost
        if cost > 0:
            where = (f"as a communication resharding cost on the operand edge (operand {src} -> required "
                     f"{req}): {_num(cost)}; the reshape itself then moves no data (communication cost 0)")
        else:
            where = "nothing to charge: the operand already has the sharding the output requires"
        if hidden.total_cost > 0:
            follow = (f"deriving the reshape's strategy from the operand's sharding {src} yields {derived.sharding} "
                      f"with required input = the operand's own sharding, so the edge cost is 0 and the op's "
                      f"communication cost is 0, yet the reshape needs {_kinds(hidden)} costing "
                      f"{_num(hidden.total_cost)}: it is charged nowhere")
        else:
            follow = (f"deriving the reshape's strategy from the operand's sharding yields {derived.sharding} "
                      f"and that needs no communication: nothing is missed")
        estimate = autosharding_resharding_cost(self.operand_shape, src, req, self.mesh)
        extra = []
        if abs(estimate - cost) > 1e-6:
            extra.append(f"XLA auto-sharding's own ReshardingCost rules estimate this edge at {_num(estimate)} "
                         f"(the plan above, as GSPMD partitions it, costs {_num(cost)})")
        return {
            "model": "xla-auto-sharding",
            "charged_on": "operand_edge" if cost > 0 else "none",
            "operand_edge": {
                "from": str(src), "to": str(req),
                "communication_cost": cost,
                "xla_estimate": estimate,
                "memory_cost": mem_edge,
            },
            "inside_op": {"communication_cost": 0.0},
            "derived_from_operand": {
                "result_sharding": str(derived.sharding),
                "result_tile_assignment_dims": _ta_dims(derived.sharding),
                "input_sharding": str(src),
                "edge_cost": 0.0,
                "communication_cost": 0.0,
                "actual_cost": hidden.total_cost,
                "actual_collectives": [s.kind for s in hidden.collectives],
                "charged_nowhere": hidden.total_cost > 0,
                "matches_result": matches,
            },
            "partitioner_plan_tensor": self.plan.tensor,
            "explanation": [where, follow] + extra + ([
                f"GSPMD itself avoids that: it reshapes into {self.plan.natural_result} and reshards the result "
                f"({_kinds(self.plan.plan)}, {_num(self.plan.total_cost)}); an auto-sharding edge cost of "
                f"{_num(cost)} overestimates it"] if self.plan.tensor == "result" else []),
        }


def _ta_dims(s: HloSharding) -> list[int]:
    """The tile-assignment dims (incl. the replication dim), e.g. [2,1,1,4]; [] when not tiled."""
    return [int(d) for d in s.tile_assignment_dims] if s.kind == "tiled" else []


def _kinds(p: ReshardPlan) -> str:
    ks = [s.kind for s in p.collectives]
    return " + ".join(ks) if ks else "no collective"


def _num(x: float) -> str:
    """Cost for display: thousands separators, up to 3 decimals, no trailing zeros (98,304,001.1)."""
    if x == int(x):
        return f"{int(x):,}"
    return f"{x:,.3f}".rstrip("0").rstrip(".")


# ------------------------------------------------------------------------------------------------
# building the report


def _check_sharding(sharding: HloSharding, shape: Shape, mesh, what: str) -> None:
    if sharding.kind == "tuple":
        raise InputError(f"{what} sharding {sharding} is a tuple sharding; a reshape takes one array")
    if sharding.kind == "tiled":
        if sharding.tiled_rank != shape.rank:
            raise InputError(f"{what} sharding {sharding} has {sharding.tiled_rank} tiled dims but the {what} "
                             f"{shape} has rank {shape.rank}")
        if sharding.num_devices != mesh.num_devices:
            raise InputError(f"{what} sharding {sharding} uses {counted(sharding.num_devices, 'device')} but the mesh "
                             f"{mesh} has {mesh.num_devices}")
    if sharding.kind == "maximal" and not 0 <= int(sharding.maximal_device) < mesh.num_devices:
        raise InputError(f"{what} sharding {sharding} names device {sharding.maximal_device}, not in the mesh "
                         f"{mesh}")


def candidate_output_shardings(result_shape: Shape, mesh, divisible_only: bool = True) -> list[HloSharding]:
    """Every output sharding that splits dims over whole mesh axes (each axis used once, any order
    within a dim), plus replicated; deterministic order. ``divisible_only`` skips splits that do not
    divide the dim."""
    axes = [a for a in range(len(mesh.shape)) if int(mesh.shape[a]) > 1]
    rank = result_shape.rank
    out: list[HloSharding] = []
    seen: set[HloSharding] = set()

    def add(s: HloSharding) -> None:
        if s not in seen:
            seen.add(s)
            out.append(s)

    # assign each axis to a dim or to nothing, then order the axes within each dim
    for assign in itertools.product(range(-1, rank), repeat=len(axes)):
        per_dim: list[list[int]] = [[] for _ in range(rank)]
        for a, d in zip(axes, assign):
            if d >= 0:
                per_dim[d].append(a)
        orders = [list(itertools.permutations(p)) for p in per_dim]
        for combo in itertools.product(*orders):
            tiles = [math.prod(int(mesh.shape[a]) for a in c) for c in combo]
            if divisible_only and any(result_shape.dims[d] % t for d, t in enumerate(tiles)):
                continue
            if any(t > result_shape.dims[d] for d, t in enumerate(tiles)):
                continue
            add(mesh.axes_to_sharding([list(c) for c in combo]))
    return out


def explain_reshape(operand_shape: Shape, result_shape: Shape, operand_sharding: HloSharding | None,
                    result_sharding: HloSharding | None, mesh, *, instruction: str | None = None,
                    operand_name: str | None = None, max_alternatives: int = 5) -> ExplainReport:
    """Build the report. ``operand_sharding`` None means replicated (noted); ``result_sharding`` None:
    the cheapest candidate output sharding is reported and the rest listed as alternatives.

    Raises InputError on a tuple / non-array shape, a rank mismatch, a sharding whose device count is
    not the mesh size, or an element count that changes across the reshape.
    """
    notes: list[str] = []
    for shp, what in ((operand_shape, "operand"), (result_shape, "result")):
        if not shp.is_array:
            raise InputError(f"the {what} shape {shp} is not an array")
    if operand_shape.element_type != result_shape.element_type:
        raise InputError(f"a reshape keeps the element type: operand {operand_shape} but result {result_shape}")
    R.reshape_groups(operand_shape.dims, result_shape.dims)  # element count check
    if operand_sharding is None:
        operand_sharding = HloSharding.replicated()
        notes.append("the operand has no sharding: treated as replicated")
    _check_sharding(operand_sharding, operand_shape, mesh, "operand")
    if result_sharding is not None:
        _check_sharding(result_sharding, result_shape, mesh, "result")

    candidates: list[Alternative] = []
    pool = candidate_output_shardings(result_shape, mesh)
    for extra in R.output_shardings_without_communication(operand_shape, result_shape, operand_sharding, mesh)[:1]:
        if extra not in pool:  # the free carry-over, even off the mesh axes (e.g. a sub-axis split)
            pool.insert(0, extra)
    for cand in pool:
        inf = R.infer_operand(operand_shape, result_shape, cand)
        p = reshape_plan(operand_shape, result_shape, operand_sharding, cand, mesh, inf)
        candidates.append(Alternative(cand, inf.sharding, p, inf.exact,
                                      result_sharding is not None and cand == result_sharding))
    candidates.sort(key=lambda a: (a.plan.total_cost, -_splits(a.result_sharding), a.plan.memory_after,
                                   str(a.result_sharding)))
    given = result_sharding is not None
    if not given:
        if not candidates:
            raise InputError(f"no output sharding of {result_shape} fits the mesh {mesh}")
        best = candidates[0]
        result_sharding = best.result_sharding
        best.is_requested = True
        notes.append("no output sharding given: reporting the cheapest candidate, alternatives below")
    required = R.infer_operand(operand_shape, result_shape, result_sharding)
    op_plan = make_plan(operand_shape, operand_sharding, required.sharding, mesh)
    p = reshape_plan(operand_shape, result_shape, operand_sharding, result_sharding, mesh, required)
    if not required.exact and p.tensor == "operand":
        notes.append("the output splits more than the operand can express: after the reshape each device "
                     "slices its part locally (dynamic-slice, no communication)")
    if p.tensor == "result":
        notes.append(f"the output's splits cannot be expressed on the operand, but the operand's sharding carries "
                     f"over: the reshape produces {p.natural_result} locally and the plan reshards the result")
    alts = [a for a in candidates if not (a.result_sharding == result_sharding)]
    return ExplainReport(operand_shape=operand_shape, result_shape=result_shape,
                         operand_sharding=operand_sharding, result_sharding=result_sharding, result_given=given,
                         required=required, plan=p, operand_plan=op_plan, mesh=mesh, alternatives=alts[:max(0, max_alternatives)],
                         instruction=instruction, operand_name=operand_name, notes=notes)


def _splits(s: HloSharding) -> int:
    return s.num_tiles if s.kind == "tiled" else 1


# ------------------------------------------------------------------------------------------------
# XLA comparison


def xla_module_text(report: ExplainReport) -> str:
    """The tiny module XLA partitions for ``--xla``: parameter (operand sharding) -> reshape (output
    sharding)."""
    return (f"HloModule explain_reshape, num_partitions={report.mesh.num_devices}\n\n"
            f"ENTRY %main {{\n"
            f"  %operand = {report.operand_shape.to_string(False)} parameter(0), sharding={report.operand_sharding}\n"
            f"  ROOT %reshape = {report.result_shape.to_string(False)} reshape(%operand), "
            f"sharding={report.result_sharding}\n}}\n")


def attach_xla(report: ExplainReport) -> None:
    """Run XLA's SPMD partitioner on :func:`xla_module_text` in a child process and record its
    collectives beside the plan's (``report.xla``). Raises InputError when jax is not installed."""

    if not xla_check.jax_available():
        raise InputError("--xla needs jax and jaxlib in this Python (pip install 'hloshard[xla]')")
    res = xla_check.spmd_collectives([xla_module_text(report)], report.mesh.num_devices)[0]
    if res.error:
        report.xla = {"error": res.error, "collectives": [], "agrees": False, "differences": [res.error]}
        return
    xla_ops = [(c.kind, sorted(sorted(g) for g in c.replica_groups), sorted(c.source_target_pairs))
               for c in res.collectives]
    mine = [(s.kind, sorted(sorted(g) for g in s.replica_groups), sorted(s.source_target_pairs))
            for s in report.plan.collectives]
    diffs = []
    if [k for k, _, _ in xla_ops] != [k for k, _, _ in mine]:
        diffs.append(f"collectives differ: XLA {[k for k, _, _ in xla_ops] or 'none'}, plan "
                     f"{[k for k, _, _ in mine] or 'none'}")
    else:
        for i, (x, m) in enumerate(zip(xla_ops, mine)):
            if x[1] != m[1]:
                diffs.append(f"step {i + 1} ({x[0]}): replica groups differ: XLA {x[1]}, plan {m[1]}")
            if x[2] != m[2]:
                diffs.append(f"step {i + 1} ({x[0]}): source_target_pairs differ: XLA {x[2]}, plan {m[2]}")
    report.xla = {"collectives": [c.to_json() for c in res.collectives], "agrees": not diffs,
                  "differences": diffs, "dynamic_slice": res.has_dynamic_slice}


# ------------------------------------------------------------------------------------------------
# JSON


def _side(shape: Shape, sharding: HloSharding, mesh, name: str | None) -> dict[str, Any]:
    tile = list(sharding.tile_shape(shape.dims)) if sharding.kind == "tiled" else list(shape.dims)
    axes, why = R.mesh_axes_report(sharding, shape.rank, mesh) if sharding.kind in ("tiled", "replicated") \
        else (None, f"{sharding.kind} sharding")
    return {
        "name": name,
        "shape": shape.to_string(False),
        "sharding": str(sharding),
        "tile_assignment_dims": _ta_dims(sharding),
        "per_device_shape": tile,
        "bytes_per_device": bytes_per_device(shape, sharding),
        "total_bytes": shape.byte_size,
        "mesh_axes": axes,
        "mesh_axes_note": why,
        "tiles": tile_map(shape, sharding, mesh),
    }


def tile_map(shape: Shape, sharding: HloSharding, mesh) -> list[dict[str, Any]]:
    """Which devices hold which tile: one entry per tile (row-major tile index) with its element
    ranges ``[start, stop)`` per dim and the devices holding it (ascending)."""
    dims = [int(d) for d in shape.dims]
    if sharding.kind != "tiled":
        devs = sorted(int(d) for d in np.asarray(mesh.device_ids).ravel())
        if sharding.kind == "maximal":
            devs = [int(sharding.maximal_device)]
        return [{"index": [0] * len(dims), "ranges": [[0, d] for d in dims], "devices": devs}]
    tiles = sharding.tile_dims
    ta = np.asarray(sharding.tile_assignment).reshape(tuple(tiles) + (-1,))
    out = []
    for idx in np.ndindex(*tiles):
        ranges = []
        for n, t, i in zip(dims, tiles, idx):
            c = -(-n // t)
            ranges.append([min(i * c, n), min((i + 1) * c, n)])
        out.append({"index": list(idx), "ranges": ranges, "devices": sorted(int(d) for d in ta[idx])})
    return out


def plan_ring_bytes(plan: ReshardPlan) -> float:
    """Ring bytes per device of a resharding plan's collectives
    (:func:`hloshard.cost.collectives.total_ring_bytes`, as lint HS401 reports them and as
    :mod:`hloshard.xla_compare` measures XLA's)."""

    return total_ring_bytes(plan.predicted_collectives())


def report_to_json(report: ExplainReport) -> dict[str, Any]:
    """The stable JSON document (schema version 1, see ``docs/explain-reshape.md``)."""
    p = report.plan
    data = {
        "schema_version": SCHEMA_VERSION,
        "instruction": report.instruction,
        "mesh": _mesh_json(report.mesh),
        "operand": _side(report.operand_shape, report.operand_sharding, report.mesh, report.operand_name),
        "result": dict(_side(report.result_shape, report.result_sharding, report.mesh, report.instruction),
                       given=report.result_given),
        "required_operand_sharding": str(report.required.sharding),
        "required_operand": _side(report.operand_shape, report.required.sharding, report.mesh, None),
        "reshape_groups": [{"operand_dims": list(g.group.in_dims), "result_dims": list(g.group.out_dims),
                            "status": g.status, "detail": g.detail} for g in
                           R.infer_output(report.operand_shape, report.result_shape,
                                          report.operand_sharding).groups],
        "slice_after_reshape": not report.required.exact and p.tensor == "operand",
        "plan_tensor": p.tensor,
        "natural_result_sharding": None if p.natural_result is None else str(p.natural_result),
        "plan": [s.to_json() for s in p.steps],
        "total_cost": p.total_cost,
        "bytes_per_device": p.bytes_per_device,
        "ring_bytes_per_device": plan_ring_bytes(p.plan),
        "memory_per_device": {"before": p.memory_before, "peak": p.memory_peak, "after": p.memory_after},
        "conservative": p.conservative,
        "accounting": report.accounting(),
        "alternatives": [a.to_json() for a in report.alternatives],
        "xla": report.xla,
        "notes": list(report.notes) + list(p.notes),
    }
    return data


def _mesh_json(mesh) -> dict[str, Any]:
    return {"shape": [int(s) for s in mesh.shape],
            "device_ids": [int(d) for d in np.asarray(mesh.device_ids).ravel()],
            "alpha": [float(a) for a in mesh.alpha], "beta": [float(b) for b in mesh.beta]}


# ------------------------------------------------------------------------------------------------
# rich text


def _tile_table(title: str, shape: Shape, sharding: HloSharding, mesh):
    """A grid: rows = tile indices of every split dim but the last, columns = the last split dim's
    tiles; each cell lists the devices holding that tile."""
    from rich.table import Table

    tiles = sharding.tile_dims if sharding.kind == "tiled" else tuple(1 for _ in shape.dims)
    split = [d for d, t in enumerate(tiles) if t > 1]
    entries = {tuple(e["index"]): e for e in tile_map(shape, sharding, mesh)}
    table = Table(title=title, show_lines=False, title_justify="left", pad_edge=False)
    dims = [int(d) for d in shape.dims]
    if not split:
        table.add_column("whole tensor")
        e = next(iter(entries.values()))
        table.add_row("devices " + _devs(e["devices"]))
        return table
    col_dim = split[-1]
    row_dims = split[:-1]
    c = -(-dims[col_dim] // tiles[col_dim])
    table.add_column(", ".join(f"dim {d}" for d in row_dims) if row_dims else "")
    for j in range(tiles[col_dim]):
        table.add_column(f"dim {col_dim} [{min(j * c, dims[col_dim])}:{min((j + 1) * c, dims[col_dim])})",
                         justify="center")
    for ridx in itertools.product(*[range(tiles[d]) for d in row_dims]):
        label = ", ".join(
            f"[{min(i * -(-dims[d] // tiles[d]), dims[d])}:{min((i + 1) * -(-dims[d] // tiles[d]), dims[d])})"
            for d, i in zip(row_dims, ridx))
        cells = []
        for j in range(tiles[col_dim]):
            idx = [0] * len(dims)
            for d, i in zip(row_dims, ridx):
                idx[d] = i
            idx[col_dim] = j
            cells.append(_devs(entries[tuple(idx)]["devices"]))
        table.add_row(label or "all", *cells)
    return table


def _devs(devs: list[int]) -> str:
    if len(devs) > 2 and devs == list(range(devs[0], devs[-1] + 1)):
        return f"d{devs[0]}-d{devs[-1]}"
    return ",".join(f"d{d}" for d in devs)


def render_text(report: ExplainReport, console) -> None:
    """Print the report on a rich ``Console``."""
    from rich.table import Table

    data = report_to_json(report)
    mesh = data["mesh"]
    head = f"explain-reshape{(' ' + report.instruction) if report.instruction else ''}"
    console.print(f"[bold]{head}[/bold]  mesh {'x'.join(map(str, mesh['shape']))}  "
                  f"alpha {mesh['alpha']}  beta {mesh['beta']}")
    console.print()
    for key, label in (("operand", "operand"), ("result", "result"), ("required_operand", "required operand")):
        side = data[key]
        axes = side["mesh_axes"]
        axes_txt = ("mesh axes per dim " + str(axes)) if axes is not None else f"not on whole mesh axes ({side['mesh_axes_note']})"
        console.print(f"[bold]{label}[/bold] {side['shape']} sharding={side['sharding']}")
        console.print(f"  per device {side['per_device_shape']}  {side['bytes_per_device']:,} bytes  ({axes_txt})")
    console.print()
    console.print(_tile_table("before: operand tiles (which device holds which tile)", report.operand_shape,
                              report.operand_sharding, report.mesh))
    console.print(_tile_table("after: required operand tiles", report.operand_shape, report.required.sharding,
                              report.mesh))
    console.print(_tile_table("result tiles", report.result_shape, report.result_sharding, report.mesh))
    console.print()
    for g in data["reshape_groups"]:
        if g["status"] != "unsplit":
            console.print(f"reshape group {g['operand_dims']} -> {g['result_dims']}: {g['status']}: {g['detail']}")
    console.print()
    if data["plan"]:
        title = ("plan (operand -> required operand sharding)" if data["plan_tensor"] == "operand" else
                 f"plan (on the result: {data['natural_result_sharding']} -> {data['result']['sharding']})")
        t = Table(title=title, title_justify="left")
        for col in ("#", "kind", "dims", "mesh axes", "replica groups / pairs", "bytes/device", "cost"):
            t.add_column(col, justify="right" if col in ("#", "bytes/device", "cost") else "left")
        for i, s in enumerate(data["plan"], 1):
            groups = s["replica_groups"] or s["source_target_pairs"]
            t.add_row(str(i), s["kind"], str(s["dims"]), str(s["mesh_axes"]), str(groups),
                      f"{s['bytes_per_device']:,}", _num(s["cost"]))
        console.print(t)
    else:
        console.print("plan: no communication (the operand already has the required sharding)")
    mem = data["memory_per_device"]
    console.print(f"[bold]total cost[/bold] {_num(data['total_cost'])}   ring bytes per device "
                  f"{data['ring_bytes_per_device']:,.0f} ({format_bytes(data['ring_bytes_per_device'])}; received "
                  f"{data['bytes_per_device']:,})")
    console.print(f"memory per device: before {mem['before']:,}  peak {mem['peak']:,}  after {mem['after']:,}")
    console.print()
    acc = data["accounting"]
    console.print("[bold]accounting[/bold] (XLA auto-sharding style)")
    for line in acc["explanation"]:
        console.print(f"  - {line}")
    console.print()
    if data["alternatives"]:
        t = Table(title="alternatives (other output shardings, ranked by cost)", title_justify="left")
        for col in ("result sharding", "operand needs", "collectives", "cost", "ring bytes / device", "memory after"):
            t.add_column(col, justify="right" if col in ("cost", "ring bytes / device", "memory after") else "left")
        for a in data["alternatives"]:
            t.add_row(a["result_sharding"], a["required_operand_sharding"], " + ".join(a["collectives"]) or "none",
                      _num(a["total_cost"]), format_bytes(a["ring_bytes_per_device"]),
                      f"{a['memory_per_device']['after']:,}")
        console.print(t)
    if data["xla"] is not None:
        x = data["xla"]
        console.print("[bold]XLA (SPMD partitioner, raw after spmd-partitioning)[/bold]")
        if x.get("error"):
            console.print(f"  XLA failed: {x['error']}")
        for c in x["collectives"]:
            groups = c["replica_groups"] or c["source_target_pairs"]
            console.print(f"  {c['kind']} {c['shape']} dimensions={c['dims']} groups {groups}")
        if not x["collectives"]:
            console.print("  no collectives")
        console.print("  agrees with the plan" if x["agrees"] else
                      "  [bold red]DISAGREES[/bold red] with the plan: " + "; ".join(x["differences"]))
    for n in data["notes"]:
        console.print(f"note: {n}")


# ------------------------------------------------------------------------------------------------
# JSON schema (draft 2020-12) of report_to_json: documented in docs/explain-reshape.md

_INT = {"type": "integer", "minimum": 0}
_NUM = {"type": "number", "minimum": 0}
_STR = {"type": "string"}
_INTS = {"type": "array", "items": {"type": "integer"}}
_GROUPS = {"type": "array", "items": _INTS}
_MEMORY = {"type": "object", "required": ["before", "peak", "after"], "additionalProperties": False,
           "properties": {"before": _INT, "peak": _INT, "after": _INT}}
_STEP = {
    "type": "object",
    "required": ["kind", "dims", "mesh_axes", "replica_groups", "source_target_pairs", "bytes_per_device",
                 "bytes_sent", "input_bytes", "output_bytes", "input_shape", "output_shape", "cost_bytes", "cost",
                 "group_size", "exact_mesh_axes", "sharding_after", "leaf", "note"],
    "properties": {
        "kind": {"enum": ["all-gather", "all-to-all", "collective-permute", "reduce-scatter", "all-reduce",
                          "dynamic-slice"]},
        "dims": _INTS, "mesh_axes": _INTS, "replica_groups": _GROUPS,
        "source_target_pairs": {"type": "array", "items": {"type": "array", "items": {"type": "integer"},
                                                            "minItems": 2, "maxItems": 2}},
        "bytes_per_device": _INT, "bytes_sent": _INT, "input_bytes": _INT, "output_bytes": _INT,
        "input_shape": _INTS, "output_shape": _INTS, "cost_bytes": _INT, "cost": _NUM, "group_size": _INT,
        "exact_mesh_axes": {"type": "boolean"}, "sharding_after": {"type": ["string", "null"]},
        "leaf": _INT, "note": _STR,
    },
}
_SIDE = {
    "type": "object",
    "required": ["name", "shape", "sharding", "tile_assignment_dims", "per_device_shape", "bytes_per_device", "total_bytes", "mesh_axes",
                 "mesh_axes_note", "tiles"],
    "properties": {
        "name": {"type": ["string", "null"]}, "shape": _STR, "sharding": _STR, "tile_assignment_dims": _INTS,
        "per_device_shape": _INTS,
        "bytes_per_device": _INT, "total_bytes": _INT,
        "mesh_axes": {"oneOf": [{"type": "null"}, {"type": "array", "items": _INTS}]},
        "mesh_axes_note": _STR,
        "tiles": {"type": "array", "items": {
            "type": "object", "required": ["index", "ranges", "devices"],
            "properties": {"index": _INTS, "ranges": _GROUPS, "devices": _INTS}}},
        "given": {"type": "boolean"},
    },
}
JSON_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "hloshard explain-reshape report",
    "type": "object",
    "required": ["schema_version", "instruction", "mesh", "operand", "result", "required_operand_sharding",
                 "required_operand", "reshape_groups", "slice_after_reshape", "plan_tensor",
                 "natural_result_sharding", "plan", "total_cost", "bytes_per_device", "ring_bytes_per_device",
                 "memory_per_device",
                 "conservative", "accounting", "alternatives", "xla", "notes"],
    "properties": {
        "schema_version": {"const": SCHEMA_VERSION},
        "instruction": {"type": ["string", "null"]},
        "mesh": {"type": "object", "required": ["shape", "device_ids", "alpha", "beta"],
                 "properties": {"shape": _INTS, "device_ids": _INTS,
                                "alpha": {"type": "array", "items": _NUM}, "beta": {"type": "array", "items": _NUM}}},
        "operand": _SIDE, "result": _SIDE, "required_operand": _SIDE,
        "required_operand_sharding": _STR,
        "reshape_groups": {"type": "array", "items": {
            "type": "object", "required": ["operand_dims", "result_dims", "status", "detail"],
            "properties": {"operand_dims": _INTS, "result_dims": _INTS,
                           "status": {"enum": ["unsplit", "carried", "dropped", "uneven"]}, "detail": _STR}}},
        "slice_after_reshape": {"type": "boolean"},
        "plan_tensor": {"enum": ["operand", "result"]},
        "natural_result_sharding": {"type": ["string", "null"]},
        "plan": {"type": "array", "items": _STEP},
        "total_cost": _NUM, "bytes_per_device": _INT, "ring_bytes_per_device": _NUM, "memory_per_device": _MEMORY,
        "conservative": {"type": "boolean"},
        "accounting": {
            "type": "object",
            "required": ["model", "charged_on", "operand_edge", "inside_op", "derived_from_operand",
                         "partitioner_plan_tensor", "explanation"],
            "properties": {
                "model": {"const": "xla-auto-sharding"},
                "charged_on": {"enum": ["operand_edge", "none"]},
                "operand_edge": {"type": "object",
                                 "required": ["from", "to", "communication_cost", "xla_estimate", "memory_cost"],
                                 "properties": {"from": _STR, "to": _STR, "communication_cost": _NUM,
                                                "xla_estimate": _NUM, "memory_cost": _INT}},
                "inside_op": {"type": "object", "required": ["communication_cost"],
                              "properties": {"communication_cost": _NUM}},
                "derived_from_operand": {
                    "type": "object",
                    "required": ["result_sharding", "result_tile_assignment_dims", "input_sharding", "edge_cost", "communication_cost", "actual_cost",
                                 "actual_collectives", "charged_nowhere", "matches_result"],
                    "properties": {"result_sharding": _STR, "result_tile_assignment_dims": _INTS,
                                   "input_sharding": _STR, "edge_cost": _NUM,
                                   "communication_cost": _NUM, "actual_cost": _NUM,
                                   "actual_collectives": {"type": "array", "items": _STR},
                                   "charged_nowhere": {"type": "boolean"}, "matches_result": {"type": "boolean"}}},
                "partitioner_plan_tensor": {"enum": ["operand", "result"]},
                "explanation": {"type": "array", "items": _STR},
            },
        },
        "alternatives": {"type": "array", "items": {
            "type": "object",
            "required": ["result_sharding", "required_operand_sharding", "total_cost", "ring_bytes_per_device",
                         "collectives", "plan_tensor", "plan", "memory_per_device", "slice_after_reshape",
                         "is_requested"],
            "properties": {"result_sharding": _STR, "required_operand_sharding": _STR, "total_cost": _NUM,
                           "ring_bytes_per_device": _NUM,
                           "collectives": {"type": "array", "items": _STR},
                           "plan_tensor": {"enum": ["operand", "result"]},
                           "plan": {"type": "array", "items": _STEP}, "memory_per_device": _MEMORY,
                           "slice_after_reshape": {"type": "boolean"}, "is_requested": {"type": "boolean"}}}},
        "xla": {"oneOf": [{"type": "null"}, {
            "type": "object", "required": ["collectives", "agrees", "differences"],
            "properties": {"collectives": {"type": "array"}, "agrees": {"type": "boolean"},
                           "differences": {"type": "array", "items": _STR}, "error": _STR,
                           "dynamic_slice": {"type": "boolean"}}}]},
        "notes": {"type": "array", "items": _STR},
    },
}
