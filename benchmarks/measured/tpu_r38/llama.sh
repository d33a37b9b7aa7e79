#!/bin/bash
cd /work/wt/tpu
export PYTHONPATH=/work/wt/tpu/src:/work/wt/tpu HLOSHARD_SHARED=/work/shared
echo "start $(date -u) $(uptime)"
/usr/bin/time -f "%e s %M KB" /work/main/.venv/bin/python -m hloshard cost /work/shared/corpus/xla_benchmarks/hlo_llama31_8b_bf16_1x8.hlo --mesh 8 --device h100-sxm --format json > /work/notes/tpu38/llama_br.json
echo "end $(date -u) $(uptime)"
