from hloshard.autoshard.build import build_graph
from hloshard.load import load_module
from hloshard.mesh import DeviceMesh
for name, spec in (("transformer_train_step", "2x2x2"), ("fused_qkv_train_step", "4x2"), ("attention_6heads", "2x4")):
    m = load_module(f"samples/{name}.propagated.hlo")
    g = build_graph(m, DeviceMesh.for_module(m, spec), "all")
    memo = g.ctx.minfo.memo.get("dot", {})
    kinds = [k[-1] if not isinstance(k[-1], tuple) else k[-1][0] for k in memo]
    print(name, {x: kinds.count(x) for x in set(map(str, kinds))})
