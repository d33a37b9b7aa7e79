"""dump.py X.hlo TOPOLOGY N OUTDIR : compile a written plan with libtpu ahead of time, dumping the HLO after
the passes (XLA_FLAGS set by the caller)."""
import sys
sys.path.insert(0, "/work/wt/tpu/src")
from hloshard.xla_cost import _compile_tpu, _analysis
text = open(sys.argv[1]).read()
exe = _compile_tpu(text, int(sys.argv[3]), sys.argv[2])
print(_analysis(exe, tpu=True))
