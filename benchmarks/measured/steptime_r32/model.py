"""Chip-side model check: module time vs sum over kernels of a + max(f/peak, h/bw, v/vbw) (chip's own bytes)."""
import sys, math
sys.path.insert(0, ".")
from chipops import classify
from kflops import kernel_flops
PEAK, BW, VBW, A = 197e12, 819e9 * 0.9, 3.55e12, 0.18e-6
def pad(x, m): return math.ceil(x / m) * m
def est(name, a=A, vbw=VBW):
    r, rows = classify(name)
    fl = {x["name"]: x for x in kernel_flops(name)}
    tot = 0.0; parts = [0, 0, 0]
    for x in rows:
        op = x["op"]
        if op.split(":")[0] in ("copy-start", "copy-done", "async-start", "async-done", "slice-start", "slice-done", "custom-call", "bitcast", "get-tuple-element", "tuple", "parameter", "constant"):
            continue
        f = fl[x["name"]]["flops"] if x["name"] in fl else 0
        t = max(f / PEAK, x["hbm"] / BW, x["vm"] / vbw)
        tot += a + t
    return tot, r["lines"]["XLA Modules"][1]
for n in sys.argv[1:]:
    e, m = est(n)
    print(f"{n:34} model {e*1e6:9.1f} us  measured {m*1e6:9.1f}  model/meas {e/m:5.2f}")
