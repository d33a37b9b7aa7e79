"""libtpu's HBM temp heap on the real models' plans against the TPU budget's margin (round 33, issue 25 / 24).

``tests/data/tpu_heap_models_round33.json.gz``: 18 plans of keras-hub gemma (4 layers), qwen2_small, mistral_small
and tunix llama3_small compiled by libtpu 0.0.42.1 ahead of time for ``v5e:2x4``
(``benchmarks/measured/tpumem_r33/heap_read.py``): ``memory_analysis()`` and the buffer assignment's HBM and temp
heap; for the 6 written modules (hloshard's ``AutoShardResult.hlo_text``, kept in the file) also hloshard's
predicted data peak with ``--device tpu-v5e``.  Every bound here is recomputed from the module -- no libtpu needed.
BENCHMARKS.md "helper tpumem, round 33" has the table and why these margins cannot ask for the expert's HBM.
"""

from __future__ import annotations

import gzip
import json
import pathlib

from hloshard.cost.memory import budget_for_model_limit
from hloshard.cost.tpu_heap import tpu_memory_device
from hloshard.cost.tpu_layout import GRANULE_BYTES, HBM_ALIGN_BYTES, reported_temp_bytes
from hloshard.hlo import parse_module

DATA = pathlib.Path(__file__).parent / "data" / "tpu_heap_models_round33.json.gz"


def _load() -> dict:
    return json.loads(gzip.decompress(DATA.read_bytes()))


def test_libtpus_heap_on_the_real_models_is_async_headers_only_and_not_reported():
    rows = _load()["rows"]
    assert len(rows) == 18 and {r["model"] for r in rows} == {"gemma", "qwen2_small", "mistral_small", "llama3_small"}
    # the one exception: gemma's expert plan keeps 11 data values (14.2 MB) in the heap beside 395 headers, and
    # memory_analysis() reports the heap as tpu_layout's rule says (rounded heap + 15,872 B per small slot)
    expert, = [r for r in rows if (r["model"], r["plan"]) == ("gemma", "expert (jax path)")]
    heap = expert["hbm_heap"]
    assert heap["other_values"] == 11 and heap["other_bytes"] > 14 * 10 ** 6, heap
    rule = reported_temp_bytes(heap["bytes"], heap["small_slots"], True)
    assert abs(rule / expert["memory"]["temp"] - 1) < 0.002, (rule, expert["memory"])
    for r in rows:
        if r is expert:
            continue
        m, heap = r["memory"], r["hbm_heap"]
        # no spilled scalar, no data temporary: one 16 KiB-aligned slot per tuple header, (S - 1) * 16 KiB + 512 B
        assert heap["other_values"] == 0 and heap["small_slots"] == heap["headers"] > 0, r
        assert heap["bytes"] == (heap["headers"] - 1) * HBM_ALIGN_BYTES + GRANULE_BYTES, r
        # memory_analysis() reports none of it (a heap of headers only); the buffer assignment's HBM holds it and
        # 70-260 KiB more that is neither the heap nor an argument or output (not read further)
        assert m["temp"] == 0 and m["alias"] == 0, r
        beyond = r["hbm_bytes"] - m["argument"] - m["output"] - heap["bytes"]
        assert 0 < beyond <= 320 * 1024 and beyond % GRANULE_BYTES == 0, (r, beyond)


def test_the_heap_slot_bound_keeps_every_real_model_plan_and_is_four_to_seven_times_its_heap():
    data = _load()
    written = [r for r in data["rows"] if r["module"]]
    assert len(written) == 6
    for r in written:
        module = parse_module(data["modules"][r["module"]], r["module"])
        dev = tpu_memory_device("tpu-v5e", module)
        slots = r["hbm_heap"]["headers"]
        # the margin's promise on these plans: libtpu's peak and its HBM within the smallest budget that accepts
        # the plan's predicted data (cost.memory.budget_for_model_limit on the module's device)
        budget = budget_for_model_limit(r["data"], dev)
        peak = r["memory"]["argument"] + r["memory"]["output"] + r["memory"]["temp"] - r["memory"]["alias"]
        assert abs(peak - r["data"]) <= GRANULE_BYTES, r        # the model's data exact on every plan
        assert max(peak, r["hbm_bytes"]) <= budget, (r, budget)
        # ... but far from tight: the bound (the program's computing instructions; beyond the VMEM with
        # memory-space assignment's prefetches) is 4-7x the headers within the VMEM, ~20x on gemma beyond it,
        # and the smallest such budget is 2.6-8.4x the HBM libtpu gives the expert's plan
        assert (4 if dev.temporaries_fit_vmem else 18) * slots <= dev.heap_slots <= 25 * slots, (r, dev.heap_slots)
        assert budget > 2.5 * r["expert_hbm"], (r, budget)
    gemma = [r for r in written if r["model"] == "gemma"]
    assert all(not tpu_memory_device("tpu-v5e", parse_module(data["modules"][r["module"]], "g")).temporaries_fit_vmem
               for r in gemma)
