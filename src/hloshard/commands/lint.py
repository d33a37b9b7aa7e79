"""``hloshard lint``: check the sharding annotations of HLO files (CI-friendly).

Exit status: 0 clean, 1 when a finding is at or above ``--fail-on``, 2 for a usage error or an
input that cannot be read (the readable inputs are still linted and reported).
"""

from __future__ import annotations

import re
import sys

import click

from ..errors import UsageError
from ..hlo.attributes import MAX_DEVICES
from ..io import read_text, write_text_atomic
from ..units import counted
from .common import check_outputs
from .options import BYTE_SIZE, Integer, mesh_from_options, mesh_options
from ..lint.config import load_config
from ..lint.context import LintOptions
from ..lint.engine import collect_paths, lint_paths
from ..lint.registry import all_rules, get_rule, select_rules
from ..lint.reporters import render

_FORMATS = ("text", "json", "sarif", "github")
_SEVERITIES = ("error", "warning", "info")


_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*\S", re.M)
_SHARDED = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=.*\bsharding=\{", re.M)

#: at most this many files are named one by one in :func:`sparse_notes`; more are counted in one note
SPARSE_NAMED = 5


#: XLA's compiled text (``compiled.as_text()``): a scheduled, partitioned program, with nothing left to propagate
_SCHEDULED = re.compile(r"^\s*HloModule\b[^\n]*\bis_scheduled=true\b")


def sparse_notes(files, share: float = 0.5, unparsable=()) -> list[str]:
    """Notes (stderr, not part of the report) for the linted files that write a sharding on fewer than ``share``
    of their instructions but on some, as a jax export does (its parameters and outputs): lint checks the
    shardings written, so "All checks passed" says nothing of the layouts XLA's propagation will give the rest
    (new user 30, F16: a GPT-2 export linted clean while ``cost`` listed 256-768 KiB collectives XLA inserts).
    Counted on the text (instruction lines, and those with ``sharding={``); a file that cannot be read is
    skipped, and so are ``unparsable`` files (the CLI passes those with an error finding: HS001, whose count would
    be of a text that does not parse, or one XLA refuses, such as HS111, on which the proposed run exits 2) and XLA's compiled per-device text (``is_scheduled=true``: partitioned already, it
    has nothing left for XLA's propagation; new user 33 F15, fresh-clone check 33)."""
    sparse = []
    for path in files:
        try:
            text = read_text(path) if path != "-" else None
        except UsageError:
            continue
        if text is None or path in unparsable or _SCHEDULED.match(text):
            continue
        total, sharded = len(_INSTRUCTION.findall(text)), len(_SHARDED.findall(text))
        if total and 0 < sharded < share * total:
            sparse.append((path, sharded, total))
    if len(sparse) > SPARSE_NAMED:
        return [f"{len(sparse):,} files write a sharding on fewer than half of their instructions (as a jax export "
                f"does, on its parameters and outputs): lint checks the shardings written; `hloshard cost FILE "
                f"--complete xla --xla` prices the collectives XLA's propagation adds to the rest"]
    return [f"{path}: {sharded:,} of {counted(total, 'instruction')} carry a sharding (as a jax export writes its "
            f"parameters and outputs): lint checks the shardings written; `hloshard cost {path} --complete xla "
            f"--xla` prices the collectives XLA's propagation adds to the rest" for path, sharded, total in sparse]


def _split(values) -> tuple[str, ...]:
    out = []
    for v in values or ():
        out.extend(p.strip() for p in v.split(",") if p.strip())
    return tuple(out)


def plain_text(rst: str) -> str:
    """The reStructuredText of a rule docstring as plain terminal text: ````code```` -> ``code``,
    ``**Bad**::`` -> ``Bad:``, a paragraph's closing ``::`` -> ``:``, ``*x*`` -> ``x``,
    ```text`_`` links -> ``text``."""
    import re

    out = re.sub(r"``([^`]+)``", r"\1", rst)
    out = re.sub(r"`([^`<]+?)(?: <[^>]+>)?`_+", r"\1", out)
    out = re.sub(r"\*\*([^*]+)\*\*", r"\1", out)
    out = re.sub(r"(?<![\w*])\*([^*\s][^*]*?)\*(?![\w*])", r"\1", out)
    out = re.sub(r"\s*::$", ":", out, flags=re.M)
    return out


def _explain(code: str) -> str:
    rule = get_rule(code)
    head = f"{rule.code} {rule.name} ({rule.severity}; {', '.join(rule.groups)})"
    return f"{head}\n{'=' * len(head)}\n\n{plain_text(rule.explanation())}\n"


def _list_rules() -> str:
    rules = all_rules()
    width = max(len(r.name) for r in rules)
    lines = [f"{r.code}  {r.name:<{width}}  {r.severity:<7}  {plain_text(r.summary())}" for r in rules]
    return "\n".join(lines) + "\n"


@click.command("lint", context_settings={"help_option_names": ["-h", "--help"]}, epilog="""\b
Examples:
  hloshard lint hlo/                                   # path:line:col: CODE message
  hloshard lint --format sarif -o lint.sarif --fail-on warning model.hlo
  hloshard lint --explain HS201
""")
@click.argument("paths", nargs=-1, metavar="[PATH]...")
@click.option("--select", multiple=True, metavar="CODES",
              help="Rules to run: codes, prefixes (HS1) or names, comma-separated or repeated. Default: all.")
@click.option("--ignore", multiple=True, metavar="CODES", help="Rules to skip (codes, prefixes or names).")
@click.option("--format", "fmt", type=click.Choice(_FORMATS), default="text", show_default=True,
              help="Output format.")
@click.option("--fail-on", type=click.Choice(_SEVERITIES), default=None,
              help="Exit 1 when a finding has this severity or a worse one. Default: error.")
@click.option("--num-partitions", type=Integer(min=1, max=MAX_DEVICES), default=None,
              help="Partitions every tiled sharding must cover (overrides the HloModule header).")
@mesh_options
@click.option("--reshard-threshold", type=BYTE_SIZE, default=None, metavar="BYTES",
              help="Report resharding edges receiving more than this per device (HS401). Default 64MiB.")
@click.option("-o", "--output", default="-", metavar="FILE", help="Write the report here (default stdout).")
@click.option("--config", "config_path", default=None, metavar="PYPROJECT",
              help="Read [tool.hloshard.lint] from this file instead of the nearest pyproject.toml.")
@click.option("--no-config", is_flag=True, help="Ignore pyproject.toml.")
@click.option("--explain", metavar="CODE", default=None, help="Explain a rule (rationale, bad/good example).")
@click.option("--list-rules", is_flag=True, help="List every rule with its code, name and severity.")
def command(paths, select, ignore, fmt, fail_on, num_partitions, mesh, device_ids, alpha, beta,
            reshard_threshold, output, config_path, no_config, explain, list_rules):
    """Check sharding annotations in HLO files and directories (recursing into *.hlo and *.txt).

    \b
    Rule groups: HS0xx syntax, HS1xx validity, HS2xx divisibility, HS3xx collectives,
    HS4xx cost, HS5xx consistency.  Suppress one finding with a trailing comment on the
    instruction:  /* hloshard: ignore[HS201] */
    Exit status: 0 clean, 1 findings at or above --fail-on, 2 usage error or unreadable input.
    """

    if explain:
        write_text_atomic(output, _explain(explain))
        return
    if list_rules:
        write_text_atomic(output, _list_rules())
        return
    if not paths:
        raise UsageError("no input: give HLO files or directories (or --list-rules / --explain CODE)")
    cfg = {} if no_config else load_config(path=config_path)
    sel = _split(select) or cfg.get("select") or ("HS",)
    ign = _split(ignore) or cfg.get("ignore") or ()
    mesh = mesh if mesh is not None else cfg.get("mesh")
    if mesh is not None or device_ids is not None or alpha is not None or beta is not None:
        mesh_from_options(None, mesh, device_ids, alpha, beta)  # validate now: UsageError, exit 2
    options = LintOptions(
        select=sel,
        ignore=ign,
        fail_on=fail_on or cfg.get("fail_on") or "error",
        reshard_threshold=reshard_threshold if reshard_threshold is not None
        else cfg.get("reshard_threshold", 64 * 2**20),
        num_partitions=num_partitions or cfg.get("num_partitions"),
        mesh=mesh, device_ids=device_ids, alpha=alpha, beta=beta,
    )
    rules = select_rules(options.select, options.ignore)
    collected = collect_paths(paths)
    check_outputs(inputs=collected[0], report=output)   # the report never replaces a linted file
    result = lint_paths(paths, options, collected=collected)
    color = fmt == "text" and output == "-" and sys.stdout.isatty()
    if result.files or fmt != "text":  # no "All checks passed" when nothing could be read
        write_text_atomic(output, render(fmt, result.findings, rules, files=len(result.files), color=color,
                                         unreadable=result.unreadable_inputs))
    for message in result.unreadable:
        click.echo(f"hloshard: error: {message}", err=True)
    # a file with an error finding is one XLA refuses: no note proposing an XLA run of it (fresh-clone check 37, #10a:
    # HS111's file was told to run `cost --complete xla --xla`, which exits 2 on it)
    for note in sparse_notes(result.files, unparsable={f.path for f in result.findings if f.severity == "error"}):
        click.echo(f"note: {note}", err=True)
    code = result.exit_code(options.fail_on)
    if code:
        click.get_current_context().exit(code)
