"""Under /work/venv-pins: compile the tpureal modules for one chip of v5e:2x2; write opt text + cost."""
import sys, json, pathlib
sys.path.insert(0, "/work/wt/steptime/src")
from hloshard.xla_cost import _compile_tpu, _analysis
names = sys.argv[1:]
src = pathlib.Path("/work/main/tmp/tpureal")
for n in names:
    exe = _compile_tpu((src / f"{n}.hlo").read_text(), 1, "v5e:2x2")
    a = _analysis(exe, tpu=True)
    pathlib.Path("opt", n + ".opt.txt").write_text("\n".join(m.to_string() for m in exe.hlo_modules()))
    pathlib.Path("opt", n + ".cost.json").write_text(json.dumps(a))
    print(n, a, flush=True)
