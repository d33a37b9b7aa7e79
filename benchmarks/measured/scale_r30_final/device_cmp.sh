# lead round 30: scale rows, main (wall + search merged) vs round 29's main (tmp/base_src), side by side on 6 core pairs
set -u
OUTDIR=${OUT:-/tmp/lead_out}; mkdir -p $OUTDIR
PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl-tpu/*.whl || exit
python3 -m compileall -q /tmp/site src tmp/base_src > /dev/null 2>&1
export PYTHONUNBUFFERED=1
S=tmp/scale; L=$S/hlo_llama31_8b_bf16_1x8.hlo; T=$S/transformer_48l.pre.hlo
A="--case $T@4x2 --case $T@2x2x2 --case $L@2x2x2"
rm -rf /tmp/sa /tmp/sb; mkdir -p /tmp/sa /tmp/sb
PYTHONPATH=/tmp/site:$PWD/src:$PWD timeout 200 python3 benchmarks/scale_bench.py --cores 0-1,2-3,4-5 --workdir /tmp/sa --json $OUTDIR/new.json $A > /tmp/sa/table.md 2>&1 &
PYTHONPATH=/tmp/site:$PWD/tmp/base_src:$PWD timeout 200 python3 benchmarks/scale_bench.py --cores 6-7,8-9,10-11 --workdir /tmp/sb --json $OUTDIR/base.json $A > /tmp/sb/table.md 2>&1 &
wait
echo "== new (main)"; cat /tmp/sa/table.md | grep -v "^$"; echo "== base (146bc6f)"; cat /tmp/sb/table.md | grep -v "^$"
for d in sa sb; do for f in /tmp/$d/*.report.json; do python3 -c "
import json,sys; r=json.load(open('$f')); print('$d', '$f'.split('/')[-1], r.get('objective') or r.get('total_cost'), r.get('plan_source'), [w[:150] for w in r.get('warnings',[]) if 'coarse' in w][:2])"; done; done
