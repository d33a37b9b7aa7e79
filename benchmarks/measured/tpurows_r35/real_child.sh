#!/bin/bash
# real_child.sh DEV OUTDIR : the three real models' auto plans under auto_shard(device=DEV), expert too
DEV=$1; OUT=$2; mkdir -p $OUT/shlo
cd /work/wt/tpurows
for m in qwen2_small mistral_small gemma; do
  KERAS_BACKEND=jax PYTHONPATH=/work/wt/tpurows/src:/work/wt/tpurows /work/main/.venv/bin/python benchmarks/tpu_real_device.py --device $DEV --est-jsonl $OUT/est.jsonl -- \
    --child $m expert,auto,auto_expert --time-limit 10 --stablehlo-dir $OUT/shlo --float64-plans '' --steps 0 > $OUT/child_$m.jsonl 2> $OUT/child_$m.err
  echo "$m rc $? $(date -u +%T) : $(uptime | sed 's/.*average://')" >> $OUT/progress.txt
done
