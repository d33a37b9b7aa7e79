"""Rule W's predictions for written plans (no libtpu program read): per conflicting update the piece and the choice."""
import sys, glob, pathlib
sys.path[:0] = ["/work/wt/tpu/src", "/work/wt/tpu"]
from hloshard.cost.tpu_partitioner import resharded_updates
from hloshard.cost.tpu_layout import lane_use
from hloshard.hlo import parse_module
for f in sorted(glob.glob(sys.argv[1])):
    dev = next(p for p in pathlib.Path(f).parts if p.startswith("tpu-"))
    for p, u, gs, es in resharded_updates(parse_module(pathlib.Path(f).read_text()), dev):
        d = u.operands[1]
        while d.opcode != "transpose": d = d.operands[0]
        dot = d.operands[0]
        td, tp = dot.sharding.tile_dims[:2], p.sharding.tile_dims
        local = list(p.sharding.tile_shape(p.shape.dims))
        gathered = [i for i in range(2) if td[i] > 1 and tp[i] == 1][0]; k = td[gathered]
        piece = [n // k if i == gathered else n for i, n in enumerate(local)]
        pred = "none" if gs == es else ("gradient" if lane_use(piece[0]) == lane_use(piece[1]) else "param")
        print(dev, pathlib.Path(f).name, p.name, local, "piece", piece, "->", pred)
