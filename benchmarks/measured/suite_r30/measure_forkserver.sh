#!/bin/bash
# usage: measure_forkserver.sh TREE LABEL FILES...  (CPU of pytest + children + every fork server of this run, sampled each second
# while alive: a server that exits idle is counted too)
# OUT: the folder for the outputs (default /tmp/suite30); /work/main/.venv/bin/python: the interpreter used in round 30
OUT=${OUT:-/tmp/suite30}; mkdir -p $OUT
tree=$1; label=$2; shift 2
cd $tree
for f in "$@"; do
  b=$(basename $f .py)
  td=$OUT/tmp.$label.$b; rm -rf $td; mkdir -p $td
  l0=$(cut -d' ' -f1 /proc/loadavg)
  samp=$OUT/$label.$b.samples; : > $samp
  ( while true; do
      for pid in $(grep -l "forkserver_main" /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3); do
        if tr '\0' ' ' < /proc/$pid/cmdline 2>/dev/null | grep -q "$td"; then
          t=$(awk '{print $14+$15+$16+$17}' /proc/$pid/stat 2>/dev/null) && echo "$pid $t" >> $samp
        fi
      done; sleep 1; done ) &
  sampler=$!
  TMPDIR=$td HLOSHARD_SHARED=/work/shared PYTHONPATH=$tree/src:$tree /usr/bin/time -f "%U %S %e" -o $OUT/$label.$b.time nice -n 5 /work/main/.venv/bin/python -m pytest -p no:cacheprovider -p no:xdist -q --durations=15 $f > $OUT/$label.$b.out 2>&1
  sleep 2; kill $sampler
  for pid in $(grep -l "forkserver_main" /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3); do
    if tr '\0' ' ' < /proc/$pid/cmdline 2>/dev/null | grep -q "$td"; then kill $pid; fi
  done
  zs=$(awk '{if ($2>m[$1]) m[$1]=$2} END {s=0; for (p in m) s+=m[p]; print s/100}' $samp)
  echo "$b $(cat $OUT/$label.$b.time) forkserver $zs load $l0-$(cut -d' ' -f1 /proc/loadavg) $(tail -1 $OUT/$label.$b.out)" >> $OUT/$label.summary
done
