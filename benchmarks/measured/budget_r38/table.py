import json, sys
for f in sys.argv[1:]:
    rows = json.load(open(f))
    for r in rows:
        b = r["budget"]
        pct = "none" if r["pct"] is None else f"{r['pct']*100:.0f}%" if r["pct"] in (1.0, 0.8, 0.6, 0.4, 0.7, 0.5, 0.3) else f"{b/1e6:.1f} MB"
        if "predicted" in r:
            x = r.get("xla")
            kept = "" if b is None else ("kept" if r.get("kept") else "**OVER**")
            ratio = f"{x/b:.3f}" if b and isinstance(x, int) else ""
            print(f"| {r['name']} | {pct} | {'' if b is None else f'{b:,}'} | accepted | {r['predicted']:,} | {x:,} | {ratio} {kept} | | {r['min_written_xla'] or 0:,} |")
        else:
            bd = r.get("xla_bound")
            ok = "" if bd is None or r.get("bound_ok") is None else ("<= min" if r["bound_ok"] else "**ABOVE**")
            print(f"| {r['name']} | {pct} | {b:,} | refused | | | | {'no bound' if bd is None else f'{bd:,} {ok}'} | {r['min_written_xla'] or 0:,} |")
