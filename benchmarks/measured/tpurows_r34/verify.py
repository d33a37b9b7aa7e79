import sys, pathlib
sys.path[:0] = [__import__("os").environ.get("WT", "/work/wt/tpurows") + "/benchmarks", __import__("os").environ.get("WT", "/work/wt/tpurows") + "/src", __import__("os").environ.get("WT", "/work/wt/tpurows")]
import time_truth as tt
dev, names = sys.argv[1], sys.argv[2].split(",")
for case in tt.cases(names, True, None):
    got = tt.solved_text(case["pre"], case["mesh"], 10.0, True, dev)
    ref = pathlib.Path(f"plans/{dev}/samples/{case['name']}.solve.hlo")
    if not ref.exists(): ref = pathlib.Path(f"/work/notes/tpurows33/plans_br/{dev}/samples/{case['name']}.solve.hlo")
    print(dev, case["name"], "identical to", ref, got == ref.read_text(), flush=True)
