#!/usr/bin/env python3
"""Benchmark ``hloshard solve`` against XLA's own GSPMD propagation, side by side.

For every sample in ``samples/`` and for generated N-layer transformer training steps
(``scripts/make_transformer.py``; default 12 and 48 layers), on a 2x4 mesh with ``--keep-shardings io``:

* ``hloshard solve NAME.pre.hlo`` in a child process (``--report`` JSON): build seconds (parse excluded),
  solve seconds, total wall seconds of the command, status, objective, CP-SAT bound and gap, peak memory
  per device under the solution, and the child's peak RSS (``os.wait4``);
* ``hloshard cost NAME.propagated.hlo`` (XLA's GSPMD-propagated module) for the comparison objective.

Prints a Markdown table (for BENCHMARKS.md) and writes the raw figures as JSON (``--json``).

``--ladder MESHES`` (e.g. ``8,2x4,2x2x2``; issue 26) instead solves each of ``--modules`` (default: the
samples above) on every mesh of the list, coarsest first, and prints per module and mesh: the
objective (the report's), ``hloshard cost`` of the written module on that mesh, the solver's proven lower bound (cost
units), the same for the module written at the first (1-D) mesh, priced on this mesh (the finer mesh must never be costlier), gap, solve and total
seconds, peak RSS of the solve, and the strategy space: strategies per node of the cost graph, per node
of the solver's problem after presolve (its exact reductions, dominated strategies included), and the
classes per node under permutations of interchangeable mesh axes (equal size, alpha and beta; a
measure of the symmetry, not a reduction the search makes).

Usage::

    python benchmarks/solve_bench.py [--layers 12,48] [--time-limit 60] [--json out.json] [--workdir DIR]
    python benchmarks/solve_bench.py --ladder 8,2x4,2x2x2 --modules a.hlo,b.hlo [--time-limit 30] [--deterministic] [--no-space]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
SAMPLES = ["mlp_train_step", "transformer_block", "transformer_train_step", "conv_layer"]


def run(cmd: list[str]) -> tuple[int, float, int, str]:
    """(exit code, wall seconds, peak RSS bytes, stderr) of a child process."""
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    err = proc.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, time.monotonic() - t0, usage.ru_maxrss * 1024, err


def bench_case(name: str, pre: pathlib.Path, propagated: pathlib.Path, time_limit: float, workdir: pathlib.Path,
               mesh: str) -> dict:
    exe = [sys.executable, "-m", "hloshard.cli"]
    report = workdir / f"{name}.report.json"
    cmd = exe + ["solve", str(pre), "--mesh", mesh, "-o", str(workdir / f"{name}.solved.hlo"), "--report",
                 str(report), "--time-limit", str(time_limit), "--quiet"]
    rc, wall, rss, err = run(cmd)
    row = {"name": name, "exit": rc, "wall": round(wall, 2), "rss": rss}
    if rc == 0:
        rep = json.loads(report.read_text())
        row.update({k: rep[k] for k in ("status", "objective", "bound", "gap", "seconds_build", "seconds_solve",
                                        "peak_memory_per_device", "nodes", "edges", "solver_nodes",
                                        "solver_edges", "strategies")})
    else:
        row["error"] = err.strip().splitlines()[-1:] if err else []
    cost_json = workdir / f"{name}.cost.json"
    rc2, wall2, _, err2 = run(exe + ["cost", str(propagated), "--mesh", mesh, "--format", "json", "-o",
                                     str(cost_json)])
    if rc2 == 0:
        c = json.loads(cost_json.read_text())
        row["gspmd_cost"] = c["total_cost"]
        row["gspmd_peak_memory_per_device"] = c["peak_memory_per_device"]
    row["cost_wall"] = round(wall2, 2)
    return row


def fmt_table(rows: list[dict]) -> str:
    head = ("| module | nodes (solver) | strategies | build s | solve s | total s | status | objective | "
            "bound | gap | GSPMD cost | objective / GSPMD | peak mem/device | RSS |")
    lines = [head, "|" + "---|" * 14]
    for r in rows:
        if r.get("exit") != 0:
            lines.append(f"| {r['name']} | exit {r['exit']}: {' '.join(r.get('error', []))} |" + " |" * 12)
            continue
        ratio = r["objective"] / r["gspmd_cost"] if r.get("gspmd_cost") else float("nan")
        gap = "-" if r["gap"] is None else f"{r['gap']:.1%}"
        bound = "-" if r["bound"] is None else f"{r['bound']:,.0f}"
        lines.append(
            f"| {r['name']} | {r['nodes']:,} ({r['solver_nodes']:,}) | {r['strategies']:,} | "
            f"{r['seconds_build']:.1f} | {r['seconds_solve']:.1f} | {r['wall']:.1f} | {r['status']} | "
            f"{r['objective']:,.0f} | {bound} | {gap} | {r.get('gspmd_cost', float('nan')):,.0f} | {ratio:.3f} | "
            f"{r['peak_memory_per_device'] / 2**20:,.1f} MiB | {r['rss'] / 2**20:,.0f} MiB |")
    return "\n".join(lines)


def space_counts(path: str, mesh_spec: str) -> dict:
    """Strategies per node of the cost graph, of the solver's problem after presolve, and symmetry
    classes per node (see the module docstring), in this process."""
    import itertools

    import numpy as np

    from hloshard.autoshard import build_graph
    from hloshard.load import load_module
    from hloshard.mesh import DeviceMesh
    from hloshard.solver.presolve import presolve

    module = load_module(path)
    mesh = DeviceMesh.for_module(module, mesh_spec)
    graph = build_graph(module, mesh)
    n = len(graph.nodes)
    red = presolve(graph.solver_problem)
    # interchangeable axes: equal size, alpha and beta; every permutation within such a set
    sets: dict = {}
    for a, size in enumerate(mesh.shape):
        if size > 1:
            sets.setdefault((size, mesh.alpha[a], mesh.beta[a]), []).append(a)
    perms = [dict(zip(range(mesh.ndim), range(mesh.ndim)))]
    for axes in sets.values():
        nxt = []
        for base in perms:
            for p in itertools.permutations(axes):
                m = dict(base)
                m.update(zip(axes, p))
                nxt.append(m)
        perms = nxt

    def image(x, p):
        if isinstance(x, tuple):
            return tuple(image(e, p) for e in x)
        if isinstance(x, int):
            return p.get(x, x)
        return ("raw", str(x)) if x is not None else None

    classes = 0
    for g in graph.nodes:
        keys = set()
        for st in g.strategies:
            keys.add(min(repr(image((st.out, st.inputs), p)) for p in perms))
        classes += len(keys)
    strategies = sum(len(g.strategies) for g in graph.nodes)
    return {"mesh_described": mesh.describe(), "nodes": n, "per_node": strategies / max(n, 1),
            "reduced_nodes": red.num_nodes,
            "per_reduced_node": float(np.mean([len(c) for c in red.costs])) if red.num_nodes else 0.0,
            "classes_per_node": classes / max(n, 1), "axis_permutations": len(perms)}


def ladder(modules: list[str], meshes: list[str], time_limit: float, workdir: pathlib.Path,
           deterministic: bool = False, space: bool = True) -> list[dict]:
    """Solve every module on every mesh (child processes; ``deterministic``: ``solve --deterministic``),
    price each written module on its own mesh (``cost``: ``hloshard cost --mesh``) and the first mesh's
    written module on each finer mesh (``first_mesh_cost``); ``space``: the strategy counts
    (:func:`space_counts`, a child process each)."""
    exe = [sys.executable, "-m", "hloshard.cli"]
    rows = []
    for path in modules:
        name = pathlib.Path(path).name.split(".")[0]
        written = {}
        for mesh in meshes:
            tag = f"{name}.{mesh}"
            out, report = workdir / f"{tag}.solved.hlo", workdir / f"{tag}.report.json"
            # time_limit None: solve's default limit, not given (the path a user who types no --time-limit takes:
            # the fine graph built under a work limit, the coarse plan solved after it; new user 27, finding 4)
            limit = [] if time_limit is None else ["--time-limit", str(time_limit)]
            rc, wall, rss, err = run(exe + ["solve", path, "--mesh", mesh, "-o", str(out), "--report", str(report),
                                            "--quiet"] + limit + (["--deterministic"] if deterministic else []))
            row = {"module": name, "mesh": mesh, "exit": rc, "wall": round(wall, 2), "rss": rss}
            if rc == 0:
                rep = json.loads(report.read_text())
                row.update({k: rep.get(k) for k in ("status", "objective", "bound", "gap", "seconds_build",
                                                     "seconds_solve", "nodes", "strategies", "plan_source")})
                written[mesh] = out
                cj = workdir / f"{tag}.cost.json"
                if run(exe + ["cost", str(out), "--mesh", mesh, "--format", "json", "-o", str(cj)])[0] == 0:
                    row["cost"] = json.loads(cj.read_text())["total_cost"]
            else:
                row["error"] = err.strip().splitlines()[-1:] if err else []
            first = written.get(meshes[0])
            if first is not None and mesh != meshes[0]:
                cj = workdir / f"{tag}.first.cost.json"
                rc2, _, _, _ = run(exe + ["cost", str(first), "--mesh", mesh, "--format", "json", "-o", str(cj)])
                if rc2 == 0:
                    row["first_mesh_cost"] = json.loads(cj.read_text())["total_cost"]
            # in a child too: a graph built here would count in every later child's RSS (fork)
            proc = subprocess.run([sys.executable, __file__, "--space-counts", path, mesh], capture_output=True,
                                  text=True, cwd=ROOT) if space else None
            if proc is not None and proc.returncode == 0:
                row.update(json.loads(proc.stdout))
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    return rows


def fmt_ladder(rows: list[dict]) -> str:
    head = ("| module | mesh (internal) | objective | cost | bound | 1-D plan on this mesh | gap | solve s | total s | RSS | "
            "strategies / node | after presolve | symmetry classes / node |")
    lines = [head, "|" + "---|" * 13]

    def num(x) -> str:
        return "-" if x is None else f"{x:,.0f}"

    for r in rows:
        if r.get("exit") != 0:
            lines.append(f"| {r['module']} | {r['mesh']} | exit {r['exit']}: {' '.join(r.get('error', []))} |" + " |" * 10)
            continue
        gap = "-" if r.get("gap") is None else f"{r['gap']:.2%}"
        described = r.get("mesh_described", "")
        internal = described.split("refined internally to ")[-1].split(" [")[0] if "refined" in described else r["mesh"]
        space = (f"{r['per_node']:.1f} | {r['per_reduced_node']:.1f} ({r['reduced_nodes']} nodes) | "
                 f"{r['classes_per_node']:.1f}") if "per_node" in r else "- | - | -"
        lines.append(
            f"| {r['module']} | {r['mesh']} ({internal}) | {num(r['objective'])} | {num(r.get('cost'))} | "
            f"{num(r.get('bound'))} | {num(r.get('first_mesh_cost'))} | {gap} | "
            f"{'-' if r.get('seconds_solve') is None else format(r['seconds_solve'], '.1f')} | "
            f"{r['wall']:.1f} | {r['rss'] / 2**20:,.0f} MiB | {space} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", default="12,48", help="generated transformer sizes (comma list; '' for none)")
    ap.add_argument("--time-limit", type=float, default=60.0, help="solver seconds per module (default 60)")
    ap.add_argument("--default-limit", action="store_true",
                    help="with --ladder: no --time-limit passed to solve (its default 60 s, the path of a user who "
                         "gives none)")
    ap.add_argument("--mesh", default="2x4")
    ap.add_argument("--json", default=None, help="write the raw rows here")
    ap.add_argument("--workdir", default=None, help="keep generated and solved modules here")
    ap.add_argument("--samples-only", action="store_true")
    ap.add_argument("--ladder", default=None, help="meshes to solve every module on, coarsest first (8,2x4,2x2x2)")
    ap.add_argument("--modules", default=None, help="with --ladder: comma-separated module paths (default: samples)")
    ap.add_argument("--deterministic", action="store_true", help="with --ladder: solve --deterministic")
    ap.add_argument("--no-space", action="store_true", help="with --ladder: leave out the strategy counts")
    ap.add_argument("--space-counts", nargs=2, metavar=("MODULE", "MESH"), help=argparse.SUPPRESS)
    ap.add_argument("--table-from", default=None,
                    help="print the --ladder table of rows saved before (a JSON list, or the JSON lines on stderr)")
    ns = ap.parse_args(argv)
    if ns.table_from:
        text = pathlib.Path(ns.table_from).read_text()
        rows = json.loads(text) if text.lstrip().startswith("[") else \
            [json.loads(line) for line in text.splitlines() if line.startswith("{")]
        print(fmt_ladder(rows))
        return 0
    if ns.space_counts:
        print(json.dumps(space_counts(*ns.space_counts)))
        return 0
    workdir = pathlib.Path(ns.workdir or tempfile.mkdtemp(prefix="hloshard-solve-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    if ns.ladder:
        mods = ns.modules.split(",") if ns.modules else [str(ROOT / "samples" / f"{n}.pre.hlo") for n in SAMPLES]
        rows = ladder(mods, ns.ladder.split(","), None if ns.default_limit else ns.time_limit, workdir,
                      ns.deterministic, not ns.no_space)
        print(fmt_ladder(rows))
        if ns.json:
            pathlib.Path(ns.json).write_text(json.dumps(rows, indent=2) + "\n")
        return 0
    rows = []
    for name in SAMPLES:
        rows.append(bench_case(name, ROOT / "samples" / f"{name}.pre.hlo", ROOT / "samples" / f"{name}.propagated.hlo",
                               ns.time_limit, workdir, ns.mesh))
        print(json.dumps(rows[-1]), file=sys.stderr)
    layers = [int(x) for x in ns.layers.split(",") if x.strip()] if not ns.samples_only else []
    for n in layers:
        pre = workdir / f"transformer_{n}l.pre.hlo"
        prop = workdir / f"transformer_{n}l.propagated.hlo"
        if not pre.exists() or not prop.exists():
            subprocess.run([sys.executable, str(ROOT / "scripts" / "make_transformer.py"), "--layers", str(n), "--out",
                            str(workdir)], check=True, cwd=ROOT)
        rows.append(bench_case(f"transformer_{n}l", pre, prop, ns.time_limit, workdir, ns.mesh))
        print(json.dumps(rows[-1]), file=sys.stderr)
    print(fmt_table(rows))
    if ns.json:
        pathlib.Path(ns.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
