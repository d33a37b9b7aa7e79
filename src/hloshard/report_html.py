"""Self-contained HTML reports for ``solve --html``, ``explain --html`` and ``diff --html``.

One file, no network: inline CSS, inline SVG charts, a few lines of inline script (it marks the page
``data-rendered`` and records script errors in ``data-js-errors``, which the browser test reads).  Every
text from the module is HTML-escaped.  The solve page holds the summary, a stacked bar chart of cost by
kind (compute / communication / resharding) per layer (the layer-naming component of the metadata's
``op_name``, :func:`layer_of`, when the op_names name layers), else per computation, else per opcode, the most expensive collectives (the
strategies' own ``Strategy.collectives`` and the resharding steps on edges, with replica groups and bytes)
and the entry parameters' shardings.  Costs in cost units, memory in bytes per device.
"""

from __future__ import annotations

import html
import re

from .textout import mesh_words
from .autoshard import instruction_sharding, reshardings_of
from .cost.memory import bytes_per_device
from .cost.steptime import cost_formatter
from .diff import COUNTED
from .explain_instruction import describe_strategy, location_text, source_text
from .units import format_bytes

COLORS = {"compute": "#4e79a7", "communication": "#f28e2b", "resharding": "#e15759"}
KINDS = ("compute", "communication", "resharding")

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1d1d1f;background:#fff}
h1{font-size:22px;margin:0 0 12px} h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;font-size:13px;margin:6px 0} th,td{border:1px solid #d0d0d5;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f0f0f5} td.n{text-align:right;font-variant-numeric:tabular-nums} code{font-size:12px}
.summary td:first-child{font-weight:600;background:#f7f7fa} .legend span{display:inline-block;margin-right:14px;font-size:13px}
.legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:-1px}
.note{color:#666;font-size:12px}
"""

_SCRIPT = """
window.addEventListener('error', function (e) {
  var b = document.body; b.setAttribute('data-js-errors', (b.getAttribute('data-js-errors') || '') + (e.message || 'error') + ';');
});
window.addEventListener('load', function () { document.body.setAttribute('data-rendered', '1'); });
"""


def _e(x) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def _num(x, digits: int = 2) -> str:
    return f"{x:,.{digits}f}"


def _bytes(n) -> str:
    return format_bytes(int(n))


def page(title: str, body: str) -> str:
    """A complete HTML document around ``body`` (already HTML)."""
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{_e(title)}</title><style>{_CSS}</style><script>{_SCRIPT}</script></head>\n"
            f"<body><h1>{_e(title)}</h1>\n{body}\n</body></html>\n")


def table(headers, rows, numeric=(), cls: str = "") -> str:
    """An HTML table; ``numeric``: column indexes right-aligned. Cells are escaped."""
    head = "".join(f"<th>{_e(h)}</th>" for h in headers) if headers else ""
    out = [f"<table class=\"{cls}\">" + (f"<thead><tr>{head}</tr></thead>" if head else "") + "<tbody>"]
    for r in rows:
        out.append("<tr>" + "".join(f"<td class=\"n\">{_e(c)}</td>" if i in numeric else f"<td>{_e(c)}</td>"
                                    for i, c in enumerate(r)) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def stacked_bars(groups, kinds=KINDS, width: int = 900) -> str:
    """Horizontal stacked bars (inline SVG): ``groups`` = [(label, {kind: value >= 0})]."""
    if not groups:
        return "<p class=\"note\">nothing to chart</p>"
    label_w, bar_h, gap = 300, 18, 6
    top = max(sum(max(0.0, float(v.get(k, 0.0))) for k in kinds) for _, v in groups) or 1.0
    scale = (width - label_w - 110) / top
    h = len(groups) * (bar_h + gap) + 10
    parts = [f"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{h}\" role=\"img\">"]
    for i, (label, vals) in enumerate(groups):
        y = 5 + i * (bar_h + gap)
        parts.append(f"<text x=\"{label_w - 6}\" y=\"{y + 13}\" text-anchor=\"end\" font-size=\"12\">"
                     f"{_e(label if len(label) <= 40 else label[:39] + '…')}</text>")
        x = float(label_w)
        total = 0.0
        for k in kinds:
            v = max(0.0, float(vals.get(k, 0.0)))
            w = v * scale
            total += v
            if w > 0:
                parts.append(f"<rect x=\"{x:.1f}\" y=\"{y}\" width=\"{max(w, 0.5):.1f}\" height=\"{bar_h}\" "
                             f"fill=\"{COLORS.get(k, '#888')}\"><title>{_e(label)}: {_e(k)} {_num(v)}</title></rect>")
            x += w
        parts.append(f"<text x=\"{x + 6:.1f}\" y=\"{y + 13}\" font-size=\"12\">{_num(total)}</text>")
    parts.append("</svg>")
    legend = "".join(f"<span><i style=\"background:{COLORS[k]}\"></i>{_e(k)}</span>" for k in kinds)
    return f"<div class=\"legend\">{legend}</div>" + "".join(parts)


# ------------------------------------------------------------------------------------------------
# solve


_WRAPPER = re.compile(r"^[A-Za-z_][\w.]*\((.*)\)$")          # jvp(decoder), transpose(jvp(x)), remat(f)
_TOP = re.compile(r"^(jit|pjit|xla_computation)\(([^)]*)\)$")
_NUMBERED = re.compile(r"^[A-Za-z][\w]*?[_.\-]?\d+$")            # layer_0, layers_11, block3, h.0


def _unwrap(part: str) -> str:
    """``transpose(jvp(decoder))`` -> ``decoder``: the name inside jax's transformation wrappers."""
    while True:
        m = _WRAPPER.match(part)
        if not m or not m.group(1):
            return part
        part = m.group(1)


def layer_of(op_name: str | None) -> str | None:
    """The layer an ``op_name`` belongs to: its path (after ``jit(f)/``, transformation wrappers such as
    ``jvp(...)`` / ``transpose(...)`` removed) up to and including the first component that ends in a
    number (``decoder/layer_0`` for ``jit(step)/jvp(decoder)/layer_0/attn/dot_general`` and for its
    backward ``jit(step)/transpose(jvp(decoder))/layer_0/...``); without such a component the first
    scope of the path (``decoder``) when the path has one, else None (the op alone says nothing)."""
    if not op_name:
        return None
    parts = [p for p in op_name.split("/") if p]
    if parts and _TOP.match(parts[0]):
        parts = parts[1:]
    parts = [_unwrap(p) for p in parts]
    for k, p in enumerate(parts[:-1]):
        if _NUMBERED.match(p):
            return "/".join(parts[:k + 1])
    return parts[0] if len(parts) > 1 else None


def _layer_key(instr, mode: str) -> str:
    if mode == "layer":
        return layer_of(instr.op_name) or "(no layer in op_name)"
    if mode == "computation":
        return instr.parent.name
    return instr.opcode


def cost_groups(graph, choice, ev, limit: int = 30):
    """(how, [(label, {kind: cost})]) of a priced choice: per layer (:func:`layer_of` of the ``op_name``)
    when at least two layers are named and a quarter of the instructions name one, else per computation
    when there are several, else per opcode.  Largest first; beyond ``limit`` groups the rest are summed
    as 'other'."""
    instrs = graph.schedule
    layers = [layer_of(i.op_name) for i in instrs]
    named = [x for x in layers if x is not None]
    comps = {id(i.parent) for i in instrs}
    if instrs and len(set(named)) >= 2 and len(named) >= 0.25 * len(instrs):
        mode = "layer"
    else:
        mode = "computation" if len(comps) > 1 else "opcode"
    sums: dict = {}
    for v, g in enumerate(graph.nodes):
        st = g.strategies[int(choice[v])]
        w = graph.ctx.weight(g.instr)
        d = sums.setdefault(_layer_key(g.instr, mode), {k: 0.0 for k in KINDS})
        d["compute"] += st.compute * w
        d["communication"] += st.comm * w
    for e in range(len(graph.edge_float)):
        for _inst, _leaf, g, _w in graph.edge_info[e][:1]:
            d = sums.setdefault(_layer_key(g.instr, mode), {k: 0.0 for k in KINDS})
            d["resharding"] += float(ev.edge_cost[e])
    rows = sorted(sums.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))
    if len(rows) > limit:
        rest = {k: sum(v[k] for _, v in rows[limit:]) for k in KINDS}
        rows = rows[:limit] + [(f"other ({len(rows) - limit})", rest)]
    return mode, rows


def top_collectives(graph, choice, limit: int = 15) -> list[dict]:
    """The most expensive collectives of a priced choice: the resharding steps on edges (planner) and
    the strategies' own collectives (``Strategy.collectives``), by cost then bytes."""

    rows = []
    for name, items in reshardings_of(graph, choice).items():
        for r in items:
            for s in r["steps"]:
                if s.get("kind") in (None, "unplannable", "dynamic-slice"):
                    continue
                groups = s.get("replica_groups") or []
                rows.append({"instruction": name, "why": f"resharding of {r['operand']}", "kind": s["kind"],
                             "group_size": len(groups[0]) if groups else 0, "groups": len(groups),
                             "bytes_per_device": int(s.get("bytes_per_device", 0)), "cost": float(s.get("cost", 0.0))})
    for v, g in enumerate(graph.nodes):
        st = g.strategies[int(choice[v])]
        for pc in getattr(st, "collectives", ()):
            rows.append({"instruction": g.instr.name, "why": f"its strategy: {describe_strategy(st, graph.mesh)}",
                         "kind": pc.kind,
                         "group_size": int(pc.group_size), "groups": 0, "bytes_per_device": int(pc.nbytes),
                         "cost": None})
    rows.sort(key=lambda r: (-(r["cost"] or 0.0), -r["bytes_per_device"], r["instruction"]))
    return rows[:limit]


def parameter_rows(graph, choice) -> list:
    out = []
    for p in graph.module.entry.parameters:
        sh = instruction_sharding(graph, p, choice)
        try:
            per = bytes_per_device(p.shape, sh)
        except Exception:  # noqa: BLE001 - unusual sharding kinds: show the full size
            per = p.shape.byte_size
        out.append((p.name, str(p.shape), str(sh), _bytes(per), _bytes(p.shape.byte_size)))
    return out


def solve_report_html(report: dict, result) -> str:
    """The ``solve --html`` page from the report JSON and the :class:`hloshard.autoshard.SolveResult`
    (charts use the written module's evaluation, the figures ``hloshard cost`` gives for the output)."""
    w = result.written
    graph, choice, ev = (w.graph, w.choice, w.evaluation) if w is not None else (result.graph, result.choice,
                                                                                 result.evaluation)
    b = report["breakdown"]
    ch = report.get("changed") or {}
    notes = report["mesh"].get("notes", []) if isinstance(report["mesh"], dict) else []
    summary = [("input", report.get("input")), ("output", report.get("output")),
               ("mesh", mesh_words(report))] + [("note", n) for n in notes] + [
               ("status", report.get("status_text") or report["status"]),
               ("cost (cost units)", f"{_num(report['objective'])} = compute {_num(b['compute'])} + communication "
                                     f"{_num(b['communication'])} + resharding {_num(b['resharding'])}"),
               ("input as given", _num(report["input_cost"]) if report.get("input_cost") is not None
                else (report.get("input_cost_note") or "-")),
               ("changed", f"{ch.get('changed', '-')} of {ch.get('instructions', '-')} instructions"),
               ("peak memory / device", _bytes(report["peak_memory_per_device"]) +
                (f" of {_bytes(report['memory_budget'])} budget" if report.get("memory_budget") else "")),
               ("cost graph", f"{report['nodes']:,} nodes, {report['edges']:,} edges")]
    mode, groups = cost_groups(graph, choice, ev)
    cols = top_collectives(graph, choice)
    body = ["<h2>Summary</h2>", table(None, summary, cls="summary"),
            f"<h2>Cost by kind, per {mode}</h2>", stacked_bars(groups),
            "<h2>Most expensive collectives</h2>",
            table(["instruction", "cause", "kind", "group size", "groups", "bytes / device", "cost"],
                  [(c["instruction"], c["why"], c["kind"], c["group_size"] or "-", c["groups"] or "-",
                    _bytes(c["bytes_per_device"]), "-" if c["cost"] is None else _num(c["cost"])) for c in cols],
                  numeric=(3, 4, 5, 6)) if cols else "<p class=\"note\">no collectives</p>",
            "<h2>Parameter shardings</h2>",
            table(["parameter", "shape", "sharding", "bytes / device", "bytes"], parameter_rows(graph, choice),
                  numeric=(3, 4))]
    if report.get("top_edges"):
        body += ["<h2>Most expensive resharding edges</h2>",
                 table(["from", "to", "cost", "source sharding"],
                       [(r["from"], r["to"], _num(r["cost"]), r["src_sharding"] or "") for r in report["top_edges"]],
                       numeric=(2,))]
    for wmsg in report.get("warnings", []):
        body.append(f"<p class=\"note\">warning: {_e(wmsg)}</p>")
    return page(f"hloshard solve: {report.get('input') or ''}", "\n".join(body))


# ------------------------------------------------------------------------------------------------
# explain and diff


def explain_report_html(data: dict) -> str:
    """The ``explain --html`` page from :meth:`hloshard.explain_instruction.Explanation.to_json`."""

    f = cost_formatter(data)   # cost units, or seconds with --device
    unit = f" (seconds on {data['device']})" if data.get("units") == "seconds" else ""

    src = data.get("source") or {}
    mc = data["module_cost"]
    summary = [("instruction", f"{data['instruction']} = {data['shape']} {data['opcode']}"),
               ("location", location_text(data)),
               ("source", source_text(src) or "-"),
               ("sharding", data.get("sharding") or "none"), ("module cost" + unit, f(mc["total"]))]
    body = ["<h2>Summary</h2>", table(None, summary, cls="summary")]
    for n in data["nodes"]:
        body.append(f"<h2>Strategy: {_e(n.get('strategy_description') or n['strategy'])}</h2>")
        body.append(stacked_bars([("this instruction", {"compute": n["compute"], "communication": n["communication"],
                                                         "resharding": n["resharding_in"]})]))
        body.append(table(["operand", "needs", "has", "resharding cost", "steps"],
                          [(o["operand"], o["required"], o["has"], f(o["resharding"]["cost"]) if o.get("resharding")
                            else "0", ", ".join(s["kind"] for s in o.get("resharding", {}).get("steps", [])))
                           for o in n["operands"]], numeric=(3,)))
    alts = data.get("alternatives") or []
    if alts:
        body.append("<h2>Best alternatives (neighbourhood re-solved)</h2>")
        body.append(table(["sharding", "total change", "compute", "communication", "resharding", "neighbours moved"],
                          [(a["sharding"], f(a["total_change"]), f(a["change"]["compute"]),
                            f(a["change"]["communication"]), f(a["change"]["resharding"]), len(a["changed"]))
                           for a in alts], numeric=(1, 2, 3, 4, 5)))
    return page(f"hloshard explain: {data['instruction']}", "\n".join(body))


def diff_report_html(report: dict) -> str:
    """The ``diff --html`` page from :func:`hloshard.diff.diff_plans`' report."""

    f = cost_formatter(report)
    t = report["totals"]
    rows = [(k, f(t[k]["a"]), f(t[k]["b"]), f(t[k]["change"])) for k in ("total",) + KINDS]
    m = t["peak_memory_per_device"]
    rows.append(("peak memory / device", _bytes(m["a"]), _bytes(m["b"]), _bytes(m["change"]) if m["change"] >= 0
                 else "-" + _bytes(-m["change"])))
    diffs = report["differences"][:50]
    body = [f"<p>A = <code>{_e(report.get('a'))}</code>, B = <code>{_e(report.get('b'))}</code>; "
            f"{report['differing']:,} of {report['instructions']:,} instructions sharded differently "
            f"({_e(COUNTED)})</p>",
            "<h2>Totals" + (f" (seconds on {_e(report['device'])})" if report.get("units") == "seconds" else "")
            + "</h2>", table(["", "A", "B", "change"], rows, numeric=(1, 2, 3)),
            "<h2>Cost by kind, A and B</h2>",
            stacked_bars([("A", {k: t[k]["a"] for k in KINDS}), ("B", {k: t[k]["b"] for k in KINDS})]),
            "<h2>Largest differences</h2>",
            table(["instruction", "sharding A", "sharding B", "total change", "compute", "communication",
                   "resharding"],
                  [(d["instruction"], d["sharding_a"] + (" *" if d.get("chosen_a") else ""),
                    d["sharding_b"] + (" *" if d.get("chosen_b") else ""), f(d["total_change"]),
                    f(d["change"]["compute"]), f(d["change"]["communication"]), f(d["change"]["resharding"]))
                   for d in diffs], numeric=(3, 4, 5, 6))]
    for side, key in (("A", "a"), ("B", "b")):
        if any(d.get(f"chosen_{key}") for d in diffs):
            body.append(f"<p class=\"note\">* sharding {side}: not in {side}, chosen by hloshard cost: "
                        f"{_e(report.get('completion', {}).get(key, 'the cheapest consistent completion'))}</p>")
    return page("hloshard diff", "\n".join(body))
