#!/bin/bash
# determinism: solve --mesh 2x4 --deterministic --time-limit 10, branch vs today's main, 3 device settings
cd /work/notes/tpu38
for s in embedding_lookup moe_layer fused_qkv_train_step; do
 for dev in none h100-sxm tpu-v5e; do
  for tree in main_src tpu; do
   if [ $tree = tpu ]; then W=/work/wt/tpu; else W=/work/notes/tpu38/main_src; fi
   D=""; [ $dev != none ] && D="--device $dev"
   PYTHONPATH=$W/src:$W HLOSHARD_SHARED=/work/shared /work/main/.venv/bin/python -m hloshard solve /work/wt/tpu/samples/$s.pre.hlo --mesh 2x4 --deterministic --time-limit 10 $D -o det/$s.$dev.$tree.hlo > det/$s.$dev.$tree.out 2>&1
  done
  if cmp -s det/$s.$dev.main_src.hlo det/$s.$dev.tpu.hlo && cmp -s det/$s.$dev.main_src.out det/$s.$dev.tpu.out; then echo "$s $dev identical"; else echo "$s $dev DIFFER"; fi
 done
done
echo "done $(date -u) $(uptime)"
