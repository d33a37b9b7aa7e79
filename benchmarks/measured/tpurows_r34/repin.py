"""Round 33's solve plans (main's rule: a pin on every dot->transpose) re-pinned by this branch's rule for DEV:
repin.py SRC_PLANS DST_PLANS DEV.  Writes DST/DEV/GROUP/NAME.solve.hlo where the pins differ (and GSPMD/mesh copies)."""
import sys, pathlib, shutil
sys.path.insert(0, __import__("os").environ.get("WT", "/work/wt/tpurows") + "/src")
from hloshard.hlo import parse_module, print_module
from hloshard.strategy.realize import insert_transpose_pins
src, dst, dev = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
changed = 0; total = 0
for f in sorted((src / dev).glob("*/*.solve.hlo")):
    text = f.read_text(); total += 1
    m = parse_module(text)
    if print_module(m) != text:
        print("ROUNDTRIP DIFFERS", f); continue
    n0 = 0
    for c in m.computations:
        for i in list(c.instructions):
            if i.opcode == "custom-call" and i.name.endswith(".tpin"):
                d = i.operands[0]
                for u in list(i.users):
                    u.set_operands([d if o is i else o for o in u.operands])
                c.remove_instruction(i) if hasattr(c, "remove_instruction") else None
                n0 += 1
    m2 = parse_module(print_module(m))
    n1 = insert_transpose_pins([i for c in m2.computations for i in c.instructions], dev)
    out = print_module(m2)
    if n0 != n1:
        changed += 1
        g = f.parent.name
        d = dst / dev / g; d.mkdir(parents=True, exist_ok=True)
        name = f.name.split(".")[0]
        (d / f.name).write_text(out)
        for extra in (f.parent / f"{name}.mesh", f.parent / f"{name}.GSPMD.hlo", f.parent / f"{name}.GSPMD.cost.json", f.with_suffix(".cost.json")):
            if extra.exists(): shutil.copy(extra, d / (extra.name.replace(".solve.cost.json", ".main.cost.json")))
    print(dev, f.parent.name, f.name, "pins", n0, "->", n1, flush=True)
print(dev, "changed", changed, "of", total)
