"""Prototype (round 38, helper speed; NOT committed -- cost/liveness.py is helper mem's): the reduce fusions' cones
(liveness._compute_reduce_fusions) walked lazily, from the fusion's members only, in the order the original decides
them (users before operands: by decreasing schedule index, a heap).  Compares the two on every computation of the
modules given (the same ids, both sets) and times them.  argv: HLO files."""
import heapq, sys, time
from hloshard.hlo import parse_module
import hloshard.cost.liveness as L


def lazy(comp):
    out, tail_out = set(), set()
    order = L.computation_order(comp)
    index = {id(i): n for n, i in enumerate(order)}
    by_id = {id(i): i for i in order}
    unbarred = L._unbarred(comp.parent)

    def read(x):
        return L.cse_representative(L.scheduled_dependency(x) if unbarred else x)

    def walk(seeds, stop, inside, kept):
        heap, seen = [], set()

        def push(o):
            k = id(o)
            if k in seen or k in stop or not L._joins_reduce_fusion(o, comp):
                return
            seen.add(k)
            heapq.heappush(heap, (-index.get(k, -1), len(seen), o))

        for o in seeds:
            push(o)
        while heap:
            _, _, o = heapq.heappop(heap)
            users = L._cse_users(o)
            if any(id(u) in inside for u in users):
                if all(id(u) in inside for u in users):
                    inside.add(id(o))
                    for x in o.operands:
                        if not L.sliced_operand(o, x):
                            push(read(x))
                elif not L._forwards(o):
                    kept.add(id(o))

    tail_read = set()
    for r in comp.instructions:
        if r.opcode != "reduce":
            continue
        inside = {id(r)}
        mine = set()
        walk([read(o) for o in r.operands if not L.sliced_operand(r, o)], (), inside, mine)
        out |= mine
        tail = L._reduce_tail(r, comp)
        if not tail:
            continue
        inside |= {id(t) for t in tail}
        seeds = [read(x) for t in tail for x in t.operands if id(read(x)) not in inside and not L.sliced_operand(t, x)]
        walk(seeds, inside | out, inside, tail_out)
        tail_read |= {k for k in mine if all(id(u) in inside for u in L._cse_users(by_id[k]))}
    return out, (tail_out - out) | tail_read


if __name__ == "__main__":
    for path in sys.argv[1:]:
        m = parse_module(open(path).read())
        from hloshard.hlo.inline import inline_calls
        inline_calls(m)
        to = tl = 0.0
        diff = 0
        for comp in m.computations:
            t = time.process_time(); a = L._compute_reduce_fusions(comp); to += time.process_time() - t
            t = time.process_time(); b = lazy(comp); tl += time.process_time() - t
            if (set(a[0]), set(a[1])) != (set(b[0]), set(b[1])):
                diff += 1
                print("  DIFF", comp.name, len(a[0]), len(b[0]), len(a[1]), len(b[1]))
        print(f"{path.split('/')[-1]}: computations {len(m.computations)} differ {diff}; CPU original {to:.2f} s, lazy {tl:.2f} s", flush=True)
