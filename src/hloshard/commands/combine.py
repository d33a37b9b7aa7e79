"""``hloshard combine MODULE.hlo``: merge small collectives into variadic ones (see :mod:`hloshard.combine`).

The combined module goes to ``-o`` (default: standard output) and the text report to standard error;
with ``--format json`` the JSON report is the product on standard output, so the module then needs
``-o`` (a usage error otherwise); with ``--report-only`` the report alone goes to standard output. Exit 2 for a syntax error, an invalid collective (nothing
is written; this includes invalid replica groups: an empty group, groups of different sizes, an id
named twice, an id out of range, see :func:`hloshard.combine.replica_group_problems`) or bad options.
"""

from __future__ import annotations

import json

import click

from .options import BYTE_SIZE, mesh_from_options, mesh_options
from ..combine import combine_module, parse_kinds
from ..errors import UsageError
from ..hlo import parse_file, print_module
from ..io import is_stdout, write_text_atomic
from ..units import UNIT_RULE
from .common import check_outputs, note_input


@click.command("combine", epilog="""\b
Examples:
  hloshard combine fsdp.hlo --mesh 2x4 --bucket-bytes 8KiB -o fsdp.combined.hlo
  hloshard combine fsdp.hlo --format json -o fsdp.combined.hlo | jq .merged
  hloshard combine fsdp.hlo --kinds all-gather --report-only
""")
@click.argument("file", type=str)
@click.option("--kinds", default="all-gather,reduce-scatter,all-reduce", show_default=True, metavar="K1,K2",
              help="collective kinds to combine (comma-separated: all-gather, reduce-scatter, all-reduce)")
@click.option("--bucket-bytes", type=BYTE_SIZE, default="25MiB", show_default=True, metavar="SIZE",
              help="most bytes per device one combined collective may move (e.g. 4MiB; 0 disables combining). "
                   "Units: " + UNIT_RULE + ".")
@click.option("-o", "--output", "output", default="-", show_default=True, metavar="OUT",
              help="where to write the combined module ('-' = standard output)")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="report format")
@click.option("--report-only", is_flag=True, help="print only the report; write no module")
@mesh_options
def command(file, kinds, bucket_bytes, output, fmt, report_only, mesh, device_ids, alpha, beta) -> None:
    """Combine same-kind collectives of FILE (HLO text, '-' for stdin) into variadic ones.

    Collectives combine when they have the same kind, replica groups, dimension, channel mode and
    reduction, do not depend on each other (through any path), and fit in --bucket-bytes. The report
    gives how many were merged and the latency saved under the alpha-beta cost model on --mesh (or the
    module's num_partitions; without either, costs are left out), priced exactly as `hloshard cost`
    prices collectives, so `hloshard cost` before minus after is the latency saved.

    Nothing is written, and the exit status is 2, when a collective is invalid: among others, an
    empty replica group, groups of different sizes, an id named twice, or an id at or above
    replica_count (when above 1), num_partitions x replica_count, or the --mesh size.
    """

    if fmt == "json" and not report_only and is_stdout(output):
        raise UsageError("--format json writes the report JSON on stdout: give -o FILE for the combined module "
                         "(or --report-only)")
    if not report_only:
        check_outputs(inputs=(file,), output=output)
    kind_list = parse_kinds(kinds)
    note_input(file)
    module = parse_file(file)
    note_input(file, module)
    dev_mesh = None
    if mesh is not None or (module.num_partitions or 0) > 1:
        dev_mesh = mesh_from_options(module, mesh, device_ids, alpha, beta)
    elif device_ids is not None or alpha is not None or beta is not None:
        raise UsageError("--device-ids / --alpha / --beta need --mesh (the module states no num_partitions)")
    report = combine_module(module, kind_list, bucket_bytes, dev_mesh)
    text = (json.dumps(report.to_json(), indent=2, sort_keys=True) + "\n") if fmt == "json" else report.to_text()
    if report_only:
        click.echo(text, nl=False)
        return
    write_text_atomic(output, print_module(module))
    click.echo(text, nl=False, err=(fmt != "json"))
