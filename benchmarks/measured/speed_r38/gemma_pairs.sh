#!/bin/bash
# gemma_pairs.sh OUTDIR TAG: Gemma's auto_shard in wall-clock mode at time_limit 10 and 15, branch then main back to
# back (run.sh each), one line per run: wall, CPU, load, the guard's share (kept, share, need), the guard's summary
OUT=$1; TAG=$2; mkdir -p $OUT
HERE=$(dirname $(readlink -f $0))
for tl in 10 15; do for w in branch main; do
  W=/work/wt/speed; [ $w = main ] && W=/work/main
  WT=$W $HERE/run.sh $OUT/${TAG}_${w}_wall$tl wall $tl
  python3 - $OUT/${TAG}_${w}_wall$tl.json $w $tl <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); t = d["time"]; g = t.get("guard_share", {})
print(sys.argv[2], sys.argv[3], "wall", round(d["wall"], 2), "cpu", round(d["cpu"], 2), "server",
      (d["forkserver"] or {}).get("cpu"), "load", [round(x, 1) for x in d["load_before"]], "obj", d["objective"],
      "kept", t["guard_share_kept"], g.get("share_seconds"), g.get("needed_seconds"),
      {k: round(v, 2) for k, v in t["phases"].items()}, "past", t["past_deadline"])
print("   guard:", (d["guard_summary"] or "")[:110])
PY
done; done
