#!/bin/bash
# deterministic outputs main vs branch
for s in mlp_train_step transformer_block transformer_train_step conv_layer moe_layer; do
 for m in 2x4 2x2x2; do
  for t in main branch; do
   if [ $t = main ]; then R=/tmp/s30/main; else R=/work/wt/search; fi
   PYTHONPATH=$R/src:$R /work/main/.venv/bin/python -m hloshard.cli solve /work/wt/search/samples/$s.pre.hlo --mesh $m --deterministic --time-limit 10 -o /tmp/s30/det/$s.$m.$t.hlo --quiet 2>/dev/null
  done
  cmp -s /tmp/s30/det/$s.$m.main.hlo /tmp/s30/det/$s.$m.branch.hlo && echo "$s $m identical" || echo "$s $m DIFFER"
 done
done
