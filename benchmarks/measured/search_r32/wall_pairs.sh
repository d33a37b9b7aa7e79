cd /work/wt/search
for f in dec2 tts; do for tree in base branch base branch; do
  if [ $tree = base ]; then T=/tmp/s32/base/src; else T=/work/wt/search/src; fi
  echo -n "$tree " ; PYTHONPATH=$T /work/main/.venv/bin/python benchmarks/measured/search_r32/wall_solve.py /tmp/srch31/prob/$f.2x2x2.json.gz 20
done; done
