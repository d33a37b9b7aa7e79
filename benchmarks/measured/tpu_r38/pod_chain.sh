#!/bin/bash
cd /work/notes/tpu38
while pgrep -f podsolve.py > /dev/null; do sleep 10; done
echo "pod_side start $(date -u) $(uptime)"
WT=/work/wt/tpu HLOSHARD_SHARED=/work/shared nice /work/main/.venv/bin/python pod_side.py pod_side_br.json
echo "pod_side end $(date -u) $(uptime)"
