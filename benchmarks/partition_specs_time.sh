#!/usr/bin/env bash
# solve --partition-specs against --time-limit (new user 30, F7; BENCHMARKS.md "CLI, round 31"): for each module,
# one solve on a 2x4 mesh with --tie matching, --partition-specs and --report; prints one JSON line per module with
# the wall seconds, the load before and after, and the report's phases (start, ..., partition specs, total).
# usage: benchmarks/partition_specs_time.sh SRC TAG LIMIT OUTDIR MODULE...
#   SRC: the src/ directory to run (a branch's or main's), TAG: a name for the outputs, LIMIT: --time-limit
set -u
SRC=$1; TAG=$2; LIMIT=$3; OUT=$4; shift 4
PY=${PYTHON:-python}
mkdir -p "$OUT"
for m in "$@"; do
  b=$(basename "$m"); b=${b%%.*}
  l0=$(cut -d' ' -f1 /proc/loadavg); t0=$(date +%s.%N)
  PYTHONPATH=$SRC $PY -m hloshard solve "$m" --mesh 2x4 --tie matching -o "$OUT/$TAG.$b.hlo" \
     --partition-specs "$OUT/$TAG.$b.specs.json" --report "$OUT/$TAG.$b.rep.json" --time-limit "$LIMIT" \
     2> "$OUT/$TAG.$b.err"
  rc=$?; t1=$(date +%s.%N); l1=$(cut -d' ' -f1 /proc/loadavg)
  $PY - "$OUT/$TAG.$b.rep.json" "$TAG" "$b" "$rc" "$LIMIT" "$t0" "$t1" "$l0" "$l1" <<'PYEOF'
import json, sys
path, tag, b, rc, limit, t0, t1, l0, l1 = sys.argv[1:]
rep = json.load(open(path)) if rc == "0" else {}
print(json.dumps({"tag": tag, "module": b, "rc": int(rc), "limit": float(limit),
                  "wall": round(float(t1) - float(t0), 1), "load": [float(l0), float(l1)],
                  "objective": rep.get("objective"), "phases": rep.get("seconds_phases", {})}))
PYEOF
done
