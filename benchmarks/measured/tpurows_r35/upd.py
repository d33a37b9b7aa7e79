"""Weight updates after a folded gradient dot: predicted layout conflict vs libtpu's copies.
python upd.py 'GLOB of X.hlo' (each with X.opt.txt beside it; the device from the path: tpu-v5e/...)"""
import re, sys, glob, collections
sys.path[:0] = ["/work/wt/tpurows/src"]
from hloshard.hlo import parse_module
from hloshard.cost.tpu_partitioner import fold_applies
from hloshard.cost.tpu_layout import padded_bytes

def tiles(sh, rank):
    if sh is None or not getattr(sh, "is_tiled", False): return None
    return list(sh.tile_dims[:rank]) if hasattr(sh, "tile_dims") else None

def local(shape, t):
    return [-(-d // k) for d, k in zip(shape, t)]

tot = collections.Counter(); rows = []
for f in sorted(glob.glob(sys.argv[1])):
    opt = f[:-4] + ".opt.txt"
    try: otext = open(opt).read()
    except OSError: continue
    dev = next((p for p in f.split("/") if p.startswith("tpu-")), None)
    m = parse_module(open(f).read())
    entry = [c for c in m.computations if getattr(c, "is_entry", False)][0]
    for t in entry.instructions:
        if t.opcode != "transpose" or len(t.operands) != 1: continue
        d = t.operands[0]
        if not fold_applies(d, t, dev) or len(t.shape.dims) != 2: continue
        # follow the single-user elementwise chain to subtract(P, .)
        x = t; hops = 0
        while len(x.users) == 1 and x.users[0].opcode in ("multiply", "convert", "divide", "negate") and hops < 4:
            x = x.users[0]; hops += 1
        subs = [u for u in x.users if u.opcode == "subtract" and u.operands[0].opcode == "parameter" and u.operands[1] is x]
        if not subs: continue
        P = subs[0].operands[0]
        td, tp = tiles(d.sharding, 2), tiles(P.sharding, 2)
        if td is None or tp is None: continue
        # after the fold the dot computes t's shape with d's tile dims
        gathered = [i for i in range(2) if td[i] > 1 and tp[i] == 1]
        target = [i for i in range(2) if tp[i] > 1 and td[i] == 1]
        if td == tp: kind, grad_swapped = "no-reshard", False
        elif len(gathered) == 1 and len(target) == 1: kind, grad_swapped = f"a2a s={gathered[0]}", gathered[0] == 1
        else: kind, grad_swapped = f"other {td}->{tp}", None
        lp = local(P.shape.dims, tp)
        dt = str(P.shape.element_type)
        sub = {"f32": 8, "s32": 8, "bf16": 16}.get(dt, 8)
        pad = lambda r, l: (-(-r // sub) * sub) * (-(-l // 128) * 128)
        entry_swapped = pad(lp[1], lp[0]) < pad(lp[0], lp[1])
        pred = None if grad_swapped is None else grad_swapped != entry_swapped
        name = P.metadata.get("op_name") if hasattr(P, "metadata") and isinstance(P.metadata, dict) else None
        if name is None:
            mm = re.search(r'op_name="([^"]*)"', str(getattr(P, "raw", "")) ) 
        key = (P.op_name or P.name).replace("'", "\\'")
        copied = any(("op_name=\"" + key + "\"") in l for l in otext.splitlines() if " copy(" in l)
        lshape = ",".join(map(str, lp))
        gcopy = len(re.findall(r"= f32\[" + lshape + r"\]\{[0-9,]+:[^}]*\} copy\(%bitcast[^)]*\).*op_name=\"[^\"]*/mul\"", otext))
        obs = "param-copied" if copied else "grad-copied" if gcopy else "none"
        tot[(pred, obs)] += 1
        rows.append((f.split("/")[-3] + "/" + f.split("/")[-1], P.name, lp, kind, "entry-swapped" if entry_swapped else "entry-rowmajor", pred, obs, gcopy))
for r in rows: print(*r)
print(dict(tot))
