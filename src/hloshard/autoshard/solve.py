"""Solving a cost graph (:func:`solve_graph`, defined in :mod:`.search`) and a module
(:func:`solve_module`: build, solve, apply, re-evaluate the written module).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
from dataclasses import dataclass

import numpy as np

from ..cost.liveness import usage_profile
from ..errors import SolveFailed
from ..hlo.sharding import HloSharding
from ..units import format_bytes
from .apply import apply_choice
from .build import Graph, build_graph, edge_buffers, with_memory_budget
from .coarse import COARSE_SHARE, WRITE_SHARE, coarse_first, coarse_share, coarse_start, deterministic_first, node_share
from .edgememory import edge_memory_terms, priced_problem, terms_at
from .evaluate import CostResult, Evaluation, evaluate_choice, evaluate_module
from .report import (_failed, limit_words, minimum_memory_check, minimum_peak, over_words, parameter_floor_check,
                     reshard_cache_warning)
from .search import solve_graph
from .start import budget_start, fits
from ..cost.memory import (budget_for_model_limit, is_tpu_device, model_limit, spilled_heap_excess,
                           xla_lower_bound)
from ..cost.tpu_heap import written_memory_device
from ..cost.tpu_layout import solver_limit as node_limit_for
from ..solver.api import MIN_TIME_LIMIT, Solution, work_for_cpu
from ..costgraph import evaluate, save_problem
from ..strategy.realize import (as_written, insert_loop_state_pins, insert_pins, insert_transpose_pins, operand_pins,
                                 pin_resharded_convolution_operands)
from .local import improve_written
from .trivial import trivial_plans

#: With a ``deadline``, the time kept back after the solve for applying the plan and re-pricing the
#: written module, as a multiple of the seconds of a build of the module on the 1-D mesh of its devices
#: (the coarse build of coarse to fine, else the build itself): the re-pricing builds the written module
#: with every sharding fixed, which costs about what the 1-D build does (both grow with the module, not
#: with the fine strategy space), and the coarse build's seconds are known before the fine build starts
#: (:func:`hloshard.autoshard.coarse.coarse_first` stops the fine build early enough).  Measured (seconds
#: from the end of the solve to the end of the re-pricing / the coarse build's, ``solve --time-limit
#: 60``, 2 cores at load 6-7): the 48-layer transformer at 2x2x2 1.96 and 2.27; the larger is the
#: figure here (held out: Llama 3.1 8B at 4x2 1.5).  Before (0.25 of the whole build): mlp_train_step
#: 0.1, the 2-layer decoder 0.05, transformer_train_step 0.35, scan_mlp_train_step 0.55 of the build.
REPRICE_SHARE = 2.3
#: the least time the solver gets, whatever the deadline (``solve_problem``'s own floor)
MIN_SOLVE_SECONDS = MIN_TIME_LIMIT
#: ``solve_module(starved_floor=)``'s figure, ``hloshard solve``'s under its default time limit (whose build the clock
#: does not stop, so the command ends late already): when the builds leave the solver less than its minimum, it gets
#: this multiple of the build's seconds instead of :data:`MIN_SOLVE_SECONDS` -- a search as long as the build of its
#: graph took, at the load the build saw.  A policy, not a fitted figure; what it buys (round 33, new user 32's SigLIP
#: at 2x4, load 22: build 11.4 s; the fine solve with no start at 0.5 s ended at the replicated plan, 42.1 M, at 5 s
#: 30.5 M, at 10 s 23.7 M, where 51 s of an idle machine found 23.2 M; F4 at the default limit wrote the replicated
#: plan, 216.6 MiB per device, after a 0.5 s solve): BENCHMARKS.md, "The CLI's default run on a real model"
STARVED_SOLVE_SHARE = 1.0
#: Under a memory budget (wall-clock mode), the first solve's share of the solver's time; the rest is
#: kept for the re-solves with the communication buffers priced (:func:`_fit_buffers`), which the first
#: solve's problem does not hold (they all end when the solver's time does: never a full limit each).  A split,
#: not a measured figure: without it a first solve that used the whole limit left no time to re-solve.
FIRST_SOLVE_SHARE = 0.6
#: Under a memory budget (wall-clock mode), the share of the time the call has that the search without the budget
#: gets (:func:`_unbudgeted_first`, ``solve --memory-budget``; :func:`hloshard.jax.auto_shard`'s first solve with its
#: memory guard): it ends by a deadline of its own, that share of the call's, and the search under the budget gets
#: the rest.  A split, not a measured figure (auto_shard gave that search FIRST_SOLVE_SHARE from round 24); the budget is
#: the user's question, so the search without it must not spend its time (new user 31 F13: CLI T5 at
#: ``--memory-budget 48MiB --time-limit 120``: 106 s of 120 without the budget, 4.6 s for it, exit 3): an even
#: split, so that the search under the budget, which also pays the re-pricing of the plan found without it, never
#: has less than the one before it (auto_shard gave that one 0.6 until round 32).
UNBUDGETED_SHARE = 0.5
#: The most re-solves :func:`_fit_buffers` makes with the communication buffers priced (a bound on the
#: loop, not a tuned figure; each round's re-solve gets half the time left).
FIT_ROUNDS = 8
#: In deterministic mode, the most re-solves: 3, the bound of the loop this one replaced.  They share the
#: work budget as the wall-clock re-solves share the time (the first solve FIRST_SOLVE_SHARE, each re-solve
#: half of the budget left, the last what is left), so ``time_limit`` bounds the work of every solve.
DETERMINISTIC_FIT_ROUNDS = 3
#: wall-clock mode: re-solves of :func:`_fit_buffers` that run on a work budget after the clock has ended
#: while no plan keeps the budget's limit (each :func:`rescue_work` units; the call ends late by them)
RESCUE_ROUNDS = 2
#: The most plans :func:`held` keeps per graph (each one strategy index per node): a bound on memory and on
#: the pricing a budget's fallback makes (:func:`_known_within`), not a tuned figure.
HELD_PLANS = 32


#: what the phase after a first solve (auto_shard's memory guard, :func:`hloshard.jax.guard._guard`) prices before
#: it can judge a plan: XLA's propagated baseline and the plan's written module, each about one re-pricing
LATER_PHASE_PRICINGS = 2


def _seconds(s: float) -> str:
    """Seconds as a user reads them in a message: ``1``, ``20.7``, ``90``, ``1,200`` (never ``20.6779``)."""
    return f"{float(s):,.1f}".rstrip("0").rstrip(".")


def certain_refusal(graph: Graph, memory_budget: int) -> None:
    """Raise SolveFailed (``infeasible``, exit 3) when a search of ``graph`` (built without a budget) under
    ``memory_budget`` (bytes per device) must refuse it: every tensor at its smallest layout still exceeds the
    solver's limit for the budget (:func:`hloshard.autoshard.build.with_memory_budget`'s ``usage_limit``: the
    model's limit, :func:`hloshard.cost.memory.model_limit`, with a TPU's VMEM credit) at some liveness point --
    :func:`hloshard.autoshard.report.minimum_memory_check`, the check :func:`solve_graph` makes first under a
    budget, so the message is the one that search would give.  Costs one pass over the liveness intervals (no
    copy of the solver's problem).  Returns None when a plan within the limit may exist."""
    import copy

    device = getattr(graph, "memory_device", None)
    limit = node_limit_for(model_limit(int(memory_budget), device), device)
    probe = copy.copy(graph)   # only what the check and its message read: the problem's limit and the budget
    probe.problem = dataclasses.replace(graph.problem, usage_limit=limit)
    probe.memory_budget = int(memory_budget)
    minimum_memory_check(probe, limit)


#: :func:`cannot_bind`'s bound on any plan's predicted peak, as a multiple of the bytes of every array value of the
#: module unsharded: every value live at once, and as many bytes again for the communication buffers and operand pins
#: beside them (each reshards or copies a value, at most its size per device).  A bound by construction, not a
#: fitted figure; a TPU's tile padding (cost.tpu_layout) is not in it, so a small-array module may pass it.
PEAK_BOUND_FACTOR = 2


def cannot_bind(module, memory_budget: int, device=None) -> bool:
    """Whether no plan of ``module`` can peak above the model's limit for ``memory_budget`` (bytes per device;
    :func:`hloshard.cost.memory.model_limit` on ``device``): :data:`PEAK_BOUND_FACTOR` x the bytes of every array
    instruction of every computation, unsharded (loop bodies once: their values are reused per trip) is within it.
    The search without the budget then needs no share kept for a search under it (:func:`_unbudgeted_first`; a
    device's HBM as the default budget of ``solve --device``).  Only a time split reads it: a wrong answer moves
    seconds between the two searches, never the plan's promise (its written module is still held to the limit)."""
    total = sum(i.shape.byte_size for c in module.computations for i in c.instructions if i.shape.is_array)
    return PEAK_BOUND_FACTOR * total <= model_limit(int(memory_budget), device)


#: The seconds of re-pricing a written module over the node part of the build of its cost graph (the build's seconds
#: x :func:`hloshard.autoshard.coarse.node_share`), where no 1-D (coarse) build was measured apart: the re-pricing
#: builds the written module with its shardings fixed (one layout per node since round 30's fast path), so it pays
#: every node again but not the mesh's pairs.  Measured (round 33, CPU seconds of one process, ``--tie matching``, a
#: plan with its pins written; BENCHMARKS.md "The CLI's default run on a real model"), at 2x4: new user 32's SigLIP
#: 1.01, its LSTM 0.97, new user 31's T5 0.87 and GN-ResNet 0.87 (the figure: 1.0); held out, the samples
#: transformer_train_step 1.11, fused_qkv_train_step 0.94, scan_mlp_train_step 0.83, mlp_train_step 0.78,
#: transformer_block 0.62, moe_layer 0.71.  Before: :data:`REPRICE_SHARE` (2.3, a 1-D build's multiple) of the node
#: part, 2.1-3.7x the re-pricing measured (new user 32 F4: SigLIP 37.1 s kept for a 20.0 s re-pricing, and the solver
#: got its 0.5 s floor: the replicated plan written)
REPRICE_NODE_SHARE = 1.0
#: The same on a mesh priced on a device (``--device``, ``auto_shard(device=)``): its build prices every strategy of
#: every node on the roofline (HBM bytes per strategy), the re-pricing one layout per node, so the re-pricing is a
#: smaller part of the build's node share.  Measured (round 33, as above, with the device): SigLIP on h100-sxm at
#: ``data=2:dcn,model=4`` 0.54 (wall, the CLI's F7 run), the LSTM there 0.53, T5 on tpu-v5e at 2x4 0.56 (round 32's
#: reserve 163.3 s kept for 39.7 s with 2.3); held out, tpu-v5e at 2x4: transformer_train_step 0.66, GN-ResNet 0.38
REPRICE_NODE_SHARE_PRICED = 0.6


def reprice_reserve_seconds(build_seconds: float, nodes: float, priced: bool = False) -> float:
    """The re-pricing reserve (wall seconds) after a build of ``build_seconds`` when no 1-D (coarse) build was
    measured apart: :data:`REPRICE_MARGIN` (the margin a measured re-pricing is kept with, :func:`measured_reserve`)
    x :data:`REPRICE_NODE_SHARE` (``priced``, a mesh priced on a device: :data:`REPRICE_NODE_SHARE_PRICED`) x the
    build's node part (``nodes``: its share, :func:`hloshard.autoshard.coarse.node_share`); the local moves after
    the re-pricing stop at the deadline by themselves.  Earlier figures (wall, before round 30's faster
    re-pricing): new user 25's Gemma3 at 2x2x2, ``--time-limit 60``, load 23: build 30.7 s, node share 0.08,
    re-price 5.8 s; round 26 at load 17: build 20.6 s, re-price 4.8 s.  The wall ratio moves with the load between
    the build and the re-pricing: 0.56-2.81 x the node part on ten runs of one module (BENCHMARKS.md, round 33), so
    the call can end late by the shortfall."""
    share = min(1.0, max(0.0, float(nodes)))
    per_node = REPRICE_NODE_SHARE_PRICED if priced else REPRICE_NODE_SHARE
    return float(build_seconds) * REPRICE_MARGIN * per_node * share


#: The re-pricing reserve of a search on a graph whose module was already written and priced once, as a multiple
#: of the seconds that re-pricing took (:func:`measured_reserve`): a margin for the machine's load changing between
#: the two (the 1-minute load moved by up to 18% within one call in round 30's runs at load 13-18; repeated
#: re-pricings of decoder2's written module at one load: 1.18-1.24 s).  A policy, not fitted to a model.
REPRICE_MARGIN = 1.5


def measured_reserve(graph) -> float | None:
    """The re-pricing reserve (wall seconds) from what a re-pricing of ``graph``'s module really took
    (``graph.reprice_measured``: the longest :func:`reevaluate_written` made on it, the written module's
    :func:`~hloshard.autoshard.evaluate.evaluate_module`, its cost-graph build with every sharding fixed):
    :data:`REPRICE_MARGIN` x that, or None when none was made.  Another plan's written module has the same
    instructions and its pins; its pricing costs about the same (round 30, load 13-17: decoder2 1.2 s, Whisper
    2.9 s, while the estimate from the 1-D build kept 2.4 and 6.3 s)."""
    took = getattr(graph, "reprice_measured", None)
    return None if took is None else REPRICE_MARGIN * float(took)


def later_phase_seconds(reprice: float) -> float:
    """The least wall seconds the phase after a first solve needs to be of any use (``reprice``: the graph's
    re-pricing reserve, ``graph.reprice_seconds``): :data:`LATER_PHASE_PRICINGS` re-pricings and the solver's
    minimum.  The memory guard starts its XLA run only with this much left (it is cut at the deadline less the
    pricings); a first solve whose ``solver_share`` would keep the guard less than this takes all the time instead
    (:func:`_solve_module`)."""
    return MIN_SOLVE_SECONDS + LATER_PHASE_PRICINGS * float(reprice)


def rescue_work(seconds: float) -> float:
    """The work budget (deterministic ``time_limit``) of a rescue allotted ``seconds`` of the solver's time
    (wall-clock mode: ``(1 - FIRST_SOLVE_SHARE)`` of its limit): :func:`hloshard.solver.api.work_for_cpu`
    of at least two of the solver's minimum, and at least :data:`MIN_SOLVE_SECONDS` units.  Its answer does
    not depend on the load; its CPU is about the seconds allotted where the solve's fixed part is small
    (Falcon's 128 MiB problem, 4.8 s allotted: 2.4 units, 3.4 CPU-s) and that fixed part where it is not (DiT:
    13-14 CPU-s at any budget of 0.5-4.8 units; :data:`hloshard.solver.api.DET_CPU_PER_UNIT`), more in wall
    seconds on a loaded machine."""
    return work_for_cpu(max(2 * MIN_SOLVE_SECONDS, float(seconds)), MIN_SOLVE_SECONDS)


def held(graph: Graph) -> list:
    """The plans the searches of ``graph`` and of the graphs made from it for other memory limits
    (:func:`hloshard.autoshard.build.with_memory_budget`, a shallow copy: they share this list) found, each a
    choice of ``graph.problem`` (one strategy index per node), first found first, no repeats, at most
    :data:`HELD_PLANS`: the plan found without the budget, the coarse plan, the memory guard's and the Pareto
    step's re-solves, the budget's re-solves.  When the search under a memory budget ends without a plan
    within its limit, these are priced with their communication buffers and the cheapest that keeps it is
    the answer (:func:`_known_within`): a plan the solver already holds is never lost because the clock ended
    (new user 21's Falcon: ``memory_budget="128MiB"`` raised SolveFailed under load, the 144 MiB call's plan
    peaking at 103.8 MiB by XLA).  Created empty on the graph the first time it is asked for."""
    out = getattr(graph, "held_plans", None)
    if out is None:
        out = graph.held_plans = []
    return out


def _hold(graph: Graph, choice) -> None:
    """Add ``choice`` (a plan of ``graph.problem``) to :func:`held` ``(graph)`` unless it is there or the list
    is full."""
    plans = held(graph)
    if choice is None or len(choice) != graph.problem.num_nodes or len(plans) >= HELD_PLANS:
        return
    c = [int(x) for x in choice]
    if c not in plans:
        plans.append(c)


#: ``SolveResult.source`` of a plan that a later rule put in the place of the solver's answer (what follows it, when
#: anything does, names the rule: ``replaced_by``, or the summary's :func:`hloshard.summary.replacement_words`)
REPLACED_SOURCE = "another plan than the search's answer, put in its place after it"


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
    #: None when it could not be re-evaluated in its time limit (a warning says so).
    written: "CostResult | None" = None
    #: the solver's time limit after :func:`solve_module`'s ``deadline`` took the build into account
    #: (seconds; None: ``time_limit`` as given)
    solver_time_limit: float | None = None
    #: the annotations the post-solve local moves changed (``solve_module(local_moves=True)``):
    #: ``(instruction name, old sharding text or None, new sharding text)``
    local_moves: list = dataclasses.field(default_factory=list)
    #: ``(pin, operand)`` for each operand pin :func:`apply_solution` wrote (the operand before the pin)
    operand_pins: list = dataclasses.field(default_factory=list)
    #: the model's limit the written module was held to when it is looser than ``graph.model_limit``: on a
    #: TPU, the written plan's temporaries fit VMEM (:func:`hloshard.cost.tpu_heap.written_memory_device`)
    written_model_limit: int | None = None
    #: where the plan came from, in words (:func:`plan_source_words`; None: not recorded)
    plan_source: str | None = None
    #: wall seconds of the coarse mesh's build and solve after the fine build (:func:`hloshard.autoshard.coarse.coarse_start`;
    #: 0.0: none ran after it) and of writing and pricing the plan (:func:`apply_solution`: the pins, the re-pricing of the
    #: written module and the local moves after it) -- ``solve``'s phase table (``seconds_phases``) gives them apart
    seconds_coarse: float = 0.0
    seconds_reprice: float = 0.0
    #: the choice ``plan_source`` describes (set from ``choice`` when the result is made; a result copied with
    #: another plan, e.g. by the memory guard's or a budget's fallback, keeps the old one: :attr:`source` then
    #: says the plan was replaced instead of naming the solver's answer)
    plan_source_choice: tuple | None = None
    #: what put another plan in the place of the solver's answer, in words, when the rule that did it said so (a
    #: budget's written-module fallback, :func:`_written_within`); None otherwise (the summary then reads it from
    #: the report: :func:`hloshard.summary.replacement_words`)
    replaced_by: str | None = None

    def __post_init__(self):
        if self.plan_source is not None and self.plan_source_choice is None:
            self.plan_source_choice = tuple(int(x) for x in self.choice)

    @property
    def source(self) -> str | None:
        """Where the plan in ``choice`` came from, in words: ``plan_source`` while ``choice`` is the plan it was
        recorded for; :data:`REPLACED_SOURCE` when a later rule replaced the plan (the memory guard's fallbacks, a
        budget's written-module fallback), followed by ``replaced_by`` when that rule named it; None when nothing was
        recorded.  (New user 30 F13: a summary said "the search's (from the greedy start)" above a warning that the
        greedy plan, known without a search, was written; new user 33 F14: "the notes and warnings say which" where
        none did -- the guard's Pareto step is named in its report only, which the summary now reads.)"""
        if self.plan_source is None:
            return None
        if tuple(int(x) for x in self.choice) != self.plan_source_choice:
            return REPLACED_SOURCE + (f": {self.replaced_by}" if self.replaced_by else "")
        return self.plan_source

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
        """Total cost of the solver's own choice (before the written shardings are re-evaluated), as the
        solver's pairwise graph prices it (each resharding edge paid, also those XLA's reshard cache serves:
        ``Evaluation.cached``), the figure its bound is on."""
        return self.evaluation.total + self.evaluation.cached

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



class WrittenOverLimit(SolveFailed):
    """The written module of a plan exceeds the model's limit for the memory budget (``status``
    ``infeasible``, exit 3): ``written`` / ``solver`` (its peak as written, as the solver's graph priced
    it) and ``limit``, bytes per device (:func:`reevaluate_written`)."""

    def __init__(self, message: str, written: int, solver: int, limit: int):
        super().__init__(message)
        self.status = "infeasible"
        self.written, self.solver, self.limit = written, solver, limit


#: the garbage collector's thresholds while a module is solved (:func:`fewer_collections`; CPython's defaults are
#: (700, 10, 10)): a build and a solve allocate millions of objects that live to the end, so the default young
#: threshold runs the collector hundreds of times over them for nothing.  Measured (round 27, the 48-layer
#: transformer's build at 2x4, CPU-s, load ~12): the collector 0.53 of a 2.61 s build at the defaults, 0.13 of 2.23 s
#: at (50,000, 20, 100); the objects freed at the end are the same (the collector still runs, less often)
GC_THRESHOLDS = (50_000, 20, 100)


def collect_less() -> None:
    """Raise the garbage collector's thresholds to at least :data:`GC_THRESHOLDS` for the rest of the process: for
    a command that solves and exits (``hloshard solve``, whose pricing of the input and re-pricing of the plan
    build graphs outside :func:`solve_module`).  A library call uses :func:`fewer_collections`."""
    gc.set_threshold(*(max(int(a), int(b)) for a, b in zip(gc.get_threshold(), GC_THRESHOLDS)))


@contextlib.contextmanager
def fewer_collections():
    """Run the block with the garbage collector's thresholds raised to at least :data:`GC_THRESHOLDS`, and put the
    caller's back after it (nested uses keep the outer one's).  Changes no result: only how often unreachable
    cycles are looked for."""
    old = gc.get_threshold()
    gc.set_threshold(*(max(int(a), int(b)) for a, b in zip(old, GC_THRESHOLDS)))
    try:
        yield
    finally:
        gc.set_threshold(*old)


def solve_module(module, mesh, keep: str = "io", memory_budget: int | None = None, time_limit: float = 60.0,
                 workers: int = 2, seed: int = 0, deterministic: bool = False, progress=None,
                 export_problem: str | None = None, pin_operands: bool = False,
                 reevaluate: bool = True, apply: bool = True, deadline: float | None = None,
                 on_overrun=None, stop_build: bool = False, hint=None, known=None, graph=None,
                 local_moves: bool = False, fit_buffers: bool = True, solver_share: float = 1.0,
                 free_first: bool = True, reprice_reserve: bool = True, coarse=None,
                 later_budget: int | None = None, *, starved_floor: float = 0.0,
                 nearest_written: bool = False) -> SolveResult:
    """Choose shardings for ``module`` and apply them (the IR is modified in place).

    ``pin_operands``: also insert, before each dot / convolution / gather / scatter operand the chosen
    strategy reshards, a ``Sharding`` custom-call (what ``jax.lax.with_sharding_constraint`` lowers to)
    in the planned layout (:mod:`hloshard.strategy.realize`), so XLA's partitioner carries out the plan
    instead of choosing its own variant from the operands' layouts; the partitioner reshards to it and
    drops it, so it computes nothing and the written module's cost equals the solver's objective.
    ``reevaluate``: price the written module as ``hloshard cost`` does (:func:`reevaluate_written`);
    ``--mesh auto`` turns it off for its candidates and re-evaluates the one it picks.
    ``apply``: write the choice (and the pins) into ``module``; with False the module is left as it
    is (building only adds one computation per call site, :func:`hloshard.hlo.callgraph.flatten_call_graph`)
    and :func:`apply_solution` writes it later: ``--mesh auto`` solves every candidate mesh on one
    parse and writes only the one it picks.
    ``deadline``: a ``time.monotonic()`` instant by which the whole call should end (``hloshard solve``'s
    ``--time-limit`` covers the command): the solver then gets ``min(time_limit, what the build left
    before the deadline minus (REPRICE_SHARE + WRITE_SHARE) x the 1-D mesh's build time)``, at least
    :data:`MIN_SOLVE_SECONDS`, less what the coarse start after the fine build takes (its build and solve; none
    when the builds left no more than that minimum); a search on a graph whose written module was priced before
    keeps :func:`measured_reserve` instead of the estimate;
    ignored with ``deterministic`` (the limit is then a work budget).  When the build leaves less than
    that floor, ``on_overrun(message)`` is called at once, before the solve (the CLI prints it as a
    warning), and the message is added to the graph's warnings.  Not promised in wall-clock mode: a build the
    clock does not stop (no ``stop_build``) that outlasts the deadline, the solver's fixed part (presolve and model
    building run to their end past its time limit), and a re-pricing slower than its reserve end the call late.
    ``stop_build`` (with a ``deadline``, not deterministic, no ``export_problem``; ``--time-limit`` given):
    coarse to fine in that order (:func:`hloshard.autoshard.coarse.coarse_first`): when the fine build
    would pass the deadline it stops and the coarse plan is the answer, with a warning that says so.
    With ``deterministic``, or a ``deadline`` without ``stop_build`` (``solve``'s default limit), the fine build
    has a work limit instead, which reads no clock (:func:`hloshard.autoshard.coarse.deterministic_first`;
    no ``export_problem``): past it the coarse plan is the answer, likewise.
    ``hint``: a choice of the graph's nodes (one strategy index per node, e.g. a plan of the same module
    solved before) the solver starts from instead of the coarse plan (no coarse solve then); ignored
    when it does not fit the graph built (node or strategy counts differ).
    ``known``: a callable ``graph -> list of choices`` of the graph built (plans known before the search,
    e.g. :func:`hloshard.jax.known.known_plans`); the solver starts from the cheapest feasible of them,
    the hint and the coarse plan (:func:`cheapest_start`), so its answer is never costlier than any of
    them; ``graph.known`` keeps the list.
    ``graph``: the cost graph of ``module`` on ``mesh`` for ``keep`` and ``memory_budget``, built before (e.g.
    :func:`hloshard.autoshard.build.with_memory_budget` of an earlier solve's graph): used instead of a
    build (no coarse solve then; the re-pricing reserve is that of the build it came from).
    ``local_moves``: after the written module is priced, lower it by local moves
    (:func:`hloshard.autoshard.local.improve_written`; by the ``deadline`` in wall-clock mode).
    ``fit_buffers`` False: a plan over the memory limit with its communication buffers is not re-solved with
    them priced (:func:`_fit_buffers`); the known plans are tried (:func:`_within_limit`), else SolveFailed
    (the memory guard's re-solves that a bisection step follows: :func:`hloshard.jax.guard._guard`).
    ``solver_share`` (no ``memory_budget``): in deterministic mode, the fine build's work limit is of
    ``time_limit / solver_share`` (the later phase solves on the same graph:
    :func:`hloshard.autoshard.coarse.work_limit`); in wall-clock mode, the solves get at most this share of what the
    ``deadline`` leaves them after the builds and the re-pricing reserve (still at most ``time_limit``), so that
    a later phase's share is not spent by slow builds (:func:`hloshard.jax.auto_shard`'s first solve with the
    memory guard after it: :data:`hloshard.jax.guard.FIRST_SHARE`; keras-hub Falcon at ``time_limit=60``, load
    12: tracing and builds left the guard's re-solve 0.7 s, new user 21 finding 3); 1: all of it.
    ``reprice_reserve`` False (no ``memory_budget``): no re-pricing reserve is kept before the ``deadline`` (a
    ``--mesh auto`` candidate: the search keeps one for the plan it picks, :func:`hloshard.mesh_search.final_reserve`).
    ``coarse`` (with ``stop_build``, no ``memory_budget``): a :class:`hloshard.autoshard.coarse.CoarseSolve` solved
    before, used as the coarse plan when its mesh is this one's coarse mesh (``coarse_first(solved=)``).
    ``later_budget`` (bytes per device; no ``memory_budget``): the memory budget a later search on the graph built
    here is held to (the search under the budget after this one without it: :func:`_unbudgeted_first`,
    :func:`hloshard.jax.auto_shard`); when even the smallest layout of every tensor exceeds its model limit at some
    liveness point (:func:`certain_refusal`, the solver's own first check) SolveFailed (``infeasible``) is raised
    right after the build, before any solve: that search's refusal is certain, and the time the limit gives is not
    spent first on a plan the budget cannot take (new user 31, F6: the GN-ResNet's 18 MiB refused after 59.9 s of 60).
    Under a ``memory_budget`` (no ``graph`` given, no ``export_problem``) the plan found without the budget
    is a candidate (:func:`_unbudgeted_first`): when its written module keeps the model's limit it is the
    answer, so a budget that does not bind never changes the plan.  ``free_first`` False: not that candidate
    (a caller that tried it already: :func:`hloshard.jax.auto_shard`'s search under the budget after the coarse
    mesh's fallback, which solved the module without the budget a second time before round 22).
    ``starved_floor`` (wall-clock mode with a ``deadline``, no ``memory_budget``, a graph built here): when the builds
    leave the solver less than :data:`MIN_SOLVE_SECONDS`, it gets ``starved_floor`` x the build's seconds instead (the
    call ends that much later; the warning says so): ``hloshard solve``'s default limit passes
    :data:`STARVED_SOLVE_SHARE`, where a 0.5 s solve of a large module writes the replicated plan; 0: the minimum.
    ``nearest_written`` (a user's ``memory_budget``; the search without the budget first passes it to the search under
    it): a search that ends with no plan within the budget's limit in the graph's figure prices its nearest plans as
    written before it refuses (:func:`_nearest_written`); off for the memory guard's implicit limits.
    Raises SolveFailed (exit 3) when no feasible solution exists or none was found in time."""
    if memory_budget is not None and graph is None:
        parameter_floor_check(module, mesh.num_devices, memory_budget)
    with fewer_collections():
        if memory_budget is not None and graph is None and not export_problem and free_first:
            return _unbudgeted_first(module, mesh, keep, memory_budget, time_limit, workers, seed, deterministic,
                                     progress, pin_operands, reevaluate, apply, deadline, on_overrun, stop_build,
                                     hint, known, local_moves, starved_floor=starved_floor)
        return _solve_module(module, mesh, keep, memory_budget, time_limit, workers, seed, deterministic, progress,
                             export_problem, pin_operands, reevaluate, apply, deadline, on_overrun, stop_build, hint,
                             known, graph, local_moves, fit_buffers, solver_share, reprice_reserve, coarse,
                             later_budget, starved_floor=starved_floor, nearest_written=nearest_written)


def _solve_module(module, mesh, keep: str = "io", memory_budget: int | None = None, time_limit: float = 60.0,
                  workers: int = 2, seed: int = 0, deterministic: bool = False, progress=None,
                  export_problem: str | None = None, pin_operands: bool = False, reevaluate: bool = True,
                  apply: bool = True, deadline: float | None = None, on_overrun=None, stop_build: bool = False,
                  hint=None, known=None, graph=None, local_moves: bool = False,
                  fit_buffers: bool = True, solver_share: float = 1.0, reprice_reserve: bool = True,
                  coarse=None, later_budget: int | None = None, *, starved_floor: float = 0.0,
                  nearest_written: bool = False) -> SolveResult:
    """:func:`solve_module` with the budget as the search's limit from the start (its arguments, in order)."""
    import time

    t0 = time.monotonic()
    cpu0 = time.process_time()
    first = None
    built = graph is not None   # built before: its build's seconds for the re-pricing reserve
    if not built and stop_build and deadline is not None and not deterministic and not export_problem:
        first = coarse_first(module, mesh, solve_graph, keep, memory_budget, time_limit, workers, seed, deadline,
                             reprice_share=REPRICE_SHARE if reprice_reserve else 0.0, solver_share=solver_share,
                             solved=coarse)
        if first.graph is None:
            return _coarse_fallback(first, module, mesh, pin_operands, memory_budget, apply, on_overrun, t0,
                                    fit=(time_limit, False, workers, seed, progress), known=known,
                                    deadline=deadline, later_budget=later_budget)
        graph = first.graph
    elif not built and not export_problem and (deterministic or deadline is not None):
        # under a work limit (coarse.deterministic_first): deterministic mode, and a deadline the build is
        # not stopped by (solve's default --time-limit), where a fine build of billions of pairs ran minutes
        det = deterministic_first(module, mesh, solve_graph, keep, memory_budget, time_limit, workers, seed,
                                  deterministic=deterministic, solver_share=solver_share)
        if det.graph is None:
            return _coarse_fallback(det, module, mesh, pin_operands, memory_budget, apply, on_overrun, t0,
                                    fit=(time_limit, deterministic, workers, seed, progress), known=known,
                                    deadline=None if deterministic else deadline, later_budget=later_budget)
        graph = det.graph
    elif not built:
        graph = build_graph(module, mesh, keep, memory_budget)
    if later_budget is not None and memory_budget is None and not export_problem:
        certain_refusal(graph, later_budget)   # before any solve: the later search's refusal is certain
    # the copies the written pins share are priced as one buffer (build.pin_key): the solve prices what it writes
    graph.pin_operands = bool(pin_operands)
    if export_problem:
        save_problem(graph.problem, export_problem)
    t1 = time.monotonic()
    if not built:
        graph.build_seconds = t1 - t0
    build_seconds = float(getattr(graph, "build_seconds", t1 - t0))   # what the re-pricing reserve is of
    solver_limit = None
    starved = False   # wall-clock mode: the builds left the solver less than its minimum
    given_limit = time_limit
    # the re-pricing reserve: REPRICE_SHARE x the 1-D mesh's build (the coarse build, else the build; a
    # graph built before, ``graph=``: its own build)
    one_d = first.seconds_coarse_build if first is not None and first.seconds_coarse_build > 0 else build_seconds
    nodes = None   # the build's node share where no coarse build was measured (wall-clock; the reserves are of it)
    reprice = (REPRICE_SHARE if reprice_reserve else 0.0) * one_d
    if reprice_reserve and one_d is build_seconds and not built and deadline is not None and not deterministic:
        # no coarse build measured (no coarser mesh: the build is the one of the 1-D mesh refined at the module's
        # cuts, e.g. Gemma3 at 2x2x2, or solve's default limit): of its node part, not of a build that is mostly pairs
        nodes = node_share(module, mesh)
        reprice = reprice_reserve_seconds(build_seconds, nodes, getattr(mesh, "roofline_prices", None) is not None)
    if built and getattr(graph, "reprice_seconds", None) is not None:
        # a graph built before keeps the reserve its own solve computed (from its 1-D build, the coarse one
        # under coarse to fine): its ``build_seconds`` are the fine build's, 2.3x of which left the memory
        # guard's re-solves of new user 18's encoder-decoder (fine build 10.3 s) the 0.5 s floor of solver
        reprice = float(graph.reprice_seconds)
        if REPRICE_SHARE > 0:   # and the writing reserve below is of the same 1-D build, not the fine one
            one_d = reprice / REPRICE_SHARE
    reserve_measured = False   # the reserve is measured_reserve's (the error below says which it was)
    if built and deadline is not None and not deterministic and reprice_reserve:
        measured = measured_reserve(graph)
        if measured is not None:   # a re-pricing of this graph's module was made: what it took, not an estimate
            reprice = graph.reprice_seconds = measured
            reserve_measured = True
    if not built:   # kept by the later phases of a caller (hloshard.jax.guard.guard_plan's Pareto step)
        graph.reprice_seconds = reprice
    if deadline is not None and not deterministic:
        # and the writing after it (coarse_first keeps WRITE_SHARE of the coarse build for it too): without it the
        # 48-layer transformer at 2x2x2 ended at 60.02 s of 60 (device CPU, round 25: write 0.61 s, not kept)
        write = WRITE_SHARE * one_d if reprice_reserve else 0.0
        if nodes is not None:
            # no coarse build: WRITE_SHARE x the build's node part, as the re-pricing reserve above (WRITE_SHARE is of
            # a 1-D build; new user 31 F7, T5 at 2x2x2 refined, load 23: 8.4 s kept for a write of 1.0 s, on top of
            # the re-pricing's, and the solver got its 0.5 s minimum)
            write *= min(1.0, max(0.0, nodes))
        left = deadline - t1 - reprice - write
        ours = left if solver_share >= 1 else solver_share * left   # (a later phase's share kept)
        if solver_share < 1 and left - ours < later_phase_seconds(reprice):
            # a share the later phase cannot use (auto_shard's memory guard: its XLA run starts only with its
            # pricings left) is the solver's (round 24, new user 23's finding 3: Llama3's build left 11 s, half of
            # it was kept for a guard that needed 21 s, and the solver had its 0.5 s minimum at a 70% gap)
            ours = left
        solver_limit = min(float(time_limit), max(MIN_SOLVE_SECONDS, ours))
        starved = left < MIN_SOLVE_SECONDS
        # the default limit's floor (starved_floor): a search as long as the build took, not the 0.5 s minimum
        floor = float(starved_floor) * build_seconds if starved and not built and memory_budget is None else 0.0
        if floor > MIN_SOLVE_SECONDS:
            solver_limit = min(float(time_limit), floor)
        if left < MIN_SOLVE_SECONDS:
            after = (f", less than the re-pricing of its plan is estimated to need ({reprice:.1f} s)"
                     if deadline - t1 >= MIN_SOLVE_SECONDS else "")
            # a graph built before (a budget's search after the one without it) took no build here: the time went to
            # the searches before (new user 31 F13: "building the cost graph took 0.0 s and left 0.0 s")
            spent = ("the cost graph was built before, and the searches before this one" if built else
                     f"building the cost graph took {t1 - t0:.1f} s and")
            gets = (f"the solver gets {solver_limit:.1f} s, as long as the build took (the default time limit: a "
                    f"search of its minimum {MIN_SOLVE_SECONDS:g} s can end at the replicated plan), and the command "
                    f"ends late by about that; an explicit --time-limit keeps to the clock"
                    if floor > MIN_SOLVE_SECONDS else
                    f"the solver gets its minimum {MIN_SOLVE_SECONDS:g} s and the command ends late")
            msg = f"{spent} left {max(0.0, deadline - t1):.1f} s of the time limit{after}: {gets}"
            graph.warnings.append(msg)
            if on_overrun is not None:
                on_overrun(msg)
        time_limit = solver_limit
    # coarse to fine: the plan of the 1-D mesh of the same devices as the hint and incumbent (.coarse)
    counts = graph.problem.strategy_counts
    if hint is not None and (len(hint) != len(counts) or any(not 0 <= int(h) < int(c) for h, c in zip(hint, counts))):
        hint = None   # not a choice of this graph
    share = COARSE_SHARE
    seconds_coarse = 0.0
    if first is not None:   # solved before the fine build, its time already spent
        start = first.start
    elif hint is not None:
        start = None
    elif starved:
        # wall-clock mode, the builds left the solver no more than its minimum: no coarse start, whose build and
        # solve would run past the deadline (round 30: keras-hub Whisper at the default limit, load 22: 10-16 s
        # after the deadline had passed, for a hint to a 0.5 s solve)
        start = None
        graph.warnings.append("no coarse mesh's plan was built as the solver's start: the time limit had no time "
                              "left for it (its build and solve would end the call late; a longer time limit lets "
                              "it run, and its plan is often cheaper than what the solver's minimum finds)")
    else:
        if not deterministic and deadline is not None and not built:
            # wall-clock mode: the shares swap when the fine solve could not pass its fixed part in its own
            # (coarse.coarse_share), at the load the fine build saw (its wall over CPU seconds)
            share = coarse_share(graph, time_limit, (t1 - t0) / max(1e-3, time.process_time() - cpu0), module, t1 - t0)
        t_coarse = time.monotonic()
        start = coarse_start(module, graph, solve_graph, keep, memory_budget, time_limit, workers, seed, deterministic,
                             share=share)
        seconds_coarse = time.monotonic() - t_coarse
    graph.coarse = start
    held(graph)   # created here, before any graph is made from this one for another limit (they share it)
    if start is not None and start.mapped_objective is not None:   # (a solver-only start is no plan to hold)
        _hold(graph, start.choice)
    if start is not None and first is None:   # its solve's share of the limit (deterministic mode: the share it was given)
        time_limit -= share * time_limit if deterministic else min(start.seconds, share * time_limit)
    if solver_limit is not None and seconds_coarse > 0:
        # wall-clock mode: the solver's limit was set at the fine build's end (t1); the coarse start's build, its
        # mapping and pricing are seconds of that limit too, not only its solve's (start.seconds): the first solve
        # gets what is really left of it (new user 29 F4: solve at the default limit ended 16.5 s late, the coarse
        # start's seconds counted in the phase table's re-pricing)
        time_limit = max(MIN_SOLVE_SECONDS, min(time_limit, t1 + solver_limit - time.monotonic()))
    begin = hint if start is None else start.choice
    begun = None if begin is None else ("coarse" if start is not None else "given")   # what the hint is
    graph.known = list(known(graph)) if known is not None else []
    if graph.known:
        picked = cheapest_start(graph.problem, [begin] + graph.known)
        begun = begun if picked is begin else "known"
        begin = picked
    if memory_budget is not None and not fits(graph, begin):   # a start that keeps the limit (.start)
        begin = budget_start(graph) or begin
    t_solve = time.monotonic()
    first_limit = time_limit
    if memory_budget is not None:
        # leave time for the re-solves with the communication buffers priced (_fit_buffers, below)
        first_limit = max(MIN_SOLVE_SECONDS, FIRST_SOLVE_SHARE * time_limit)
    # a rescue's work budget: the solver's seconds it is allotted, at the measured CPU cost of a unit of work
    # (solver.api.work_for_cpu; round 22's 4.8 units cost 30.5 CPU-s on Falcon's problem).  None under a
    # wall-clock ``deadline`` (the whole call's promise): a rescue runs past the clock (new user 23's Swin at
    # memory_budget="60MiB", time_limit=120: 574.6 s, then SolveFailed), so it is deterministic mode's, the
    # mode whose limit is work and not seconds
    rescue = None if deadline is not None and not deterministic else rescue_work((1.0 - FIRST_SOLVE_SHARE) * time_limit)
    rescues_before = len(getattr(graph, "rescues", None) or [])
    taken_written = False   # the answer is a plan _nearest_written priced within the limit (the solver found none)
    try:
        sol = solve_graph(graph, time_limit=first_limit, workers=workers, seed=seed, deterministic=deterministic,
                          progress=progress, hint=begin)
    except SolveFailed as exc:
        # under a budget, a first solve the clock starved (no plan at all) is not the answer: a plan an earlier
        # search found that keeps the limit, else a rescue on a work budget (_starved)
        sol = _starved(graph, begin, rescue, workers, seed, progress) if (
            memory_budget is not None and not deterministic and getattr(exc, "status", None) == "timeout") else None
        if sol is None and nearest_written and memory_budget is not None and begin is not None and \
                getattr(exc, "status", None) == "timeout":
            # round 36: nor a plan within the limit in the graph's figure: the plans the searches hold, priced as
            # written (_nearest_written; new user 35's F12 at load 28: the budget's solver found nothing in 13.7 s)
            got = _nearest_written(graph, module, mesh, pin_operands, memory_budget,
                                   getattr(graph, "model_limit", None) or graph.problem.usage_limit,
                                   (list(begin), evaluate_choice(graph, begin)), None if deterministic else deadline,
                                   reprice)
            if got is not None and got[0] == "taken":
                sol = _nearest_taken(graph, Solution(strategies=list(begin), objective=0, bound=None,
                                                     status="feasible", seconds=0.0), got)[0]
                taken_written = True
        if sol is not None:
            pass
        elif solver_limit is not None and getattr(exc, "status", None) == "timeout":
            spent = ("the cost graph was built before" if built else
                     f"building the cost graph took {t1 - t0:.1f} s")
            # the deadline is the whole call's (auto_shard's phases share it); the reserve is kept before it
            before = max(0.0, deadline - t1)
            kept = (f"{reprice:.1f} s of them kept for re-pricing the plan" if reprice <= before else
                    f"less than the {reprice:.1f} s kept for re-pricing the plan: the solver got its minimum")
            more = ("; no re-solve runs past a wall-clock deadline: a longer time limit, or deterministic mode "
                    "(a work budget the machine's load does not shorten, which may run past the clock), may find "
                    "one" if memory_budget is not None else "")
            # rounded: a budget's search after the unbudgeted one has a share of the user's limit, which
            # _unbudgeted_first names (new user 25, finding 4: "the time limit of 20.6779 s" for 90 s given)
            exc.args = (f"no feasible solution found in the solver's {solver_limit:.1f} s ({spent}; the time limit "
                        f"of {_seconds(given_limit)} s, {before:.1f} s left before the deadline, {kept}){more}",)
            raise
        else:
            raise
    first_rescues = len(getattr(graph, "rescues", None) or []) - rescues_before   # _starved's (0 or 1)
    choice = list(sol.strategies)
    _hold(graph, choice)
    ev = evaluate_choice(graph, choice)
    limit = getattr(graph, "model_limit", graph.problem.usage_limit)   # the limit of the evaluated peak
    # the re-solves below share the solver's time: in wall-clock mode they end when the first solve's
    # limit (or the command's deadline, less the re-pricing reserve) ends, never a full limit each
    solve_end = t_solve + time_limit
    if deadline is not None:
        solve_end = min(solve_end, deadline - reprice)
    solver_seconds = float(sol.seconds or 0.0)
    out_of_time = False
    if limit is not None and ev.peak_memory > limit and fit_buffers and not taken_written:
        sol, choice, ev, spent, out_of_time = _fit_buffers(
            graph, sol, choice, ev, limit, time_limit - first_limit if deterministic else None, solve_end, workers, seed,
            deterministic, progress, memory_budget, rescue=rescue, rescues=first_rescues)
        solver_seconds += spent
    clock = None
    if out_of_time and deadline is not None and not deterministic:
        # which phase gave up and why, in the error when no plan keeps the budget (new user 29 F2: every budget
        # failed with 10-16 s of 60 unused, the message said only that "the time limit ended")
        how = (f"{REPRICE_MARGIN:g} x the {float(graph.reprice_measured):.1f} s its last re-pricing took"
               if reserve_measured else "estimated from the cost graph's build")
        clock = (f"the re-solves with the buffers priced stopped {max(0.0, deadline - time.monotonic()):.1f} s before "
                 f"the deadline, of which {reprice:.1f} s are kept for re-pricing the written plan ({how}) and a "
                 f"re-solve needs at least {MIN_SOLVE_SECONDS:g} s")
    try:
        if not taken_written:   # (a plan whose written module keeps the limit, taken above: no graph-figure check)
            sol, choice, ev = _within_limit(graph, sol, choice, ev, limit, memory_budget, out_of_time, deterministic,
                                            clock=clock)
    except SolveFailed as exc:
        # round 36 (issue 24, new user 35's F12, fresh35 #3): the plans nearest the limit priced as written, the
        # figure the budget's promise is checked in, before the refusal (_nearest_written)
        # (the user's budget only, ``nearest_written``: the memory guard's implicit limits keep their own rules on a
        # search that found nothing, the band's, hloshard.jax.guard)
        if not nearest_written or getattr(exc, "closest", None) is None or memory_budget is None or export_problem:
            raise
        got = _nearest_written(graph, module, mesh, pin_operands, memory_budget, limit, exc.closest,
                               None if deterministic else deadline, reprice)
        if got is None:
            raise
        if got[0] == "over":   # each priced written is over it: the budget that accepts the nearest written module
            exc.args = (_written_refusal(str(exc), graph, int(exc.closest[1].peak_memory), got[1]),) + exc.args[1:]
            raise
        sol, choice, ev = _nearest_taken(graph, sol, got)
    if solver_seconds != float(sol.seconds or 0.0):   # every solve's time is the solver's (the report's phases)
        sol = dataclasses.replace(sol, seconds=solver_seconds)
    result = SolveResult(graph, sol, choice, ev, t1 - t0, 0.0, solver_time_limit=solver_limit,
                         plan_source=plan_source_words(sol, begun, start) if list(sol.strategies) == list(choice) else None)
    result.seconds_coarse = seconds_coarse
    if apply:
        apply_solution(result, module, mesh, pin_operands, memory_budget, reevaluate, local_moves=local_moves,
                       deadline=None if deterministic else deadline)
    result.seconds_solve = time.monotonic() - t1
    return result


#: :func:`hloshard.autoshard.search.plan_source`'s hint, per what the hint was (``begun`` of :func:`_solve_module`)
_HINTS = {"coarse": "the coarse mesh's plan mapped onto this mesh", "given": "the plan it was given to start from",
          "known": "a plan known before the search"}


def plan_source_words(sol, begun: str | None, start=None) -> str | None:
    """Which plan the solver's answer ``sol`` (a Solution of :func:`hloshard.autoshard.search.solve_graph`) is, in
    words: the search's own, the greedy start, the hint (``begun``: ``"coarse"``, ``"given"``, ``"known"`` or None)
    kept or after local search, or a trivial plan; with the coarse ``start`` (a CoarseStart) its mapped cost. So the
    report says whether the run's cheapest known plan was written rather than something the search found (new user
    27, finding 4).  None when the solve recorded no source (a plan replaced after it: the memory limit's fallbacks)."""
    st = getattr(sol, "stats", None) or {}
    code = st.get("source")
    if code is None:
        return None
    hint = _HINTS.get(begun, "the start it was given")
    if begun == "coarse" and start is not None and start.mapped_objective is not None:
        given = "" if start.share == COARSE_SHARE else f", its solve given {start.share:.0%} of the solver's time"
        hint += f" (mesh {'x'.join(map(str, start.mesh.shape))}{given}, {start.mapped_objective:,.2f} on this mesh)"
    trivial = st.get("trivial") or {}
    return {"trivial": f"the {trivial.get('plan', 'trivial')} plan (the search found nothing cheaper)",
            "hint": f"{hint}, kept (the search found nothing cheaper)",
            "exact": "the optimum of the presolve's exact reductions (every choice made by them)",
            "known_within": f"{st.get('known_within')}: the search's plans were over the memory limit",
            "hint_local": f"{hint}, after local search (no later phase found a cheaper plan)",
            "greedy": "the greedy start after local search (cheaper than "
                      + (hint if begun else "the other starts") + "; no later phase found a cheaper plan)",
            "search": "the search's"
                      + (f" (from {'the greedy start' if (st.get('starts') or {}).get('kept') == 'greedy' else hint})"
                         if st.get("starts") else "")}.get(code)


def unbudgeted_within(free: SolveResult, module, mesh, pin_operands: bool, memory_budget: int,
                      apply: bool = False, local_moves: bool = False, deadline: float | None = None) -> tuple:
    """The one rule that makes the plan found without a memory budget a candidate under it (``solve_module``'s
    :func:`_unbudgeted_first` and :func:`hloshard.jax.auto_shard`, after its memory guard and Pareto step):
    ``free`` (a :class:`SolveResult` of ``module`` solved without the budget, not written) is written with its
    pins and its written module priced (:func:`reevaluate_written`).  Returns ``(result, graph, note)``:
    ``graph`` is ``free.graph`` for the budget (:func:`hloshard.autoshard.build.with_memory_budget`, no
    build; ``graph.unbudgeted`` is ``free.graph``); ``result`` the plan on it when its written module keeps
    the model's limit for ``memory_budget`` (bytes per device; ``graph.budget_note`` says the budget does not bind;
    written into ``module`` when ``apply``, else the module is put back: :func:`apply_solution` writes and
    prices it again, since a price refers to the pin instructions written), else None and ``note`` says why (the module put back as it was).
    ``local_moves`` (with ``apply``): the written module lowered by local moves held to the budget's limit, as
    without the budget (:func:`reevaluate_written`; ``deadline`` as there), so that a budget that does not bind
    gives the plan the call without it gives."""
    graph = with_memory_budget(free.graph, memory_budget)
    graph.unbudgeted = free.graph   # the graph the known plans were made on (hloshard.jax.api reads them there)
    result = SolveResult(graph, free.solution, list(free.choice), evaluate_choice(graph, free.choice),
                         free.seconds_build, free.seconds_solve, solver_time_limit=free.solver_time_limit)
    import time

    t_price = time.monotonic()
    unwritten = _Unwritten(module)
    warnings = list(graph.warnings)
    _write(result, module, pin_operands)
    try:
        reevaluate_written(result, module, mesh, memory_budget, local_moves=local_moves and apply, deadline=deadline)
        over = None
    except WrittenOverLimit as exc:
        over = exc
    result.seconds_reprice = time.monotonic() - t_price   # (the phase table's re-pricing when it is the answer)
    if over is None and result.written is not None:
        # a note, not a warning: nothing is wrong (and --device's HBM default budget would say it on every
        # run); the summary's memory line gives the budget's use
        graph.budget_note = (
            f"the plan found without the memory budget keeps it when written ({result.written.evaluation.peak_memory:,} "
            f"bytes per device in the memory model, the model's limit "
            f"{model_limit(memory_budget, written_memory_device(graph.memory_device, module)):,}): it is the plan "
            f"written; the budget does not bind")
        if not apply:   # apply_solution writes it and says what reevaluate_written said, once
            unwritten.restore()
            graph.warnings[:] = warnings
        return result, graph, None
    unwritten.restore()
    graph.warnings[:] = warnings
    peak = f"{over.written:,} bytes" if over is not None else "a figure it could not price"
    return None, graph, (f"the plan found without the memory budget needs {peak} per device when written, above "
                         f"the model's limit for the budget ({int(graph.model_limit):,}): searched under the budget")


def _unbudgeted_first(module, mesh, keep, memory_budget: int, time_limit, workers, seed, deterministic, progress,
                      pin_operands, reevaluate, apply, deadline, on_overrun, stop_build, hint, known,
                      local_moves, *, starved_floor: float = 0.0) -> SolveResult:
    """:func:`solve_module` under a ``memory_budget``: the plan found without it first, then a search under
    the budget only when that plan's written module exceeds the model's limit for it (``starved_floor``: as
    :func:`solve_module`'s, for the search without the budget where no plan can pass the budget, :func:`cannot_bind`:
    its plan is then the answer).

    1. The solve a call without the budget makes (its build, coarse start, known plans and hint; deterministic
       mode: the same work budget ``time_limit``, so the same plan; wall-clock mode: :data:`UNBUDGETED_SHARE`
       of ``time_limit`` per solve and a ``deadline`` of its own, that share of the time the call has, the rest
       kept for step 3), not written.  Right after its build, a budget whose refusal is certain
       (:func:`certain_refusal`) is refused (exit 3) before any solve.
    2. That plan is written and its written module priced (:func:`reevaluate_written`, the pins priced as XLA
       runs them): within the model's limit for the budget (:func:`hloshard.cost.memory.model_limit`) it is
       the answer, on the graph for the budget (:func:`hloshard.autoshard.build.with_memory_budget`: no new
       build).  So a budget that does not bind never changes the plan, and a budget only ever trades cost for
       memory.  (Before, the search started under the budget: the solver's figure for that plan, 79.7 / 63.5
       MiB, was above BERT's 72 MiB / Perceiver's 64 MiB limit although its written module was below, and the
       budgeted search's plan moved 2-3.7x the bytes under XLA; new user 20, finding 1.)
    3. Else the search under the budget (:func:`_solve_module` on the same graph with the budget), hinted by
       that plan (the solver repairs it), with ``time_limit`` again in deterministic mode (a second work
       budget), the time left before the ``deadline`` in wall-clock mode.  When step 1's answer was the coarse
       mesh's (the fine build stopped, :func:`_coarse_fallback`), step 3 searches the coarse graph under the
       budget (round 24; before, its own build, coarse and fine again, past the deadline).
    Not written when ``apply`` is False (the module is put back as it was, :class:`_Unwritten`)."""
    import time

    t0 = time.monotonic()
    free_limit = float(time_limit) if deterministic else max(MIN_SOLVE_SECONDS, UNBUDGETED_SHARE * float(time_limit))
    # wall-clock: the search without the budget ends by a deadline of its own, UNBUDGETED_SHARE of the time the call
    # has, as auto_shard's does; the rest is the budget's search's (new user 31 F13: with the whole deadline its
    # coarse and fine solves each took about half, 106 s of 120, and the budget's search had 4.6 s and exit 3)
    # -- unless no plan can pass the budget (a device's HBM taken as the budget, --device: the plan found without it
    # is the answer, and halving its time can only cost: T5 at --device tpu-v5e, its coarse solve 5.4 s instead of 77.5)
    free_deadline = deadline if deterministic or deadline is None or \
        cannot_bind(module, memory_budget, getattr(mesh, "memory_device", None)) else \
        t0 + UNBUDGETED_SHARE * max(0.0, deadline - t0)
    free = _solve_module(module, mesh, keep, None, free_limit, workers, seed, deterministic, progress, None,
                         pin_operands, False, False, free_deadline, on_overrun, stop_build, hint, known, None, False,
                         later_budget=memory_budget,
                         starved_floor=starved_floor if free_deadline is deadline else 0.0)
    result, graph, note = unbudgeted_within(free, module, mesh, pin_operands, memory_budget, apply, local_moves,
                                            None if deterministic else deadline)
    if result is not None:
        result.seconds_solve = time.monotonic() - t0 - result.seconds_build
        return result
    spent = time.monotonic() - t0
    rest = float(time_limit) if deterministic else max(MIN_SOLVE_SECONDS, float(time_limit) - spent)
    # on the graph the plan was found on, for the budget (no build), hinted by the plan: a coarse mesh's graph too
    # (round 24: it was built again, with a coarse build allowed past the deadline, and the fine build tried again)
    try:
        out = _solve_module(module, mesh, keep, memory_budget, rest, workers, seed, deterministic, progress, None,
                            pin_operands, reevaluate, apply, deadline, on_overrun, stop_build, list(free.choice),
                            known, graph, local_moves, nearest_written=True)
    except SolveFailed as exc:   # its limit is what the search without the budget left: said so, not as the user's
        share = f"the time limit of {_seconds(rest)} s"
        if rest != time_limit and exc.args and isinstance(exc.args[0], str) and share in exc.args[0]:
            exc.args = (exc.args[0].replace(share, f"the {_seconds(rest)} s the search without the budget left of "
                                                   f"the time limit of {_seconds(time_limit)} s"),) + exc.args[1:]
        raise
    out.graph.warnings.append(note)
    out.seconds_build += free.seconds_build
    out.seconds_solve = time.monotonic() - t0 - out.seconds_build
    if out.solution is not free.solution:
        solver = float(getattr(out.solution, "seconds", 0.0) or 0.0) + float(getattr(free.solution, "seconds", 0.0) or 0)
        out.solution = dataclasses.replace(out.solution, seconds=solver)
    return out


def _within_limit(graph: Graph, sol, choice: list, ev, limit, memory_budget, out_of_time: bool = False,
                  deterministic: bool = False, clock: str | None = None):
    """``(sol, choice, ev)`` kept when the evaluated peak ``ev.peak_memory`` is within ``limit`` (the
    model's limit for ``memory_budget``; None: no budget); else the cheapest plan known without a search
    or found by an earlier search of the graph under a looser limit or none (:func:`held`) that keeps it
    (:func:`_known_within`, a warning says so); else raises SolveFailed (``infeasible``, exit 3) naming both
    figures.  The one rule for a budgeted plan's memory, for the fine graph's plan and for the coarse
    fallback's (:func:`_coarse_fallback`).  ``clock`` (wall-clock mode, out of time): where the time went, in
    words, added to the error."""
    if limit is None or ev.peak_memory <= limit:
        return sol, choice, ev
    known_fit = _known_within(graph, limit, exclude=choice)
    if known_fit is not None:   # the search found nothing within the limit: a plan known without one does
        name, kchoice, kev, kobj = known_fit
        what = (f"a plan {name} (under a looser memory limit or none)" if name.startswith("found")
                else f"the {name} plan, known without a search")
        msg = (f"the search found no plan within the model's limit for the memory budget "
               f"({format_bytes(int(limit))}){' in time' if out_of_time else ''}; the plan written is "
               f"{what} ({format_bytes(kev.peak_memory)} predicted)")
        graph.warnings.append(msg)
        # the plan line names this plan, not the search's whose stats the solution kept (new user 30 F13: "plan
        # the search's (from the greedy start)" above a warning that the greedy plan was written)
        stats = {**(getattr(sol, "stats", None) or {}), "source": "known_within", "known_within": what}
        sol = dataclasses.replace(sol, strategies=list(kchoice), objective=int(kobj), status="feasible", stats=stats)
        return sol, list(kchoice), kev
    if not out_of_time:
        more = ""
    elif deterministic:   # new user 29 F2: the advice named the mode the call was already in
        more = (" and the work budget (deterministic mode's time limit) ended before a re-solve with them priced "
                "could end (a larger time limit may find one)")
    else:
        more = (" and the time limit ended before a re-solve with them priced could end"
                + (f" ({clock})" if clock else "")
                + " (a longer time limit, or deterministic mode's work budget, which the machine's load does not "
                  "shorten, may find one)")
    rescued = list(getattr(graph, "rescues", None) or [])
    if rescued:   # the rescues ran and found none within the limit either
        more += (f"; {len(rescued)} re-solve(s) on a work budget after the clock ({sum(rescued):.1f} s) found none "
                 f"within it either, and no plan an earlier search found or known without one keeps it")
    need = _accepting(graph, ev.peak_memory)   # both in bytes too: rounded, 2.0 MiB and 2.0 MiB read as equal
    device = getattr(graph, "memory_device", None)   # what the limit is made of depends on it (limit_words)
    err = _failed(f"memory budget {format_bytes(memory_budget)} ({int(memory_budget):,} bytes) per device: the plans "
                  f"found need "
                  f"{ev.peak_memory:,} bytes ({format_bytes(ev.peak_memory)}) per device with their "
                  f"communication buffers, above the model's limit for this budget ({int(limit):,} bytes, "
                  f"{format_bytes(int(limit))}: {limit_words(memory_budget, limit, device)}){more}; this "
                  f"states no lower bound: a plan that fits may exist; the nearest plan found is accepted from a "
                  f"budget of {format_bytes(need)} ({need:,} bytes) (a plan is accepted by its predicted peak "
                  f"and that margin: one that XLA runs within the budget is refused when its prediction is above "
                  f"the limit, so a budget only a few percent above a peak XLA measured can fail"
                  f"{over_words(ev.peak_memory, device)})",
                  "infeasible")
    # the plan nearest the limit, ``(choice, evaluation)``: the memory guard's next, higher limit may hold it
    # (hloshard.jax.guard._guard)
    err.closest = (list(choice), ev)
    raise err


#: The most plans over the graph's limit whose written modules a budget search that found none within it prices before
#: it refuses (:func:`_nearest_written`): the memory guard's band answer's bound (its ``BAND_WRITES``), each a
#: re-pricing of the module; a bound on the time, not a tuned figure.
NEAREST_WRITES = 3


def _nearest_written(graph: Graph, module, mesh, pin_operands: bool, memory_budget: int, limit: int, closest,
                     deadline: float | None, reprice: float):
    """The answer of a search under ``memory_budget`` that ended with no plan within the model's ``limit`` in the
    graph's figure and none known within it (:func:`_within_limit` raised; ``closest``: its ``(choice, evaluation)``
    nearest the limit): the plans nearest the limit -- ``closest`` and the plans the searches of ``graph`` found
    (:func:`held`), at most :data:`NEAREST_WRITES`, lowest graph peak first -- are each written into ``module`` and
    priced as written (:func:`reevaluate_written`, the figure :func:`apply_solution` holds a budget to), cheapest
    first, and ``module`` is put back as it was.  Returns ``("taken", name, choice, written peak, objective)`` for
    the first whose written module keeps ``limit``; ``("over", lowest written peak)`` when each priced is over it (the
    refusal then names the budget that accepts that written module, :func:`_accepting`); None when none was priced
    (wall-clock: less than one re-pricing, ``reprice``, left before ``deadline``; the write of a plan taken comes after
    it, as every plan's does, and ends the call late by up to one pricing).  Why (issue 24, round 36): the graph's
    figure and the written module's differ (communication buffers priced where the graph keeps each, pins): above it
    on Falcon by 20-35% (round 35), on new user 35's Perceiver 65.7 vs 55.9 MiB, on fresh35's remat step 4,204,620 vs
    3,352,652 B; below it on samples/transformer_train_step (20.7 vs 22.1 MiB).  So a budget a written plan keeps was
    refused (new user 35's F12: 28 MiB with the user's layout at 25.06 MiB by XLA), and the refusal's "accepted from"
    budget, read from the graph's figure, was 25% above the one the CLI accepts (fresh35 #3: 4,667,129 B named;
    3,721,444 B accepted on this branch).  Raises what :func:`reevaluate_written` raises but WrittenOverLimit."""
    import time

    unlimited = dataclasses.replace(graph.problem, usage_limit=None)
    seen, cands = set(), []
    for name, c in [("the search's nearest", list(closest[0]))] + [
            (f"found by an earlier search ({k + 1})", c) for k, c in enumerate(held(graph))]:
        if c is None or len(c) != graph.problem.num_nodes or tuple(c) in seen:
            continue
        seen.add(tuple(c))
        obj, ok = evaluate(unlimited, c)
        if ok:
            cands.append((int(evaluate_choice(graph, c).peak_memory), float(obj), name, list(c)))
    nearest = sorted(cands)[:NEAREST_WRITES]
    lowest = None
    for peak, obj, name, c in sorted(nearest, key=lambda t: (t[1], t[0])):
        if deadline is not None and deadline - time.monotonic() < float(reprice):
            break
        unwritten = _Unwritten(module)
        warnings = list(graph.warnings)
        trial = SolveResult(graph, Solution(strategies=list(c), objective=int(obj), bound=None, status="feasible",
                                            seconds=0.0), list(c), evaluate_choice(graph, c), 0.0, 0.0)
        try:
            _write(trial, module, pin_operands)
            reevaluate_written(trial, module, mesh, memory_budget)
            written = None if trial.written is None else int(trial.written.evaluation.peak_memory)
        except WrittenOverLimit as over:
            lowest = over.written if lowest is None else min(lowest, over.written)
            continue
        finally:
            unwritten.restore()
            graph.warnings[:] = warnings
        if written is not None:
            return ("taken", name, list(c), written, obj, peak)
    return None if lowest is None else ("over", lowest)


def _written_refusal(message: str, graph: Graph, graph_peak: int, written: int) -> str:
    """``message`` (:func:`_within_limit`'s refusal) with its "accepted from" budget read from ``written`` (the lowest
    written peak :func:`_nearest_written` priced, the figure a budget is checked in) instead of ``graph_peak`` (the
    nearest plan in the graph's figure), and saying so."""
    old_need = _accepting(graph, graph_peak)
    need = _accepting(graph, written)
    said = f"the nearest plan found is accepted from a budget of {format_bytes(old_need)} ({old_need:,} bytes)"
    now = (f"the nearest plans found, written and priced as `hloshard cost` prices the output (the figure the budget "
           f"is checked in), need {written:,} bytes ({format_bytes(written)}) per device at the least: accepted from a "
           f"budget of {format_bytes(need)} ({need:,} bytes)")
    return message.replace(said, now) if said in message else f"{message}; {now}"


def _nearest_taken(graph: Graph, sol, got):
    """``(sol, choice, evaluation)`` of :func:`_nearest_written`'s plan taken (``got``), with the warning naming both
    figures; a ``got`` of ``("over", peak)`` raises nothing here (the caller re-raises its refusal)."""
    _kind, name, choice, written, obj, peak = got
    graph.warnings.append(
        f"the search found no plan within the model's limit for the memory budget in the solver's figure (the plan "
        f"nearest it: {format_bytes(peak)} with its communication buffers); the plan written is {name}, whose "
        f"written module needs {written:,} bytes ({format_bytes(written)}) per device, within that limit -- the "
        f"written module is the figure the budget is checked in (hloshard cost of the output)")
    stats = {**(getattr(sol, "stats", None) or {}), "source": "nearest_written", "known_within": name}
    sol = dataclasses.replace(sol, strategies=list(choice), objective=int(obj), status="feasible", stats=stats)
    return sol, list(choice), evaluate_choice(graph, choice)


def _accepting(graph: Graph, peak: int) -> int:
    """The least memory budget (bytes per device) whose model limit keeps a plan that peaks at ``peak``
    (:func:`hloshard.cost.memory.budget_for_model_limit` on the graph's memory device): what a SolveFailed
    names, so that the user can tell the budget they would need (new user 21's DiT at 120 MiB: its nearest
    plan, 114.4 MiB predicted, is accepted from 127.0 MiB; XLA CPU peaks at 134.0 MiB on a 114.3 MiB one)."""
    return budget_for_model_limit(int(peak), getattr(graph, "memory_device", None))


def _known_within(graph: Graph, limit: int, exclude=None):
    """The cheapest plan known without a search (``graph.known``, the caller's, e.g.
    :func:`hloshard.jax.known.known_plans`; and :func:`hloshard.autoshard.trivial.trivial_plans`) or found by
    an earlier search (:func:`held`, named ``found by an earlier search (K)``) whose evaluated peak keeps
    ``limit`` (:func:`cheapest_within`), or None; ``exclude``: a plan not to price (the one just found over
    the limit).  A new
    user's T5 with ``memory_budget="12MiB"`` failed or passed by the machine's load: the search's plans
    needed 9,898,820 B against a 9,830,400 B limit when the time ended (round 14, finding 4)."""
    plans = [(f"known ({k + 1})", c, None) for k, c in enumerate(getattr(graph, "known", None) or [])]
    if graph.problem.usage_limit is not None:   # the budget's start (start.budget_start), cached on the graph
        plans.append(("greedy", budget_start(graph), None))
    skip = None if exclude is None else [int(x) for x in exclude]
    plans += [(f"found by an earlier search ({k + 1})", c, None) for k, c in enumerate(held(graph)) if c != skip]
    return cheapest_within(graph, limit, plans + [(n, c, None) for n, c in trivial_plans(graph)])


def _held_within(graph: Graph, limit: int):
    """The cheapest plan of :func:`held` ``(graph)`` (found by an earlier search) whose evaluated peak keeps
    ``limit``, as :func:`cheapest_within` gives it, or None."""
    return cheapest_within(graph, limit, [(f"found by an earlier search ({k + 1})", c, None)
                                          for k, c in enumerate(held(graph))])


def _rescued(graph: Graph, seconds: float) -> None:
    """Count a rescue (a re-solve on a work budget past the clock) and its wall seconds on ``graph``
    (``graph.rescues``: ``[seconds, ...]``; :func:`hloshard.jax.auto_shard` reports them, ``report["time"]``)."""
    graph.rescues = list(getattr(graph, "rescues", None) or []) + [round(float(seconds), 3)]


def _starved(graph: Graph, begin, rescue: float, workers: int, seed: int, progress):
    """The answer of a budgeted first solve that the clock ended without any plan (wall-clock mode; a loaded
    machine): the cheapest plan an earlier search of the graph found that keeps the model's limit
    (:func:`_held_within`; no search, the call ends on time), else one re-solve on a work budget of ``rescue``
    (no clock, as :func:`_fit_buffers`' rescues; hinted by ``begin``), else None (the caller raises).  A
    Solution of ``graph.problem``."""
    import time

    limit = getattr(graph, "model_limit", None) or graph.problem.usage_limit
    fit = _held_within(graph, limit) if limit is not None else None
    if fit is not None:
        name, choice, ev, obj = fit
        graph.warnings.append(f"the solver found no plan in its time under the memory budget; the plan written is "
                              f"a plan {name} ({format_bytes(ev.peak_memory)} predicted, within "
                              f"the model's limit {format_bytes(int(limit))})")
        return Solution(strategies=list(choice), objective=int(obj), bound=None, status="feasible", seconds=0.0)
    if rescue is None:   # no rescue past a wall-clock deadline (_solve_module)
        return None
    t = time.monotonic()
    try:
        sol = solve_graph(graph, time_limit=rescue, workers=workers, seed=seed, deterministic=True,
                          progress=progress, hint=begin)
    except SolveFailed:
        return None
    finally:
        _rescued(graph, time.monotonic() - t)
    obj, ok = evaluate(graph.problem, sol.strategies)
    return sol if ok else None


def cheapest_within(graph, limit: int | None, plans) -> tuple | None:
    """The cheapest of ``plans`` (``(name, choice, evaluation or None)``: choices of ``graph.problem``;
    an evaluation already made, :func:`hloshard.autoshard.evaluate.evaluate_choice`, is reused) that is
    feasible on ``graph.problem`` (:func:`hloshard.costgraph.evaluate`) and whose evaluated peak
    (communication buffers included) is at most ``limit`` bytes per device, as ``(name, choice,
    evaluation, objective in the problem's integer units)``; None when none is.  Used where a search
    ended without a plan within a limit: the memory budget's (:mod:`hloshard.autoshard.solve`) and the
    JAX memory guard's (:mod:`hloshard.jax.guard`).  ``limit`` None: no peak is asked (nor evaluated;
    the evaluation returned is then the one given, or None)."""
    best = None
    for name, c, ev in plans:
        if c is None or len(c) != graph.problem.num_nodes:
            continue
        obj, ok = evaluate(graph.problem, c)
        if not ok or (best is not None and obj >= best[3]):
            continue
        if limit is not None:
            ev = ev if ev is not None else evaluate_choice(graph, c)
            if ev.peak_memory > limit:
                continue
        best = (name, c, ev, obj)
    return best


def cheapest_start(problem, choices):
    """Of ``choices`` (each one strategy index per node of ``problem``, or None), the feasible one of least
    objective (:func:`hloshard.costgraph.evaluate`: finite costs, aliases kept, the memory limit kept); the
    first not-None one when none is feasible (the solver repairs it), None when all are None."""
    best, first = None, None
    for c in choices:
        if c is None or len(c) != problem.num_nodes:
            continue
        first = c if first is None else first
        obj, ok = evaluate(problem, c)
        if ok and (best is None or obj < best[0]):
            best = (obj, c)
    return first if best is None else best[1]


def _fit_buffers(graph: Graph, sol, choice, ev: Evaluation, limit: int, det_limit, solve_end: float, workers: int,
                 seed: int, deterministic: bool, progress, memory_budget, rescue: float | None = None,
                 rescues: int = 0):
    """Re-solve with the communication buffers priced until the plan keeps ``limit`` (the model's limit)
    with them, or the search ends.  Returns ``(solution, choice, evaluation, solver seconds spent, out
    of time)``; the evaluation is over ``limit`` when no plan kept it.

    Each round adds, as node memory of the solver's problem, the buffers live where the plan found
    exceeds the limit (:func:`hloshard.autoshard.edgememory.terms_at` of the points of
    :func:`_over_points`), each priced as :func:`~hloshard.autoshard.edgememory.priced_problem` does, an
    operand's resharding linearised at that plan; the buffers added before stay, re-linearised at the
    new plan.  The solver then prices what the plan's memory depends on instead of the loop guessing a
    lower node limit.  The first plan that keeps ``limit`` in the evaluation (the exact buffers of
    :func:`hloshard.autoshard.build.edge_buffers`) is the answer; the search ends after
    :data:`FIT_ROUNDS` rounds, when a round adds no buffer and the plan is the one its buffers were
    linearised at, or when the solver finds nothing (its refusal then states no bound).  In wall-clock mode each re-solve gets
    half of the solver's time left (the last what is left); deterministic: likewise of the work budget
    ``det_limit`` (what the first solve left of ``time_limit``).  ``rescue`` (wall-clock mode): when the
    clock leaves less than :data:`MIN_SOLVE_SECONDS` before a re-solve and no plan has kept the limit, that
    re-solve still runs, with a work budget of ``rescue`` and no clock, past ``solve_end`` if need be (at
    most :data:`RESCUE_ROUNDS` of them): whether a plan within the budget is found must not depend on the
    machine's load alone (tests/test_jax_time.py failed at load 5-12, rounds 19-20: a loaded build left
    the clock no re-solve and the call raised SolveFailed with a plan that fits one re-solve away; round
    21, CI: a rescue only before the first re-solve was not enough, the first re-solve ran with the clock's
    last second and its plan was still 4% over), as the coarse fallback's re-solve
    (:func:`_coarse_fallback`).  A re-solve on the clock that ends without any plan (a starved process) is the
    clock ending too: a rescue follows (round 22: new user 21's Falcon at 128 MiB, load 10, had one re-solve of
    1.8 s that found nothing, and the call raised SolveFailed while a 144 MiB call's plan peaked at 103.8 MiB by
    XLA).  No rescue runs while a plan an earlier search of the graph found keeps ``limit``
    (:func:`_held_within`): the loop ends on time and :func:`_within_limit` writes the cheapest such plan.
    The rescues are counted apart from the :data:`FIT_ROUNDS` and their wall seconds kept on the graph
    (``graph.rescues``); ``rescues``: those made before this call (a starved first solve's, :func:`_starved`),
    so that :data:`RESCUE_ROUNDS` bounds them all.  Every plan a re-solve finds is held (:func:`held`).  Each re-solve is hinted with the
    budget's start (:func:`hloshard.autoshard.start.budget_start`) or, when there is none, the plan nearest the
    limit."""
    import time

    base = graph.solver_problem
    terms = edge_memory_terms(graph)
    priced: list = []
    spent, out_of_time, last, det_given = 0.0, False, None, 0.0
    closest = (sol, choice, ev)   # the plan nearest the limit, reported when none keeps it
    rounds = 0
    rounds -= rescues   # ``rescues`` made before (the first solve's, _starved): counted apart from the rounds
    starved = False   # a re-solve on the clock ended without a plan: the next one is a rescue
    try:
        for _ in range(FIT_ROUNDS + RESCUE_ROUNDS):
            done = set(priced)
            new = [k for k in terms_at(terms, _over_points(graph, choice, ev, base.usage_limit), choice)
                   if k not in done]
            if not new and choice == last and not starved:
                break   # a fixed point: the buffers where it exceeds the limit are priced at this plan
            if rounds - rescues >= FIT_ROUNDS:
                break   # FIT_ROUNDS on the clock (the rescues are counted apart)
            last = choice
            priced.extend(new)
            # priced before the clock is read: the solver gets what is left when it starts
            graph.solver_problem = priced_problem(graph, base, [terms[k] for k in priced], choice)
            rescued = False
            if deterministic:   # the work left, at most DETERMINISTIC_FIT_ROUNDS of them (no clock)
                if rounds == DETERMINISTIC_FIT_ROUNDS or det_limit - det_given < MIN_SOLVE_SECONDS:
                    out_of_time = True
                    break
                left = det_limit - det_given
                given = left if rounds == DETERMINISTIC_FIT_ROUNDS - 1 else max(MIN_SOLVE_SECONDS, left / 2)
                det_given += given
            else:
                left = solve_end - time.monotonic()
                short = left < MIN_SOLVE_SECONDS or starved
                # no rescue past the clock while a plan an earlier search found keeps the limit: that one is
                # the answer (_within_limit), on time
                rescued = short and rescues < RESCUE_ROUNDS and rescue is not None and \
                    _held_within(graph, limit) is None
                rescues += rescued
                if short and not rescued:
                    out_of_time = True
                    break
                given = rescue if rescued else left if left < 2 * MIN_SOLVE_SECONDS else max(MIN_SOLVE_SECONDS, left / 2)
            rounds += 1
            starved = False
            t_round = time.monotonic()
            try:
                found = solve_graph(graph, time_limit=given, workers=workers, seed=seed,
                                    deterministic=deterministic or rescued,
                                    progress=progress, hint=budget_start(graph) or closest[1])
            except SolveFailed as exc:
                if rescued:
                    _rescued(graph, time.monotonic() - t_round)
                out_of_time = getattr(exc, "status", None) == "timeout"
                # a re-solve on the clock that found nothing is the clock ending, not the search: a rescue
                # follows (new user 21's Falcon at 128 MiB, load 10: its only re-solve had 1.8 s and found
                # nothing, and the call raised SolveFailed)
                starved = out_of_time and not deterministic and not rescued and rescue is not None \
                    and rescues < RESCUE_ROUNDS
                if starved:
                    continue
                break
            if rescued:
                _rescued(graph, time.monotonic() - t_round)
            spent += float(found.seconds or 0.0)
            c = list(found.strategies)
            _hold(graph, c)
            e = evaluate_choice(graph, c)
            if e.peak_memory <= limit:
                return found, c, e, spent, False
            if e.peak_memory < closest[2].peak_memory:
                closest = (found, c, e)
            choice, ev = c, e   # the next round linearises at this plan
    finally:
        graph.solver_problem = base
    if not deterministic and solve_end - time.monotonic() < MIN_SOLVE_SECONDS:
        out_of_time = True
    return closest + (spent, out_of_time)


def _over_points(graph: Graph, choice, ev: Evaluation, node_limit) -> list:
    """The schedule points where ``choice``'s usage with its communication buffers
    (:func:`hloshard.autoshard.evaluate.peak_memory`'s sum, before a TPU's VMEM credit) exceeds
    ``node_limit`` (the solver's limit); the evaluated peak's point when there is none."""
    p = graph.problem
    sizes = [int(u[int(c)]) for u, c in zip(p.node_usages, choice)]
    eiv, esz = edge_buffers(graph, choice)
    ivs = np.concatenate([np.asarray(p.intervals, dtype=np.int64).reshape(-1, 2),
                          np.asarray(eiv, dtype=np.int64).reshape(-1, 2)])
    times, usage = usage_profile(ivs, sizes + list(esz))
    if node_limit is not None and len(times):
        ends = np.append(times[1:], max(len(graph.schedule), int(times[-1]) + 1))
        over = [t for k in np.nonzero(usage > int(node_limit))[0] for t in range(int(times[k]), int(ends[k]))]
        if over:
            return over
    return [int(ev.peak_time)]


def _coarse_fallback(first, module, mesh, pin_operands: bool, memory_budget, apply: bool, on_overrun,
                     t0: float, fit=None, known=None, deadline: float | None = None,
                     later_budget: int | None = None) -> SolveResult:
    """The answer of :func:`solve_module` when the fine build passed the deadline: the coarse plan
    (``first.fallback``, :func:`hloshard.autoshard.coarse.coarse_first`) or, when cheaper on the coarse graph,
    a plan known without a search (:func:`cheaper_known`: ``known(graph)`` of the caller, e.g.
    :func:`hloshard.jax.known.known_plans`, and :func:`hloshard.autoshard.trivial.trivial_plans`, priced on the
    coarse graph; ``graph.known`` keeps the caller's list, so its report lists them), written as it is,
    priced on the coarse graph (not re-priced on the fine mesh without a budget: that would build the fine
    graph again), with a warning.  (New user 23's Swin, ``auto_shard(time_limit=60)``: the fine build cut,
    the coarse plan written at 31.66 M cost units, 20.57 MB of collectives by XLA, where the data-parallel
    plan it knows costs 25.3 M, 15.01 MB by XLA, and ``report["known_plans"]`` was empty.)
    Under a memory budget, a plan whose peak with its communication buffers and pins exceeds the model's
    limit is re-solved with them priced (:func:`_fit_buffers`, as the fine graph's plan is; ``fit``:
    ``(time_limit, deterministic, workers, seed, progress)`` of the call): in deterministic mode on a work
    budget of ``time_limit`` more (the coarse solve had the whole of it; the mode whose limit is work, not
    seconds); in wall-clock mode on the clock, until ``deadline`` less the re-pricing reserve
    (:data:`REPRICE_SHARE` x the coarse build), else, without a ``deadline``, on a work budget of
    ``(1 - FIRST_SOLVE_SHARE) * time_limit`` (two of the solver's minimum at least).  (Before round 24 the
    wall-clock re-solve ran on that work budget past the deadline too: a time limit was not a limit, new
    user 23's finding 1.)  The written module is priced (:func:`apply_solution`).  Measured: the 4 MiB decoder of
    tests/test_jax_time.py, deterministic ``time_limit=2`` (the fine build stopped by its work limit): the
    coarse plan's peak 4.19 MB against the limit's 3.78 MB; re-solved with a work budget of 0.4 of the limit
    it found nothing, of 1 a plan written at 2.8 MB.  ``later_budget``: as :func:`solve_module`'s, checked on
    the coarse graph (the graph the later search runs on) before the plan is written and priced."""
    import time

    cs = first.fallback
    graph = cs.graph
    if later_budget is not None and memory_budget is None:
        certain_refusal(graph, later_budget)   # the later search is on this graph: its refusal is certain
    graph.pin_operands = bool(pin_operands)   # its pins priced as written (build.copy_start), as the fine graph's
    refined = f" (refined internally to {'x'.join(map(str, mesh.shape))})" if mesh.is_refined else ""
    msg = (f"the cost graph for mesh {'x'.join(map(str, mesh.user_shape))}{refined} could not be built within "
           f"the time limit ({first.stopped}); the plan written is the coarse mesh's "
           f"({'x'.join(map(str, cs.mesh.shape))}, the same devices), whose cost and gap are those of the coarse "
           f"strategy space; its cost and memory are the written module's on the given mesh, as `hloshard cost` "
           f"prices the output")
    graph.warnings.append(msg)
    if on_overrun is not None:
        on_overrun(msg)
    graph.coarse_fallback = msg
    # the re-pricing reserve of a later search on this graph (a budget's, the memory guard's): its own build's
    coarse_build = float(getattr(first, "seconds_coarse_build", 0.0) or 0.0) or float(getattr(cs, "seconds", 0.0) or 0.0)
    graph.reprice_seconds = REPRICE_SHARE * coarse_build
    held(graph)
    graph.known = list(known(graph)) if known is not None else []
    sol = cs.solution
    choice = list(sol.strategies)
    _hold(graph, choice)
    t1 = time.monotonic()
    # the builds (coarse, and the fine one that stopped); the coarse solve is the summary's solve phase
    build = max(0.0, (t1 - t0) - float(getattr(sol, "seconds", 0.0) or 0.0))
    # a budget holds the coarse plan as it holds the fine one (new user 15: a coarse plan at 116% of the
    # model's limit was written, exit 0)
    limit = getattr(graph, "model_limit", None) if memory_budget is not None else None
    better = cheaper_known(graph, choice, limit)
    if better is not None:   # the coarse search's plan costs more than a plan known without a search
        name, kchoice, kobj, was = better
        graph.warnings.append(
            f"the coarse search's plan costs {was * graph.cost_scale:,.0f} on the coarse graph; {name}, known "
            f"without a search, costs {kobj * graph.cost_scale:,.0f} there: it is the plan written")
        sol = dataclasses.replace(sol, strategies=list(kchoice), objective=int(kobj), status="feasible")
        choice = list(kchoice)
    ev = evaluate_choice(graph, choice)
    out_of_time = False
    if limit is not None and ev.peak_memory > limit and fit is not None:
        time_limit, deterministic, workers, seed, progress = fit
        if deterministic or deadline is None:   # a work budget: no clock is read
            work = float(time_limit) if deterministic else \
                max(2 * MIN_SOLVE_SECONDS, (1.0 - FIRST_SOLVE_SHARE) * float(time_limit))
            fitted = _fit_buffers(graph, sol, choice, ev, limit, work, time.monotonic(), workers, seed, True,
                                  progress, memory_budget)
        else:   # wall-clock: until the deadline, less the re-pricing of the written plan
            fitted = _fit_buffers(graph, sol, choice, ev, limit, None, deadline - graph.reprice_seconds, workers, seed, False,
                                  progress, memory_budget)
        sol, choice, ev, spent, out_of_time = fitted
        sol = dataclasses.replace(sol, seconds=float(getattr(cs.solution, "seconds", 0.0) or 0.0) + spent)
    sol, choice, ev = _within_limit(graph, sol, choice, ev, limit, memory_budget, out_of_time,
                                    bool(fit is not None and fit[1]))
    result = SolveResult(graph, sol, choice, ev, build, 0.0, plan_source=(
        f"{name}, known without a search, on the coarse mesh {'x'.join(map(str, graph.mesh.shape))}"
        if better is not None else f"the coarse mesh's plan ({'x'.join(map(str, graph.mesh.shape))}; this mesh's "
                                   f"graph was not built)"))
    if apply:
        # priced as written, on the given mesh as `hloshard cost` prices the output: the report describes the
        # written module (cost, peak, collectives), not the coarse graph's choice (new user 25, finding 8:
        # Gemma3's summary said 31.3 MiB where `cost` of the output says 23.6 MiB); with every sharding written
        # the fine mesh's build is small
        apply_solution(result, module, mesh, pin_operands, memory_budget, reevaluate=True)
    result.seconds_solve = time.monotonic() - t1
    return result


def replicate_all(module) -> list:
    """Annotate every instruction of every computation of ``module`` replicated (a tuple: a tuple of replicated
    leaves); returns ``[(instruction, its sharding before)]`` to put back.  (The same writing as
    :func:`hloshard.autoshard.evaluate.replicated_evaluation`'s, which restores the module at once.)"""
    saved = [(i, i.sharding) for i in module.all_instructions()]
    for instr, _ in saved:
        if instr.shape.is_tuple:
            instr.sharding = HloSharding.tuple([HloSharding.replicated()] * max(1, len(instr.shape.leaves())))
        else:
            instr.sharding = HloSharding.replicated()
    return saved


def known_without_graph(module, mesh, stopped: SolveFailed, given: CostResult | None = None,
                        memory_budget: int | None = None) -> SolveResult | None:
    """The plan written when no cost graph of any mesh could be built within the time limit (``stopped``: the
    :class:`~hloshard.autoshard.build.BuildStopped` the build raised; round 38, new user 37's F16: Qwen3.5 on
    ``--device tpu-v5e --time-limit 120`` exited 3 with nothing written, the coarse build cut at 78 of 4,488 edges):
    a plan known without a search, priced as written -- ``given``, the input's own layout as ``hloshard cost`` priced
    it (its :class:`CostResult`; the module is left as it is), else every instruction replicated (written into
    ``module`` and priced by :func:`evaluate_module` with every sharding fixed: a build of one strategy per node, a
    small part of a strategy build's pairs).  Returns a :class:`SolveResult` on the pricing's graph, its status
    ``"feasible"`` with no bound, ``plan_source`` and a warning saying that nothing was searched and why; None where
    the plan's predicted peak is above ``memory_budget`` (bytes per device; the refusal stands) or the pricing
    fails.  The pricing is not bounded by the time limit, which has passed: the command ends late by it."""
    import time

    why = str(stopped.args[0]) if stopped.args else str(stopped)
    t0 = time.monotonic()
    if given is not None:
        priced, what = given, "the input's own layout, as given"
    else:
        saved = replicate_all(module)
        try:
            priced = evaluate_module(module, mesh)
        except SolveFailed:
            for instr, sh in saved:
                instr.sharding = sh
            return None
        what = "every instruction replicated (each device computes the whole step)"
    if memory_budget is not None and int(priced.evaluation.peak_memory) > int(memory_budget):
        if given is None:
            for instr, sh in saved:
                instr.sharding = sh
        return None
    graph = priced.graph
    msg = (f"nothing was searched: {why}; the plan written is {what}, known without a search and priced as written "
           f"(its cost and peak are `hloshard cost` of the output; no gap or bound: the strategy space was not "
           f"built); a larger time limit, or a mesh of fewer devices, lets the search run")
    graph.warnings.append(msg)
    choice = list(priced.choice)
    sol = Solution(strategies=choice, objective=None, bound=None, status="feasible", seconds=0.0)
    result = SolveResult(graph, sol, choice, priced.evaluation, 0.0, time.monotonic() - t0, written=priced,
                         plan_source=f"{what}: known without a search (no cost graph was built in the time)")
    return result


def cheaper_known(graph: Graph, choice, limit: int | None = None):
    """A plan known without a search that costs less than ``choice`` on ``graph.problem``: of the caller's
    known plans (``graph.known``, e.g. :func:`hloshard.jax.known.known_plans`' replicated and data-parallel
    plans) and :func:`hloshard.autoshard.trivial.trivial_plans` (replicated; data parallel over the data axis
    and over all axes), the cheapest feasible one (:func:`hloshard.costgraph.evaluate`: finite, ties kept, the
    problem's memory limit kept) that, under a ``limit`` (the model's limit, bytes per device), peaks within it
    with its communication buffers (:func:`hloshard.autoshard.evaluate.evaluate_choice`).  Returns
    ``(name, choice, objective, choice's objective)`` in the problem's integer units, or None when ``choice``
    is feasible and costs no more than every such plan.  The rule that keeps a search's answer from costing
    more than a plan it knows where the search did not start from them (the coarse fallback: its coarse
    solve ran before the known plans were priced, :func:`_coarse_fallback`)."""
    obj, ok = evaluate(graph.problem, choice)
    known = getattr(graph, "known", None) or []
    plans = [(f"the plan known before the search ({k + 1} of {len(known)})", c, None) for k, c in enumerate(known)]
    plans += [(f"the {name} plan", c, None) for name, c in trivial_plans(graph)]
    best = cheapest_within(graph, limit, plans)
    if best is None or (ok and best[3] >= obj):
        return None
    name, c, _, o = best
    return name, list(c), int(o), int(obj)


def apply_solution(result: SolveResult, module, mesh, pin_operands: bool = False, memory_budget: int | None = None,
                   reevaluate: bool = True, local_moves: bool = False, deadline: float | None = None) -> SolveResult:
    """Write ``result``'s choice into ``module`` (the module its graph was built from) as ``sharding=``,
    insert the operand and loop-state pins when ``pin_operands`` (see :func:`solve_module`), and with
    ``reevaluate`` price the written module (:func:`reevaluate_written`; ``local_moves`` / ``deadline``:
    its post-solve pass).  ``result.operand_pins``: ``(pin, operand)`` for each operand pin written
    (:func:`hloshard.strategy.realize.operand_pins`, the operand as it was before the pin).

    Under a ``memory_budget`` with ``reevaluate``, when the written module (its pins priced as XLA runs them,
    :func:`hloshard.cost.liveness.resharding_pin`) exceeds the model's limit although the solver's graph
    priced the plan within it, the module is put back as it was before the plan was written
    (:class:`_Unwritten`) and the cheapest plan known without a search whose *written* module keeps the
    limit is written instead (:func:`_written_within`; a warning names both figures); only when none does
    is SolveFailed raised (exit 3).  Returns ``result``."""
    import time

    t0 = time.monotonic()
    unwritten = _Unwritten(module) if reevaluate and memory_budget is not None else None
    _write(result, module, pin_operands)
    try:
        if reevaluate:
            try:
                reevaluate_written(result, module, mesh, memory_budget, local_moves=local_moves, deadline=deadline)
            except WrittenOverLimit as over:
                if unwritten is None or not _written_within(result, module, mesh, pin_operands, memory_budget,
                                                            unwritten, over):
                    raise
    finally:
        result.seconds_reprice += time.monotonic() - t0
    return result


def _write(result: SolveResult, module, pin_operands: bool) -> None:
    """Write ``result.choice`` into ``module`` as ``sharding=`` and, with ``pin_operands``, its operand,
    loop-state and transpose pins (:mod:`hloshard.strategy.realize`)."""
    graph, choice = result.graph, result.choice
    apply_choice(graph, choice)
    # A dot / convolution / gather / scatter is partitioned by XLA from its operands' layouts, not from
    # the plan: pin each operand the chosen strategy reshards with a Sharding custom-call in the planned
    # layout, so XLA does the planned resharding (hloshard.strategy.realize; measured there and in
    # tests/test_realize_oracle.py)
    pins = operand_pins(graph.nodes, choice, graph.ctx) if pin_operands else []
    result.operand_pins = [(p, p.user.operands[p.index]) for p in pins]
    graph.pins = insert_pins(pins) if pin_operands else 0
    # the same for a while body's reads of its loop state, whose written sharding does not reach XLA
    # through StableHLO (hloshard.strategy.realize.insert_loop_state_pins; measured there)
    if pin_operands:
        graph.loop_pins = insert_loop_state_pins([i for i in graph.schedule if i.opcode == "while"])
        # and a dot's layout against the TPU compiler folding transpose(dot) before it partitions
        insert_transpose_pins([i for c in module.computations for i in c.instructions], getattr(graph, "memory_device", None))


class _Unwritten:
    """``module`` as it is now (before a plan is written into it): its computations and header attributes,
    each computation's instructions, root and names, each instruction's operands, users and attributes (its
    sharding among them).
    :meth:`restore` puts it back, dropping the pins a plan inserted, so that another plan can be written
    into the same instructions (the cost graph refers to them by identity)."""

    def __init__(self, module):
        self.module = module
        self.module_comps = (list(module.computations), dict(module._by_name), dict(module.attrs))
        self.comps = [(c, list(c.instructions), c.root, dict(c._by_name)) for c in module.computations]
        self.instrs = [(i, list(i.operands), list(i.users), dict(i.attrs))
                       for c in module.computations for i in c.instructions]

    def restore(self) -> None:
        comps, names, attrs = self.module_comps
        self.module.computations, self.module._by_name, self.module.attrs = list(comps), dict(names), dict(attrs)
        for c, instrs, root, names in self.comps:
            c.instructions, c.root, c._by_name = list(instrs), root, dict(names)
        for i, ops, users, attrs in self.instrs:
            i.operands, i.users, i.attrs = list(ops), list(users), dict(attrs)


def _written_within(result: SolveResult, module, mesh, pin_operands: bool, memory_budget: int, unwritten,
                    over: "WrittenOverLimit") -> bool:
    """The fallback of :func:`apply_solution` when the written module of ``result``'s plan exceeds the model's
    limit for ``memory_budget``: the plans known without a search (``graph.known`` and
    :func:`hloshard.autoshard.trivial.trivial_plans`, not the budget's greedy start (below); those feasible
    on the graph's problem but for its memory limit, not the plan just written), cheapest first, are each
    written into the
    module as it was (``unwritten``) and priced as written (:func:`reevaluate_written`); the first whose written
    module keeps the limit replaces ``result``'s solution, choice, evaluation and written figures, with a
    warning naming both peaks.  False (``module`` then holds the plan of ``over``, priced) when none keeps it."""
    graph = result.graph
    first = list(result.choice)
    # not the budget's greedy start: its written module is one the memory model is not measured on, and it
    # was measured far below XLA (scan_mlp_train_step, 80% of GSPMD's XLA peak: 2,297,892 B predicted,
    # XLA 3,241,148 B, above the budget of 2,687,260 B; benchmarks/budget_loop.py, round 20)
    plans = [(f"known ({k + 1})", c) for k, c in enumerate(getattr(graph, "known", None) or [])]
    plans += list(trivial_plans(graph))
    unwritten.restore()   # the graph's evaluations below read the module as the graph was built (no pins of ``over``)
    # the plans earlier searches found (:func:`held`), those the graph's evaluation puts within the limit only:
    # each candidate here costs a re-pricing of the written module
    plans += [(f"found by an earlier search ({k + 1})", c) for k, c in enumerate(held(graph))
              if evaluate_choice(graph, c).peak_memory <= over.limit]
    ranked, seen = [], {tuple(first)}
    # feasible but for memory: the written module's price is the judge of that (the graph's node memory can
    # over-count a plan whose written module keeps the limit: scan_mlp_train_step's plan for 100% of GSPMD's
    # XLA peak, 2,379,812 B written, is over the node limit of the 80% budget, 2,420,954 B)
    unlimited = dataclasses.replace(graph.problem, usage_limit=None)
    for name, c in plans:
        if c is None or len(c) != graph.problem.num_nodes or tuple(c) in seen:
            continue
        seen.add(tuple(c))
        obj, ok = evaluate(unlimited, c)
        if ok:
            ranked.append((obj, len(ranked), name, list(c)))
    limit = over.limit
    saved = (result.solution, result.choice, result.evaluation, list(graph.warnings))
    for obj, _k, name, c in sorted(ranked):
        unwritten.restore()
        graph.warnings[:] = saved[3]
        result.solution = dataclasses.replace(saved[0], strategies=list(c), objective=int(obj), status="feasible")
        result.choice, result.evaluation = c, evaluate_choice(graph, c)
        _write(result, module, pin_operands)
        try:
            reevaluate_written(result, module, mesh, memory_budget)
        except WrittenOverLimit:
            continue
        def b(n):
            return f"{int(n):,} bytes ({format_bytes(int(n))})"
        what = (f"a plan {name}" if name.startswith("found")
                else f"the {name} plan, known without a search,")
        graph.warnings.append(
            f"the written module of the solver's plan needs {b(over.written)} per device (its pins priced as XLA "
            f"runs them), above the model's limit for the memory budget ({b(limit)}), although the solver's "
            f"graph priced it at {b(over.solver)}; the plan written is {what} "
            f"whose written module needs {b(result.written.evaluation.peak_memory)}")
        result.replaced_by = (f"{what.rstrip(',')}, whose written module keeps the memory budget's limit where the "
                              f"solver's did not (the warning below)")
        return True
    # none keeps it: the solver's plan written again, as the error describes it
    unwritten.restore()
    graph.warnings[:] = saved[3]
    result.solution, result.choice, result.evaluation = saved[0], saved[1], saved[2]
    _write(result, module, pin_operands)
    return False


def reevaluate_written(result: SolveResult, module, mesh, memory_budget: int | None = None,
                       local_moves: bool = False, deadline: float | None = None) -> SolveResult:
    """Set ``result.written`` to ``evaluate_module`` of the written ``module`` (what ``hloshard cost``
    says of the output; None only when that finds nothing in its own time limit, which a warning says)
    and add a warning, naming both figures, when its cost or its peak memory per device differs from the
    solver's own.  The report always describes the written module when it could be priced.  Raises
    SolveFailed (exit 3) when the written module's peak exceeds the model's limit for ``memory_budget``
    (:func:`hloshard.cost.memory.model_limit`: XLA's peak then stays within the budget by the measured
    model error).  ``local_moves``: then lower the written module by local moves
    (:func:`hloshard.autoshard.local.improve_written`, ``deadline`` as there; ``result.local_moves``: the
    annotations changed), with ``memory_budget`` only when the written module keeps the model's limit, each round
    held to it (``peak_limit``; not on a TPU, whose heap spill that limit does not hold).  Returns ``result``."""
    graph, ev = result.graph, result.evaluation
    # A sharding does not name everything the strategy decided (e.g. whether a dot's replicated output
    # is all-reduced or its operand all-gathered); ``hloshard cost`` of the output takes the cheapest
    # choice consistent with the written shardings, which can beat a time-limited solve.  Evaluate the
    # written module the same way so the reported objective is exactly what ``cost`` says of the output.
    import time

    t_price = time.monotonic()
    try:
        written = evaluate_module(module, mesh)
    except SolveFailed:  # the re-evaluation found nothing in its own time limit: report the solver's choice
        written = None
        graph.warnings.append("the written shardings could not be re-evaluated in time; the objective is the "
                              "solver's own and hloshard cost of the output may be lower")
    # what a re-pricing of this module really costs, on this machine at this load: the reserve of a later search
    # on this graph (:func:`measured_reserve`; a budget's search after the plan found without it)
    graph.reprice_measured = max(float(getattr(graph, "reprice_measured", 0.0) or 0.0), time.monotonic() - t_price)
    result.local_moves = []
    # the device for the written plan (a TPU's data margin dropped where its temporaries fit VMEM)
    device = None if memory_budget is None else written_memory_device(getattr(mesh, "memory_device", None), module)
    if written is not None and local_moves and memory_budget is None:
        written = _moved(result, module, mesh, written, deadline, None)
    elif written is not None and local_moves and not is_tpu_device(device) \
            and written.evaluation.peak_memory <= model_limit(memory_budget, device):
        # under a budget the moves keep the budget's limit (a round whose module peaks above it is undone:
        # improve_written's peak_limit); fresh-clone check 35, item 6: a 120% budget cost the MLP sample +6.6% of
        # objective because the moves were skipped, although their plan peaked under the limit.  Not on a TPU,
        # whose heap spill (spilled_heap_excess) the moves' peak_limit does not hold
        written = _moved(result, module, mesh, written, deadline, model_limit(memory_budget, device))
    # a predicted spilled heap beyond the margin's heap allowance counts against the limit (round 25)
    need = None if written is None else \
        written.evaluation.peak_memory + spilled_heap_excess(written.evaluation.tpu_heap, device)
    if written is not None and memory_budget is not None and need > model_limit(memory_budget, device):
        # a budget is a promise about the written module: never report the solver's figure instead
        limit = model_limit(memory_budget, device)
        raise WrittenOverLimit(
            f"memory budget {format_bytes(memory_budget)} per device is not kept by the written "
            f"module: it needs {format_bytes(need)} per device in the memory "
            f"model, above its limit for this budget ({format_bytes(limit)}, cost.memory.model_limit; the "
            f"solver's choice: {format_bytes(ev.peak_memory)}), and no plan known without a search keeps it "
            f"when written", int(need), int(ev.peak_memory), int(limit))
    if written is not None and memory_budget is not None and device is not getattr(mesh, "memory_device", None):
        result.written_model_limit = model_limit(memory_budget, device)   # the limit the written plan kept
    if ev.cached > 1e-9 * max(1.0, abs(ev.total)):
        graph.warnings.append(reshard_cache_warning(ev.total + ev.cached, ev.cached))
    if written is not None:
        if abs(written.total_cost - ev.total) > 1e-9 * max(1.0, abs(ev.total)):
            graph.warnings.append(f"the solver's choice costs {ev.total:,.2f}; the written shardings cost "
                                  f"{written.total_cost:,.2f} with the cheapest strategies consistent with them "
                                  f"(as hloshard cost evaluates the output)")
        peak = int(written.evaluation.peak_memory)
        if peak != int(ev.peak_memory):
            a, b = format_bytes(peak), format_bytes(int(ev.peak_memory))
            if a == b:   # the rounded figures read equal: the bytes beside them (one unit either way: fresh33)
                a, b = f"{a} ({peak:,} bytes)", f"{b} ({int(ev.peak_memory):,} bytes)"
            graph.warnings.append(f"the written module peaks at {a} per device (as hloshard cost "
                                  f"evaluates it); the solver's own figure is {b}")
    result.written = written
    return result


def _moved(result: SolveResult, module, mesh, written, deadline, peak_limit, pair_limit=None, stats=None):
    """``written`` (the CostResult of ``module`` as written with ``result``'s plan) lowered by local moves
    (:func:`hloshard.autoshard.local.improve_written`: ``deadline``, ``peak_limit``, ``pair_limit``, ``stats``
    as there; the kept user shardings, ``graph.ctx.fixed``, stay); ``result.local_moves`` set, a warning when
    any was made."""
    before = written.total_cost
    written, result.local_moves = improve_written(module, mesh, written, deadline=deadline, peak_limit=peak_limit,
                                                  keep_ids={id(i) for i in result.graph.ctx.fixed},
                                                  pair_limit=pair_limit, stats=stats)
    if result.local_moves:
        pinned = pin_resharded_convolution_operands(written)   # moves write no pins (new user 34 F12)
        if pinned:   # the module now reads them: its price is that of the pinned module
            result.operand_pins += pinned
            written = evaluate_module(module, mesh)
        result.graph.warnings.append(
            f"local moves changed {len(result.local_moves)} annotations of the written module (outside the "
            f"solver's space): its cost {before:,.2f} -> {written.total_cost:,.2f}")
    return written


def improve_applied(result: SolveResult, module, mesh, deadline: float | None = None,
                    peak_limit: int | None = None, pair_limit: int | None = None,
                    stats: dict | None = None) -> SolveResult:
    """Lower ``hloshard cost`` of ``module`` as written with ``result``'s plan (:func:`apply_solution` with
    ``reevaluate``: ``result.written`` is its price) by ``solve``'s post-solve local moves
    (:func:`hloshard.autoshard.local.improve_written`), each round kept only when the moved module's
    predicted peak (bytes per device, the memory model of ``hloshard cost``) is at most the written
    module's, or ``peak_limit`` when that is higher (the caller's promise, e.g. the memory guard's limit:
    :func:`hloshard.jax.auto_shard`), and never above the model's limit of the graph's memory budget
    (``graph.model_limit``) -- so every memory promise the plan kept still holds.  ``deadline``: a ``time.monotonic()``
    instant no candidate starts after (None: deterministic, one re-solve per node at most; ``pair_limit``: the
    most resharding pairs the moves price, ``stats`` their figures: ``improve_written``'s).  The moves
    change intermediate annotations and ``solve``'s own pins only (never the entry parameters, the root
    or a kept sharding: :func:`hloshard.autoshard.local.freeable`), so the tied state's layouts stay;
    ``result.operand_pins`` is re-read from the module (:func:`hloshard.strategy.realize.as_written`).
    Sets ``result.written`` and ``result.local_moves``; :func:`hloshard.jax.auto_shard` calls it.
    Returns ``result`` (unchanged when it has no written price)."""
    if result.written is None:
        return result
    before = int(result.written.evaluation.peak_memory)
    limit = before if peak_limit is None else max(before, int(peak_limit))
    budget_limit = getattr(result.graph, "model_limit", None)
    if budget_limit is not None:
        limit = max(before, min(limit, int(budget_limit)))
    result.written = _moved(result, module, mesh, result.written, deadline, limit, pair_limit, stats)
    if result.local_moves:
        result.operand_pins = [(as_written(p), op) for p, op in result.operand_pins]
    return result


# --------------------------------------------------------------------------------------------------
# The Pareto step: a plan without a memory budget does not give away memory for nothing

#: The cost a Pareto step may add for a lower peak, as a share of the cheapest plan found: the
#: tolerance hloshard promises between its predicted collective bytes and XLA's (within 10%, issue 24;
#: checked by tests/test_jax_e2e.py, tests/test_attention_heads.py, tests/test_pins_tpu.py).  A plan
#: whose predicted cost is within it of the cheapest is not shown to move more bytes under XLA; its
#: lower peak is kept.  Not tuned on any model.
PARETO_SHARE = 0.10
#: The lowest limit a Pareto step asks for, as a multiple of the least node-memory peak of the graph
#: (:func:`hloshard.autoshard.report.minimum_peak`): XLA's auto-sharding sets its memory budget, when
#: none is given, to its memory lower bound (the same bound) times ``memory_budget_ratio``, 1.1 by
#: default (``AutoShardingOption``, xla/hlo/experimental/auto_sharding).
PARETO_FLOOR_RATIO = 1.1
#: The most re-solves of a Pareto step: first the highest limit worth asking for (the least saving that
#: counts), then, while plans are taken, bisection steps towards the floor's limit (a bound on the loop,
#: not a tuned figure; each gets half of the step's time left, the last the rest).  One: every solve
#: under a memory limit costs a presolve and a model of its own (three took keras-hub Gemma's
#: ``auto_shard`` from 35 to 222 s at load 5-9 and doubled the JAX tests' time, round 16); the three
#: (from the floor's limit upwards) took nothing at the floor's limit on any model measured, and reached a
#: lower peak than the one solve on tunix's Llama 3 and keras-hub llama_small (XLA 10.90 / 10.92 against
#: 11.36 / 11.44 MB, for 0.11 / 0.07 MB more moved; BENCHMARKS.md, "helper guard, round 16").
PARETO_STEPS = 1


def pareto_step(result: SolveResult, time_limit: float, best_cost: float | None = None, seed: int = 0,
                workers: int = 2, deterministic: bool = False, deadline: float | None = None,
                searched_within: int | None = None, written_peak: int | None = None):
    """``(result, info)``: a plan of ``result.graph`` (the graph of an unbudgeted solve, its plan not yet
    applied) with a lower predicted peak than ``result``'s at a cost within :data:`PARETO_SHARE` of
    ``best_cost`` (cost units; default ``result``'s own cost), else ``result`` itself.

    The rule (for a solve without a memory budget; :func:`hloshard.jax.auto_shard` applies it after its
    memory guard, ``hloshard solve`` does not): the solver minimises collective cost only, and among
    plans of nearly equal cost their peaks can differ by a third (tunix's Llama 3, round 16).  The step
    re-solves ``result.graph`` with a memory limit, first at the highest limit worth asking for (below),
    then, while plans are taken, bisecting towards :data:`PARETO_FLOOR_RATIO` times the least node-memory
    peak (XLA auto-sharding's default budget: no lower limit is asked) (at most :data:`PARETO_STEPS`
    solves, each started from the best plan so far).  A plan is taken when it is cheaper than the best
    plan so far at no higher evaluated peak, or
    when its cost is at most ``(1 + PARETO_SHARE) * best_cost`` and its evaluated peak (communication
    buffers included, :func:`hloshard.autoshard.evaluate.evaluate_choice`) is below the best plan's read
    at the memory model's measured worst over-estimate of XLA
    (:func:`hloshard.cost.memory.xla_lower_bound`): a smaller predicted saving is no evidence that XLA's
    peak is lower (the memory guard's rule, :mod:`hloshard.jax.guard`; measured: keras-hub's 4-layer
    Gemma, predicted 166.3 -> 144.5 MB, took XLA's peak from 132.8 to 136.6 MB, round 16), and that
    bound is also the highest limit asked for.  Each solve is
    one call of the solver on :func:`hloshard.autoshard.build.with_memory_budget` of the graph (no
    build); the limit enters as the budget whose model limit it is
    (:func:`hloshard.cost.memory.budget_for_model_limit`).

    ``time_limit``: seconds (a work budget with ``deterministic``) for the whole step, each solve half
    of what is left (the last all of it), at least :data:`MIN_SOLVE_SECONDS`; with a ``deadline``
    (``time.monotonic()`` instant, wall-clock mode) no solve starts with less than
    :data:`MIN_SOLVE_SECONDS` before it.  ``searched_within``: a limit (bytes per device, the model's) that a
    search of the same graph found no plan within just before (the memory guard's re-solve,
    :func:`hloshard.jax.guard.guard_plan`, with at least this step's time): the step then asks no limit at
    or below it, since each of its solves would search a smaller space from a costlier start with less
    time (a rule of thumb, not a proof: the guard's search ended without a plan, it did not prove there is
    none); ``info["note"]`` says so.  Measured: keras-hub ``gemma_small``'s step asked 11.27 MB after the
    guard had found nothing within 11.82 MB, and its plan (12.0 MB) was not taken: one solve, 8.5 s of
    CPU, of the call's five (round 19).  ``info``: ``{"applied", "floor_bytes" (least node-memory
    peak), "share", "peak_before", "cost_before", "cost_bound", "tried": [{"limit_bytes", "peak_bytes",
    "cost", "taken", "seconds" (the solver's wall seconds)} or {"limit_bytes", "failed"}], "note"}`` (peaks
    predicted, bytes per device; costs in cost units).

    ``written_peak``: the predicted peak of ``result``'s written module (bytes per device, every communication
    buffer and operand pin priced: the figure the memory guard judges a plan by, :func:`hloshard.jax.guard._guard`'s
    ``plan_written_peak_bytes``).  When it is at or below the highest limit worth asking (``hi`` above, a limit on
    the graph's figure) no limit is asked (``info["skipped"]``): the plan already peaks within that limit in the
    figure it is judged by, so no plan the step could take there is evidence of a lower peak than it (the step's own
    rule: a saving within the model's measured over-estimate is none), and the plan the step would take is judged
    by the other figure.  Why (issue 24, round 37): keras-hub's 4-layer Gemma (deterministic ``time_limit=10``) is
    written at 135,757,120 B against 165,917,504 B in the graph's figure; the step asked 143,032,331 B, spent
    11.3 s of the guard's 28.3 s wall at load 17 (10.5 s of solver) and its plan (150,201,152 B) was not taken --
    as on every call measured since the guard judged written modules (round 23)."""
    import time

    graph = result.graph
    ev0 = result.evaluation
    best_cost = float(ev0.total if best_cost is None else min(best_cost, ev0.total))
    bound = (1.0 + PARETO_SHARE) * best_cost
    floor = minimum_peak(graph.problem)[0]
    info = {"applied": False, "floor_bytes": int(floor), "share": PARETO_SHARE,
            "peak_before": int(ev0.peak_memory), "cost_before": round(float(ev0.total), 6),
            "cost_bound": round(bound, 6), "tried": [], "note": None}
    if getattr(graph, "memory_budget", None) is not None:   # the user's (an implicit limit is not one)
        info["note"] = "a memory budget is set: the budget states the trade"
        return result, info
    device = getattr(graph, "memory_device", None)
    best = result
    # the highest limit worth asking for: below the plan's peak by the model's measured over-estimate
    lo, hi = int(floor * PARETO_FLOOR_RATIO), xla_lower_bound(int(ev0.peak_memory), device)
    at = hi
    given_total = 0.0
    if written_peak is not None and int(written_peak) <= hi:
        info["skipped"] = True
        info["written_peak_bytes"] = int(written_peak)
        info["note"] = (f"no limit asked: the plan's written module peaks at {format_bytes(int(written_peak))}, at or "
                        f"below {format_bytes(hi)}, the highest limit worth asking in the graph's figure (its "
                        f"{format_bytes(int(ev0.peak_memory))} read at the model's measured over-estimate)")
        return result, info
    if searched_within is not None and hi <= int(searched_within):
        info["note"] = (f"no limit asked: {format_bytes(hi)} is at or below {format_bytes(int(searched_within))}, "
                        f"which the search just before found no plan within")
        return result, info
    for k in range(PARETO_STEPS):
        if at <= lo and k:   # nothing lower worth asking
            break
        if lo >= hi:
            info["note"] = "the floor's limit is not below the highest limit worth asking: no room"
            break
        left_budget = float(time_limit) - given_total
        if deadline is not None and not deterministic:
            left_budget = min(left_budget, deadline - time.monotonic())
        if left_budget < MIN_SOLVE_SECONDS:
            info["note"] = f"the step's time ended after {k} solve(s)"
            break
        give = left_budget if k == PARETO_STEPS - 1 else max(MIN_SOLVE_SECONDS, left_budget / 2)
        given_total += give
        limited = with_memory_budget(graph, budget_for_model_limit(at, device))
        try:
            sol = solve_graph(limited, time_limit=give, workers=workers, seed=seed, deterministic=deterministic,
                              hint=list(best.choice))
        except SolveFailed as exc:
            info["tried"].append({"limit_bytes": at, "failed": str(exc)[:200]})
            break   # nothing at this limit: none lower
        choice = list(sol.strategies)
        _hold(graph, choice)
        ev = evaluate_choice(graph, choice)
        # taken for a peak saving the model can vouch for, or when it is cheaper than the best plan at no
        # higher predicted peak (new user 20: a plan 17% cheaper at a 2% lower peak was not taken)
        taken = (ev.total <= bound and int(ev.peak_memory) <= hi) or \
            (ev.total < best.evaluation.total and int(ev.peak_memory) <= int(best.evaluation.peak_memory))
        info["tried"].append({"limit_bytes": at, "peak_bytes": int(ev.peak_memory),
                              "cost": round(float(ev.total), 6), "taken": bool(taken),
                              "seconds": round(float(sol.seconds or 0.0), 2)})
        if not taken:
            break   # over the share at this limit: a lower one costs at least as much
        best = dataclasses.replace(result, solution=sol, choice=choice, evaluation=ev)
        hi = xla_lower_bound(int(ev.peak_memory), device)
        at = max(lo, (lo + hi) // 2)
    if best is not result:
        info["applied"] = True
        info["note"] = (f"Pareto step: peak {format_bytes(int(ev0.peak_memory))} -> "
                        f"{format_bytes(int(best.evaluation.peak_memory))} per device (predicted) at cost "
                        f"{best.evaluation.total:,.0f} (cheapest found {best_cost:,.0f}, share {PARETO_SHARE:g})")
    return best, info
