"""libtpu program bytes by kind (top-level entry, padded read+write): python cat.py PLAN.opt.txt"""
import os, re, sys, collections
sys.path.insert(0, "/work/wt/tpurows/src")
from hloshard.cost.tpu_layout import padded_bytes
DEF = re.compile(r"^\s*(?:ROOT )?%([\w.\-]+) = (\(.*?\)|\S+) ([\w\-]+)\((.*?)\)(.*)$")
ARR = re.compile(r"(\w+)\[([0-9,]*)\]")
def sz(ty):
    t = 0
    for dt, dims in ARR.findall(ty):
        try: t += padded_bytes(dt, [int(d) for d in dims.split(",") if d])
        except Exception: pass
    return t
FREE = ("bitcast", "get-tuple-element", "tuple", "parameter", "constant", "partition-id", "copy-done")
for path in sys.argv[1:]:
    text = open(path).read()
    entry = text[text.index("\nENTRY"):]; entry = entry[:entry.index("\n}")]
    ty = {}; c = collections.Counter(); n = collections.Counter()
    for l in entry.splitlines()[1:]:
        m = DEF.match(l)
        if not m: continue
        name, t, op, args, rest = m.groups()
        ty[name] = t
        if op in FREE: continue
        ops = re.findall(r"%([\w.\-]+)", args)
        rd = sum(sz(ty.get(o, "")) for o in ops)
        wr = sz(t) if op != "copy-start" else 0
        kind = (re.search(r'kind=(k\w+)', rest) or [None, op])[1]
        if op == "copy":
            meta = re.search(r'op_name="([^"]*)"', rest)
            kind = "copy:param" if meta and meta.group(1).startswith("params") else "copy"
        c[kind] += rd + wr; n[kind] += 1
    print(path.split("/")[-1], f"total {sum(c.values())/1e6:.3f} MB")
    for k, v in c.most_common():
        print(f"   {k:28} n={n[k]:3} {v/1e6:8.3f} MB {v/819e9*1e6:8.2f} us@819")
