cd /work/wt/search
for f in dec2 tts; do for tree in main branch main branch; do
  if [ $tree = main ]; then T=/work/main; else T=/work/wt/search; fi
  echo -n "$tree " ; PYTHONPATH=$T/src:$T /work/main/.venv/bin/python benchmarks/measured/search_r32/det_cpu.py /tmp/srch31/prob/$f.2x2x2.json.gz 30
done; done
