#!/bin/bash
# solve the 9 .pre samples at 2x4 and 2x2x2 on main and on the branch, deterministic tl10
for tree in main wt/dotslice; do
  tag=$(basename $tree)
  for f in /work/wt/dotslice/samples/*.pre.hlo; do
    case $f in *shardy*) continue;; esac
    s=$(basename $f .pre.hlo)
    for m in 2x4 2x2x2; do
      o=/tmp/ds/samples/$tag.$s.$m
      PYTHONPATH=/work/$tree/src /work/main/.venv/bin/python -m hloshard solve $f --mesh $m --keep-shardings io --deterministic --time-limit 10 -o $o.hlo --format json > $o.json 2> $o.err
      echo "$tag $s $m rc=$?" >> /tmp/ds/samples/done.txt
    done
  done
done
