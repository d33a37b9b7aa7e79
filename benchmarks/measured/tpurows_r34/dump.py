"""Compile HLO text for a TPU topology with every pass dumped: python dump.py FILE TOPO DUMPDIR"""
import os, sys
os.environ["XLA_FLAGS"] = f"--xla_dump_to={sys.argv[3]} --xla_dump_hlo_pass_re=.*"
sys.path.insert(0, __import__("os").environ.get("WT", "/work/wt/tpurows") + "/src")
from hloshard.xla_cost import _compile_tpu, _analysis
exe = _compile_tpu(open(sys.argv[1]).read(), 8, sys.argv[2])
a = _analysis(exe, tpu=True)
print(sys.argv[1], a.get("optimal_seconds"), a.get("bytes_accessed"))
