# issue 26's scale table, round 25 (helper scale): this branch's code (tmp/scalehelper/src) on 4 core pairs (the
# 11 cases of rounds 23-24), main's code (src/) for the two 48-layer rows on the 5th pair, and this branch's Llama
# 3.1 8B at 2x2x2 with --time-limit 120 on the 6th (a limit whose coarse_first estimate, 61 s, lets the fine build
# start: what the fine path costs in seconds and bytes), all side by side (shared memory bus and last-level cache).
# modules: tmp/scale (carried); usage: bash tmp/scalehelper/device_command.sh [small]  (small: a local dry run)
set -u
H=$PWD/tmp/scalehelper; OUTDIR=${OUT:-/tmp/scalehelper_out}; mkdir -p $OUTDIR
if [ "${1:-}" != small ]; then
  PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl-tpu/*.whl || exit
  PY=python3; SITE=/tmp/site
else
  PY=/work/main/.venv/bin/python; SITE=
fi
export PYTHONUNBUFFERED=1
S=tmp/scale; M=$S/nv_maxtext_1n1g_jit_train_step_before_optimization.hlo; L=$S/hlo_llama31_8b_bf16_1x8.hlo; T=$S/transformer_48l.pre.hlo
rm -rf /tmp/sbnew /tmp/sbmain /tmp/sbl120; mkdir -p /tmp/sbnew /tmp/sbmain /tmp/sbl120
if [ "${1:-}" = small ]; then
  A="--case samples/mlp_train_step.pre.hlo@2x2x2@5 --case samples/moe_layer.pre.hlo@2x4@5"; B="--case samples/mlp_train_step.pre.hlo@2x2x2@5"
  C="--case samples/mlp_train_step.pre.hlo@2x4@5"; PA=0-1; PB=0-1; PC=0-1
else
  A="--case $T@2x2x2 --case $T@4x2 --case $L@4x2 --case $L@2x4 --case $T@2x4 --case $S/part128.hlo@16x8@30 --case $L@2x2x2 --case $M@2x2x2 --case $S/llama16.hlo@2x2x4 --case $M@4x2 --case $M@2x4"
  B="--case $T@2x2x2 --case $T@4x2"; C="--case $L@2x2x2@120"
  PA=0-1,2-3,4-5,6-7; PB=8-9; PC=10-11
fi
PYTHONPATH=${SITE:+$SITE:}$H/src:$PWD timeout 280 $PY benchmarks/scale_bench.py --cores $PA --workdir /tmp/sbnew --json $OUTDIR/scale_new.json $A > /tmp/sbnew/table.md 2>&1 &
PYTHONPATH=${SITE:+$SITE:}$PWD/src:$PWD timeout 280 $PY benchmarks/scale_bench.py --cores $PB --workdir /tmp/sbmain --json $OUTDIR/scale_main.json $B > /tmp/sbmain/table.md 2>&1 &
PYTHONPATH=${SITE:+$SITE:}$H/src:$PWD timeout 280 $PY benchmarks/scale_bench.py --cores $PC --workdir /tmp/sbl120 --json $OUTDIR/scale_llama120.json $C > /tmp/sbl120/table.md 2>&1 &
wait
cd /tmp && tar czf $OUTDIR/logs.tgz sbnew/*.report.json sbnew/*.stderr sbnew/table.md sbmain/*.report.json sbmain/*.stderr sbmain/table.md sbl120/*.report.json sbl120/*.stderr sbl120/table.md 2>/dev/null
cat /tmp/sbnew/table.md /tmp/sbmain/table.md /tmp/sbl120/table.md | grep -v "^$" | grep "exit"; ls -la $OUTDIR
