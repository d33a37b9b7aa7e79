"""Entry parameter layouts libtpu chose (entry_computation_layout of each X.opt.txt) against the padding rule:
an f32 / bf16 parameter of rank >= 2 keeps the default (row-major) layout unless swapping its two minor-most
dims pads less ((8,128) tiles for 4-byte elements, (16,128) for 2-byte); then those two dims swap.
python entrylayout.py 'GLOB'"""
import re, sys, glob, collections
def padded(dt, rows, lanes):
    sub = {"f32": 8, "s32": 8, "bf16": 16, "f16": 16}[dt]
    return (-(-rows // sub) * sub) * (-(-lanes // 128) * 128)
agree = collections.Counter(); bad = []; kinds = collections.Counter()
for f in sorted(glob.glob(sys.argv[1])):
    head = open(f).read(40000)
    m = re.search(r"entry_computation_layout=\{\((.*?)\)->", head)
    if not m: continue
    for dt, dims, lay in re.findall(r"(\w+)\[([0-9,]+)\]\{([0-9,]+)(?::[^}]*)?\}", m.group(1)):
        d = [int(x) for x in dims.split(",")]
        if len(d) < 2 or dt not in ("f32", "bf16"): continue
        r = len(d)
        default = list(range(r - 1, -1, -1))
        swapped = [r - 2, r - 1] + list(range(r - 3, -1, -1))
        keep = padded(dt, d[-2], d[-1]); swap = padded(dt, d[-1], d[-2])
        want = swapped if swap < keep else default
        got = [int(x) for x in lay.split(",")]
        ok = got == want
        agree[ok] += 1; kinds[(r, "swapped" if got == swapped else "default" if got == default else "other")] += 1
        if not ok: bad.append((f.split("/")[-3:], dt, d, lay, keep, swap))
print("agree", dict(agree), "by (rank, layout):", dict(kinds))
for b in bad[:20]: print("DISAGREE", b)
