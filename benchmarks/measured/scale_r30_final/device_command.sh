# lead round 25: issue 26's scale table on final main (src/), 11 rows on 4 core pairs + 48-layer rows again on a 5th
set -u
OUTDIR=${OUT:-/tmp/lead_out}; mkdir -p $OUTDIR
PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl-tpu/*.whl || exit
python3 -m compileall -q /tmp/site src > /dev/null 2>&1
export PYTHONUNBUFFERED=1
S=tmp/scale; M=$S/nv_maxtext_1n1g_jit_train_step_before_optimization.hlo; L=$S/hlo_llama31_8b_bf16_1x8.hlo; T=$S/transformer_48l.pre.hlo
rm -rf /tmp/sa /tmp/sb; mkdir -p /tmp/sa /tmp/sb
A="--case $T@2x2x2 --case $T@4x2 --case $L@4x2 --case $L@2x4 --case $T@2x4 --case $S/part128.hlo@16x8@30 --case $L@2x2x2 --case $M@2x2x2 --case $S/llama16.hlo@2x2x4 --case $M@4x2 --case $M@2x4"
B="--case $T@2x2x2 --case $T@4x2"
PYTHONPATH=/tmp/site:$PWD/src:$PWD timeout 290 python3 benchmarks/scale_bench.py --cores 0-1,2-3,4-5,6-7 --workdir /tmp/sa --json $OUTDIR/scale_final.json $A > /tmp/sa/table.md 2>&1 &
PYTHONPATH=/tmp/site:$PWD/src:$PWD timeout 290 python3 benchmarks/scale_bench.py --cores 8-9,10-11 --workdir /tmp/sb --json $OUTDIR/scale_48l_again.json $B > /tmp/sb/table.md 2>&1 &
wait
cd /tmp && tar czf $OUTDIR/leadlogs.tgz sa/*.report.json sa/*.stderr sa/table.md sb/*.report.json sb/*.stderr sb/table.md 2>/dev/null
cat /tmp/sa/table.md /tmp/sb/table.md | grep -v "^$"; ls -la $OUTDIR
