"""Per all-to-all fed by an all-reduce (libtpu optimised program): the all-reduce operand with the all-to-all's
element count, and the relayout kernels between it and the kernel that wrote it (the fold path's gradient dot)."""
import re, sys, glob, os, math
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kbytes import ty_bytes, DEF
from a2a_obs import logical
PASS = ("bitcast", "get-tuple-element", "all-reduce-done", "copy-done")
SH = re.compile(r"(\w+)\[([0-9,]*)\]")
def nel(ty):
    m = SH.search(ty); return math.prod(int(v) for v in m.group(2).split(",") if v) if m else -1
for f in sorted(glob.glob(sys.argv[1])):
    t = open(f).read(); e = t[t.index("\nENTRY"):]; e = e[:e.index("\n}")]
    defs = {}
    for l in e.splitlines()[1:]:
        m = DEF.match(l)
        if not m: continue
        name, ty, op, args, rest = m.groups(); defs[name] = (ty, op, re.findall(r"%([\w.\-]+)", args), rest)
    seen = {}
    for name, (ty, op, ops, rest) in defs.items():
        if op != "all-to-all": continue
        x = ops[0]; idx = None
        while x in defs and defs[x][1] in PASS + ("reshape", "copy"):
            if defs[x][1] == "get-tuple-element": idx = int(re.search(r"index=(\d+)", defs[x][3]).group(1))
            x = defs[x][2][0]
        if x not in defs or not defs[x][1].startswith("all-reduce"): continue
        n = nel(ty)
        cands = [o for o in defs[x][2] if o in defs and nel(defs[o][0]) == n]
        y = cands[idx] if idx is not None and idx < len(cands) else (cands[0] if cands else None)
        if idx is not None and idx < len(defs[x][2]): y = defs[x][2][idx]
        chain = []; lb = pb = 0
        while y in defs and defs[y][1] in ("bitcast", "copy", "reshape", "transpose"):
            if defs[y][1] != "bitcast":
                src = defs[y][2][0]; chain.append(defs[y][1])
                lb += logical(defs[y][0]) + logical(defs.get(src, ("",))[0]); pb += ty_bytes(defs[y][0]) + ty_bytes(defs.get(src, ("",))[0])
            y = defs[y][2][0]
        d = int(re.search(r"dimensions=\{(\d+)\}", rest).group(1))
        dims = [int(v) for v in SH.search(ty).group(2).split(",")]
        piece = [v for i, v in enumerate(dims) if i != d]
        k = (os.path.basename(f), ty.split("{")[0], d, "+".join(chain) or "-", defs.get(y, ("?", "?"))[1])
        s = seen.setdefault(k, [0, 0, 0, logical(ty)]); s[0] += 1; s[1] += lb; s[2] += pb
    for k, (c, lb, pb, buf) in seen.items():
        print(f"{k[0][:34]:34} {c:2} x a2a {k[1]:16} dim {k[2]} | before its all-reduce: {k[3]:14} <- {k[4]:8} | {lb/c/buf:4.1f} x buffer logical, {pb/c/buf:4.1f} x padded")
