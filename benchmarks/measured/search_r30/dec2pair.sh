#!/bin/bash
D=/tmp/s30/mods/decoder2.hlo; mkdir -p /tmp/s30/d2
for m in 2x4 2x2x2; do for t in main branch; do
  case $t in main) R=/tmp/s30/main;; *) R=/work/wt/search;; esac
  l0=$(cut -d' ' -f1 /proc/loadavg); S=$(date +%s.%N)
  PYTHONPATH=$R/src:$R /work/main/.venv/bin/python -m hloshard.cli solve $D --mesh $m -o /tmp/s30/d2/$m.$t.hlo --report /tmp/s30/d2/$m.$t.json --quiet 2>/dev/null
  E=$(date +%s.%N); l1=$(cut -d' ' -f1 /proc/loadavg)
  c=$(PYTHONPATH=/work/wt/search/src /work/main/.venv/bin/python -m hloshard.cli cost /tmp/s30/d2/$m.$t.hlo --mesh $m --format json 2>/dev/null | python3 -c "import json,sys; print(json.load(sys.stdin)['total_cost'])")
  echo "$m $t wall $(python3 -c "print(round($E-$S,1))") load $l0-$l1 cost $c"
done; done
