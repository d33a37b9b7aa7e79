"""libtpu's HBM temp heap against the module's heap-slot bound (:func:`hloshard.cost.tpu_heap.heap_slot_bound`,
round 25): off-tile splits and memory-space assignment's prefetches, which the plain instruction count of
round 21 missed, and the reported peak that ``cost`` / ``solve`` print beside the model's peak.

The measured figures (``tests/data/tpu_heap_bound_round25.json.gz``: libtpu 0.0.42.1 ahead of time, ``v5e:2x4``,
``benchmarks/tpu_truth.py --memory``) carry the modules' text, so every bound here is recomputed from the module
-- no libtpu needed.
"""

from __future__ import annotations

import gzip
import json
import pathlib

from click.testing import CliRunner

from hloshard.cli import main
from hloshard.cost.memory import (budget_for_model_limit, heap_allowance, model_limit, tpu_reported_peak,
                                  tpu_reported_peak_line)
from hloshard.cost.tpu_heap import (SLOTS_PER_CUTTING_SLICE, TpuMemoryDevice, compiled_instruction_sum,
                                    cuts_a_dim, cutting_slices, heap_slot_bound, splits_cut_dim, tpu_memory_device,
                                    written_heap_slot_bound, written_memory_device)
from hloshard.cost.tpu_layout import GRANULE_BYTES, SLOT_REPORTED_BYTES, vmem_bytes
from hloshard.hlo import parse_module
from tests.conftest import SAMPLES

DATA = pathlib.Path(__file__).parent / "data" / "tpu_heap_bound_round25.json.gz"


def _load():
    return json.loads(gzip.decompress(DATA.read_bytes()))


def _device(data, name) -> tuple[TpuMemoryDevice, object]:
    text = data["modules"].get(name)
    if text is None:
        text = (SAMPLES / f"{name}.pre.hlo").read_text()
    module = parse_module(text, name)
    return tpu_memory_device("tpu-v5e", module), module


def test_heap_slot_bound_covers_libtpus_heap_on_every_plan_of_rounds_23_to_25_held_out_set_9_included():
    data = _load()
    rows = data["rows"]
    assert {r["set"] for r in rows} >= {"held4", "held5", "held6", "held7", "held8", "held9", "samples"} and len(rows) >= 76
    devs = {n: _device(data, n) for n in {r["module"] for r in rows}}
    over_plain = []
    for r in rows:
        dev, module = devs[r["module"]]
        assert r["heap_slots"] <= dev.heap_slots, (r, dev.heap_slots)
        # libtpu's peak within the smallest budget whose model limit takes the plan's data
        assert r["tpu"] <= budget_for_model_limit(r["data"], dev), r
        plain = compiled_instruction_sum(module, lambda i: 1)   # round 21's count
        if r["heap_slots"] > plain:
            over_plain.append((r["set"], r["module"], r["plan"]))
    # what round 21's count missed: GSPMD's off-tile splits (sets 7, 8) and the beyond-VMEM train steps (set 5)
    assert {("held7", "split3_sum_fwd", "GSPMD"), ("held8", "qkv_split5_fwd", "GSPMD"),
            ("held8", "glu_split_fwd", "GSPMD"), ("held5", "attn_block_train_step", "solve"),
            ("held5", "swiglu_train_step", "GSPMD")} <= set(over_plain), over_plain
    # and on held-out set 9 (written before the rule, compiled after it was committed): three GSPMD plans
    assert {("held9", m, "GSPMD") for m in ("qkv3_attn_fwd", "split6_mix_fwd", "uneven_split_fwd")} <= set(over_plain)
    # not vacuous: within VMEM some plan comes within 15% of its bound
    fits = [r["heap_slots"] / devs[r["module"]][0].heap_slots for r in rows if devs[r["module"]][0].temporaries_fit_vmem]
    assert max(fits) > 0.85


CUT = """HloModule cut, entry_computation_layout={(f32[8,96]{1,0})->f32[8,32]{1,0}}

ENTRY main {
  p = f32[8,96] parameter(0)
  a = f32[8,32] slice(p), slice={[0:8], [0:32]}
  b = f32[8,32] slice(p), slice={[0:8], [32:64]}
  w = f32[8,96] slice(p), slice={[0:8], [0:96]}
  m = f32[8,32] multiply(a, b)
  ROOT r = f32[8,32] add(m, m)
}
"""


def test_cutting_slices_and_prefetches_by_hand():
    module = parse_module(CUT, "cut")
    by_name = {i.name: i for i in module.entry.instructions}
    assert cuts_a_dim(by_name["a"]) and cuts_a_dim(by_name["b"])
    assert not cuts_a_dim(by_name["w"]) and not cuts_a_dim(by_name["m"])   # keeps every dim whole; not a slice
    assert cutting_slices(module) == 2
    # p, a, b, w, m, r compute (6); the two cutting slices take 9 more each
    assert heap_slot_bound(module) == 6 + 2 * SLOTS_PER_CUTTING_SLICE == 24
    # beyond the VMEM every computing instruction may also prefetch each array it reads and evict its result:
    # p 0+1, a 1+1, b 1+1, w 1+1, m 2+1, r 2+1
    assert heap_slot_bound(module, prefetches=True) == 24 + 1 + 2 + 2 + 2 + 3 + 3
    dev = tpu_memory_device("tpu-v5e", module)
    assert dev.temporaries_fit_vmem and dev.heap_slots == 24
    big = parse_module(CUT
                       .replace("8,96", "65536,1536").replace("8,32", "65536,512")
                       .replace("[0:8]", "[0:65536]").replace("[0:32]", "[0:512]").replace("[32:64]", "[512:1024]")
                       .replace("[0:96]", "[0:1536]"), "big")
    dbig = tpu_memory_device("tpu-v5e", big)
    assert not dbig.temporaries_fit_vmem and dbig.heap_slots == 24 + 13


def test_reported_peak_keys_and_budget_words_by_hand():
    dev = TpuMemoryDevice("tpu-v5e", 10, True)
    assert heap_allowance(dev) == 10 * SLOT_REPORTED_BYTES + GRANULE_BYTES
    assert heap_allowance(TpuMemoryDevice("tpu-v5e", 10, False)) == heap_allowance(dev)   # the VMEM term is not heap
    assert heap_allowance("h100-sxm") == 0 and tpu_reported_peak(100, 5, None) == {}
    keys = tpu_reported_peak(1_000_000, 3 * SLOT_REPORTED_BYTES, dev)
    assert keys["tpu_reported_peak_per_device"] == 1_000_000 + 3 * SLOT_REPORTED_BYTES
    assert keys["tpu_heap_allowance_per_device"] == heap_allowance(dev)
    # the budget checks the data peak: the model limit is the budget less the allowance
    assert model_limit(2_000_000, dev) == 2_000_000 - heap_allowance(dev)
    line = tpu_reported_peak_line(keys)
    assert "memory_analysis()" in line and "checks the data peak" in line and "beyond" not in line
    over = tpu_reported_peak(1_000_000, 11 * SLOT_REPORTED_BYTES, dev)
    assert "beyond that allowance" in tpu_reported_peak_line(over)
    assert tpu_reported_peak_line({"peak_memory_per_device": 5}) == ""


def test_cost_reports_libtpus_reported_peak_with_a_tpu_device():
    # attention_6heads' GSPMD plan: one partition-offset scalar spills, libtpu reported 1,795,584 B (round 25)
    path = str(SAMPLES / "attention_6heads.propagated.hlo")
    runner = CliRunner()
    res = runner.invoke(main, ["cost", path, "--mesh", "2x4", "--device", "tpu-v5e", "--format", "json"])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output)
    assert rep["tpu_heap_per_device"] > 0
    assert rep["tpu_reported_peak_per_device"] == rep["peak_memory_per_device"] + rep["tpu_heap_per_device"]
    assert abs(rep["tpu_reported_peak_per_device"] / 1_795_584 - 1) < 0.15
    assert rep["tpu_heap_allowance_per_device"] == \
        heap_slot_bound(parse_module((SAMPLES / "attention_6heads.pre.hlo").read_text(), "a")) * SLOT_REPORTED_BYTES \
        + GRANULE_BYTES
    text = runner.invoke(main, ["cost", path, "--mesh", "2x4", "--device", "tpu-v5e"])
    assert text.exit_code == 0 and "memory_analysis() is predicted to report" in text.output
    # no TPU: no such keys
    plain = json.loads(runner.invoke(main, ["cost", path, "--mesh", "2x4", "--format", "json"]).output)
    assert "tpu_reported_peak_per_device" not in plain
    assert vmem_bytes("tpu-v5e") > 0


def test_written_plan_allows_halo_slots_only_where_it_splits_a_cut_dim():
    # the cut dim (1) whole on every device: sliced locally, no halo -- the written plan's allowance drops the
    # 2 x 9 slots; split 4 ways on it (96 -> 24 per device, cut at 32: off the tiles): the module's allowance
    split_rows = CUT.replace("parameter(0)", "parameter(0), sharding={devices=[8,1]<=[8]}").replace(
        "slice(p), slice={[0:8], [0:32]}", "slice(p), slice={[0:8], [0:32]}, sharding={devices=[8,1]<=[8]}").replace(
        "slice(p), slice={[0:8], [32:64]}", "slice(p), slice={[0:8], [32:64]}, sharding={devices=[8,1]<=[8]}")
    local = parse_module(split_rows, "local")
    by_name = {i.name: i for i in local.entry.instructions}
    assert not splits_cut_dim(by_name["a"]) and not splits_cut_dim(by_name["b"])
    assert written_heap_slot_bound(local) == 6 < heap_slot_bound(local) == 24
    dev = tpu_memory_device("tpu-v5e", local)
    mine = written_memory_device(dev, local)
    assert (mine.heap_slots, mine.temporaries_fit_vmem) == (6, True)
    assert model_limit(10 ** 6, mine) - model_limit(10 ** 6, dev) == 18 * SLOT_REPORTED_BYTES
    halo = parse_module(split_rows.replace("devices=[8,1]<=[8]", "devices=[2,4]<=[8]"), "halo")
    assert splits_cut_dim({i.name: i for i in halo.entry.instructions}["a"])
    assert written_heap_slot_bound(halo) == 24 and written_memory_device(tpu_memory_device("tpu-v5e", halo), halo) \
        .heap_slots == 24
    # unannotated (the module before a plan): every cutting slice may make one
    assert written_heap_slot_bound(parse_module(CUT, "bare")) == 24
