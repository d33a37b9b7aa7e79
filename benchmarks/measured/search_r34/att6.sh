#!/bin/bash
# attention_6heads --mesh auto --deterministic: main vs branch snapshot (the sample whose rep changes)
OUT=/work/notes/search34/att6; mkdir -p $OUT
for side in main branch; do
  SRC=/work/main/src; [ $side = branch ] && SRC=/work/notes/search34/src_branch_f4
  t0=$(date +%s.%N); u0=$(cut -d' ' -f1 /proc/loadavg)
  PYTHONPATH=$SRC /usr/bin/time -f "user %U maxrss %M" /work/main/.venv/bin/python -m hloshard solve /work/wt/search/samples/attention_6heads.pre.hlo --mesh auto --devices 8 --deterministic --time-limit 20 -o $OUT/$side.hlo > $OUT/$side.out 2> $OUT/$side.err
  echo "$side rc=$? wall=$(echo "$(date +%s.%N) - $t0" | bc) load $u0 -> $(cut -d' ' -f1 /proc/loadavg) $(tail -1 $OUT/$side.err)"
done
