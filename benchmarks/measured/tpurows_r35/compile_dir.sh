#!/bin/bash
# compile_dir.sh DEV TOPO OUTDIR DIR MODEL TAG: libtpu figures + hloshard's estimates of the modules in DIR (a subset)
DEV=$1; TOPO=$2; OUT=$3; D=$4; m=$5; TAG=$6
cd /work/wt/tpurows
ALLOW_MULTIPLE_LIBTPU_LOAD=1 PYTHONPATH=/work/wt/tpurows/src:/work/wt/tpurows /work/venv-pins/bin/python benchmarks/real_models_tpu.py $D \
   --models $m --topology $TOPO --cpu-json $OUT/child_$m.jsonl --json $OUT/tpu_$TAG.json > $OUT/tpu_$TAG.txt 2> $OUT/tpu_$TAG.err
echo "tpu $TAG rc $? $(date -u +%T) $(uptime | sed 's/.*average://')" >> $OUT/progress.txt
HLOSHARD_SHARED=/work/shared /work/main/.venv/bin/python benchmarks/measured/tpurows_r35/est_real.py $D $DEV $OUT/est_hloshard_$TAG.json $m >> $OUT/est_hloshard.log 2>&1
echo "est $TAG rc $? $(date -u +%T) $(uptime | sed 's/.*average://')" >> $OUT/progress.txt
