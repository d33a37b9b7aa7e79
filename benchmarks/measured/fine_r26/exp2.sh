#!/bin/bash
# task 2 cases and the 48-layer scale rows, main then branch, one at a time
cd /tmp/fine/r26
F=/work/main/tmp/fine; S=/work/main/tmp/scale
for side in main fine; do
  if [ $side = main ]; then R=/work/main; else R=/work/wt/fine; fi
  export PYTHONPATH=$R/src:$R
  echo "== $side layout 2x4 TL60 load $(cat /proc/loadavg)"
  /usr/bin/time -f "CPU %U+%S wall %e rss %M" /work/main/.venv/bin/python -m hloshard solve $F/gemma3.layout.pre.hlo --mesh 2x4 --time-limit 60 -o lay.$side.hlo --report lay.$side.json > lay.$side.log 2>&1
  tail -1 lay.$side.log
  echo "== $side gemma3 2x2x2 TL60 load $(cat /proc/loadavg)"
  /usr/bin/time -f "CPU %U+%S wall %e rss %M" /work/main/.venv/bin/python -m hloshard solve $F/gemma3.pre.hlo --mesh 2x2x2 --tie matching --time-limit 60 -o g222.$side.hlo --report g222.$side.json > g222.$side.log 2>&1
  tail -1 g222.$side.log
done
for side in main fine; do
  if [ $side = main ]; then R=/work/main; else R=/work/wt/fine; fi
  echo "== $side xla bytes of the layout plan"
  (cd $R && PYTHONPATH=$R/src:$R /work/main/.venv/bin/python -m hloshard cost /tmp/fine/r26/lay.$side.hlo --mesh 2x4 --xla > /tmp/fine/r26/lay.$side.cost.log 2>&1; grep -i "xla\|collective" /tmp/fine/r26/lay.$side.cost.log | head -5)
done
for side in main fine; do
  if [ $side = main ]; then R=/work/main; else R=/work/wt/fine; fi
  echo "== $side scale 48-layer load $(cat /proc/loadavg)"
  (cd $R && PYTHONPATH=$R/src:$R /work/main/.venv/bin/python benchmarks/scale_bench.py --cores 0-1 --workdir /tmp/fine/r26/sc_$side --json /tmp/fine/r26/sc_$side.json --case $S/transformer_48l.pre.hlo@2x2x2 --case $S/transformer_48l.pre.hlo@4x2 2>&1 | grep "|")
  echo "load after $(cat /proc/loadavg)"
done
