#!/bin/sh
# deterministic IOPDDL smoke: B and G at 0.3x their limits, branch then main; the JSON objectives and bounds must agree
set -e
OUT=${1:-/work/notes/proof36}
export HLOSHARD_SHARED=${HLOSHARD_SHARED:-/work/shared}
PYTHONPATH=/work/wt/proof/src:/work/wt/proof /work/main/.venv/bin/python /work/wt/proof/benchmarks/iopddl.py --instances B,G --scale 0.3 --deterministic --json $OUT/smoke_branch.json
PYTHONPATH=/work/main/src:/work/main /work/main/.venv/bin/python /work/main/benchmarks/iopddl.py --instances B,G --scale 0.3 --deterministic --json $OUT/smoke_main.json
