"""``hloshard fmt FILE [-o OUT]``: parse HLO text and print it canonically.

``-`` reads standard input / writes standard output. The output file is written atomically, and
not at all when the input does not parse or the verifier refuses it (the one validity rule of every
command, :func:`hloshard.hlo.verify.verify_module`; the error goes to stderr, exit code 2).
"""

from __future__ import annotations

import click

from ..errors import UsageError
from ..hlo import parse_file, parse_module, print_module
from ..hlo.verify import verify_module
from ..io import is_stablehlo_path, read_text, write_text_atomic
from .common import check_outputs, note_input


@click.command("fmt", epilog="""\b
Examples:
  hloshard fmt model.hlo                    # canonical text on stdout
  hloshard fmt model.hlo -o model.fmt.hlo   # written atomically
  hloshard fmt --check model.hlo            # exit 1 when not canonical
""")
@click.argument("file", type=str)
@click.option("-o", "--output", "output", default="-", show_default=True, metavar="OUT",
              help="where to write the formatted module ('-' = standard output)")
@click.option("--check", is_flag=True, help="write nothing; exit 1 when FILE is not already formatted")
def command(file: str, output: str, check: bool) -> None:
    """Parse FILE (HLO text, '-' for stdin) and print it in canonical form.

    \b
    Canonical form (what --check compares with; fmt is idempotent):
    - header 'HloModule NAME, key=value, ...', attributes in written order;
      entry_computation_layout as XLA prints it, /*index=N*/ before every fifth shape
    - a blank line after the header and after each computation, callees first
    - one instruction per line, indented two spaces:
      '[ROOT ]%name = shape opcode(%a, %b), attr=value, ...', operands without
      shapes, /*index=N*/ before every fifth operand and tuple element,
      attributes in written order, values in their canonical spelling
    - other comments are dropped, except '/* hloshard: ignore[...] */'
    - single spaces only: no runs of spaces outside strings, no trailing spaces
    - names keep the '%' style most of the input used
    XLA's own dumps differ slightly (operand shapes, blank lines), so they
    take one fmt pass before --check passes.
    """

    note_input(file)
    if is_stablehlo_path(file):   # solve / cost read StableHLO through jaxlib; fmt prints HLO text only
        raise UsageError(f"{file}: fmt formats HLO text only, and a .mlir file is StableHLO; `hloshard solve` "
                         f"and `cost` read it, or give fmt the HLO (jax: `.lower(...).as_text(dialect=\"hlo\")`)")
    if not check:
        check_outputs(output=output)
    name = "<stdin>" if file == "-" else file
    if check:
        text = read_text(file)

        module = parse_module(text, name)
        verify_module(module, name)   # the one validity rule: what solve / cost / lint refuse, fmt refuses
        out = print_module(module)
        if out != text:
            click.echo(f"{file}: would be reformatted", err=True)
            raise SystemExit(1)
        return
    module = parse_file(file)
    verify_module(module, name)
    write_text_atomic(output, print_module(module))
