import json, sys
xla = {}
for f in sys.argv[1].split(","):
    xla.update(json.load(open(f)))
preds = [(n, json.load(open(n))) for n in sys.argv[2:]]
print(f"{'module':<32} {'XLA':>12} " + " ".join(f"{n.split('/')[-1][5:-5]:>20}" for n, _ in preds))
for f in sorted(preds[0][1]):
    x = xla.get(f)
    xt = x["total"] if isinstance(x, dict) else None
    cells = []
    for n, p in preds:
        v = p.get(f)
        if isinstance(v, int):
            cells.append(f"{v:>12,} {v/xt:6.3f}" if xt else f"{v:>12,}       ")
        else:
            cells.append(f"{str(v)[:19]:>20}")
    print(f"{f:<32} {xt if xt else str(x)[:12]:>12} " + " ".join(cells))
