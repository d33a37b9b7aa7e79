"""Per file: dots v6e / v5e swap in libtpu's dumps (probe5 table) vs the rule (sharding conditions ignored)."""
import sys, collections, pathlib, re
sys.path[:0] = ["/work/wt/tpurows/src"]
from hloshard.hlo import parse_module
from hloshard.cost import tpu_partitioner as tp
obs6, obs5, seen = collections.Counter(), collections.Counter(), collections.Counter()
for l in list(open("probe5_v6e_v5e.txt")):
    f = l.split()
    if len(f) < 6 or not f[0].endswith(".hlo") and ".hl" not in f[0]: continue
    key = f[0][:34]
    seen[key] += 1; obs6[key] += f[3] == "SWAP"; obs5[key] += f[5] == "SWAP"
tot = collections.Counter()
for p in sorted(pathlib.Path("/work/notes/steptime31/plans/tpu-v6e").glob("*/*.hlo")):
    key = p.name[:34]
    if key not in seen: continue
    m = parse_module(p.read_text())
    dots = [d for c in m.computations for d in c.instructions if d.opcode == "dot"]
    fold = []
    for c in m.computations:
        for t in c.instructions:
            if t.opcode == "transpose" and t.operands and t.operands[0].opcode == "dot":
                d = t.operands[0]
                if len(d.users) == 1 and tp._swap_perm(d, t) is not None: fold.append(d)
    fold6 = [d for d in fold if not (tp._read_only(d.operands[1]) and not tp._read_only(d.operands[0]))]
    sw = [d for d in dots if tp._swap_dims(d) is not None and tp._read_only(d.operands[0]) and not tp._read_only(d.operands[1]) and d not in fold6]
    p6, p5 = len(fold6) + len(sw), len(fold)
    ok = (p6 == obs6[key], p5 == obs5[key])
    tot["files"] += 1; tot["ok6"] += ok[0]; tot["ok5"] += ok[1]; tot["dots"] += len(dots); tot["obs6"] += obs6[key]; tot["pred6"] += p6; tot["obs5"] += obs5[key]; tot["pred5"] += p5
    if not all(ok) or len(sys.argv) > 1:
        print(f"{p.parent.name}/{p.name[:40]:40} dots {len(dots):3}/{seen[key]:3} v6e obs {obs6[key]:2} pred {p6:2} (fold {len(fold6)}, swap {len(sw)}) v5e obs {obs5[key]:2} pred {p5:2}")
print(dict(tot))
