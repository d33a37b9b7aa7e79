"""Today's solve plans (WT's code) for DEV: plans33/DEV/GROUP/NAME.solve.hlo (+ GSPMD copied, mesh)."""
import sys, pathlib, time, os
WT = os.environ.get("WT", "/work/wt/tpurows")
sys.path[:0] = [WT + "/benchmarks", WT + "/src", WT]
import time_truth as tt
OUT = pathlib.Path(os.environ.get("PLANS", "/work/notes/tpurows33/plans"))
dev = sys.argv[1]
groups = sys.argv[2].split(",") if len(sys.argv) > 2 else ["samples", "heads", "ho"]
only = sys.argv[3].split(",") if len(sys.argv) > 3 else None
src = {"samples": (None, True), "heads": ("/work/notes/steptime30/heads", False), "ho": ("/work/notes/steptime31/ho", False)}
for g in groups:
    extra, corpus = src[g]
    for case in tt.cases(only, corpus, extra):
        d = OUT / dev / g; d.mkdir(parents=True, exist_ok=True)
        (d / f"{case['name']}.mesh").write_text(case["mesh"])
        if case["propagated"] is not None and case["propagated"].exists():
            (d / f"{case['name']}.GSPMD.hlo").write_text(case["propagated"].read_text())
        f = d / f"{case['name']}.solve.hlo"
        if f.exists(): continue
        t0 = time.monotonic()
        try:
            f.write_text(tt.solved_text(case["pre"], case["mesh"], 10.0, True, dev))
        except Exception as exc:
            print("ERR", dev, case["name"], exc, flush=True)
        print(dev, g, case["name"], f"{time.monotonic()-t0:.0f}s", flush=True)
