"""Predicted per-id bytes of a row gather jnp.take(table[R,W], ids[n]) on libtpu (written before ho2 ran):
9 x P (8 tile rows read + the row written, P = W padded up to 128 lanes x itemsize) + 8 (the id, read twice)
+ when W % 128: the output's layout copy, P read + W padded to the dtype's sublanes (8 x 4/itemsize) written."""
import json, sys
ISZ = {"f32": 4, "bf16": 2, "f16": 2, "s8": 1, "s32": 4}
def pred(w, dt):
    isz = ISZ[dt]; P = -(-w // 128) * 128 * isz
    s = 8 * 4 // isz
    copy = 0 if w % 128 == 0 else P + -(-w // s) * s * isz
    return 9 * P + 8 + copy, 9 * P
if __name__ == "__main__":
    for r in json.load(open(sys.argv[1])):
        p, g = pred(r["width"], r["dtype"])
        print(f"{r['rows']:6} {r['width']:5} {r['dtype']:5} {r['nids']:5} {r['idshape']} observed {r['per_id']:9.1f} predicted {p:7d} ratio {r['per_id']/p:.4f}  (gather part {g}; old rule 9 x row {9*r['row_bytes']})")
