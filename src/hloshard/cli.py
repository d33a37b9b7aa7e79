"""The ``hloshard`` command line: a thin click group.

Each subcommand lives in ``hloshard/commands/<name>.py`` as a click command called ``command`` and is
imported only when used (so ``hloshard fmt`` never pays for importing OR-Tools). Every
:class:`~hloshard.errors.HloshardError` becomes one short message on stderr in one style
(``FILE:LINE:COL: error: ...`` when the location is known, :func:`hloshard.errors.format_error`) and
its exit code (2 for usage / input errors, 3 for a solve with no feasible solution): never a
traceback.  click's own option checks (ranges, choices, a missing argument) are said the same way,
``hloshard: error: ... (see `hloshard CMD --help`)``, exit 2.  Ctrl-C prints ``interrupted`` and exits 130 (a running CP-SAT search stops at once,
nothing is written; :func:`hloshard.commands.common.stop_on_interrupt`), also while a command's modules import
(:func:`hloshard.interrupts.held_interrupts`; the console script holds it while this module imports,
:mod:`hloshard.entry`).
"""

from __future__ import annotations

import importlib
import sys

import click

from . import __version__
from .errors import HloshardError, UsageError, format_error, locate_in_module
from .interrupts import held_interrupts
from .io import STDOUT_CLOSED, stdout_closed, stdout_to_devnull

#: command name -> (module under hloshard.commands, one-line help), in the order ``--help`` lists them
COMMANDS = {
    "solve": ("solve", "choose a sharding for every instruction (CP-SAT)"),
    "cost": ("cost", "price the shardings a module carries"),
    "explain": ("explain", "why one instruction is sharded so; better alternatives"),
    "diff": ("diff", "compare two sharding plans of one module"),
    "explain-reshape": ("explain_reshape", "what resharding around a reshape costs"),
    "lint": ("lint", "check sharding annotations (text, JSON, SARIF, GitHub)"),
    "combine": ("combine", "merge small collectives into variadic ones"),
    "fmt": ("fmt", "parse and print HLO canonically"),
    "solve-problem": ("solve_problem", "solve an IOPDDL auto-sharding problem file"),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return list(COMMANDS)

    def format_commands(self, ctx, formatter):
        """The command list from the table above: no module is imported to print ``--help``."""
        rows = [(name, text) for name, (_, text) in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def get_command(self, ctx, name):
        entry = COMMANDS.get(name)
        if entry is None:
            return None
        module = entry[0]
        try:
            with held_interrupts():   # an extension's init cut by Ctrl-C fails as ImportError, not as Ctrl-C
                mod = importlib.import_module(f"hloshard.commands.{module}")
        except ModuleNotFoundError as exc:
            if exc.name == f"hloshard.commands.{module}":
                return None  # not built yet
            raise
        return mod.command

    def resolve_command(self, ctx, args):
        name, cmd, rest = super().resolve_command(ctx, args)
        if cmd is not None:
            refuse_repeated_options(cmd, name, ctx, rest)
        return name, cmd, rest

    def invoke(self, ctx):
        try:
            with held_interrupts():
                common = importlib.import_module("hloshard.commands.common")
            with common.stop_on_interrupt():
                return super().invoke(ctx)
        except KeyboardInterrupt:
            import signal

            # we are leaving: a second, late SIGINT (a solver thread re-raising the one it saw) must not
            # turn exit 130 into death by signal
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            click.echo("interrupted", err=True)
            ctx.exit(130)
        except HloshardError as exc:
            filename, module = common.noted_input(ctx)
            # a usage error is about the options, not the input: it names a file only when it gives one
            if filename is not None and not isinstance(exc, UsageError):
                locate_in_module(exc, filename, module)
            click.echo(format_error(exc), err=True)
            ctx.exit(exc.exit_code)
        except click.UsageError as exc:
            # click's own checks of an option (a range, a choice, a missing argument): the one style of
            # every other error, naming the help to read, instead of click's usage block
            where = exc.ctx.command_path if exc.ctx is not None else ctx.command_path
            if exc.ctx in (None, ctx) and ctx.invoked_subcommand:   # an option's own parse error names no context:
                where = f"{ctx.command_path} {ctx.invoked_subcommand}"   # the help to read is the command's
            click.echo(f"hloshard: error: {exc.format_message()} (see `{where} --help`)", err=True)
            ctx.exit(exc.exit_code)
        except BrokenPipeError:
            # standard output's reader left (`| true`, `| head` done reading): one line and exit 1, as `solve`
            # says it for its module (fresh-clone check 32: `fmt | true`, `lint | true`, `solve --format json -o F |
            # true` exited 1 with nothing on stderr); a child process's pipe is not standard output: re-raised
            if not stdout_closed():
                raise
            stdout_to_devnull()
            click.echo("hloshard: error: " + STDOUT_CLOSED.format(
                what="the output", keep="give -o FILE to keep it"), err=True)
            ctx.exit(1)
        except RecursionError:
            click.echo("hloshard: error: input nested too deeply", err=True)
            ctx.exit(2)
        except MemoryError:
            click.echo("hloshard: error: out of memory on this input", err=True)
            ctx.exit(2)


def refuse_repeated_options(cmd: click.Command, name: str, parent: click.Context, args: list) -> None:
    """Raise click's UsageError (said as every option error is, exit 2) when ``args`` give an option of ``cmd``
    that takes one value more than once: click keeps the last silently, so ``--mesh 2x4 --mesh 4x2`` priced
    the plan on 4x2 without a word (new user 31, F12).  Options meant to repeat (``--tie``, ``multiple``), flags
    and counters are not checked; an argument list click cannot parse is left to the command's own parse, which
    says what is wrong with it.  Also refused: an option whose value is another option of ``cmd`` (``--mesh -o
    out.hlo``: the mesh forgotten, click took ``-o`` as it and blamed ``out.hlo``, fresh-clone check 32)."""
    sub = click.Context(cmd, info_name=name, parent=parent, resilient_parsing=True)
    try:
        _opts, _rest, order = cmd.make_parser(sub).parse_args(args=list(args))
    except click.UsageError:
        return
    names = {opt for p in cmd.params if isinstance(p, click.Option) for opt in (*p.opts, *p.secondary_opts)}
    for param in order:   # a value forgotten before the next option: click took that option as the value
        if isinstance(param, click.Option) and not (param.is_flag or param.count):
            values = _opts.get(param.name)
            for value in (values if isinstance(values, (list, tuple)) else [values]):
                if isinstance(value, str) and value in names:
                    flag = max(param.opts, key=len)
                    raise click.UsageError(
                        f"{flag} needs a value, but the next argument is the option {value}: give the value right "
                        f"after {flag}" + (" (e.g. --mesh 2x4)" if flag == "--mesh" else ""),
                        ctx=click.Context(cmd, info_name=name, parent=parent))
    seen: dict = {}
    for param in order:
        if isinstance(param, click.Option) and not (param.multiple or param.count or param.is_flag):
            seen[param.name] = seen.get(param.name, 0) + 1
            if seen[param.name] == 2:
                flag = max(param.opts, key=len)
                raise click.UsageError(f"{flag} is given more than once: give it once (only the last would count)",
                                       ctx=click.Context(cmd, info_name=name, parent=parent))


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="hloshard")
def main() -> None:
    """Shard XLA HLO programs across a device mesh.

    A command's main product goes to -o FILE or, without -o, to stdout; summaries and progress go
    to stderr. `hloshard COMMAND --help` shows a command's options and examples.

    \b
    Examples:
      hloshard solve model.pre.hlo --mesh 2x4 -o model.solved.hlo
      hloshard explain model.solved.hlo --instruction dot.7 --mesh 2x4
      hloshard lint hlo/
    """


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
