"""The ``hloshard`` command line: a thin click group.

Each subcommand lives in ``hloshard/commands/<name>.py`` as a click command called ``command`` and is
imported only when used (so ``hloshard fmt`` never pays for importing OR-Tools). Every
:class:`~hloshard.errors.HloshardError` becomes one short message on stderr and its exit code
(2 for usage / input errors, 3 for a solve with no feasible solution): never a traceback.
"""

from __future__ import annotations

import importlib
import sys

import click

from . import __version__
from .errors import HloshardError, HloSyntaxError

#: command name -> module under hloshard.commands
COMMANDS = {
    "fmt": "fmt",
    "solve": "solve",
    "cost": "cost",
    "solve-problem": "solve_problem",
    "explain-reshape": "explain_reshape",
    "lint": "lint",
    "combine": "combine",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(COMMANDS)

    def get_command(self, ctx, name):
        module = COMMANDS.get(name)
        if module is None:
            return None
        try:
            mod = importlib.import_module(f"hloshard.commands.{module}")
        except ModuleNotFoundError as exc:
            if exc.name == f"hloshard.commands.{module}":
                return None  # not built yet
            raise
        return mod.command

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except HloshardError as exc:
            text = str(exc)
            click.echo(text if isinstance(exc, HloSyntaxError) else f"hloshard: error: {text}", err=True)
            ctx.exit(exc.exit_code)
        except RecursionError:
            click.echo("hloshard: error: input nested too deeply", err=True)
            ctx.exit(2)
        except MemoryError:
            click.echo("hloshard: error: out of memory on this input", err=True)
            ctx.exit(2)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="hloshard")
def main() -> None:
    """Shard XLA HLO programs across a device mesh.

    \b
    solve            choose a sharding for every instruction (CP-SAT) and write annotated HLO
    cost             evaluate the shardings a module already carries
    explain-reshape  what resharding around a reshape costs, and who pays for it
    lint             check sharding annotations (text, JSON, SARIF, GitHub)
    combine          merge small collectives into variadic ones
    fmt              parse and print HLO canonically
    solve-problem    solve an IOPDDL auto-sharding problem file
    """


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
