#!/bin/bash
# ev_all.sh TAG TREE : every stored plan of round 33 priced with TREE's code (round 37's ev.py)
cd /work/notes/tpu38
tag=$1; W=$2
for dev in tpu-v5e tpu-v5p tpu-v6e; do
  echo "== $dev $tag $(date -u) $(uptime)"
  WT=$W EVOUT=/work/notes/tpu38 HLOSHARD_SHARED=/work/shared /work/main/.venv/bin/python ev.py /work/notes/tpurows33/plans_br $dev $tag > ev_${dev}_${tag}.txt 2>&1
done
echo "== done $(date -u)"
