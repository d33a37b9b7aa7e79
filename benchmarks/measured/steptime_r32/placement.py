"""Entry kernel results of the chip's optimised programs: in S(1) or HBM, program output or not, by size."""
import sys, re, glob, os, collections, json
sys.path.insert(0, ".")
from chipops import arrays
tot = collections.Counter()
rows = {}
for f in sorted(glob.glob("chip/opt/*.opt.txt")):
    t = open(f).read(); i = t.index("\nENTRY"); e = t[i:t.index("\n}", i)]
    root = re.search(r"ROOT %[\w.\-]+ = .*?tuple\((.*)\)", e)
    outs = set(re.findall(r"%([\w.\-]+)", root.group(1))) if root else set()
    # follow bitcasts/copies to outputs: names defined as bitcast(%x) / copy-done etc
    defs = {m.group(1): m.group(2) for m in re.finditer(r"^\s*(?:ROOT )?%([\w.\-]+) = .*? (?:bitcast|copy|copy-done|get-tuple-element)\(%([\w.\-]+)\)", e, re.M)}
    changed = True
    while changed:
        changed = False
        for a, b in defs.items():
            if a in outs and b not in outs: outs.add(b); changed = True
    c = collections.Counter()
    for m in re.finditer(r"^\s*(?:ROOT )?%([\w.\-]+) = (.*?) (fusion|convolution|dot|reduce|copy|transpose|convert)\(", e, re.M):
        for b, v in arrays(m.group(2)):
            if b < 2 ** 18: continue
            big = b > 64 * 2 ** 20
            key = ("out" if m.group(1) in outs else "int") + (">64M" if big else "") + ("_S1" if v else "_HBM")
            c[key] += 1
    rows[os.path.basename(f)[:-8]] = dict(c); tot.update(c)
    print(f"{os.path.basename(f)[:-8]:32}", dict(sorted(c.items())))
print("TOTAL", dict(sorted(tot.items())))
