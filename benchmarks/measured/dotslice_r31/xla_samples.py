"""XLA bytes (final compiled HLO, ring bytes per device) of the solved sample modules, main vs branch; objectives."""
import glob, json, os, sys
sys.path.insert(0, "/work/wt/dotslice")
from tests import xla_oracle
from tests.xla_bytes import collective_bytes
rows = []
files = sorted(glob.glob("/tmp/ds/samples/*.hlo"))
texts = [open(f).read() for f in files]
res = xla_oracle.compile_many(texts, 8)
out = {}
for f, (ok, txt) in zip(files, res):
    k = os.path.basename(f)[:-4]
    tag, rest = k.split(".", 1)
    j = json.load(open(f[:-4] + ".json"))
    b = sum(c["bytes"] for c in collective_bytes(txt)) if ok else None
    out.setdefault(rest, {})[tag] = (j["objective"], j["peak_memory_per_device"], j["predicted_collective_bytes_per_device"], b, open(f).read())
print("| sample | mesh | objective main | objective branch | predicted bytes main / branch | XLA bytes main | XLA bytes branch | same module |")
for rest in sorted(out):
    d = out[rest]
    if "main" not in d or "dotslice" not in d: continue
    s, m = rest.rsplit(".", 1)
    a, b = d["main"], d["dotslice"]
    print(f"| {s} | {m} | {a[0]:,.1f} | {b[0]:,.1f} | {a[2]:,.0f} / {b[2]:,.0f} | {a[3]:,.0f} | {b[3]:,.0f} | {'yes' if a[4]==b[4] else 'no'} |")
