# helper search round 27: issue 26's scale table, branch (tmp/search/src) on 4 core pairs, main (src/) 48-layer rows on 2
# pairs beside it; every .py compiled once first (pip --no-compile and a fresh src tree made each first-wave case
# compile its imports). Run as tmp/search/device_scale.sh, carry tmp/scale tmp/search .whl-tpu
set -u
OUTDIR=${OUT:-/tmp/search_out}; mkdir -p $OUTDIR
PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl-tpu/*.whl || exit
export PYTHONUNBUFFERED=1
T0=$(date +%s.%N)
python3 -m compileall -q -j 8 /tmp/site src tmp/search/src benchmarks >/dev/null 2>&1
echo "compileall $(python3 -c "import time; print(round(time.time() - $T0, 1))") s"
S=tmp/scale; M=$S/nv_maxtext_1n1g_jit_train_step_before_optimization.hlo; L=$S/hlo_llama31_8b_bf16_1x8.hlo; T=$S/transformer_48l.pre.hlo
rm -rf /tmp/sa /tmp/sb; mkdir -p /tmp/sa /tmp/sb
A="--case $T@2x2x2 --case $T@4x2 --case $L@4x2 --case $L@2x4 --case $T@2x4 --case $S/part128.hlo@16x8@30 --case $L@2x2x2 --case $M@2x2x2 --case $S/llama16.hlo@2x2x4 --case $M@4x2 --case $M@2x4"
B="--case $T@2x2x2 --case $T@4x2"
PYTHONPATH=/tmp/site:$PWD/tmp/search/src:$PWD timeout 290 python3 benchmarks/scale_bench.py --cores 0-1,2-3,4-5,6-7 --workdir /tmp/sa --json $OUTDIR/scale_branch.json $A > /tmp/sa/table.md 2>&1 &
PYTHONPATH=/tmp/site:$PWD/src:$PWD timeout 290 python3 benchmarks/scale_bench.py --cores 8-9,10-11 --workdir /tmp/sb --json $OUTDIR/scale_main48.json $B > /tmp/sb/table.md 2>&1 &
wait
cd /tmp && tar czf $OUTDIR/searchlogs.tgz sa/*.report.json sa/*.stderr sa/table.md sb/*.report.json sb/*.stderr sb/table.md 2>/dev/null
cat /tmp/sa/table.md /tmp/sb/table.md | grep -v "^$"; ls -la $OUTDIR
