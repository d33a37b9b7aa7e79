#!/bin/bash
# run.sh SRC TAG DIR [MODULES...] -- cost --xla --complete xla --format json of each module with the hloshard at SRC
SRC=$1; TAG=$2; D=$3; shift 3
for f in "$@"; do
  CI=true HLOSHARD_SHARED=/work/shared PYTHONPATH=$SRC/src:$SRC timeout 600 /work/main/.venv/bin/hloshard cost $D/$f.hlo --mesh data=2,model=4 --xla --complete xla --format json > $D/$f.$TAG.json 2> $D/$f.$TAG.err
  python3 -c "
import json; d=json.load(open('$D/$f.$TAG.json'))['memory']; p=d['predicted_peak_bytes']; x=d['xla']['total_bytes']
print('%-12s $TAG predicted %10d XLA %10d ratio %.3f' % ('$f', p, x, p/x))" || tail -3 $D/$f.$TAG.err
done
