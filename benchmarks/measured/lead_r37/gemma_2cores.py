"""Gemma's auto_shard timed on two idle cores (round 37, lead; issue 24's "<= 15 s wall on 2 cores"): keras-hub
imported without tensorflow (nontf_stubs.py), then benchmarks/measured/speed_r37/prof_gemma.py's call (real_models'
config: 4 layers, mesh 2x4, keep_shardings="io", time_limit=10) with argv passed through.  Run under
`taskset -c 0,1` with JAX_PLATFORMS=cpu.  argv: out_prefix noprof gemma auto [wallclock]; env GEMMA_TIME_LIMIT: another time_limit"""
import os, runpy, sys
here = os.path.dirname(os.path.abspath(__file__))
exec(open(os.path.join(here, "nontf_stubs.py")).read())
WALL = sys.argv[-1] == "wallclock"   # deterministic=False: the wall-clock mode a user gets by default
if WALL:
    sys.argv.pop()
TL = os.environ.get("GEMMA_TIME_LIMIT")   # another time_limit than prof_gemma's 10 s
if WALL or TL:
    import hloshard.jax.api as _api
    _orig = _api.auto_shard
    def _patched(*a, **k):
        if WALL:
            k["deterministic"] = False
        if TL:
            k["time_limit"] = float(TL)
        return _orig(*a, **k)
    _api.auto_shard = _patched
sys.argv = [os.path.join(here, "..", "speed_r37", "prof_gemma.py")] + sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
