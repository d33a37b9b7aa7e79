#!/bin/bash
# deterministic written modules, main vs branch (solve --deterministic --time-limit 10)
cd /work/wt/speed
for s in transformer_train_step fused_qkv_train_step transformer_block attention_6heads mlp_train_step moe_layer; do
  for m in 2x4 2x2x2; do
    for tree in main speed; do
      src=/work/main/src; [ $tree = speed ] && src=/work/wt/speed/src
      PYTHONPATH=$src /work/main/.venv/bin/python -m hloshard.cli solve samples/$s.pre.hlo --mesh $m --deterministic --time-limit 10 -o /work/notes/speed36/det/$s.$m.$tree.hlo --quiet > /dev/null 2>/work/notes/speed36/det/$s.$m.$tree.err
      echo "$s $m $tree rc=$?"
    done
    cmp -s /work/notes/speed36/det/$s.$m.main.hlo /work/notes/speed36/det/$s.$m.speed.hlo && echo "$s $m IDENTICAL" || echo "$s $m DIFFER"
  done
done
