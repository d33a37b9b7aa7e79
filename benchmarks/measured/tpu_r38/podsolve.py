"""the pod's solve (time_truth.solved_text, as --pod writes it) with WT's code; cmp with round 33's solve.hlo"""
import sys, os, time
WT = os.environ["WT"]; sys.path[:0] = [WT + "/benchmarks", WT + "/src", WT]
import time_truth as tt
t0 = time.time()
import pathlib
pre = pathlib.Path("/work/notes/tpurows33/pod/l48/pre.hlo")
text = tt.solved_text(pre, tt.POD["mesh"], 60.0, True, "tpu-v5e")
open("pod_solve_br.hlo", "w").write(text)
same = text == open("/work/notes/tpurows33/pod/l48/solve.hlo").read()
print("pod solve %.0fs identical to round 33's: %s" % (time.time() - t0, same), flush=True)
