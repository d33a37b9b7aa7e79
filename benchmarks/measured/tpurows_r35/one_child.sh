#!/bin/bash
# one_child.sh DEV OUTDIR MODEL: one model's child (as real_child.sh), its progress line when done
DEV=$1; OUT=$2; m=$3
cd /work/wt/tpurows
KERAS_BACKEND=jax PYTHONPATH=/work/wt/tpurows/src:/work/wt/tpurows /work/main/.venv/bin/python benchmarks/tpu_real_device.py --device $DEV --est-jsonl $OUT/est.jsonl -- \
  --child $m expert,auto,auto_expert --time-limit 10 --stablehlo-dir $OUT/shlo --float64-plans '' --steps 0 > $OUT/child_$m.jsonl 2> $OUT/child_$m.err
echo "$m rc $? $(date -u +%T) : $(uptime | sed 's/.*average://')" >> $OUT/progress.txt
