import json
for chip in ("tpu-v5e", "tpu-v5p", "tpu-v6e"):
    m = {(r["group"], r["name"], r["plan"]): r for r in json.load(open(f"ev_{chip}_main.json"))}
    b = {(r["group"], r["name"], r["plan"]): r for r in json.load(open(f"ev_{chip}_br.json"))}
    ch = 0
    for k in m:
        x, y = m[k], b[k]
        if abs(x["like"] - y["like"]) > 1e-12 or abs(x["bytes"] - y["bytes"]) > 1e-3:
            ch += 1
            print(f"{chip} {k[0]:7} {k[1]:28} {k[2]:5} like {x['like']/x['tpu']:.3f} -> {y['like']/y['tpu']:.3f}  bytes {x['bytes']/x['tpu_bytes']:.3f} -> {y['bytes']/y['tpu_bytes']:.3f}  step {x['step']*1e6:.2f} -> {y['step']*1e6:.2f} us")
    print(chip, "changed", ch, "of", len(m), "; solve rows changed:", sum(1 for k in m if k[2] == "solve" and abs(m[k]["like"] - b[k]["like"]) > 1e-12))
