"""Per stored plan (tpu-* device): each all-to-all resharding step hloshard predicts, with the resharded
operand's producer in the (TPU-partitioner view of the) written module, the chain of reshape/bitcast/transpose/
copy/convert it passes through, whether that producer's chosen strategy has an all-reduce (partial sums), the
step's per-device input shape, dims, k, element bytes and today's transposes count."""
import sys, os, glob, json
WT = os.environ.get("WT", "/work/wt/tpu"); sys.path[:0] = [WT + "/src", WT]
from hloshard.autoshard import evaluate_module
from hloshard.autoshard.evaluate import reshardings_of
from hloshard.cost.tpu_partitioner import tpu_partitioned_view
from hloshard.cost.collectives import all_to_all_transposes
from hloshard.mesh_setup import timed_mesh_from_options
from hloshard.hlo import parse_module
dev = sys.argv[2]
out = []
for f in sorted(glob.glob(sys.argv[1])):
    name = os.path.basename(f).split(".")[0]; plan = os.path.basename(f).split(".")[1]
    mesh = open(os.path.join(os.path.dirname(f), name + ".mesh")).read().strip()
    module = parse_module(open(f).read())
    dmesh, scale, _ = timed_mesh_from_options(module, mesh, None, None, None, dev)
    module, folded = tpu_partitioned_view(module, scale.profile.name)
    res = evaluate_module(module, dmesh)
    graph, choice = res.graph, res.choice
    ins = {i.name: i for c in module.computations for i in c.instructions}
    node_of = {g.instr.name: v for v, g in enumerate(graph.nodes)}
    def has_ar(n):
        v = node_of.get(n)
        if v is None: return False
        st = graph.nodes[v].strategies[int(choice[v])]
        return any(c.kind == "all-reduce" for c in (getattr(st, "collectives", ()) or ()))
    for user, rows in reshardings_of(graph, choice).items():
        for row in rows:
            for s in row["steps"]:
                if s.get("kind") != "all-to-all": continue
                op = row["operand"]; chain = []; x = ins.get(op)
                while x is not None and x.opcode in ("reshape", "bitcast", "transpose", "copy", "convert") and x.operands:
                    chain.append(f"{x.opcode}{list(x.shape.dims)}"); x = x.operands[0]
                root = x.opcode if x is not None else "?"
                ar = has_ar(x.name) if x is not None else False
                n = int(s.get("group_size", 0) or len(s["replica_groups"][0]))
                t, _ = all_to_all_transposes(s["input_shape"], *s["dims"], n)
                eb = s["input_bytes"] / max(1, __import__("math").prod(s["input_shape"]))
                r = dict(file=os.path.basename(f), user=user, operand=op, chain=chain, root=root, root_ar=ar,
                         in_shape=list(s["input_shape"]), dims=list(s["dims"]), k=n, elem=eb, in_bytes=s["input_bytes"], t=t,
                         folded=any(op == a or op == b for a, b in [(getattr(p, 'name', p[0] if isinstance(p, tuple) else p), '') for p in folded]) if folded else False)
                out.append(r)
                print(f"{r['file'][:38]:38} {user[:18]:18} op {op[:18]:18} root {root:12} ar {int(ar)} chain {'>'.join(chain)[:40]:40} in {r['in_shape']} dims {r['dims']} k {n} eb {eb:g} t {t}", flush=True)
json.dump(out, open(sys.argv[3], "w"), indent=1)
