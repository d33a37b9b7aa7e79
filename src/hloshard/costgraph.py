"""The auto-sharding cost graph: exactly the IOPDDL problem structure.

A :class:`Problem` has one *node* per value that needs a sharding decision (an HLO instruction, or
a leaf of a tuple-shaped one).  Each node has a list of candidate *strategies*; each strategy has a
cost (compute + communication, in integer cost units) and a memory usage (bytes per device).  Each
*edge* (u, v) carries a ``|S_u| x |S_v|`` matrix of resharding costs: entry ``[a, b]`` is paid when u
picks strategy ``a`` and v picks ``b``.  Every node has a half-open liveness interval ``[lo, hi)``
over the program's schedule; at every time ``t`` the usages of the chosen strategies of the nodes
live at ``t`` must add up to at most ``usage_limit`` bytes.  A cost ``>= INFINITY`` (1e18) marks a
forbidden choice.

The file format is the one of the ASPLOS/EuroSys 2025 IOPDDL contest (google/iopddl)::

    {"problem": {"name": ..., "nodes": {"intervals": [[lo, hi], ...], "costs": [[...], ...],
                                        "usages": [[...], ...]},
                 "edges": {"nodes": [[u, v], ...], "costs": [[row-major |S_u|*|S_v|], ...]},
                 "usage_limit": N}}

hloshard adds two optional keys that other readers ignore: ``"cost_scale"`` (cost units per integer
unit: the HLO side scales its float costs to integers) and ``"aliases"`` (pairs of nodes whose
strategies are constrained together, e.g. donated input/output buffers that must keep one sharding):
``"aliases": [{"nodes": [u, v], "allowed": [[a, b], ...]}, ...]`` lists the allowed ``(a, b)`` pairs.
"""

from __future__ import annotations

import gzip
import io
import json
import zlib
from dataclasses import dataclass, field

import numpy as np

from .errors import InputError
from .cost.liveness import usage_profile
from .io import cannot_read, max_input_bytes, read_limited, write_chunks_atomic

#: Any cost >= INFINITY marks a forbidden choice (the IOPDDL / XLA convention, ``kInfinityInt``).
INFINITY = 10**18


@dataclass
class Problem:
    """An IOPDDL auto-sharding problem.

    Attributes:
        name: free text.
        intervals: ``(N, 2)`` int64, per node the half-open liveness interval ``[lo, hi)`` in schedule
            steps; ``hi <= lo`` means the node is never live (its usage never counts).
        node_costs: per node an int64 vector, one cost per strategy (integer cost units).
        node_usages: per node an int64 vector, one memory usage per strategy (bytes per device).
        edges: ``(E, 2)`` int64 node index pairs.
        edge_costs: per edge an int64 matrix of shape ``(|S_u|, |S_v|)``.
        usage_limit: memory limit (bytes per device) or None for no limit.
        cost_scale: cost units per integer unit (1.0 for contest files).
        aliases: list of ``(u, v, allowed)`` with ``allowed`` a bool matrix ``(|S_u|, |S_v|)``: the
            pair of strategies must be one where ``allowed`` is True (no cost).
    """

    name: str
    intervals: np.ndarray
    node_costs: list
    node_usages: list
    edges: np.ndarray
    edge_costs: list
    usage_limit: int | None = None
    cost_scale: float = 1.0
    aliases: list = field(default_factory=list)

    @property
    def num_nodes(self) -> int:
        return len(self.node_costs)

    @property
    def num_edges(self) -> int:
        return len(self.edge_costs)

    @property
    def strategy_counts(self) -> np.ndarray:
        """``(N,)`` int64: number of strategies per node."""
        return np.fromiter((len(c) for c in self.node_costs), dtype=np.int64, count=self.num_nodes)

    def validate(self) -> None:
        """Check the structural invariants; raise :class:`InputError` naming the first broken one."""
        n = self.num_nodes
        if self.intervals.shape != (n, 2):
            raise InputError(f"problem {self.name!r}: {len(self.intervals)} intervals for {n} nodes")
        if len(self.node_usages) != n:
            raise InputError(f"problem {self.name!r}: {len(self.node_usages)} usage lists for {n} nodes")
        for i, (c, u) in enumerate(zip(self.node_costs, self.node_usages)):
            if c.ndim != 1 or len(c) == 0:
                raise InputError(f"problem {self.name!r}: node {i} has no strategies")
            if u.shape != c.shape:
                raise InputError(f"problem {self.name!r}: node {i} has {len(c)} costs but {len(u)} usages")
        if self.edges.shape != (len(self.edge_costs), 2):
            raise InputError(f"problem {self.name!r}: {len(self.edges)} edges but {len(self.edge_costs)} cost lists")
        if len(self.edges) and (self.edges.min() < 0 or self.edges.max() >= n):
            bad = int(np.nonzero((self.edges < 0).any(1) | (self.edges >= n).any(1))[0][0])
            raise InputError(f"problem {self.name!r}: edge {bad} refers to a node outside 0..{n - 1}")
        counts = self.strategy_counts
        for k, ((u, v), m) in enumerate(zip(self.edges, self.edge_costs)):
            if m.shape != (counts[u], counts[v]):
                raise InputError(f"problem {self.name!r}: edge {k} ({u}, {v}) has {m.size} costs, expected "
                                 f"{counts[u]} x {counts[v]} = {counts[u] * counts[v]}")
        for k, (u, v, allowed) in enumerate(self.aliases):
            if not (0 <= u < n and 0 <= v < n) or allowed.shape != (counts[u], counts[v]):
                raise InputError(f"problem {self.name!r}: alias {k} ({u}, {v}) does not match the nodes")


def _int_array(values, what: str) -> np.ndarray:
    try:
        arr = np.asarray(values)
        if arr.dtype.kind == "f":
            if not np.isfinite(arr).all():
                raise ValueError("not finite")
            arr = np.minimum(arr, float(INFINITY))
            if np.any(arr != np.floor(arr)):
                raise ValueError("not an integer")
        elif arr.dtype.kind not in "iub":
            if arr.dtype == object:  # Python ints beyond int64: clamp to INFINITY
                arr = np.array([min(int(x), INFINITY) for x in np.ravel(arr)]).reshape(arr.shape)
            else:
                raise ValueError(f"{arr.dtype}")
        return np.minimum(arr, INFINITY).astype(np.int64)
    except (ValueError, TypeError, OverflowError) as exc:
        raise InputError(f"{what}: expected integers ({exc})") from None


def problem_from_json(data: dict, source: str = "<json>") -> Problem:
    """Build a :class:`Problem` from the parsed IOPDDL JSON document (``{"problem": {...}}``).

    Raises InputError on a missing key or a wrongly sized array (the message names it).
    """
    try:
        p = data["problem"] if isinstance(data, dict) and "problem" in data else data
        nodes = p["nodes"]
        edges = p["edges"]
        intervals_raw = nodes["intervals"]
        costs_raw = nodes["costs"]
        usages_raw = nodes["usages"]
        edge_nodes_raw = edges["nodes"]
        edge_costs_raw = edges["costs"]
    except KeyError as exc:
        raise InputError(f"{source}: not an IOPDDL problem: missing {exc}") from None
    except TypeError:
        raise InputError(f"{source}: not an IOPDDL problem: expected {{\"problem\": {{\"nodes\": {{...}}, "
                         f"\"edges\": {{...}}}}}} with objects where the format has them") from None
    n = len(costs_raw)
    intervals = _int_array(intervals_raw, f"{source}: nodes.intervals") if n else np.zeros((0, 2), np.int64)
    if intervals.shape != (n, 2):
        raise InputError(f"{source}: nodes.intervals must be {n} pairs [lo, hi]")
    node_costs = [_int_array(c, f"{source}: nodes.costs[{i}]") for i, c in enumerate(costs_raw)]
    if len(usages_raw) != n:
        raise InputError(f"{source}: {len(usages_raw)} usage lists for {n} nodes")
    node_usages = [_int_array(u, f"{source}: nodes.usages[{i}]") for i, u in enumerate(usages_raw)]
    for i, c in enumerate(node_costs):
        if c.ndim != 1 or len(c) == 0:
            raise InputError(f"{source}: node {i} has no strategies")
        if node_usages[i].size and node_usages[i].min() < 0:
            raise InputError(f"{source}: node {i} has a negative memory usage")
        if node_usages[i].shape != c.shape:
            raise InputError(f"{source}: node {i} has {len(c)} costs but {node_usages[i].size} usages")
    m = len(edge_nodes_raw)
    edge_nodes = _int_array(edge_nodes_raw, f"{source}: edges.nodes") if m else np.zeros((0, 2), np.int64)
    if edge_nodes.shape != (m, 2) or len(edge_costs_raw) != m:
        raise InputError(f"{source}: edges.nodes must be {len(edge_costs_raw)} pairs [u, v]")
    if m and (edge_nodes.min() < 0 or edge_nodes.max() >= n):
        raise InputError(f"{source}: an edge refers to a node outside 0..{n - 1}")
    counts = [len(c) for c in node_costs]
    edge_costs = []
    for k, c in enumerate(edge_costs_raw):
        u, v = int(edge_nodes[k, 0]), int(edge_nodes[k, 1])
        arr = _int_array(c, f"{source}: edges.costs[{k}]")
        if arr.ndim == 2:
            arr = arr.reshape(-1)
        if arr.size != counts[u] * counts[v]:
            raise InputError(f"{source}: edge {k} ({u}, {v}) has {arr.size} costs, expected "
                             f"{counts[u]} x {counts[v]} = {counts[u] * counts[v]}")
        edge_costs.append(arr.reshape(counts[u], counts[v]))
    limit = p.get("usage_limit")
    if limit is not None:
        try:
            limit = int(limit)
        except (TypeError, ValueError):
            raise InputError(f"{source}: usage_limit must be an integer") from None
        if limit < 0:
            raise InputError(f"{source}: usage_limit must not be negative, got {limit}")
    try:
        scale = float(p.get("cost_scale", 1.0))
    except (TypeError, ValueError):
        raise InputError(f"{source}: cost_scale must be a number") from None
    aliases = []
    for k, a in enumerate(p.get("aliases", []) or []):
        try:
            u, v = (int(x) for x in a["nodes"])
            allowed = np.zeros((counts[u], counts[v]), dtype=bool)
            pairs = np.asarray(a["allowed"], dtype=np.int64).reshape(-1, 2)
            allowed[pairs[:, 0], pairs[:, 1]] = True
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise InputError(f"{source}: aliases[{k}] is malformed ({exc})") from None
        aliases.append((u, v, allowed))
    problem = Problem(name=str(p.get("name", "")), intervals=intervals, node_costs=node_costs,
                      node_usages=node_usages, edges=edge_nodes, edge_costs=edge_costs,
                      usage_limit=limit, cost_scale=scale, aliases=aliases)
    return problem


def load_problem(path: str) -> Problem:
    """Read an IOPDDL problem from ``path`` (``.json`` or ``.json.gz``, gzip detected by content).

    Raises InputError for an unreadable, non-JSON or malformed file (one clear line).
    Memory: the JSON text is parsed once and every list is turned into an int64 array right away.
    """

    try:
        with open(path, "rb") as fh:
            raw = read_limited(fh, path)
    except OSError as exc:
        raise InputError(cannot_read(path, exc)) from None
    if raw[:2] == b"\x1f\x8b":
        try:    # decompressed size capped too: a gzip bomb is an input error, not an out-of-memory
            with gzip.GzipFile(fileobj=io.BytesIO(raw)) as gz:
                raw = read_limited(gz, f"{path} (decompressed)", 4 * max_input_bytes())
        except (OSError, EOFError) as exc:
            raise InputError(f"{path}: corrupt gzip data ({exc})") from None
    if not raw.strip():
        raise InputError(f"{path}: empty file (expected an IOPDDL problem in JSON)")
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:  # located: the CLI prints FILE:LINE:COL: error: ...
        raise InputError(f"not valid JSON: {exc.msg}", filename=str(path), line=exc.lineno,
                         column=exc.colno) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not valid JSON ({exc})") from None
    del raw
    if not isinstance(data, dict):
        raise InputError(f"{path}: not an IOPDDL problem (top level is not an object)")
    return problem_from_json(data, source=path)


def problem_to_json(problem: Problem) -> dict:
    """The IOPDDL JSON document of ``problem`` (plus ``cost_scale`` / ``aliases`` when not default)."""
    p: dict = {
        "name": problem.name,
        "nodes": {
            "intervals": problem.intervals.tolist(),
            "costs": [c.tolist() for c in problem.node_costs],
            "usages": [u.tolist() for u in problem.node_usages],
        },
        "edges": {
            "nodes": problem.edges.tolist(),
            "costs": [c.reshape(-1).tolist() for c in problem.edge_costs],
        },
    }
    if problem.usage_limit is not None:
        p["usage_limit"] = int(problem.usage_limit)
    if problem.cost_scale != 1.0:
        p["cost_scale"] = problem.cost_scale
    if problem.aliases:
        p["aliases"] = [{"nodes": [int(u), int(v)], "allowed": np.argwhere(a).tolist()}
                        for u, v, a in problem.aliases]
    return {"problem": p}


def problem_json_chunks(problem: Problem):
    """The text of ``json.dumps(problem_to_json(problem), separators=(",", ":"))``, byte for byte, as a stream
    of ``str`` pieces of at most one array each: a problem of millions of strategies is written without its
    Python-list form (the 48-layer transformer's graph at 2x2x2 took more than 10 GB that way, round 32)."""
    d = lambda x: json.dumps(x, separators=(",", ":"))   # noqa: E731 -- the one formatting, as problem_to_json's
    yield '{"problem":{"name":' + d(problem.name) + ',"nodes":{"intervals":' + d(problem.intervals.tolist())
    for key, arrays in (("costs", problem.node_costs), ("usages", problem.node_usages)):
        yield ',"' + key + '":['
        for k, a in enumerate(arrays):
            yield ("," if k else "") + d(a.tolist())
        yield "]"
    yield '},"edges":{"nodes":' + d(problem.edges.tolist()) + ',"costs":['
    for k, c in enumerate(problem.edge_costs):
        yield ("," if k else "") + d(c.reshape(-1).tolist())
    yield "]}"
    if problem.usage_limit is not None:
        yield ',"usage_limit":' + d(int(problem.usage_limit))
    if problem.cost_scale != 1.0:
        yield ',"cost_scale":' + d(problem.cost_scale)
    if problem.aliases:
        yield ',"aliases":['
        for k, (u, v, a) in enumerate(problem.aliases):
            yield ("," if k else "") + d({"nodes": [int(u), int(v)], "allowed": np.argwhere(a).tolist()})
        yield "]"
    yield "}}"


def _gzipped(chunks):
    """``chunks`` (bytes) gzip-compressed as a stream: level 9, no file name, modification time 0 (byte-identical
    output for identical problems)."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)   # wbits 31: a gzip header (mtime 0) and trailer
    for c in chunks:
        out = z.compress(c)
        if out:
            yield out
    yield z.flush()


def save_problem(problem: Problem, path: str) -> None:
    """Write ``problem`` as IOPDDL JSON to ``path`` (:func:`problem_to_json`'s document); gzip-compressed when
    it ends in ``.gz``.  Streamed (:func:`problem_json_chunks`): memory beyond the problem's own arrays is one
    array's text at a time.

    Written atomically (temporary file, then rename). Raises UsageError when not writable.
    """
    data = (c.encode() for c in problem_json_chunks(problem))
    write_chunks_atomic(path, _gzipped(data) if path.endswith(".gz") else data)


def liveness_points(intervals) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The liveness points of half-open intervals and each interval's range of points.

    ``intervals``: ``(N, 2)`` int array of ``[lo, hi)`` schedule steps (``hi <= lo``: never live).
    Returns ``(times, start, end)``: ``times`` the sorted distinct starts of the live intervals (usage
    is piecewise constant and only increases at a start, so these points include every maximum);
    interval ``i`` is live at the points ``start[i] <= k < end[i]`` (``start = end = 0`` when never
    live).  The indexed form of :func:`hloshard.cost.liveness.usage_profile` (same points), which the
    solver's memory model and the presolve need.
    """
    intervals = np.asarray(intervals, dtype=np.int64).reshape(-1, 2)
    lo, hi = intervals[:, 0], intervals[:, 1]
    live = hi > lo
    times = np.unique(lo[live])
    start = np.searchsorted(times, lo)
    end = np.searchsorted(times, hi)   # first point >= hi: not live there
    start[~live] = 0
    end[~live] = 0
    return times, start.astype(np.int64), end.astype(np.int64)


def usage_at_points(num_points: int, start, end, values) -> np.ndarray:
    """``(num_points,)`` int64: at each point ``k`` the sum of ``values[i]`` over the ranges
    ``start[i] <= k < end[i]`` (bytes per device when ``values`` are usages)."""
    diff = np.zeros(num_points + 1, dtype=np.int64)
    np.add.at(diff, start, values)
    np.add.at(diff, end, -np.asarray(values, dtype=np.int64))
    return np.cumsum(diff)[:-1]


def live_usage_profile(problem: Problem, strategies) -> tuple[np.ndarray, np.ndarray]:
    """Memory usage over time for a choice of strategies.

    Returns ``(times, usage)``: ``times`` the liveness points (:func:`liveness_points`), ``usage[k]``
    the total usage (bytes per device) of the nodes live at ``times[k]``
    (:func:`hloshard.cost.liveness.usage_profile` of the chosen usages).
    """

    s = np.asarray(strategies, dtype=np.int64)
    use = np.fromiter((u[k] for u, k in zip(problem.node_usages, s)), dtype=np.int64, count=len(s))
    return usage_profile(problem.intervals, use)


def aliases_kept(problem: Problem, strategies) -> bool:
    """Whether ``strategies`` (one index per node, in range) takes an allowed pair of every alias of
    ``problem`` (tied outputs and parameters): the alias part of :func:`evaluate`'s feasibility."""
    return all(bool(allowed[int(strategies[u]), int(strategies[v])]) for u, v, allowed in problem.aliases)


def evaluate(problem: Problem, strategies) -> tuple[int, bool]:
    """Objective and feasibility of a strategy choice (one index per node).

    Returns ``(objective, feasible)``: objective is the exact (Python int, may exceed int64) sum of
    chosen node costs plus chosen edge costs; feasible is False when a chosen cost is >= INFINITY, an
    alias pair is not allowed, or the live usage exceeds ``usage_limit`` at some time.
    Raises InputError when ``strategies`` has the wrong length or an index out of range.
    """
    s = np.asarray(strategies, dtype=np.int64)
    if s.shape != (problem.num_nodes,):
        raise InputError(f"expected {problem.num_nodes} strategies, got {s.size}")
    counts = problem.strategy_counts
    if len(s) and (s.min() < 0 or np.any(s >= counts)):
        bad = int(np.nonzero((s < 0) | (s >= counts))[0][0])
        raise InputError(f"strategy {int(s[bad])} of node {bad} is out of range 0..{int(counts[bad]) - 1}")
    node = [int(c[k]) for c, k in zip(problem.node_costs, s)]
    edge = [int(m[s[u], s[v]]) for (u, v), m in zip(problem.edges, problem.edge_costs)]
    feasible = all(c < INFINITY for c in node) and all(c < INFINITY for c in edge) and aliases_kept(problem, s)
    if problem.usage_limit is not None and feasible:
        _, usage = live_usage_profile(problem, s)
        if len(usage) and usage.max() > problem.usage_limit:
            feasible = False
    return sum(node) + sum(edge), feasible
