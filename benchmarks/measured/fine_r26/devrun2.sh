# helper fine round 26, call 2: branch (tmp/fine/src) vs main on the 48-layer scale rows; det solves after; held-out builds
set -u
OUTDIR=${OUT:-/tmp/fine_out}; mkdir -p $OUTDIR
PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl-tpu/*.whl >/dev/null 2>&1 || exit 9
export PYTHONUNBUFFERED=1
MAINP=/tmp/site:$PWD/src:$PWD; FINEP=/tmp/site:$PWD/tmp/fine/src:$PWD
S=tmp/scale; F=tmp/fine; T=$S/transformer_48l.pre.hlo; L=$S/hlo_llama31_8b_bf16_1x8.hlo; M=$S/nv_maxtext_1n1g_jit_train_step_before_optimization.hlo
mkdir -p /tmp/r /tmp/sm /tmp/sf
PYTHONPATH=$MAINP timeout 150 python3 benchmarks/scale_bench.py --cores 0-1,2-3 --workdir /tmp/sm --json /tmp/r/scale_main.json --case $T@2x2x2 --case $T@4x2 > /tmp/r/scale_main.md 2>&1 &
P1=$!
PYTHONPATH=$FINEP timeout 150 python3 benchmarks/scale_bench.py --cores 4-5,6-7 --workdir /tmp/sf --json /tmp/r/scale_fine.json --case $T@2x2x2 --case $T@4x2 > /tmp/r/scale_fine.md 2>&1 &
P2=$!
i=8; PIDS=""
for c in "$F/gemma.pre.hlo 2x4 4,16" "$F/gemma3.pre.hlo 2x4 4,16" "$L 2x2x2 4,16" "$T 2x2x2 4,16" "$S/dec2.hlo 2x2x2 4,16"; do
  set -- $c; n=$(basename $1).$2
  (PYTHONPATH=$FINEP taskset -c $i timeout 185 python3 $F/dev.py $1 $2 $3 /tmp/r/after.$n.jsonl > /tmp/r/after.$n.log 2>&1; echo "rc $?" >> /tmp/r/after.$n.log) &
  PIDS="$PIDS $!"; i=$((i+1))
done
wait $P1 $P2
i=0
for c in "$F/dit.pre.hlo 2x4 4,16" "$F/scanlm.pre.hlo 2x4 4,16" "$F/gemma3.pre.hlo 4x2 -" "$M 4x2 -" "$S/llama16.hlo 2x2x4 -" "$F/gemma3.pre.hlo 2x2x2 4,16"; do
  set -- $c; n=$(basename $1).$2; ts=$3; [ "$ts" = "-" ] && ts=""
  (PYTHONPATH=$FINEP taskset -c $i timeout 95 python3 $F/dev.py $1 $2 "$ts" /tmp/r/held.$n.jsonl > /tmp/r/held.$n.log 2>&1; echo "rc $?" >> /tmp/r/held.$n.log) &
  PIDS="$PIDS $!"; i=$((i+1))
done
for side in main fine; do
  if [ $side = main ]; then P=$MAINP; else P=$FINEP; fi
  (PYTHONPATH=$P taskset -c $i timeout 95 python3 -c "import resource,subprocess,sys,time; t=time.time(); r=subprocess.run(sys.argv[1:]).returncode; u=resource.getrusage(resource.RUSAGE_CHILDREN); print('RC', r, 'CPU', round(u.ru_utime+u.ru_stime,2), 'WALL', round(time.time()-t,2))" python3 -m hloshard solve $F/gemma3.pre.hlo --mesh 2x4 --tie matching --time-limit 30 --deterministic -o /tmp/r/g3det30.$side.hlo --report /tmp/r/g3det30.$side.json > /tmp/r/g3det30.$side.log 2>&1) &
  PIDS="$PIDS $!"; i=$((i+1))
done
wait $PIDS
cat /tmp/r/*.jsonl > $OUTDIR/dev2.jsonl
cd /tmp && tar czf $OUTDIR/dev2logs.tgz r sm/*.json sf/*.json sm/*.stderr sf/*.stderr 2>/dev/null
cat /tmp/r/scale_main.md /tmp/r/scale_fine.md | grep "|"; grep -h "RC\|^rc" /tmp/r/*.log | sort | uniq -c; wc -l $OUTDIR/dev2.jsonl
