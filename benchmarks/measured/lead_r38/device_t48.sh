# round 38, lead: issue 25's 48-layer row -- predicted peak vs XLA's memory_analysis() for the GSPMD plan and a
# fresh solve plan (mesh 2x4), on the device machine's CPU (the XLA child needs ~10 GB)
set -u
OUTDIR=${OUT:-/tmp/lead_out}; mkdir -p $OUTDIR
PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl-tpu/*.whl || exit
export PYTHONUNBUFFERED=1 JAX_PLATFORMS=cpu PYTHONPATH=/tmp/site:$PWD/src:$PWD:${PYTHONPATH:-}
T=tmp/scale/transformer_48l
( timeout 580 python3 -m hloshard cost $T.propagated.hlo --mesh 2x4 --xla --format json > $OUTDIR/t48_gspmd.json 2> $OUTDIR/t48_gspmd.err; echo "gspmd rc=$? $(date -u +%T)" ) &
( timeout 100 python3 -m hloshard solve $T.pre.hlo --mesh 2x4 --deterministic --time-limit 40 -o /tmp/t48_solve.hlo > /dev/null 2> $OUTDIR/t48_solve.err; echo "solve rc=$? $(date -u +%T)";
  timeout 470 python3 -m hloshard cost /tmp/t48_solve.hlo --xla --format json > $OUTDIR/t48_solved.json 2> $OUTDIR/t48_solved.err; echo "solved rc=$? $(date -u +%T)" ) &
wait; cp /tmp/t48_solve.hlo $OUTDIR/ 2>/dev/null
for f in $OUTDIR/t48_gspmd.json $OUTDIR/t48_solved.json; do python3 -c "
import json, sys
try:
    d = json.load(open(sys.argv[1])); m = d['memory']
    print(sys.argv[1].split('/')[-1], 'peak predicted', m['predicted_peak_bytes'], 'XLA', m['xla']['total_bytes'], 'ratio', m['ratio'],
          'bytes predicted', d['predicted_bytes_per_device'], 'XLA', d['xla_bytes_per_device'], 'xla_error', d['xla_error'])
except Exception as e:
    print(sys.argv[1], 'unreadable', e)
" $f; done
tail -3 $OUTDIR/*.err
