"""libtpu side, per all-to-all of an optimised program: the chain that feeds it (through bitcast / gte) to the
first kernel; the relayout kernels (copy / reshape / transpose) before and after, bytes read + written at the
text's layouts (padded) and logical; the root that produced the data."""
import re, sys, glob, os, json, math
sys.path.insert(0, os.path.dirname(__file__))
from kbytes import ty_bytes, DEF, ISZ, ARR
PASS = ("bitcast", "get-tuple-element")
RELAY = ("copy", "reshape", "transpose")
def logical(t):
    return sum(ISZ.get(dt, 0) * math.prod(int(d) for d in dims.split(",") if d) for dt, dims, lay in ARR.findall(t))
def analyse(text):
    entry = text[text.index("\nENTRY"):]; entry = entry[:entry.index("\n}")]
    defs = {}; users = {}
    for l in entry.splitlines()[1:]:
        m = DEF.match(l)
        if not m: continue
        name, t, op, args, rest = m.groups()
        ops = re.findall(r"%([\w.\-]+)", args)
        defs[name] = (t, op, ops, rest)
        for o in ops: users.setdefault(o, []).append(name)
    rows = []
    for n, (t, op, ops, rest) in defs.items():
        if op != "all-to-all": continue
        d = re.search(r"dimensions=\{(\d+)\}", rest)
        x = ops[0]
        while x in defs and defs[x][1] in PASS: x = defs[x][2][0]
        pre = []; root = defs.get(x, ("?", "?"))[1]
        while x in defs and defs[x][1] in RELAY:
            src = defs[x][2][0]
            pre.append(dict(op=defs[x][1], out=defs[x][0].split("S(")[0], src=defs.get(src, ("?",))[0].split("S(")[0],
                            padded=ty_bytes(defs[x][0]) + ty_bytes(defs[src][0]) if src in defs else 0,
                            logical=logical(defs[x][0]) + (logical(defs[src][0]) if src in defs else 0)))
            x = src
            while x in defs and defs[x][1] in PASS: x = defs[x][2][0]
            root = defs.get(x, ("?", "?"))[1]
        post = []; front = list(users.get(n, [])); seen = set()
        while front:
            u = front.pop()
            if u in seen or u not in defs: continue
            seen.add(u)
            if defs[u][1] in PASS: front += users.get(u, []); continue
            if defs[u][1] in RELAY:
                post.append(dict(op=defs[u][1], out=defs[u][0].split("S(")[0], padded=2 * ty_bytes(defs[u][0]), logical=2 * logical(defs[u][0])))
        rows.append(dict(name=n, shape=t.split("S(")[0], dim=int(d.group(1)) if d else None, a2a_logical=logical(t), a2a_padded=ty_bytes(t),
                         root=root, pre=pre, post=post))
    return rows
if __name__ == "__main__":
    allr = {}
    for f in sorted(glob.glob(sys.argv[1])):
        rows = analyse(open(f).read())
        if not rows: continue
        allr[os.path.basename(f)] = rows
        for r in rows:
            pl = sum(p["logical"] for p in r["pre"] + r["post"]); pp = sum(p["padded"] for p in r["pre"] + r["post"])
            print(f"{os.path.basename(f)[:36]:36} {r['name']:14} {r['shape'][:40]:40} dim {r['dim']} root {r['root']:10} pre {'+'.join(p['op'] for p in r['pre']) or '-':12} post {'+'.join(p['op'] for p in r['post']) or '-':10} a2a {r['a2a_logical']:7} relayout logical {pl:8} padded {pp:8}")
    if len(sys.argv) > 2: json.dump(allr, open(sys.argv[2], "w"), indent=1)
