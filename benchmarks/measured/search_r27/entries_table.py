"""Round 27, helper search: coarse.solve_entries_estimate (from the module, no build) beside the solver problem's
edge-matrix entries of one build each (followers merged, before presolve; measured by /tmp/search/entries.py, a
build_graph per case: sum(m.size for m in graph.solver_problem.edge_costs)).  Usage: entries_table.py (paths as
on the 2-core machine: samples/, /work/main/tmp/scale, the dumped keras-hub modules)."""
import json
import sys

from hloshard.autoshard.coarse import coarse_mesh, solve_entries_estimate
from hloshard.hlo.parser import parse_file
from hloshard.mesh_setup import mesh_from_options

S, K = "/work/main/tmp/scale/", "/tmp/nu25/out/"
MEASURED = [  # path@mesh, entries (one build), fitted / held out for the rule's constant (none: the plain sum)
    ("samples/transformer_train_step.pre.hlo@2x2x2", 10_091_421),
    ("samples/fused_qkv_train_step.pre.hlo@2x2x2", 6_112_284),
    ("samples/attention_6heads.pre.hlo@2x2x2", 682_687),
    ("samples/mlp_train_step.pre.hlo@2x4", 5_941),
    (S + "dec2.hlo@2x2x2", 7_907_094),
    ("/tmp/fine/gemma.pre.hlo@2x4", 46_041_130),
    (K + "gemma3.pre.hlo@2x4", 28_560_660),
    (K + "gemma3.pre.hlo@2x2x2", 25_516_625),
    (K + "dit.pre.hlo@2x4", 16_611_656),
    (S + "transformer_48l.pre.hlo@2x2x2", 167_015_016),
    (S + "transformer_48l.pre.hlo@4x2", 178_398_934),
    (S + "nv_maxtext_1n1g_jit_train_step_before_optimization.hlo@2x2x2", 7_309_883),
    (S + "hlo_llama31_8b_bf16_1x8.hlo@2x2x2", 121_933_845),
]
for spec, entries in MEASURED:
    path, mesh = spec.rsplit("@", 1)
    module = parse_file(path)
    m = mesh_from_options(module, mesh, None, None, None)
    est = solve_entries_estimate(module, m)
    print(json.dumps({"case": spec.split("/")[-1], "estimate": est, "entries": entries, "ratio": round(est / entries, 3),
                      "coarse_mesh": coarse_mesh(m, module) is not None}), flush=True)
