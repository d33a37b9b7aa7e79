#!/bin/bash
# Round 27 (helper mem): why the round-26 memory rules moved auto_shard's guarded plans, and the table after the fix.
# Run from the repository root with PY=/work/main/.venv/bin/python; every figure is bytes (not load-dependent).
set -e
PY=${PY:-python}; OUT=${OUT:-/tmp/mem_r27}; mkdir -p $OUT
# 1. the guard's chain on tests/test_jax_e2e.py's transformer train step (each solve_module call, the failed ones'
#    nearest plans; a second run re-prices the first run's choices on this code's graph): run once per code version
HLOSHARD_SHARED=/work/shared $PY benchmarks/measured/mem_r27/guard_chain.py main              # on main
HLOSHARD_SHARED=/work/shared $PY benchmarks/measured/mem_r27/guard_chain.py br /tmp/mem/cap_main.json   # on the branch
# 2. the guard's baseline as a module (the first plan's entry shardings only; XLA propagates the rest), by XLA and
#    by the model (tts_base.hlo is written by /tmp/mem/e2e_base.py: guard.plan_entry wrapped, print_module)
$PY benchmarks/xla_truth.py --measure $OUT/base --json $OUT/base/xla.json --jobs 1 --dump $OUT/dump
$PY -m hloshard cost $OUT/base/tts_base.hlo --mesh data=2,model=4 --complete xla --format json
# 3. the memory table (18 sample plans), main and branch
$PY benchmarks/xla_truth.py --no-corpus --time-limit 10 --json $OUT/samples.json
# 4. fixed modules of round 26 (their XLA figures measured there): /tmp/mem/bin/pred.py 2x4 FILE...
# 5. real models (once, slow)
KERAS_BACKEND=jax $PY benchmarks/real_models.py --models gemma,qwen2_small,mistral_small --plans expert,auto,auto_expert \
  --time-limit 10 --float64-plans '' --steps 2 --json $OUT/rows.json
