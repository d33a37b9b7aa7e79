"""Per top-level kernel of a libtpu optimised program: bytes read + written at the layouts the text gives
(minor_to_major + T(a,b)(p,1) tiles), estimated_cycles; the op_name.  usage: kbytes.py X.opt.txt [cost.json]"""
import re, sys, json, math
ISZ = {"f32": 4, "bf16": 2, "s32": 4, "u32": 4, "pred": 1, "s8": 1, "u8": 1, "f16": 2, "s16": 2, "f64": 8, "s64": 8, "u64": 8}
ARR = re.compile(r"(\w+)\[([0-9,]*)\](\{[^}]*\})?")
def arr_bytes(dt, dims, lay):
    if dt not in ISZ: return 0
    dims = [int(d) for d in dims.split(",") if d]
    isz = ISZ[dt]
    if not dims: return isz
    m2m = list(range(len(dims)))[::-1]; tile = None; pack = 1
    if lay:
        body = lay[1:-1]
        head = body.split(":")[0]
        if head.strip(): m2m = [int(x) for x in head.split(",")]
        t = re.findall(r"T\(([0-9,]+)\)", body)
        if t:
            tile = [int(x) for x in t[0].split(",")]
            pk = re.search(r"T\([0-9,]+\)\((\d+),1\)", body)
            if pk: pack = int(pk.group(1))
    order = [dims[i] for i in m2m]  # minor first
    if tile:
        tl = tile[::-1]  # minor first
        if len(tl) >= 1: order[0] = -(-order[0] // tl[0]) * tl[0]
        if len(tl) >= 2 and len(order) >= 2: order[1] = -(-order[1] // (tl[1] * pack)) * (tl[1] * pack)
        if len(tl) == 1 and len(order) == 1: pass
    return math.prod(order) * isz
def ty_bytes(t):
    return sum(arr_bytes(dt, dims, lay) for dt, dims, lay in ARR.findall(t))
DEF = re.compile(r"^\s*(?:ROOT )?%([\w.\-]+) = (\(.*?\)|\S+) ([\w\-]+)\((.*?)\)(.*)$")
FREE = ("bitcast", "get-tuple-element", "tuple", "parameter", "constant", "partition-id", "copy-done", "replica-id")
def kernels(text):
    entry = text[text.index("\nENTRY"):]; entry = entry[:entry.index("\n}")]
    ty = {}; rows = []
    for l in entry.splitlines()[1:]:
        m = DEF.match(l)
        if not m: continue
        name, t, op, args, rest = m.groups()
        ty[name] = t
        if op in FREE: continue
        ops = re.findall(r"%([\w.\-]+)", args)
        wr = ty_bytes(t)
        if op in ("copy-start", "collective-permute-start", "all-gather-start", "all-reduce-start"):
            wr = 0
        rd = sum(ty_bytes(ty.get(o, "")) for o in ops)
        kind = (re.search(r'kind=(k\w+)', rest) or [None, op])[1]
        cyc = re.search(r'"estimated_cycles":"?(\d+)', rest)
        opn = re.search(r'op_name="([^"]*)"', rest)
        rows.append(dict(name=name, op=op, kind=kind, rd=rd, wr=wr, cycles=int(cyc.group(1)) if cyc else None,
                         op_name=opn.group(1) if opn else "", vmem="S(1)" in t, type=t[:80]))
    return rows
if __name__ == "__main__":
    rows = kernels(open(sys.argv[1]).read())
    tot = sum(r["rd"] + r["wr"] for r in rows)
    print("kernels", len(rows), "bytes", tot)
    if len(sys.argv) > 2:
        c = json.load(open(sys.argv[2])); print("libtpu bytes_accessed", c["bytes_accessed"], "ratio %.3f" % (tot / c["bytes_accessed"]))
    by = {}
    for r in rows:
        k = r["kind"]; by.setdefault(k, [0, 0, 0]); by[k][0] += 1; by[k][1] += r["rd"] + r["wr"]; by[k][2] += r["cycles"] or 0
    for k, v in sorted(by.items(), key=lambda kv: -kv[1][1]):
        print(f"  {k:28} n {v[0]:4} bytes {v[1]:12} cycles {v[2]}")
