# deterministic solves, main then branch, same command; wall / CPU / RSS by /usr/bin/time
for mod in dec2 tts; do
for tree in main branch; do
  if [ $tree = main ]; then T=/work/main; else T=/work/wt/search; fi
  cd /tmp/s32
  PYTHONPATH=$T/src:$T /usr/bin/time -f "$mod $tree wall %e user %U sys %S rss %M load $(cut -d' ' -f1 /proc/loadavg)" /work/main/.venv/bin/python -m hloshard.cli solve /tmp/srch31/prob/$mod.hlo --mesh 2x2x2 --deterministic --time-limit 30 -o /tmp/s32/$mod.$tree.det.hlo --report /tmp/s32/$mod.$tree.det.json --quiet
done
cmp /tmp/s32/$mod.main.det.hlo /tmp/s32/$mod.branch.det.hlo && echo "$mod IDENTICAL"
done
