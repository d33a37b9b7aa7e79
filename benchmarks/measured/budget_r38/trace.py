import sys
import hloshard.autoshard.build as B
orig = {n: getattr(B, n) for n in ("relayout_copies", "one_buffer_per_reshard", "pinned_only_credit", "_relayout_bytes", "place_in_outputs")}
LOG = []
def wrap(n):
    f = orig[n]
    def g(*a, **k):
        r = f(*a, **k)
        LOG.append((n, r if n != "_relayout_bytes" else (a[1].name, r)))
        return r
    return g
for n in orig: setattr(B, n, wrap(n))
exec(open("benchmarks/measured/budget_r38/dump2.py").read().replace("bg = buffers(G, c)", "LOG.clear(); bg = buffers(G, c); SNAP = list(LOG)").split("bw = buffers(W, wc)")[0])
sched = G.schedule
for n, r in SNAP:
    if n == "relayout_copies":
        for dot, k, lo, hi, b in r: print("relayout_copy", dot.name, k, dot.operands[k].name, lo, hi, b)
    elif n == "one_buffer_per_reshard":
        for lo, hi, b in r: print("reshard_copy", sched[lo].name, "..", sched[hi-1].name if hi>0 else hi, lo, hi, b)
    elif n == "_relayout_bytes":
        if r[1]: print("relayout_after_gather", r)
    else:
        print(n, r if not isinstance(r, list) or len(r) < 30 else len(r))
