import sys, json, re, collections
d = json.load(open("chip/perop.json"))
DT = {"f32": 4, "bf16": 2, "s32": 4, "u32": 4, "pred": 1, "f16": 2, "s8": 1, "u8": 1}
ARR = re.compile(r"(\w+)\[([\d,]*)\]\{([^}]*)\}")
def arrays(s):
    out = []
    for t, dims, lay in ARR.findall(s):
        n = 1
        for x in dims.split(","):
            if x: n *= int(x)
        out.append((DT.get(t, 4) * n, "S(1)" in lay))
    return out
def parse(ev):
    m = re.match(r"%([\w.\-]+) = (.*?) ([a-z][\w\-]*)\((.*)$", ev)
    if not m: return None
    name, shape, op, rest = m.groups()
    k = re.search(r"kind=(k\w+)", rest)
    # operands: text up to the closing paren of the call
    depth, i = 1, 0
    while i < len(rest) and depth:
        depth += {"(": 1, ")": -1}.get(rest[i], 0); i += 1
    ops = rest[:i-1]
    return dict(name=name, op=op + (":" + k.group(1) if k else ""), out=arrays(shape), ins=arrays(ops))
def classify(name):
    r = d["rows"][name]
    rows = []
    for ev, s in r["ops"].items():
        p = parse(ev)
        if p is None: continue
        hbm = sum(b for b, v in p["out"] + p["ins"] if not v)
        vm = sum(b for b, v in p["out"] + p["ins"] if v)
        rows.append(dict(p, s=s, hbm=hbm, vm=vm))
    return r, rows
if __name__ == "__main__":
  for name in sys.argv[1:]:
    r, rows = classify(name)
    agg = collections.defaultdict(lambda: [0, 0.0, 0, 0])
    for x in rows:
        k = x["op"]
        if k.startswith(("copy-start", "copy-done", "async", "slice-start", "slice-done")): k = k.split(":")[0]
        a = agg[k]; a[0] += 1; a[1] += x["s"]; a[2] += x["hbm"]; a[3] += x["vm"]
    tot = r["lines"]["XLA Modules"][1]
    print(name, f"module {tot*1e6:.1f} us; ops {r['lines']['XLA Ops'][1]*1e6:.1f}; ", "bytes_accessed", r["bytes_accessed"])
    for k, v in sorted(agg.items(), key=lambda x: -x[1][1])[:10]:
        print(f"   {k:22} n={v[0]:5} {v[1]*1e6:9.1f} us  hbm {v[2]/1e6:8.2f} MB  vmem {v[3]/1e6:8.2f} MB  hbm-rate {v[2]/max(v[1],1e-12)/1e9:7.1f} GB/s")
