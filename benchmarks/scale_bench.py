#!/usr/bin/env python3
"""Issue 26's scale table: ``hloshard solve`` on big modules, each pinned to two CPU cores.

Every case is one ``hloshard solve MODULE --mesh MESH --time-limit LIMIT`` in a child process whose CPU
affinity is one pair of cores (``os.sched_setaffinity`` before exec), so that on a machine with many idle
cores several cases run side by side and each still sees the 2 cores issue 26 measures on (they share the
memory bus and the last-level cache: say so beside the figures). Per case: exit code, wall seconds of the
command, user + system CPU seconds, peak RSS twice -- ``os.wait4``'s ``ru_maxrss`` of the child and the
largest ``VmRSS`` read from ``/proc/PID/status`` every 0.2 s (a sandbox such as gVisor may report a
``ru_maxrss`` that is not the process's own) -- and from the
``--report`` JSON the status, objective (cost units), lower bound, gap and the time phases.

Usage::

    python benchmarks/scale_bench.py --case PATH@MESH [--case PATH@MESH@LIMIT ...] [--time-limit 60]
        [--cores 0-1,2-3] [--workdir DIR] [--json OUT.json] [-- EXTRA SOLVE ARGS]

``--cores``: the core pairs to use, one case per pair at a time (default: one pair, ``0-1``). Prints a
Markdown table and writes the rows as JSON. Raises SystemExit(2) on a case without ``@MESH`` or a pair
that is not ``A-B``. Only the standard library and hloshard (in the child) are used.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


def parse_case(text: str, default_limit: float) -> tuple[pathlib.Path, str, float]:
    """``PATH@MESH[@LIMIT]`` -> (path, mesh, limit seconds); SystemExit(2) when malformed."""
    parts = text.split("@")
    if len(parts) not in (2, 3) or not parts[0] or not parts[1]:
        raise SystemExit(f"scale_bench: --case {text!r}: expected PATH@MESH or PATH@MESH@LIMIT")
    limit = float(parts[2]) if len(parts) == 3 else default_limit
    return pathlib.Path(parts[0]), parts[1], limit


def parse_pairs(text: str) -> list[set[int]]:
    """``0-1,2-3`` -> [{0, 1}, {2, 3}]; SystemExit(2) when malformed."""
    pairs = []
    for item in text.split(","):
        a, sep, b = item.partition("-")
        if not sep or not a.isdigit() or not b.isdigit():
            raise SystemExit(f"scale_bench: --cores {text!r}: expected pairs like 0-1,2-3")
        pairs.append({int(a), int(b)})
    return pairs


def start(path: pathlib.Path, mesh: str, limit: float, cores: set[int], workdir: pathlib.Path,
          extra: list[str]) -> tuple[subprocess.Popen, dict]:
    """Start one solve pinned to ``cores``; returns the child and its row (filled by :func:`finish`)."""
    name = f"{path.stem}.{mesh}"
    out, report = workdir / f"{name}.solved.hlo", workdir / f"{name}.report.json"
    cmd = [sys.executable, "-m", "hloshard", "solve", str(path), "--mesh", mesh, "--time-limit", str(limit),
           "-o", str(out), "--report", str(report), "--quiet", *extra]
    log = open(workdir / f"{name}.stderr", "wb")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, cwd=ROOT,
                            preexec_fn=lambda: os.sched_setaffinity(0, cores))
    log.close()
    row = {"module": path.name, "mesh": mesh, "limit_s": limit, "cores": sorted(cores), "cmd": cmd,
           "report": str(report), "stderr": str(workdir / f"{name}.stderr"), "t0": time.monotonic()}
    return proc, row


def vmrss_kb(pid: int) -> int:
    """The resident set (kB) of ``pid`` now, from ``/proc/PID/status``; 0 when it cannot be read."""
    try:
        for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def finish(proc: subprocess.Popen, status: int, usage, row: dict) -> dict:
    """Fill ``row`` with the child's exit, wall, CPU, RSS and its report's figures."""
    row["wall_s"] = round(time.monotonic() - row.pop("t0"), 2)
    row["exit"] = os.waitstatus_to_exitcode(status)
    row["cpu_s"] = round(usage.ru_utime + usage.ru_stime, 2)
    row["rss_mb"] = round(usage.ru_maxrss / 1024, 1)
    row["vmrss_max_mb"] = round(row.pop("vmrss_kb", 0) / 1024, 1)
    try:
        rep = json.loads(pathlib.Path(row["report"]).read_text())
    except (OSError, ValueError):
        rep = {}
    for key in ("status", "objective", "bound", "gap", "nodes", "strategies", "seconds_build", "seconds_solve",
                "seconds_phases", "peak_memory_per_device", "written_mesh", "status_text"):
        if key in rep:
            row[key] = rep[key]
    if row["exit"] != 0:
        row["stderr_tail"] = pathlib.Path(row["stderr"]).read_text(errors="replace")[-600:]
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", action="append", required=True, help="PATH@MESH or PATH@MESH@LIMIT")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--cores", default="0-1")
    ap.add_argument("--workdir", default="/tmp/scale_bench")
    ap.add_argument("--json", default=None)
    ap.add_argument("extra", nargs=argparse.REMAINDER, help="after --: more `hloshard solve` arguments")
    ns = ap.parse_args(argv)
    extra = ns.extra[1:] if ns.extra[:1] == ["--"] else ns.extra
    cases = [parse_case(c, ns.time_limit) for c in ns.case]
    free = parse_pairs(ns.cores)
    workdir = pathlib.Path(ns.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    running: dict[int, tuple[subprocess.Popen, dict, set[int]]] = {}
    rows = []
    todo = list(cases)
    while todo or running:
        while todo and free:
            path, mesh, limit = todo.pop(0)
            cores = free.pop(0)
            proc, row = start(path, mesh, limit, cores, workdir, extra)
            running[proc.pid] = (proc, row, cores)
        pid, status, usage = os.wait4(-1, os.WNOHANG)
        if pid == 0:
            for cpid, (_, row, _) in running.items():
                row["vmrss_kb"] = max(row.get("vmrss_kb", 0), vmrss_kb(cpid))
            time.sleep(0.2)
            continue
        if pid not in running:
            continue
        proc, row, cores = running.pop(pid)
        rows.append(finish(proc, status, usage, row))
        free.append(cores)
        r = rows[-1]
        if ns.json:   # after every case: a run stopped by its caller keeps what ended
            pathlib.Path(ns.json).write_text(json.dumps(rows, indent=1))
        print(f"{r['module']} {r['mesh']}: exit {r['exit']}, {r['wall_s']} s, {r['cpu_s']} CPU-s, "
              f"{r['rss_mb']} MB, {r.get('status')} {r.get('objective')} gap {r.get('gap')}", flush=True)
    if ns.json:
        pathlib.Path(ns.json).write_text(json.dumps(rows, indent=1))
    print("| module | mesh | nodes / strategies | limit | exit | wall s | CPU s | peak RSS MB (ru_maxrss / VmRSS) | build / solve s | status "
          "| objective | gap |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['module']} | {r['mesh']} | {r.get('nodes', '-')} / {r.get('strategies', '-')} | {r['limit_s']:g} | "
              f"{r['exit']} | {r['wall_s']} | {r['cpu_s']} | {r['rss_mb']} / {r['vmrss_max_mb']} | {r.get('seconds_build', '-')} / "
              f"{r.get('seconds_solve', '-')} | {r.get('status', '-')} | {r.get('objective', '-')} | "
              f"{r.get('gap', '-')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
