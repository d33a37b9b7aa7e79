"""CPU seconds of build_graph on XLA-propagated modules (every dot fixed): the lazy fixed dot vs the whole space
(only_output patched to ALL_OUTPUTS in strategy.dot), alternating, same process."""
import sys, time
import hloshard.strategy.dot as dot
from hloshard.autoshard.build import build_graph
from hloshard.load import load_module
from hloshard.mesh import DeviceMesh
from hloshard.strategy.registry import ALL_OUTPUTS, only_output
for path, spec in [a.split("@") for a in sys.argv[1:]]:
    m = load_module(path)
    mesh = DeviceMesh.for_module(m, spec)
    res = {"lazy": [], "whole": []}
    for rep in range(3):
        for mode in ("whole", "lazy"):
            dot.only_output = only_output if mode == "lazy" else (lambda i, c: ALL_OUTPUTS)
            c0 = time.process_time()
            g = build_graph(m, mesh, "all")
            res[mode].append(time.process_time() - c0)
    print(path.split("/")[-1], spec, {k: [round(x, 2) for x in v] for k, v in res.items()},
          "min ratio %.3f" % (min(res["lazy"]) / min(res["whole"])), flush=True)
