#!/bin/bash
# run.sh OUT fork|plain|default [extra args to prof_gemma]: one Gemma auto_shard call, its own TMPDIR (so its own fork server)
OUT=$1; MODE=$2; shift 2
WT=${WT:-/work/wt/speed}
T=$(mktemp -d /tmp/speed37.XXXXXX)
# fork: HLOSHARD_XLA_FORKSERVER=1; plain: =0; default: unset (import hloshard.jax decides: the branch's default)
case "$MODE" in fork) export HLOSHARD_XLA_FORKSERVER=1;; plain) export HLOSHARD_XLA_FORKSERVER=0;; *) unset HLOSHARD_XLA_FORKSERVER;; esac
echo "start $(date -u +%T) $(cat /proc/loadavg)" > $OUT.log
TMPDIR=$T PYTHONPATH=$WT/src:$WT WT=$WT timeout 900 /work/main/.venv/bin/python $WT/benchmarks/measured/speed_r37/prof_gemma.py $OUT noprof "$@" 2>&1 | grep -v "^I0000\|^WARNING: All" >> $OUT.log
echo "end $(date -u +%T) $(cat /proc/loadavg)" >> $OUT.log
# end the server this run started (it would exit by itself after 120 s idle)
for p in $(grep -l "$T" /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3); do grep -q forkserver_main /proc/$p/cmdline 2>/dev/null && kill $p; done
rm -rf $T
