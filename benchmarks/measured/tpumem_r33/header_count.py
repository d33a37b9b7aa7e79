"""The plan-dependent header count of spill_heap_slots (without its spill condition) for written modules."""
import sys, json, time
from hloshard.hlo import parse_module
from hloshard.autoshard import evaluate_module
from hloshard.autoshard.evaluate import reshardings_of
from hloshard.mesh_setup import timed_mesh_from_options
from hloshard.cost import tpu_heap as th
from hloshard.cost.roofline import multi_output_kernels
from hloshard.cost.tpu_fusion import TPU_FUSION
from hloshard.strategy.base import is_mesh_spec
import hloshard.cost.tpu_layout as tl
res = []
for f in sys.argv[2:]:
    t0 = time.monotonic()
    m = parse_module(open(f).read(), f)
    mesh, _s, _b = timed_mesh_from_options(m, sys.argv[1], None, None, None, "tpu-v5e", None)
    cr = evaluate_module(m, mesh)
    graph, choice = cr.graph, cr.choice
    steps = {name: [s.get("kind") for r in lst for s in r["steps"]] for name, lst in reshardings_of(graph, choice).items()}
    psums = {}
    for v, g in enumerate(graph.nodes):
        st = g.strategies[int(choice[v])]
        split = {a for d in st.out if type(d) is tuple for a in d if type(a) is int} if is_mesh_spec(st.out) else set()
        for c in st.collectives or ():
            if c.kind in ("all-reduce", "reduce-scatter"):
                psums.setdefault(g.instr.name, []).append((c.kind, tuple(c.mesh_axes), bool(split & set(c.mesh_axes))))
    strat_coll = sum(len(g.strategies[int(choice[v])].collectives or ()) for v, g in enumerate(graph.nodes))
    n = graph.mesh.num_devices
    outs = th.entry_outputs(m)
    tables = {t for o in outs for t in th.root_table_offsets(o, n)} | {t for key in th.offset_reads(m, n) for t in key}
    params = sum(1 for i in m.entry.instructions if i.opcode == "parameter")
    kernels = multi_output_kernels(m.entry, TPU_FUSION)
    combined = th.combined_collective_slots(m, psums)
    asyncs = sum(1 for kinds in steps.values() for k in kinds if k in th.ASYNC_STEP_KINDS)
    loops = sum(1 for c in m.computations for i in c.instructions if i.opcode == "while")
    row = {"file": f.split("/")[-1], "params": params, "tables": len(tables), "kernels": kernels, "combined": combined,
           "async_steps": asyncs, "strategy_collectives": strat_coll, "whiles": loops,
           "count": params + len(tables) + kernels + combined + th.SLOTS_PER_ASYNC_STEP * asyncs,
           "plain_bound": th.heap_slot_bound(m), "peak": int(cr.evaluation.peak_memory), "tpu_heap": int(cr.evaluation.tpu_heap),
           "seconds": round(time.monotonic() - t0, 1)}
    print(json.dumps(row), flush=True)
