#!/bin/sh
# alternate main / branch ladders at the same load: pair.sh OUTDIR MODULES MESHES
out=$1; mods=$2; meshes=$3; mkdir -p $out
for tree in ${TREES:-main branch main branch}; do
  if [ $tree = main ]; then pp=/tmp/srch31/mainsnap/src; else pp=/work/wt/search/src; fi
  i=$(ls $out | grep -c "^$tree") 
  echo "$tree $i start $(uptime)" >> $out/log
  PYTHONPATH=$pp /work/main/.venv/bin/python /work/wt/search/benchmarks/solve_bench.py --ladder $meshes --modules $mods --time-limit 30 --no-space --workdir /tmp/srch31/w_$tree$i --json $out/$tree$i.json > /dev/null 2> $out/$tree$i.err
  echo "$tree $i end $(uptime)" >> $out/log
done
