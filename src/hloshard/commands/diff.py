"""``hloshard diff A.hlo B.hlo``: two sharding plans of one module compared (:mod:`hloshard.diff`).
The report goes to ``-o`` or stdout (rich text or ``--format json``); ``--html`` also writes an HTML page."""

from __future__ import annotations

import io
import json
import sys

import click

from ..diff import ONE_MODULE, diff_plans, in_seconds, render_text
from ..errors import InputError
from ..hlo.verify import verify_module
from ..io import write_text_atomic
from ..load import load_module
from ..report_html import diff_report_html
from ..textout import report_console
from .common import check_outputs, note_input, print_warnings, show_progress, step
from .cost import check_time_limit, named_counts, xla_completion
from .options import (Integer, apply_ties, complete_option, device_option, mesh_options, tie_option, tie_words,
                      timed_mesh_from_options)
from .progress import SolverProgress

EXAMPLES = """\b
Examples:
  hloshard diff model.propagated.hlo model.solved.hlo --mesh 2x4
  hloshard diff a.hlo b.hlo --mesh 2x4 --format json | jq '.differences[:3]'
  hloshard diff expert.pre.hlo solved.hlo --mesh 2x4 --complete xla --html diff.html   # A as jax.jit runs it
"""


def _load(path: str, show: bool):
    name = "<stdin>" if path == "-" else path
    note_input(path)
    with step(f"parsing {path}", show):
        module = load_module(path)  # HLO text or StableHLO .mlir; jax's Shardy out_shardings read, as cost does
        verify_module(module, name)
    return module


@click.command("diff", epilog=EXAMPLES)
@click.argument("file_a", metavar="A.hlo", type=str)
@click.argument("file_b", metavar="B.hlo", type=str)
@mesh_options
@device_option
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--top", type=Integer(0), default=20, show_default=True, help="differences listed in the text table")
@click.option("-o", "--output", default="-", show_default=True, metavar="OUT",
              help="where to write the report ('-' = standard output)")
@click.option("--html", "html_file", default=None, metavar="FILE", help="also write the report as HTML")
@click.option("--time-limit", "time_limit", type=float, default=None, metavar="SECONDS",
              help="Choose what each module's annotations leave open with the full solver (CP-SAT), searching "
                   "at most this long per module. Default: the fast completion `hloshard cost` uses (no CP-SAT).")
@tie_option
@complete_option
@click.option("--quiet", is_flag=True, help="No progress display.")
def command(file_a, file_b, mesh, device_ids, alpha, beta, device, fmt, top, output, html_file, time_limit, quiet,
            ties=(), complete="hloshard"):
    """Compare two sharding plans of the same module (e.g. XLA's propagation and hloshard's solve):
    per instruction sharded differently, the cost difference it causes; totals by kind (compute,
    communication, resharding, memory); the largest differences first. Both are priced as
    `hloshard cost` prices them; each change is B's figure less A's (in seconds with --device). --tie (as
    solve's) applies to both; a note says when A and B treat a training step's state differently.  --complete
    xla (as cost's): what a module leaves open is completed by XLA's propagation, as jax.jit runs it, before it
    is priced (a hand-written plan, e.g. a jax export, against a solved one)."""
    check_time_limit(time_limit)
    check_outputs(inputs=(file_a, file_b), output=output, html_report=html_file)
    show = show_progress(quiet)
    module_a = _load(file_a, show)
    apply_ties(module_a, ties)
    note_input(file_a, module_a)
    dmesh, scale, _ = timed_mesh_from_options(module_a, mesh, device_ids, alpha, beta, device)
    module_b = _load(file_b, show)
    apply_ties(module_b, ties)
    note_input(file_b, module_b)
    mesh_b = timed_mesh_from_options(module_b, mesh, device_ids, alpha, beta, device)[0]
    if mesh_b.num_devices != dmesh.num_devices:
        raise click.UsageError(f"{file_a} is for {dmesh.num_devices} devices but {file_b} for {mesh_b.num_devices}")
    completed = {}
    if complete == "xla":   # each side's open instructions chosen by XLA's propagation (as cost --complete xla)
        for side, path, mod, m in (("a", file_a, module_a, dmesh), ("b", file_b, module_b, mesh_b)):
            note_input(path, mod)
            written, open_before = xla_completion(mod, "<stdin>" if path == "-" else path, m.num_devices, show)
            arrays, tuples = named_counts(mod, written)   # on xla_open_before's base (arrays), as cost counts
            completed[side] = {"xla_propagated": arrays, "xla_propagated_tuples": tuples, "xla_open_before": open_before}
    note_input(file_b, None)
    with SolverProgress(show, time_limit) as progress:
        try:
            report = diff_plans(module_a, module_b, dmesh, mesh_b, time_limit=time_limit,
                                progress=progress if show else None)
        except InputError as exc:   # not two plans of one module: about both files, not B's alone (fresh33)
            if ONE_MODULE in str(exc):
                exc.locate(" and ".join("<stdin>" if f == "-" else f for f in (file_a, file_b)))
            raise
    report["a"], report["b"], report["ties"] = file_a, file_b, tie_words(ties)
    report["complete"] = complete
    if completed:
        report["xla_completion"] = completed
    if scale is not None:   # --device: every cost in seconds (the device's time model, as solve / cost)
        in_seconds(report, scale.seconds_per_unit, scale.profile.name)
    print_warnings(side_warnings(report["warnings"], file_a, file_b))   # stderr in every format, as cost gives them
    if html_file:
        write_text_atomic(html_file, diff_report_html(report))
    if fmt == "json":
        write_text_atomic(output, json.dumps(report, indent=2, sort_keys=True) + "\n")
        return
    names = ("A", "B")
    buf = io.StringIO()
    buf.write(f"A = {file_a}\nB = {file_b}\n")
    render_text(report, report_console(buf, terminal=output == "-" and sys.stdout.isatty()), top=top, names=names)
    write_text_atomic(output, buf.getvalue())


def side_warnings(warnings: dict, file_a: str, file_b: str) -> list[str]:
    """``diff``'s warnings on stderr: each of ``warnings`` (``{"a": [...], "b": [...]}``, :func:`hloshard.diff.diff_plans`'s,
    ``cost``'s text for each side) once, as ``cost`` words it when both sides give it (two plans of one module share
    its loops), else after the file it is about (fresh-clone check 37, #9: a guessed trip count was priced silently)."""
    a, b = warnings.get("a") or [], warnings.get("b") or []
    return ([w for w in a if w in b] + [f"{file_a}: {w}" for w in a if w not in b]
            + [f"{file_b}: {w}" for w in b if w not in a])
