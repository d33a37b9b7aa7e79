"""Which copy libtpu makes around each conflicting weight update (issue 27, round 38): per update of
``cost.tpu_partitioner.update_layout_conflicts`` in written plans X.hlo with libtpu's optimised program
X.opt.txt beside them, the all-to-all piece (``ResharedUpdate.piece``), libtpu's copy (``param``: the weight in
and the result back; ``gradient``: the gradient once; ``benchmarks/tpu_update_layouts.observed``) and
``update_copy_choice``'s prediction.  Prints the rows and the agreement; ``--json OUT`` appends the rows under
``--set NAME`` (the data ``tests/test_tpu_update_layouts.py`` reads).

    PYTHONPATH=src:. python benchmarks/measured/tpu_r38/update_choice.py '/work/notes/tpurows33/plans_br/tpu-v5e/*/*.hlo' \\
        --set r33 --json benchmarks/measured/tpu_r38/update_copies.json
"""
import argparse, glob, json, pathlib, sys
ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]
from hloshard.cost.tpu_partitioner import _updates, update_copy_choice  # noqa: E402
from hloshard.hlo import parse_module  # noqa: E402
from benchmarks.tpu_update_layouts import observed  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("glob"); ap.add_argument("--set", default="?"); ap.add_argument("--json")
a = ap.parse_args()
rows = []
for f in sorted(glob.glob(a.glob)):
    opt = pathlib.Path(f[:-len(".hlo")] + ".opt.txt")
    if not opt.exists():
        continue
    dev = next(p for p in pathlib.Path(f).parts if p.startswith("tpu-"))
    text = opt.read_text()
    for r in _updates(parse_module(pathlib.Path(f).read_text()), dev):
        if r.gradient_swapped == r.entry_swapped:
            continue
        obs = observed(text, r.parameter, r.update.operands[1])
        pred = update_copy_choice(r.piece)
        rows.append(dict(set=a.set, device=dev, file=pathlib.Path(f).name, param=r.parameter.name, local=list(r.local),
                         piece=list(r.piece), observed={"param": "weight"}.get(obs, obs), predicted=pred))
        print(f"{'ok ' if rows[-1]['observed'] == pred else 'BAD'} {dev} {pathlib.Path(f).name} {r.parameter.name} "
              f"local {list(r.local)} piece {list(r.piece)} libtpu {rows[-1]['observed']} rule {pred}")
print("agree", sum(r["observed"] == r["predicted"] for r in rows), "of", len(rows))
if a.json:
    p = pathlib.Path(a.json)
    old = json.loads(p.read_text()) if p.exists() else []
    p.write_text(json.dumps(old + rows, indent=0))
