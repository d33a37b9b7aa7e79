import sys, time
sys.path[:0] = ["/work/wt/tpu/src", "/work/wt/tpu"]
from hloshard.hlo import parse_module
from hloshard.cost.tpu_partitioner import update_relayouts, resharded_updates, folded_transposes
for f in ("propagated", "solve"):
    t0 = time.time()
    m = parse_module(open(f"/work/notes/tpurows33/pod/l48/{f}.hlo").read())
    print(f, "folded", len(folded_transposes(m)), "updates", len(resharded_updates(m, "tpu-v5e")), "relayouts", len(update_relayouts(m, "tpu-v5e")), "%.0fs" % (time.time() - t0), flush=True)
