"""``hloshard solve-problem``: solve an IOPDDL auto-sharding problem file.

The time limit covers the whole command (loading, solving, writing): the solver gets what is left
after loading.  Exit codes: 0 with a solution, 3 when there is none (infeasible, or no solution
before the time limit), 2 for a bad file or bad options.
"""

from __future__ import annotations

import json
import math
import sys
import time

import click

from ..errors import SolveFailed, UsageError
from .progress import SolverProgress
from ..costgraph import load_problem
from ..io import write_text_atomic
from ..solver import solve_problem
from .common import check_outputs, note_input
from .options import Integer


def _format_int(v):
    return "-" if v is None else f"{v:,}"


@click.command("solve-problem", epilog="""\b
Examples:
  hloshard solve-problem problem.json.gz --time-limit 60 -o solution.json
  hloshard solve model.pre.hlo --mesh 2x4 -o out.hlo --export-problem p.json && hloshard solve-problem p.json
""")
@click.argument("problem_file", metavar="PROBLEM.json[.gz]", type=str)
@click.option("--time-limit", type=float, default=60.0, show_default=True, metavar="SECONDS",
              help="Seconds for the whole command, loading included. Without --deterministic this is "
                   "wall-clock time and the result can depend on the machine's load (a busy machine "
                   "searches less in the same time).")
@click.option("--workers", type=Integer(1, 256), default=2, show_default=True, help="CP-SAT worker threads (1 to 256); with 2 or more, large memory-bound problems also run a second search (seed + 1) in a forked process beside the first, and the two are merged.")
@click.option("--seed", type=Integer(0, 2**31 - 1), default=0, show_default=True,
              help="Random seed (CP-SAT and LNS).")
@click.option("--deterministic", is_flag=True,
              help="Byte-identical output for the same input, seed, workers and --time-limit, whatever "
                   "the machine load: the limit becomes a work budget (counted rounds and sweeps, CP-SAT "
                   "deterministic time), so a loaded machine takes longer instead of answering "
                   "differently (no wall-clock limit then). The output then has no 'seconds'.")
@click.option("-o", "--output", type=str, default=None, metavar="FILE",
              help="Write the solution JSON here (default: stdout).")
@click.option("--quiet", is_flag=True, help="No progress display and no summary on stderr.")
def command(problem_file, time_limit, workers, seed, deterministic, output, quiet):
    """Solve an IOPDDL problem file (JSON or gzip JSON).

    The solution JSON holds strategies (one index per node), objective, bound (a proven lower bound
    on the optimum), status (optimal / feasible / infeasible / timeout) and seconds (not with
    --deterministic). The summary on stderr gives the gap between objective and bound.
    """
    t0 = time.monotonic()
    if not math.isfinite(time_limit) or time_limit <= 0:
        raise UsageError(f"--time-limit must be a positive finite number of seconds, got {time_limit}")
    if workers < 1:
        raise UsageError("--workers must be at least 1")

    check_outputs(output=output)
    note_input(problem_file)

    problem = load_problem(problem_file)
    show = not quiet and sys.stderr.isatty()
    with SolverProgress(show, time_limit, t0=t0, phase="loading") as progress:
        progress.phase = "solving"
        # deterministic: the budget must not depend on how long loading took
        remaining = (time_limit if deterministic else time_limit - (time.monotonic() - t0)) - 0.8 - 0.03 * time_limit
        solution = solve_problem(problem, time_limit=max(0.5, remaining), workers=workers, seed=seed,
                                 deterministic=deterministic, progress=progress)
    data = solution.to_json()
    seconds = round(time.monotonic() - t0, 3)
    if deterministic:
        data.pop("seconds", None)   # the only field that depends on the machine
    else:
        data["seconds"] = seconds
    if solution.status in ("infeasible", "timeout"):
        reason = solution.explanation or ("no solution found within the time limit"
                                          if solution.status == "timeout" else "infeasible")
        raise SolveFailed(f"{problem_file}: no feasible solution ({solution.status}): {reason}")
    text = json.dumps(data, separators=(",", ":")) + "\n"
    write_text_atomic(output or "-", text)
    if not quiet:
        gap = ""
        if solution.bound is not None and solution.objective:
            gap = f", gap {max(0.0, (solution.objective - solution.bound) / solution.objective):.2%}"
        click.echo(f"{problem.name or problem_file}: {solution.status}, objective {solution.objective:,}, "
                   f"bound {_format_int(solution.bound)}{gap}, {seconds:.1f} s", err=True)
