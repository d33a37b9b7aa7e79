"""xla.py OUT.json FILE...: XLA's memory_analysis total of each module (tagged as cost --xla hands it over), one child."""
import sys, json
from hloshard.load import load_module
from hloshard.xla_compare import tag_module_text
from hloshard.xla_memory import xla_memory
files = sys.argv[2:]
texts = [tag_module_text(load_module(f))[0] for f in files]
res = xla_memory(texts, 8, timeout=3000, k=5)
out = {f: (r.error or {"arg": r.argument, "out": r.output, "temp": r.temp, "alias": r.alias, "total": r.total}) for f, r in zip(files, res)}
for f, v in out.items(): print(f, v)
json.dump(out, open(sys.argv[1], "w"), indent=1)
