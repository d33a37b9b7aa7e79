#!/bin/bash
cd /work/notes/tpu36
for dev in tpu-v5p tpu-v5e tpu-v6e; do
 for tag in main br; do
  if [ $tag = main ]; then W=/work/notes/tpu36/main_src; else W=/work/wt/tpu; fi
  echo "== $dev $tag $(date -u) $(uptime)"
  WT=$W EVOUT=/work/notes/tpu36 HLOSHARD_SHARED=/work/shared /work/main/.venv/bin/python ev.py /work/notes/tpurows33/plans_br $dev $tag > ev_${dev}_${tag}.txt 2>&1
 done
done
echo "== done $(date -u)"
