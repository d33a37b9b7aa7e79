#!/bin/bash
# usage: measure_plain.sh TREE LABEL FILES...
# OUT: the folder for the outputs (default /tmp/suite30); /work/main/.venv/bin/python: the interpreter used in round 30
OUT=${OUT:-/tmp/suite30}; mkdir -p $OUT
tree=$1; label=$2; shift 2
cd $tree
for f in "$@"; do
  b=$(basename $f .py)
  s=$(date +%s); l0=$(cut -d' ' -f1 /proc/loadavg)
  HLOSHARD_SHARED=/work/shared PYTHONPATH=$tree/src:$tree /usr/bin/time -f "%U %S %e" -o $OUT/$label.$b.time nice -n 5 /work/main/.venv/bin/python -m pytest -p no:cacheprovider -p no:xdist -q --durations=15 $f > $OUT/$label.$b.out 2>&1
  echo "$b $(cat $OUT/$label.$b.time) load $l0-$(cut -d' ' -f1 /proc/loadavg) $(tail -1 $OUT/$label.$b.out)" >> $OUT/$label.summary
done
