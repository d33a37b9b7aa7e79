# round 37, lead: Gemma's auto_shard on 2 idle cores of the device machine's CPU (JAX on CPU, 8 fake devices)
set -u
OUTDIR=${OUT:-/tmp/lead_out}; mkdir -p $OUTDIR
PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl-tpu/*.whl || exit
python3 -m compileall -q /tmp/site src benchmarks > /dev/null 2>&1
export PYTHONUNBUFFERED=1 JAX_PLATFORMS=cpu KERAS_BACKEND=jax WT=$PWD PYTHONPATH=/tmp/site:$PWD/src:$PWD:${PYTHONPATH:-}
G=benchmarks/measured/lead_r37/gemma_2cores.py
for run in ${RUNS:-det1 wall1 det2 wall2}; do
  mode=""; case $run in wall*) mode=wallclock;; esac; case $run in *tl15*) export GEMMA_TIME_LIMIT=15;; *) unset GEMMA_TIME_LIMIT;; esac
  T=$(mktemp -d); echo "== $run $(date -u +%T) $(cat /proc/loadavg)"
  TMPDIR=$T timeout 280 taskset -c 0,1 python3 $G $OUTDIR/$run noprof gemma auto $mode 2>&1 | grep -v "^I0000\|^WARNING: All" | tail -4
  rm -f $OUTDIR/$run.written.hlo
done
ls -la $OUTDIR
