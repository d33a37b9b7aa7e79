#!/bin/bash
# F5: --mesh auto on new user 37's DiT, main then branch, back to back
D=/work/notes/speed38/f5
mkdir -p $D
for t in main branch; do
  if [ $t = main ]; then PP=/work/main/src; else PP=/work/wt/speed/src:/work/wt/speed; fi
  echo "start $t $(date -u +%T) $(cat /proc/loadavg)" >> $D/log
  /usr/bin/time -v env PYTHONPATH=$PP timeout 900 /work/main/.venv/bin/python -m hloshard solve /work/notes/nu37_models/out_dit_model/step.pre.hlo --mesh auto --tie matching --time-limit 150 -o $D/$t.hlo --report $D/$t.json > $D/$t.out 2> $D/$t.err
  echo "end $t $(date -u +%T) $(cat /proc/loadavg) rc=$?" >> $D/log
done
