#!/bin/bash
# 9 samples solve --deterministic on main and on the branch: byte-identical?
for s in attention_6heads conv_layer embedding_lookup fused_qkv_train_step mlp_train_step moe_layer scan_mlp_train_step transformer_block transformer_train_step; do
  for side in main fine; do
    if [ $side = main ]; then R=/work/main; else R=/work/wt/fine; fi
    (cd $R && PYTHONPATH=$R/src:$R /work/main/.venv/bin/python -m hloshard solve samples/$s.pre.hlo --mesh 2x4 --deterministic --quiet -o /tmp/fine/r26/s_${side}_$s.hlo 2>/dev/null)
  done
  cmp -s /tmp/fine/r26/s_main_$s.hlo /tmp/fine/r26/s_fine_$s.hlo && echo "$s identical" || echo "$s DIFFERS"
done
