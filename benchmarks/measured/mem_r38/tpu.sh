#!/bin/bash
# tpu.sh TREE PREFIX: issue 25's TPU rows with TREE's src (libtpu ahead of time)
TREE=$1; P=$2
cd $TREE
export CI=true HLOSHARD_SHARED=/work/shared PYTHONPATH=$TREE/src:$TREE ALLOW_MULTIPLE_LIBTPU_LOAD=1
echo "start $(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg)"
/work/venv-pins/bin/python benchmarks/tpu_truth.py --memory --budgets --json ${P}_tpu_samples.json > ${P}_tpu_samples.md 2> ${P}_tpu_samples.err
echo "samples rc=$? $(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg)"
/work/venv-pins/bin/python benchmarks/tpu_truth.py --memory --corpus --only none --json ${P}_tpu_maxtext.json > ${P}_tpu_maxtext.md 2> ${P}_tpu_maxtext.err
echo "maxtext rc=$? $(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg)"
