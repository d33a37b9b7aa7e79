#!/bin/bash
# F5/F4 re-measure on the branch tree given as $1 (src path); outputs under $2
SRC=$1; OUT=$2; mkdir -p $OUT
M=/work/notes/nu33_models/out_neox_model/step.pre.hlo
export PYTHONPATH=$SRC
PY=/work/main/.venv/bin/python
r() { local tag=$1; shift; local t0=$(date +%s.%N); local u0=$(cut -d' ' -f1 /proc/loadavg)
  /usr/bin/time -f "user %U sys %S maxrss %M KB" $PY -m hloshard "$@" > $OUT/$tag.out 2> $OUT/$tag.err; local rc=$?
  echo "$tag rc=$rc wall=$(echo "$(date +%s.%N) - $t0" | bc) load $u0 -> $(cut -d' ' -f1 /proc/loadavg) $(tail -1 $OUT/$tag.err)"; }
for tag in "$@"; do :; done
shift 2
for job in "$@"; do
  case $job in
    default) r default solve $M --mesh 2x4 -o $OUT/default.hlo --report $OUT/default.json ;;
    t120) r t120 solve $M --mesh 2x4 --time-limit 120 -o $OUT/t120.hlo --report $OUT/t120.json ;;
    t120tie) r t120tie solve $M --mesh 2x4 --tie matching --time-limit 120 -o $OUT/t120tie.hlo --report $OUT/t120tie.json ;;
    auto180tie) r auto180tie solve $M --mesh auto --devices 8 --tie matching --time-limit 180 -o $OUT/auto180tie.hlo --report $OUT/auto180tie.json ;;
    autodet) r autodet solve $M --mesh auto --devices 8 --deterministic --time-limit 40 -o $OUT/autodet.hlo --report $OUT/autodet.json ;;
    auto180) r auto180 solve $M --mesh auto --devices 8 --time-limit 180 -o $OUT/auto180.hlo --report $OUT/auto180.json ;;
  esac
done
