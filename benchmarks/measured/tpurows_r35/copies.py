"""libtpu's top-level copies and reshapes by the op they come from (padded read+write): python copies.py X.opt.txt"""
import re, sys, collections
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
for path in sys.argv[1:]:
    text = open(path).read()
    entry = text[text.index("\nENTRY"):]; entry = entry[:entry.index("\n}")]
    ty = {}; c = collections.Counter(); n = collections.Counter()
    for l in entry.splitlines()[1:]:
        m = DEF.match(l)
        if not m: continue
        name, t, op, args, rest = m.groups(); ty[name] = t
        if op not in ("copy", "reshape"): continue
        ops = re.findall(r"%([\w.\-]+)", args)
        b = sum(sz(ty.get(o, "")) for o in ops) + sz(t)
        meta = re.search(r'op_name="([^"]*)"', rest)
        src = meta.group(1) if meta else "(none: update result back to entry layout)"
        src = "weight param" if src.startswith("p") and "jit(" not in src else src.split("/")[-1]
        c[(op, src)] += b; n[(op, src)] += 1
    print(path.split("/")[-1])
    for k, v in c.most_common(): print(f"   {k[0]:8} {k[1]:50} n={n[k]:3} {v/1e6:7.3f} MB {v/819e9*1e6:6.2f} us@819")
