"""Round 33 (helper tpumem): what a TPU memory budget would have to be to accept each real model's plan, per
margin rule, beside libtpu's own figures (issue 25 / 24; BENCHMARKS.md "helper tpumem, round 33").

Reads the written plans in ``plans/`` (hloshard's written modules, gzipped) and libtpu's records
(``heap_small.json``, ``heap_gemma.json``: ``heap_read.py``), recomputes hloshard's figures with this tree, and
prints one Markdown table.  Needs no libtpu.  Usage (from the tree's root)::

    PYTHONPATH=src:. python benchmarks/measured/tpumem_r33/summary.py [--json out.json]
"""
import gzip, json, pathlib, sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[2] / "src"), str(HERE.parents[2])]

from hloshard.autoshard import evaluate_module  # noqa: E402
from hloshard.cost.tpu_heap import heap_slot_bound, written_heap_slot_bound, tpu_memory_device  # noqa: E402
from hloshard.cost.memory import budget_for_model_limit  # noqa: E402
from hloshard.cost.tpu_layout import SLOT_REPORTED_BYTES, GRANULE_BYTES, HBM_ALIGN_BYTES  # noqa: E402
from hloshard.hlo import parse_module  # noqa: E402
from hloshard.mesh_setup import timed_mesh_from_options  # noqa: E402

#: (model, plan, written module, libtpu record file, libtpu row, the expert plan's libtpu HBM per device)
PLANS = [
    ("gemma", "auto (TPU budget, margin 0)", "gemma.auto_tpu_nomargin.solved.hlo", "heap_gemma.json", 34491904),
    ("gemma", "auto_expert", "gemma.auto_expert.solved.hlo", "heap_gemma.json", 34491904),
    ("qwen2_small", "auto (TPU budget, margin 0)", "qwen2_small.auto_tpu_nomargin.solved.hlo", "heap_small.json", 4410880),
    ("qwen2_small", "auto", "qwen2_small.auto.solved.hlo", "heap_small.json", 4410880),
    ("mistral_small", "auto (TPU budget, margin 0)", "mistral_small.auto_tpu_nomargin.solved.hlo", "heap_small.json", 8434688),
    ("llama3_small", "auto_expert", "llama3_small.auto_expert.solved.hlo", "heap_small.json", 4819968),
]


def main(argv):
    out = []
    for model, plan, hlo, rec_file, expert_hbm in PLANS:
        rec = next(r for r in json.loads((HERE / rec_file).read_text())["rows"] if r["file"] == hlo)
        text = gzip.decompress((HERE / "plans" / (hlo + ".gz")).read_bytes()).decode()
        module = parse_module(text, hlo)
        mesh, _s, _b = timed_mesh_from_options(module, "2x4", None, None, None, "tpu-v5e", None)
        dev = mesh.memory_device   # the module's device as a budget sees it (heap bound, VMEM)
        data = int(evaluate_module(module, mesh).evaluation.peak_memory)
        m, heap = rec["memory"], rec["hbm_heap"]
        libtpu_peak = m["argument"] + m["output"] + m["temp"] - m["alias"]
        headers = heap["headers"] + heap["other_values"]
        row = {"model": model, "plan": plan, "data": data, "libtpu_peak": libtpu_peak, "libtpu_temp": m["temp"],
               "hbm": rec["hbm_bytes"], "heap_bytes": heap["bytes"], "heap_slots": headers,
               "heap_other_values": heap["other_values"], "expert_hbm": expert_hbm,
               "module_slots": dev.heap_slots, "module_fits_vmem": dev.temporaries_fit_vmem,
               "plain_slots": heap_slot_bound(module), "written_slots": written_heap_slot_bound(module)}
        # the smallest budget accepting this plan's data, per margin rule (bytes per device)
        row["budget_main"] = budget_for_model_limit(data, dev)
        row["budget_written_bound"] = data + row["written_slots"] * SLOT_REPORTED_BYTES + GRANULE_BYTES
        row["budget_exact_slots_32256"] = data + headers * SLOT_REPORTED_BYTES + GRANULE_BYTES
        row["budget_exact_slots_16k"] = data + (headers - 1) * HBM_ALIGN_BYTES + GRANULE_BYTES
        out.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    mb = lambda x: f"{x / 1e6:.2f}"
    lines = ["| model | plan | data MB (libtpu peak) | libtpu HBM MB: heap MB (slots) | module bound slots (VMEM term) | budget MB: main / written plan's bound / exact slots x 32,256 / exact slots x 16 KiB | expert HBM MB |",
             "|---|---|---|---|---|---|---:|"]
    for r in out:
        x = lambda k: f"{mb(r[k])} ({r[k] / r['expert_hbm']:.2f}x)"
        lines.append(f"| {r['model']} | {r['plan']} | {mb(r['data'])} ({mb(r['libtpu_peak'])}) | {mb(r['hbm'])}: "
                     f"{mb(r['heap_bytes'])} ({r['heap_slots']}) | {r['module_slots']}"
                     f"{'' if r['module_fits_vmem'] else ' + 128 MiB'} | {x('budget_main')} / {x('budget_written_bound')} / "
                     f"{x('budget_exact_slots_32256')} / {x('budget_exact_slots_16k')} | {mb(r['expert_hbm'])} |")
    print("\n".join(lines))
    if "--json" in argv:
        pathlib.Path(argv[argv.index("--json") + 1]).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
