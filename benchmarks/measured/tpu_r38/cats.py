import sys, glob, os, collections
from rl import rows
def cat(r):
    if r["prod"] in ("copy-done", "parameter"): return "param-in"
    if r["cons"] and all(c == "tuple" for c in r["cons"]): return "out"
    if "all-to-all" in r["cons"] or r["prod"] == "all-to-all": return "a2a"
    if "all-reduce" in r["cons"] or r["prod"] == "all-reduce": return "ar"
    if "all-gather" in r["cons"]: return "ag"
    return "other"
if __name__ == "__main__":
  for f in sorted(glob.glob(sys.argv[1])):
      rs = rows(f); by = collections.defaultdict(float); n = collections.Counter()
      for r in rs: by[cat(r)] += r["padded"]; n[cat(r)] += 1
      print(f"{os.path.basename(f)[:-8]:40}", " ".join(f"{k}:{n[k]}/{by[k]/1e6:.2f}" for k in ("param-in", "out", "a2a", "ar", "ag", "other")))
