#!/usr/bin/env python3
"""Plans carried between cost graphs by what they do, not by strategy index or name.

A plan of one cost graph (``autoshard.Graph``, one strategy index per node) is recorded per node as the node's
instruction name (with its ordinal among the nodes of that instruction: a while loop's leaves) and its chosen
strategy's *layouts*: the output spec (``Strategy.out``) and the spec it requires of each operand
(``Strategy.inputs``).  Mapped onto another graph of the same module (built with other memory rules, another
tree), each node takes the strategy with the same layouts.  Strategy names are not used as the key: a
``follow<p>`` name (strategy/elementwise.py) is the *index* of the followed operand's strategy, and two graphs
built with different rules index their strategies differently (round 34, helper memguard: all 15 infinite
edges of main's mistral plan mapped by name onto the rules' graph ran into ``follow<p>`` nodes).  Where two
strategies of a node share the layouts (an all-reduce and an all-reduce-then-slice of one output), the one of the
same name with the ``follow`` digits dropped is taken, then the one of the same compute + comm.

Usage (on the tree on PYTHONPATH; a keras-hub model of ``benchmarks/real_models.py`` through its child)::

    python benchmarks/plan_map.py run MODEL PLAN --time-limit 10 --steps 2 --dump OUT.json \\
        [--impose OTHER.json] [--price OTHER.json ...]

``--hlo``: the written module's text.  ``--dump``: the plan auto_shard returns (after its guard, Pareto step and local moves) recorded, with its cost
and its predicted peak (graph and written module).  ``--impose``: in the guard's place (the guard is not run), the
recorded plan mapped onto the first solve's graph is the plan written (local moves off): the row's XLA figures are then those of
the other tree's plan, priced by this tree's model (``pred_peak``).  ``--price``: recorded plans mapped onto
the returned plan's graph and priced there (cost and graph peak), printed to stderr and put in the row
(``priced``).  The row is ``real_models.py --child``'s JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys


def _spec_key(spec) -> str:
    """A stable text of a layout (a mesh spec is a tuple of tuples; an HloSharding prints as XLA's text)."""
    return repr(spec) if isinstance(spec, (tuple, list, type(None))) else str(spec)


def _base_name(name: str) -> str:
    """A strategy's name with ``follow<index>`` made index-free."""
    return re.sub(r"follow\d+", "follow", name)


def node_ids(graph) -> list:
    """``[(instruction name, ordinal)]`` per node of ``graph``: the ordinal counts earlier nodes of the same
    instruction (a while loop's leaves are nodes of one instruction)."""
    seen: dict = {}
    out = []
    for g in graph.nodes:
        n = g.instr.name
        out.append((n, seen.get(n, 0)))
        seen[n] = seen.get(n, 0) + 1
    return out


def strategy_key(st) -> tuple:
    """``(output layout, operand layouts)`` of strategy ``st`` as text."""
    ins = st.inputs if isinstance(st.inputs, (tuple, list)) else (st.inputs,)
    return (_spec_key(st.out), tuple(_spec_key(x) for x in ins))


def record(graph, choice, evaluation=None, written=None) -> dict:
    """The plan ``choice`` of ``graph`` as a JSON-able record (module docstring), its cost (``Evaluation.total``,
    cost units) and peak (bytes per device) on ``graph``, and the written module's predicted peak when given."""
    from hloshard.autoshard.evaluate import evaluate_choice

    ev = evaluation if evaluation is not None else evaluate_choice(graph, choice)
    nodes = []
    for (name, k), g, c in zip(node_ids(graph), graph.nodes, choice):
        st = g.strategies[int(c)]
        out, ins = strategy_key(st)
        nodes.append({"instr": name, "k": k, "out": out, "inputs": list(ins), "name": st.name,
                      "price": float(st.compute + st.comm)})
    rec = {"nodes": nodes, "cost": float(ev.total), "graph_peak": int(ev.peak_memory)}
    if written is not None:
        rec["written_peak"] = int(written.evaluation.peak_memory)
        rec["written_cost"] = float(written.evaluation.total)
    return rec


def map_plan(graph, rec: dict, fallback) -> tuple:
    """``(choice, stats)``: the recorded plan ``rec`` on ``graph``, node by node by (instruction, ordinal) and the
    strategy's layouts (module docstring); a node the record lacks, or whose layouts no strategy has, keeps
    ``fallback``'s choice (``stats["missing"]`` / ``stats["unmatched"]`` list them); ``stats["ambiguous"]``
    counts nodes where several strategies share the layouts (resolved by name, then price)."""
    by_id = {(n["instr"], n["k"]): n for n in rec["nodes"]}
    choice = [int(c) for c in fallback]
    stats = {"missing": [], "unmatched": [], "ambiguous": 0, "by_name": 0, "by_price": 0, "nodes": len(choice)}
    for v, (nid, g) in enumerate(zip(node_ids(graph), graph.nodes)):
        want = by_id.get(nid)
        if want is None:
            stats["missing"].append(nid[0])
            continue
        key = (want["out"], tuple(want["inputs"]))
        hits = [q for q, st in enumerate(g.strategies) if strategy_key(st) == key]
        if not hits:
            stats["unmatched"].append((nid[0], want["name"]))
            continue
        if len(hits) > 1:
            stats["ambiguous"] += 1
            named = [q for q in hits if _base_name(g.strategies[q].name) == _base_name(want["name"])]
            if len(named) == 1:
                hits = named
                stats["by_name"] += 1
            else:
                pool = named or hits
                hits = [min(pool, key=lambda q: abs(float(g.strategies[q].compute + g.strategies[q].comm)
                                                    - want["price"]))]
                stats["by_price"] += 1
        choice[v] = hits[0]
    # a follower's strategy p pairs with its followee's strategy p only (StrategyGroup.follow): its index is
    # the followee's, to a fixed point (graph.follows: (followee node, follower node))
    fol = [(int(a), int(b)) for a, b in getattr(graph, "follows", ())]
    for _ in range(len(fol) + 1):
        changed = False
        for a, b in fol:
            if choice[b] != choice[a] and choice[a] < len(graph.nodes[b].strategies):
                choice[b] = choice[a]
                changed = True
        if not changed:
            break
    stats["followers"] = len(fol)
    return choice, stats


def price(graph, rec: dict, fallback) -> dict:
    """The recorded plan mapped onto ``graph`` and priced there: cost, graph peak (bytes per device), whether
    the solver's problem finds it feasible, and the mapping's stats (counts)."""
    from hloshard.autoshard.evaluate import evaluate_choice
    from hloshard.costgraph import evaluate

    choice, stats = map_plan(graph, rec, fallback)
    ev = evaluate_choice(graph, choice)
    obj, feasible = evaluate(graph.problem, choice)
    return {"cost_there": rec.get("cost"), "graph_peak_there": rec.get("graph_peak"),
            "written_peak_there": rec.get("written_peak"), "cost_here": float(ev.total),
            "graph_peak_here": int(ev.peak_memory), "feasible_here": bool(feasible),
            "missing": len(stats["missing"]), "unmatched": len(stats["unmatched"]),
            "unmatched_examples": stats["unmatched"][:5], "ambiguous": stats["ambiguous"],
            "by_price": stats["by_price"]}


def run(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("plan")
    ap.add_argument("--time-limit", default="10")
    ap.add_argument("--steps", default="0")
    ap.add_argument("--dump", default=None)
    ap.add_argument("--impose", default=None)
    ap.add_argument("--price", nargs="*", default=[])
    ap.add_argument("--hlo", default=None, help="write the written module's text here (the plan as compiled)")
    args = ap.parse_args(argv)
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    import real_models

    real_models.setup_child_env()
    import hloshard.jax  # noqa: F401  - before keras-hub (tensorflow): google/or-tools#3230
    import hloshard.jax.api as api
    import hloshard.jax.guard as gmod

    extra: dict = {}
    if args.impose:
        other = json.load(open(args.impose))
        def imposed(result, *a, **k):
            first = result   # the first solve's result: its graph (the memory guard is not run)
            g = first.graph
            choice, stats = map_plan(g, other, first.choice)
            from hloshard.autoshard.evaluate import evaluate_choice

            out = gmod._held(first, (choice, evaluate_choice(g, choice)), g)
            out.written = None
            extra["imposed"] = {"cost_here": float(out.evaluation.total),
                                "graph_peak_here": int(out.evaluation.peak_memory),
                                "cost_there": other.get("cost"), "graph_peak_there": other.get("graph_peak"),
                                "written_peak_there": other.get("written_peak"),
                                "missing": len(stats["missing"]), "unmatched": len(stats["unmatched"]),
                                "unmatched_examples": stats["unmatched"][:5], "ambiguous": stats["ambiguous"],
                                "by_price": stats["by_price"]}
            print("imposed", json.dumps(extra["imposed"]), file=sys.stderr, flush=True)
            return out, None   # no guard dict: auto_shard writes the plan and reports no guard

        api.guard_plan = imposed
        api.improve_applied = lambda *a, **k: None   # the imposed plan as recorded: no local moves
    orig_moves = api.improve_applied

    def moves(result, *a, **k):
        out = orig_moves(result, *a, **k)
        if args.hlo and a:   # improve_applied(result, module, dmesh, ...): the module as written
            from hloshard.hlo import print_module

            with open(args.hlo, "w") as fh:
                fh.write(print_module(a[0]))
        rec = record(result.graph, result.choice, written=result.written)
        if args.dump:
            with open(args.dump, "w") as fh:
                json.dump(rec, fh)
        extra["final"] = {k2: rec[k2] for k2 in rec if k2 != "nodes"}
        print("final", json.dumps(extra["final"]), file=sys.stderr, flush=True)
        for path in args.price:
            p = price(result.graph, json.load(open(path)), result.choice)
            extra.setdefault("priced", {})[path] = p
            print("priced", path, json.dumps(p), file=sys.stderr, flush=True)
        return out

    api.improve_applied = moves
    for row in real_models.child(args.model, args.plan.split(","), None, float(args.time_limit), None,
                                 float64_plans=[], steps=int(args.steps)):
        row.pop("expert_specs", None)
        row.update(extra)
        sys.stdout.write(json.dumps(row) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "run":
        sys.exit(run(sys.argv[2:]))
    print(__doc__)
    sys.exit(2)
