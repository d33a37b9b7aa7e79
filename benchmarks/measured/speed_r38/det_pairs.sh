#!/bin/bash
# det_pairs.sh OUTDIR: deterministic solves, main (/work/main/src) vs this branch (round 38, speed), written modules compared byte for byte.
# Unannotated samples (.pre.hlo: the input's layout is not priced, nothing changes) and annotated ones
# (.propagated.hlo: GSPMD's layout as the user's; the branch hands it to the solver as a known start).
OUT=$1; WT=${WT:-/work/wt/speed}; mkdir -p $OUT
for f in mlp_train_step.pre transformer_block.pre transformer_train_step.pre mlp_train_step.propagated transformer_train_step.propagated fused_qkv_train_step.propagated attention_6heads.propagated transformer_block.propagated moe_layer.propagated; do
  for m in 2x4 2x2x2; do
    for t in main branch; do
      if [ $t = main ]; then PP=/work/main/src; else PP=$WT/src:$WT; fi
      [ -s $OUT/$f.$m.$t.json ] && continue
      PYTHONPATH=$PP timeout 600 /work/main/.venv/bin/python -m hloshard solve $WT/samples/$f.hlo --mesh $m --deterministic --time-limit 2 -o $OUT/$f.$m.$t.hlo --report $OUT/$f.$m.$t.json >/dev/null 2>$OUT/$f.$m.$t.err
    done
    python3 - $OUT $f $m <<'PY'
import json, sys, filecmp
o, f, m = sys.argv[1:]
a, b = (json.load(open(f"{o}/{f}.{m}.{t}.json")) for t in ("main", "branch"))
same = filecmp.cmp(f"{o}/{f}.{m}.main.hlo", f"{o}/{f}.{m}.branch.hlo", shallow=False)
print(f"{f} {m} same={same} main={a.get('objective')} branch={b.get('objective')} input={b.get('input_cost')} src={b.get('plan_source')}")
PY
  done
done
