"""Arithmetic: one gradient copy per update_layout_conflicts entry (read in the gradient's layout, write in the
weight's, padded (8,128) f32 tiles), at the profile's sustained HBM bandwidth, added to the like figure."""
import sys, json
sys.path[:0] = ["/work/wt/tpurows/src"]
from hloshard.hlo import parse_module
from hloshard.cost.tpu_partitioner import update_layout_conflicts
from hloshard.devices import get_profile
def pad(rows, lanes, w=4, sub=8):
    return -(-rows // sub) * sub * -(-lanes // 128) * 128 * w
ev = {}
for dev in ["tpu-v5e", "tpu-v5p"]:
    for r in json.load(open(f"ev_{dev}_today.json")): ev[(dev, r["name"], r["plan"])] = r
for dev, grp, name in [("tpu-v5e", "samples", "fused_qkv_train_step"), ("tpu-v5e", "heads", "attn_h10m4_d32_s64_train"),
                       ("tpu-v5e", "heads", "attn_h10m4_d64_s64_train"), ("tpu-v5p", "heads", "attn_h10m4_d32_s64_train"),
                       ("tpu-v5p", "heads", "attn_h10m4_d64_s64_train")]:
    m = parse_module(open(f"/work/notes/tpurows33/plans_br/{dev}/{grp}/{name}.GSPMD.hlo").read())
    tot = 0
    for p, u, gs, es in update_layout_conflicts(m, dev):
        r, c = p.sharding.tile_shape(p.shape.dims)
        g = pad(c, r) if gs else pad(r, c)
        e = pad(c, r) if es else pad(r, c)
        tot += g + e
    bw = get_profile(dev).sustained_hbm_bandwidth
    row = ev[(dev, name, "GSPMD")]
    print(dev, name, f"conflicts {len(update_layout_conflicts(m, dev))} bytes {tot/1e6:.3f} MB = {tot/bw*1e6:.2f} us; like {row['like']/row['tpu']:.3f} -> {(row['like']+tot/bw)/row['tpu']:.3f}")
