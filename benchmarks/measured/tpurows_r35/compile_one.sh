#!/bin/bash
# compile_one.sh DEV TOPO OUTDIR MODEL: libtpu figures of MODEL's modules + hloshard's estimates of its written modules
DEV=$1; TOPO=$2; OUT=$3; m=$4
cd /work/wt/tpurows
ALLOW_MULTIPLE_LIBTPU_LOAD=1 PYTHONPATH=/work/wt/tpurows/src:/work/wt/tpurows /work/venv-pins/bin/python benchmarks/real_models_tpu.py $OUT/shlo \
   --models $m --topology $TOPO --cpu-json $OUT/child_$m.jsonl --json $OUT/tpu_$m.json > $OUT/tpu_$m.txt 2> $OUT/tpu_$m.err
echo "tpu $m rc $? $(date -u +%T) $(uptime | sed 's/.*average://')" >> $OUT/progress.txt
HLOSHARD_SHARED=/work/shared /work/main/.venv/bin/python benchmarks/measured/tpurows_r35/est_real.py $OUT/shlo $DEV $OUT/est_hloshard_$m.json $m >> $OUT/est_hloshard.log 2>&1
echo "est $m rc $? $(date -u +%T) $(uptime | sed 's/.*average://')" >> $OUT/progress.txt
