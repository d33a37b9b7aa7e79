"""Per entry kernel of a TPU-optimised program: result + operand padded bytes (HloCostAnalysis-like, top level)."""
import os, re, sys
sys.path.insert(0, os.environ.get("WT", ".") + "/src")
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
text = open(sys.argv[1]).read()
entry = text[text.index("\nENTRY"):]; entry = entry[:entry.index("\n}")]
ty = {}; rows = []
for l in entry.splitlines()[1:]:
    m = DEF.match(l)
    if not m: continue
    name, t, op, args, rest = m.groups()
    ty[name] = t
    if op in FREE: continue
    ops = re.findall(r"%([\w.\-]+)", args)
    res = sz(t.split("{")[0] if op != "copy-start" else t) if op != "copy-start" else sz(t) // 3 * 2
    rd = sum(sz(ty.get(o, "")) for o in ops)
    kind = (re.search(r'kind=(k\w+)', rest) or [None, op])[1]
    rows.append((name, op, kind, rd, sz(t) if op != "copy-start" else 0, re.search(r"S\(1\)", t) is not None))
tot = 0
for r in rows:
    b = r[3] + r[4]; tot += b
    if len(sys.argv) < 3 or b >= float(sys.argv[2]):
        print(f"{r[0]:40} {r[1]:14} {r[2]:8} rd {r[3]:10} wr {r[4]:10} {'S1' if r[5] else ''}")
print("total", tot)
