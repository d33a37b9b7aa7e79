"""conflicting updates: piece geometry beside libtpu's choice (weight copies vs one gradient copy)"""
import sys, glob, pathlib, collections
sys.path[:0] = ["/work/wt/tpu/src", "/work/wt/tpu", "/work/wt/tpu/benchmarks"]
from hloshard.cost.tpu_partitioner import resharded_updates
from hloshard.cost.tpu_layout import lane_use, all_to_all_lane_flat, minor_pair
from hloshard.hlo import parse_module
from tpu_update_layouts import observed
c = collections.Counter()
for f in sorted(glob.glob(sys.argv[1])):
    opt = pathlib.Path(f[:-4] + ".opt.txt")
    if not opt.exists(): continue
    dev = next(p for p in pathlib.Path(f).parts if p.startswith("tpu-"))
    text = opt.read_text()
    for p, u, gs, es in resharded_updates(parse_module(pathlib.Path(f).read_text()), dev):
        if gs == es: continue
        obs = observed(text, p, u.operands[1])
        d = u.operands[1]
        while d.opcode != "transpose": d = d.operands[0]
        dot = d.operands[0]
        td, tp = dot.sharding.tile_dims[:2], p.sharding.tile_dims
        local = list(p.sharding.tile_shape(p.shape.dims))
        gathered = [i for i in range(2) if td[i] > 1 and tp[i] == 1][0]
        k = td[gathered]
        piece = [n // k if i == gathered else n for i, n in enumerate(local)]
        flat = all_to_all_lane_flat(piece)
        gminor = 0 if gs else 1
        key = (obs, "flat" if flat else "dense", "gmin%d" % local[gminor], "emin%d" % local[1 - gminor])
        c[key] += 1
        c[(obs, "flat" if flat else "dense")] += 1
        pred = "gradient" if lane_use(piece[0]) == lane_use(piece[1]) else "param"
        c["RULE " + ("ok" if pred == obs else "MISS")] += 1
        if pred != obs: print("MISS", end=" ")
        print(pathlib.Path(f).name[:40], p.name, local, "piece", piece, "k", k, "flat" if flat else "dense", "->", obs)
for k, v in sorted(c.items(), key=str): print(v, k)
