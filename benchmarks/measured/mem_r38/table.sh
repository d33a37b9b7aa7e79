#!/bin/bash
# table.sh TREE PREFIX: issue 25's CPU rows with TREE's src: pre samples (cost --xla --complete xla), MaxText and
# the 12-layer transformer through xla_truth (GSPMD + solve); the 48-layer last (XLA child ~10 GB)
TREE=$1; P=$2
cd $TREE
export CI=true HLOSHARD_SHARED=/work/shared PYTHONPATH=$TREE/src:$TREE
L() { echo "$* $(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg)"; }
L start
for s in attention_6heads conv_layer embedding_lookup fused_qkv_train_step mlp_train_step moe_layer scan_mlp_train_step transformer_block transformer_train_step; do
  /work/main/.venv/bin/hloshard cost samples/$s.pre.hlo --mesh 2x4 --xla --complete xla --format json > ${P}_pre_$s.json 2> ${P}_pre_$s.err
  python3 -c "
import json; d=json.load(open('${P}_pre_$s.json'))['memory']; p=d['predicted_peak_bytes']; x=d['xla']['total_bytes']
print('pre %-24s predicted %12d XLA %12d ratio %.3f' % ('$s', p, x, p/x))" || tail -2 ${P}_pre_$s.err
done
L pre done
/work/main/.venv/bin/python benchmarks/xla_truth.py --time-limit 10 --samples /work/notes/mem38/gen --no-corpus --json ${P}_t12.json > ${P}_t12.md 2>&1
L t12 rc=$?
/work/main/.venv/bin/python benchmarks/xla_truth.py --time-limit 10 --only maxtext_train_step --samples /work/notes/mem38/empty --json ${P}_maxtext.json > ${P}_maxtext.md 2>&1
L maxtext rc=$?
