"""Round 37, helper proof (issue 26): a probe, not a library feature -- best-first tree over binary strategy
disjunctions ("node j at strategy a / not"), chosen by strong branching among the K most fractional nodes of the
node's LP (the candidate whose weaker child is strongest), on the LP with the root's cover cuts, fixed by reduced
cost against the incumbent at the root.  Every bound is lp._LocalPolytope's certified one with the node's upper
bounds.  Usage: PYTHONPATH=<tree>/src:<tree> python strong_tree.py PICKLE SECONDS K [INCUMBENT_PICKLE]"""
import heapq, os, pickle, sys, time
import numpy as np
from hloshard.solver.branch import _Rows
from hloshard.solver.covers import separate_covers
from hloshard.solver.heuristic import LocalSearch
from hloshard.solver.lp import _LocalPolytope

p, red = pickle.load(open(sys.argv[1], "rb"))
seconds, K = float(sys.argv[2]), int(sys.argv[3])
inc = red.reduce_choice(pickle.load(open(sys.argv[4], "rb"))) if len(sys.argv) > 4 else None
t0, c0 = time.monotonic(), time.process_time()
deadline = t0 + seconds
u = _Rows(red)
ls = LocalSearch(red, seed=0)
off = int(red.offset)
best = ls.objective(inc) + off if inc is not None and ls.feasible(inc) else None


def say(*a):
    print(f"t={time.monotonic() - t0:.1f} cpu={time.process_time() - c0:.1f} load={os.getloadavg()[0]:.0f}", *a,
          flush=True)


lp = _LocalPolytope(red)
base = lp.ub.copy()
lp.restrict(base)


def solve(ub):
    left = deadline - time.monotonic()
    if left <= 0.05:
        return "time", None
    lp.restrict(ub)
    r = lp.solve(left, None, incremental=True)
    if r is None:
        return ("time" if time.monotonic() > deadline else None), None
    return r[0], r[1][:lp.nx].copy()


def offer(vals):
    global best
    x = lp.positions(np.concatenate([vals, np.zeros(lp.nvar - lp.nx)]))
    if ls.feasible(x):
        o = ls.objective(x) + off
        if best is None or o < best:
            best = o
            say("incumbent", best)


b, x = solve(base)
for _ in range(10):
    cuts = separate_covers(u.D, u.rhs, np.split(x, lp.xoff[1:]), lp.xoff)
    if not cuts:
        break
    for c in cuts:
        lp.add(*c, 1)
    b2, x2 = solve(base)
    if not isinstance(b2, int):
        break
    b, x = max(b, b2), x2
offer(x)
if best is not None:
    fix = lp.fixable(lp.duals, b, best)
    base[fix] = 0
    say("root fixed", int(fix.sum()))
say("root", b)
heap = [(b, 0, base[:lp.nx].copy(), x)]
tie, nodes = 1, 1
while heap and time.monotonic() < deadline:
    bound, _, xub, x = heapq.heappop(heap)
    if best is not None and bound >= best:
        heapq.heappush(heap, (bound, tie, xub, x)); break
    blocks = np.split(x, lp.xoff[1:])
    frac = [(1.0 - float(bl.max()), i) for i, bl in enumerate(blocks) if xub[lp.xoff[i]:lp.xoff[i] + len(bl)].sum() > 1]
    frac = sorted([f for f in frac if f[0] > 1e-6], reverse=True)[:K]
    if not frac:
        offer(x); continue
    pick, stop = None, False
    for _, j in frac:
        a = int(np.argmax(blocks[j]))
        kids = []
        for side in ("at", "not"):
            ub = base.copy(); ub[:lp.nx] &= xub
            blk = ub[lp.xoff[j]:lp.xoff[j] + len(blocks[j])]
            if side == "at":
                keep = blk[a]; blk[:] = 0; blk[a] = keep
            else:
                blk[a] = 0
            cb, cx = solve(ub)
            nodes += 1
            if cb == "time":
                stop = True; break
            kids.append((cb, ub[:lp.nx].copy(), cx))
            if cx is not None:
                offer(cx)
        if stop:
            break
        score = min(float("inf") if k[0] is None else k[0] for k in kids)
        if pick is None or score > pick[0]:
            pick = (score, j, kids)
    if stop or pick is None:
        heapq.heappush(heap, (bound, tie, xub, x)); tie += 1; break
    for cb, cub, cx in pick[2]:
        if cb is None or (best is not None and cb >= best):
            continue
        heapq.heappush(heap, (max(bound, cb), tie, cub, cx)); tie += 1
    low = heap[0][0] if heap else best
    say("branched on node", pick[1], "children", [k[0] for k in pick[2]], "bound", min(low, best) if best else low,
        "open", len(heap), "LPs", nodes)
low = heap[0][0] if heap else best
say("RESULT bound", min(low, best) if best is not None else low, "incumbent", best, "LPs", nodes, "open", len(heap))
