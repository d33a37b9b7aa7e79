#!/bin/bash
# moe_layer / mlp_train_step: solve --mesh 2x4 --deterministic without a device and with h100-sxm, main (/work/main/src) vs the branch
for tree in main:/work/main/src branch:/work/wt/tpurows/src; do
  tag=${tree%%:*}; src=${tree#*:}
  for s in moe_layer mlp_train_step; do
    PYTHONPATH=$src HLOSHARD_SHARED=/work/shared /work/main/.venv/bin/python -m hloshard.cli solve /work/wt/tpurows/samples/$s.pre.hlo --mesh 2x4 --deterministic --time-limit 10 -o $s.$tag.hlo > $s.$tag.out 2>&1
    PYTHONPATH=$src HLOSHARD_SHARED=/work/shared /work/main/.venv/bin/python -m hloshard.cli solve /work/wt/tpurows/samples/$s.pre.hlo --mesh 2x4 --deterministic --time-limit 10 --device h100-sxm -o $s.$tag.h100.hlo > $s.$tag.h100.out 2>&1
  done
done
for s in moe_layer mlp_train_step; do for v in "" .h100; do cmp -s $s.main$v.hlo $s.branch$v.hlo && echo "same $s$v" || echo "DIFF $s$v"; done; done > done.txt
