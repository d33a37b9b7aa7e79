"""``hloshard solve``: choose a sharding for every instruction with CP-SAT and write annotated HLO.

Reads MODULE.hlo (``-`` for stdin), builds the cost graph on the ``--mesh`` (strategies, resharding
edges, liveness; :mod:`hloshard.autoshard`), solves it (:func:`hloshard.solver.solve_problem`) and
writes the module with a ``sharding=`` on every instruction of the entry computation and of the
computations it calls through while / call / conditional, to ``-o`` or to stdout.  The summary (input
and output files, mesh, how many instructions changed sharding, cost against ``hloshard cost`` of the
input as given, memory per device against the budget, status and gap in words, the most expensive
resharding edges) goes to stderr with ``--format text``; with ``--format json`` the report JSON is
the product on stdout and the module needs ``-o`` (a usage error otherwise).  ``--report FILE.json``
writes the report JSON to a file, ``--html FILE`` a self-contained HTML report
(:mod:`hloshard.report_html`).  Every output path is checked before the work starts.
Timing figures live in the report only, never in the HLO: the same input and options give
byte-identical HLO when the solve is proven optimal, and always with ``--deterministic``.

Exit codes: 0 solved; 2 bad input or options (nothing written); 3 no feasible solution (an infeasible
memory budget, named by liveness point and tensors, or no solution before the time limit).
"""

from __future__ import annotations

import json
import math
import signal
import sys
import time

import click

from ..errors import HloshardError, InputError, SolveFailed, UsageError
from ..interrupts import ignore_interrupts_from_here, interrupts_reach
from ..io import STDOUT_CLOSED, is_stdout, stdout_to_devnull, write_text_atomic
from ..partition_specs import loops_note, unnamed_paths_note, write_partition_specs
from ..units import UNIT_RULE, budget_device_note, format_bytes, parse_memory_budget
from ..xla_check import start_jax_child
from .common import (check_outputs, hold_until_exit, note_input, print_warnings, process_started, show_progress,
                     start_step, step, xla_ready)
from .options import BYTE_SIZE, Integer, apply_ties, device_option, mesh_options, space_options, tie_option, \
    timed_mesh_from_options
from .progress import SolverProgress
from ..summary import gap_percent, print_summary, status_in_words, user_warning
from ..autoshard import collect_less, evaluate_module, is_per_device_program, processed_computations, solve_module
from ..autoshard.aliases import matching_pairs, module_ties
from ..autoshard.build import BuildStopped
from ..autoshard.coarse import given_plan
from ..autoshard.evaluate import counted_instructions, evaluate_choice
from ..autoshard.report import replicated_parameters_note, written_replicated_note
from ..autoshard.report_json import build_report
from ..autoshard.solve import STARVED_SOLVE_SHARE, known_without_graph
from ..autoshard.trivial import trivial_plans
from ..cost.steptime import format_seconds
from ..devices import get_profile
from ..hlo import print_module
from ..hlo.verify import verify_module
from ..load import load_module
from ..mesh_search import search_meshes
from ..peak import peak_tensors_of
from ..report_html import solve_report_html
from ..sdy import annotate_module
from ..textout import print_table, report_console
from ..timing import plan_timing
from ..xla_compare import compare_module, predicted_collective_bytes, tag_module_text
from .cost import render_comparison


class _Budget(click.ParamType):
    name = "bytes|none"

    def convert(self, value, param, ctx):
        if value is None or (isinstance(value, str) and value.strip().lower() == "none"):
            return None
        if isinstance(value, str):  # a byte size or a device name (tpu-v5e, h100-sxm, ...: units.DEVICE_MEMORY)
            return parse_memory_budget(value)   # a UsageError: the CLI's one error form, exit 2
        return BYTE_SIZE.convert(value, param, ctx)


def _replicated_cost(graph) -> float | None:
    """The cost units of ``graph``'s replicated plan (:func:`hloshard.autoshard.trivial.trivial_plans`), priced as
    the written module is (:func:`hloshard.autoshard.evaluate.evaluate_choice`); None when it has none."""
    plan = dict(trivial_plans(graph)).get("replicated")
    return None if plan is None else evaluate_choice(graph, plan).total


def _phase_seconds(started: float, phases: dict, result, auto: bool) -> dict:
    """Wall seconds of each phase of ``solve`` (``phases``: phase -> the monotonic instant it ended, in
    order): ``start`` (interpreter start and imports), ``parse`` (reading, checking, the mesh), ``price
    input`` (``hloshard cost`` of the input as given), ``build`` (the cost graph), ``coarse start`` (the coarse
    mesh's build and solve after the fine build, :func:`hloshard.autoshard.coarse.coarse_start`; 0 when none ran
    there), ``solve`` (the solver), ``re-price`` (writing the plan and pricing the written module, its local moves
    included: :func:`hloshard.autoshard.solve.apply_solution`), ``other`` (the rest of the solve: plans known
    without a search priced, the memory budget's steps between its solves), ``write`` (printing the module and
    the reports), ``xla`` (``--xla``: XLA's run after the files are written, :func:`xla_bound`; round 38, before it
    was part of ``write``), and ``total``.  With ``--mesh auto`` the candidates' builds and
    solves are one ``search`` phase.  (Before round 30 ``re-price`` held the coarse start and the rest too: new user
    29's F4 read 22.1 s of re-pricing where the re-pricing itself was a part of it.)"""
    out: dict = {}
    prev = started
    for name, end in phases.items():
        if name == "solve" and not auto:
            solver = float(getattr(result.solution, "seconds", 0.0) or 0.0)
            coarse = float(getattr(result, "seconds_coarse", 0.0) or 0.0)
            reprice = float(getattr(result, "seconds_reprice", 0.0) or 0.0)
            out["build"] = round(result.seconds_build, 3)
            out["coarse start"] = round(coarse, 3)
            out["solve"] = round(solver, 3)
            out["re-price"] = round(reprice, 3)
            out["other"] = round(max(0.0, end - prev - result.seconds_build - solver - coarse - reprice), 3)
        else:
            out["search" if name == "solve" else name] = round(max(0.0, end - prev), 3)
        prev = end
    out["total"] = round(prev - started, 3)
    return out


#: ``--partition-specs``'s reserve, in seconds per second of the command's own ``start`` phase (the interpreter's
#: start and hloshard's imports, measured in the same run, so the reserve scales with the machine's load): XLA's
#: propagation once its child is ready.  The child starts with the search (:class:`_ChildAtSolve`) and imports jax
#: beside it, so only the propagation after the solve is reserved (reserving the child's start too, 2.5 x, cost
#: GPT-2's 25 s solve its search: 28.9 M instead of 17.6 M); measured, the propagation after a solve that outlasted
#: the child's start over the start phase: the samples at most 1.08 (transformer_train_step), new user 30's GPT-2
#: and ViT (held out) at most 1.01 (BENCHMARKS.md, "CLI, round 31").  A solve shorter than the child's start
#: waits for it past the limit, as for the interpreter's own start (README).
PARTITION_SPECS_SHARE = 1.1


class _ChildAtSolve:
    """``solve_module``'s progress callback under ``--partition-specs``: the XLA child (``start()``) is started at
    the first event of a solver -- the cost graph is built then -- so its start (jax's import, a CPU-second or more)
    runs beside the search, not beside the build: started when the parse ended it slowed GPT-2's build 2x at load
    33, and the re-pricing reserve, a share of the build's seconds, then starved the search (BENCHMARKS.md, "CLI,
    round 31").  Every event also goes to ``inner`` (the live display, or None)."""

    def __init__(self, start):
        self.child = None
        self.inner = None
        self._start = start

    def __call__(self, event):
        if self.child is None and not (isinstance(event, dict) and event.get("phase") in ("building", "pricing")):
            self.child = self._start()
        if self.inner is not None:
            self.inner(event)

    def end(self) -> None:
        if self.child is not None:
            _end_child(self.child)


def _progress(at_solve, display):
    """The progress callback solve_module gets: ``at_solve`` (a :class:`_ChildAtSolve`, or None) around
    ``display``."""
    if at_solve is None:
        return display
    at_solve.inner = display
    return at_solve


#: ``solve --xla``: XLA's partitioning and memory analysis of the written module run after the search and the file
#: writes, outside ``--time-limit``, for at most :func:`xla_bound` seconds.  The floor is a compile of a mid-size
#: module on the 2-core machine under load (the samples take 5-30 s); the multiple lets a module whose search needed
#: a long limit take as long in XLA.  A policy, not fitted: new user 37's Qwen3.5 (XLA CPU 465 s to compile its own
#: layout at load 17-23, keras-hub's unrolled 63-step loop) at ``--time-limit 120`` is stopped after 240 s, its
#: module and report already written (round 38).
XLA_BOUND_FLOOR = 120.0
XLA_BOUND_MULTIPLE = 2.0
XLA_BOUND_WORDS = (f"the larger of {XLA_BOUND_FLOOR:.0f} s and {XLA_BOUND_MULTIPLE:g} x --time-limit; "
                   f"`hloshard cost OUT --xla` compares a written module without it")


def xla_bound(time_limit: float) -> float:
    """Seconds ``solve --xla`` gives XLA's two children (partitioning, then memory analysis) after the files are
    written: the larger of :data:`XLA_BOUND_FLOOR` and :data:`XLA_BOUND_MULTIPLE` x ``time_limit``."""
    return max(XLA_BOUND_FLOOR, XLA_BOUND_MULTIPLE * float(time_limit))


def _run_xla(module, dmesh, result, tagged, time_limit: float, report: dict, phases: dict, started: float, search,
             quiet: bool, said: set):
    """``solve --xla``: :func:`hloshard.xla_compare.compare_module` of the written plan within :func:`xla_bound`,
    its seconds booked as the ``xla`` phase (``report["seconds_phases"]``, after ``write``); the comparison, or None
    where XLA did not answer in time or failed -- then ``report["xla"]`` is ``{"xla_error": why}`` and a warning
    says that the module and the report were written without XLA's figures (a child past the bound is stopped)."""
    bound = xla_bound(time_limit)
    comparison = None
    try:
        with interrupts_reach(), step(f"XLA: partitioning the written module (at most {bound:.0f} s)",
                                      not quiet and sys.stderr.isatty()):
            comparison = compare_module(module, dmesh, result.written or result, tagged=tagged, timeout=bound)
        report["xla"] = comparison.to_json()
    except KeyboardInterrupt:   # Ctrl-C stops XLA's child (subprocess.run kills it); the files stay as written
        error, why = "interrupted", ("--xla: interrupted (Ctrl-C) during XLA's run, which was stopped: the module and "
                                     "the report are written without XLA's figures")
    except InputError as exc:
        error, why = str(exc), (f"--xla: {exc}; the plan is written without XLA's figures (XLA runs after the search, "
                                f"at most {bound:.0f} s: {XLA_BOUND_WORDS})")
    if comparison is None:
        report["xla"] = {"xla_error": error, "bound_seconds": bound}
        report.setdefault("warnings", []).append(why)
        if not quiet:
            click.echo(f"warning: {why}", err=True)
            said.add(why)
    phases["xla"] = time.monotonic()
    report["seconds_phases"] = _phase_seconds(started, phases, result, search is not None)
    return comparison


def partition_specs_reserve(start_seconds: float) -> float:
    """Seconds kept before ``--time-limit`` for ``--partition-specs``'s XLA propagation after the solve:
    :data:`PARTITION_SPECS_SHARE` x ``start_seconds`` (the command's start phase)."""
    return PARTITION_SPECS_SHARE * max(0.0, float(start_seconds))


def _end_child(child) -> None:
    """End the --partition-specs child when the command ends without giving it its module (an error, exit 3,
    Ctrl-C): it waits on its stdin otherwise."""
    if child.poll() is None:
        child.kill()
        child.wait()


def _write_product(path: str, text: str) -> bool:
    """Write the annotated module (``io.write_text_atomic``); True when ``path`` is standard output and it was
    closed before the write (``| true``: the reader left).  Standard output is then pointed at /dev/null, so that
    the summary still goes to stderr and the interpreter's last flush fails on nothing; the command ends with
    exit 1 and one line (fresh-clone check, round 30: the exit status was 1 and stderr empty, the summary lost)."""
    try:
        write_text_atomic(path, text)
    except BrokenPipeError:
        if path != "-":
            raise
        stdout_to_devnull()
        return True
    return False


def _echo_json(text: str) -> bool:
    """Print ``text`` (``--format json``'s report, the product on stdout) and flush; True when standard output was
    closed before it was all written (``| true``, ``| head``): standard output is then pointed at /dev/null
    (:func:`hloshard.io.stdout_to_devnull`) and the caller writes none of its files (fresh-clone check 32: the module
    was written, exit 1, stderr empty)."""
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        stdout_to_devnull()
        return True
    return False


#: report fields in wall seconds that do not start with ``seconds`` (left out under --deterministic)
WALL_CLOCK_FIELDS = ("reprice_reserve",)
#: the ``timing_left_out`` field of a --deterministic report: why it has no ``seconds*`` field and where they are
DETERMINISTIC_SECONDS = ("--deterministic: the wall-clock fields (seconds, seconds_build, seconds_solve, seconds_solver, "
                         "seconds_phases, reprice_reserve) are left out so that the report is byte-identical run to "
                         "run; the summary's time line on stderr gives each phase's seconds of this run")


def _public(report: dict, deterministic: bool) -> dict:
    """The report as written: with --deterministic without wall-clock fields, so it is byte-identical too."""
    if not deterministic:
        return report
    out = {k: v for k, v in report.items() if not k.startswith("seconds") and k not in WALL_CLOCK_FIELDS}
    # said where they went (new user 32 F10 looked for them in a --deterministic --memory-budget run's report and
    # read their absence as the budget's path dropping them): one constant sentence, so the bytes stay the same
    out["timing_left_out"] = DETERMINISTIC_SECONDS
    if "status_text" in out:
        out["status_text"] = status_in_words(out)
    return out


def failure_report(exc, mesh, keep: str, memory_budget, seconds: float) -> dict:
    """The ``--report`` JSON when solve exits 3: ``status`` ('infeasible' | 'timeout'), ``explanation``
    (the error message: liveness point and tensors for a memory budget), no objective."""
    return {
        "status": getattr(exc, "status", "infeasible"),
        "explanation": str(exc),
        "objective": None,
        "seconds": round(seconds, 3),
        "memory_budget": memory_budget,
        "keep_shardings": keep,
        "mesh": mesh.to_json() if hasattr(mesh, "to_json") else str(mesh),
    }


def untied_state_note(module) -> str | None:
    """A note when the written ``module`` looks like a training step whose state is not tied: it has no
    ``input_output_alias`` and no ``--tie``, and top-level root outputs have the shape and dtype of an
    entry parameter (each paired with the first unpaired such parameter, in order) but leave in another
    layout than it comes in, so a loop would reshard them before every next step, which no cost counts.
    None otherwise.  A new user's T5 train step came back with its parameters in replicated and its new
    parameters out split (round 14, finding 6); ``hloshard.jax.auto_shard`` ties them by itself."""
    if module_ties(module):
        return None
    root = module.entry.root
    if not root.shape.is_tuple or root.sharding is None or not root.sharding.is_tuple:
        return None
    first_leaf, leaf = {}, 0
    for j, sub in enumerate(root.shape.tuple_shapes):
        first_leaf[j] = leaf
        leaf += len(sub.leaves()) if not sub.is_array else 1
    params = {p.parameter_number: p for p in module.entry.parameters}
    elements = root.sharding.tuple_elements
    pairs = [(j, q) for j, q in matching_pairs(module)
             if first_leaf[j] < len(elements) and params[q].sharding is not None
             and elements[first_leaf[j]] != params[q].sharding]
    if not pairs:
        return None
    ex = " ".join(f"--tie {j}={q}" for j, q in pairs[:3])
    return (f"{len(pairs)} root outputs have the shape and dtype of an entry parameter and leave in another "
            f"layout than it comes in; if this is a training step, a loop reshards them before every next step "
            f"(no cost here counts it): `--tie matching` ties every output to the parameter of its shape and dtype, "
            f"in order, or `--tie OUTPUT_INDEX=PARAM_NUMBER` one pair (e.g. {ex}{' ...' if len(pairs) > 3 else ''})")


#: a candidate's gap above which the ``--mesh auto`` table says its search was cut short (the 1% that
#: issue 26 holds a solve to)
OPEN_GAP = 0.01


def print_mesh_search(search) -> None:
    """The ``--mesh auto`` table on stderr: mesh, status, cost, memory per device, gap, seconds."""
    from rich.table import Table

    t = Table(title=f"--mesh auto: {search.num_devices} devices", header_style="bold")
    timed = search.seconds_per_unit is not None   # --device: the objective as a step time
    for col, just in (("mesh", "left"), ("internal", "left"), ("status", "left"),
                      ("objective (s)" if timed else "cost", "right"),
                      ("memory / device", "right"), ("gap", "right"), ("seconds", "right")):
        t.add_column(col, justify=just)
    for i, tr in enumerate(search.trials):
        mark = " *" if i == search.best_index else ""
        t.add_row(tr.label + mark, str(tr.mesh), f"same as {tr.same_as}" if tr.same_as else tr.status,
                  "-" if tr.objective is None else format_seconds(tr.objective_seconds()) if timed else
                  f"{tr.objective:,.0f}" if abs(tr.objective) >= 1e6 else f"{tr.objective:,.2f}",
                  "-" if tr.peak_memory is None else format_bytes(tr.peak_memory),
                  "0" if tr.status == "optimal" else ("-" if tr.gap is None else gap_percent(tr.gap)),
                  f"{tr.seconds:.1f}")
    console = report_console(stderr=True)
    print_table(console, t)
    best = search.trials[search.best_index] if 0 <= search.best_index < len(search.trials) else None
    if best is not None and best.result is not None and getattr(best.result, "written", None) is not None \
            and len(search.trials) > 1:   # new user 18: "one column, two meanings"
        console.print("note: the * row's cost and memory are its written module's (the summary's figures); the "
                      "other rows' are the solver's own figures, which the candidates were ranked by",
                      highlight=False, markup=False)
    if timed:   # new-user trial: the table's figure and the summary's step time are two estimates
        console.print("note: objective (s) is the solver's objective in seconds, the figure the candidates are "
                      "ranked by; the summary's estimated step time re-prices the written module (each kernel's "
                      "reads at the per-device size of the buffers as written), so the two can differ",
                      highlight=False, markup=False)
    # candidates that ran out of time far from their bound: the table ranks what each found in its share,
    # not what its mesh holds (new user 19: a 2x4 row at 68% above a plain --mesh 2x4 solve's plan)
    open_ = [tr for tr in search.trials if not tr.same_as and tr.status == "feasible" and tr.gap is not None
             and tr.gap > OPEN_GAP]
    if open_:
        shared = sum(1 for tr in search.trials if not tr.same_as and tr.status not in ("skipped",))
        one = len(open_) == 1
        console.print(f"note: {', '.join(tr.label for tr in open_)} ended more than {OPEN_GAP:.0%} above "
                      f"{'its' if one else 'their'} bound in the time {'it' if one else 'they'} had"
                      + (f" ({shared} candidates shared the time limit)" if shared > 1 else "")
                      + ": a cheaper plan may exist there; a longer --time-limit"
                      + (", or --mesh SHAPE alone with the whole limit," if shared > 1 else "")
                      + " searches further", highlight=False, markup=False)
    for tr in search.trials:   # why a candidate has no figures (refined twins are named in the table)
        if tr.message and not tr.same_as:
            console.print(f"note: {tr.label}: {tr.status}: {tr.message}", highlight=False, markup=False)


def changed_shardings(before: dict, graph) -> dict:
    """How many of the input's instructions got a sharding different from the input's (``before``:
    instruction name -> its sharding or None, for the instructions the reports count:
    :func:`hloshard.autoshard.evaluate.counted_instructions`, each computation once as in the input).
    An instruction of a computation called from several sites counts as changed when any of its
    per-site copies in ``graph`` changed."""
    now: dict = {}
    for instr in graph.schedule:
        base = instr.name if instr.name in before else _clone_origin(instr.name, before)
        if base is not None:
            now.setdefault(base, []).append(instr.sharding)
    changed = unannotated = 0
    for name, old in before.items():
        if old is None:
            unannotated += 1
            changed += 1
        elif any(new is None or not _same_text(old, new) for new in now.get(name, [])):
            changed += 1
    return {"instructions": len(before), "changed": changed, "unannotated": unannotated}


def _clone_origin(name: str, before: dict):
    """The input instruction a per-call-site clone (``NAME.clone...``) was made from, or None."""
    base = name
    while "." in base:
        base = base.rsplit(".", 1)[0]
        if base in before:
            return base
    return None


def _same_text(old, new) -> bool:
    try:
        return old == new
    except Exception:  # noqa: BLE001 - unusual sharding kinds: compare the text
        return str(old) == str(new)


def per_device_warning(module, module_file: str) -> str | None:
    """The warning ``solve`` gives for an input that XLA has already partitioned
    (:func:`hloshard.autoshard.is_per_device_program`), or None for a logical module."""
    if not is_per_device_program(module):
        return None
    name = "<stdin>" if module_file == "-" else module_file
    return (f"{name} is already a per-device program (its collectives cross partitions: XLA's SPMD partitioner "
            f"wrote them); solve treats its per-device shapes as a logical program's and splits them again. To "
            f"plan the model, give solve the module before partitioning (jax: `jax.jit(f).lower(...)"
            f".as_text(dialect=\"hlo\")`); `hloshard cost` prices this one as it runs")


def _said_before_build(exc, deterministic: bool, time_limit: float, started: float, entered: float, t0: float,
                       phases: dict) -> None:
    """A stopped build's message (``exc``, a :class:`BuildStopped`; anything else is left as it is) given what the
    limit went to before the build (new user 33 F13: `--time-limit 5` at load 20, "passed its deadline after 0.0 s"
    read as the graph's fault when the interpreter's start had used the 5 s); once."""
    if not isinstance(exc, BuildStopped) or deterministic or not exc.args or not isinstance(exc.args[0], str) \
            or getattr(exc, "_before_said", False):
        return
    before = t0 - started
    exc.args = (f"{exc.args[0]}; of the --time-limit {time_limit:g} s, {before:.1f} s went before the build "
                f"(the interpreter's start and hloshard's imports {entered - started:.1f} s, reading and "
                f"checking the module {t0 - entered:.1f} s, pricing the input as given "
                f"{phases['price input'] - t0:.1f} s)",) + exc.args[1:]
    exc._before_said = True


def _refuse(exc, report_file, dmesh, keep, memory_budget, deterministic: bool, time_limit: float, started: float,
            entered: float, t0: float, phases: dict):
    """Exit 3 on a failed solve (``exc`` re-raised): a stopped build's message says what the limit went to before
    the build (:func:`_said_before_build`), and ``--report`` gets :func:`failure_report`."""
    _said_before_build(exc, deterministic, time_limit, started, entered, t0, phases)
    if report_file:
        write_text_atomic(report_file, json.dumps(failure_report(exc, dmesh or "auto", keep, memory_budget,
                                                                 time.monotonic() - t0),
                                                  indent=2, sort_keys=True) + "\n")
    raise exc


def price_input(module, mesh, time_limit: float):
    """``hloshard cost`` of the input as given, or (None, why not) when it cannot be priced quickly:
    a mostly unannotated input (the price would be a full solve) or one whose annotations do not fit.
    Third: the pricing (its CostResult, the solver's start: :func:`hloshard.autoshard.coarse.given_plan`) or None."""
    instrs = [i for c in processed_computations(module) for i in c.instructions]
    annotated = sum(1 for i in instrs if i.sharding is not None)
    if not instrs or annotated < 0.5 * len(instrs):
        return None, (f"the input carries shardings on {annotated:,} of {len(instrs):,} instructions: its own "
                      f"cost is not priced"), None
    try:
        priced = evaluate_module(module, mesh, time_limit=time_limit)
        return priced.total_cost, None, priced
    except HloshardError as exc:
        return None, f"the input as given could not be priced: {exc}", None


EXAMPLES = """\b
Examples:
  hloshard solve model.pre.hlo --mesh 2x4 -o model.solved.hlo
  hloshard solve model.pre.hlo --mesh 2x4 --memory-budget 32MiB --time-limit 30 -o out.hlo --html report.html
  hloshard solve model.pre.hlo --mesh 2x4 -o out.hlo --format json | jq .status

\b
Exit status: 0 solved; 2 bad input or options (nothing written); 3 no plan: the memory
budget is infeasible (the message names the liveness point, the tensors and a lower bound
where one is proven) or no solution was found within the time limit (nothing written);
when not even the cost graph could be built in the time, the input's own layout (annotated
input) or the replicated plan is written instead, exit 0, with a warning that nothing was
searched; 130 interrupted (never a partial output file).
"""


@click.command("solve", epilog=EXAMPLES)
@click.argument("module_file", metavar="MODULE.hlo", type=str)
@mesh_options
@device_option
@space_options
@click.option("-o", "--output", type=str, default=None, metavar="FILE",
              help="Write the annotated HLO here (default: stdout; required with --format json).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="text: a summary on stderr; json: the report JSON on stdout (then -o is required).")
@click.option("--report", "report_file", type=str, default=None, metavar="FILE",
              help="Write the report JSON (status, objective, bound, gap, seconds, breakdown, peak memory) here; also on exit 3 (status and why).")
@click.option("--html", "html_file", type=str, default=None, metavar="FILE",
              help="Write a self-contained HTML report (summary, cost by computation, collectives, parameters).")
@click.option("--keep-shardings", "keep", type=click.Choice(["all", "io", "none"]), default="io", show_default=True,
              help="User shardings kept as they are: all, entry parameters/outputs and Sharding custom-calls (io), none.")
@click.option("--memory-budget", "memory_budget", type=_Budget(), default=None,
              help="Bytes per device (e.g. 64MiB), a device name (the names --device takes, tpu-v5e, h100-sxm, "
                   "...: its HBM size) or 'none' (default: no budget; with --device, that device's HBM). Units: "
                   + UNIT_RULE + ".")
@click.option("--time-limit", type=float, default=60.0, show_default=True, metavar="SECONDS",
              help="Wall-clock seconds for the whole command, from the process's start (parsing, building the cost "
                   "graph, solving, re-pricing and writing the result): the solver gets what the build leaves. "
                   "When the build alone takes longer, a warning says so at once, the solver gets as long as the "
                   "build took (0.5 s with an explicit --time-limit) and the command ends late; given explicitly on "
                   "a mesh refined or of several axes, the coarser mesh's graph is built first and, when the full graph would not be built in time, its plan is "
                   "written instead (a warning says so). The summary's 'time' line gives each phase. The result can depend on the "
                   "machine's load. With --deterministic it is the solver's work budget only.")
@click.option("--workers", type=Integer(1, 256), default=2, show_default=True, help="CP-SAT worker threads (1 to 256); with --mesh auto also how many candidate meshes are solved at once (forked processes, after the first).")
@click.option("--seed", type=Integer(0, 2**31 - 1), default=0, show_default=True, help="Random seed.")
@click.option("--deterministic", is_flag=True,
              help="Byte-identical output for the same input, seed, workers and limit, whatever the load: the "
                   "limit becomes a work budget (counted rounds, CP-SAT deterministic time); a loaded machine "
                   "takes longer instead of answering differently (no wall-clock limit then).")
@click.option("--export-problem", type=str, default=None, metavar="FILE",
              help="Also write the cost graph as an IOPDDL problem (.json or .json.gz).")
@click.option("--partition-specs", "partition_specs_file", type=click.Path(dir_okay=False), default=None,
              help="Also write the JAX PartitionSpecs of entry parameters and outputs, and the intermediate "
                   "shardings XLA's propagation would not reach from them, as JSON (needs the xla extra). "
                   "Entry parameters and outputs then split evenly only, as jax.jit requires of its "
                   "arguments and results.")
@click.option("--pin-operands/--no-pin-operands", default=True, show_default=True,
              help="Pin each dot/convolution/gather/scatter operand the plan reshards with a Sharding custom-call "
                   "(what with_sharding_constraint lowers to) in the planned layout, so XLA's partitioner carries "
                   "out the plan (measured: no more bytes than GSPMD under XLA on every sample, CPU backend and "
                   "TPU compiler; the pins compute nothing). Without it XLA picks its own variant from the "
                   "operands' layouts.")
@tie_option
@click.option("--local-moves/--no-local-moves", default=True, show_default=True,
              help="After the solve, re-solve the neighbourhood of every instruction that pays communication in "
                   "the written module (explain's kept re-solve) and keep the moves that lower hloshard cost of "
                   "it: plans outside the solver's space (a follower resharding the value it follows). Within "
                   "--time-limit (with --deterministic: at most one re-solve per cost-graph node); not with "
                   "--memory-budget.")
@click.option("--quiet", is_flag=True, help="No progress display and no summary.")
@click.option("--xla", "use_xla", is_flag=True,
              help="Also partition the written module with XLA (needs the xla extra): its collectives beside "
                   "the predicted ones in the summary and under 'xla' in the report. XLA runs after the module "
                   "and the report are written, outside --time-limit, for at most the larger of 120 s and "
                   "2 x --time-limit (the 'xla' phase of the time line); a run past that is stopped with a "
                   "warning, the files kept.")
def command(module_file, mesh, device_ids, alpha, beta, max_padding, devices, output, fmt, report_file, html_file,
            keep, memory_budget, time_limit, workers, seed, deterministic, export_problem, quiet,
            partition_specs_file=None, use_xla=False, pin_operands=False, ties=(), device=None, local_moves=True):
    """Choose a sharding for every instruction of MODULE.hlo on the device mesh (CP-SAT).

    The annotated module goes to -o (default stdout); the summary (input and output, mesh, how many
    instructions changed sharding, cost against the input as given, memory per device against the
    budget, status in words) goes to stderr, or with --format json the report JSON goes to stdout.
    Ctrl-C stops the search: "interrupted", nothing written, exit 130.
    """
    started = process_started()   # --time-limit covers the whole command (wall clock), from here
    entered = time.monotonic()
    collect_less()   # the collector run less often over the graphs' millions of objects (autoshard.solve)
    if not math.isfinite(time_limit) or time_limit <= 0:
        raise UsageError(f"--time-limit must be a positive finite number of seconds, got {time_limit}")
    if fmt == "json" and is_stdout(output):
        raise UsageError("--format json writes the report JSON on stdout: give -o FILE for the annotated module")
    if workers < 1:
        raise UsageError("--workers must be at least 1")
    check_outputs(inputs=(module_file,), output=output, report=report_file, html_report=html_file, export_problem=export_problem,
                  partition_specs=partition_specs_file)
    note_input(module_file)
    parsing = start_step(f"parsing {module_file}", show_progress(quiet))
    module = load_module(module_file)  # HLO text or StableHLO .mlir
    verify_module(module, "<stdin>" if module_file == "-" else module_file)
    apply_ties(module, ties)   # --tie: checked against the module here, before any work (strategy.ties.check_ties)
    auto = mesh is not None and mesh.strip().lower() == "auto"
    if auto and device_ids is not None:
        raise UsageError("--device-ids cannot be used with --mesh auto (each candidate mesh uses 0..N-1)")
    if devices is not None and not auto:
        raise UsageError("--devices is for --mesh auto (the device count to search meshes of)")
    if auto and export_problem:
        raise UsageError("--export-problem cannot be used with --mesh auto")
    search = None
    # an explicit `--memory-budget none` turns the budget off, --device's HBM default included
    hbm_default = not (memory_budget is None and click.get_current_context().get_parameter_source(
        "memory_budget") not in (None, click.core.ParameterSource.DEFAULT))
    if auto and device is not None and memory_budget is None and hbm_default:   # as timed_mesh_from_options does
        memory_budget = get_profile(device).hbm_bytes
    dmesh, scale, memory_budget = (None, None, memory_budget) if auto else timed_mesh_from_options(
        module, mesh, device_ids, alpha, beta, device, memory_budget, max_padding, hbm_default)
    if partition_specs_file and dmesh is not None:   # specs for jax.jit: its arguments and results split evenly
        dmesh.divisible_io = True
    if use_xla:
        xla_ready(module, "<stdin>" if module_file == "-" else module_file)
    show = not quiet and sys.stderr.isatty()
    parsing.stop()
    note_input(module_file, module)
    t0 = time.monotonic()
    phases = {"start": entered, "parse": t0}   # phase -> its end (monotonic); seconds in _phase_seconds
    # the solve ends before the limit by the parse's seconds: printing the module, the reports and the
    # interpreter's exit take about as long as reading it (measured, solve --time-limit 60 at load 6:
    # Llama 3.1 8B parse 6.3 s, write and exit 6.3 s; the 48-layer transformer 1.9 s and 1.8 s); a StableHLO
    # input's conversion (a jaxlib child, seconds under load) is spent, not reserved a second time
    converted = getattr(getattr(module, "source_info", None), "convert_seconds", 0.0)
    deadline = None if deterministic else started + time_limit - max(0.0, t0 - entered - converted)
    at_solve = None
    if partition_specs_file and dmesh is not None:
        # --partition-specs runs XLA's propagation after the solve, in a jax child: started when the search starts
        # (_ChildAtSolve), so its start and jax's import run beside the search, and the propagation's seconds kept
        # out of the solve's (new user 30 F7: the write phase took 48.7 s of a 102.4 s run with --time-limit 60,
        # and nothing counted it)
        at_solve = _ChildAtSolve(lambda: start_jax_child("hloshard.partition_specs", dmesh.num_devices))
        click.get_current_context().call_on_close(at_solve.end)
        if deadline is not None:
            deadline -= partition_specs_reserve(entered - started)
    # an explicit --time-limit also stops a refined build that would pass it (the coarse plan is written)
    limit_given = click.get_current_context().get_parameter_source("time_limit") != \
        click.core.ParameterSource.DEFAULT

    said: set = set()   # warnings already printed at once (the JSON format does not repeat them on stderr)

    def overrun(msg: str) -> None:   # said at once, not only in the summary at the end
        if not quiet:
            click.echo(f"warning: {msg}", err=True)
            said.add(msg)

    per_device_note = per_device_warning(module, module_file)
    if per_device_note:
        overrun(per_device_note)
    # a budget named after another device than the one priced (fresh-clone check 33: accepted silently)
    budget_note = budget_device_note(memory_budget, device, get_profile(device).name if device is not None else None)
    if budget_note:
        overrun(budget_note)
    with step("pricing the input as given", show):
        if auto:
            input_cost, input_note, priced = None, "with --mesh auto the input as given is not priced", None
        else:
            input_cost, input_note, priced = price_input(module, dmesh,
                                                         time_limit=min(30.0, max(1.0, 0.25 * time_limit)))
    phases["price input"] = time.monotonic()
    before = {i.name: i.sharding for i in counted_instructions(module)}
    try:
        with SolverProgress(show, time_limit) as progress:
            if auto:
                search_limit = time_limit if deadline is None else max(0.5, deadline - time.monotonic())
                search = search_meshes(module, "<stdin>" if module_file == "-" else module_file,
                                       devices, alpha, beta, keep=keep, memory_budget=memory_budget,
                                       max_padding=max_padding, time_limit=search_limit, workers=workers, seed=seed,
                                       deterministic=deterministic, progress=progress if show else None,
                                       pin_operands=pin_operands, device=device, local_moves=local_moves)
                module, result, dmesh = search.best.module, search.best.result, search.best.mesh
                scale = search.best.scale   # --device: the picked candidate's time scale
            else:
                result = solve_module(module, dmesh, keep=keep, memory_budget=memory_budget,
                                      time_limit=time_limit, workers=workers, seed=seed,
                                      deterministic=deterministic,
                                      progress=_progress(at_solve, progress if show else None),
                                      export_problem=export_problem, pin_operands=pin_operands,
                                      deadline=deadline, on_overrun=overrun, stop_build=limit_given,
                                      local_moves=local_moves,
                                      # the input's own layout, a start the answer never costs more than (F6)
                                      known=None if priced is None else given_plan(priced),
                                      # the default limit, which ends late already: a starved search as long as
                                      # the build, not 0.5 s (new user 32 F4: the replicated plan written)
                                      starved_floor=0.0 if limit_given else STARVED_SOLVE_SHARE)
    except BuildStopped as exc:
        # no cost graph of any mesh in the time (new user 37's F16): a plan known without a search is written -- the
        # input's own layout where it was priced, else every instruction replicated -- with a warning saying that
        # nothing was searched (autoshard.solve.known_without_graph); the refusal (exit 3) where none keeps the budget
        _said_before_build(exc, deterministic, time_limit, started, entered, t0, phases)
        result = None if auto or export_problem else known_without_graph(module, dmesh, exc, priced, memory_budget)
        if result is None:
            _refuse(exc, report_file, dmesh, keep, memory_budget, deterministic, time_limit, started, entered, t0,
                    phases)
        overrun(result.graph.warnings[-1])
    except SolveFailed as exc:
        _refuse(exc, report_file, dmesh, keep, memory_budget, deterministic, time_limit, started, entered, t0, phases)
    phases["solve"] = time.monotonic()
    report = build_report(result, dmesh, keep, memory_budget)
    if per_device_note:
        report["warnings"].insert(0, per_device_note)
    if budget_note:
        report["warnings"].insert(0, budget_note)
    state_note = untied_state_note(module)
    if state_note:
        report["warnings"].append(state_note)
    report["pins"] = getattr(result.graph, "pins", 0)   # operand pin copies written (--pin-operands)
    if search is not None:
        report["mesh_search"] = search.to_json()
    report["peak_tensors"] = peak_tensors_of(result)  # which tensors dominate peak memory (hloshard.peak)
    # ring bytes per device of the written plan's collectives, the figure to hold beside XLA's count (as in
    # auto_shard's report; new user 20 looked for it in solve's)
    report["predicted_collective_bytes_per_device"] = predicted_collective_bytes(result)
    report["input"] = "<stdin>" if module_file == "-" else module_file
    report["output"] = "<stdout>" if output in (None, "-") else output
    report["changed"] = changed_shardings(before, result.graph)
    report["input_cost"] = None if input_cost is None else round(input_cost, 6)
    report["input_cost_note"] = input_note
    report["status_text"] = status_in_words(report)
    if scale is not None:  # --device: the step time in seconds (hloshard.commands.timing); before the replicated-step
        # note, which reads its matmul share (fresh-clone check 36: "computes all of it" beside "5.38x its 1/8 share")
        report.update(plan_timing(result.written or result, module, scale))
    # a plan that computes the whole step on every device is said so, as auto_shard says it (new user 25's 2x2x2 solve)
    replicated = written_replicated_note(report, module, result.graph.mesh.num_devices,
                                         lambda: _replicated_cost(result.graph),
                                         getattr(result.graph, "ties", None) or (), device, scale)
    if replicated:
        report["warnings"].append(replicated)
    else:   # every parameter replicated although data moves: said with its memory cost (new user 33 F7)
        params_note = replicated_parameters_note(report, module, result.graph.mesh.num_devices, device)
        if params_note:
            report["warnings"].append(params_note)
    if getattr(dmesh, "axis_names", None):
        report["mesh"]["axis_names"] = list(dmesh.axis_names)
    comparison = None
    # --xla: the module tagged now, the GSPMD shardings as solve wrote them, before the Shardy attributes are added;
    # XLA runs after the files are written, within xla_bound (round 38, new user 37's F6 / F11: the plan was lost
    # with an XLA run that outlived the user's patience, and its seconds were booked as the write's)
    xla_tagged = tag_module_text(module) if use_xla else None
    module.state_partitions(dmesh.num_devices)   # the header says the devices the plan is for (new user 32 F5)
    annotate_module(module)  # Shardy-mode input: xla.sdy.sharding beside every sharding= (hloshard.sdy)
    out_text = print_module(module)
    html = None
    if html_file:
        html = solve_report_html(report, result)
    phases["write"] = time.monotonic()   # printing the module and the reports; the file writes follow
    if partition_specs_file:   # XLA's propagation in the child started at the parse's end (new user 30 F7)
        specs = write_partition_specs(partition_specs_file, module, dmesh,
                                      child=at_solve.child if at_solve else None)
        for note in (unnamed_paths_note(specs), loops_note(specs)):
            if note:
                report["warnings"].append(note)
        phases["partition specs"] = time.monotonic()
    report["seconds_phases"] = _phase_seconds(started, phases, result, search is not None)
    report["time_limit"] = time_limit
    report["deterministic"] = deterministic   # the limit a work budget: the summary's time line says so
    previous = ignore_interrupts_from_here()   # the writes begin: a Ctrl-C from here on leaves no exit 130
    if previous is not None:   # put back when the command ends (an in-process caller's handler)
        click.get_current_context().call_on_close(lambda: signal.signal(signal.SIGINT, previous))
    if use_xla and fmt == "json":
        # the report goes to stdout once, with XLA's figures: the module is written first (-o is a file with json)
        closed = _write_product(output or "-", out_text)
        comparison = _run_xla(module, dmesh, result, xla_tagged, time_limit, report, phases, started, search,
                              quiet, said)
    if fmt == "json" and _echo_json(json.dumps(_public(report, deterministic), indent=2, sort_keys=True)):
        # the product (the report on stdout) could not be given: no file is written, as on any other failure
        hold_until_exit(module, result, search)
        click.echo("hloshard: error: " + STDOUT_CLOSED.format(
            what="the report JSON", keep="nothing was written; give --report FILE instead of --format json to keep "
                                          "it"), err=True)
        click.get_current_context().exit(1)
    if report_file:
        write_text_atomic(report_file, json.dumps(_public(report, deterministic), indent=2, sort_keys=True) + "\n")
    if html is not None:
        write_text_atomic(html_file, html)
    if not (use_xla and fmt == "json"):
        closed = _write_product(output or "-", out_text)
    hold_until_exit(module, result, search)   # freed by the process's end, not one by one (commands.common)
    if fmt == "json":   # (the report was printed on stdout above, before any file was written)
        if not quiet:   # warnings go to stderr in every format (the JSON has them too)
            print_warnings(report["warnings"], said, lambda w: user_warning(w, report, summary=False))
    elif not quiet:
        if search is not None:
            print_mesh_search(search)
        # a note on the input or the options, printed at once before the solve, is not repeated under the summary
        # (fresh-clone check 36, nit 8b: the --memory-budget tpu-v5e warning twice); a warning the run itself gave
        # at once (an overrun) is, as the summary's account of the run
        print_summary(report, said={n for n in (per_device_note, budget_note) if n})
    if use_xla and fmt != "json":
        # after the module, the report and the summary: XLA's run is bounded and booked apart (xla_bound)
        comparison = _run_xla(module, dmesh, result, xla_tagged, time_limit, report, phases, started, search,
                              quiet, said)
        if report_file:   # written again with XLA's figures and the xla phase
            write_text_atomic(report_file, json.dumps(_public(report, deterministic), indent=2, sort_keys=True)
                              + "\n")
    if comparison is not None and fmt != "json" and not quiet:
        from rich.console import Console

        render_comparison(Console(stderr=True, width=None if sys.stderr.isatty() else 120), comparison, 15,
                          getattr(dmesh, "memory_device", None))
    if use_xla and not quiet and fmt != "json":
        click.echo(f"time: xla {report['seconds_phases'].get('xla', 0.0):.1f} s, after the --time-limit "
                   f"(at most {xla_bound(time_limit):.0f} s: {XLA_BOUND_WORDS})", err=True)
    if closed:   # the summary above was still printed (fresh-clone check 30: `| true` lost it)
        click.echo("hloshard: error: " + STDOUT_CLOSED.format(what="the module", keep="give -o FILE to keep it"),
                   err=True)
        click.get_current_context().exit(1)

