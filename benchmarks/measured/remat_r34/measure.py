"""Predicted peak per device (main vs branch) beside XLA's (cost --xla of the branch), per module.
usage: measure.py OUT.jsonl [FILE[::flags] ...]   flags: extra cost options separated by spaces"""
import json, os, subprocess, sys, time
PY = "/work/main/.venv/bin/python"
def cost(src, f, flags, xla):
    env = dict(os.environ, PYTHONPATH=f"{src}/src:{src}")
    cmd = [PY, "-m", "hloshard", "cost", f, "--mesh", "data=2,model=4", "--format", "json"] + flags + (["--xla"] if xla else [])
    t = time.time(); p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode:
        return {"error": p.stderr[-400:]}
    d = json.loads(p.stdout); m = d.get("memory") or {}
    x = (m.get("xla") or {})
    return {"pred": d["peak_memory_per_device"], "at": d.get("peak_memory_at"), "xla": x.get("total_bytes"),
            "xla_top": [b["name"] + ":" + str(b["bytes"]) for b in x.get("peak_buffers", [])][:3],
            "bytes_pred": d.get("predicted_bytes_per_device"), "bytes_xla": d.get("xla_bytes_per_device"),
            "secs": round(time.time() - t, 1)}
if __name__ != "__main__":
    pass
else:
  out = open(sys.argv[1], "a")
  for spec in sys.argv[2:]:
      f, _, fl = spec.partition("::")
      flags = fl.split() if fl else []
      main = cost("/work/main", f, flags, False)
      br = cost("/work/wt/remat", f, flags, True)
      load = os.getloadavg()[0]
      row = {"file": f, "flags": fl, "main_pred": main.get("pred"), "branch_pred": br.get("pred"), "xla": br.get("xla"),
             "branch": br, "main": main, "load": load}
      if row["xla"] and row["branch_pred"]:
          row["ratio_main"] = round(main["pred"] / row["xla"], 4) if main.get("pred") else None
          row["ratio_branch"] = round(br["pred"] / row["xla"], 4)
      out.write(json.dumps(row) + "\n"); out.flush()
      print(f, fl, row.get("main_pred"), row.get("branch_pred"), row.get("xla"), row.get("ratio_main"), row.get("ratio_branch"), flush=True)
