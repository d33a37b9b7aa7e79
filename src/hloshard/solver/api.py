"""``solve_problem``: presolve, heuristics, Lagrangian memory prices, bounds, CP-SAT and LNS.

Pipeline (all phases share the budget ``time_limit``):

1. :func:`~hloshard.solver.presolve.presolve` (exact reductions; proves some infeasibilities);
2. :class:`~hloshard.solver.heuristic.LocalSearch`: greedy first solution + local search (or the
   caller's ``hint`` when it is feasible and better);
3. :func:`~hloshard.solver.heuristic.lagrangian_search`: one price per liveness point, message
   passing (min-sum or TRW-S, chosen in the first round) on the priced problem, repair and local
   search (without a memory limit that can bind: one round, which on the 12-layer transformer lands within 0.001% of the dual bound where greedy +
   local search stays 3% above); when the LP and the full CP-SAT model follow (the model is small
   enough), in wall-clock mode the rounds stop after :data:`LAGRANGE_STALL` of the limit without a
   new incumbent, and CP-SAT and LNS get the time (contest instance V: the rounds' best, 1,670,909,
   came 13 s in; CP-SAT then LNS reached the proven optimum 1,617,084 in one 300 s run);
   **the portfolio** (:func:`_use_portfolio`: two or more workers, a large problem whose memory
   limit can bind): steps 2-3 run twice side by side, with seeds ``seed`` and ``seed + 1``, the
   second in a forked child on the other core (:mod:`~hloshard.solver.fork`; in deterministic mode
   without ``fork`` it runs after the first, with the same result), and the two results are
   *merged* (:mod:`~hloshard.solver.merge`: CP-SAT on the nodes where they differ, each node only
   choosing between their two strategies; contest instance N: two searches at 1.0234x and 1.0238x of
   the best contest entry merged to 1.009x), then improved by local search;
   then the *shared-choice* proposal over repeated structure (:mod:`~hloshard.solver.symmetry`:
   look-alike nodes, e.g. the same instruction of every transformer layer, take their class's most
   common strategy; kept only when better after local search);
4. a proven lower bound: :func:`~hloshard.solver.bounds.lower_bound` (dual ascent on the
   reparametrised problem with the prices of step 3 -- Lagrangian relaxation of memory); the dual's
   rounded solution, repaired and improved by local search, is one more candidate;
   when the model is small enough (the full CP-SAT model's size test) the sweeps get
   :data:`EXACT_BOUND_SHARE` of the limit and the dual's rounding is tried every
   :data:`DECODE_EVERY` passes, so they stop once the incumbent is proven (the Gemma train step's
   problem: within 0.001% of the optimum after ~80 passes);
   **4a.** on a model too large for the LP and the full CP-SAT model (more than
   :data:`FULL_MODEL_LIMIT` entries) without memory constraints: *reduced-cost pruning*
   (:func:`~hloshard.solver.bounds.reduced_cost_pruning`): every strategy and strategy pair that the
   dual's reparametrisation proves to be in no solution cheaper than a *target* is forbidden, the
   rest presolved again (dead-end elimination included), and, when it fits, its LP relaxation
   tightened by cycle inequalities (:func:`~hloshard.solver.lp.separate_cycles`), else the dual
   sweeps, bound what is left; the bound is ``min(target, that bound)``, and the targets go by
   bisection between the proven bound and the incumbent (:func:`_pruned_bound`); before it the dual is swept on,
   warm (:func:`_converge_dual`), and when the incumbent's pruning leaves too much for the LP the incumbent is
   the one target, its pruned problem swept warm and pruned again as the dual improves
   (:func:`_swept_at_target`; keras-hub Gemma's refined 2x2x2 problem, deterministic 15 s: gap 7.1% -> 0.91%).  decoder2 at 2x2x2:
   148.6 strategies per node and 6.29 M edge entries before, 46.2 and 285,591 after pruning at the
   incumbent, where the plain LP is 1.41% under the plan; three rounds of cycle inequalities make the
   LP integral: the optimum, 0.66% below the plan the search had found, proven;
   then, when the model is small enough, the LP relaxation
   (with two or more workers, no portfolio and at least :data:`LP_CHILD_MIN` LP variables it runs
   from the start in a forked child on the second core, which the single-threaded heuristic phases
   leave idle, and dies with the solver; in deterministic mode it is bounded by GLOP's deterministic
   time, :data:`DET_LP` per second of limit, and waited for here unless the search is already proven;
   in wall-clock mode it is collected here when it has ended within ``LP_WAIT`` of the limit (B and
   G: it has); otherwise it goes on beside CP-SAT and LNS until the deadline, and its bound counts if
   it ends by then: contest instance V's LP took 229-277 s on the loaded 2-core machine)
   solved exactly (:func:`~hloshard.solver.lp.lp_solve`: GLOP's dual simplex, the bound certified
   from its dual in rational arithmetic): the dual ascent can stop below the LP optimum (3.0% on
   the 3-layer transformer sample, where the LP is tight and proves the incumbent optimal; on
   contest instance G the LP optimum with the memory rows is integral, i.e. an optimal solution);
5. CP-SAT on the whole reduced model when it is small enough, hinted with the best solution so far
   (its bound is used when higher); in wall-clock mode only with three times ``model_size /``
   :data:`MODEL_BUILD_RATE` seconds left at the load the solve has seen (:func:`full_model_worth`: building the
   model and CP-SAT's presolve overrun short limits);
6. large-neighbourhood search: CP-SAT on subgraphs while the budget lasts; the neighbourhood kinds
   (:data:`KINDS`: breadth-first balls, the nodes live at a tight liveness point, memory exchanges
   around a node held back by memory) are drawn in proportion to their success so far.

Steps 5 and 6 are skipped once the objective is proven within ``GAP_LIMIT`` (0.01%) of the bound.

**Budgets.**  By default every phase is limited by wall-clock shares of ``time_limit`` (the result can
then depend on the machine's load).  With ``deterministic=True`` no decision reads the clock: each
phase gets a *work* budget computed from ``time_limit`` and the reduced problem's size
(``work`` = edge-matrix entries + strategies + memory-profile segments, processed at ``WORK_RATE``
units per second, a rate measured on the project machine): Lagrangian rounds, bound sweeps and
local-search sweeps are counted, CP-SAT gets deterministic-time limits (``DET_FULL``, ``DET_LNS``
per second of limit), and every Lagrangian or LNS round is also charged :data:`ROUND_OVERHEAD` work
units, its Python cost whatever the problem's size.  No wall-clock deadline is kept at all: a safety
net that stopped a phase, killed the forked second search or skipped the merge once the clock passed
it would make the answer depend on the load (it did: a 10-node problem's 1,000 Lagrangian rounds took
20 s on a loaded machine, past the former 3x-the-limit + 10 s net, and the answer changed).  The run
can then take longer than ``time_limit`` on a loaded machine, and gives the same answer.  On a problem without
memory constraints too large for the LP and the full model (step 4a's regime) ``time_limit`` is CPU seconds:
the phases get :func:`det_units` of it, the limit less the modelled fixed part (:func:`det_fixed_seconds`) over
the measured CPU seconds per unit (:data:`DET_SEARCH_CPU_PER_UNIT`; round 26: keras-hub Gemma's refined problem
took 28.3 CPU-s for 12 units before, 14.9 after), ``stats["det_units"]``; elsewhere the units are the limit.  A phase
whose fixed part (building its model, CP-SAT's or GLOP's start, modelled from the reduced problem's size)
alone exceeds its work budget is not started (:func:`_det_fits`: it would end without a result);
``stats["budget_skipped"]`` names those phases.

In wall-clock mode a phase whose first pass alone can take seconds and which only searches on from the
incumbent or tightens the bound (the dual sweeps and their rounding, the LP beside the search, CP-SAT,
LNS) is not started once the deadline has passed with an incumbent (:func:`past`); the bound is then the dual's
after the passes its share of the limit pays for in modelled CPU seconds (:func:`late_passes`), or the cheapest one
(:func:`_trivial_bound`) when one pass is modelled past that share.  What makes the first plan always runs: the presolve, the greedy,
the first Lagrangian round and the repeated-structure proposal (the 48-layer transformer at 2x2x2,
``--time-limit 60``, load 9-10: 399.5 M written without the proposal, 284.4 M with it), and the trivial
plans of :func:`hloshard.autoshard.search.solve_graph`.

The reported objective is always re-evaluated on the original problem (:func:`costgraph.evaluate`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..costgraph import Problem, evaluate
from . import cpsat, fork
from .bounds import lower_bound, reduced_cost_pruning
from .heuristic import LARGE_NODES, LocalSearch, bfs_order, give_ratio, lagrangian_search, repair_memory
from .lp import IterationBudget, lp_size, lp_solve
from .merge import merge_solutions
from .presolve import Infeasible, presolve, tightest_point
from .symmetry import repeated_classes, repetition_stats, shared_choice

FULL_MODEL_LIMIT = 1_500_000  # edge entries + memory terms; larger models only get LNS
DET_FULL = 0.2   # deterministic mode: full-model CP-SAT budget, deterministic seconds per second of limit
DET_LNS = 0.2    # deterministic mode: LNS budget, likewise
LNS_SHARE = 0.5  # fraction of the time after the full CP-SAT model's start given to LNS
WORK_RATE = 1.0e6  # work units (see module docstring) one heuristic pass handles per second, measured
# deterministic mode: work units charged per Lagrangian or LNS round on top of its size (the Python cost
# of a round however small the problem).  Measured (CPU time per Lagrangian round, 40 rounds): 2.4 ms
# on a 9-node problem and 4.9 ms on a 35-node one where work / WORK_RATE predicts 0.13 and 0.38 ms;
# checked on a 299-node one (transformer train step, 24 MiB budget): 70 ms measured, 305 ms charged
ROUND_OVERHEAD = 5_000
LAGRANGE_SHARE = 0.3  # deterministic mode: share of the limit for Lagrangian rounds
BOUND_SHARE = 0.2     # share of the limit for the dual-bound sweeps (they stop earlier once converged)
#: deterministic mode: the modelled CPU seconds of one dual sweep (pass) are ``SWEEP_NODE_S * nodes +
#: work / SWEEP_RATE`` (``work`` as in the module docstring).  Measured (CPU time of 20 passes,
#: 2-core machine under load 7): 0.0109 s on the Gemma train step's problem (264 reduced nodes,
#: 577,767 units), 0.0063 s on contest V (208, 411,891), 0.0033 s on B (160, 48,077); both
#: constants are taken on the slow side of that fit (~15 us per node, 50-130 M units/s)
SWEEP_NODE_S = 2.0e-5
SWEEP_RATE = 4.0e7
MAX_SWEEPS = 1000     # most dual sweeps (passes) in one bound phase when the full model follows
#: share of the limit for the dual sweeps when the full model follows (instead of BOUND_SHARE): the
#: bound is what can end the search there, and the sweeps stop as soon as they stall or prove the
#: incumbent; the LP and CP-SAT that follow cost far more per unit of bound on models of this size
#: (Gemma train step, 570,526 entries: the sweeps converge in ~80 passes, 1-2 s of CPU, to within
#: 0.001% of the optimum; GLOP needs ~20 s of CPU for the same bound)
EXACT_BOUND_SHARE = 0.4
#: when the full model follows: the dual's rounded solution is tried (repaired, improved) every this
#: many passes, not only after the last one; the rounding of a given pass can be far worse than the
#: one before (Gemma: 0.001% above the bound at pass 81, 1.8% at 65, 0.02% at 57) and a sweep never
#: lowers the bound, so the best rounding so far is kept and the sweeps stop once it is proven
DECODE_EVERY = 16
DET_PAIR_SWEEPS = 2   # deterministic mode: joint-move sweeps per local search
LP_SHARE = 0.3       # share of the limit for the LP relaxation (GLOP)
LP_WAIT = 0.05       # the LP run beside the search (forked child): most waited for before CP-SAT
LP_READ_S = 10.0     # seconds allowed to read the result of an LP child that has ended (a pickle)
#: deterministic mode: GLOP's deterministic time (its own count of work, independent of the load)
#: per second of limit.  GLOP runs in a child beside the search from the start, as in wall-clock
#: mode, so it gets about the whole limit there too (it was 0.15, after the search: the Gemma train
#: step's LP never ended and deterministic solves reported the dual ascent's weaker bound)
DET_LP = 1.0
#: smallest LP (:func:`~hloshard.solver.lp.lp_size`: variables) run in a forked child; smaller ones
#: are solved in-process when their turn comes.  Measured (2-core machine under load 8): a fork and
#: collect of a trivial child took 0.06 s (0.11 s with contest B loaded); GLOP took 17-31 us of CPU
#: per LP variable (33-node dense test problem, 255 variables: 8 ms; contest B, 47,927: 0.83 s),
#: so below ~3,500 variables the child costs more than the LP
LP_CHILD_MIN = 5_000
#: deterministic mode: the least CPU seconds GLOP needs per LP variable to reach an optimum (the fast end
#: of LP_CHILD_MIN's measurement, 17-31 us); an LP whose variables need more than its budget
#: (``DET_LP`` x limit) at this rate is not started (:func:`_det_fits`)
LP_VAR_S = 1.7e-5
#: wall-clock mode: the full CP-SAT model is built only with at least ``model_size / MODEL_BUILD_RATE``
#: seconds left: building it and CP-SAT's presolve do not stop on time (the Gemma train step's
#: 570,526 entries: 2.9-5.3 s build and 4.5-6.4 s in CP-SAT for a 0.5-2 s limit, loaded machine;
#: contest V's 405,256: 1.2-1.4 s and 2-4 s); and as much again is kept back from CP-SAT's own limit for its
#: loading and presolve, which overrun by about the build's seconds (Gemma above; round 30, transformer_block at
#: 2x2x2, 725,311 entries, load 20: 12.4 s past a 26.3 s limit)
MODEL_BUILD_RATE = 2.0e5
#: wall-clock mode, when the full model follows: the Lagrangian rounds stop after this share of the
#: limit without a new incumbent.  Contest instance V (208 reduced nodes, 300 s): the last new
#: incumbent came 16 s in and the rounds went on to 150 s, leaving the LP (GLOP, 229-277 s there on a
#: loaded machine)
#: no time to end; B and G end their rounds within seconds anyway
LAGRANGE_STALL = 0.1
MERGE_SHARE = 0.1    # share of the limit for merging the portfolio's two searches (CP-SAT)
DET_MERGE = 0.1      # deterministic mode: merge budget, deterministic seconds per second of limit
#: deterministic mode: CPU seconds (this process and its waited-for children) one unit of ``time_limit``
#: costs on a memory budget's problem at the limits a rescue gets, measured (round 23, BENCHMARKS.md "Round
#: 23, helper budget"; ``solve_problem`` on the exported budgeted problems, 2-core machine): CPU / units at 2
#: units -- keras-hub Falcon 128 MiB 1.96, decoder2 10 MiB 2.62, transformer_train_step 20 MiB 0.49 (it ends
#: early, infeasible): the median, 2.0.  The cost is not proportional: CPU ~ F + s x units, with F (the
#: presolve, the greedy and its local searches of DET_PAIR_SWEEPS sweeps, the first three Lagrangian rounds,
#: which the work budget does not shorten) 3.4 / 5.2 / 14 CPU-s on Falcon / decoder2 / DiT (held out: 13.1-14.4
#: CPU-s at 0.5-4.8 units) and s 0.4-1.3 CPU-s per unit beyond it; round 22's 4.8-unit rescue on Falcon took
#: 30.5 CPU-s.  :func:`work_for_cpu` turns CPU seconds allotted into a work budget with it.
DET_CPU_PER_UNIT = 2.0
#: deterministic mode, a problem without memory constraints too large for the LP and the full model (more than
#: :data:`FULL_MODEL_LIMIT` entries: step 4a's regime): the CPU seconds its fixed part costs per edge-matrix entry
#: are ``1 / DET_FIXED_RATE`` -- the presolve, the greedy and its local searches and the first three Lagrangian
#: rounds, which no work budget shortens.  Measured (round 26, BENCHMARKS.md "Round 26, helper fine"; device CPU,
#: one core per solve, presolve + ``_trajectory`` CPU over the reduced problem's entries): keras-hub's 4-layer Gemma
#: at 2x2x2 8.62 s / 42.7 M entries, Gemma3 at 2x4 5.56 / 24.4 M, at 2x2x2 3.89 / 22.4 M, from its layout map 6.13 /
#: 23.5 M, the 48-layer transformer at 2x2x2 22.7 / 145.6 M and at 4x2 24.6 / 153.3 M, Llama 3.1 8B at 2x2x2 20.3 /
#: 109.1 M, decoder2 at 2x2x2 2.4 / 6.3 M, MaxText at 2x2x2 2.15 / 3.9 M: 0.136-0.55 us per entry, median 0.20
#: (the small ones pay a presolve of ~1-1.5 s whatever their size; the large ones, which the rule decides, 0.14-0.26)
DET_FIXED_RATE = 5.0e6
#: deterministic mode, the same problems: CPU seconds one unit of the (internal) work budget costs beyond the fixed
#: part -- the dual sweeps, step 4a's pruned bounds and LP, CP-SAT and LNS each get a share of the units, and the
#: shares sum past one.  Measured (same runs, 12 units, 16 for Gemma3 at 2x2x2 -- CPU of the solve less its fixed
#: part, per unit): Gemma 1.64, Gemma3 2x4 1.45, 2x2x2 1.43, the 48-layer 2x2x2 1.39, 4x2 1.26, Llama 8B 2x2x2 1.91,
#: decoder2 1.07 (Gemma3 from its layout map and MaxText ended early, proven): the median
DET_SEARCH_CPU_PER_UNIT = 1.43
GAP_LIMIT = 1e-4      # stop searching once (objective - bound) / objective is at most this (0.01%)
#: most edge-matrix entries (plus strategies) of one LNS neighbourhood's model: a breadth-first ball of
#: 51 nodes of decoder2 at 2x2x2 (~150 strategies per node) made a model that took 10.6 s to build and
#: 26 s in CP-SAT against a 2 s limit (its presolve does not stop on time); the node count alone
#: does not bound the model on multi-axis meshes
LNS_MAX_ENTRIES = 200_000
LNS_START_NODES = 60   # nodes of LNS's first neighbourhood (then grown or shrunk by its results)
#: wall-clock mode, step 4a: the dual sweeps on the pruned problem may use this share of the time left
#: (at least BOUND_SHARE of the limit; they stop when they stall: decoder2's pruned problem converges in
#: ~230 passes, 3-5 s on the loaded 2-core machine, where LNS after them found nothing in 5-16 rounds)
PRUNED_SWEEP_SHARE = 0.5
#: most rounds of cycle inequalities added to an LP relaxation (:func:`~hloshard.solver.lp.lp_solve`),
#: each one more GLOP solve; the rounds also end when none is violated or the LP is integral.  A cap on
#: the solves, not a tuned figure: decoder2's pruned problem at 2x2x2 (77 nodes, 98,814 LP variables)
#: needed 3 rounds (65, 40, 23 inequalities) for an integral optimum, 1.41% -> 0.95% -> 0.79% -> 0%
#: under the incumbent
CYCLE_ROUNDS = 8


@dataclass
class Solution:
    """Result of :func:`solve_problem`.

    ``strategies``: one strategy index per original node (empty when no solution); ``objective``: its
    exact cost (integer units of the problem; multiply by ``Problem.cost_scale`` for cost units), None
    without a solution; ``bound``: a proven lower bound on the optimum (None when unknown);
    ``status``: 'optimal' (proven), 'feasible' (a solution, not proven optimal), 'infeasible'
    (proven: ``explanation`` says why), 'timeout' (no solution found in time); ``seconds``: wall time.
    """

    strategies: list
    objective: int | None
    bound: int | None
    status: str
    seconds: float
    explanation: str | None = None
    detail: dict = field(default_factory=dict)
    stats: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        out = {"strategies": [int(s) for s in self.strategies], "objective": self.objective,
               "bound": self.bound, "status": self.status, "seconds": round(self.seconds, 3)}
        if self.explanation:
            out["explanation"] = self.explanation
        return out


def _emit(progress, **event):
    if progress is not None:
        progress(event)


#: the least seconds :func:`solve_problem` searches, whatever ``time_limit`` it is given (its floor; the
#: callers' minimum solve, ``autoshard.solve.MIN_SOLVE_SECONDS`` and ``autoshard.coarse.COARSE_MIN_SOLVE``, is this)
MIN_TIME_LIMIT = 0.5


def solve_problem(problem: Problem, time_limit: float = 60.0, workers: int = 2, seed: int = 0,
                  deterministic: bool = False, hint=None, progress=None) -> Solution:
    """Choose one strategy per node minimising node + edge costs under the memory limit.

    ``time_limit``: seconds for this call (wall clock, honoured with a small margin; in
    deterministic mode a work budget, see the module docstring); ``workers``: CP-SAT threads;
    ``seed``: random seed (CP-SAT and LNS); ``deterministic``: byte-identical result for a given
    input, seed, worker count and limit, whatever the machine load; ``hint``: optional original
    strategies to start from; ``progress(event: dict)``: called with ``{"phase", "objective",
    "bound", "elapsed"}`` as the search advances.  ``Solution.bound`` is a proven lower bound.
    Never raises for an infeasible problem: returns status 'infeasible' with an explanation.
    """
    t0 = time.monotonic()
    time_limit = max(MIN_TIME_LIMIT, float(time_limit))
    det = bool(deterministic)
    cpu0 = None if det else time.process_time()   # wall-clock mode: the load as this solve sees it (step 5)
    if det:
        deadline = float("inf")  # no clock in deterministic mode (module docstring, "Budgets")
    else:
        deadline = t0 + time_limit - min(1.0, 0.03 * time_limit) - 0.2
    inf = float("inf")

    def wall(d):  # a wall-clock limit, or none in deterministic mode
        return inf if det else min(deadline, d)

    rng = np.random.default_rng(seed)

    def elapsed():
        return time.monotonic() - t0

    # 1. presolve
    try:
        # dominance by dead-end elimination only where the full model follows (its size test on the
        # edge entries): it shrinks the LP and CP-SAT models; on larger problems it would only change
        # the heuristic search's path (contest K and N: 0.5-1.9% worse, deterministic mode, round 9)
        red = presolve(problem, deadline=None if det else t0 + 0.45 * time_limit, dee_limit=FULL_MODEL_LIMIT)
    except Infeasible as exc:
        return Solution([], None, None, "infeasible", elapsed(), explanation=exc.explanation, detail=exc.detail)
    stats = {"presolve": red.stats}
    _emit(progress, phase="presolve", elapsed=elapsed(), nodes=red.num_nodes, edges=len(red.edge_costs))

    if red.num_nodes == 0:
        strategies = red.expand([])
        obj, feas = evaluate(problem, strategies)
        status = "optimal" if feas else "infeasible"
        return Solution(strategies.tolist(), obj if feas else None, obj if feas else None, status, elapsed(),
                        stats=stats)

    big = red.num_nodes >= LARGE_NODES
    segments = red.memory.num_segments() if red.memory is not None else 0
    work = red.stats["edge_entries"] + red.stats["strategies"] + segments
    pair_sweeps = DET_PAIR_SWEEPS if det else None

    # 2-3. greedy + local search, then Lagrangian memory prices: one search, or two with other seeds
    # side by side (the portfolio), merged
    model_size = red.stats["edge_entries"] + (red.memory.num_terms if red.memory is not None else 0)
    if det and red.memory is None and model_size > FULL_MODEL_LIMIT:
        # the limit as CPU seconds: the fixed part's modelled seconds taken off, the rest in units at their cost
        units = det_units(time_limit, red.stats["edge_entries"])
        stats["det_units"] = {"time_limit": time_limit, "fixed_seconds": round(det_fixed_seconds(red.stats["edge_entries"]), 3),
                              "units": round(units, 6)}
        time_limit = units
    if det:
        rounds = max(3, min(1000, int(LAGRANGE_SHARE * time_limit * WORK_RATE / (work + ROUND_OVERHEAD))))
    else:
        rounds = 1000
    plan = dict(t0=t0, time_limit=time_limit, deadline=deadline, det=det, big=big, rounds=rounds,
                pair_sweeps=pair_sweeps, hint=hint, keep_trying=model_size > FULL_MODEL_LIMIT,
                exact_follows=model_size <= FULL_MODEL_LIMIT)
    portfolio = _use_portfolio(red, workers)
    ls = LocalSearch(red, seed=seed)
    child = None
    # the LP relaxation on the second core, beside the heuristic phases (no portfolio; big enough LPs)
    lp_child = None
    lp_det = DET_LP * time_limit if det else None
    exact = model_size <= FULL_MODEL_LIMIT
    nlp = lp_size(red) if exact else 0
    # deterministic mode: the LP, the full model and LNS are started only when their fixed part fits
    # their budget (:func:`_det_fits`; otherwise they end without a result)
    lp_fits = exact and (not det or _det_fits(nlp * LP_VAR_S, lp_det))
    full_fits = not det or _det_fits(model_size / MODEL_BUILD_RATE, DET_FULL * time_limit)
    # LNS: its first neighbourhood (LNS_START_NODES nodes) modelled as that share of the model's entries
    lns_entries = min(LNS_MAX_ENTRIES, model_size * min(red.num_nodes, LNS_START_NODES) / red.num_nodes)
    lns_fits = not det or _det_fits(lns_entries / MODEL_BUILD_RATE, DET_LNS * time_limit)
    skipped = [name for name, fits, used in (("lp", lp_fits, exact), ("full_model", full_fits, exact),
                                              ("lns", lns_fits, True)) if used and not fits]
    if skipped:
        stats["budget_skipped"] = skipped
    lp_in_child = (not portfolio and workers >= 2 and lp_fits
                   and nlp >= LP_CHILD_MIN and (det or deadline - time.monotonic() > 0.5))
    if lp_in_child:
        # deterministic mode: no wall limit (GLOP's deterministic time decides)
        lp_child = fork.start(lp_solve, red, 1e7 if det else max(0.2, deadline - time.monotonic()), lp_det)
        t_lp_child = time.monotonic()
    lp_forked = lp_child is not None   # else the LP runs in-process at step 4b
    try:
        if portfolio:
            # the second search's own time is its phase's; it never keeps searching to the deadline
            child = fork.start(_second_trajectory, red, seed + 1, dict(plan, keep_trying=False))
            if child is None and not det:
                portfolio = False  # no second core to use without fork; deterministic mode runs it after
        try:
            mine = _trajectory(red, ls, plan, progress)
            other = None
            if portfolio:
                if child is not None:
                    c, child = child, None
                    other = fork.collect(c, max(0.0, deadline - time.monotonic()))
                # deterministic mode: the same answer whether the child ran, failed or was never forked
                if other is None and det:
                    other = _second_trajectory(red, seed + 1, dict(plan, keep_trying=False))
        finally:
            if child is not None:
                fork.cancel(child)
        best, best_obj, mu, lag_info = mine
        if "starts" in lag_info:
            stats["starts"] = lag_info.pop("starts")
        stats["lagrange"] = {"rounds_limit": rounds, "seconds": round(elapsed(), 3), **lag_info}
        if portfolio:
            best, best_obj, mu = _merge_searches(red, ls, mine, other, stats, progress, plan, workers, seed)
        # repeated structure (e.g. transformer layers): propose the solution where every class of
        # look-alike nodes takes its most common choice; kept only when better after local search
        if best is not None and red.num_nodes >= 2:
            classes = repeated_classes(red)
            stats["repetition"] = repetition_stats(classes)
            if stats["repetition"]["repeated_nodes"]:
                cand = shared_choice(classes, best)
                if not np.array_equal(cand, best):
                    ls.set_solution(cand)
                    ls.improve(wall(time.monotonic() + 0.05 * time_limit), pairs=False)
                    if ls.feasible() and ls.objective() < best_obj:
                        best, best_obj = ls.s.copy(), ls.objective()
                        stats["repetition"]["improved"] = True
        if best is not None:
            ls.set_solution(best)
        stats["heuristic"] = {"objective": None if best_obj is None else best_obj + red.offset,
                              "seconds": round(elapsed(), 3)}
        if best_obj is not None:
            _emit(progress, phase="heuristic", objective=best_obj + red.offset, elapsed=elapsed())

        # 4. a proven lower bound (dual ascent, with the memory prices)
        def try_decoded(decoded):
            """The dual's own solution (priced reparametrisation, rounded greedily), repaired and
            improved; kept when better.  Returns the incumbent's objective (offset included) or None."""
            nonlocal best, best_obj
            ls.set_solution(decoded)
            if red.memory is not None and not ls.feasible():
                repair_memory(ls, wall(time.monotonic() + 0.05 * time_limit), batch=16 if big else 1)
            ls.improve(wall(time.monotonic() + 0.05 * time_limit), pairs=not big, max_pair_sweeps=pair_sweeps)
            if ls.feasible() and (best_obj is None or ls.objective() < best_obj):
                stats.setdefault("bound", {})["decoded_objective"] = ls.objective() + red.offset
                best, best_obj = ls.s.copy(), ls.objective()
                _emit(progress, phase="dual", objective=best_obj + red.offset, elapsed=elapsed())
            if best is not None:
                ls.set_solution(best)
            return None if best_obj is None else best_obj + red.offset

        target = None if best_obj is None else best_obj + red.offset
        share = EXACT_BOUND_SHARE if exact else BOUND_SHARE
        late = past(plan, best) and late_passes(red, time_limit)
        if late:
            # past the deadline, but the dual's passes are cheap next to the limit: its share in modelled CPU
            # seconds, no rounding (late_passes)
            bound, decoded, dual = _bound(red, ls, mu, det, time_limit, work,
                                          time.monotonic() + BOUND_SHARE * time_limit, stats, target,
                                          max_passes=late)
            decoded = None
            stats["bound"]["late"] = True
        elif past(plan, best):   # the cheap bound only: every node's cheapest strategy (a dual pass is seconds)
            bound, decoded, dual = _trivial_bound(red), None, None
            stats["bound"] = {"passes": 0, "trivial": bound, "skipped": "past the deadline"}
        else:
            bound, decoded, dual = _bound(red, ls, mu, det, time_limit, work,
                                          wall(time.monotonic() + share * time_limit), stats, target,
                                          polish=try_decoded if exact else None)
        decoded_obj = stats["bound"].get("decoded_objective")
        if decoded is not None:
            try_decoded(decoded)
        if decoded_obj is not None:
            stats["bound"]["decoded_objective"] = min(decoded_obj, stats["bound"].get("decoded_objective", decoded_obj))
        _emit(progress, phase="bound", bound=bound, elapsed=elapsed())

        def closed():  # proven within GAP_LIMIT: nothing worth searching for
            if best_obj is None:
                return False
            o = best_obj + red.offset
            return bound >= o or (o > 0 and (o - bound) <= GAP_LIMIT * o)

        # 4a. a model too large for the LP: reduced-cost pruning by the dual's reparametrisation against
        # the incumbent, presolved again; the LP of what is left when it is small enough
        if not exact and red.memory is None and best_obj is not None and dual is not None and not closed() \
                and (det or deadline - time.monotonic() > 1.0):
            # the dual first brought nearer its fixed point: what the pruning removes grows with it
            cb = _converge_dual(red, dual, best_obj + red.offset, det, time_limit, deadline, stats)
            if cb > bound:
                bound = cb
                _emit(progress, phase="bound", bound=bound, elapsed=elapsed())
        if not exact and red.memory is None and best_obj is not None and dual is not None and not closed() \
                and (det or deadline - time.monotonic() > 1.0):
            pb, ppos = _pruned_bound(red, dual, best_obj, det, time_limit, deadline, stats, lower=bound)
            if pb is not None and pb > bound:
                bound = pb
                _emit(progress, phase="lp", bound=bound, elapsed=elapsed())
            if ppos is not None and not stats["prune"].get("lp_integral"):
                # the LP optimum rounded (largest value per node), improved by local search, as in step 4b
                ls.set_solution(ppos)
                ls.improve(wall(time.monotonic() + 0.05 * time_limit), pairs=not big, max_pair_sweeps=pair_sweeps)
                ppos = ls.s.copy()
                ls.set_solution(best)
            if ppos is not None and ls.feasible(ppos) and ls.objective(ppos) < best_obj:
                best, best_obj = ppos, ls.objective(ppos)
                ls.set_solution(best)
                _emit(progress, phase="lp", objective=best_obj + red.offset, elapsed=elapsed())

        # 4b. the LP relaxation solved exactly (GLOP), when the model is small enough: MPLP's fixed point
        # can be below the LP optimum; the LP's value is certified from its dual, and an integral LP
        # optimum that fits in memory is an optimal solution
        lp_res = None
        if lp_child is not None and det:
            # deterministic mode: the child's result is waited for (it is a function of the input),
            # unless the search is already proven within GAP_LIMIT
            t_lp = t_lp_child
            c, lp_child = lp_child, None
            if closed():
                fork.cancel(c)
            else:
                lp_res = fork.collect(c, math.inf)
                if lp_res is None:   # the child failed: the same result in-process
                    lp_res = lp_solve(red, 1e7, deterministic_limit=lp_det)
        elif lp_child is not None:   # started after presolve: done by now on small models (B, G)
            t_lp = t_lp_child
            # within GAP_LIMIT but not proven: an LP that has ended may still hold the optimum (G: its
            # LP optimum is integral), so it is read when ready, but not waited for
            proven = best_obj is not None and bound >= best_obj + red.offset
            wait = 0.0 if closed() else max(0.0, min(deadline - time.monotonic(), LP_WAIT * time_limit))
            if not proven and fork.ready(lp_child, wait):
                c, lp_child = lp_child, None
                lp_res = fork.collect(c, LP_READ_S) or (None, None, False)   # it has ended: read its result
            elif closed():
                fork.cancel(lp_child)
                lp_child = None
        elif not lp_forked and lp_fits and not closed() and deadline - time.monotonic() > 0.5:
            t_lp = time.monotonic()
            # deterministic mode: GLOP's deterministic time decides (no wall-clock limit)
            lp_wall = 1e7 if det else min(deadline - t_lp, LP_SHARE * time_limit)
            lp_res = lp_solve(red, max(0.2, lp_wall), deterministic_limit=lp_det)
        if lp_res is not None:
            lb, lpos, integral = lp_res
            stats["lp"] = {"bound": lb, "integral": integral, "seconds": round(time.monotonic() - t_lp, 3)}
            if lb is not None:
                bound = max(bound, lb)
                _emit(progress, phase="lp", bound=bound, elapsed=elapsed())
            if lpos is not None and not integral:
                # the LP optimum rounded (largest value per node), repaired and improved: on G the
                # LP's vertex is fractional after the dominance reductions, its rounding the optimum
                ls.set_solution(lpos)
                if red.memory is not None and not ls.feasible():
                    repair_memory(ls, wall(time.monotonic() + 0.05 * time_limit), batch=16 if big else 1)
                ls.improve(wall(time.monotonic() + 0.05 * time_limit), pairs=not big, max_pair_sweeps=pair_sweeps)
                lpos = ls.s.copy()
                if best is not None:
                    ls.set_solution(best)
            if lpos is not None and ls.feasible(lpos):
                o = ls.objective(lpos)
                if best_obj is None or o < best_obj:
                    best, best_obj = lpos, o
                    ls.set_solution(best)
                    _emit(progress, phase="lp", objective=best_obj + red.offset, elapsed=elapsed())

        # 5. CP-SAT on the whole reduced problem
        cp_status = "unknown"
        remaining = deadline - time.monotonic()
        build = remaining > max(0.2, model_size / MODEL_BUILD_RATE) and exact and full_fits and not closed()
        if build and not det and not full_model_worth(model_size, remaining,
                                                       elapsed() / max(1e-3, time.process_time() - cpu0)):
            # wall-clock mode: its build and loading at the load this solve has seen would take the time
            build = False
            stats["model"] = {"skipped": "its build and loading would take the time left",
                              "seconds_left": round(remaining, 3)}
        if build:
            t_model = time.monotonic()
            mdl = cpsat.build_model(red)
            stats["model"] = {"variables": mdl.num_vars, "constraints": len(mdl.model.proto.constraints),
                              "build_seconds": round(elapsed(), 3)}
            remaining = deadline - time.monotonic()
            if not det:
                # CP-SAT's loading and presolve do not stop on time either: kept back as long as the build took
                # (at the machine's load now) or is modelled to take (MODEL_BUILD_RATE), whichever is longer
                # (transformer_block at 2x2x2, 725,311 entries, limit 40 s at load 20: CP-SAT given 26.3 s ran
                # 38.7 s, the solve 51.4 s; with the modelled 3.6 s kept back, 30.0 s of 22.0, the solve 43.3 s)
                remaining -= max(model_size / MODEL_BUILD_RATE, time.monotonic() - t_model)
            lns_share = 0.0 if red.num_nodes < 50 else LNS_SHARE
            full_time = max(0.1, remaining * (1.0 - lns_share))
            if remaining > 0.1:
                res = cpsat.solve(mdl, full_time, workers=workers, seed=seed, deterministic=det,
                                  deterministic_limit=DET_FULL * time_limit,
                                  hint=best if best_obj is not None else None,
                                  progress=progress, offset=red.offset, t0=t0)
                cp_status = res.status
                if res.status == "infeasible":
                    why = tightest_point(problem)
                    if why is None:
                        return Solution([], None, None, "infeasible", elapsed(), stats=stats,
                                        explanation="no combination of allowed (finite-cost) strategies exists "
                                                    "(CP-SAT proved it)")
                    return Solution([], None, None, "infeasible", elapsed(), explanation=why.explanation,
                                    detail=why.detail, stats=stats)
                if res.positions is not None:
                    if ls.feasible(res.positions):
                        o = ls.objective(res.positions)
                        if best_obj is None or o < best_obj:
                            best, best_obj = res.positions, o
                if res.bound is not None:
                    bound = max(bound, res.bound + red.offset)
                stats["cpsat"] = {"status": res.status, "wall": round(res.wall, 3),
                                  "deterministic_time": round(res.deterministic_time, 3)}

        # 6. LNS polish
        if best_obj is not None and cp_status != "optimal" and not closed() and lns_fits:
            best, best_obj = _lns(red, ls, best, best_obj, deadline, rng, workers, seed, det,
                                  progress, t0, stats, det_budget=DET_LNS * time_limit)

        if lp_child is not None:   # still running (V: GLOP 229-277 s): its bound, if it ends in time
            c, lp_child = lp_child, None
            done = fork.ready(c, max(0.0, deadline - time.monotonic()))
            lb = ((fork.collect(c, LP_READ_S) if done else fork.cancel(c)) or (None, None, False))[0]
            stats["lp"] = {"bound": lb, "integral": False, "seconds": round(time.monotonic() - t_lp_child, 3),
                           "beside_search": True}
            if lb is not None:
                bound = max(bound, lb)
                _emit(progress, phase="lp", bound=bound, elapsed=elapsed())
        if best_obj is None:
            return Solution([], None, bound, "timeout", elapsed(), stats=stats)
        strategies = red.expand(best)
        obj, feas = evaluate(problem, strategies)
        if not feas:  # cannot happen unless a reduction is wrong; never report an infeasible answer
            raise AssertionError("internal error: solver produced an infeasible solution")
        if bound > obj:  # cannot happen unless a bound is wrong; never report a false proof
            raise AssertionError(f"internal error: lower bound {bound} above a solution's objective {obj}")
        status = "optimal" if cp_status == "optimal" or bound >= obj else "feasible"
        if status == "optimal":
            bound = obj
        return Solution(strategies.tolist(), obj, bound, status, elapsed(), stats=stats)
    finally:
        if lp_child is not None:  # an early return or an error: the LP child goes
            fork.cancel(lp_child)


def det_fixed_seconds(entries: int) -> float:
    """The modelled CPU seconds of the part of a deterministic solve that no work budget shortens (presolve,
    greedy, local search, the first Lagrangian rounds), for a problem of ``entries`` edge-matrix entries without
    memory constraints: ``entries /`` :data:`DET_FIXED_RATE` (measured, see there).  Used by :func:`solve_problem`
    (:func:`det_units`) and, on a cost graph's solver problem before any solve, by
    :func:`hloshard.autoshard.coarse.deterministic_first` (whether the refined graph's solve fits its share)."""
    return float(entries) / DET_FIXED_RATE


def det_units(time_limit: float, entries: int) -> float:
    """The internal work budget (units) of a deterministic solve given ``time_limit`` seconds, on a problem of
    ``entries`` edge-matrix entries too large for the LP and the full model and without memory constraints:
    ``(time_limit - det_fixed_seconds(entries)) /`` :data:`DET_SEARCH_CPU_PER_UNIT`, at least 0.5 (the solver's
    floor), so that the solve costs about ``time_limit`` CPU seconds on an idle core (before round 26 the units were
    the seconds: keras-hub Gemma's refined problem took 15.5 CPU-s for 3 units and 28.3 for 12; the 48-layer
    transformer at 2x2x2 29.7 and 39.3).  A function of the limit and the problem's size only: the answer stays
    independent of the load.  When the fixed part alone passes the limit the solve costs that part (about
    :func:`det_fixed_seconds`) and more than ``time_limit``: the caller decides whether to solve such a problem."""
    return max(0.5, (float(time_limit) - det_fixed_seconds(entries)) / DET_SEARCH_CPU_PER_UNIT)


def work_for_cpu(cpu_seconds: float, least: float = 0.0) -> float:
    """The deterministic ``time_limit`` (work units) whose solve is modelled to cost about ``cpu_seconds``
    of CPU on a memory budget's problem: ``cpu_seconds / DET_CPU_PER_UNIT`` (:data:`DET_CPU_PER_UNIT`,
    measured), at least ``least``.  What a wall-clock caller that needs a load-independent solve (the
    memory budget's rescues, :func:`hloshard.autoshard.solve._fit_buffers`) gives it for the seconds it
    allots; the answer depends on that figure only, never on the machine's load."""
    return max(float(least), float(cpu_seconds) / DET_CPU_PER_UNIT)


def full_model_worth(model_size: int, remaining: float, wall_per_cpu: float) -> bool:
    """Wall-clock mode: whether the full CP-SAT model (step 5) is built with ``remaining`` seconds left: its build
    (``model_size /`` :data:`MODEL_BUILD_RATE` CPU seconds, times ``wall_per_cpu``, this solve's wall seconds per
    CPU second so far: the machine's load as the solve sees it, at least 1), CP-SAT's loading and presolve, which
    take about as long again (kept back from its limit, :data:`MODEL_BUILD_RATE`), and at least as long again to
    search: three times the build.  Before round 31 the test was one modelled build at no load: transformer_block
    at 2x2x2 (727,997 variables, 19 nodes), ``--time-limit 30`` at load 19: the model built in 9 s, CP-SAT ran
    19.4 s at deterministic time 0.0 (never past its loading), the solve took 34.4 s of its 30, for nothing; the
    dual bound had the plan within 0.034% at 4.9 s.  Raises nothing."""
    fixed = float(model_size) / MODEL_BUILD_RATE * max(1.0, float(wall_per_cpu))
    return float(remaining) > 3.0 * fixed


def _det_fits(fixed_s: float, budget: float) -> bool:
    """Deterministic mode: whether a phase's fixed part, ``fixed_s`` modelled seconds from the reduced
    problem's size alone (the full model and LNS's first neighbourhood: their edge entries + memory terms
    / :data:`MODEL_BUILD_RATE`, building the model, before CP-SAT's presolve; GLOP: LP variables x
    :data:`LP_VAR_S`), fits in its work budget ``budget`` (deterministic seconds: ``DET_FULL``,
    ``DET_LNS``, ``DET_LP`` x limit).  A phase that does not fit is not started: it would end without
    a result (keras-hub Gemma's memory-guard solves at 0.5-2.5 s limits, 290,000-340,000 entries: the
    full model ``unknown`` after 0.1-0.5 deterministic seconds, GLOP without an optimal basis, one LNS
    round that found nothing; 9-12 s of the 11-14 s of CPU each solve took).  Depends only on sizes
    and the limit, so the answer stays independent of the load."""
    return fixed_s <= budget


PORTFOLIO_MIN_NODES = LARGE_NODES  # reduced nodes from which the portfolio runs


def _use_portfolio(red, workers: int) -> bool:
    """Whether steps 2-3 run as two searches (seeds ``seed`` and ``seed + 1``) and merge them: with at
    least two workers, on large problems (:data:`PORTFOLIO_MIN_NODES`, where the heuristic phases
    take most of the budget and the small ones are solved by CP-SAT) whose memory limit can bind
    (memory points: the Lagrangian search runs several rounds).  Depends on the input and options
    only, never on the machine, so deterministic mode stays deterministic."""
    return (workers >= 2 and red.num_nodes >= PORTFOLIO_MIN_NODES and red.memory is not None
            and red.memory.num_points > 0)


def _trajectory(red, ls, plan, progress):
    """Steps 2 and 3 of the pipeline for one search (``ls``, with its own seed): greedy + local
    search (or the hint), then :func:`~hloshard.solver.heuristic.lagrangian_search`.  ``plan``: the
    run's budget (see :func:`solve_problem`).  Returns ``(best positions or None, best objective or
    None, memory prices, Lagrangian info)``; picklable (it is a forked child's result)."""
    t0, time_limit, deadline, det = plan["t0"], plan["time_limit"], plan["deadline"], plan["det"]
    big, pair_sweeps, hint = plan["big"], plan["pair_sweeps"], plan["hint"]
    inf = float("inf")

    def wall(d):
        return inf if det else min(deadline, d)

    heur_deadline = wall(max(t0 + 0.5 * time_limit, time.monotonic() + 0.15 * time_limit))
    # a hint using strategies presolve removed (dominated ones): each such node takes the surviving strategy
    # cheapest beside its neighbours' (Reduced.repair_choice), so the hint is still a start
    hp, repaired = red.repair_choice(hint) if hint is not None else (None, 0)
    hp = hp if hp is not None and ls.feasible(hp) else None
    best, best_obj = None, None
    starts: dict = {}
    if hp is not None and repaired:
        starts["repaired"] = repaired
    if hp is None or det:
        ls.greedy()
        ls.improve(heur_deadline, pairs=not big, max_pair_sweeps=pair_sweeps)
        if ls.feasible():
            best, best_obj = ls.s.copy(), ls.objective()
    else:
        # wall-clock mode with a feasible hint: the greedy start too, as deterministic mode runs it, with
        # single-node and tree moves to their local optimum whatever the clock (what makes the first plan,
        # module docstring; its pair sweeps, 1-3 s on decoder2 at 2x4 under load, go to the bound and the LP
        # instead).  A hint the coarse solve found in a starved share can be far above it (new user 27's MoE
        # at 2x4, default limit, load 10: the mapped coarse plan 104.4 M kept, the greedy start 65.0 M after
        # 0.37 CPU-s of these moves).  On a large problem (LARGE_NODES) the moves stop at the heuristic's
        # deadline: the greedy plan is still compared with the hint
        # The tree moves draw forests from the search's generator: put back as it was, so that the search from the
        # hint follows the path it followed without this start (decoder2 at 2x4: its proof took 10.4 s of solver
        # without, 20.7 s with the generator advanced, the same optimum)
        rng0 = ls.rng.bit_generator.state
        ls.greedy()
        ls.improve(heur_deadline if big else math.inf, pairs=False)
        ls.rng.bit_generator.state = rng0
        if ls.feasible():
            best, best_obj = ls.s.copy(), ls.objective()
            starts["greedy"] = int(best_obj + red.offset)
    if hp is not None:
        ls.set_solution(hp)
        starts["hint"] = int(ls.objective() + red.offset)
        ls.improve(heur_deadline, max_pair_sweeps=pair_sweeps)
        if best_obj is None or ls.objective() < best_obj:
            best, best_obj = ls.s.copy(), ls.objective()
            starts["kept"] = "hint"
        elif "greedy" in starts:
            starts["kept"] = "greedy"
        if best_obj is not None and "kept" in starts:   # the first plan, before the Lagrangian rounds
            starts["first"] = int(best_obj + red.offset)

    def pen_progress(o):
        _emit(progress, phase="lagrange", objective=o + red.offset, elapsed=time.monotonic() - t0)

    # without a memory limit that can bind: one round (message passing + local search)
    if det:
        pen_deadline = inf
    else:
        pen_deadline = wall(max(t0 + 0.5 * time_limit, time.monotonic() + 0.2 * time_limit))
        if best is None and plan["keep_trying"]:  # no CP-SAT to fall back on: keep trying
            pen_deadline = deadline
    lag_info: dict = {}
    # when the LP and the full CP-SAT model follow, rounds that stopped finding incumbents give their
    # time to those (wall-clock mode only: deterministic mode counts rounds)
    stall = None if det or not plan.get("exact_follows") else LAGRANGE_STALL * time_limit
    ps, po, mu = lagrangian_search(ls, pen_deadline, incumbent=None if best is None else (best, best_obj),
                                   progress=pen_progress, max_rounds=plan["rounds"], max_pair_sweeps=pair_sweeps,
                                   info=lag_info, stall_seconds=stall)
    if po is not None and (best_obj is None or po < best_obj):
        best, best_obj = ps, po
    if starts:   # which start the first plan came from (solve_problem's stats["starts"])
        lag_info["starts"] = starts
    return best, best_obj, mu, lag_info


def late_passes(red, time_limit: float) -> int:
    """Wall-clock mode, a solve past its deadline with an incumbent (:func:`past`): the dual passes its bound still
    gets, ``BOUND_SHARE x time_limit`` of modelled CPU seconds (:func:`sweep_seconds` a pass, at most
    :data:`MAX_SWEEPS`), 0 when one pass alone is modelled past that share (the trivial bound then, as before).  The
    bound phase's own share of the limit, paid late: before round 31 a late solve reported the trivial bound,
    every node's cheapest strategy, whatever a pass cost.  Measured (round 31, CPU seconds, presolved problems):
    transformer_train_step at 2x2x2 (248 nodes, 9.7 M entries) a pass 0.03 CPU-s, modelled 0.044; 16 passes bound
    it 2.3% under the plan the 30 s ladder wrote, 32 passes 1.7%, where the trivial bound it reported was 65% under
    it (fine solve 6 s after a 17.9 s build, load 20).  Sizes and the limit only; raises nothing."""
    per = sweep_seconds(red)
    if per <= 0:
        return MAX_SWEEPS
    return min(MAX_SWEEPS, int(BOUND_SHARE * float(time_limit) / per))


def past(plan, best) -> bool:
    """Wall-clock mode: whether the deadline has passed with an incumbent (``best`` not None), so that
    the phases that only bound it more tightly or search on from it are not started (the limit is a
    promise: the Llama 3.1 8B corpus module's coarse solve, given 0.5 s, ran 9.8 s, 2.9 s of it a dual
    pass and its rounding, load 8).  The first Lagrangian round and the repeated-structure proposal are
    not among them (module docstring: they make the first plan).  Never in deterministic mode (no
    clock)."""
    return not plan["det"] and best is not None and time.monotonic() >= plan["deadline"]


def _second_trajectory(red, seed, plan):
    """:func:`_trajectory` of the portfolio's second search (its own ``LocalSearch`` and seed, no
    progress events: it may run in a forked child)."""
    return _trajectory(red, LocalSearch(red, seed=seed), plan, None)


def _merge_searches(red, ls, mine, other, stats, progress, plan, workers, seed):
    """The portfolio's result: the better of the two searches (``mine``, ``other``: results of
    :func:`_trajectory`; ``other`` None when the second failed), merged with the other one by
    :func:`~hloshard.solver.merge.merge_solutions` and polished by local search.  Returns ``(best
    positions, best objective, memory prices)``, the prices of the better search; records
    ``stats["portfolio"]``."""
    t0, time_limit, deadline, det = plan["t0"], plan["time_limit"], plan["deadline"], plan["det"]
    best, best_obj, mu, _ = mine
    pstats = {"objectives": [None if best_obj is None else best_obj + red.offset,
                             None if other is None or other[1] is None else other[1] + red.offset]}
    stats["portfolio"] = pstats
    if other is None or other[1] is None:
        return best, best_obj, mu
    pstats["kept"] = "first"
    if best_obj is None or other[1] < best_obj:
        best, best_obj, mu = other[0], other[1], other[2]
        pstats["kept"] = "second"  # its solution and its memory prices (for the bound)
    sols = [best] + [x for x in (mine[0], other[0]) if x is not None and x is not best]
    if len(sols) < 2 or deadline - time.monotonic() <= 1.0:
        return best, best_obj, mu
    t_m = time.monotonic()
    m_wall = max(0.5, deadline - t_m if det else min(deadline - t_m, MERGE_SHARE * time_limit))
    merged, m_status, m_free = merge_solutions(red, sols, m_wall, workers=workers, seed=seed, deterministic=det,
                                               deterministic_limit=DET_MERGE * time_limit,
                                               feasible=ls.feasible, objective=ls.objective)
    ls.set_solution(merged)
    polish = float("inf") if det else min(deadline, time.monotonic() + 0.05 * time_limit)
    ls.improve(polish, pairs=not plan["big"], max_pair_sweeps=plan["pair_sweeps"])
    if ls.feasible() and ls.objective() < best_obj:
        best, best_obj = ls.s.copy(), ls.objective()
        _emit(progress, phase="merge", objective=best_obj + red.offset, elapsed=time.monotonic() - t0)
    pstats["merge"] = {"status": m_status, "free_nodes": m_free, "objective": best_obj + red.offset,
                       "seconds": round(time.monotonic() - t_m, 3)}
    return best, best_obj, mu


def _trivial_bound(red) -> int:
    """The cheapest bound: the presolve offset plus every node's cheapest strategy (the reduced problem's
    edge matrices are normalised to minimum 0), in the problem's integer units."""
    return red.offset + sum(int(c.min()) for c in red.costs)


def _bound(red, ls, mu, det, time_limit, work, deadline, stats, target=None, polish=None,
           max_passes: int | None = None) -> tuple:
    """``(bound, decoded, dual)``: the best proven lower bound of the cheap ones: the presolve offset plus every node's cheapest
    strategy (edge matrices are normalised to minimum 0), and the dual bound of
    :func:`~hloshard.solver.bounds.lower_bound` with the memory prices ``mu`` and, evaluated on the
    same reparametrisation, without them.  Sweeps: until ``deadline`` (default mode) or a number
    derived from the limit and the problem's size (deterministic mode); either way no further once
    the bound is within ``GAP_LIMIT`` of ``target`` (the incumbent's objective).  ``decoded``: the
    dual's rounded solution (:meth:`~hloshard.solver.bounds.DualBound.decode`), positions per node;
    ``dual``: the final :class:`~hloshard.solver.bounds.DualBound` (its reparametrisation, for
    :func:`_pruned_bound`).

    ``polish`` (given when the full model follows): ``polish(decoded) -> incumbent objective``, called
    every :data:`DECODE_EVERY` passes with the dual's current rounding (it keeps the best solution);
    its result becomes the ``target``.  The sweeps then get up to :data:`MAX_SWEEPS` passes, in
    deterministic mode as many as :data:`SWEEP_RATE` allows in :data:`EXACT_BOUND_SHARE` of the limit.

    ``max_passes``: at most this many passes whatever the mode (:func:`late_passes`, the bound of a solve past its
    deadline)."""
    trivial = _trivial_bound(red)
    t = time.monotonic()
    share = BOUND_SHARE if polish is None else EXACT_BOUND_SHARE
    passes = max(2, min(MAX_SWEEPS, int(share * time_limit / (SWEEP_NODE_S * red.num_nodes + work / SWEEP_RATE)))) \
        if det else MAX_SWEEPS
    if max_passes is not None:
        passes = max(1, min(passes, int(max_passes)))
    # without ``polish`` the rounding is taken where it always was (deterministic mode: after the
    # passes WORK_RATE allowed, the search's path on the large contest instances unchanged); the
    # sweeps after it only raise the bound
    decode_at = max(2, min(200, int(BOUND_SHARE * time_limit * WORK_RATE / max(work, 1)))) if det else 200
    decoded = None
    best, dual = lower_bound(red, ls, mu, passes=1)
    done = 1
    per_pass = time.monotonic() - t
    order = bfs_order(ls.nbrs, np.argsort(-np.array([len(x) for x in ls.nbrs]), kind="stable").tolist())
    while done < passes and (det or time.monotonic() + 2 * per_pass < deadline):
        if target is not None and target - best <= GAP_LIMIT * abs(target):
            break
        step = min(4, passes - done)
        if polish is None and decoded is None and done < decode_at:
            step = min(step, decode_at - done)
        b, dual = lower_bound(red, ls, mu, passes=step, dual=dual)
        stalled = b - best <= 0.1 * GAP_LIMIT * max(abs(b), 1)  # converged: leave the time to LNS
        best = max(best, b)
        done += step
        if polish is None and decoded is None and done >= decode_at:
            decoded = dual.decode(order)
        if stalled:
            break
        if polish is not None and done % DECODE_EVERY == 1:
            target = polish(dual.decode(order))
    if decoded is None:
        decoded = dual.decode(order)
    if mu is not None:   # the same reparametrisation without prices: also a bound
        b, dual = lower_bound(red, None, None, passes=0, dual=dual)
        best = max(best, b)
    stats["bound"] = {"passes": done, "dual": best, "trivial": trivial,
                      "seconds": round(time.monotonic() - t, 3)}
    return max(best, trivial), decoded, dual


#: the modelled CPU seconds of one dual sweep (pass) on the large problems of step 4a are ``SWEEP_EDGE_S *
#: edges + edge entries / SWEEP_ENTRY_RATE`` (:func:`sweep_seconds`): every pass visits each edge matrix
#: twice (row and column minima), a fixed numpy cost per visit plus one read of its entries.  Measured (CPU
#: seconds per pass, mean of 6 after the first, presolved problems, 2-core machine at load 16-19): keras-hub
#: Gemma's refined 2x2x2 problem (847 edges, 38,670,642 entries) 0.144, decoder2 at 2x2x2 (231, 6,286,601)
#: 0.026, Gemma at 2x4 (664, 541,864) 0.012, contest B / G / A (280 / 351 / 452 edges, <= 46,009
#: entries) 0.0066 / 0.0076 / 0.0072; both constants on the slow side of that fit.  The older
#: ``SWEEP_NODE_S * nodes + work / SWEEP_RATE`` (which the exact path's pass counts keep) put the Gemma
#: problem's pass at 0.98 s, 6.8x what it takes, and its bound got 2 passes where 5 s of limit buy 13
SWEEP_EDGE_S = 2.5e-5
SWEEP_ENTRY_RATE = 2.5e8
#: step 4a: the share of the limit the dual sweeps get to go on from the bound phase's before any pruning
#: (deterministic mode: modelled by :func:`sweep_seconds`; they stop earlier once they stall or prove the
#: incumbent).  Reduced-cost pruning removes what the dual's reduced costs exceed the gap by, so a
#: pruning of a dual far from its fixed point removes nearly nothing and its presolve costs more than
#: passes: Gemma's refined problem, dual 7.1% under the incumbent after 2 passes, pruned at three targets
#: 71,777 -> 71,644-71,717 strategies (~9 CPU-s for +0.6% of bound); after 64 passes (0.38% under it) the
#: pruning at the incumbent leaves 284,484 entries whose LP is integral: the incumbent proven optimal
CONVERGE_SHARE = 0.3


def sweep_seconds(red) -> float:
    """The modelled CPU seconds of one dual sweep over ``red`` (a reduced problem, or a pruned
    :class:`~hloshard.costgraph.Problem` of the same edges: ``edge_costs``): :data:`SWEEP_EDGE_S` per edge
    plus its entries at :data:`SWEEP_ENTRY_RATE` (measured, see there).  Sizes only: deterministic mode
    stays independent of the load."""
    mats = red.edge_costs
    return SWEEP_EDGE_S * len(mats) + sum(int(m.size) for m in mats) / SWEEP_ENTRY_RATE


def _converge_dual(red, dual, incumbent, det, time_limit, deadline, stats) -> int:
    """Step 4a's first part: ``dual`` (the bound phase's :class:`~hloshard.solver.bounds.DualBound`, a
    problem without memory terms) swept further, warm, so that the pruning after it removes what it can:
    :data:`CONVERGE_SHARE` of the limit (deterministic mode: that many :func:`sweep_seconds`; wall-clock
    mode: that share of the time, never past one second before ``deadline``), stopping once a step of 4
    passes gains less than a tenth of ``GAP_LIMIT`` (stalled) or the bound is within ``GAP_LIMIT`` of
    ``incumbent`` (offset included).  Returns the proven bound (offset included); records
    ``stats["bound"]["converge"]`` (passes, bound)."""
    per = sweep_seconds(red)
    passes = int(CONVERGE_SHARE * time_limit / per) if det else MAX_SWEEPS
    end = math.inf if det else min(deadline - 1.0, time.monotonic() + CONVERGE_SHARE * time_limit)
    best = dual.proven() + int(red.offset)
    done = 0
    t = time.monotonic()
    while done < passes and (det or time.monotonic() + 2 * per < end):
        if incumbent - best <= GAP_LIMIT * abs(incumbent):
            break
        step = min(4, passes - done)
        dual.sweep(step)
        done += step
        b = dual.proven() + int(red.offset)
        stalled = b - best <= 0.1 * GAP_LIMIT * max(abs(b), 1)
        best = max(best, b)
        if stalled:
            break
    stats.setdefault("bound", {})["converge"] = {"passes": done, "bound": best, "seconds": round(time.monotonic() - t, 3)}
    return best


def _pruned_bound(red, dual, best_obj, det, time_limit, deadline, stats, lower=None) -> tuple:
    """``(bound or None, positions or None)`` of step 4a: the reduced problem pruned by the reduced costs
    of ``dual`` (:func:`~hloshard.solver.bounds.reduced_cost_pruning`) against a *target* ``T`` (every
    strategy and pair that no solution cheaper than ``T`` can use is forbidden), reduced again by
    :func:`presolve` (dead-end elimination included), then bounded: any solution cheaper than ``T`` is
    a solution of the pruned problem, so ``min(T, bound of the pruned problem)`` is a lower bound.

    The bound of the pruned problem: when it has at most :data:`FULL_MODEL_LIMIT` edge entries, its LP
    relaxation tightened by cycle inequalities (:func:`~hloshard.solver.lp.lp_solve`,
    :data:`CYCLE_ROUNDS`; the time left, deterministic mode :data:`DET_LP` deterministic seconds per
    second of limit per GLOP solve and, for all the GLOP solves of all the targets together, one budget
    of :data:`DET_LP_ITERATIONS` simplex iterations per second of limit: once it is spent no target is
    started); else the dual sweeps (:data:`BOUND_SHARE` of the limit or
    :data:`PRUNED_SWEEP_SHARE` of the time left, whichever is longer; deterministic mode: the pass
    count :data:`SWEEP_RATE` allows in :data:`BOUND_SHARE` of the limit).

    **Targets by bisection** (with ``lower``, the bound proven so far, offset included): a target
    below the incumbent prunes far more (decoder2 at 2x2x2, the dual 2.3% under the incumbent after 80
    passes: LP variables 134,623 at the incumbent, 61,193 at 1% under it; GLOP 9.5 s against 1.4 s) and
    its LP is higher (4,973,269,821 against 5,001,489,675).  The first target is halfway between
    ``lower`` and the incumbent; when the pruned problem's bound reaches ``T`` (or nothing is left) the
    bound is ``T`` and the next target is one above the pruned problem's bound ``b`` when ``b`` is above
    ``T`` (pruned at ``b + 1`` the problem keeps the plans of cost ``b``: an integral LP there is a plan at
    the bound), else halfway up
    to the incumbent; when it stays below ``T`` the bound is that of the pruned problem, and when nothing
    is proven (the LP did not end within its limit) the bound stays, and either way the next target is
    halfway down; at most :data:`TARGET_STEPS` targets, the
    last one the incumbent itself, and the steps end when the time does or the interval is within
    :data:`GAP_LIMIT`.  Without ``lower`` the target is the incumbent (one step).

    The bound never exceeds the incumbent; an empty pruned problem at the incumbent proves it optimal.
    ``positions``: the pruned problem's LP optimum (positions of ``red``; integral: an optimal solution
    of it, so the optimum when it costs less than ``T``; else a rounding) or the one solution its presolve
    leaves, of the last step that had one; else None.  Records ``stats["prune"]`` (per target:
    strategies and edge entries before / after the pruning, after the second presolve, the bounds)."""
    t = time.monotonic()
    incumbent = best_obj + red.offset
    st = stats["prune"] = {"targets": []}
    # deterministic mode: every GLOP solve of the targets and their cycle rounds draws on one budget
    budget = IterationBudget(DET_LP_ITERATIONS * time_limit) if det else None
    lo = -math.inf if lower is None else min(int(lower), incumbent)   # proven so far
    hi = incumbent     # the next target lies in (lo, hi]
    pos_out = None
    # the incumbent's pruning first: when what it leaves is too large for the LP, no target below it would be
    # bounded by an LP either in the time (each a pruning and a cold start), so one target, the incumbent, gets
    # every target's sweeps, pruned again as the dual improves (:func:`_swept_at_target`)
    q, pst = reduced_cost_pruning(red, dual, incumbent - int(red.offset))
    if pst["edge_entries"][1] > PRESOLVE_PRUNED_LIMIT:
        rec = _swept_at_target(red, dual, q, incumbent, det, time_limit, deadline,
                               {"bound": None, "stats": dict(pst, target=incumbent)}, budget, share=TARGET_STEPS * BOUND_SHARE)
        del q
        st["targets"].append(rec["stats"])
        if rec.get("positions") is not None:
            pos_out = rec["positions"]
            st["lp_integral"] = bool(rec.get("integral"))
        st["seconds"] = round(time.monotonic() - t, 3)
        if rec["bound"] is None and lo == -math.inf:
            return None, pos_out
        bound = min(incumbent, int(max(lo, rec["bound"] if rec["bound"] is not None else lo)))
        st["bound"] = bound
        return bound, pos_out
    del q
    first = True
    tried: set = set()
    lo_next = [None]   # the next target when the last step chose one
    for step in range(TARGET_STEPS):
        if hi - lo <= GAP_LIMIT * max(abs(hi), 1) and not first:
            break
        if not det and deadline - time.monotonic() < 1.0 and not first:
            break
        if budget is not None and budget.spent() and not first:
            break
        last = step == TARGET_STEPS - 1 or lower is None or hi - lo <= GAP_LIMIT * max(abs(hi), 1)
        target = hi if last else (lo_next[0] if lo_next[0] is not None and lo < lo_next[0] <= hi else (lo + hi + 1) // 2)
        lo_next[0] = None
        first = False
        if target in tried:   # the last step's target (``hi``) bounded already: it would give the same again
            break
        tried.add(target)
        rec = _bound_at_target(red, dual, target, det, time_limit, deadline, budget)
        st["targets"].append(rec["stats"])
        if rec.get("positions") is not None:
            pos_out = rec["positions"]
            st["lp_integral"] = bool(rec.get("integral"))
        b = rec["bound"]
        if b is None:   # nothing proven at this target (the LP did not end): an easier one, lower down
            if target <= lo + 1:
                break
            hi = target
            continue
        if b >= target:                       # no solution cheaper than the target
            lo = max(lo, target)
            if target >= incumbent:
                break
            # the next target: the pruned problem's bound when above the target (pruned at that bound the
            # problem tends to reach it again: decoder2 at 2x2x2, the LP of the problem pruned at 1% and
            # at 0.5% under the incumbent was the same, 5,001,489,675; halfway up to the incumbent, 5.012 M,
            # it did not end in the time left), else halfway up.  One above that bound: pruning at T keeps
            # the solutions of cost T - 1 or less, so a target at the bound itself could never hold a plan
            # that reaches it (decoder2 at 2x4, deterministic: the LP at 5,011,246,768 proved that bound
            # and nothing below it, and the plan of that cost was pruned away)
            lo_next[0] = min(math.ceil(b) + 1, hi) if int(b) > lo and not rec.get("swept") else (lo + hi + 1) // 2
        else:
            lo = max(lo, b)
            hi = target
            if rec.get("integral") or rec.get("decided"):   # the pruned problem's optimum itself
                break
    st["seconds"] = round(time.monotonic() - t, 3)
    if budget is not None:
        st["glop_iterations"] = budget.total - budget.left
        st["glop_solves"] = budget.solves
    if lo == -math.inf:
        return None, pos_out
    bound = min(incumbent, int(lo))
    st["bound"] = bound
    return bound, pos_out


#: most targets of step 4a's bisection (:func:`_pruned_bound`), each a pruning, a presolve and an LP
TARGET_STEPS = 4
#: deterministic mode, step 4a: GLOP simplex iterations per second of limit that all the LP solves of
#: the targets and their cycle rounds share (:class:`~hloshard.solver.lp.IterationBudget`; before, each
#: of up to TARGET_STEPS x (1 + CYCLE_ROUNDS) solves had DET_LP x limit deterministic seconds of its own,
#: and decoder2 at 2x2x2, ``--time-limit 30``, spent 125,319 iterations in 13 solves, 149 s of GLOP at
#: load 5-7, to prove its optimum).  The figure: half of GLOP's measured rate on decoder2's pruned LP
#: (114,045 variables: 6,025 iterations at ``max_deterministic_time`` 1.0, 6,242 to its optimum), so
#: that step 4a as a whole stays within about half the deterministic seconds one GLOP solve was allowed
#: (DET_LP x limit), the wall of the deterministic mode near round 11's (one LP)
DET_LP_ITERATIONS = 3000


def _bound_at_target(red, dual, target, det, time_limit, deadline, budget=None) -> dict:
    """One target of :func:`_pruned_bound`: ``{"bound": lower bound of the pruned problem's optimum, offset
    included (``target`` or more when nothing below it is left; None when nothing was proven),
    "positions": positions of ``red`` or None, "integral", "decided", "swept", "stats"}``."""
    q, pst = reduced_cost_pruning(red, dual, target - int(red.offset))
    out = {"bound": None, "stats": dict(pst, target=target)}
    if pst["edge_entries"][1] > PRESOLVE_PRUNED_LIMIT:
        # too much left for the LP after any presolve: the dual swept on, on the pruned costs
        return _swept_at_target(red, dual, q, target, det, time_limit, deadline, out, budget)
    return _lp_at_target(red, q, target, det, time_limit, deadline, out, budget, dual=dual)


def _lp_at_target(red, q, target, det, time_limit, deadline, out, budget=None, dual=None) -> dict:
    """The pruned problem ``q`` of a target (a :class:`~hloshard.solver.bounds.Pruned` of ``red``), made a
    problem of its allowed strategies only (:meth:`~hloshard.solver.bounds.Pruned.problem`), presolved again
    and bounded by its LP with cycle inequalities (or decided by the presolve); positions are mapped back to
    ``red``'s; when the presolved problem is still too large for the LP, the warm sweeps of
    :func:`_swept_at_target` from ``dual`` (None: ``out`` as it is, nothing proven).  ``out``: the target's
    record, updated and returned."""
    t = time.monotonic()
    st = out["stats"]
    try:
        cq = q.problem()
        r2 = presolve(cq, deadline=None if det else max(t + 0.5, min(deadline, t + LP_SHARE * time_limit)),
                      dee_limit=FULL_MODEL_LIMIT)
    except Infeasible:   # nothing cheaper than the target
        out["bound"] = target
        return out
    size = r2.stats["edge_entries"]
    st["presolved"] = {"nodes": r2.num_nodes, "strategies": r2.stats["strategies"], "edge_entries": size}
    if r2.num_nodes == 0:   # presolve decided it: its one solution is the pruned problem's optimum
        pos = r2.expand([])
        obj, ok = evaluate(cq, pos)
        out.update(decided=True, positions=q.positions(pos) if ok else None, integral=ok,
                   bound=obj + int(red.offset) if ok else target)
        return out
    del cq
    # the LP's model is built in Python and GLOP's limit does not cover that: wall-clock mode runs it only
    # with twice the full model's build time left (MODEL_BUILD_RATE)
    lp_fits = size <= FULL_MODEL_LIMIT and (
        det or deadline - time.monotonic() >= max(1.0, 2 * lp_size(r2) / MODEL_BUILD_RATE))
    if not lp_fits:
        del r2
        if dual is None:
            return out
        return _swept_at_target(red, dual, q, target, det, time_limit, deadline, out, budget)
    # the LP with cycle inequalities may use the time left (an integral optimum ends the search)
    lp_wall = 1e7 if det else max(0.2, deadline - time.monotonic())
    lpb, lpos, integral = lp_solve(r2, lp_wall, deterministic_limit=DET_LP * time_limit if det else None,
                                   cycle_rounds=CYCLE_ROUNDS, stats=st, enough=target - int(red.offset),
                                   budget=budget)
    st["lp"] = lpb if lpb is None else lpb + red.offset
    st["seconds"] = round(time.monotonic() - t, 3)
    if lpb is None:
        return out
    out.update(bound=lpb + int(red.offset), positions=q.positions(r2.expand(lpos)), integral=bool(integral))
    return out


#: step 4a: a pruned problem with more finite edge entries than this is not presolved for the LP: its
#: presolved matrices stay far above :data:`FULL_MODEL_LIMIT` (presolve counts whole matrices of the strategies
#: left; Gemma's refined 2x2x2 problem pruned to 3.70 M / 7.53 M / 15.1 M finite entries presolved to 1.98 M /
#: 12.1 M / 23.7 M, over the LP's limit, at 1.3-1.7 CPU-s each; pruned to 2.62 M and 1.88 M, to 284,484 and
#: 117,807, whose LPs were integral) and the dual sweeps it goes to run on the pruned costs as they are
PRESOLVE_PRUNED_LIMIT = 2 * FULL_MODEL_LIMIT


def _swept_at_target(red, dual, q, target, det, time_limit, deadline, out, budget=None, share=None) -> dict:
    """A target of step 4a whose pruned problem ``q`` is too large for the LP: ``dual`` carried onto ``q``
    (:meth:`~hloshard.solver.bounds.DualBound.restricted`, warm: no pass is spent getting back to where
    ``dual`` stood) and swept on ``q``'s costs, to a stall, to ``target`` or to the budget (``share``, default
    :data:`BOUND_SHARE`, of the limit; deterministic mode in :func:`sweep_seconds`; wall-clock mode also
    :data:`PRUNED_SWEEP_SHARE` of the time left when longer).  Every :data:`REPRUNE_EVERY` passes ``q`` is
    pruned again against ``target`` by the swept dual's reduced costs (every solution cheaper than ``target``
    is a solution of ``q``, so what no such solution uses can go), and when what is left has at most
    :data:`PRESOLVE_PRUNED_LIMIT` finite entries it goes to the presolve and the LP as a small target's
    pruned problem does (:func:`_lp_at_target`).  Any reparametrisation of ``q`` bounds ``q``'s optimum, so the
    value is a bound of the pruned problem (``out["bound"]``, offset included); ``out["swept"]`` is set (the
    bisection then goes halfway up from a reached target: a sweep stops at the target, where an LP's optimum
    says how far above it the pruned problem is).  Records ``stats["sweeps"]`` (passes, bound, prunings)."""
    st = out["stats"]
    off = int(red.offset)
    per = sweep_seconds(q)
    share = BOUND_SHARE if share is None else share
    passes = max(2, min(MAX_SWEEPS, int(share * time_limit / per))) if det else MAX_SWEEPS
    now = time.monotonic()   # wall-clock mode: what is left goes to LNS, which rarely improves on models this large
    end = math.inf if det else min(deadline, now + max(share * time_limit, PRUNED_SWEEP_SHARE * (deadline - now)))
    d2 = dual.restricted(q)
    lb = d2.proven()
    n_pass = since = prunings = 0
    step = 4 if det else 2   # wall-clock mode: the clock read after every forward and backward pass
    while n_pass < passes and (det or time.monotonic() < end) and lb + off < target:
        k = min(step, passes - n_pass)
        d2.sweep(k)
        n_pass += k
        since += k
        b2 = d2.proven()
        stalled = b2 - lb <= 0.1 * GAP_LIMIT * max(abs(b2), 1)
        lb = max(lb, b2)
        if lb + off >= target:
            break
        if since >= REPRUNE_EVERY or stalled:
            since = 0
            prunings += 1
            q, pst = reduced_cost_pruning(q, d2, target - off)
            if pst["edge_entries"][1] <= PRESOLVE_PRUNED_LIMIT:
                del d2
                st["sweeps"] = {"passes": n_pass, "bound": lb + off, "warm": True, "prunings": prunings,
                                "left": pst["edge_entries"][1]}
                rec = _lp_at_target(red, q, target, det, time_limit, deadline, out, budget)
                if rec["bound"] is None or rec["bound"] < lb + off:   # the sweeps' bound stands
                    rec["bound"] = lb + off
                return rec
            d2 = d2.restricted(q)
            if stalled:
                break
    st["sweeps"] = {"passes": n_pass, "bound": lb + off, "warm": True, "prunings": prunings}
    out["bound"] = lb + off
    out["swept"] = True
    return out


#: step 4a's swept target: the passes between two prunings of its problem by the swept dual (a pruning
#: costs about what 5-7 passes do on Gemma's refined problem: 0.6-0.9 CPU-s against 0.14 a pass)
REPRUNE_EVERY = 8


KINDS = ("ball", "tight", "exchange")  # LNS neighbourhood kinds (see _neighbourhood)


def _neighbourhood(red, ls, rng, size, kind="ball"):
    """LNS neighbourhood (reduced node ids) of one of :data:`KINDS`:

    * ``ball``: a breadth-first ball around a random node;
    * ``tight``: the nodes live at one of the tightest liveness points plus their graph neighbours
      (so that memory can be traded between the nodes that compete for it);
    * ``exchange``: a node held back by memory -- at a local optimum of the memory-aware local
      search, a node whose best strategy given its neighbours (its *regret*: the cost it would save)
      does not fit -- drawn with probability proportional to its regret, together with the nodes
      that could give up memory where its move does not fit (at the point of largest shortfall:
      the lowest cost increase per byte freed, as in :func:`~hloshard.solver.heuristic.repair_memory`)
      and their graph neighbours: the exchange the move needs, in one subproblem.

    Without a memory model every kind is a ball; an ``exchange`` without any held-back node is
    ``tight``."""
    n = red.num_nodes
    nbrs = ls.nbrs
    mem = red.memory
    has_mem = mem is not None and mem.num_points
    start = None
    if has_mem and kind == "exchange":
        start = _exchange_seeds(ls, rng, size)
        if start is None:
            kind = "tight"
    if start is None and has_mem and kind == "tight":
        slack = mem.caps - ls.load
        tight = np.argsort(slack, kind="stable")[:max(1, min(len(slack), 8))]
        p = int(tight[rng.integers(len(tight))])
        start = mem.nodes_at(p).tolist()
        rng.shuffle(start)
        start = start[:max(1, size // 2)]
    if start is None:
        start = [int(rng.integers(n))]
    seen = set(start)
    order = list(start)
    frontier = list(start)
    while frontier and len(order) < size:
        nxt = []
        for i in frontier:
            for j, _ in nbrs[i]:
                if j not in seen:
                    seen.add(j)
                    nxt.append(j)
        rng.shuffle(nxt)
        for j in nxt:
            if len(order) >= size:
                break
            order.append(j)
        frontier = nxt
    return np.array(sorted(_cap_entries(red, order, LNS_MAX_ENTRIES)), dtype=np.int64)


def _cap_entries(red, order: list, cap: int) -> list:
    """The longest prefix of ``order`` (at least one node) whose model -- the strategies of its nodes
    and the entries of every edge touching them -- has at most ``cap`` entries."""
    inc = red.incidence()
    seen: set = set()
    total = 0
    for k, i in enumerate(order):
        add = len(red.costs[i]) + sum(red.edge_costs[e].size for e in inc[i] if e not in seen)
        if k and total + add > cap:
            return order[:k]
        total += add
        seen.update(inc[i])
    return order


def _exchange_seeds(ls, rng, size):
    """Seeds of an ``exchange`` neighbourhood (see :func:`_neighbourhood`): ``[held-back node,
    memory givers...]`` (at most ``size // 2``), or None when no node is held back by memory."""
    n = ls.n
    regret = np.zeros(n)
    alt = np.zeros(n, dtype=np.int64)
    for i in np.nonzero(ls.has_mem)[0].tolist():
        if len(ls.costs[i]) < 2:
            continue
        c = ls.local_cost(i)
        k = int(np.argmin(c))
        r = float(c[ls.s[i]] - c[k])
        if r > 0:
            regret[i], alt[i] = r, k
    total = regret.sum()
    if total <= 0:
        return None
    i = int(rng.choice(n, p=regret / total))
    lo, hi, offs, lens, U = ls.prof[i]
    need = np.repeat(U[alt[i]] - U[ls.s[i]], lens) - (ls.caps[lo:hi] - ls.load[lo:hi])
    p = lo + int(np.argmax(need))
    short = float(max(need.max(), 1))
    givers = []
    for j in ls.mem.nodes_at(p).tolist():
        if j == i:
            continue
        ratio, _ = give_ratio(ls, j, p, short)
        if ratio is None:
            continue
        best = float(ratio.min())
        if np.isfinite(best):
            givers.append((best * rng.uniform(0.5, 1.5), j))
    givers.sort()
    return [i] + [j for _, j in givers[:max(0, size // 2 - 1)]]


def _lns(red, ls, best, best_obj, deadline, rng, workers, seed, deterministic, progress, t0, stats,
         sub_time=2.0, det_budget=0.0):
    """Large-neighbourhood search with CP-SAT on subgraphs; returns (best, best_obj).

    In deterministic mode every sub-solve is limited by deterministic time and the search stops
    after ``det_budget`` seconds in total, each round charged its CP-SAT deterministic time plus
    :data:`ROUND_OVERHEAD` work units (``deadline`` is then infinite), so the sequence of
    neighbourhoods and answers is reproducible and the loop ends however small the sub-models."""
    used = 0.0
    overhead = 0.0
    n = red.num_nodes
    size = min(n, LNS_START_NODES)
    rounds = improved = 0
    ls.set_solution(best)
    # neighbourhood kinds chosen in proportion to their success so far ((improvements + 1) /
    # (tries + 1): every kind starts equal, none is ever excluded)
    tries = {k: 0 for k in KINDS}
    wins = {k: 0 for k in KINDS}
    while True:
        remaining = deadline - time.monotonic()
        if (deterministic and used >= det_budget) or (not deterministic and remaining < 0.3 + overhead):
            break
        if remaining < 0.3:  # default mode only: the deadline is infinite in deterministic mode
            break
        rounds += 1
        round_start = time.monotonic()
        score = np.array([(wins[k] + 1.0) / (tries[k] + 1.0) for k in KINDS])
        kind = KINDS[int(rng.choice(len(KINDS), p=score / score.sum()))]
        tries[kind] += 1
        subset = _neighbourhood(red, ls, rng, size, kind)
        mdl = cpsat.build_model(red, subset=subset, current=best)
        sub_limit = max(0.05, min(remaining - 0.2 - overhead, sub_time))
        res = cpsat.solve(mdl, sub_limit if not deterministic else remaining - 0.2, workers=1,
                          seed=seed + rounds, deterministic=deterministic,
                          deterministic_limit=0.5 * sub_time, hint=best[subset])
        used += res.deterministic_time + ROUND_OVERHEAD / WORK_RATE
        overhead = max(overhead, time.monotonic() - round_start - res.wall)  # model build etc.
        if res.positions is not None:
            cand = best.copy()
            cand[subset] = res.positions
            if ls.feasible(cand):
                o = ls.objective(cand)
                if o < best_obj:
                    best, best_obj = cand, o
                    ls.set_solution(best)
                    improved += 1
                    wins[kind] += 1
                    _emit(progress, phase="lns", objective=best_obj + red.offset, elapsed=time.monotonic() - t0)
        # adapt the neighbourhood size: grow when solved to optimality quickly, shrink otherwise
        quick = (res.deterministic_time < 0.25 * sub_time) if deterministic else (res.wall < 0.5 * sub_limit)
        if res.status == "optimal" and quick:
            size = min(n, int(size * 1.15) + 1)
        elif res.status != "optimal":
            size = max(10, int(size * 0.85))
    stats["lns"] = {"rounds": rounds, "improved": improved, "final_size": size,
                    "kinds": {k: [wins[k], tries[k]] for k in KINDS}}
    return best, best_obj
