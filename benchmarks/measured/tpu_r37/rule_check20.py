"""The lane rule against every all-to-all of libtpu's optimised programs (glob): observed flat = a reshape to a
[k, s, N] T(s,128) buffer feeds it; the chunk dims from the partitioner's shape (the reshape's source, or the
all-to-all's own shape less its exchanged dim)."""
import re, sys, glob, os, json
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from a2a_obs import analyse
from lane_rule import flattens, flattens_r2
from lane_rule import flattens_r3
if os.environ.get("RULE") == "r2": flattens = flattens_r2
if os.environ.get("RULE") == "r3": flattens = flattens_r3
SH = re.compile(r"(\w+)\[([0-9,]*)\](?:\{([0-9,]*))?")
tot = dict(n=0, ok=0, flat_obs=0, flat_pred=0); rows = []
for f in sorted(glob.glob(sys.argv[1])):
    for r in analyse(open(f).read()):
        m = SH.match(r["shape"]); dims = [int(x) for x in m.group(2).split(",")]
        flat_obs = bool(r["pre"]) and r["pre"][0]["op"] == "reshape" and re.search(r"T\([12],128\)", r["pre"][0]["out"]) is not None
        if flat_obs:
            s = SH.match(r["pre"][0]["src"]); sd = [int(x) for x in s.group(2).split(",")]
            lay = [int(x) for x in s.group(3).split(",")] if s.group(3) else list(range(len(sd)))[::-1]
            ex = lay[-1]   # the major-most dim: the exchanged one
            chunk = [d for i, d in enumerate(sd) if i != ex]
        else:
            chunk = [d for i, d in enumerate(dims) if i != r["dim"]]
        pred = flattens(chunk)
        tot["n"] += 1; tot["ok"] += pred == flat_obs; tot["flat_obs"] += flat_obs; tot["flat_pred"] += pred
        rows.append(dict(file=os.path.basename(f), a2a=r["name"], chunk=chunk, obs=flat_obs, pred=pred))
        if pred != flat_obs: print("MISS", os.path.basename(f), r["name"], r["shape"], chunk, "obs", flat_obs, "pred", pred)
print(tot)
json.dump(rows, open(sys.argv[2], "w"), indent=0)
