"""every top-level relayout kernel (copy/reshape/transpose, not of a parameter prefetch) of libtpu's optimised programs,
with its producer (through bitcast / gte) and consumers."""
import re, sys, os, glob, json, collections
sys.path.insert(0, "/work/wt/tpu/benchmarks/measured/tpu_r37")
from kbytes import ty_bytes, DEF
from a2a_obs import logical
def parse(text):
    e = text[text.index("\nENTRY"):]; e = e[:e.index("\n}")]
    defs = {}; users = collections.defaultdict(list)
    for l in e.splitlines()[1:]:
        m = DEF.match(l)
        if not m: continue
        name, ty, op, args, rest = m.groups()
        ops = re.findall(r"%([\w.\-]+)", args)
        defs[name] = (ty, op, ops, rest)
        for o in ops: users[o].append(name)
    return defs, users
THRU = ("bitcast", "get-tuple-element")
def producer(defs, n):
    while n in defs and defs[n][1] in THRU: n = defs[n][2][0]
    return n
def consumers(defs, users, n, seen=None):
    out = []
    for u in users.get(n, []):
        if defs[u][1] in THRU: out += consumers(defs, users, u)
        else: out.append(u)
    return out
def kind(defs, n):
    if n not in defs: return "?"
    ty, op, ops, rest = defs[n]
    if op == "fusion":
        k = re.search(r"kind=(k\w+)", rest); c = re.search(r"calls=%([\w.\-]+)", rest)
        return "fusion:" + (k.group(1) if k else "") + ":" + (c.group(1).split(".")[0] if c else "")
    return op
def rows(path):
    defs, users = parse(open(path).read())
    out = []
    for n, (ty, op, ops, rest) in defs.items():
        if op not in ("copy", "reshape", "transpose") or not ops: continue
        src = ops[0]
        if src not in defs: continue
        p = producer(defs, src)
        on = re.search(r'op_name="([^"]*)"', rest)
        out.append(dict(name=n, op=op, ty=ty.split("{")[0], lay=ty, sty=defs[src][0], prod=kind(defs, p),
                        cons=[kind(defs, c) for c in consumers(defs, users, n)],
                        padded=ty_bytes(ty) + ty_bytes(defs[src][0]), logical=logical(ty) + logical(defs[src][0]),
                        op_name=(on.group(1) if on else "")[-60:]))
    return out
if __name__ == "__main__":
    for f in sys.argv[1:]:
        rs = rows(f)
        print("==", os.path.basename(f), len(rs), "%.2f MB" % (sum(r["padded"] for r in rs) / 1e6))
        for r in rs:
            print(f"  {r['op']:9} {r['padded']/1e6:6.3f} {r['sty'][:60]:60} -> {r['lay'][:60]:60} P={r['prod'][:40]:40} C={','.join(c[:30] for c in r['cons'])[:80]} | {r['op_name']}")
