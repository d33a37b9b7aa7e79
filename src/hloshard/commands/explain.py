"""``hloshard explain MODULE --instruction NAME``: why one instruction is sharded as it is
(:mod:`hloshard.explain_instruction`).  The report goes to ``-o`` or stdout (rich text, or
``--format json``); ``--html`` also writes a self-contained HTML page.  Exit 2 on bad input."""

from __future__ import annotations

import io
import json
import sys

import click

from .options import Integer, apply_ties, device_option, mesh_options, tie_option, timed_mesh_from_options
from ..explain_instruction import attach_xla, explain_instruction, in_seconds, render_text
from ..hlo.verify import verify_module
from ..io import write_text_atomic
from ..load import load_module
from ..report_html import explain_report_html
from ..textout import report_console
from .common import check_outputs, note_input, print_warnings, show_progress, step, xla_ready
from .cost import check_time_limit, xla_failure
from .progress import SolverProgress

EXAMPLES = """\b
Examples:
  hloshard explain model.solved.hlo --instruction dot.7 --mesh 2x4
  hloshard explain model.propagated.hlo --instruction dot.7 --why-not '{devices=[1,8]<=[8]}' --xla
  hloshard explain model.solved.hlo --instruction dot.7 --format json | jq .alternatives
"""


@click.command("explain", epilog=EXAMPLES)
@click.argument("module_file", metavar="MODULE.hlo", type=str)
@click.option("--instruction", "instruction", required=True, metavar="NAME", help="the instruction to explain")
@mesh_options
@device_option
@click.option("--alternatives", type=Integer(0, 1000), default=5, show_default=True,
              help="how many alternative shardings to list (best total cost change first)")
@click.option("--why-not", "why_not", metavar="SHARDING", default=None,
              help="also evaluate this sharding, e.g. '{devices=[1,8]<=[8]}'")
@click.option("--radius", type=Integer(0, 10), default=2, show_default=True,
              help="operand/user steps around the instruction re-solved for each alternative")
@click.option("--verify", is_flag=True,
              help="also price each listed alternative as `hloshard cost` prices the module rewritten with its "
                   "shardings (one full evaluation each)")
@click.option("--xla", "use_xla", is_flag=True,
              help="also partition the module with XLA (needs jax) and show the collectives it inserts here")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("-o", "--output", default="-", show_default=True, metavar="OUT",
              help="where to write the report ('-' = standard output)")
@click.option("--html", "html_file", default=None, metavar="FILE", help="also write the report as HTML")
@click.option("--time-limit", "time_limit", type=float, default=None, metavar="SECONDS",
              help="Choose what the module's annotations leave open with the full solver (CP-SAT), searching at "
                   "most this long. Default: the fast completion `hloshard cost` uses (no CP-SAT).")
@click.option("--quiet", is_flag=True, help="No progress display.")
@tie_option
def command(module_file, instruction, mesh, device_ids, alpha, beta, device, alternatives, why_not, radius, verify, use_xla,
            fmt, output, html_file, time_limit, quiet, ties=()):
    """Explain the sharding of one instruction: the strategy behind it (operand shardings it needs,
    compute / communication / resharding cost, memory per device), the collectives it causes, its
    source location, and the best alternative shardings with the change of the module's TOTAL cost
    each would bring when its neighbourhood is re-solved (in seconds with --device).  --tie (as solve's,
    cost's and diff's) prices a training step's new state in the layout its parameter came in with, so the
    module's total is the one `hloshard cost --tie ...` gives."""

    check_time_limit(time_limit)
    check_outputs(inputs=(module_file,), output=output, html_report=html_file)
    note_input(module_file)
    show = show_progress(quiet)
    name = "<stdin>" if module_file == "-" else module_file
    with step(f"parsing {module_file}", show):
        module = load_module(module_file)  # HLO text or StableHLO .mlir; jax's Shardy out_shardings read
        verify_module(module, name)
    note_input(module_file, module)
    apply_ties(module, ties)   # --tie: checked against the module here, before any work
    if use_xla:
        xla_ready(module, name)
    dmesh, scale, _ = timed_mesh_from_options(module, mesh, device_ids, alpha, beta, device)
    with SolverProgress(show, time_limit) as progress:
        expl = explain_instruction(module, dmesh, instruction, alternatives=alternatives, why_not=why_not,
                                   radius=radius, filename=name, verify=verify, time_limit=time_limit,
                                   progress=_then_alternatives(progress) if show else None)
    if scale is not None:   # --device: every cost in seconds (the device's time model, as solve / cost)

        in_seconds(expl, scale.seconds_per_unit, scale.profile.name)
    if use_xla:
        with step("XLA: partitioning the module (child process)", show):
            attach_xla(expl, module, dmesh.num_devices)
        failed = xla_failure((expl.xla or {}).get("error"), command="explain")   # cost --xla's one rule
        if failed is not None:
            raise failed.locate(name)
    print_warnings(expl.warnings)   # stderr in every format, as cost and solve give them (fresh-clone check 37, #9)
    if html_file:
        write_text_atomic(html_file, explain_report_html(expl.to_json()))
    if fmt == "json":
        write_text_atomic(output, json.dumps(expl.to_json(), indent=2, sort_keys=True) + "\n")
        return

    buf = io.StringIO()
    render_text(expl, report_console(buf, terminal=output == "-" and sys.stdout.isatty()))
    write_text_atomic(output, buf.getvalue())


def _then_alternatives(progress):
    """``progress`` for the module's evaluation; after its last phase the line says the alternatives
    are being re-solved."""
    def report(event: dict):
        progress({**event, "phase": "alternatives"} if event.get("phase") == "pricing" else event)
    return report
