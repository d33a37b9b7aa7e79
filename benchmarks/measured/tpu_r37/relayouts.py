"""relayouts.py X.opt.txt : the top-level copy / reshape / transpose kernels of a libtpu optimised program (entry
computation): bytes read + written at the text's layouts (padded) and logical, grouped by op_name tail."""
import re, sys, os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kbytes import ty_bytes, DEF
from a2a_obs import logical
def relayouts(text):
    e = text[text.index("\nENTRY"):]; e = e[:e.index("\n}")]
    defs = {}
    for l in e.splitlines()[1:]:
        m = DEF.match(l)
        if not m: continue
        name, ty, op, args, rest = m.groups(); defs[name] = (ty, op, re.findall(r"%([\w.\-]+)", args), rest)
    out = []
    for n, (ty, op, ops, rest) in defs.items():
        if op in ("copy", "reshape", "transpose") and "S(1)" in ty or op in ("copy", "reshape", "transpose") and ops and ops[0] in defs:
            src = ops[0]; sty = defs.get(src, ("",))[0]
            on = re.search(r'op_name="([^"]*)"', rest)
            out.append(dict(op=op, padded=ty_bytes(ty) + ty_bytes(sty), logical=logical(ty) + logical(sty), op_name=on.group(1) if on else ""))
    return out
if __name__ == "__main__":
    for f in sys.argv[1:]:
        rows = relayouts(open(f).read())
        print(os.path.basename(f), "relayout kernels", len(rows), "padded %.2f MB logical %.2f MB" % (sum(r["padded"] for r in rows) / 1e6, sum(r["logical"] for r in rows) / 1e6))
