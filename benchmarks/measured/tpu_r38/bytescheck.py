"""priced update copies (update_relayouts) vs libtpu's top-level copy kernels of the same 2-D per-device shapes"""
import sys, glob, pathlib, re
sys.path[:0] = ["/work/wt/tpu/src", "/work/wt/tpu"]
from hloshard.cost.tpu_partitioner import update_relayouts
from hloshard.hlo import parse_module
from rl import rows
tp = to = 0
for f in sorted(glob.glob(sys.argv[1])):
    opt = pathlib.Path(f[:-4] + ".opt.txt")
    if not opt.exists(): continue
    dev = next(p for p in pathlib.Path(f).parts if p.startswith("tpu-"))
    rs = update_relayouts(parse_module(pathlib.Path(f).read_text()), dev)
    if not rs: continue
    shapes = {tuple(int(x) for x in r.parameter.sharding.tile_shape(r.parameter.shape.dims)) for r in rs}
    pred = sum(r.copies * r.bytes_per_copy for r in rs)
    obs = 0; n = 0
    for k in rows(str(opt)):
        if k["op"] != "copy": continue
        m = re.match(r"\w+\[([0-9,]*)\]", k["ty"])
        dims = tuple(int(x) for x in m.group(1).split(",") if x)
        if dims in shapes and k["prod"] not in ("parameter",):
            obs += k["padded"]; n += 1
    tp += pred; to += obs
    print(f"{pathlib.Path(f).name[:44]:44} updates {len(rs):2} copies {sum(r.copies for r in rs):2} priced {pred/1e6:6.3f} MB | libtpu {n:2} copies {obs/1e6:6.3f} MB")
print(f"total priced {tp/1e6:.3f} MB libtpu {to/1e6:.3f} MB")
