"""Round 22 (issue 27): entry parameters held in the TPU's on-chip memory (VMEM) after their prefetch.

On one v5e chip (BENCHMARKS.md "Round 22, helper seconds", a profiler trace per kernel) the f32 [4096, 4096]
layer-norm backward prefetches ``x`` once and its later kernels read it from VMEM at ~5.5 TB/s, while the first
kernel (a reduction of ``x`` alone) reads it from HBM; ``dy`` is not prefetched beside it.  The figures below are
derived by hand from the module text: which kernels run (the TPU rule's fusion), what each reads and writes.
"""

from __future__ import annotations

import dataclasses

from hloshard.cost.roofline import (PREFETCH_COPY_FACTOR, PREFETCH_MAX_BYTES, instruction_seconds, prefetched,
                                    roofline, vmem_resident)
from hloshard.cost.tpu_fusion import CPU_FUSION, TPU_FUSION
from hloshard.hlo import parse_module

X = 4096 * 4096 * 4        # f32[4096,4096]: 64 MiB
V = 4096 * 4               # f32[4096]
BW = 1e12                  # bytes/s

# a layer-norm backward's shape: a row sum of x alone (can run first), a row sum reading x, dy and the first sum,
# and the result reading x, dy and both sums
LNB = """HloModule lnb

add_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  x = f32[4096,4096] parameter(0)
  dy = f32[4096,4096] parameter(1)
  zero = f32[] constant(0)
  sa = f32[4096] reduce(x, zero), dimensions={1}, to_apply=add_f
  ba = f32[4096,4096] broadcast(sa), dimensions={0}
  t = f32[4096,4096] subtract(x, ba)
  u = f32[4096,4096] multiply(t, dy)
  sb = f32[4096] reduce(u, zero), dimensions={1}, to_apply=add_f
  bb = f32[4096,4096] broadcast(sb), dimensions={0}
  v = f32[4096,4096] multiply(t, bb)
  ROOT out = f32[4096,4096] add(v, dy)
}
"""

# an optimizer-style update: every kernel reads parameters only (AdamW's moments and weight)
UPDATE = """HloModule upd

ENTRY main {
  p = f32[1024,1024] parameter(0)
  m = f32[1024,1024] parameter(1)
  g = f32[1024,1024] parameter(2)
  m2 = f32[1024,1024] add(m, g)
  q = f32[1024,1024] multiply(m, p)
  ROOT r = (f32[1024,1024], f32[1024,1024]) tuple(m2, q)
}
"""


def _rows(text, rule):
    m = parse_module(text)
    instrs = m.entry.instructions
    roof = roofline(instrs, flops_of=lambda i: 0.0, size_of=lambda i: i.shape.byte_size if i.shape.is_array else 0,
                    executions_of=lambda i: 1, peak_of=lambda i: 1.0, hbm_bandwidth=BW, fusion=rule)
    return m, {r.name: r for r in roof.rows}, roof


def test_the_first_prefetched_parameter_is_read_from_vmem_and_the_second_does_not_fit():
    m, rows, roof = _rows(LNB, TPU_FUSION)
    ins = {i.name: i for i in m.entry.instructions}
    assert prefetched(ins["x"], TPU_FUSION) and prefetched(ins["dy"], TPU_FUSION)
    assert 2 * X > PREFETCH_MAX_BYTES >= X
    resident = vmem_resident(list(m.entry.instructions), lambda i: i.shape.byte_size, TPU_FUSION)
    assert resident == frozenset({id(ins["x"])})          # x's first reader comes first; dy would pass the VMEM
    # x: the copy's bytes as HloCostAnalysis counts them, one HBM read in seconds
    assert rows["x"].hbm_bytes == PREFETCH_COPY_FACTOR * X
    assert rows["x"].vmem_bytes == (PREFETCH_COPY_FACTOR - 1) * X
    assert abs(rows["x"].seconds - X / BW) < 1e-12
    assert rows["dy"].hbm_bytes == 0.0                    # not prefetched
    # the reduction of x alone may run before the copy completes: it reads HBM
    assert rows["sa"].hbm_bytes == X + V and rows["sa"].vmem_bytes == 0.0
    # the later kernels read x from VMEM, dy from HBM
    assert rows["sb"].hbm_bytes == 2 * X + 2 * V and rows["sb"].vmem_bytes == X
    assert rows["out"].hbm_bytes == 3 * X + 2 * V and rows["out"].vmem_bytes == X
    assert abs(rows["sb"].seconds - (X + 2 * V) / BW) < 1e-12
    assert abs(rows["out"].seconds - (2 * X + 2 * V) / BW) < 1e-12
    assert roof.vmem_bytes == 5 * X


def test_no_vmem_under_the_cpu_rule():
    _, rows, roof = _rows(LNB, CPU_FUSION)
    assert roof.vmem_bytes == 0.0 and all(r.vmem_bytes == 0.0 for r in rows.values())
    assert "x" not in rows or rows["x"].hbm_bytes == 0.0


def test_a_parameter_read_only_by_kernels_that_can_run_first_is_not_prefetched():
    m, rows, roof = _rows(UPDATE, TPU_FUSION)
    ins = {i.name: i for i in m.entry.instructions}
    # m is read by two kernels, each reading parameters only: no earlier kernel to hide a copy behind
    assert not any(prefetched(ins[n], TPU_FUSION) for n in ("p", "m", "g"))
    assert roof.vmem_bytes == 0.0 and rows["m"].hbm_bytes == 0.0


def test_a_parameter_takes_no_seconds_without_vmem():
    ins = {i.name: i for i in parse_module(LNB).entry.instructions}
    # the solver's objective passes no vmem: a prefetch copy takes no seconds there (round 20's rule)
    assert instruction_seconds(ins["x"], 0.0, 4.0 * X, 1.0, BW) == (0.0, "none")
    sec, bound = instruction_seconds(ins["x"], 0.0, 4.0 * X, 1.0, BW, 3.0 * X)
    assert bound == "memory" and abs(sec - X / BW) < 1e-12
    sec, _ = instruction_seconds(ins["out"], 0.0, 3.0 * X, 1.0, BW, X)
    assert abs(sec - 2 * X / BW) < 1e-12


# a sharding pin gathering a weight before a dot (what `solve` writes on an operand): under the TPU rule the
# pin is no kernel -- its all-gather is the plan's collective, priced apart -- and the dot reads the gathered weight
PIN = """HloModule pin

ENTRY main {
  x = f32[128,256] parameter(0)
  w = f32[256,1024] parameter(1), sharding={devices=[1,4]<=[4]}
  w_pin = f32[256,1024] custom-call(w), custom_call_target="Sharding", sharding={replicated}
  ROOT y = f32[128,1024] dot(x, w_pin), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


def test_a_sharding_pin_moves_no_bytes_under_the_tpu_rule():
    from hloshard.cost.roofline import hbm_terms

    m = parse_module(PIN)
    ins = {i.name: i for i in m.entry.instructions}
    assert hbm_terms(ins["w_pin"], TPU_FUSION) == ("zero",)
    # without the rule the resharding pin is a kernel reading w and writing the gathered weight: the
    # all-gather's bytes, which the plan's collectives count already
    assert hbm_terms(ins["w_pin"], dataclasses.replace(TPU_FUSION, pins_free=False))[0] == "kernel"
    _, rows, _ = _rows(PIN, TPU_FUSION)
    assert rows["w_pin"].hbm_bytes == 0.0
    assert rows["y"].hbm_bytes == 128 * 256 * 4 + 256 * 1024 * 4 + 128 * 1024 * 4   # x, the pinned w, y
    _, rows, _ = _rows(PIN, CPU_FUSION)     # the CPU rule (the memory model's) is left as it was
    assert rows["w_pin"].hbm_bytes == 256 * 1024 * 4 * 2
