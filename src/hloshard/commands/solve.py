"""``hloshard solve``: choose a sharding for every instruction with CP-SAT and write annotated HLO.

Reads MODULE.hlo (``-`` for stdin), builds the cost graph on the ``--mesh`` (strategies, resharding
edges, liveness; :mod:`hloshard.autoshard`), solves it (:func:`hloshard.solver.solve_problem`) and
writes the module with a ``sharding=`` on every instruction of the entry computation and of the
computations it calls through while / call / conditional, to ``-o`` or to stdout.  The summary (cost
split into compute, communication and resharding; peak memory per device; solver status, bound, gap,
time; the most expensive resharding edges) goes to stderr: a rich table with ``--format text``, the
report JSON with ``--format json``.  ``--report FILE.json`` writes the report JSON to a file.
Timing figures live in the report only, never in the HLO: the same input and options give
byte-identical HLO when the solve is proven optimal, and always with ``--deterministic``.

Exit codes: 0 solved; 2 bad input or options (nothing written); 3 no feasible solution (an infeasible
memory budget, named by liveness point and tensors, or no solution before the time limit).
"""

from __future__ import annotations

import json
import math
import sys
import time

import click

from ..errors import SolveFailed, UsageError
from .options import BYTE_SIZE, mesh_from_options, mesh_options
from .progress import SolverProgress


class _Budget(click.ParamType):
    name = "bytes|none"

    def convert(self, value, param, ctx):
        if value is None or (isinstance(value, str) and value.strip().lower() == "none"):
            return None
        if isinstance(value, str):  # a byte size or a device name (tpu-v5e, h100-80gb, ...)
            from ..units import parse_memory_budget

            try:
                return parse_memory_budget(value)
            except UsageError as exc:
                self.fail(str(exc), param, ctx)
        return BYTE_SIZE.convert(value, param, ctx)


def build_report(result, mesh, keep: str, memory_budget) -> dict:
    """The ``--report`` JSON (cost units; memory in bytes per device; seconds wall time)."""
    from ..autoshard import top_edges

    g, sol = result.graph, result.solution
    # objective, breakdown, memory and top edges of the shardings as written (= hloshard cost of the output)
    w = result.written
    eg, echoice, ev = (w.graph, w.choice, w.evaluation) if w is not None else (g, result.choice, result.evaluation)
    gap = result.gap
    return {
        "status": sol.status,
        "objective": round(ev.total, 6),
        "solver_objective": round(result.solver_objective, 6),
        "bound": None if result.bound is None else round(result.bound, 6),
        "gap": None if gap is None else round(gap, 6),
        "seconds": round(result.seconds_build + result.seconds_solve, 3),
        "seconds_build": round(result.seconds_build, 3),
        "seconds_solve": round(result.seconds_solve, 3),
        "breakdown": {"compute": round(ev.compute, 6), "communication": round(ev.communication, 6),
                      "resharding": round(ev.resharding, 6)},
        "peak_memory_per_device": int(ev.peak_memory),
        "peak_memory_at": eg.schedule[ev.peak_time].name if ev.peak_time < len(eg.schedule) else None,
        "memory_budget": memory_budget,
        "keep_shardings": keep,
        "mesh": mesh.to_json() if hasattr(mesh, "to_json") else str(mesh),
        "nodes": g.problem.num_nodes,
        "edges": g.problem.num_edges,
        "solver_nodes": g.solver_problem.num_nodes,
        "solver_edges": g.solver_problem.num_edges,
        "strategies": int(sum(len(c) for c in g.problem.node_costs)),
        "cost_scale": g.cost_scale,
        "objective_int": sol.objective,
        "top_edges": top_edges(eg, echoice, ev),
        "warnings": list(g.warnings),
    }


def failure_report(exc, mesh, keep: str, memory_budget, seconds: float) -> dict:
    """The ``--report`` JSON when solve exits 3: ``status`` ('infeasible' | 'timeout'), ``explanation``
    (the error message: liveness point and tensors for a memory budget), no objective."""
    return {
        "status": getattr(exc, "status", "infeasible"),
        "explanation": str(exc),
        "objective": None,
        "seconds": round(seconds, 3),
        "memory_budget": memory_budget,
        "keep_shardings": keep,
        "mesh": mesh.to_json() if hasattr(mesh, "to_json") else str(mesh),
    }


def print_summary(report: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    from ..units import format_bytes

    con = Console(stderr=True)
    t = Table(title="hloshard solve", show_header=True, header_style="bold")
    t.add_column("item")
    t.add_column("value", justify="right")
    b = report["breakdown"]
    t.add_row("objective (cost units)", f"{report['objective']:,.2f}")
    t.add_row("  compute", f"{b['compute']:,.2f}")
    t.add_row("  communication", f"{b['communication']:,.2f}")
    t.add_row("  resharding", f"{b['resharding']:,.2f}")
    t.add_row("bound", "-" if report["bound"] is None else f"{report['bound']:,.2f}")
    t.add_row("gap", "-" if report["gap"] is None else f"{report['gap']:.2%}")
    t.add_row("status", report["status"])
    t.add_row("peak memory / device", format_bytes(report["peak_memory_per_device"]))
    t.add_row("nodes / edges", f"{report['nodes']:,} / {report['edges']:,} "
                               f"(solver {report['solver_nodes']:,} / {report['solver_edges']:,})")
    t.add_row("time (build + solve)", f"{report['seconds_build']:.1f} s + {report['seconds_solve']:.1f} s")
    con.print(t)
    if report["top_edges"]:
        e = Table(title="most expensive resharding edges", header_style="bold")
        e.add_column("from")
        e.add_column("to")
        e.add_column("cost", justify="right")
        e.add_column("source sharding")
        for row in report["top_edges"]:
            e.add_row(row["from"], row["to"], f"{row['cost']:,.2f}", row["src_sharding"] or "")
        con.print(e)
    if report.get("peak_tensors"):
        pt = Table(title=f"largest tensors at peak memory ({report.get('peak_memory_at') or '-'})",
                   header_style="bold")
        for col in ("tensor", "shape", "sharding"):
            pt.add_column(col)
        pt.add_column("per device", justify="right")
        pt.add_column("share", justify="right")
        for row in report["peak_tensors"]:
            pt.add_row(row["name"], row["shape"], row["sharding"] or "", format_bytes(row["bytes_per_device"]),
                       f"{row['share']:.0%}")
        con.print(pt)
    for w in report["warnings"]:
        con.print(f"[yellow]warning:[/yellow] {w}")


@click.command("solve")
@click.argument("module_file", metavar="MODULE.hlo", type=click.Path(dir_okay=False, allow_dash=True))
@mesh_options
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Write the annotated HLO here (default: stdout).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="Summary on stderr: a table (text) or the report JSON (json).")
@click.option("--report", "report_file", type=click.Path(dir_okay=False), default=None,
              help="Write the report JSON (status, objective, bound, gap, seconds, breakdown, peak memory) here.")
@click.option("--keep-shardings", "keep", type=click.Choice(["all", "io", "none"]), default="io", show_default=True,
              help="User shardings kept as they are: all, entry parameters/outputs and Sharding custom-calls (io), none.")
@click.option("--memory-budget", "memory_budget", type=_Budget(), default=None,
              help="Bytes per device (e.g. 64MiB), a device name (tpu-v5e, h100-80gb, ...: its HBM size) "
                   "or 'none' (default: no budget).")
@click.option("--time-limit", type=float, default=60.0, show_default=True, help="Solver wall-clock seconds.")
@click.option("--workers", type=int, default=2, show_default=True, help="CP-SAT worker threads.")
@click.option("--seed", type=click.IntRange(0, 2**31 - 1), default=0, show_default=True, help="Random seed.")
@click.option("--deterministic", is_flag=True, help="Reproducible search (deterministic time limit).")
@click.option("--export-problem", type=click.Path(dir_okay=False), default=None,
              help="Also write the cost graph as an IOPDDL problem (.json or .json.gz).")
@click.option("--partition-specs", "partition_specs_file", type=click.Path(dir_okay=False), default=None,
              help="Also write the JAX PartitionSpecs of entry parameters and outputs, and the intermediate "
                   "shardings XLA's propagation would not reach from them, as JSON (needs the xla extra).")
@click.option("--quiet", is_flag=True, help="No progress display and no summary.")
def command(module_file, mesh, device_ids, alpha, beta, output, fmt, report_file, keep, memory_budget, time_limit,
            workers, seed, deterministic, export_problem, quiet, partition_specs_file=None):
    """Choose a sharding for every instruction of MODULE.hlo on the device mesh (CP-SAT)."""
    from ..autoshard import solve_module
    from ..hlo import print_module
    from ..hlo.verify import verify_module
    from ..io import write_text_atomic
    from ..load import load_module
    from ..peak import peak_tensors_of
    from ..sdy import annotate_module

    if not math.isfinite(time_limit) or time_limit <= 0:
        raise UsageError(f"--time-limit must be a positive finite number of seconds, got {time_limit}")
    if workers < 1:
        raise UsageError("--workers must be at least 1")
    module = load_module(module_file)  # HLO text or StableHLO .mlir
    verify_module(module, "<stdin>" if module_file == "-" else module_file)
    dmesh = mesh_from_options(module, mesh, device_ids, alpha, beta)
    show = not quiet and sys.stderr.isatty()
    t0 = time.monotonic()
    try:
        with SolverProgress(show, time_limit) as progress:
            result = solve_module(module, dmesh, keep=keep, memory_budget=memory_budget, time_limit=time_limit,
                                  workers=workers, seed=seed, deterministic=deterministic,
                                  progress=progress if show else None, export_problem=export_problem)
    except SolveFailed as exc:
        if report_file:
            write_text_atomic(report_file, json.dumps(failure_report(exc, dmesh, keep, memory_budget,
                                                                     time.monotonic() - t0),
                                                      indent=2, sort_keys=True) + "\n")
        raise
    report = build_report(result, dmesh, keep, memory_budget)
    report["peak_tensors"] = peak_tensors_of(result)  # which tensors dominate peak memory (hloshard.peak)
    annotate_module(module)  # Shardy-mode input: xla.sdy.sharding beside every sharding= (hloshard.sdy)
    out_text = print_module(module)
    if partition_specs_file:
        from ..partition_specs import write_partition_specs

        write_partition_specs(partition_specs_file, module, dmesh)
    if report_file:
        write_text_atomic(report_file, json.dumps(report, indent=2, sort_keys=True) + "\n")
    write_text_atomic(output or "-", out_text)
    if not quiet:
        if fmt == "json":
            click.echo(json.dumps(report, indent=2, sort_keys=True), err=True)
        else:
            print_summary(report)
