"""Messages for ``SolveFailed``: infeasible memory budgets (liveness point and tensors) and solver
node ids named by instruction.
"""

from __future__ import annotations

import numpy as np

from ..cost.liveness import peak_usage
from ..cost.memory import (XLA_CPU_OVERESTIMATE, XLA_CPU_UNDERESTIMATE, XLA_TPU_UNDERESTIMATE, bytes_per_device,
                           heap_allowance, margin_names, model_limit, xla_lower_bound)
from ..cost.tpu_layout import vmem_bytes
from ..cost.steptime import format_seconds
from ..costgraph import INFINITY
from ..errors import SolveFailed
from ..solver.followers import forbidden_chains
from ..units import format_bytes
from .graph import Graph


def minimum_memory_check(graph: Graph, budget: int) -> None:
    """Raise SolveFailed when even the smallest layout of every tensor exceeds ``budget`` at some
    liveness point (:func:`hloshard.cost.liveness.peak_usage` of the per-node minimum usages), naming
    the point and the largest tensors live there."""
    p = graph.problem
    if p.num_nodes == 0:
        return
    peak, t, mins = minimum_peak(p)
    if peak <= budget:
        return
    user = getattr(graph, "memory_budget", None)
    raise _failed(infeasible_message(graph, t, mins, user if user is not None else budget, peak), "infeasible")


def parameter_floor_check(module, num_devices: int, budget: int) -> None:
    """Raise SolveFailed ('infeasible') before any cost graph is built when the entry computation's
    parameters alone exceed ``budget`` bytes per device however they are split: the ``num_devices``
    devices together hold every parameter byte at least once for the whole step, so the fullest holds at
    least ``ceil(total / num_devices)``, and XLA's ``memory_analysis()`` counts the arguments in every
    plan's peak -- a lower bound on XLA's peak, with no model in it.  (New user 23: ``solve --memory-budget
    1KiB`` on a Swin step with 18 MB of parameters built its cost graph for 42 s, past the time limit,
    before it said no.)"""
    entry = getattr(module, "entry", None)
    if entry is None or num_devices < 1:
        return
    total = sum(bytes_per_device(p.shape, None) for p in entry.parameters)
    floor = -(-total // int(num_devices))
    if floor <= budget:
        return
    raise _failed(f"memory budget {format_bytes(budget)} per device is infeasible: under XLA every plan needs at "
                  f"least {floor:,} bytes ({format_bytes(floor)}) per device for the entry parameters alone "
                  f"({format_bytes(total)} however they are split over {num_devices} devices, held for the whole "
                  "step; XLA's memory_analysis() counts them in its peak)" + _unit_hint(budget), "infeasible")


def _unit_hint(budget: int) -> str:
    """For a budget under 1 MiB, which no real step fits: the reminder that a size without a unit is in bytes
    (new user 30 F10: ``--memory-budget 12`` meant 12 GiB and read as 12 bytes); else '' (also for a budget
    given with its unit, :class:`hloshard.units.GivenBytes`)."""
    if budget >= 2**20 or getattr(budget, "unit_given", False):   # units.GivenBytes: a unit was written
        return ""
    return f"; a size without a unit is in bytes: {budget} means {budget:,} B, {budget}GiB means {budget} GiB"


def minimum_peak(problem) -> tuple[int, int, np.ndarray]:
    """``(peak, point, usages)``: the least node-memory peak any plan of ``problem`` (a
    :class:`hloshard.costgraph.Problem`) can have, bytes per device: every node at its smallest usage
    (``usages``, int64 per node), summed over the liveness intervals
    (:func:`hloshard.cost.liveness.peak_usage`), and the liveness point where it peaks.  XLA's
    auto-sharding computes the same bound (its memory lower bound, every tensor at its smallest
    strategy) to set a budget when none is given.  Communication buffers are not in it.  ``(0, 0, [])``
    for a problem with no nodes."""
    if problem.num_nodes == 0:
        return 0, 0, np.zeros(0, dtype=np.int64)
    mins = np.array([int(u.min()) for u in problem.node_usages], dtype=np.int64)
    peak, t = peak_usage(problem.intervals, mins)
    return int(peak), int(t), mins


def _failed(message: str, status: str) -> SolveFailed:
    """A SolveFailed carrying ``status`` ('infeasible' | 'timeout') for the ``--report`` of exit 3."""
    err = SolveFailed(message)
    err.status = status
    return err



def live_tensors(graph: Graph, rows, most: int = 5) -> str:
    """``rows`` (``(node of graph, bytes per device)``, largest first) in words, one entry per instruction, at
    most ``most`` instructions: ``"dot.3 (1.9 KiB), while.43 (2 leaves, 2.0 MiB)"`` (a while loop's leaves are
    nodes of one instruction: new user 19 saw "while.43 (1.0 MiB), while.43 (1.0 MiB)"); an entry parameter
    with a source path (``module.source_info.arg_paths``: the jax argument path auto_shard lowered it from, a
    StableHLO argument's) names it: ``"args_0_.1 = [0][0] (1.9 KiB)"``.  The one formatter of the tensors an
    out-of-memory message names (:func:`infeasible_message`, :func:`_name_nodes`)."""
    info = getattr(graph.module, "source_info", None)
    paths = list(getattr(info, "arg_paths", None) or [])
    by_name: dict = {}
    label: dict = {}
    for v, b in rows:
        instr = graph.nodes[v].instr
        name = instr.name
        if name in by_name or len(by_name) < most:
            by_name.setdefault(name, []).append(int(b))
            n = instr.parameter_number if instr.opcode == "parameter" else None
            label[name] = f"{name} = {paths[n]}" if n is not None and n < len(paths) and paths[n] else name
    return ", ".join(f"{label[n]} ({format_bytes(b[0])})" if len(b) == 1 else
                     f"{label[n]} ({len(b)} leaves, {format_bytes(sum(b))})" for n, b in by_name.items())


def limit_words(budget: int, limit: int, device=None) -> str:
    """What the model's limit for a memory ``budget`` is made of (:func:`hloshard.cost.memory.model_limit`, bytes
    per device; ``device``: the graph's memory device), in words for a refusal.  Off a TPU: the budget less the
    margin for the memory model's largest measured under-estimate of XLA's peak (``XLA_CPU_UNDERESTIMATE``), with
    its size (:func:`margin_words`).  On a TPU: the budget less libtpu's heap allowance for this module
    (:func:`hloshard.cost.memory.heap_allowance`: its heap-slot bound x 32,256 B + 512 B) and, when the module's
    temporaries may not fit the VMEM, the VMEM (:func:`hloshard.cost.tpu_layout.vmem_bytes`), and what is left.
    New user 33 F21: a 40 MiB TPU budget was refused as "0 bytes: the budget less 100.0% kept for the model's
    largest measured under-estimate", where the real reason was a 137 MiB heap allowance."""
    budget, limit = int(budget), int(limit)
    if device is None or not str(device).lower().startswith("tpu"):
        return (f"the budget less {margin_words(budget, limit)} kept for the model's largest measured "
                f"under-estimate of XLA's peak, cost.memory.model_limit: the budget / XLA_CPU_UNDERESTIMATE = "
                f"{XLA_CPU_UNDERESTIMATE}")
    allowance = heap_allowance(device)
    slots = getattr(device, "heap_slots", None)
    what = (f"libtpu's heap allowance for this module, {format_bytes(allowance)} ({allowance:,} bytes: "
            + (f"its heap-slot bound, {int(slots):,} slots," if slots is not None else
               "the largest heap-slot bound measured,")
            + " x 32,256 B + 512 B, cost.tpu_heap.heap_slot_bound)")
    vmem = 0 if getattr(device, "temporaries_fit_vmem", False) else vmem_bytes(str(device))
    if vmem:
        what += (f" and the VMEM, {format_bytes(vmem)} (the module's temporaries may not fit it, so the model's "
                 f"VMEM credit is taken back)")
    if XLA_TPU_UNDERESTIMATE != 1.0 and vmem:
        what += f", over XLA_TPU_UNDERESTIMATE = {XLA_TPU_UNDERESTIMATE}"
    tail = ("; that leaves nothing of this budget: no plan of this module is accepted below "
            f"{format_bytes(allowance + vmem)}" if limit <= 0 else "")
    return f"the budget less {what}{tail}"


def over_words(peak: int, device=None) -> str:
    """``; under XLA the nearest plan, P predicted, peaks at no less than L (...)``: the lower bound the memory
    model's largest measured over-estimate gives (:func:`hloshard.cost.memory.xla_lower_bound`), so that a
    refusal says both margins (new user 33 F20: a NeoX budget of 36 MiB refused while hloshard's own plan runs at
    34.74 MB under XLA: the model over-estimates that model by 12%, and the under-estimate margin is taken off the
    budget on top).  '' on a TPU (its bound is of the data alone)."""
    if device is not None and str(device).lower().startswith("tpu"):
        return ""
    low = xla_lower_bound(int(peak), device)
    return (f"; the two margins add: the model may also over-estimate, by up to {XLA_CPU_OVERESTIMATE}x measured "
            f"(XLA_CPU_OVERESTIMATE), so XLA may run the nearest plan, {format_bytes(int(peak))} predicted, at as "
            f"little as {format_bytes(low)} -- `hloshard cost --xla` of a plan written without the budget says "
            f"what XLA makes of it")


def margin_words(budget: int, limit: int) -> str:
    """The margin between a memory budget and its model limit in words, ``9.9% (2,570,930 bytes)``: new user 30
    (F10) saw a GPT-2 budget 3% above a peak XLA had measured for a plan hloshard itself returned refused, and
    the message named the margin without its size."""
    gap = int(budget) - int(limit)
    return f"{gap / max(1, int(budget)):.1%} ({gap:,} bytes)"


def infeasible_message(graph: Graph, t: int, usage, budget: int, total: int) -> str:
    p = graph.problem
    live = [v for v in range(p.num_nodes) if p.intervals[v, 0] <= t < p.intervals[v, 1]]
    live.sort(key=lambda v: (-int(usage[v]), v))
    instr = graph.schedule[t] if t < len(graph.schedule) else None
    # the largest, one entry per instruction (a while loop's leaves are nodes of one instruction: new user
    # 19 saw "while.43 (1.0 MiB), while.43 (1.0 MiB)")
    names = live_tensors(graph, [(v, int(usage[v])) for v in live])
    at = f"at liveness point {t} ({instr.name})" if instr is not None else f"at liveness point {t}"
    device = getattr(graph, "memory_device", None)
    keep = getattr(graph, "persistent", None)   # entry parameters and outputs (a TPU keeps them in HBM)
    fixed = 0
    if device is not None and keep is not None and len(keep) == p.num_nodes:
        alive = p.intervals[:, 1] > p.intervals[:, 0]
        fixed = int(np.asarray(usage, dtype=np.int64)[keep & alive].sum())
    under, over = margin_names(device)
    # a GPU profile has no margin of its own: XLA CPU's is used (no GPU compiler to measure against here)
    prices = getattr(graph.mesh, "roofline_prices", None)   # --device (hloshard.mesh_setup)
    named = getattr(getattr(prices, "profile", None), "name", None)
    gpu = "" if named is None or under != "XLA_CPU_UNDERESTIMATE" else \
        f", XLA CPU's: the memory model has no measurement on {named}'s compiler"
    low = xla_lower_bound(total, device, fixed)
    model = (f"{at} the live tensors need at least {format_bytes(total)} per device in the memory model even when "
             f"sharded as far as possible, above its limit for this budget ({format_bytes(model_limit(budget, device))}: "
             f"{limit_words(budget, model_limit(budget, device), device)}{gpu})")
    xla = (f"under XLA every plan needs at least {low:,} bytes ({format_bytes(low)}) per device (the model's "
           f"figure less its largest measured over-estimate, {over})")
    if low > budget:   # proven under XLA too: no plan fits, whatever the model's margin
        return f"memory budget {format_bytes(budget)} per device is infeasible: {model}; {xla}; largest: {names}"
    # only the model's limit is passed (new user 24's MoE at 50 MiB: 48.0 MiB in the model, limit 45.0 MiB, XLA's
    # bound 41.4 MiB): what is proven is the lower bound under XLA, below the budget, so the budget is refused by
    # the model's margin, not shown infeasible
    return (f"memory budget {format_bytes(budget)} per device cannot be kept within the memory model's limit "
            f"(the model's verdict, not a proof under XLA): {model}; proven under XLA is only that every plan needs "
            f"at least {low:,} bytes ({format_bytes(low)}) per device, below the budget (the model's figure less "
            f"its largest measured over-estimate, {over}), so a plan XLA fits in the budget may exist that the "
            f"model cannot show; largest: {names}")



def _name_nodes(graph: Graph, msg: str, sol) -> str:
    """Append instruction names to the solver's explanation (its node ids are solver-problem ids)."""
    detail = getattr(sol, "detail", None) or {}
    first: dict = {}
    for v, c in enumerate(graph.classes):
        first.setdefault(c, v)

    def name(node) -> str | None:
        v = first.get(int(node))
        return None if v is None else graph.nodes[v].instr.name

    t = detail.get("time")
    nodes = detail.get("nodes") or []
    if t is not None and detail.get("limit") is not None and detail.get("minimum_usage") is not None and nodes \
            and all(isinstance(e, dict) and "minimum_usage" in e for e in nodes):
        # the solver's memory explanation (solver ids, raw bytes) in the words of infeasible_message: the
        # instruction at the liveness point and the largest live tensors by name (new user 25, finding 9a)
        at = f"at liveness point {int(t)}" + (f" ({graph.schedule[int(t)].name})"
                                               if 0 <= int(t) < len(graph.schedule) else "")
        rows = [(first[int(e["node"])], int(e["minimum_usage"])) for e in nodes if int(e["node"]) in first]
        if int(detail["minimum_usage"]) <= int(detail["limit"]):
            # solver.presolve.tightest_point: each tensor alone fits at its smallest layout, but no combination the
            # solver may choose does (fresh-clone check 34: "cannot be met ... need at least 2.0 MiB" under a
            # 2.4 MiB limit read as a contradiction)
            return (f"memory limit {format_bytes(int(detail['limit']))} per device (the solver's, in the memory "
                    f"model's bytes) cannot be met by any plan the solver may choose: at the tightest liveness "
                    f"point, {at}, the tensors live there would need {format_bytes(int(detail['minimum_usage']))} "
                    f"if each took its smallest layout, but those layouts cannot all be chosen together (kept or "
                    f"tied shardings, and strategies that exclude each other, force larger ones); largest: "
                    f"{live_tensors(graph, rows)}")
        return (f"memory limit {format_bytes(int(detail['limit']))} per device (the solver's, in the memory model's "
                f"bytes) cannot be met {at}: the tensors live there need at least "
                f"{format_bytes(int(detail['minimum_usage']))} even at their smallest layouts; largest: "
                f"{live_tensors(graph, rows)}")
    parts = [msg]
    if t is not None and 0 <= int(t) < len(graph.schedule):
        parts.append(f"liveness point {int(t)} is at {graph.schedule[int(t)].name}")
    names = []
    for entry in list(nodes)[:6]:
        node = entry.get("node") if isinstance(entry, dict) else entry
        nm = name(node) if node is not None else None
        if nm:
            names.append(nm)
    if names:
        parts.append("tensors live there: " + ", ".join(names))
    if detail.get("node") is not None and name(detail["node"]):
        parts.append(f"node {int(detail['node'])} is {name(detail['node'])}")
    return "; ".join(parts)


#: where a tie came from (:class:`hloshard.strategy.ties.Tie` ``source``), in the words of the option that made it
_TIE_SOURCES = {"state": "auto_shard's state=", "path": "state found by pytree path", "donate": "donated",
                "--tie": "--tie", "input_output_alias": "the module's input_output_alias"}


def conflict_message(graph: Graph) -> str | None:
    """The constraints that leave some value of ``graph`` no layout, in the user's terms, when arc consistency
    over ``graph.problem`` shows them (:func:`hloshard.solver.followers.forbidden_chains`): the two chains
    that meet at that value -- each from where it began (a sharding kept as given, an argument or output that
    must split evenly, an instruction's own layouts) through ties (output and parameter, with their jax paths
    where ``module.source_info`` has them), follows (one layout for both) and forbidden layout pairs --, and
    what can be changed: the kept shardings and the ties on them.  None when arc consistency finds no such
    value (the solver's own message is then the one to give)."""
    found = forbidden_chains(graph.problem)
    if found is None:
        return None
    node, chains = found
    info = getattr(graph.module, "source_info", None)
    args = list(getattr(info, "arg_paths", None) or [])
    results = list(getattr(info, "result_paths", None) or [])
    kept = getattr(graph, "kept", None) or {}
    follows = {(int(a), int(b)) for a, b in getattr(graph, "follows", ())}
    ties = {frozenset((t.output_node, t.param_node)): t for t in getattr(graph, "ties", ())}
    changeable: list = []

    def label(v: int) -> str:
        instr = graph.nodes[v].instr
        if instr.opcode == "parameter" and instr.parent is graph.module.entry:
            n = instr.parameter_number
            path = f" = {args[n]}" if n < len(args) and args[n] else ""
            return f"parameter {n} ({instr.name}{path})"
        return instr.name

    def origin(v: int) -> str:
        instr = graph.nodes[v].instr
        if instr in kept:
            changeable.append(f"the kept sharding of {label(v)}")
            return f"{label(v)} is kept as given, {kept[instr]}"
        if (np.asarray(graph.problem.node_costs[v]) >= INFINITY).any() and graph.persistent is not None \
                and graph.persistent[v]:
            return f"{label(v)} is an entry argument or output: it takes only layouts that split its dims evenly"
        return f"{label(v)} has only some layouts"

    def step(prev: int, v: int, c) -> str:
        u, w, kind = c
        if kind == "alias":
            t = ties.get(frozenset((u, w)))
            if t is None:
                return f"{label(v)} shares one sharding with {label(prev)} (shard_as)"
            idx = ",".join(map(str, t.tie.output))
            rp = f" = {results[t.output_leaf]}" if t.output_leaf < len(results) and results[t.output_leaf] else ""
            what = f"output {{{idx}}} ({graph.nodes[t.output_node].instr.name}{rp})"
            changeable.append(f"the tie of {what} to parameter {t.param} ({_TIE_SOURCES.get(t.tie.source, t.tie.source)})")
            return f"{what} is tied to {label(t.param_node)}: it leaves in the layout the parameter came in with"
        if (u, w) in follows or (w, u) in follows:
            a, b = (u, w) if (u, w) in follows else (w, u)
            return f"{label(b)} follows {label(a)} (one layout for both)"
        return f"{label(v)} reads or is read by {label(prev)} in only some layouts"

    parts = []
    for ch in chains:
        words = [origin(ch[0][0])]
        for (prev, _c), (v, c) in zip(ch, ch[1:]):
            words.append(step(prev, v, c))
        parts.append("; ".join(words))
    named = list(dict.fromkeys(changeable))
    what = ", ".join(named[:-1]) + " or " + named[-1] if len(named) > 1 else named[0] if named else "the shardings named"
    return (f"no plan keeps every kept sharding and tie: {label(node)} can take no layout -- "
            + " -- against -- ".join(parts)
            + f".  To let a plan through, change one of: {what} (auto_shard: an argument passed without a "
              "NamedSharding or keep_shardings='none', a state leaf left out of state= or state_mode='pay'; "
              "solve: --keep-shardings none, or without that --tie)")


def reshard_cache_warning(own: float, paid: float, seconds_per_unit: float | None = None) -> str:
    """The warning of a plan whose solver figure pays for reshardings XLA's reshard cache serves: ``own`` the
    solver's own figure of the plan (cost units: ``Evaluation.total + Evaluation.cached``, the report's
    ``solver_objective``), ``paid`` the part of it those repeats cost (``Evaluation.cached``, the report's
    ``reshard_cache_cost``; :mod:`hloshard.autoshard.reshard_cache`).  Both in cost units, each rounded to 6
    decimals first (as the report carries them, so the text made from the report's figures is the text
    made from the solve's); with ``seconds_per_unit`` (``--device``) the same sentence in seconds
    (:func:`hloshard.cost.steptime.format_seconds`).  One text for :func:`hloshard.autoshard.solve.
    reevaluate_written`, which adds it, and :func:`hloshard.summary.user_warning`, which says it in seconds
    from the report's figures (round 32: it read them back out of this text)."""
    own, paid = round(float(own), 6), round(float(paid), 6)
    if seconds_per_unit:
        a, b = format_seconds(own * seconds_per_unit), format_seconds(paid * seconds_per_unit)
    else:
        a, b = f"{own:,.2f}", f"{paid:,.2f}"
    return (f"the solver's own figure, {a}, pays {b} for reshardings that XLA's partitioner makes once and reuses "
            f"(one value needed in one layout by several users: its reshard cache); the plan's cost counts each once")


def _computes_replicated(report: dict) -> bool:
    """Whether the plan computes the whole step on every device: it moves nothing (predicted) and its
    compute term is the replicated plan's objective (``report["known_plans"]``: the replicated plan's cost
    is its compute alone), so no flop is divided among the devices.  Catches the plan that shards only an
    argument the step merely updates elementwise (keras-hub Mistral's unused ``reverse_embeddings``, split
    8 ways for free while every other argument stayed replicated, new user round 16 finding 11)."""
    rep = next((k for k in report.get("known_plans") or [] if k.get("name") == "replicated"), None)
    compute = (report.get("breakdown") or {}).get("compute")
    if rep is None or compute is None or report.get("predicted_collective_bytes_per_device"):
        return False
    return abs(float(compute) - float(rep["objective"])) <= 1e-9 * max(1.0, abs(float(rep["objective"])))


def _replicated_step(report: dict, sharded_args: int) -> bool:
    """Whether to say the plan computes the whole step on every device: every argument replicated and the
    plan moves nothing (predicted), or :func:`_computes_replicated`.  Arguments replicated while the plan
    moves bytes mean split intermediates (new user 23's Swin step: every argument replicated, 5.3e9 flops
    per device against 4.2e10 unsharded, and the warning said each device computes all of it)."""
    moves = bool(report.get("predicted_collective_bytes_per_device"))
    return (not sharded_args and not moves) or _computes_replicated(report)


def _all_replicated_note(report: dict, state_ties: list, device, num_devices: int, sharded_args: int = 0,
                         num_args: int = 0, scale=None, cli: bool = False) -> str:
    """What a plan that leaves every argument replicated means, why the objective can choose it, and what
    changes the trade, with the figures to decide by (a new user's decoder LM, 2.1 MB of parameters on
    2x4: replicated, with 8.8 MB of XLA temp memory per device where a hand-written Megatron plan had
    1.0 MB, and nothing said why; keras-hub Mistral with nothing sharded, round 16: replicated at an
    11.1 MB peak per device by XLA against 3.9 MB for Llama's expert layout, and the note in
    ``report["warnings"]`` went unread, so :func:`auto_shard` also issues it as a ``UserWarning``).

    Figures (all predicted, per device): the plan's objective and peak; the data-parallel plan
    known before the search (``report["known_plans"]``: its objective and peak, when feasible); the
    lowest-peak plan the Pareto step found and did not take (``report["memory_guard"]["pareto"]["tried"]``:
    its peak and cost); the least peak any layout of a node reaches (``["pareto"]["floor_bytes"]``, a lower
    bound).  ``sharded_args`` of ``num_args`` arguments split (:func:`_computes_replicated`).  ``scale``: the
    device's :class:`hloshard.devices.TimeScale` (with ``device``), which turns the objective into seconds.
    ``cli``: the remedies named as ``hloshard solve``'s flags (``--memory-budget``, ``--device``, ``--tie``) instead
    of ``auto_shard``'s arguments (new user 25: ``solve --mesh 2x2x2`` wrote the replicated plan, 129.8 MiB per
    device, with no word of it)."""
    objective = report.get("objective")
    timed = device is not None and scale is not None
    unit = "" if timed else " cost units"

    def num(x) -> str:   # with a device the objective is in the time scale's units: said in seconds
        return format_seconds(scale.seconds(float(x))) if timed else f"{float(x):,.0f}"

    peak = report.get("peak_memory_per_device")
    figures = [f"objective {num(objective)}{unit}"] + ([f"peak {format_bytes(int(peak))} per device"] if peak else [])
    dp = next((k for k in report.get("known_plans") or [] if k.get("name") == "data-parallel"), None)
    alt = ""
    if dp is not None and dp.get("feasible"):
        alt = (f"; the data-parallel plan known before the search costs {num(dp['objective'])}{unit} at a "
               f"{format_bytes(int(dp['peak_bytes']))} peak")
    pareto = (report.get("memory_guard") or {}).get("pareto") or {}
    lower = [t for t in pareto.get("tried") or [] if "peak_bytes" in t and not t.get("taken")]
    if lower and objective:
        t = min(lower, key=lambda t: t["peak_bytes"])
        alt += (f"; a plan peaking at {format_bytes(int(t['peak_bytes']))} costs {num(t['cost'])} "
                f"({float(t['cost']) / float(objective) - 1:+.0%}, above the Pareto step's "
                f"{float(pareto.get('share', 0)):.0%} share)")
    floor = pareto.get("floor_bytes")
    if floor:
        alt += f"; no plan peaks below {format_bytes(int(floor))} (every tensor at its smallest layout)"
    why = (f"{len(state_ties)} state leaves are tied (each leaves in the layout it came in with), so a "
           "sharded parameter pays its gradient's collective every step; " if state_ties else "")
    args = "every argument stays replicated" if not sharded_args else (
        f"{num_args - sharded_args} of {num_args} arguments stay replicated (the {sharded_args} "
        "split divide no priced flop)")
    if cli:
        why = (f"{len(state_ties)} outputs are tied to their parameters (--tie), so a sharded parameter pays its "
               "gradient's collective every step; " if state_ties else "")
        # a plan proven optimal is not one the search ended at its start (fresh-clone check 33: a cost-0 plan
        # "proven optimal in 0.2 s" was told a larger --time-limit might help)
        proven = report.get("status") == "optimal"
        remedy = ("Pass --memory-budget (bytes per device: the plan then shards what it must to fit)"
                  + ("" if device is not None else " or --device (flops and links priced in seconds)")
                  + " to trade collective bytes for memory or time"
                  + ("." if proven else ", or a larger --time-limit (the search may have ended at its start)."))
    else:
        remedy = ("Pass `memory_budget=` (bytes per device: the plan then shards what it must to fit)"
                  + ("" if device is not None else " or `device=` (flops and links priced in seconds)")
                  + " to trade collective bytes for memory or time; `state={}` unties the state.")
    repeat = (report.get("step_time") or {}).get("matmul_repeat")
    if repeat is not None and round(float(repeat), 2) < num_devices:
        # some intermediates split although every argument is replicated (fresh-clone check 35, item 7c: "computes
        # all of it" beside "matmuls repeated: each device runs 5.38x its 1/8 share")
        computes = (f"devices computes most of it (its dot and convolution flops {float(repeat):.2f}x its "
                    f"1/{num_devices} share)")
    else:
        computes = "devices computes all of it"
    return (f"the plan replicates the whole step: {args}, so each of the {num_devices} "
            f"{computes} ({', '.join(figures)}){alt}. It is the cheapest plan found by the "
            f"objective ({'seconds' if device is not None else 'collective bytes, a flop priced at 1/512 byte'}, "
            f"the devices' redundant compute included): {why}sharding pays off when the model's compute or "
            "memory outweighs the collectives. " + remedy)


def replicated_parameters_note(report: dict, module, num_devices: int, device=None) -> str | None:
    """``hloshard solve``'s warning when every entry parameter of rank >= 1 (the batch among them) enters
    replicated while the plan still moves data (so :func:`written_replicated_note` does not speak): what it costs in
    memory -- the parameters' bytes per device, their share of the peak, what they would hold split over the
    devices -- and that the objective chose it for its cost, memory being free to it below the budget (with
    ``device`` the budget defaults to the device's HBM).  None otherwise.  New user 33 F7: ``--mesh
    data=2:dcn,model=4 --device h100-sxm`` replicated all 84 parameters of a NeoX train step, 2.2x the memory of
    the plain plan for 4.6% less modelled time (the gradient all-reduce over the slow dcn axis saved), and the
    summary did not say so."""
    if num_devices <= 1 or report.get("predicted_collective_bytes_per_device") in (None, 0):
        return None
    params = [p for p in module.entry.parameters if p.shape.is_array and p.shape.rank >= 1]
    if not params or any(p.sharding is None or not p.sharding.is_replicated for p in params):
        return None
    held = sum(int(p.shape.byte_size) for p in params)
    peak = int(report.get("peak_memory_per_device") or 0)
    budget = report.get("memory_budget")
    share = f", {held / peak:.0%} of the {format_bytes(peak)} peak" if peak else ""
    why = ("the estimated step time" if device is not None else "the objective (collective bytes and compute)")
    room = (f"; memory costs it nothing below the budget ({format_bytes(int(budget))}"
            + (f", {device}'s HBM unless --memory-budget says otherwise" if device is not None else "") + ")"
            if budget else "; no memory budget was given, so memory costs it nothing")
    return (f"all {len(params)} entry parameters (the batch among them) enter replicated: {format_bytes(held)} per "
            f"device{share}, where split over the {num_devices} devices they would hold about "
            f"{format_bytes(held // num_devices)}. The plan is the cheapest found by {why}{room}: a "
            f"--memory-budget below {format_bytes(peak) if peak else 'the peak'} trades "
            f"{'step time' if device is not None else 'cost'} for memory")


def written_replicated_note(report: dict, module, num_devices: int, replicated_cost=None, ties=(), device=None,
                            scale=None) -> str | None:
    """``hloshard solve``'s warning when the written plan computes the whole step on every device
    (:func:`_replicated_step`, as ``auto_shard`` says it: every entry parameter of ``module`` replicated and no
    collective predicted, ``report["predicted_collective_bytes_per_device"]``; or, with parameters split and nothing
    moved, the plan's compute equal to the replicated plan's, :func:`_computes_replicated`, whose cost units
    ``replicated_cost()`` gives -- a callable, priced only then: the CLI's prices
    :func:`hloshard.autoshard.trivial.trivial_plans`' replicated plan by
    :func:`hloshard.autoshard.evaluate.evaluate_choice`), in the CLI's words (:func:`_all_replicated_note`,
    ``cli=True``; ``ties``: the tied output / parameter pairs); None otherwise or on one device.  ``report``:
    :func:`hloshard.autoshard.report_json.build_report`'s (objective, breakdown, peak).  New user 25: ``solve
    gemma3.pre.hlo --mesh 2x2x2 --time-limit 60`` wrote the replicated plan (129.8 MiB per device against 30.3 MiB
    at 4x2) and said nothing."""
    params = module.entry.parameters
    if num_devices <= 1 or not params:
        return None
    sharded = sum(1 for p in params if p.sharding is not None and not p.sharding.is_replicated)
    rep = dict(report)
    if not _replicated_step(rep, sharded):
        if not sharded or replicated_cost is None or rep.get("known_plans") \
                or rep.get("predicted_collective_bytes_per_device"):
            return None
        # some parameters split, nothing moved: whether they divide any priced flop (the replicated plan's cost)
        cost = replicated_cost()
        if cost is None:
            return None
        rep["known_plans"] = [{"name": "replicated", "objective": float(cost)}]
        if not _computes_replicated(rep):
            return None
    return _all_replicated_note(rep, list(ties), device, int(num_devices), sharded, len(params), scale, cli=True)
