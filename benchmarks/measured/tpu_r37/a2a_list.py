import re, sys, glob, os
sys.path.insert(0, os.path.dirname(__file__))
from kbytes import DEF
for f in sorted(glob.glob(sys.argv[1])):
    text = open(f).read()
    entry = text[text.index("\nENTRY"):]; entry = entry[:entry.index("\n}")]
    defs = {}
    for l in entry.splitlines()[1:]:
        m = DEF.match(l)
        if not m: continue
        name, t, op, args, rest = m.groups()
        defs[name] = (t, op, re.findall(r"%([\w.\-]+)", args), rest)
    for n, (t, op, ops, rest) in defs.items():
        if op != "all-to-all": continue
        d = re.search(r"dimensions=\{(\d+)\}", rest)
        chain = []; x = ops[0]
        while x in defs and defs[x][1] in ("bitcast", "get-tuple-element"):
            chain.append(defs[x][1]); x = defs[x][2][0]
        px = defs.get(x, ("?", "?", [], ""))
        src = ""
        if px[1] in ("copy", "reshape", "transpose"):
            y = px[2][0]
            while y in defs and defs[y][1] in ("bitcast",): y = defs[y][2][0]
            src = defs.get(y, ("?",))[0].split("S(")[0][:60]
        print(f"{os.path.basename(f)[:40]:40} {n:16} dim {d.group(1) if d else '?'} {t.split('S(')[0][:48]:48} <- {px[1]:10} {px[0].split('S(')[0][:50]:50} from {src}")
