"""like (loop bodies once) / libtpu estimate per plan of PLANS/DEV, with WT's code: ev.py PLANS DEV TAG [groups]"""
import sys, json, pathlib, os
WT = os.environ.get("WT", "/work/wt/tpurows")
sys.path[:0] = [WT + "/benchmarks", WT + "/src", WT]
import time_truth as tt
from hloshard.xla_cost import XlaCost
root, dev, tag = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
groups = sys.argv[4].split(",") if len(sys.argv) > 4 else ["samples", "heads", "ho"]
rows = []
for g in groups:
    for f in sorted((root / dev / g).glob("*.hlo")):
        cj = f.with_suffix(".cost.json")
        if not cj.exists(): continue
        c = json.loads(cj.read_text())
        if c.get("error"): continue
        name, plan = f.name.split(".")[:2]
        mesh = (f.parent / f"{name}.mesh").read_text().strip()
        est = XlaCost(c["flops"], c["bytes_accessed"], c.get("transcendentals"), c["optimal_seconds"],
                      concat_bitcasts=c.get("concat_bitcasts")).estimate_seconds
        try:
            h = tt.hloshard_side(f.read_text(), mesh, dev)
        except Exception as exc:
            print("ERR", name, plan, exc, flush=True); continue
        r = dict(group=g, name=name, plan=plan, tpu=est, like=h["tpu_like_once_s"], step=h["step_s"],
                 flops=h["flops_once"], bytes=h["bytes_once"], tpu_flops=c["flops"], tpu_bytes=c["bytes_accessed"])
        rows.append(r)
        print(f"{g:8} {name:32} {plan:6} tpu {est*1e6:9.2f} like/tpu {r['like']/est:6.3f} step {r['step']*1e6:9.2f}", flush=True)
pathlib.Path(os.environ.get("EVOUT", "/work/notes/tpurows35") + f"/ev_{dev}_{tag}.json").write_text(json.dumps(rows, indent=1))
for g in groups:
    rs = [r for r in rows if r["group"] == g]
    ok = sum(0.75 <= r["like"] / r["tpu"] <= 1.25 for r in rs)
    print(f"{g}: like within 25% {ok}/{len(rs)}")
    by = {}
    for r in rs: by.setdefault(r["name"], {})[r["plan"]] = r["tpu"]
    slow = [(n, p["solve"] / p["GSPMD"]) for n, p in sorted(by.items()) if "solve" in p and "GSPMD" in p]
    print(f"{g}: solve slower than GSPMD by libtpu: {sum(x > 1 + 1e-9 for _, x in slow)}/{len(slow)}; max ratio {max(x for _, x in slow):.3f}" if slow else "")
