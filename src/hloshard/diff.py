"""``hloshard diff``: two sharding plans of the same module compared instruction by instruction.

Both modules are priced exactly as ``hloshard cost`` prices them (:func:`hloshard.autoshard.evaluate_as_written`:
every annotation kept, the cheapest consistent choice for what they leave open).  Instructions are matched
by name (the plans of one module: hloshard's solve, XLA's propagation, a hand annotation).  Per
instruction the cost is split into compute and communication (its own strategy, times its loop
execution count), resharding (the edges into it, as ``cost`` attributes them) and memory (bytes per device of
its value); the report lists every instruction whose sharding differs with the change B - A of each kind,
the top differences first, and the totals by kind (their sum over all instructions is the change of the
module's total; memory is compared at the peak).

Costs in cost units (seconds with a device: :func:`in_seconds`, ``hloshard diff --device``), memory in
bytes per device.  Raises :class:`hloshard.errors.InputError` when the
two modules do not share most instruction names or a shared instruction has two different shapes.
"""

from __future__ import annotations

from rich.table import Table

from .autoshard import evaluate_as_written, instruction_sharding
from .strategy.ties import matching_pairs, module_ties
from .autoshard.evaluate import counted_instructions
from .cost.steptime import cost_formatter
from .errors import InputError
from .textout import print_labelled, print_table
from .units import format_bytes

KINDS = ("compute", "communication", "resharding")
#: what the ``instructions`` count of a diff counts (said beside it in the text and HTML reports)
COUNTED = "instructions both modules have, matched by name, per-call-site copies of called computations included"


#: what to do when two modules are not plans of one module (said after the refusal; new user 31, F19)
ONE_MODULE = ("two lowerings of one function number their instructions differently: write one layout onto the "
              "other's module (an auto_shard plan: plan.hlo_text_with(in_shardings, out_shardings) against "
              "plan.hlo_text; hloshard's plan of yours: hloshard solve A.hlo -o B.hlo)")


def _same_module(shapes_a: dict, shapes_b: dict, error) -> None:
    """Raise ``error`` unless two modules (instruction name -> shape text) are plans of one module: at
    least half of the larger one's names shared, and every shared name of the same shape; the message says
    how to make two plans of one module (:data:`ONE_MODULE`)."""
    shared = [n for n in shapes_a if n in shapes_b]
    if len(shared) < 0.5 * max(len(shapes_a), len(shapes_b)):
        raise error(f"the two modules share only {len(shared)} of {max(len(shapes_a), len(shapes_b))} instruction "
                    f"names: they are not two plans of one module; {ONE_MODULE}")
    for n in shared:
        if shapes_a[n] != shapes_b[n]:
            raise error(f"{n} has shape {shapes_a[n]} in the first module but {shapes_b[n]} in the second: "
                        f"they are not two plans of one module; {ONE_MODULE}")


#: how many instructions sharded alike whose cost changed :func:`diff_plans` lists
SAME_SHARDING_ROWS = 20


def instruction_costs(result) -> dict:
    """Instruction name -> {'sharding', 'opcode', 'chosen', 'compute', 'communication', 'resharding',
    'memory'} of a :class:`hloshard.autoshard.CostResult` (resharding: the chosen cost of the edges whose
    consumer is the instruction; memory: bytes per device of its nodes' values; chosen: the input had no
    sharding there, so 'sharding' is the one ``cost`` chose)."""
    g, choice, ev = result.graph, result.choice, result.evaluation
    rows: dict = {}
    for instr in g.schedule:
        rows.setdefault(instr.name, {"sharding": str(instruction_sharding(g, instr, choice)), "opcode": instr.opcode,
                                     "chosen": instr.sharding is None,
                                     "compute": 0.0, "communication": 0.0, "resharding": 0.0, "memory": 0})
    for v, grp in enumerate(g.nodes):
        st = grp.strategies[int(choice[v])]
        w = g.ctx.weight(grp.instr)
        r = rows.get(grp.instr.name)
        if r is None:
            continue
        r["compute"] += st.compute * w
        r["communication"] += st.comm * w
        r["memory"] += int(st.memory)
    for e in range(len(g.edge_float)):
        for _inst, _leaf, grp, _w in g.edge_info[e][:1]:
            r = rows.get(grp.instr.name)
            if r is not None:
                r["resharding"] += float(ev.edge_cost[e])
    return rows


def diff_plans(module_a, module_b, mesh, mesh_b=None, time_limit: float | None = None, progress=None) -> dict:
    """Compare the plans ``module_a`` and ``module_b`` on ``mesh`` (``mesh_b`` for B when it differs).

    Returns the JSON-ready report: ``totals`` {kind: {a, b, change}} (kinds: compute, communication,
    resharding, total, peak_memory_per_device), ``differences`` (one row per instruction whose sharding
    differs: name, opcode, sharding_a, sharding_b, chosen_a / chosen_b (True where that module had no
    sharding and the one shown is what ``cost`` chose), change per kind and total, memory_change; largest
    absolute total change first), ``same_sharding_change`` (what the instructions with unchanged
    shardings add to the total change), ``only_in_a`` / ``only_in_b`` (names), ``only_in_a_change`` /
    ``only_in_b_change`` (what those add to the total change, per kind: minus A's own cost, plus B's;
    e.g. the operand pins ``solve`` writes, which carry the resharding their consumers paid in A, so
    the differences, ``same_sharding_change`` and these two add up to the total change), ``unannotated``,
    ``warnings`` (``cost``'s, e.g. a ``while`` whose trip count is a guess) and ``completion`` per side (how many instructions carried no sharding; how ``cost`` chose them).
    ``time_limit`` / ``progress``: as :func:`hloshard.autoshard.evaluate_module` (None: the fast
    completion), for each module in turn.  ``state`` per side (:func:`state_layouts`): how many of the
    module's ties it was priced with, and how many outputs shaped like a parameter leave in another layout
    than it comes in; ``state_note``: why the two totals are not alike when one side keeps its state layouts
    and the other does not (:func:`state_note`).
    """
    # the same module? checked on the input before either is priced (pricing can take minutes)
    ia = {i.name: str(i.shape) for i in counted_instructions(module_a)}
    ib = {i.name: str(i.shape) for i in counted_instructions(module_b)}
    _same_module(ia, ib, InputError)
    ra = evaluate_as_written(module_a, mesh, time_limit=time_limit, progress=_side(progress, "A"), deterministic=False)
    rb = evaluate_as_written(module_b, mesh_b or mesh, time_limit=time_limit, progress=_side(progress, "B"),
                         deterministic=False)
    ca, cb = instruction_costs(ra), instruction_costs(rb)
    shared = [n for n in ca if n in cb]
    _same_module({i.name: str(i.shape) for i in ra.graph.schedule}, {i.name: str(i.shape) for i in rb.graph.schedule},
                 InputError)
    diffs, alike = [], []
    same = {k: 0.0 for k in KINDS}
    for n in shared:
        a, b = ca[n], cb[n]
        change = {k: b[k] - a[k] for k in KINDS}
        if a["sharding"] == b["sharding"]:
            for k in KINDS:
                same[k] += change[k]
            if any(abs(v) > 1e-9 for v in change.values()):
                alike.append({"instruction": n, "opcode": a["opcode"],
                              "change": {k: round(v, 6) for k, v in change.items()},
                              "total_change": round(sum(change.values()), 6)})
            continue
        total = sum(change.values())
        diffs.append({"instruction": n, "opcode": a["opcode"], "sharding_a": a["sharding"], "sharding_b": b["sharding"],
                      "chosen_a": a["chosen"], "chosen_b": b["chosen"],
                      "change": {k: round(v, 6) for k, v in change.items()}, "total_change": round(total, 6),
                      "memory_a": a["memory"], "memory_b": b["memory"], "memory_change": b["memory"] - a["memory"]})
    diffs.sort(key=lambda r: (-abs(r["total_change"]), r["instruction"]))
    alike.sort(key=lambda r: (-abs(r["total_change"]), r["instruction"]))
    ea, eb = ra.evaluation, rb.evaluation
    totals = {k: {"a": round(getattr(ea, k), 6), "b": round(getattr(eb, k), 6),
                  "change": round(getattr(eb, k) - getattr(ea, k), 6)} for k in KINDS}
    totals["total"] = {"a": round(ea.total, 6), "b": round(eb.total, 6), "change": round(eb.total - ea.total, 6)}
    totals["peak_memory_per_device"] = {"a": int(ea.peak_memory), "b": int(eb.peak_memory),
                                        "change": int(eb.peak_memory) - int(ea.peak_memory)}
    state = {"a": state_layouts(module_a, ra), "b": state_layouts(module_b, rb)}
    return {"mesh": mesh.to_json() if hasattr(mesh, "to_json") else str(mesh),
            "state": state, "state_note": state_note(state),
            "instructions": len(shared), "differing": len(diffs), "totals": totals, "differences": diffs,
            "same_sharding_change": {k: round(v, 6) for k, v in same.items()},
            "same_sharding_largest": alike[:SAME_SHARDING_ROWS],
            "only_in_a": sorted(n for n in ca if n not in cb), "only_in_b": sorted(n for n in cb if n not in ca),
            "only_in_a_change": {k: round(-sum(ca[n][k] for n in ca if n not in cb), 6) for k in KINDS},
            "only_in_b_change": {k: round(sum(cb[n][k] for n in cb if n not in ca), 6) for k in KINDS},
            "unannotated": {"a": len(ra.unannotated), "b": len(rb.unannotated)},
            # what each side's pricing assumed, as cost gives it (a while's guessed trip count; fresh37 #9)
            "warnings": {"a": list(ra.warnings or ()), "b": list(rb.warnings or ())},
            "instructions_counted": {"a": ra.instructions, "b": rb.instructions},
            "completion": {"a": ra.completion_words(with_time=False), "b": rb.completion_words(with_time=False)}}


def state_layouts(module, result) -> dict:
    """How ``module`` (priced as ``result``, a CostResult) treats a training step's state: ``ties`` (the ties it
    was priced with: its ``input_output_alias`` pairs and ``--tie``'s, :func:`hloshard.strategy.ties.module_ties`),
    ``pairs`` (top-level outputs with the shape and dtype of an entry parameter, ``--tie matching``'s rule,
    :func:`hloshard.strategy.ties.matching_pairs`) and ``moved`` (of those, the ones that leave in another layout
    than the parameter comes in, written or chosen by ``cost``: a loop reshards them before every next step, which
    no cost here counts)."""
    g, choice = result.graph, result.choice
    by_name = {i.name: i for i in g.schedule}
    root, params = module.entry.root, {p.parameter_number: p for p in module.entry.parameters}
    pairs = matching_pairs(module)
    moved = 0
    if pairs and root.name in by_name:
        out = instruction_sharding(g, by_name[root.name], choice)
        first, leaf = {}, 0
        for j, sub in enumerate(root.shape.tuple_shapes):
            first[j] = leaf
            leaf += 1 if sub.is_array else len(sub.leaves())
        for j, q in pairs:
            p = by_name.get(params[q].name)
            if p is not None and first[j] < len(out.tuple_elements) and \
                    out.tuple_elements[first[j]] != instruction_sharding(g, p, choice):
                moved += 1
    return {"ties": len(module_ties(module)), "pairs": len(pairs), "moved": moved}


def state_note(state: dict) -> str | None:
    """A note when A and B were priced by different tie rules, or one keeps a training step's state layouts and the
    other does not (``state``: :func:`state_layouts` per side): the totals then compare a plan a loop can run as it is
    with one it must reshard every step (new user 25b, finding 5: a blank module completed untied looked 36% cheaper
    than solve's tied plan).  None when both sides agree."""
    a, b = state["a"], state["b"]
    if not (a["pairs"] or b["pairs"]):
        return None
    if a["ties"] != b["ties"]:
        rule = f"A was priced with {a['ties']:,} tied outputs and B with {b['ties']:,} (input_output_alias, --tie)"
    elif (a["moved"] == 0) != (b["moved"] == 0):
        rule = "A and B were priced with the same ties"
    else:
        return None
    moves = "; ".join(f"{side}: {s['moved']:,} of {s['pairs']:,} outputs shaped like a parameter leave in another "
                      f"layout than it comes in" for side, s in (("A", a), ("B", b)))
    return (f"{rule}, and the two treat the training step's state differently ({moves}): a loop reshards those "
            f"before every next step, which neither total counts; `--tie matching` prices both with the new state "
            f"leaving in its parameter's layout")


def in_seconds(report: dict, seconds_per_unit: float, device: str) -> dict:
    """``report`` (:func:`diff_plans`) with every cost figure (totals, per-difference changes,
    ``same_sharding_change``) multiplied by ``seconds_per_unit`` (a device's time scale,
    :attr:`hloshard.devices.TimeScale.seconds_per_unit`), ``units`` = ``'seconds'`` and ``device``
    set; memory stays in bytes.  Returns the same dict (changed in place)."""
    def s(x: float) -> float:
        return float(f"{x * seconds_per_unit:.6g}")

    for k, row in report["totals"].items():
        if k != "peak_memory_per_device":
            report["totals"][k] = {side: s(v) for side, v in row.items()}
    for d in report["differences"] + report.get("same_sharding_largest", []):
        d["change"] = {k: s(v) for k, v in d["change"].items()}
        d["total_change"] = s(d["total_change"])
    for key in ("same_sharding_change", "only_in_a_change", "only_in_b_change"):
        if key in report:
            report[key] = {k: s(v) for k, v in report[key].items()}
    report["units"], report["device"] = "seconds", device
    return report


def _side(progress, side: str):
    """``progress`` with each phase prefixed by the module it is about (``A: greedy``)."""
    if progress is None:
        return None
    return lambda event: progress({**event, "phase": f"{side}: {event.get('phase', '')}"})


def render_text(report: dict, console, top: int = 20, names: tuple = ("A", "B")) -> None:
    """Rich text rendering of :func:`diff_plans`' report."""
    a, b = names
    f = cost_formatter(report)
    unit = f" (seconds on {report['device']})" if report.get("units") == "seconds" else ""
    t = Table(title=f"{a} -> {b}: totals{unit}", header_style="bold", title_justify="left")
    for col in ("", a, b, "change"):
        t.add_column(col, justify="right" if col else "left")
    for k in ("total",) + KINDS:
        row = report["totals"][k]
        t.add_row(k, f(row["a"]), f(row["b"]), f(row["change"], signed=True))
    m = report["totals"]["peak_memory_per_device"]
    t.add_row("peak memory / device", format_bytes(m["a"]), format_bytes(m["b"]),
              ("+" if m["change"] >= 0 else "-") + format_bytes(abs(m["change"])))
    print_table(console, t)
    console.print(f"{report['differing']:,} of {report['instructions']:,} instructions are sharded differently "
                  f"({COUNTED})")
    for key, side in (("a", a), ("b", b)):   # --complete xla (commands.diff): who chose what each side left open
        done = (report.get("xla_completion") or {}).get(key)
        if done and not done["xla_open_before"]:   # nothing to complete: XLA was not run on it
            console.print(f"{side} leaves no entry instruction open: nothing for XLA's propagation to choose")
        elif done:
            console.print(f"XLA's propagation (GSPMD, from the written shardings, as jax.jit runs it) chose the "
                          f"shardings of {done['xla_propagated']:,} of the {done['xla_open_before']:,} entry "
                          f"instructions {side} left open")
    if report.get("state_note"):
        print_labelled(console, "note:", report['state_note'])
    rows = report["differences"][:max(0, top)]
    if rows:
        d = Table(title="largest differences first", header_style="bold", title_justify="left")
        for col in ("instruction", f"sharding {a}", f"sharding {b}", "total", "compute", "comm", "resharding", "memory"):
            d.add_column(col, justify="left" if col.startswith(("instruction", "sharding")) else "right",
                         overflow="fold")
        for r in rows:
            c = r["change"]
            mc = r["memory_change"]
            d.add_row(r["instruction"], r["sharding_a"] + (" *" if r.get("chosen_a") else ""),
                      r["sharding_b"] + (" *" if r.get("chosen_b") else ""), f(r["total_change"], signed=True),
                      f(c["compute"], signed=True), f(c["communication"], signed=True),
                      f(c["resharding"], signed=True),
                      ("+" if mc >= 0 else "-") + format_bytes(abs(mc)))
        print_table(console, d)
        for side, key in ((a, "a"), (b, "b")):
            if any(r.get(f"chosen_{key}") for r in rows):
                un = report.get("unannotated", {}).get(key)
                counted = report.get("instructions_counted", {}).get(key)
                of = f" ({un:,} of {counted:,} instructions of {side} carry none)" if un is not None and counted else ""
                console.print(f"* sharding {side}: not in {side}, chosen by hloshard cost{of}: "
                              f"{report.get('completion', {}).get(key, 'the cheapest consistent completion')}")
    s = report["same_sharding_change"]
    if any(abs(v) > 1e-9 for v in s.values()):
        console.print(f"instructions sharded alike change by {f(sum(s.values()), signed=True)} (their strategies or "
                      f"operands moved: compute {f(s['compute'], signed=True)}, communication "
                      f"{f(s['communication'], signed=True)}, resharding {f(s['resharding'], signed=True)})")
        moved = report.get("same_sharding_largest", [])[:max(0, top)]
        if moved:
            t2 = Table(title="sharded alike, largest changes first", header_style="bold", title_justify="left")
            for col in ("instruction", "opcode", "total", "compute", "comm", "resharding"):
                t2.add_column(col, justify="left" if col in ("instruction", "opcode") else "right", overflow="fold")
            for r in moved:
                c = r["change"]
                t2.add_row(r["instruction"], r["opcode"], f(r["total_change"], signed=True),
                           f(c["compute"], signed=True), f(c["communication"], signed=True),
                           f(c["resharding"], signed=True))
            print_table(console, t2)
    for side, key in ((a, "only_in_a"), (b, "only_in_b")):
        if report[key]:
            c = report.get(f"{key}_change")
            adds = "" if c is None else (
                f", adding {f(sum(c.values()), signed=True)} (compute {f(c['compute'], signed=True)}, communication "
                f"{f(c['communication'], signed=True)}, resharding {f(c['resharding'], signed=True)})")
            console.print(f"only in {side} ({len(report[key]):,} instructions{adds}): "
                          f"{', '.join(report[key][:8])}{', ...' if len(report[key]) > 8 else ''}")
