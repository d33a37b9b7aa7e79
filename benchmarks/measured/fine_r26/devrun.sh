# helper fine round 26: build estimate vs build, and deterministic solve CPU vs units, one case per core
set -u
OUTDIR=${OUT:-/tmp/fine_out}; mkdir -p $OUTDIR
PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl-tpu/*.whl >/dev/null 2>&1 || exit 9
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD
S=tmp/scale; F=tmp/fine; T=$S/transformer_48l.pre.hlo; L=$S/hlo_llama31_8b_bf16_1x8.hlo; M=$S/nv_maxtext_1n1g_jit_train_step_before_optimization.hlo
mkdir -p /tmp/r
i=0; PIDS=""; TS="taskset -c"; command -v taskset >/dev/null || TS=""
for c in "$T 2x2x2" "$T 4x2" "$L 2x2x2" "$T 2x4" "$L 4x2" "$L 2x4" "$M 2x2x2" "$M 2x4" "$F/gemma3.pre.hlo 2x2x2" "$F/gemma3.pre.hlo 2x4" "$F/gemma3.layout.pre.hlo 2x4" "$F/gemma.pre.hlo 2x4" "$S/dec2.hlo 2x2x2"; do
  set -- $c
  n=$(basename $1).$2
  ($TS ${TS:+$i} timeout ${CASE_S:-250} python3 $F/dev.py $1 $2 4,16 /tmp/r/$n.jsonl > /tmp/r/$n.log 2>&1; echo "rc $?" >> /tmp/r/$n.log) &
  PIDS="$PIDS $!"
  i=$((i+1))
done
( while sleep 5; do echo "$(date +%s) $(cat /proc/loadavg) $(free -m | awk '/Mem/{print $3}')"; done ) > /tmp/r/mon.txt 2>&1 &
MON=$!
wait $PIDS
kill $MON
cat /tmp/r/*.jsonl > $OUTDIR/dev.jsonl
cd /tmp && tar czf $OUTDIR/devlogs.tgz r
nproc; tail -3 /tmp/r/mon.txt; grep -h "rc " /tmp/r/*.log | sort | uniq -c; wc -l $OUTDIR/dev.jsonl
