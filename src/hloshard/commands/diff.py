"""``hloshard diff A.hlo B.hlo``: two sharding plans of one module compared (:mod:`hloshard.diff`).
The report goes to ``-o`` or stdout (rich text or ``--format json``); ``--html`` also writes an HTML page."""

from __future__ import annotations

import io
import json
import sys

import click

from .options import mesh_from_options, mesh_options

EXAMPLES = """\b
Examples:
  hloshard diff model.propagated.hlo model.solved.hlo --mesh 2x4
  hloshard diff a.hlo b.hlo --mesh 2x4 --format json | jq '.differences[:3]'
  hloshard diff a.hlo b.hlo --mesh 2x4 --top 50 --html diff.html
"""


def _load(path: str, show: bool):
    from ..hlo import parse_module
    from ..hlo.verify import verify_module
    from ..io import read_text
    from .common import note_input, step

    name = "<stdin>" if path == "-" else path
    note_input(path)
    with step(f"parsing {path}", show):
        module = parse_module(read_text(path), name)
        verify_module(module, name)
    return module


@click.command("diff", epilog=EXAMPLES)
@click.argument("file_a", metavar="A.hlo", type=str)
@click.argument("file_b", metavar="B.hlo", type=str)
@mesh_options
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--top", type=click.IntRange(0), default=20, show_default=True, help="differences listed in the text table")
@click.option("-o", "--output", default="-", show_default=True, metavar="OUT",
              help="where to write the report ('-' = standard output)")
@click.option("--html", "html_file", default=None, metavar="FILE", help="also write the report as HTML")
def command(file_a, file_b, mesh, device_ids, alpha, beta, fmt, top, output, html_file):
    """Compare two sharding plans of the same module (e.g. XLA's propagation and hloshard's solve):
    per instruction sharded differently, the cost difference it causes; totals by kind (compute,
    communication, resharding, memory); the largest differences first. Both are priced as
    `hloshard cost` prices them; B - A is reported."""
    from ..diff import diff_plans, render_text
    from ..io import write_text_atomic
    from .common import check_outputs, note_input, show_progress, step

    check_outputs(inputs=(file_a, file_b), output=output, html_report=html_file)
    show = show_progress()
    module_a = _load(file_a, show)
    note_input(file_a, module_a)
    dmesh = mesh_from_options(module_a, mesh, device_ids, alpha, beta)
    module_b = _load(file_b, show)
    note_input(file_b, module_b)
    mesh_b = mesh_from_options(module_b, mesh, device_ids, alpha, beta)
    if mesh_b.num_devices != dmesh.num_devices:
        raise click.UsageError(f"{file_a} is for {dmesh.num_devices} devices but {file_b} for {mesh_b.num_devices}")
    note_input(file_b, None)
    with step("pricing both plans", show):
        report = diff_plans(module_a, module_b, dmesh, mesh_b)
    report["a"], report["b"] = file_a, file_b
    if html_file:
        from ..report_html import diff_report_html

        write_text_atomic(html_file, diff_report_html(report))
    if fmt == "json":
        write_text_atomic(output, json.dumps(report, indent=2, sort_keys=True) + "\n")
        return
    from rich.console import Console

    names = ("A", "B")
    if output == "-" and sys.stdout.isatty():
        click.echo(f"A = {file_a}\nB = {file_b}")
        render_text(report, Console(), top=top, names=names)
        return
    buf = io.StringIO()
    buf.write(f"A = {file_a}\nB = {file_b}\n")
    render_text(report, Console(file=buf, width=140, color_system=None, force_terminal=False, soft_wrap=False),
                top=top, names=names)
    write_text_atomic(output, buf.getvalue())
