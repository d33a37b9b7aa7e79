"""Memory as the TPU compiler allocates it (``--device tpu-*``; :mod:`hloshard.cost.tpu_layout`).

* The layout rule against 185 arrays compiled by the real TPU compiler (libtpu 0.0.42.1, ``v5e:2x4``,
  ahead of time; ``tests/data/tpu_layout_measured.json``: measured bytes and the layout it chose) --
  no libtpu needed.
* ``cost --device tpu-v5e`` prices a buffer with its padded tile; without a TPU device nothing changes.
* Oracle (``@pytest.mark.oracle``, skipped with the reason where libtpu is not installed): on three
  samples the predicted peak per device is within 15% of libtpu's ``memory_analysis()`` (argument +
  output + temp - alias), and a budget ``solve --device tpu-v5e`` accepts is kept by it; on a plan whose
  temp is a reported heap the total is the predicted peak plus that temp, and on every plan compiled the
  offset scalars in libtpu's heap are those the placement rule puts there on libtpu's schedule.
"""

from __future__ import annotations

import json
import math
import pathlib

import pytest

from hloshard.autoshard import evaluate_module, solve_module
from hloshard.mesh_setup import timed_mesh_from_options
from hloshard.cost.memory import (XLA_TPU_HEADER_SLOTS, XLA_TPU_OVERESTIMATE, XLA_TPU_UNDERESTIMATE,
                                  budget_for_model_limit, model_limit, xla_lower_bound)
from hloshard.cost.tpu_heap import (SLOTS_PER_CUTTING_SLICE, TpuMemoryDevice, cutting_slices, heap_slot_bound,
                                    temporaries_fit_vmem, tpu_memory_device,
                                    written_memory_device, written_temporaries_fit_vmem)
from hloshard.cost.tpu_layout import (GRANULE_BYTES, HBM_ALIGN_BYTES, SLOT_REPORTED_BYTES, header_heap_bound,
                                      minor_pair, padded_bytes, reported_temp_bytes, vmem_bytes)
from hloshard.hlo import parse_module, print_module
from hloshard.mesh import DeviceMesh
from tests.conftest import SAMPLES, require_jax

MEASURED = pathlib.Path(__file__).parent / "data" / "tpu_layout_measured.json"
HEAP = pathlib.Path(__file__).parent / "data" / "tpu_heap_measured.json"
PEAKS = pathlib.Path(__file__).parent / "data" / "tpu_memory_measured.json"


def test_padded_bytes_equal_the_tpu_compilers_allocation_on_every_probe():
    rows = json.loads(MEASURED.read_text())["rows"]
    assert len(rows) >= 150
    wrong = [(r["element_type"], r["dims"], r["bytes"], padded_bytes(r["element_type"], r["dims"]))
             for r in rows if padded_bytes(r["element_type"], r["dims"]) != r["bytes"]]
    assert not wrong, wrong[:10]


def test_padding_rules_by_hand():
    assert padded_bytes("f32", []) == GRANULE_BYTES
    assert padded_bytes("f32", [8, 128]) == 8 * 128 * 4          # one full tile: no padding
    assert padded_bytes("f32", [9, 128]) == 16 * 128 * 4         # second-minor to a multiple of 8
    assert padded_bytes("f32", [8, 129]) == 8 * 256 * 4          # minor to a multiple of 128
    assert padded_bytes("f32", [4, 16, 8]) == 4 * 8 * 128 * 4    # the compiler makes the 16 minor
    assert padded_bytes("bf16", [9, 128]) == 16 * 128 * 2        # packed types keep the (8, 128) tile
    assert padded_bytes("f32", [512, 2048]) == 512 * 2048 * 4
    assert padded_bytes("f32", [0, 5]) == 0
    assert vmem_bytes("tpu-v5e") == 128 * 2 ** 20 and vmem_bytes("tpu-v4") == 0


def test_reported_temp_equals_libtpus_temp_on_every_measured_heap():
    # 18 sample plans and two probes: libtpu's buffer assignment (heap, its slots of <= 512 B values,
    # whether it holds more than async headers) against memory_analysis().temp_size_in_bytes
    rows = json.loads(HEAP.read_text())["rows"]
    assert len(rows) >= 20
    wrong = [(r["module"], r["temp"], reported_temp_bytes(r["heap_bytes"], r["small_slots"], r["other_values"] > 0))
             for r in rows if reported_temp_bytes(r["heap_bytes"], r["small_slots"], r["other_values"] > 0) != r["temp"]]
    assert not wrong, wrong
    # both regimes are in the data: headers only (reported 0) and a heap with a spilled scalar
    assert any(r["temp"] == 0 and r["small_slots"] > 10 for r in rows)
    assert any(r["temp"] == r["small_slots"] * SLOT_REPORTED_BYTES > 0 for r in rows)


def test_reported_temp_by_hand():
    one_slot = HBM_ALIGN_BYTES
    assert reported_temp_bytes(3 * one_slot + 512, 4, False) == 0              # async headers only
    assert reported_temp_bytes(3 * one_slot + 512, 4, True) == 4 * 32256       # headers and a scalar
    assert reported_temp_bytes(2 * one_slot + 10 ** 6, 2, True) == 2 * one_slot + 10 ** 6 + 2 * 15872 + \
        (-(2 * one_slot + 10 ** 6)) % one_slot                                 # data: rounded up, + per slot
    assert header_heap_bound(25) == 806400 and header_heap_bound(-1) == 0


ROUND21 = pathlib.Path(__file__).parent / "data" / "tpu_heap_round21.json"


def _devices() -> dict:
    """Module name -> its TpuMemoryDevice: recomputed from samples/NAME.pre.hlo for the samples (and held to
    the recorded bound), the recorded bound for the held-out cases and MaxText (generated / corpus modules;
    round 23's bounds: the count of the program after XLA's CallInliner, cost.tpu_heap.heap_slot_bound)."""
    bounds = json.loads(ROUND23.read_text())["bounds"]
    out = {}
    for name, b in bounds.items():
        pre = SAMPLES / f"{name}.pre.hlo"
        if pre.exists():
            module = parse_module(pre.read_text(), name)
            dev = tpu_memory_device("tpu-v5e", module)
            # round 25 added the cutting slices' halo slots (all samples fit VMEM: no prefetch slots)
            assert (dev.heap_slots, dev.temporaries_fit_vmem) == \
                (b["heap_slots"] + SLOTS_PER_CUTTING_SLICE * cutting_slices(module), b["fits_vmem"]), (name, b)
        else:
            dev = TpuMemoryDevice("tpu-v5e", b["heap_slots"], b["fits_vmem"])
        out[name] = dev
    return out


def test_heap_slot_bound_covers_libtpus_heap_on_every_plan_measured():
    # round 21: libtpu's HBM temp heap (slots of async headers and spilled scalars) of 17 sample plans (the
    # rule was fixed on them) and 18 held-out plans (looked at only after): never above the module's bound
    data = json.loads(ROUND21.read_text())
    devs = _devices()
    rows = data["rows"]
    held = [r for r in rows if r["set"] == "held out"]
    assert len(held) == 18 and sum(r["set"] == "samples" for r in rows) >= 17
    # and three plans compiled only after the margin was final (6-layer transformer, ../shared/cases/decoder2.py)
    assert sum(r["set"] == "held out 2" for r in rows) == 3
    for r in rows:
        assert r["heap_slots"] <= devs[r["module"]].heap_slots, r
        # libtpu's peak is the model's data plus its reported heap (0 or the slots' figure) on every plan
        assert abs(r["predicted"] + r["tpu_temp"] - r["tpu"]) <= GRANULE_BYTES, r
        assert r["tpu_temp"] in (0, r["heap_slots"] * SLOT_REPORTED_BYTES), r
    # MaxText (data temporaries in HBM, every output donated): its GSPMD plan's heap is within the bound too
    mt = data["maxtext_gspmd"]
    assert mt["heap_slots"] <= devs[mt["module"]].heap_slots, mt
    # the bound is not vacuous: some plan comes within 20% of it, on each set
    assert max(r["heap_slots"] / devs[r["module"]].heap_slots for r in held) > 0.8
    assert max(r["heap_slots"] / devs[r["module"]].heap_slots for r in rows if r["set"] == "samples") > 0.8


def test_tpu_margins_hold_on_every_measured_plan_training_and_held_out():
    # every plan measured in rounds 15, 20 and 21 (samples, held out, MaxText): libtpu's peak T of a plan
    # predicted at P is within the smallest budget whose model limit accepts P (U * P + the module's heap
    # allowance, cost.memory.model_limit), and at least P / 1.22
    devs = _devices()
    # MaxText as rounds 15 and 22 measured it was priced by older models (its GSPMD plan at 10.6 GB, then
    # 14.0 GB; 16.3 GB on main 92d7fc2, libtpu 15.3 GB): round 23's measurement of the current model replaces it
    old = json.loads(PEAKS.read_text())["rows"]
    r23 = json.loads(ROUND23.read_text())
    mt = r23["maxtext"]
    assert {r["tpu"] for r in old if r["module"] == mt[0]["module"] and r["plan"] == "GSPMD"} == \
        {r["tpu"] for r in mt if r["plan"] == "GSPMD"}   # the same plan, compiled the same
    rows = [r for r in old if not r["module"].startswith("maxtext")] + json.loads(ROUND20.read_text())["rows"] + \
        json.loads(ROUND21.read_text())["rows"] + mt
    assert len(rows) >= 36 + 36 + 38 + 3
    for r in rows:
        dev = devs[r["module"]]
        p, t = r["predicted"], r["tpu"]
        assert t <= budget_for_model_limit(p, dev), (r, budget_for_model_limit(p, dev))
        assert t >= p / XLA_TPU_OVERESTIMATE, r
        assert xla_lower_bound(p, dev, persistent=p) <= t, r
    # MaxText is where the data margin applies (temporaries beyond VMEM); the samples' and first held-out
    # modules all fit VMEM (data exact; the 6-layer transformer does not, unsharded, and gets the data
    # margin although its data was exact)
    maxtext = devs["maxtext_train_step (corpus, mesh 8)"]
    assert not maxtext.temporaries_fit_vmem and not devs["transformer_6l"].temporaries_fit_vmem
    # the data factor U: the worst (libtpu - heap allowance - VMEM) / predicted measured on main 92d7fc2
    # where temporaries reach HBM (MaxText's three plans, round 22's modules beyond the VMEM, round 23's set
    # 4), rounded up to two decimals and never below 1; under the chip's HBM (the CLI's default budget with
    # --device tpu-v5e) the plan solved was kept by libtpu
    regime = mt + r23["u_regime"] + r23["held_out_4"]
    assert all(not r["fits_vmem"] for r in regime) and len(regime) >= 3 + 6 + 6
    vmem = vmem_bytes("tpu-v5e")
    worst = max((r["tpu"] - r["heap_bound"] * SLOT_REPORTED_BYTES - GRANULE_BYTES - vmem) / r["predicted"]
                for r in regime)
    assert XLA_TPU_UNDERESTIMATE == max(1.0, math.ceil(worst * 100) / 100) and 0.9 < worst
    assert max(r["tpu"] / r["predicted"] for r in mt) < 1.0     # MaxText alone is over-estimated now
    assert all(r["tpu"] <= r["budget"] for r in mt if "budget" in r)
    for r in regime:
        dev = TpuMemoryDevice("tpu-v5e", r["heap_bound"], r["fits_vmem"] or bool(r["written_fits"]))
        assert r["heap_slots"] <= r["heap_bound"], r
        assert r["tpu"] <= budget_for_model_limit(r["predicted"], dev), r
        assert r["tpu"] >= r["predicted"] / XLA_TPU_OVERESTIMATE, r
    sets = json.loads(ROUND21.read_text())["bounds"]
    assert all(d.temporaries_fit_vmem for n, d in devs.items() if n in sets and sets[n]["set"] in ("samples", "held out"))


def test_round23_held_out_set_4_broke_a_multiplicative_data_margin_and_is_within_the_additive_one():
    # held-out set 4: three modules beyond the VMEM unsharded, written after a multiplicative data margin
    # U = 1.05 had been set from the plans measured before (MaxText, round 22's sets 3b / 3c): a 3-layer MLP
    # train step's GSPMD plan took 1.47x its prediction, and under U = 1.05 a budget was broken (60% of
    # libtpu's GSPMD peak: 223,557,120 B taken under 222,311,424).  libtpu kept nothing of its large
    # temporaries in VMEM where the model had credited the whole VMEM: with that credit taken back
    # (cost.memory.model_limit beyond the VMEM) every plan is within the envelope and that plan is refused
    data = json.loads(ROUND23.read_text())
    rows = data["held_out_4"]
    assert len(rows) == 6 and all(not r["fits_vmem"] for r in rows)
    assert max(r["tpu"] / r["predicted"] for r in rows) > 1.4
    for r in rows:
        dev = TpuMemoryDevice("tpu-v5e", r["heap_bound"], r["fits_vmem"] or bool(r["written_fits"]))
        assert r["heap_slots"] <= r["heap_bound"], r
        assert r["tpu"] <= budget_for_model_limit(r["predicted"], dev), r
        assert xla_lower_bound(r["predicted"], dev) <= r["tpu"], r
    broke = [b for b in data["held_out_4_budgets_u105"] if b["accepted"] and b["tpu"] > b["budget"]]
    assert len(broke) == 1
    for b in broke:
        dev = TpuMemoryDevice("tpu-v5e", data["bounds"][b["module"]]["heap_slots"], False)
        assert b["predicted"] <= (b["budget"] - 53 * SLOT_REPORTED_BYTES - GRANULE_BYTES) / 1.05  # what U = 1.05 let in
        assert b["predicted"] > model_limit(b["budget"], dev)                                    # refused now
    # the same 18 budgets under the additive margin: 5 accepted (10 under U = 1.05), every one kept
    after = data["held_out_4_budgets"]
    assert len(after) == 18 and sum(b["accepted"] for b in after) == 5
    for b in after:
        if b["accepted"]:
            assert b["tpu"] is not None and b["tpu"] <= b["budget"], b


def test_round23_held_out_set_5_keeps_the_additive_data_margin_and_every_budget():
    # held-out set 5 (written after the additive form was set: a SwiGLU train step, an attention + MLP block
    # train step on 1024 tokens, a 32768-word log-softmax train step; all beyond the VMEM unsharded): every
    # plan within the envelope -- the log-softmax's GSPMD plan at 0.999 of it, libtpu keeping none of its
    # 128 MiB logits tile in VMEM --, every stated lower bound below libtpu's peak, every budget accepted kept
    data = json.loads(ROUND23.read_text())
    rows, budgets = data["held_out_5"], data["held_out_5_budgets"]
    assert len(rows) == 6 and len(budgets) == 18 and all(not r["fits_vmem"] for r in rows)
    for r in rows:
        dev = TpuMemoryDevice("tpu-v5e", r["heap_bound"], r["fits_vmem"] or bool(r["written_fits"]))
        assert r["tpu"] <= budget_for_model_limit(r["predicted"], dev), r
        assert xla_lower_bound(r["predicted"], dev) <= r["tpu"], r
    env = max(r["tpu"] / budget_for_model_limit(r["predicted"], TpuMemoryDevice("tpu-v5e", r["heap_bound"], False))
              for r in rows)
    assert 0.99 < env <= 1.0
    # beyond the VMEM the heap is no longer within the instruction count (4 of 6 plans above it): the
    # VMEM term carried them here; within the VMEM (every other test's plans) the count held
    assert sum(r["heap_slots"] > r["heap_bound"] for r in rows) == 4
    accepted = [b for b in budgets if b["accepted"]]
    assert len(accepted) >= 6
    for b in accepted:
        assert b["tpu"] is not None and b["tpu"] <= b["budget"], b


ROUND24 = pathlib.Path(__file__).parent / "data" / "tpu_heap_round24.json"


def test_round24_held_out_set_6_and_tied_plans_keep_every_margin_and_budget():
    # held-out set 6 (written before anything of round 24 was measured: Adam, cross-attention, a 2-layer conv
    # train step, embedding + MLP, a residual MLP forward, a wide GELU MLP beyond the VMEM), its solve plans
    # untied as benchmarks/tpu_truth.py defines them and with --tie matching, and the samples' tied plans:
    # every plan within its heap bound and the budget envelope, libtpu's peak the model's data plus 0 or the
    # reported heap, every budget accepted kept
    data = json.loads(ROUND24.read_text())
    for key in ("held_out_6", "held_out_6_tied", "samples_tied"):
        rows, budgets = data[key], data[key + "_budgets"]
        assert len(rows) == (18 if key == "samples_tied" else 12) and len(budgets) == 3 * len(rows)
        for r in rows:
            dev = TpuMemoryDevice("tpu-v5e", r["heap_bound"], r["fits_vmem"] or bool(r["written_fits"]))
            assert r["heap_slots"] <= r["heap_bound"], r
            assert r["tpu"] <= budget_for_model_limit(r["predicted"], dev), r
            assert xla_lower_bound(r["predicted"], dev) <= r["tpu"], r
            # the model's data is exact on every plan: libtpu adds 0 or its reported heap
            assert abs(r["predicted"] + r["tpu_temp"] - r["tpu"]) <= GRANULE_BYTES, r
            assert r["tpu_temp"] in (0, r["heap_slots"] * SLOT_REPORTED_BYTES), r
        accepted = [b for b in budgets if b["accepted"]]
        assert len(accepted) >= 12
        for b in accepted:
            assert b["tpu"] is not None and b["tpu"] <= b["budget"], b
    # the samples' bounds recorded are the module's (cost.tpu_heap.heap_slot_bound of round 24; round 25 adds
    # the cutting slices' halo slots: at least the recorded bound)
    devs = _devices()
    for r in data["samples_tied"]:
        assert devs[r["module"]].heap_slots >= r["heap_bound"] >= r["heap_slots"], r
    # set 6's two training steps whose untied solve plan spills (one and two offset scalars, libtpu reporting
    # its heap: predicted 0.914 and 0.847 of libtpu's peak) spill none tied -- the updated parameter written
    # in the layout it is read in, nothing is sliced at the update -- and are predicted to a granule
    def ratio(rows, module):
        r, = [r for r in rows if r["module"] == module and r["plan"] == "solve"]
        return r["predicted"] / r["tpu"], r["scalars_in_heap"]
    for module in ("embed_mlp_train_step", "ln_mlp_adam_step"):
        untied, tied = ratio(data["held_out_6"], module), ratio(data["held_out_6_tied"], module)
        assert untied[1] >= 1 and untied[0] < 0.95, (module, untied)
        assert tied[1] == 0 and abs(tied[0] - 1) < 1e-3, (module, tied)
    # the samples' training steps tied: within 15% (fused_qkv_train_step 0.562 untied -> 1.000, scan_mlp
    # 0.784 -> 0.870: its heap still holds one 512 B value besides the headers, and libtpu reports it)
    for module in ("fused_qkv_train_step", "mlp_train_step", "scan_mlp_train_step", "transformer_train_step"):
        q, _ = ratio(data["samples_tied"], module)
        assert abs(q - 1) <= 0.15, (module, q)


def test_tpu_margin_is_additive_by_hand():
    small = TpuMemoryDevice("tpu-v5e", 10, True)        # 10 heap slots, data exact
    large = TpuMemoryDevice("tpu-v5e", 10, False)       # temporaries may reach HBM: the data margin too
    heap = 10 * SLOT_REPORTED_BYTES + GRANULE_BYTES
    assert model_limit(10 ** 6, small) == 10 ** 6 - heap
    vmem = vmem_bytes("tpu-v5e")                        # beyond VMEM: the model's VMEM credit taken back
    assert model_limit(10 ** 9, large) == int((10 ** 9 - heap - vmem) / XLA_TPU_UNDERESTIMATE)
    assert model_limit(heap + vmem - 1, large) == 0
    assert model_limit(heap - 1, small) == 0            # a budget below the heap allowance accepts nothing
    # a plain profile name (no module known): the largest heap measured on a sample plan
    assert model_limit(10 ** 9, "tpu-v5e") == int((10 ** 9 - XLA_TPU_HEADER_SLOTS * SLOT_REPORTED_BYTES -
                                                   GRANULE_BYTES - vmem) / XLA_TPU_UNDERESTIMATE)
    data = json.loads(ROUND21.read_text())
    assert XLA_TPU_HEADER_SLOTS >= max([r["heap_slots"] for r in data["rows"]] + [data["maxtext_gspmd"]["heap_slots"]])
    # budget_for_model_limit inverts model_limit exactly on each device
    for dev in (small, large, "tpu-v5e"):
        for limit in (1, 10 ** 6, 10 ** 8, 10 ** 10):
            b = budget_for_model_limit(limit, dev)
            assert model_limit(b, dev) >= limit > model_limit(b - 1, dev), (dev, limit)
    # the device compares as its name and survives pickling (the solver's forked workers)
    import pickle

    back = pickle.loads(pickle.dumps(small))
    assert back == "tpu-v5e" and (back.heap_slots, back.temporaries_fit_vmem) == (10, True)


HEAP_BY_HAND = """HloModule heap, entry_computation_layout={(f32[8,128]{1,0}, f32[128,128]{1,0})->f32[8,128]{1,0}}

ENTRY main {
  x = f32[8,128] parameter(0)
  w = f32[128,128] parameter(1)
  c = f32[] constant(1)
  b = f32[8,128] broadcast(c), dimensions={}
  d = f32[8,128] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t = f32[128,8] transpose(d), dimensions={1,0}
  r = f32[8,128] transpose(t), dimensions={1,0}
  s = f32[8,128] custom-call(r), custom_call_target="Sharding", sharding={replicated}
  ROOT a = f32[8,128] add(s, b)
}
"""


HEAP_CALLS = """HloModule calls

body {
  p = f32[8,128] parameter(0)
  q = f32[8,128] parameter(1)
  m = f32[8,128] multiply(p, q)
  ROOT e = f32[8,128] exponential(m)
}

cond {
  s = (s32[], f32[8,128]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(4)
  ROOT lt = pred[] compare(i, n), direction=LT
}

loop {
  s = (s32[], f32[8,128]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = f32[8,128] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  w = f32[8,128] call(v, v), to_apply=body
  ROOT t = (s32[], f32[8,128]) tuple(j, w)
}

ENTRY main {
  x = f32[8,128] parameter(0)
  y = f32[8,128] parameter(1)
  a = f32[8,128] call(x, y), to_apply=body
  b = f32[8,128] call(a, y), to_apply=body
  z = s32[] constant(0)
  st = (s32[], f32[8,128]) tuple(z, b)
  wl = (s32[], f32[8,128]) while(st), condition=cond, body=loop
  ROOT r = f32[8,128] get-tuple-element(wl), index=1
}
"""


def test_heap_slot_bound_counts_the_program_after_xlas_call_inliner():
    # what XLA compiles after its CallInliner: each call site becomes the callee's multiply and exponential
    # (its parameters and the call itself are gone); the entry's 2 parameters, the while, and once each the
    # loop body's add and inlined call (2) and the condition's parameter and compare
    module = parse_module(HEAP_CALLS, "calls")
    assert heap_slot_bound(module) == 2 + 2 * 2 + 1 + (1 + 1 + 2) + (1 + 1)
    # counted without changing the module; the inlined module (what solve writes) counts the same
    from hloshard.hlo.inline import inline_calls

    assert any(i.opcode == "call" for i in module.entry.instructions)
    inline_calls(module)
    assert not any(i.opcode == "call" for i in module.entry.instructions)
    assert heap_slot_bound(module) == 2 + 2 * 2 + 1 + (1 + 1 + 2) + (1 + 1)


def test_heap_slot_bound_and_vmem_rule_by_hand():
    module = parse_module(HEAP_BY_HAND, "heap")
    # two parameters, the dot and the add; the constant, broadcast, transposes and the Sharding pin make none
    assert heap_slot_bound(module) == 4
    assert temporaries_fit_vmem(module, "tpu-v5e")
    assert not temporaries_fit_vmem(module, "tpu-v4")       # no measured VMEM: no credit
    big = parse_module(HEAP_BY_HAND.replace("8,128", "65536,1024"), "big")   # 256 MiB arrays: beyond VMEM
    assert heap_slot_bound(big) == 4 and not temporaries_fit_vmem(big, "tpu-v5e")
    # --device tpu-v5e: the mesh's memory device carries the module's bound; no device, none
    mesh, _ = _tpu_mesh(module)
    assert isinstance(mesh.memory_device, TpuMemoryDevice) and mesh.memory_device.heap_slots == 4
    assert mesh.memory_device == "tpu-v5e"


WRITTEN_BY_HAND = """HloModule written, entry_computation_layout={(f32[8192,4096]{1,0})->f32[8192,4096]{1,0}}

ENTRY main {
  p = f32[8192,4096] parameter(0), sharding={devices=[8,1]<=[8]}
  t = f32[8192,4096] tanh(p), sharding={devices=[8,1]<=[8]}
  e = f32[8192,4096] exponential(p), sharding={devices=[8,1]<=[8]}
  ROOT a = f32[8192,4096] add(t, e), sharding={devices=[8,1]<=[8]}
}
"""


def test_written_plans_temporaries_and_the_data_margin_by_hand():
    # 128 MiB arrays: the module unsharded is beyond the VMEM (the data margin U applies before a plan
    # exists); written split 8 ways its temporaries are 16 MiB tiles, 48 MiB at the peak (the parameter,
    # in HBM, not counted): within half the 128 MiB VMEM, so the written plan's check drops U
    module = parse_module(WRITTEN_BY_HAND, "written")
    assert not temporaries_fit_vmem(module, "tpu-v5e")
    assert written_temporaries_fit_vmem(module, "tpu-v5e")
    assert not written_temporaries_fit_vmem(module, "tpu-v4")          # no measured VMEM: no credit
    dev = tpu_memory_device("tpu-v5e", module)
    assert not dev.temporaries_fit_vmem
    mine = written_memory_device(dev, module)
    assert (mine.heap_slots, mine.temporaries_fit_vmem) == (dev.heap_slots, True) and mine == "tpu-v5e"
    assert model_limit(10 ** 9, mine) == 10 ** 9 - dev.heap_slots * SLOT_REPORTED_BYTES - GRANULE_BYTES
    assert model_limit(10 ** 9, mine) > model_limit(10 ** 9, dev)
    # split 2 ways: tanh and exp fuse into the add (the liveness model's fusion rule), whose 64 MiB tile is
    # all that is live -- half the VMEM exactly: fits; replicated, the add's 128 MiB does not
    two = parse_module(WRITTEN_BY_HAND.replace("devices=[8,1]<=[8]", "devices=[2,1,4]<=[8] last_tile_dim_replicate"),
                       "two")
    assert written_temporaries_fit_vmem(two, "tpu-v5e")
    whole = parse_module(WRITTEN_BY_HAND.replace("devices=[8,1]<=[8]", "replicated"), "whole")
    assert not written_temporaries_fit_vmem(whole, "tpu-v5e") and written_memory_device(dev, whole) is dev
    # unannotated: the whole arrays; a plain name or a device whose module fits already: unchanged
    bare = parse_module(WRITTEN_BY_HAND.replace(", sharding={devices=[8,1]<=[8]}", ""), "bare")
    assert not written_temporaries_fit_vmem(bare, "tpu-v5e")
    assert written_memory_device("tpu-v5e", module) == "tpu-v5e" and written_memory_device(None, module) is None
    fits = TpuMemoryDevice("tpu-v5e", 3, True)
    assert written_memory_device(fits, whole) is fits


def test_a_budget_the_written_plan_keeps_without_the_data_margin_is_accepted(monkeypatch):
    # the hand module's unsharded arrays are beyond the VMEM (the VMEM credit taken back before a plan
    # exists): under 35 MB the plan (33,554,432 B predicted: the parameter's and the output's 16 MiB tiles)
    # is above the module's limit, 0; written, its temporaries fit the VMEM, so the check of the written module
    # (solve.reevaluate_written) holds it to the budget less the heap allowance only, and accepts it
    from hloshard.autoshard import solve as solve_mod
    from hloshard.errors import SolveFailed

    def solved(budget):
        module = parse_module(WRITTEN_BY_HAND, "written")
        mesh, budget = _tpu_mesh(module, budget)
        return solve_module(module, mesh, keep="io", memory_budget=budget, time_limit=5, workers=1,
                            deterministic=True, pin_operands=True)

    res = solved(35_000_000)
    assert res.written.evaluation.peak_memory == 2 * 16 * 2 ** 20 > res.graph.model_limit
    # the module's heap allowance: 4 computing instructions + (round 25, beyond the VMEM) their prefetches and
    # evictions (p 0+1, tanh 1+1, exp 1+1, add 2+1), kept for the written plan (conservative)
    assert res.written_model_limit == 35_000_000 - (4 + 8) * SLOT_REPORTED_BYTES - GRANULE_BYTES
    # without the written plan's device (the module's margin only): refused
    monkeypatch.setattr(solve_mod, "written_memory_device", lambda device, module: device)
    with pytest.raises(SolveFailed):
        solved(35_000_000)


ROUND22 = pathlib.Path(__file__).parent / "data" / "tpu_heap_round22.json"
ROUND23 = pathlib.Path(__file__).parent / "data" / "tpu_heap_round23.json"


def test_round22_held_out_set_3_keeps_every_margin_and_budget():
    # held-out set 3 (written before round 22 changed anything; 16 plans of 8 modules not among the
    # samples, two of them beyond the VMEM): libtpu's heap within the module's bound, libtpu's peak
    # within the smallest budget the margin accepts each plan's prediction under -- with the written
    # plan's device (cost.tpu_heap.written_memory_device), the one the budget's check reads -- and every
    # budget accepted (main 10f2007) kept
    data = json.loads(ROUND22.read_text())
    rows, bounds = data["rows"], data["bounds"]
    assert len(rows) == 16 and len(data["budgets"]) == 48
    devs = _devices()   # round 23's bounds (after XLA's CallInliner): never above round 22's
    for r in rows:
        b = bounds[r["module"]]
        assert devs[r["module"]].heap_slots <= b["heap_slots"] and devs[r["module"]].temporaries_fit_vmem == b["fits_vmem"]
        dev = TpuMemoryDevice("tpu-v5e", devs[r["module"]].heap_slots, b["fits_vmem"])
        written = TpuMemoryDevice("tpu-v5e", devs[r["module"]].heap_slots, b["fits_vmem"] or r["written_fits"])
        assert r["heap_slots"] <= dev.heap_slots, r
        assert r["tpu"] <= budget_for_model_limit(r["predicted"], dev), r
        assert r["tpu"] <= budget_for_model_limit(r["predicted"], written), r
        assert r["tpu"] >= r["predicted"] / XLA_TPU_OVERESTIMATE, r
        if b["fits_vmem"] or r["written_fits"]:
            # the data-exact regime: libtpu's peak is the model's data plus its reported heap (0 or every slot)
            assert abs(r["predicted"] + r["tpu_temp"] - r["tpu"]) <= GRANULE_BYTES, r
            assert r["tpu_temp"] in (0, r["heap_slots"] * SLOT_REPORTED_BYTES), r
    # the written rule is not vacuous: it drops the data margin on the scanned MLP's plans (beyond the VMEM
    # unsharded) and keeps it on the plans whose temporaries libtpu put in HBM (temp beyond the heap)
    assert all(r["written_fits"] for r in rows if r["module"] == "scan_mlp6_momentum")
    assert not bounds["scan_mlp6_momentum"]["fits_vmem"]
    assert not any(r["written_fits"] for r in rows if r["module"] == "big_mlp_train_step")
    assert any(r["tpu_temp"] > r["heap_slots"] * SLOT_REPORTED_BYTES for r in rows if r["module"] == "big_mlp_train_step")
    accepted = [b for b in data["budgets"] if b["accepted"]]
    assert len(accepted) >= 10
    for b in accepted:
        assert b["tpu"] is not None and b["tpu"] <= b["budget"], b


PADDED = """HloModule padded, entry_computation_layout={(f32[5,7]{1,0})->f32[5,7]{1,0}}

ENTRY main {
  p = f32[5,7] parameter(0), sharding={replicated}
  ROOT n = f32[5,7] negate(p), sharding={replicated}
}
"""


def _peak(text: str, device: str | None) -> int:
    module = parse_module(text, "t")
    mesh, _scale, _budget = timed_mesh_from_options(module, "2x4", None, None, None, device)
    return int(evaluate_module(module, mesh).evaluation.peak_memory)


def test_cost_with_a_tpu_device_counts_padded_tiles():
    # CPU model: 140 B in, 140 B out (+ the output tuple's pointer, none here); TPU: one (8,128) tile each
    assert _peak(PADDED, None) == 2 * 5 * 7 * 4
    assert _peak(PADDED, "tpu-v5e") == 2 * 8 * 128 * 4
    # a GPU profile keeps the CPU backend's model
    assert _peak(PADDED, "h100-sxm") == 2 * 5 * 7 * 4


CASES = ["conv_layer", "mlp_train_step", "embedding_lookup"]

#: A GSPMD plan whose libtpu temp is a reported heap: four partition-offset scalars find no free output.
HEAP_CASE = "transformer_block"


def _tpu_mesh(module, budget=None):
    mesh, _scale, budget = timed_mesh_from_options(module, "2x4", None, None, None, "tpu-v5e", budget)
    return mesh, budget


def _total(rec) -> int:
    m = rec["memory"]
    return m["argument"] + m["output"] + m["temp"] - m["alias"]


@pytest.mark.oracle
def test_predicted_peak_within_15_percent_of_the_tpu_compiler_and_budgets_are_kept():
    require_jax()
    from tests.tpu_oracle import compile_for_tpu, offset_scalar_spills, tpu_available

    why = tpu_available()
    if why:
        pytest.skip(why)
    texts, predicted, budgets = [], [], []
    for n in CASES:
        text = (SAMPLES / f"{n}.propagated.hlo").read_text()
        module = parse_module(text, n)
        predicted.append(int(evaluate_module(module, _tpu_mesh(module)[0]).evaluation.peak_memory))
        texts.append(text)
    # per sample, the smallest budget whose model limit is GSPMD's predicted peak (GSPMD's plan fits it,
    # so solve --device tpu-v5e accepts it); every plan it writes must fit under libtpu's figure
    for n, p in zip(CASES, predicted):
        module = parse_module((SAMPLES / f"{n}.pre.hlo").read_text(), n)
        # the module's own heap allowance (the mesh's memory device, cost.tpu_heap)
        mesh, budget = _tpu_mesh(module, budget_for_model_limit(p, _tpu_mesh(module)[0].memory_device))
        solve_module(module, mesh, keep="io", memory_budget=budget, time_limit=5, workers=1, deterministic=True,
                     pin_operands=True)
        texts.append(print_module(module))
        budgets.append(budget)
    # a plan whose libtpu peak holds the heap of async headers (an offset scalar found no free output)
    miss = (SAMPLES / f"{HEAP_CASE}.propagated.hlo").read_text()
    module = parse_module(miss, HEAP_CASE)
    miss_ev = evaluate_module(module, _tpu_mesh(module)[0]).evaluation
    miss_predicted = int(miss_ev.peak_memory)
    # a plan accepted only by the written plan's device (cost.tpu_heap.written_memory_device): kept by libtpu too
    hand = parse_module(WRITTEN_BY_HAND, "written")
    hand_mesh, hand_budget = _tpu_mesh(hand, 40_000_000)
    hand_res = solve_module(hand, hand_mesh, keep="io", memory_budget=hand_budget, time_limit=5, workers=1,
                            deterministic=True, pin_operands=True)
    assert hand_res.written_model_limit is not None
    # one child: the three GSPMD plans, the three budgeted, the heap case, the written-device case
    recs = compile_for_tpu(texts + [miss, print_module(hand)])
    hand_rec = recs.pop()
    assert hand_rec["ok"] and _total(hand_rec) <= hand_budget, (hand_rec["error"], hand_rec["memory"])
    miss_rec = recs.pop()
    for n, p, rec in zip(CASES, predicted, recs):
        assert rec["ok"], f"{n}: {rec['error'][:300]}"
        assert abs(p / _total(rec) - 1) <= 0.15, (n, p, _total(rec))
        _assert_heap_rule(n, rec)
    for n, budget, rec in zip(CASES, budgets, recs[len(CASES):]):
        assert rec["ok"], f"{n} under {budget}: {rec['error'][:300]}"
        assert _total(rec) <= budget, (n, _total(rec), budget)
        # libtpu reports either 0 or the heap rule's figure for a heap that holds a spilled scalar: which
        # one is its buffer assignment's decision (round 10: mlp_train_step solved under a budget, a heap
        # of 15 headers and one s32[1] reported as 0; round 15: its solve plan, 15 headers and one
        # s32[1], reported as 0 as well)
        _assert_heap_rule(f"{n} solved under {budget}", rec, either=True)
    # every plan: the partition-offset scalars libtpu put in its heap are the ones the placement rule
    # puts there replayed on libtpu's schedule (tests.tpu_oracle.offset_scalar_spills)
    for name, rec in zip([*CASES, *(f"{n} under a budget" for n in CASES), HEAP_CASE], [*recs, miss_rec]):
        hosts = rec["offset_scalars"]
        assert hosts is not None, f"{name}: no buffer assignment / schedule in libtpu's dump"
        assert sorted(offset_scalar_spills(hosts)) == sorted(v["name"] for v in hosts["heap"]), (name, hosts)
    # the heap case: libtpu reports a heap (temp > 0) because one offset scalar spilled, and its total is
    # the model's peak plus that reported heap to within one 512 B granule (the model's data is exact;
    # what it misses is the heap, which it does not predict: round 20's table)
    assert miss_rec["ok"] and miss_rec["memory"]["temp"] > 0 and miss_rec["offset_scalars"]["heap"], miss_rec["memory"]
    assert abs(miss_predicted + miss_rec["memory"]["temp"] - _total(miss_rec)) <= GRANULE_BYTES, \
        (miss_predicted, miss_rec["memory"])
    _assert_heap_rule(HEAP_CASE, miss_rec)
    # round 25: the spill is predicted (split of a 4-way dim off its tiles: two table offsets live at once
    # in a one-output program) and the heap counted: the reported peak is within 15% of libtpu's
    assert miss_ev.tpu_heap > 0 and abs(miss_ev.reported_peak / _total(miss_rec) - 1) <= 0.15, \
        (miss_ev.reported_peak, miss_rec["memory"])
    # and none is predicted on the plans whose heap libtpu reports as 0
    for n, rec in zip(CASES, recs):
        module = parse_module((SAMPLES / f"{n}.propagated.hlo").read_text(), n)
        assert rec["memory"]["temp"] > 0 or evaluate_module(module, _tpu_mesh(module)[0]).evaluation.tpu_heap == 0, n


def _outputs_written_finer(module) -> list[str]:
    """The entry outputs whose writer reads an entry parameter of the output's shape split coarser than it
    writes the output (XLA's partitioner slices the parameter locally at the writer, with a partition-offset
    scalar live up to that point): ``writer<parameter``."""
    root = module.entry.root
    found = []
    for w in (root.operands if root.opcode == "tuple" else [root]):
        ws = w.sharding
        if ws is None or ws.is_tuple or not ws.is_tiled:
            continue
        for p in w.operands:
            ps = p.sharding
            if p.opcode == "parameter" and p.shape.dims == w.shape.dims and ps is not None and not ps.is_tuple \
                    and (ps.is_replicated or ps.is_tiled) and ps.num_tiles < ws.num_tiles:
                found.append(f"{w.name}<{p.name}")
    return found


@pytest.mark.oracle
def test_a_tied_training_step_spills_no_offset_scalar_and_libtpu_keeps_the_predicted_peak():
    """Round 24 (issue 25, road b measured; BENCHMARKS.md "Round 24, helper tpupeak"): untied,
    ``fused_qkv_train_step``'s solve plan writes 16 of its 17 updated parameters split finer than the
    parameter it reads (``sub.106``: the parameter 4-way, the update 8-way), XLA's partitioner slices the
    parameter at the update, and an offset scalar live up to it finds no free output: libtpu reports its
    whole heap (3,755,520 B for 2,109,952 predicted, 0.562).  Solved with ``--tie matching`` (each updated
    parameter in its parameter's layout, as a loop runs the step and ``auto_shard`` ties it) no output is
    written finer, libtpu's heap holds no offset scalar, its temp is 0 and its peak is the predicted one to a
    granule (2,638,848 B for 2,638,336)."""
    require_jax()
    from hloshard.autoshard.aliases import matching_ties
    from tests.tpu_oracle import compile_for_tpu, tpu_available

    why = tpu_available()
    if why:
        pytest.skip(why)
    name = "fused_qkv_train_step"
    written = {}
    for tie in (False, True):
        module = parse_module((SAMPLES / f"{name}.pre.hlo").read_text(), name)
        if tie:
            module.ties = matching_ties(module)
        mesh, _ = _tpu_mesh(module)
        mesh.with_policy(None, None)   # no budget: the unconstrained plan, as benchmarks/tpu_truth.py measures
        res = solve_module(module, mesh, keep="io", time_limit=10, workers=1, deterministic=True, pin_operands=True)
        written[tie] = (module, int((res.written or res).evaluation.peak_memory))
    assert len(_outputs_written_finer(written[False][0])) >= 1
    module, predicted = written[True]
    assert _outputs_written_finer(module) == []
    rec, = compile_for_tpu([print_module(module)])
    assert rec["ok"], rec["error"][:300]
    assert rec["offset_scalars"] is not None and rec["offset_scalars"]["heap"] == [], rec["offset_scalars"]
    assert rec["memory"]["temp"] == 0, rec["memory"]
    assert abs(_total(rec) - predicted) <= GRANULE_BYTES, (predicted, rec["memory"])


def _assert_heap_rule(name, rec, either: bool = False):
    """libtpu's temp is what cost.tpu_layout.reported_temp_bytes says of its HBM heap (buffer assignment);
    ``either``: 0 or that figure (a heap of headers and spilled scalars, reported either way).  What the
    heap holds beyond async headers is partition-offset scalars (one 512 B granule each) on these small
    plans, whose data temporaries fit in VMEM: the values that decide whether the heap is reported."""
    heap = rec["hbm_heap"]
    assert heap is not None, f"{name}: no buffer assignment in libtpu's dump"
    assert heap["other_bytes"] <= GRANULE_BYTES * heap["other_values"], (name, heap)
    want = reported_temp_bytes(heap["bytes"], heap["small_slots"], heap["other_values"] > 0)
    allowed = {want, 0} if either and heap["other_bytes"] <= 512 * heap["other_values"] else {want}
    assert rec["memory"]["temp"] in allowed, (name, rec["memory"], heap)


def _value(name, start, end, scalar=True, tuple_=False):
    return {"name": name, "scalar": scalar, "tuple": tuple_, "start": start, "end": end, "op_name": None}


def test_offset_scalar_placement_rule_by_hand():
    from tests.tpu_oracle import offset_scalar_spills

    # one entry output written at step 10, the root tuple's pointer table, 12 steps
    out = {"size": 65536, "values": [_value("fusion.1", 10, 11, scalar=False)]}
    root = {"size": 512, "values": [_value("tuple.1{}", 11, 11, scalar=False, tuple_=True)]}
    # a chain (a read only by b) shares the output's allocation; c overlaps both: no host (the root tuple
    # hosts none), so the heap
    hosts = {"steps": 12, "outputs": [out, root],
             "heap": [_value("c", 2, 9)], }
    out["values"] += [_value("a", 1, 3), _value("b", 3, 8)]
    assert offset_scalar_spills(hosts) == ["c"]
    # a scalar read last by the output's own writer cannot live in it
    hosts = {"steps": 12, "outputs": [{"size": 512, "values": [_value("fusion.2", 10, 11, scalar=False),
                                                                _value("d", 1, 10)]}], "heap": []}
    assert offset_scalar_spills(hosts) == ["d"]
    # ... one read before the write can; a second output takes an overlapping scalar
    hosts = {"steps": 12, "outputs": [{"size": 512, "values": [_value("fusion.2", 10, 11, scalar=False),
                                                                _value("d", 1, 9)]},
                                      {"size": 512, "values": [_value("fusion.3", 11, 11, scalar=False)]}],
             "heap": [_value("e", 2, 10)]}
    assert offset_scalar_spills(hosts) == []
    # another temporary already in the output's allocation (a non-scalar guest) blocks an overlapping scalar
    hosts = {"steps": 12, "outputs": [{"size": 512, "values": [_value("fusion.4{0}", 4, 6, scalar=False),
                                                                _value("fusion.2", 10, 11, scalar=False)]}],
             "heap": [_value("f", 5, 7)]}
    assert offset_scalar_spills(hosts) == ["f"]


ROUND20 = pathlib.Path(__file__).parent / "data" / "tpu_memory_round20.json"


def test_round20_measurements_are_the_model_plus_libtpus_heap():
    # every sample and held-out plan measured in round 20: libtpu's peak is the predicted peak plus its
    # reported temp (the heap of async headers, when an offset scalar spilled) to within one 512 B granule
    rows = json.loads(ROUND20.read_text())["rows"]
    assert len(rows) == 36 and {r["set"] for r in rows} == {"samples", "held out"}
    for r in rows:
        assert abs(r["predicted"] + r["tpu_temp"] - r["tpu"]) <= GRANULE_BYTES, r
        # the temp is 0 or the heap rule's figure for the heap's slots (headers and scalars only)
        assert r["tpu_temp"] in (0, r["heap_slots"] * SLOT_REPORTED_BYTES), r


def test_tpu_budget_margin_holds_on_round20_measurements():
    # round 20's strict xfail, now held: the margin is additive (the module's heap allowance), so every plan
    # measured is within the smallest budget accepting its prediction, and every held-out budget that the
    # margin accepts (p within model_limit) is kept by libtpu -- the one round 20 broke (attn_h6m4_d32_s64_fwd
    # at 80% of libtpu's GSPMD peak, 1,040,384 B > 912,179 B) is refused
    data = json.loads(ROUND20.read_text())
    devs = _devices()
    for r in data["rows"]:
        assert r["tpu"] <= budget_for_model_limit(r["predicted"], devs[r["module"]]), r
    accepted = 0
    for b in data["held_out_budgets"]:
        dev = devs[b["module"]]
        if b["predicted"] <= model_limit(b["budget"], dev):
            accepted += 1
            assert b["tpu"] <= b["budget"], b
    assert accepted >= 10
    broke = next(b for b in data["held_out_budgets"] if b["module"] == "attn_h6m4_d32_s64_fwd" and b["share"] == 0.8)
    assert broke["predicted"] > model_limit(broke["budget"], devs[broke["module"]])


# --- round 25: the spilled offset scalar of a one-output plan (cost.tpu_heap.spill_heap_slots) --------

ROUND25 = pathlib.Path(__file__).parent / "data" / "tpu_heap_round25.json"

REGROUP = """HloModule regroup
ENTRY main {
  p = f32[8,64,384]{2,1,0} parameter(0), sharding={devices=[%s]<=[8]}
  r = f32[8,64,6,64]{3,2,1,0} reshape(p), sharding={devices=[%s]<=[8] last_tile_dim_replicate}
  ROOT n = f32[8,64,6,64]{3,2,1,0} negate(r), sharding={devices=[%s]<=[8] last_tile_dim_replicate}
}
"""

SPLIT = """HloModule split
ENTRY main {
  p = f32[8,128,768]{2,1,0} parameter(0), sharding={devices=[2,1,4]<=[8]}
  s = f32[8,128,%d]{2,1,0} slice(p), slice={[0:8], [0:128], [%d:%d]}, sharding={devices=[%s]<=[8]%s}
  ROOT n = f32[8,128,%d]{2,1,0} negate(s), sharding={devices=[%s]<=[8]%s}
}
"""

ROOT_SLICE = """HloModule root_slice
ENTRY main {
  x = f32[8,32,128]{2,1,0} parameter(0), sharding={devices=[2,1,1,4]<=[8] last_tile_dim_replicate}
  y = f32[8,32,128]{2,1,0} parameter(1), sharding={devices=[%s]<=[8]}
  e = f32[8,32,128]{2,1,0} exponential(y), sharding={devices=[%s]<=[8]}
  t = f32[8,32,128]{2,1,0} tanh(e), sharding={devices=[%s]<=[8]}
  l = f32[8,32,128]{2,1,0} log(t), sharding={devices=[%s]<=[8]}
  ROOT a = %s
}
"""


def _root_slice(tiles: str, tuple_root: bool = False):
    add = f"f32[8,32,128]{{2,1,0}} add(x, l), sharding={{devices=[{tiles}]<=[8]}}"
    text = ROOT_SLICE % (tiles, tiles, tiles, tiles, add)
    if tuple_root:
        text = text.replace("ROOT a = ", "a = ").replace("\n}\n", f"\n  ROOT o = (f32[8,32,128]{{2,1,0}}, "
                                                         f"f32[8,32,128]{{2,1,0}}) tuple(a, l)\n}}\n")
    return parse_module(text, "root_slice")


def test_regrouped_offsets_by_hand():
    from hloshard.cost.tpu_heap import regrouped_offsets

    def reshape(tin, tout):
        m = parse_module(REGROUP % (tin, tout, tout), "regroup")
        return regrouped_offsets(next(i for i in m.entry.instructions if i.opcode == "reshape"), 8)

    # attention_6heads' GSPMD reshape: 384 4-way on a 2x4 mesh -> 6 heads 2-way; both tile maps are
    # tables (device d -> d % 4, (d % 4) // 2): two offsets in HBM at once
    assert reshape("2,1,4", "2,1,2,1,2")
    # the same regroup on a 1-D mesh: the operand's tile is the partition id itself (scalar arithmetic)
    assert not reshape("1,1,8", "1,1,4,1,2")
    # heads split as the operand's blocks (one contiguous block per device, same count): local
    assert not reshape("2,1,4", "2,1,4,1,1")

    def split(start, size, tiles, rep):
        m = parse_module(SPLIT % (size, start, start + size, tiles, rep, size, tiles, rep), "split")
        return regrouped_offsets(next(i for i in m.entry.instructions if i.opcode == "slice"), 8)

    # transformer_block's split: 768 4-way (192 per device) cut at 256 and written 4-way: off the tiles
    assert split(256, 256, "2,1,4", "")
    # a cut on the tile boundary, each device's result its own operand tile: no offsets
    assert not split(0, 384, "2,1,2,2", " last_tile_dim_replicate")
    # written replicated along the cut dim: an all-gather, no offsets
    assert not split(256, 256, "2,1,1,4", " last_tile_dim_replicate")


def test_root_reads_table_offset_and_spill_slots_by_hand():
    from hloshard.cost.tpu_heap import (entry_output_arrays, halo_pairs, halo_slots, regroup_tables,
                                        root_reads_table_offset, root_table_offsets, spill_heap_slots, unhosted_output_offsets)

    # moe_layer's solve plan: x 2-way on the batch, the root 4-way on its minor dim as well: the offset along
    # the minor dim is a table read by the root's kernel, which cannot host it: it spills
    m = _root_slice("2,1,4")
    assert root_reads_table_offset(m.entry.root, 8)
    calls = []

    def steps():
        calls.append(1)
        return {"a": ["dynamic-slice"], "l": ["all-gather"]}

    # two parameters, one offset table (32 x (d % 4) along the minor dim), one asynchronous collective
    # (2 slots), the spilled offset
    assert root_table_offsets(m.entry.root, 8) == [tuple(32 * (d % 4) for d in range(8))]
    assert spill_heap_slots(m, 8, steps) == 2 + 1 + 2 * 1 + 1 and calls == [1]
    # the root's kernel takes in its elementwise producers: an operand they slice is read by it as well
    # (held-out set 7's ln_mlp_bias_fwd solve plan: root add(add(x, dot), bias))
    fused = parse_module(ROOT_SLICE.replace("ROOT a = %s", "a = %s\n  ROOT r = f32[8,32,128]{2,1,0} negate(a), "
                                            "sharding={devices=[2,1,4]<=[8]}") % (("2,1,4",) * 4 + (
        "f32[8,32,128]{2,1,0} add(x, l), sharding={devices=[2,1,4]<=[8]}",)), "fused")
    assert root_reads_table_offset(fused.entry.root, 8)
    # cross_attention_fwd's: the root 8-way on the batch, its tile the partition id: partition-id - table
    # is computed in scalar memory before the root runs, the table's s32[1] hosted in the output
    m = _root_slice("8,1,1")
    assert not root_reads_table_offset(m.entry.root, 8)
    assert spill_heap_slots(m, 8, steps) == 0 and calls == [1]   # nothing priced where none is predicted
    # two outputs (round 26): ``a``'s kernel reads the table; the other output, ``l``, is read by ``a``
    # (written before it): no output buffer is written after the offset's last read -- it spills
    m = _root_slice("2,1,4", tuple_root=True)
    assert entry_output_arrays(m) == 2 and unhosted_output_offsets(m, 8) == [(tuple(32 * (d % 4) for d in range(8)),)]
    assert spill_heap_slots(m, 8, steps) == 2 + 1 + 2 * 1 + 1
    # an output whose kernel depends on ``a`` is written after it, whatever the schedule: it hosts the offset
    hosted = parse_module(ROOT_SLICE.replace("ROOT a = %s", "a = %s\n  n = f32[8,32,128]{2,1,0} negate(a), "
                                             "sharding={devices=[2,1,4]<=[8]}\n  ROOT o = (f32[8,32,128]{2,1,0}, "
                                             "f32[8,32,128]{2,1,0}) tuple(a, n)") % (("2,1,4",) * 4 + (
        "f32[8,32,128]{2,1,0} add(x, l), sharding={devices=[2,1,4]<=[8]}",)), "hosted")
    assert unhosted_output_offsets(hosted, 8) == [] and spill_heap_slots(hosted, 8, steps) == 0
    # a regroup: one parameter, its two offset tables (96 x (d % 4) and 192 x ((d % 4) // 2) along the
    # 384 elements), the spilled offset; not capped by the module's heap-slot bound (2 here): held-out
    # set 7's split3_sum_fwd GSPMD plan has 16 slots for a bound of 9
    m = parse_module(REGROUP % ("2,1,4", "2,1,2,1,2", "2,1,2,1,2"), "regroup")
    assert spill_heap_slots(m, 8, lambda: {}) == 1 + 2 + 1 > heap_slot_bound(m)
    # a slice off the tiles: its halo exchange priced (halo_slots) when the plan has no collective there
    m = parse_module(SPLIT % (256, 256, 512, "2,1,4", "", 256, "2,1,4", ""), "split")
    halos = [i for i in m.entry.instructions if i.opcode == "slice" and regroup_tables(i, 8)]
    assert spill_heap_slots(m, 8, lambda: {}) == 1 + 2 + halo_slots(halos, 8) + 1
    # [256:512] of a 4-way 768 (192 per tile), 64 per result tile: result tile 0 ([256,320)) lies in operand
    # tile 1, tile 3 ([448,512)) in tile 2; tiles 1 and 2 are their own: two permutes and the select
    assert halo_pairs(halos, 8) == {("p", 2, 1, 0), ("p", 2, 2, 3)} and halo_slots(halos, 8) == 2 + 1


def test_no_spill_heap_without_a_tpu_device_and_the_model_data_unchanged():
    # off a TPU nothing is added; on a TPU the model's data (what a budget checks) is the same figure
    text = (SAMPLES / "attention_6heads.propagated.hlo").read_text()
    module = parse_module(text, "attention_6heads")
    cpu = evaluate_module(module, DeviceMesh.for_module(module, "2x4")).evaluation
    assert cpu.tpu_heap == 0 and cpu.reported_peak == cpu.peak_memory
    module = parse_module(text, "attention_6heads")
    tpu = evaluate_module(module, _tpu_mesh(module)[0]).evaluation
    assert tpu.tpu_heap == header_heap_bound(5 + 2 + 2 * 3 + 1) and tpu.reported_peak == tpu.peak_memory + tpu.tpu_heap


def test_round25_reported_peak_within_15_percent_on_the_gspmd_samples():
    # libtpu 0.0.42.1 (v5e:2x4, ahead of time) on the 9 samples' GSPMD plans, measured this round
    # (benchmarks/tpu_truth.py --memory): the predicted reported peak within 15% on each, a heap predicted
    # exactly where libtpu reports one (attention_6heads 0.766 -> 1.018, transformer_block 0.679 -> 0.869)
    rows = {r["name"]: r for r in json.loads(ROUND25.read_text())["samples"] if r["plan"] == "GSPMD"}
    assert len(rows) == 9
    for n, r in sorted(rows.items()):
        module = parse_module((SAMPLES / f"{n}.propagated.hlo").read_text(), n)
        ev = evaluate_module(module, _tpu_mesh(module)[0]).evaluation
        assert ev.peak_memory == r["data"], n
        assert abs(ev.reported_peak / r["tpu"] - 1) <= 0.15, (n, ev.reported_peak, r["tpu"])
        assert (ev.tpu_heap > 0) == (r["temp"] > 0), (n, ev.tpu_heap, r["temp"])


ROUND26 = pathlib.Path(__file__).parent / "data" / "tpu_spill_round26.json.gz"


def test_spills_of_written_solve_plans_against_libtpu_round26():
    import gzip

    # solve plans (``benchmarks/tpu_truth.py --memory``, main bfaf47e's plans) and libtpu 0.0.42.1's figures
    # for them (v5e:2x4 ahead of time, measured round 26): multi-output training steps and forwards, offsets
    # of pins and layout-copied slices
    rows = {r["name"]: r for r in json.loads(gzip.open(ROUND26, "rt").read())}
    assert len(rows) == 8
    got = {}
    for n, r in sorted(rows.items()):
        module = parse_module(r["text"], n)
        ev = evaluate_module(module, _tpu_mesh(module)[0]).evaluation
        got[n] = ev
        if n != "fused_qkv_train_step":
            assert abs(ev.reported_peak / r["tpu"] - 1) <= 0.15, (n, ev.reported_peak, r["tpu"])
            # a heap predicted where libtpu reports one (mlp_train_step: in libtpu's schedule one difference
            # of two tables spills, a ``subtract``, reported as 0 -- round 28's rule, tpu_heap.spill_heap_slots)
            assert (ev.tpu_heap > 0) == (r["tpu_temp"] > 0), (n, ev.tpu_heap, r["tpu_temp"])
    # fused_qkv_train_step: the spill of the offset its last weight updates read is predicted (0.562 before);
    # its heap: 49 slots of libtpu's 51 since round 29 counts the multi-output kernels and combined gradient
    # collectives (30 before, 0.819)
    fq, r = got["fused_qkv_train_step"], rows["fused_qkv_train_step"]
    assert 0 < fq.tpu_heap < r["tpu_temp"] and abs(fq.reported_peak / r["tpu"] - 1) <= 0.15
    # the same plans without the layout rule would read the sliced operand in the root's kernel:
    # mlp_two_out_fwd's root f32[128,96] per device is laid out {0,1}, its operand x f32[128,384] {1,0}
    assert minor_pair("f32", (128, 96)) == (0, 1) and minor_pair("f32", (128, 384)) == (1, 0)
    assert minor_pair("f32", (128, 128)) == (1, 0) and minor_pair("f32", (64, 128)) == (1, 0)
    assert minor_pair("f32", (256,)) is None


def test_offsets_compete_for_the_outputs_written_after_them_by_hand():
    from hloshard.cost.tpu_heap import offset_reads, unhosted_output_offsets

    # two outputs, each written finer than x (2-way on the batch): the root's kernels read table offsets
    # along the minor dim; ``a`` and ``b`` read the same one (32 x (d % 4): one value after CSE), ``b``
    # written last: no output after it -- spilled
    text = ROOT_SLICE.replace("ROOT a = %s", "a = %s\n  b = f32[8,32,128]{2,1,0} multiply(x, e), "
                              "sharding={devices=[2,1,4]<=[8]}\n  ROOT o = (f32[8,32,128]{2,1,0}, "
                              "f32[8,32,128]{2,1,0}) tuple(a, b)")
    m = parse_module(text % (("2,1,4",) * 4 + ("f32[8,32,128]{2,1,0} add(x, l), sharding={devices=[2,1,4]<=[8]}",)),
                     "two")
    table = tuple(32 * (d % 4) for d in range(8))
    assert offset_reads(m, 8) == {(table,): 6}   # b, the 7th instruction: its kernel reads it
    assert unhosted_output_offsets(m, 8) == [(table,)]
    # with a third output written after both, hosted
    m3 = parse_module(text.replace("tuple(a, b)", "tuple(a, b, n)").replace(
        "ROOT o = (f32[8,32,128]{2,1,0}, f32[8,32,128]{2,1,0})",
        "n = f32[8,32,128]{2,1,0} negate(y), sharding={devices=[2,1,4]<=[8]}\n  ROOT o = (f32[8,32,128]{2,1,0}, "
        "f32[8,32,128]{2,1,0}, f32[8,32,128]{2,1,0})") % (("2,1,4",) * 4 + (
            "f32[8,32,128]{2,1,0} add(x, l), sharding={devices=[2,1,4]<=[8]}",)), "three")
    assert unhosted_output_offsets(m3, 8) == []
    # the root 8-way on the batch (its tile the partition id): partition-id arithmetic, no HBM offset
    assert offset_reads(_root_slice("8,1,1"), 8) == {}


def test_outputs_are_written_in_the_schedule_depths_order_by_hand():
    from hloshard.cost.tpu_heap import COLLECTIVE_LATENCY, schedule_depths, unhosted_output_offsets

    # three outputs: a = add(x, l) and b = multiply(x, e) read one table offset (x 2-way on the batch, the
    # outputs finer), n = negate(y) reads none.  Written order: n last, after both readers -- hosted.
    # libtpu's scheduler runs the deepest last (a at depth 4: y -> e -> t -> l -> a; n at depth 1): n is
    # written first, no output follows a -- spilled; a collective on n (its latency) makes n the last again
    text = ROOT_SLICE.replace("ROOT a = %s", "a = %s\n  b = f32[8,32,128]{2,1,0} multiply(x, e), "
                              "sharding={devices=[2,1,4]<=[8]}\n  n = f32[8,32,128]{2,1,0} negate(y), "
                              "sharding={devices=[2,1,4]<=[8]}\n  ROOT o = (f32[8,32,128]{2,1,0}, "
                              "f32[8,32,128]{2,1,0}, f32[8,32,128]{2,1,0}) tuple(a, b, n)")
    m = parse_module(text % (("2,1,4",) * 4 + ("f32[8,32,128]{2,1,0} add(x, l), sharding={devices=[2,1,4]<=[8]}",)),
                     "three")
    table = tuple(32 * (d % 4) for d in range(8))
    by_name = {i.name: i for i in m.entry.instructions}
    depth = schedule_depths(m, {})
    assert [depth[id(by_name[k])] for k in ("x", "y", "e", "t", "l", "a", "b", "n")] == [0, 0, 1, 2, 3, 4, 2, 1]
    assert schedule_depths(m, {"n": 1})[id(by_name["n"])] == 1 + COLLECTIVE_LATENCY
    assert unhosted_output_offsets(m, 8) == []
    assert unhosted_output_offsets(m, 8, {}) == [(table,)]
    assert unhosted_output_offsets(m, 8, {"n": 1}) == []


ROUND28 = pathlib.Path(__file__).parent / "data" / "tpu_schedule_round28.json.gz"


def test_offsets_hosted_in_libtpus_schedule_against_libtpu_round28():
    import gzip

    from hloshard.cost.tpu_heap import spill_heap_slots

    # written solve plans and libtpu 0.0.42.1's figures for them (v5e:2x4 ahead of time, round 28):
    # transformer_train_step (sample; libtpu writes its bias and layer-norm updates after the weight updates
    # and hosts all five offsets: predicted 1.483 in the written order), set 10's split4_train_step (one
    # difference of two tables left without a host: a ``subtract``, reported as 0; 1.490 before) and
    # glu_two_out_fwd (the offset read by the deeper output spills; 0.656 before)
    rows = {r["name"]: r for r in json.loads(gzip.open(ROUND28, "rt").read())}
    assert sorted(rows) == ["glu_two_out_fwd", "split4_train_step", "transformer_train_step"]
    for n, r in sorted(rows.items()):
        module = parse_module(r["text"], n)
        ev = evaluate_module(module, _tpu_mesh(module)[0]).evaluation
        assert abs(ev.reported_peak / r["tpu"] - 1) <= 0.15, (n, ev.reported_peak, r["tpu"])
        assert (ev.tpu_heap > 0) == (r["tpu_temp"] > 0), (n, ev.tpu_heap, r["tpu_temp"])
        # the written order (the rule before round 28) says the opposite on each
        old = spill_heap_slots(module, 8, lambda: {})
        assert (old > 0) != (r["tpu_temp"] > 0), (n, old)
    t = rows["transformer_train_step"]
    assert t["libtpu_heap_scalars"] == [] and t["tpu_temp"] == 0


@pytest.mark.oracle
def test_transformer_train_step_solve_offsets_hosted_by_libtpu():
    require_jax()
    import gzip

    from tests.tpu_oracle import compile_for_tpu, tpu_available

    why = tpu_available()
    if why:
        pytest.skip(why)
    r = {x["name"]: x for x in json.loads(gzip.open(ROUND28, "rt").read())}["transformer_train_step"]
    (rec,) = compile_for_tpu([r["text"]])
    assert rec["ok"], rec["error"]
    # libtpu's schedule: every offset scalar in an output written after its last read, none in the heap,
    # the weight updates before the bias / layer-norm updates that host them
    hosts = rec["offset_scalars"]
    assert hosts["heap"] == [] and rec["memory"]["temp"] == 0
    hosted = [v for o in hosts["outputs"] for v in o["values"] if v["scalar"]]
    assert len(hosted) == 5
    written = {}   # output allocation -> the step its output value (the last one it holds) is written
    for k, o in enumerate(hosts["outputs"]):
        own = [v["start"] for v in o["values"] if not v["scalar"] and v["start"] is not None]
        written[k] = max(own) if own else None
        for v in o["values"]:
            if v["scalar"]:   # each hosted offset dead before its host's output is written
                assert v["end"] < written[k], (v, written[k])
    # the hosts are bias / layer-norm updates (f32[32] per device, 512 B allocations) written after every
    # weight update (the larger outputs)
    hosts_at = [written[k] for k, o in enumerate(hosts["outputs"]) if any(v["scalar"] for v in o["values"])]
    weights_at = [written[k] for k, o in enumerate(hosts["outputs"]) if o["size"] > 512 and written[k] is not None]
    assert weights_at and min(hosts_at) > max(weights_at), (hosts_at, weights_at)
    module = parse_module(r["text"], "transformer_train_step")
    ev = evaluate_module(module, _tpu_mesh(module)[0]).evaluation
    assert ev.tpu_heap == 0 and abs(ev.reported_peak / _total(rec) - 1) <= 0.01


def test_a_spilled_heap_beyond_the_bound_counts_against_a_budget_by_hand():
    from hloshard.cost.memory import spilled_heap_excess

    dev = TpuMemoryDevice("tpu-v5e", 9, True)
    # within the module's bound the margin already covers it; beyond it, the slots past the bound
    assert spilled_heap_excess(header_heap_bound(9), dev) == 0
    assert spilled_heap_excess(header_heap_bound(14), dev) == header_heap_bound(14) - header_heap_bound(9) - GRANULE_BYTES
    assert spilled_heap_excess(header_heap_bound(14), None) == 0 and spilled_heap_excess(0, dev) == 0
    # the VMEM term of a module whose buffers do not fit it is not counted as heap allowance
    big = TpuMemoryDevice("tpu-v5e", 9, False)
    assert spilled_heap_excess(header_heap_bound(14), big) == spilled_heap_excess(header_heap_bound(14), dev)
