"""Solving a cost graph (:func:`solve_graph`) and a module (:func:`solve_module`: build, solve,
apply, re-evaluate the written module).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import SolveFailed
from .apply import apply_choice
from .build import Graph, build_graph
from .coarse import COARSE_SHARE, coarse_start
from .evaluate import CostResult, Evaluation, evaluate_choice, evaluate_module
from .report import _failed, _name_nodes, minimum_memory_check
from .tiebreak import real_part


@dataclass
class SolveResult:
    """What :func:`solve_module` returns: the graph, the solver's Solution (integer units), the choice
    (one strategy per node), its float evaluation (cost units) and the build / solve wall seconds."""

    graph: Graph
    solution: object
    choice: list
    evaluation: Evaluation
    seconds_build: float
    seconds_solve: float
    #: ``evaluate_module`` of the module as written (what ``hloshard cost`` reports for the output), or
    #: None when it was not used (it exceeded the memory budget).
    written: "CostResult | None" = None

    @property
    def objective(self) -> float:
        """Total cost (cost units) of the written shardings: ``hloshard cost`` of the output."""
        return (self.written.evaluation if self.written is not None else self.evaluation).total

    @property
    def warnings(self) -> list:
        """Messages for the report (``graph.warnings``): loops whose trip count is a guess (named, with
        the reason), dropped alias constraints, a written plan that costs more than the solver's."""
        return self.graph.warnings

    @property
    def solver_objective(self) -> float:
        """Total cost of the solver's own choice (before the written shardings are re-evaluated)."""
        return self.evaluation.total

    @property
    def bound(self) -> float | None:
        b = self.solution.bound
        return None if b is None else float(b) * self.graph.cost_scale

    @property
    def gap(self) -> float | None:
        if self.solution.objective is None or self.solution.bound is None:
            return None
        o, b = float(self.solution.objective), float(self.solution.bound)
        if o <= 0:
            return 0.0
        return max(0.0, (o - b) / o)



def solve_graph(graph: Graph, time_limit: float = 60.0, workers: int = 2, seed: int = 0, deterministic: bool = False,
                progress=None, hint=None):
    """Solve ``graph.solver_problem`` (memory tie-break, followers merged unless a memory budget is set)
    and expand the choice to every node of ``graph.problem``; the Solution's objective and bound are
    returned in integer cost units of ``graph.problem`` (tie-break removed).  ``hint``: a choice of
    ``graph.problem`` (one strategy per node, e.g. the coarse plan of :mod:`.coarse`) to start from;
    the answer is never costlier than it (when it is feasible).  Raises SolveFailed (exit 3) when the memory budget is
    infeasible (naming the liveness point and tensors) or when no solution is found in time."""
    from ..costgraph import evaluate
    from ..solver import solve_problem

    if graph.problem.usage_limit is not None:
        minimum_memory_check(graph, graph.problem.usage_limit)
    k = getattr(graph, "tie_break", 1)
    report = progress
    if progress is not None and k != 1:
        def report(event: dict):   # the live display shows integer cost units, without the tie-break
            progress({**event, **{key: real_part(event.get(key), k) for key in ("objective", "bound")
                                  if event.get(key) is not None}})
    shint = None
    if hint is not None:   # the hint on the solver's (follower-merged) nodes
        shint = [-1] * graph.solver_problem.num_nodes
        for v, c in enumerate(graph.classes):
            if shint[c] < 0:
                shint[c] = int(hint[v])
    sol = solve_problem(graph.solver_problem, time_limit=time_limit, workers=workers, seed=seed,
                        deterministic=deterministic, hint=shint, progress=report)
    if shint is not None:   # the incumbent: the search may end above its hint
        h_obj, h_ok = evaluate(graph.solver_problem, shint)
        if h_ok and (not sol.strategies or sol.objective is None or h_obj < sol.objective):
            sol.strategies, sol.objective = shint, h_obj
            sol.status = "optimal" if sol.bound is not None and sol.bound >= h_obj else "feasible"
            sol.stats["hint_kept"] = True
    if k != 1:
        sol.objective = real_part(getattr(sol, "objective", None), k)
        sol.bound = real_part(getattr(sol, "bound", None), k)
    if sol.strategies:
        sol.strategies = [int(sol.strategies[c]) for c in graph.classes]
    if sol.status == "infeasible":
        msg = sol.explanation or "no feasible sharding"
        msg = _name_nodes(graph, msg, sol)
        raise _failed(f"no feasible solution: {msg}", "infeasible")
    if sol.status == "timeout" or not sol.strategies:
        raise _failed(f"no feasible solution found within the time limit ({time_limit:g} s)", "timeout")
    return sol



def solve_module(module, mesh, keep: str = "io", memory_budget: int | None = None, time_limit: float = 60.0,
                 workers: int = 2, seed: int = 0, deterministic: bool = False, progress=None,
                 export_problem: str | None = None, pin_operands: bool = False,
                 reevaluate: bool = True, apply: bool = True) -> SolveResult:
    """Choose shardings for ``module`` and apply them (the IR is modified in place).

    ``pin_operands``: also insert a ``copy`` in the planned layout before each dot / convolution /
    gather / scatter operand the chosen strategy reshards (:mod:`hloshard.strategy.realize`), so XLA's
    partitioner carries out the plan instead of choosing its own variant from the operands' layouts.
    The copies keep their operand's memory layout, so they cost no compute (XLA's algebraic simplifier
    removes them after partitioning; ``strategy.elementwise``) and the written module's cost equals the
    solver's objective.
    ``reevaluate``: price the written module as ``hloshard cost`` does (:func:`reevaluate_written`);
    ``--mesh auto`` turns it off for its candidates and re-evaluates the one it picks.
    ``apply``: write the choice (and the pins) into ``module``; with False the module is left as it
    is (building only adds one computation per call site, :func:`hloshard.hlo.callgraph.flatten_call_graph`)
    and :func:`apply_solution` writes it later: ``--mesh auto`` solves every candidate mesh on one
    parse and writes only the one it picks.
    Raises SolveFailed (exit 3) when no feasible solution exists or none was found in time."""
    import time

    t0 = time.monotonic()
    graph = build_graph(module, mesh, keep, memory_budget)
    if export_problem:
        from ..costgraph import save_problem

        save_problem(graph.problem, export_problem)
    t1 = time.monotonic()
    # coarse to fine: the plan of the 1-D mesh of the same devices as the hint and incumbent (.coarse)
    start = coarse_start(module, graph, solve_graph, keep, memory_budget, time_limit, workers, seed, deterministic)
    graph.coarse = start
    if start is not None:   # its solve's share of the limit (deterministic mode: the share it was given)
        time_limit -= COARSE_SHARE * time_limit if deterministic else min(start.seconds, COARSE_SHARE * time_limit)
    sol = solve_graph(graph, time_limit=time_limit, workers=workers, seed=seed, deterministic=deterministic,
                      progress=progress, hint=None if start is None else start.choice)
    choice = list(sol.strategies)
    ev = evaluate_choice(graph, choice)
    result = SolveResult(graph, sol, choice, ev, t1 - t0, 0.0)
    if apply:
        apply_solution(result, module, mesh, pin_operands, memory_budget, reevaluate)
    result.seconds_solve = time.monotonic() - t1
    return result


def apply_solution(result: SolveResult, module, mesh, pin_operands: bool = False, memory_budget: int | None = None,
                   reevaluate: bool = True) -> SolveResult:
    """Write ``result``'s choice into ``module`` (the module its graph was built from) as ``sharding=``,
    insert the operand and loop-state pins when ``pin_operands`` (see :func:`solve_module`), and with
    ``reevaluate`` price the written module (:func:`reevaluate_written`).  Returns ``result``."""
    graph, choice = result.graph, result.choice
    apply_choice(graph, choice)
    # A dot / convolution / gather / scatter is partitioned by XLA from its operands' layouts, not from
    # the plan: pin each operand the chosen strategy reshards with a copy in the planned layout, so XLA
    # does the planned resharding (hloshard.strategy.realize; measured there and in
    # tests/test_realize_oracle.py)
    from ..strategy.realize import insert_loop_state_pins, insert_pins, operand_pins

    graph.pins = insert_pins(operand_pins(graph.nodes, choice, graph.ctx)) if pin_operands else 0
    # the same for a while body's reads of its loop state, whose written sharding does not reach XLA
    # through StableHLO (hloshard.strategy.realize.insert_loop_state_pins; measured there)
    if pin_operands:
        graph.loop_pins = insert_loop_state_pins([i for i in graph.schedule if i.opcode == "while"])
    if reevaluate:
        reevaluate_written(result, module, mesh, memory_budget)
    return result


def reevaluate_written(result: SolveResult, module, mesh, memory_budget: int | None = None) -> SolveResult:
    """Set ``result.written`` to ``evaluate_module`` of the written ``module`` (what ``hloshard cost``
    says of the output; None when it exceeds ``memory_budget`` or finds nothing in its time limit) and
    add a warning when it differs from the solver's own figure.  Returns ``result``."""
    graph, ev = result.graph, result.evaluation
    # A sharding does not name everything the strategy decided (e.g. whether a dot's replicated output
    # is all-reduced or its operand all-gathered); ``hloshard cost`` of the output takes the cheapest
    # choice consistent with the written shardings, which can beat a time-limited solve.  Evaluate the
    # written module the same way so the reported objective is exactly what ``cost`` says of the output.
    try:
        written = evaluate_module(module, mesh)
    except SolveFailed:  # the re-evaluation found nothing in its own time limit: report the solver's choice
        written = None
        graph.warnings.append("the written shardings could not be re-evaluated in time; the objective is the "
                              "solver's own and hloshard cost of the output may be lower")
    if written is not None and memory_budget is not None and written.evaluation.peak_memory > memory_budget:
        written = None
    elif written is not None and abs(written.total_cost - ev.total) > 1e-9 * max(1.0, abs(ev.total)):
        graph.warnings.append(f"the solver's choice costs {ev.total:,.2f}; the written shardings cost "
                              f"{written.total_cost:,.2f} with the cheapest strategies consistent with them "
                              f"(as hloshard cost evaluates the output)")
    result.written = written
    return result


