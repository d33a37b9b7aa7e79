#!/bin/bash
cd /work/notes/remat34/f9
export PYTHONPATH=/work/wt/remat/src:/work/wt/remat
P=/work/main/.venv/bin/python
echo "start $(date -u) $(uptime)"
$P -m hloshard solve /work/notes/nu33_models/out_mixer_model/step.pre.hlo --mesh data=2,model=4 --tie matching --memory-budget 32MiB --time-limit 150 -o mixer.b32.hlo --report mixer.b32.json > solve.out 2> solve.err
echo "solve rc=$? $(date -u) $(uptime)"
$P -m hloshard cost mixer.b32.hlo --mesh data=2,model=4 --tie matching --xla > cost.out 2> cost.err
echo "cost rc=$? $(date -u) $(uptime)"
