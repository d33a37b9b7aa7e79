#!/bin/bash
cd /work/notes/tpu37/main_src
export PYTHONPATH=/work/notes/tpu37/main_src/src:/work/notes/tpu37/main_src HLOSHARD_SHARED=/work/shared
echo "start $(date -u) $(uptime)"
/usr/bin/time -v /work/main/.venv/bin/python benchmarks/time_truth.py --device tpu-v5e --pod 48 --pod-dir /work/notes/tpu37/pod --time-limit 60 --json /work/notes/tpu37/pod_main.json
echo "end $(date -u) $(uptime)"
