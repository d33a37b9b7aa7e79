import sys, re, json, collections
sys.path.insert(0, ".")
from chipops import classify
SH = re.compile(r"^(\w+)\[([\d,]*)\]")
def comps(text):
    out, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"^(?:ENTRY )?%([\w.\-]+) .*\{$", line)
        if m: cur = m.group(1); out[cur] = {}; continue
        m = re.match(r"^\s*(?:ROOT )?%([\w.\-]+) = (\S+) ([a-z][\w\-]*)\((.*)$", line)
        if m and cur is not None:
            out[cur][m.group(1)] = (m.group(2), m.group(3), m.group(4))
    return out
def dims(shape):
    m = SH.match(shape); return [int(x) for x in m.group(2).split(",") if x] if m else []
def conv_info(c, ins):
    shape, op, rest = ins
    opnds = re.findall(r"%([\w.\-]+)", rest.split(")")[0])
    lhs = dims(c[opnds[0]][0]) if opnds and opnds[0] in c else []
    rhs = dims(c[opnds[1]][0]) if len(opnds) > 1 and opnds[1] in c else []
    out = dims(shape)
    n = 1
    for x in out: n *= x
    if op == "dot":
        cd = re.search(r"lhs_contracting_dims=\{([\d,]*)\}", rest)
        k = 1
        for i in (cd.group(1).split(",") if cd and cd.group(1) else []): k *= lhs[int(i)]
        return 2 * n * k, out, lhs, rhs, "dot"
    lab = re.search(r"dim_labels=(\w+)_(\w+)->(\w+)", rest)
    lf = lab.group(1).index("f"); k = lhs[lf] if lhs else 1
    fg = re.search(r"feature_group_count=(\d+)", rest); k //= int(fg.group(1)) if fg else 1
    w = re.search(r"window=\{size=([\dx]+)", rest); ws = 1
    if w and "lhs_dilate" not in rest:
        for x in w.group(1).split("x"): ws *= int(x)
    return 2 * n * k * ws, out, lhs, rhs, lab.group(0)
def kernel_flops(name):
    text = open(f"chip/opt/{name}.opt.txt").read()
    C = comps(text)
    r, rows = classify(name)
    res = []
    for x in rows:
        if not x["op"].startswith("fusion:kOutput") and x["op"] not in ("convolution", "dot"): continue
        ev = next(e for e in r["ops"] if e.startswith("%" + x["name"] + " "))
        m = re.search(r"calls=%([\w.\-]+)", ev)
        fl, info = 0, None
        if m and m.group(1) in C:
            c = C[m.group(1)]
            for nm, ins in c.items():
                if ins[1] in ("convolution", "dot"):
                    f, *info = conv_info(c, ins); fl += f
        res.append(dict(x, flops=fl, info=info))
    return res
if __name__ == "__main__":
    name = sys.argv[1]
    res = kernel_flops(name)
    g = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    for x in res:
        key = (str(x["info"][0]), str(x["info"][1]), str(x["info"][2]), x["info"][3]) if x["info"] else None
        a = g[key]; a[0] += 1; a[1] += x["s"]; a[2] += x["flops"]; a[3] += x["hbm"]
    for k, a in sorted(g.items(), key=lambda t: -t[1][1])[:20]:
        print(f"n={a[0]:4} {a[1]*1e6:8.1f}us {a[2]/1e9:7.2f}GF {a[2]/a[1]/1e12 if a[1] else 0:6.1f}TF/s per {a[1]/a[0]*1e6:6.2f}us hbm {a[3]/1e6:6.1f}MB", k)
