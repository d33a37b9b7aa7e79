import sys, json
from hloshard.hlo import print_module, parse_module
from hloshard.load import load_module
from hloshard.xla_memory import xla_memory
from hloshard.xla_compare import tag_module_text
texts = [tag_module_text(parse_module(print_module(load_module(p))))[0] for p in sys.argv[1:]]
for p, x in zip(sys.argv[1:], xla_memory(texts, 8, timeout=1800)):
    print(json.dumps({"path": p, "xla": x.total if x.error is None else x.error}), flush=True)
