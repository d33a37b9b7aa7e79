#!/bin/bash
cd /work/notes/search34/neox
for f in ${FILES:-main/auto180 branch/auto180 main/t120 main/default}; do
  t0=$(date +%s.%N); u0=$(cut -d' ' -f1 /proc/loadavg)
  PYTHONPATH=/work/wt/search/src /work/main/.venv/bin/python -m hloshard cost $f.hlo --mesh 2x4 --xla > $f.xla.out 2> $f.xla.err
  echo "$f rc=$? wall=$(echo "$(date +%s.%N) - $t0" | bc) load $u0"
  grep -iE "collective|peak memory|^cost" $f.xla.err $f.xla.out | head -6
done
