"""``hloshard explain-reshape``: what resharding around a reshape costs, and who pays for it.

Two forms::

    hloshard explain-reshape MODULE.hlo --instruction NAME [--mesh 2x4] [--alpha 1,1] [--beta 0.01,1]
    hloshard explain-reshape --operand 'f16[32,16,1000,256]' --operand-sharding '{devices=[2,4,1,1]<=[8]}' \\
        --shape 'f16[512,1000,256]' [--sharding '{...}'] --mesh 2x4

Rich text by default; ``--format json`` writes the stable schema of ``docs/explain-reshape.md``.
``--xla`` also partitions the tiny module with XLA (jax in a child process) and flags disagreements.
Bad input (rank mismatch, device count not the mesh size, element count differs, unknown or
non-reshape instruction) is one error line and exit code 2.
"""

from __future__ import annotations

import io
import json
import sys

import click

from .options import Integer, mesh_from_options, mesh_options
from ..errors import HloSyntaxError, InputError, UsageError
from ..explain import attach_xla, explain_reshape, render_text, report_to_json
from ..hlo.shape import parse_shape
from ..hlo.sharding import HloSharding
from ..io import write_text_atomic
from ..load import load_module
from .common import check_outputs, note_input


def _parse_shape_opt(text: str, flag: str):
    try:
        return parse_shape(text)
    except HloSyntaxError as exc:
        raise UsageError(f"{flag} {text!r}: {exc.message}") from None


def _parse_sharding_opt(text: str, flag: str):
    t = text.strip()
    if not t.startswith("{"):
        t = "{" + t + "}"
    try:
        return HloSharding.parse(t)
    except HloSyntaxError as exc:
        raise UsageError(f"{flag} {text!r}: {exc.message}") from None


@click.command("explain-reshape", epilog="""\b
Examples:
  hloshard explain-reshape samples/reshape_seed.hlo --instruction reshape --mesh 2x4
  hloshard explain-reshape --operand 'f16[32,16,1000,256]' --operand-sharding '{devices=[2,4,1,1]<=[8]}' \\
      --shape 'f16[512,1000,256]' --mesh 2x4 --format json
""")
@click.argument("module_file", required=False, metavar="[MODULE.hlo]")
@click.option("--instruction", "instruction", metavar="NAME", help="the reshape instruction to explain (module form)")
@click.option("--operand", "operand", metavar="SHAPE", help="operand shape, e.g. 'f16[32,16,1000,256]'")
@click.option("--operand-sharding", "operand_sharding", metavar="SHARDING", help="operand sharding, e.g. '{devices=[2,4,1,1]<=[8]}'")
@click.option("--shape", "shape", metavar="SHAPE", help="reshape output shape, e.g. 'f16[512,1000,256]'")
@click.option("--sharding", "sharding", metavar="SHARDING",
              help="reshape output sharding (without it: the best output shardings are listed)")
@mesh_options
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--alternatives", "max_alternatives", type=Integer(0, 1000), default=5, show_default=True,
              help="how many alternative output shardings to list")
@click.option("--xla", "use_xla", is_flag=True,
              help="also partition the module with XLA (needs jax) and show what it inserts beside the plan")
@click.option("-o", "--output", "output", default="-", show_default=True, metavar="OUT",
              help="where to write the report ('-' = standard output)")
def command(module_file, instruction, operand, operand_sharding, shape, sharding, mesh, device_ids, alpha, beta,
            fmt, max_alternatives, use_xla, output):
    """Explain the resharding a reshape needs: plan, cost, memory, accounting and alternatives.

    \b
    hloshard explain-reshape MODULE.hlo --instruction NAME --mesh 2x4 --alpha 1,1 --beta 0.01,1
    hloshard explain-reshape --operand 'f16[32,16,1000,256]' \\
        --operand-sharding '{devices=[2,4,1,1]<=[8]}' --shape 'f16[512,1000,256]' \\
        [--sharding '{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}'] --mesh 2x4

    The JSON schema is documented in docs/explain-reshape.md.
    """

    check_outputs(inputs=(module_file,), output=output)
    if module_file is not None:
        note_input(module_file)
    direct = [("--operand", operand), ("--operand-sharding", operand_sharding), ("--shape", shape),
              ("--sharding", sharding)]
    if module_file is not None:
        given = [f for f, v in direct if v is not None]
        if given:
            raise UsageError(f"{', '.join(given)} cannot be combined with MODULE.hlo (shapes and shardings come "
                             f"from the module)")
        if not instruction:
            raise UsageError("MODULE.hlo needs --instruction NAME (the reshape to explain)")

        module = load_module(module_file)  # HLO text or StableHLO .mlir
        name = instruction.lstrip("%")
        note_input(module_file, module)
        instr = None
        for ins in module.all_instructions():
            if ins.name == name or ins.name.lstrip("%") == name:
                instr = ins
                break
        if instr is None:
            raise InputError(f"no instruction named {instruction!r} in {module_file}")
        if instr.opcode != "reshape":
            raise InputError(f"{instr.name} is not a reshape (its opcode is {instr.opcode})")
        if len(instr.operands) != 1:
            raise InputError(f"{instr.name} has {len(instr.operands)} operands; a reshape has one")
        op = instr.operands[0]
        the_mesh = mesh_from_options(module, mesh, device_ids, alpha, beta)
        osh = op.sharding
        if osh is not None and osh.kind == "tuple":
            raise InputError(f"operand {op.name} has a tuple sharding {osh}")
        rsh = instr.sharding
        report = explain_reshape(op.shape, instr.shape, osh, rsh, the_mesh, instruction=instr.name,
                                 operand_name=op.name, max_alternatives=max_alternatives)
    else:
        if instruction:
            raise UsageError("--instruction needs MODULE.hlo")
        missing = [f for f, v in direct[:3] if v is None]
        if missing:
            raise UsageError(f"give MODULE.hlo --instruction NAME, or {', '.join(missing)} "
                             f"(with --operand, --operand-sharding and --shape)")
        in_shape = _parse_shape_opt(operand, "--operand")
        out_shape = _parse_shape_opt(shape, "--shape")
        osh = _parse_sharding_opt(operand_sharding, "--operand-sharding")
        rsh = _parse_sharding_opt(sharding, "--sharding") if sharding is not None else None
        the_mesh = mesh_from_options(None, mesh, device_ids, alpha, beta)
        report = explain_reshape(in_shape, out_shape, osh, rsh, the_mesh, max_alternatives=max_alternatives)
    if use_xla:
        attach_xla(report)
    if fmt == "json":
        text = json.dumps(report_to_json(report), indent=2, sort_keys=False) + "\n"
        write_text_atomic(output, text)
        return
    from rich.console import Console

    if output == "-" and sys.stdout.isatty():
        render_text(report, Console())
        return
    buf = io.StringIO()
    console = Console(file=buf, width=120, color_system=None, force_terminal=False, soft_wrap=False)
    render_text(report, console)
    write_text_atomic(output, buf.getvalue())
