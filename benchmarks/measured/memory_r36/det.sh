#!/bin/bash
# det.sh TREE NAME: deterministic 2x4 solves of the .pre samples on TREE's src
T=$1; N=$2; O=/work/notes/memory36/det/$N; mkdir -p $O
cd $T
for s in attention_6heads conv_layer embedding_lookup fused_qkv_train_step mlp_train_step moe_layer scan_mlp_train_step transformer_block transformer_train_step; do
  PYTHONPATH=$T/src:$T /work/main/.venv/bin/python -m hloshard solve samples/$s.pre.hlo --mesh 2x4 --deterministic --time-limit 10 -o $O/$s.hlo --report $O/$s.json > $O/$s.out 2> $O/$s.err
  echo "$s rc=$?" >> $O/rc.txt
done
