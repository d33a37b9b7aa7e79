# round 25 helper scale, diagnostic call: where the 48-layer rows' seconds and bytes go, branch vs main, side by side;
# and the builds at the coarse and fine meshes (the fine-build estimate's data).
# usage: bash tmp/scalehelper/diag_command.sh [small]
# needs in tmp/scalehelper: src/ (this branch), prof.py, build_est.py (both here) and pin.py (benchmarks/measured/scale_r23/pin.py)
set -u
H=$PWD/tmp/scalehelper; OUTDIR=${OUT:-/tmp/scalehelper_out}; mkdir -p $OUTDIR
SMALL=0; [ "${1:-}" = small ] && SMALL=1
if [ "${1:-}" != small ]; then
  PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl-tpu/*.whl || exit
  PY=python3; SITE=/tmp/site; T=tmp/scale/transformer_48l.pre.hlo; L=tmp/scale/hlo_llama31_8b_bf16_1x8.hlo; LIM=60
else
  PY=/work/main/.venv/bin/python; SITE=; T=samples/transformer_train_step.pre.hlo; L=samples/mlp_train_step.pre.hlo; LIM=5
fi
export PYTHONUNBUFFERED=1
D=/tmp/diag; rm -rf $D; mkdir -p $D
c() { if [ "$SMALL" = 1 ]; then echo 0,1; else echo $1; fi; }
run() {  # tag code cores mesh
  local tag=$1 code=$2 cores=$3 mesh=$4
  local t0=$(date +%s.%N)
  PROF_OUT=$D/$tag.samples PYTHONPATH=${SITE:+$SITE:}$code/src:$code timeout 240 $PY $H/pin.py $(c $cores) $H/prof.py $T --mesh $mesh --time-limit $LIM -o $D/$tag.hlo --report $D/$tag.json --quiet > $D/$tag.out 2> $D/$tag.err
  echo "$tag exit $? wall $(python3 -c "import time;print(round(time.time()-$t0,2))")" >> $D/walls.txt
}
run new_222 $H 0,1 2x2x2 &
run new_42 $H 2,3 4x2 &
run main_222 $PWD 4,5 2x2x2 &
run main_42 $PWD 6,7 4x2 &
( PYTHONPATH=${SITE:+$SITE:}$H/src:$H timeout 240 $PY $H/pin.py $(c 8,9) $H/build_est.py $L 8 2x2x2 > $D/build_llama.jsonl 2> $D/build_llama.err ) &
( PYTHONPATH=${SITE:+$SITE:}$H/src:$H timeout 240 $PY $H/pin.py $(c 10,11) $H/build_est.py $T 8 2x2x2 > $D/build_t48.jsonl 2> $D/build_t48.err ) &
wait
cd /tmp && tar czf $OUTDIR/diag.tgz diag/*.err diag/*.out diag/*.json diag/*.jsonl diag/walls.txt diag/*.samples 2>/dev/null
cat $D/walls.txt; grep -h "PEAK\|RESULT" $D/*.err; cat $D/build_*.jsonl | cut -c1-400; ls -la $OUTDIR
