#!/bin/bash
cd /work/notes/tpu37
export HLOSHARD_SHARED=/work/shared
for dev in tpu-v5e tpu-v5p tpu-v6e; do
  echo "== $dev $(date -u) $(uptime)"
  WT=/work/notes/tpu37/main_src PLANS=/work/notes/tpu37/plans_main /work/main/.venv/bin/python regen.py $dev samples,heads,ho
done
echo "== done $(date -u)"
