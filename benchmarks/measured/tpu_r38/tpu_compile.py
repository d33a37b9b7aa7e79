"""Under /work/venv-pins: compile each PLANS/DEV/*/*.hlo for DEV's topology; write X.opt.txt and X.cost.json."""
import sys, json, pathlib, os
sys.path.insert(0, os.environ.get("WT", "/work/wt/tpurows") + "/src")
from hloshard.xla_cost import _compile_tpu, _analysis
TOPO = {"tpu-v5e": "v5e:2x4", "tpu-v5p": "v5p:2x2x2", "tpu-v6e": "v6e:2x4"}
root, dev = pathlib.Path(sys.argv[1]), sys.argv[2]
for f in sorted((root / dev).glob("*/*.hlo")):
    cj = f.with_suffix(".cost.json")
    if cj.exists(): continue
    try:
        exe = _compile_tpu(f.read_text(), 8, TOPO[dev])
        a = _analysis(exe, tpu=True)
        f.with_suffix(".opt.txt").write_text("\n".join(m.to_string() for m in exe.hlo_modules()))
    except Exception as exc:
        a = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
    cj.write_text(json.dumps(a)); print(dev, f.parent.name, f.name, a.get("optimal_seconds"), a.get("error"), flush=True)
