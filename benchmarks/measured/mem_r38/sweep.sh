#!/bin/bash
# sweep.sh TREE OUTPREFIX : the done-means budget ladder on the 9 samples and MaxText with TREE's src
TREE=$1; P=$2
cd $TREE
export CI=true HLOSHARD_SHARED=/work/shared PYTHONPATH=$TREE/src:$TREE
SP=$(python3 /work/notes/mem38/specs.py /work/notes/mem38/truth_main.json)
echo "start $(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg)"
/work/main/.venv/bin/python /work/wt/mem/benchmarks/measured/budget_r37/sweep.py ${P}_samples.json $SP
echo "samples done $(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg)"
/work/main/.venv/bin/python /work/wt/mem/benchmarks/measured/budget_r37/sweep.py ${P}_maxtext.json maxtext=/work/shared/corpus/xla_benchmarks/nv_maxtext_1n1g_jit_train_step_before_optimization.hlo:8:18114165988
echo "maxtext done $(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg)"
