#!/bin/bash
# det_few.sh TREE OUT: solve --deterministic --time-limit 10 on 4 samples x (2x4, 2x2x2) (a subset of /tmp/lead30/det.sh)
TREE=$1; OUT=$2; mkdir -p $OUT
for b in transformer_block attention_6heads mlp_train_step conv_layer embedding_lookup; do
  for m in 2x4 2x2x2; do
    PYTHONPATH=$TREE/src:$TREE /work/main/.venv/bin/python -m hloshard solve $TREE/samples/$b.pre.hlo --mesh $m --deterministic --time-limit 10 -o $OUT/$b.$m.hlo > $OUT/$b.$m.out 2>&1
  done
done
