"""Which tensors dominate peak memory: the live tensors at the peak liveness point of a solved module.

Reads the cost graph's liveness (``Problem.intervals``: node v is live at points ``[lo, hi)``; its
``node_usages[v][s]``: bytes per device under strategy s) and the chosen strategies, the same data
``autoshard.peak_memory`` sums, and lists the largest contributors at the point where the sum peaks.
"""

from __future__ import annotations

from .autoshard import instruction_sharding
from .autoshard.build import edge_buffers

__all__ = ["peak_tensors", "peak_tensors_of"]


def peak_tensors(graph, choice, time: int, k: int = 5) -> list[dict]:
    """The ``k`` largest tensors live at liveness point ``time`` under ``choice``, largest first:
    ``{"name", "shape", "sharding", "bytes_per_device", "share"}`` (share of the point's total, 0..1).
    Several nodes of one instruction (tuple leaves) are summed under its name; the temporaries live
    there that are no instruction's output (:func:`hloshard.autoshard.build.edge_buffers`: collectives'
    other sides, resharded operands, relayout copies, a grouped convolution's expansion) are one row,
    ``"(temporaries)"`` (shape and sharding None), when they are among the largest."""
    p = graph.problem
    per: dict = {}
    total = 0
    for v in range(p.num_nodes):
        if p.intervals[v, 0] <= time < p.intervals[v, 1]:
            u = int(p.node_usages[v][int(choice[v])])
            if u <= 0:
                continue
            instr = graph.nodes[v].instr
            per[instr] = per.get(instr, 0) + u
            total += u
    # the communication buffers of the choice live at ``time`` (not in the problem's nodes)
    eiv, esz = edge_buffers(graph, choice)
    comm = sum(int(b) for (lo, hi), b in zip(eiv, esz) if lo <= time < hi)
    total += comm
    order = sorted(per.items(), key=lambda kv: (-kv[1], kv[0].name))[:k]
    out = []
    for instr, u in order:
        try:
            sh = str(instruction_sharding(graph, instr, choice))
        except Exception:  # noqa: BLE001 - the report must not fail on a display detail
            sh = str(instr.sharding) if instr.sharding is not None else None
        out.append({"name": instr.name, "shape": str(instr.shape), "sharding": sh, "bytes_per_device": u,
                    "share": round(u / total, 4) if total else 0.0})
    if comm > 0 and (len(out) < k or comm > out[-1]["bytes_per_device"]):
        row = {"name": "(temporaries)", "shape": None, "sharding": None, "bytes_per_device": comm,
               "share": round(comm / total, 4) if total else 0.0}
        out = sorted(out + [row], key=lambda d: -d["bytes_per_device"])[:k]
    return out


def peak_tensors_of(result, k: int = 5) -> list[dict]:
    """:func:`peak_tensors` at the peak of a :class:`~hloshard.autoshard.SolveResult`, for the shardings
    as written (``result.written``) when available, as the solve report's peak memory is."""
    w = result.written
    g, choice, ev = (w.graph, w.choice, w.evaluation) if w is not None else \
        (result.graph, result.choice, result.evaluation)
    return peak_tensors(g, choice, ev.peak_time, k)
