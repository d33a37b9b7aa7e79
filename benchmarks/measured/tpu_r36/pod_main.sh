#!/bin/bash
cd /work/notes/tpu36/main_src
export PYTHONPATH=/work/notes/tpu36/main_src/src:/work/notes/tpu36/main_src HLOSHARD_SHARED=/work/shared
/usr/bin/time -v /work/main/.venv/bin/python benchmarks/time_truth.py --tpu-python /work/venv-pins/bin/python --device tpu-v5e --pod 48 --pod-dir /work/notes/tpu36/pod --time-limit 60 --json /work/notes/tpu36/pod_main.json
