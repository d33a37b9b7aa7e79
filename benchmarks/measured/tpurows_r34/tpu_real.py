"""libtpu's estimate (optimal_seconds + ConcatBitcasts) of each written module DIR/*.solved.hlo (GSPMD, v5e:2x4)."""
import sys, json, glob, os
sys.path.insert(0, os.environ.get("WT", "/work/wt/tpurows") + "/src")
from hloshard.xla_cost import _compile_tpu, _analysis
out = {}
for f in sorted(glob.glob(sys.argv[1] + "/*.solved.hlo"), key=lambda p: ("gemma" in p, p)):
    try:
        a = _analysis(_compile_tpu(open(f).read(), 8, "v5e:2x4"), tpu=True)
    except Exception as exc:
        a = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
    out[os.path.basename(f)] = a
    print(os.path.basename(f), a.get("optimal_seconds"), a.get("concat_bitcasts"), a.get("error"), flush=True)
    json.dump(out, open(sys.argv[2], "w"), indent=1)
