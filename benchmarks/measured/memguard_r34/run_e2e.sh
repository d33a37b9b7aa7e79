#!/bin/bash
# run_e2e.sh TREE LABEL OUTDIR TL...: benchmarks/measured/memguard_r34/e2e_tl.py on TREE (a checkout or `git archive`
# of src/ tests/) at each time limit, OUTDIR/e2e_LABEL_tlTL.json (one JSON line each)
TREE=$1; LABEL=$2; OUT=$3; shift 3
HERE=$(cd "$(dirname "$0")" && pwd)
for TL in "$@"; do
  ( cd "$TREE" && TL=$TL CI=true PYTHONPATH=$TREE/src:$TREE python "$HERE/e2e_tl.py" transformer_train_step ) \
    > "$OUT/e2e_${LABEL}_tl$TL.json"
done
