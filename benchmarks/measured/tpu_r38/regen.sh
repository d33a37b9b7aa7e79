#!/bin/bash
# the branch's solve plans under --device tpu-v5e (samples, heads, ho), compared with round 33's stored plans
cd /work/notes/tpu38
export HLOSHARD_SHARED=/work/shared
echo "start $(date -u) $(uptime)"
WT=/work/wt/tpu PLANS=/work/notes/tpu38/plans_br nice /work/main/.venv/bin/python regen.py tpu-v5e samples,heads,ho
for f in plans_br/tpu-v5e/*/*.solve.hlo; do
  g=$(basename $(dirname $f)); n=$(basename $f)
  ref=/work/notes/tpurows33/plans_br/tpu-v5e/$g/$n
  if cmp -s $f $ref; then echo "same $g $n"; else echo "DIFF $g $n"; fi
done
echo "end $(date -u) $(uptime)"
