"""``hloshard cost``: evaluate the shardings a module already carries under hloshard's cost model.

Every annotation is kept exactly (a manual plan, or XLA's GSPMD-propagated module); unannotated
instructions and choices the annotations leave open (e.g. whether a dot's replicated output comes
from an all-reduce) take the cheapest consistent option.  Reports the total cost (cost units: compute
+ communication + resharding, the same objective ``solve`` minimises), the cost of each instruction
with the implicit reshardings on its operands (steps as in explain-reshape's plan), and the peak
memory per device.  ``--format json`` prints ``total_cost``, ``breakdown``, ``instructions`` (name,
opcode, sharding, cost, reshardings) and ``peak_memory_per_device``.  Exit 2 on bad input.
"""

from __future__ import annotations

import json

import click

from .common import check_outputs, note_input, show_progress, start_step, step
from .options import mesh_from_options, mesh_options


def cost_report(result, mesh) -> dict:
    from ..autoshard import per_instruction_costs

    ev = result.evaluation
    g = result.graph
    return {
        "total_cost": round(ev.total, 6),
        "breakdown": {"compute": round(ev.compute, 6), "communication": round(ev.communication, 6),
                      "resharding": round(ev.resharding, 6)},
        "peak_memory_per_device": int(ev.peak_memory),
        "peak_memory_at": g.schedule[ev.peak_time].name if ev.peak_time < len(g.schedule) else None,
        "mesh": mesh.to_json() if hasattr(mesh, "to_json") else str(mesh),
        "unannotated": result.unannotated,
        "instructions": [{**row, "cost": round(row["cost"], 6)} for row in
                         per_instruction_costs(g, result.choice, ev)],
    }


EXAMPLES = """\b
Examples:
  hloshard cost model.propagated.hlo --mesh 2x4
  hloshard cost model.solved.hlo --mesh 2x4 --format json | jq .total_cost
  hloshard cost model.solved.hlo --top 40 -o cost.txt
"""


@click.command("cost", epilog=EXAMPLES)
@click.argument("module_file", metavar="MODULE.hlo", type=str)
@mesh_options
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("-o", "--output", type=str, default=None, help="Write the report here.")
@click.option("--top", type=int, default=15, show_default=True, help="Instructions listed in the text table.")
def command(module_file, mesh, device_ids, alpha, beta, fmt, output, top):
    """Evaluate the shardings MODULE.hlo carries: total and per-instruction cost, reshardings, memory.

    Every written sharding is kept exactly. Instructions without a sharding are not an error: cost
    chooses their shardings itself (the cheapest consistent with the annotated ones, as solve would),
    says how many in the summary and lists them under "unannotated" in --format json.
    """
    check_outputs(output=output)
    note_input(module_file)
    show = show_progress()
    parsing = start_step(f"parsing {module_file}", show)
    from ..autoshard import evaluate_module
    from ..hlo.verify import verify_module
    from ..io import write_text_atomic
    from ..load import load_module

    module = load_module(module_file)  # HLO text or StableHLO .mlir
    verify_module(module, "<stdin>" if module_file == "-" else module_file)
    dmesh = mesh_from_options(module, mesh, device_ids, alpha, beta)
    parsing.stop()
    note_input(module_file, module)
    with step("building the cost graph and pricing the shardings", show):
        result = evaluate_module(module, dmesh)
    report = cost_report(result, dmesh)
    if fmt == "json":
        write_text_atomic(output or "-", json.dumps(report, indent=2, sort_keys=True) + "\n")
        return
    from io import StringIO

    from rich.console import Console
    from rich.table import Table

    from ..units import format_bytes

    buf = StringIO()
    con = Console(file=buf, width=120, force_terminal=False)
    b = report["breakdown"]
    con.print(f"total cost {report['total_cost']:,.2f}  (compute {b['compute']:,.2f}, communication "
              f"{b['communication']:,.2f}, resharding {b['resharding']:,.2f})")
    con.print(f"peak memory per device {format_bytes(report['peak_memory_per_device'])}"
              f" at {report['peak_memory_at']}")
    con.print(f"mesh {dmesh.describe()}" + "".join(f"\nnote: {n}" for n in dmesh.notes))  # issue 14
    un = report["unannotated"]
    if un:
        shown = ", ".join(un[:5]) + (", ..." if len(un) > 5 else "")
        con.print(f"{len(un)} instruction{'s' if len(un) != 1 else ''} carried no sharding; cost chose "
                  f"{'their shardings' if len(un) != 1 else 'its sharding'} (cheapest consistent): {shown}")
    rows = sorted(report["instructions"], key=lambda r: (-r["cost"], r["name"]))[:max(0, top)]
    t = Table(header_style="bold")
    for col in ("instruction", "opcode", "cost", "reshardings"):
        t.add_column(col, justify="right" if col == "cost" else "left")
    for r in rows:
        kinds = ", ".join(f"{s['kind']}" for x in r["reshardings"] for s in x["steps"])
        t.add_row(r["name"], r["opcode"], f"{r['cost']:,.2f}", kinds)
    con.print(t)
    write_text_atomic(output or "-", buf.getvalue())
