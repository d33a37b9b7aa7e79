#!/bin/bash
# Round 26 (helper mem): the "Predicted vs XLA" memory table, re-measured (issue 25). 8 fake CPU devices
# (xla_truth.py sets them in its XLA children), deterministic solves. before = main bfaf47e, after = r26-mem.
# Figures: memory_table.json (predicted peak per device and XLA's memory_analysis() argument + output + temp - alias).
set -e
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/mem_r26}; mkdir -p $OUT/t12
python benchmarks/xla_truth.py --no-corpus --time-limit 10 --json $OUT/samples.json            # 9 samples x (GSPMD, solve)
python benchmarks/xla_truth.py --only maxtext_train_step --time-limit 60 --json $OUT/maxtext.json  # MaxText corpus module, mesh 8
python scripts/make_transformer.py --layers 12 --out $OUT/t12                                  # the 12-layer generated transformer
python benchmarks/xla_truth.py --samples $OUT/t12 --no-corpus --time-limit 30 --json $OUT/t12.json
