#!/bin/sh
# alternate main / branch ladders at the same load: pair.sh OUTDIR MODULES MESHES [LIMIT]
out=$1; mods=$2; meshes=$3; limit=${4:-30}; mkdir -p $out
for tree in ${TREES:-main branch main branch}; do
  if [ $tree = main ]; then pp=/work/main/src; else pp=/work/wt/search/src; fi
  i=$(ls $out | grep -c "^$tree")
  echo "$tree $i start $(date -u +%T) $(cut -d' ' -f1-3 /proc/loadavg) main=$(git -C /work/main rev-parse --short HEAD)" >> $out/log
  PYTHONPATH=$pp /work/main/.venv/bin/python /work/wt/search/benchmarks/solve_bench.py --ladder $meshes --modules $mods --time-limit $limit --no-space --workdir /tmp/s32/w_$tree$i --json $out/$tree$i.json > /dev/null 2> $out/$tree$i.err
  echo "$tree $i end $(date -u +%T) $(cut -d' ' -f1-3 /proc/loadavg)" >> $out/log
done
