#!/bin/bash
# f6_repro.sh OUT TREE_SRC: the fused-QKV sample's own 2x4 plan (solve --deterministic --time-limit 2) given back to
# `solve --mesh data=2:dcn,model=4 --device h100-sxm --time-limit 3` (wall-clock: at load the solver gets its 0.5 s
# minimum); prints the written objective beside the input as given.
OUT=$1; SRC=${2:-/work/wt/speed/src}; WT=${WT:-/work/wt/speed}; mkdir -p $OUT
PY=/work/main/.venv/bin/python
PYTHONPATH=$SRC $PY -m hloshard solve $WT/samples/fused_qkv_train_step.propagated.hlo --mesh 2x4 --deterministic \
  --time-limit 2 -o $OUT/given.hlo --report $OUT/given.json 2>/dev/null
PYTHONPATH=$SRC $PY -m hloshard solve $OUT/given.hlo --mesh data=2:dcn,model=4 --device h100-sxm --time-limit 3 \
  -o $OUT/out.hlo --report $OUT/out.json 2>/dev/null
python3 -c "import json; d=json.load(open('$OUT/out.json')); print('written', d['objective'], 'as given', d['input_cost'], 'load', open('/proc/loadavg').read().split()[0])"
