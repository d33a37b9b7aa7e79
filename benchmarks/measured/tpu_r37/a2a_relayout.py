"""Per libtpu optimised program: each all-to-all's bytes (operand at its layout) and the copies / reshapes that
feed it or read its result (through bitcast / get-tuple-element), read + written at their layouts."""
import re, sys, glob, json, os
sys.path.insert(0, os.path.dirname(__file__))
from kbytes import ty_bytes, DEF
PASS = ("bitcast", "get-tuple-element")
def analyse(text):
    entry = text[text.index("\nENTRY"):]; entry = entry[:entry.index("\n}")]
    defs = {}; users = {}
    for l in entry.splitlines()[1:]:
        m = DEF.match(l)
        if not m: continue
        name, t, op, args, rest = m.groups()
        ops = re.findall(r"%([\w.\-]+)", args)
        defs[name] = (t, op, ops)
        for o in ops: users.setdefault(o, []).append(name)
    out = []
    for n, (t, op, ops) in defs.items():
        if op != "all-to-all": continue
        a2a = ty_bytes(t)
        before = after = 0; kinds = []
        for o in ops:
            x = o
            while x in defs and defs[x][1] in PASS: x = defs[x][2][0]
            if x in defs and defs[x][1] in ("copy", "reshape", "transpose"):
                before += ty_bytes(defs[x][0]) + sum(ty_bytes(defs[y][0]) for y in defs[x][2] if y in defs); kinds.append("pre-" + defs[x][1])
        front = list(users.get(n, []))
        seen = set()
        while front:
            u = front.pop()
            if u in seen: continue
            seen.add(u)
            if defs[u][1] in PASS: front += users.get(u, []); continue
            if defs[u][1] in ("copy", "reshape", "transpose"):
                after += ty_bytes(defs[u][0]) * 2; kinds.append("post-" + defs[u][1])
        out.append(dict(name=n, a2a=a2a, before=before, after=after, kinds=kinds))
    return out
if __name__ == "__main__":
    tot = {}
    for f in sorted(glob.glob(sys.argv[1])):
        rows = analyse(open(f).read())
        if not rows: continue
        a = sum(r["a2a"] for r in rows); b = sum(r["before"] for r in rows); c = sum(r["after"] for r in rows)
        print(f"{f.split('/')[-3]+'/'+os.path.basename(f):70} a2a {len(rows):3} bytes {a:9} relayout before {b:9} after {c:9} ratio {(b+c)/a:.2f}")
