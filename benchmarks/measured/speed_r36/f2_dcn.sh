#!/bin/bash
cd /work/wt/speed
for s in mlp_train_step transformer_train_step; do
  for m in data=4:dcn,model=2 data=2:dcn,model=4; do
    tag=$s.$(echo $m | tr ':=,' '__-').speed2
    PYTHONPATH=/work/wt/speed/src /usr/bin/time -f "%e s %U user %M KB" /work/main/.venv/bin/python -m hloshard.cli solve samples/$s.pre.hlo --mesh $m --device h100-sxm --deterministic --time-limit 10 -o /work/notes/speed36/f2/$tag.hlo --report /work/notes/speed36/f2/$tag.json > /work/notes/speed36/f2/$tag.out 2> /work/notes/speed36/f2/$tag.err
    echo "$tag rc=$?"
  done
done
