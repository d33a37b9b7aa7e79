import sys, os
from hloshard.load import load_module
from hloshard.xla_compare import tag_module_text
from hloshard.xla_memory import xla_memory
n = int(sys.argv[1]); paths = sys.argv[2:]
texts = []
for p in paths:
    m = load_module(p)
    texts.append(tag_module_text(m)[0])
d = "/work/notes/mem38/a2a/dumps"
res = xla_memory(texts, n, compiled=True, keep_dump=d, k=8)
for i, (p, r) in enumerate(zip(paths, res)):
    base = os.path.basename(p).rsplit('.',1)[0]
    print(p, "total", r.total, "arg", r.argument, "out", r.output, "temp", r.temp, "alias", r.alias, r.error)
    for b in r.peak_buffers: print("   ", b)
    open(f"/work/notes/mem38/a2a/{base}.compiled.txt","w").write(r.compiled or "")
    for f in r.dumps:
        os.rename(f, f.replace(f"{d}/{i}.", f"{d}/{base}."))
