#!/bin/bash
# run.sh OUT MODE TL: one Gemma call (gemma_call.py) in its own TMPDIR (its own fork server, ended after)
OUT=$1; shift
WT=${WT:-/work/wt/speed}
T=$(mktemp -d /tmp/speed38.XXXXXX)
unset HLOSHARD_XLA_FORKSERVER
echo "start $(date -u +%T) $(cat /proc/loadavg)" > $OUT.log
TMPDIR=$T PYTHONPATH=$WT/src:$WT WT=$WT KERAS_BACKEND=jax JAX_PLATFORMS=cpu timeout 600 /work/main/.venv/bin/python $(dirname $(readlink -f $0))/gemma_call.py $OUT "$@" 2>&1 | grep -v "^I0000\|^WARNING: All" >> $OUT.log
echo "end $(date -u +%T) $(cat /proc/loadavg)" >> $OUT.log
for p in $(grep -l "$T" /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3); do grep -q forkserver_main /proc/$p/cmdline 2>/dev/null && kill $p; done
rm -rf $T
