"""The program's first kernel and memory-space assignment's prefetches of entry parameters (TPU rule):
only the first kernel (and the elementwise kernels multi-output fusion computes with it) reads its
parameters from HBM; a later kernel that reads parameters only reads the prefetched ones from VMEM; a copy
that the kernels before its reader cannot hide (``MIN_OVERLAP_TO_ASYNC_COPY_RATIO``) is not made.
Read off the TPU compiler's optimised programs (BENCHMARKS.md round 24, helper seconds)."""

from hloshard.cost.roofline import (MIN_OVERLAP_TO_ASYNC_COPY_RATIO, PREFETCH_COPY_FACTOR, prefetched, roofline,
                                    vmem_resident)
from hloshard.cost.tpu_fusion import TPU_FUSION
from hloshard.hlo import parse_module

BW = 1.0e9

# attention_6heads' projections: three dots that read parameters only, the first (q) runs first
QKV = """HloModule qkv

ENTRY main {
  x = f32[256,256] parameter(0)
  wq = f32[256,256] parameter(1)
  wk = f32[256,256] parameter(2)
  wv = f32[256,256] parameter(3)
  q = f32[256,256] dot(x, wq), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  k = f32[256,256] dot(x, wk), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  v = f32[256,256] dot(x, wv), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  s = f32[256,256] dot(q, k), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  ROOT o = f32[256,256] dot(s, v), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""

# round 21's AdamW update: the new moments are outputs the weight's kernel reads (one multi-output kernel)
ADAMW = """HloModule adamw

ENTRY main {
  p = f32[512,512] parameter(0)
  m = f32[512,512] parameter(1)
  v = f32[512,512] parameter(2)
  g = f32[512,512] parameter(3)
  m2 = f32[512,512] add(m, g)
  gg = f32[512,512] multiply(g, g)
  v2 = f32[512,512] add(v, gg)
  r = f32[512,512] sqrt(v2)
  d = f32[512,512] divide(m2, r)
  p2 = f32[512,512] subtract(p, d)
  ROOT t = (f32[512,512], f32[512,512], f32[512,512]) tuple(p2, m2, v2)
}
"""

# a small first kernel, then a large parameter read by a kernel that reads parameters only
LATE = """HloModule late

ENTRY main {
  a = f32[8,128] parameter(0)
  big = f32[2048,2048] parameter(1)
  w = f32[2048,2048] parameter(2)
  e = f32[8,128] exponential(a)
  d = f32[2048,2048] dot(big, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = (f32[8,128], f32[2048,2048]) tuple(e, d)
}
"""


def _size(i):
    return float(i.shape.byte_size) if i.shape.is_array else 0.0


def _roof(text, flops=None):
    m = parse_module(text)
    instrs = list(m.entry.instructions)
    roof = roofline(instrs, flops_of=lambda i: (flops or {}).get(i.name, 0.0), size_of=_size,
                    executions_of=lambda i: 1, peak_of=lambda i: 1.0e12, hbm_bandwidth=BW, fusion=TPU_FUSION)
    return {i.name: i for i in instrs}, {r.name: r for r in roof.rows}, roof


def test_the_first_kernels_weight_is_read_from_hbm_and_the_later_projections_weights_are_prefetched():
    f = 2.0 * 256 ** 3
    ins, rows, _ = _roof(QKV, {"q": 1e3 * f, "k": f, "v": f, "s": f, "o": f})
    # x is read by the first kernel too: round 22's rule (prefetched when a kernel reads it beside an
    # intermediate; here none does)
    assert [prefetched(ins[n], TPU_FUSION) for n in ("x", "wq", "wk", "wv")] == [False, False, True, True]
    w = _size(ins["wq"])
    assert rows["wq"].hbm_bytes == 0.0                               # no copy
    assert rows["wk"].hbm_bytes == PREFETCH_COPY_FACTOR * w          # counted as HloCostAnalysis does
    # q runs first: wq from HBM; k and v read their weights from VMEM (the dots' flops hide the copies)
    assert rows["q"].vmem_bytes == 0.0
    assert rows["k"].vmem_bytes == rows["v"].vmem_bytes == w


def test_a_multi_output_update_prefetches_none_of_its_arrays():
    ins, rows, roof = _roof(ADAMW)
    assert not any(prefetched(ins[n], TPU_FUSION) for n in ("p", "m", "v", "g"))
    assert roof.vmem_bytes == 0.0


def test_a_copy_no_earlier_kernel_hides_is_not_made():
    ins, rows, roof = _roof(LATE)
    big, w = ins["big"], ins["w"]
    # structurally both may be prefetched: the dot is not the first kernel (the exponential is)
    assert prefetched(big, TPU_FUSION) and prefetched(w, TPU_FUSION)
    # but the exponential takes far less than either copy: neither is made, the dot reads HBM
    assert MIN_OVERLAP_TO_ASYNC_COPY_RATIO == 1.0
    assert rows["big"].hbm_bytes == rows["w"].hbm_bytes == 0.0 and rows["d"].vmem_bytes == 0.0
    # with the dot's flops seconds of earlier work in front of it the copies are hidden
    instrs = list(parse_module(LATE).entry.instructions)
    by = {i.name: i for i in instrs}
    slow = {"e": 2 * _size(big) / BW}
    res = vmem_resident(instrs, _size, TPU_FUSION, None, lambda i: slow.get(i.name, 0.0), BW)
    assert res == frozenset({id(by["big"]), id(by["w"])})
    fast = vmem_resident(instrs, _size, TPU_FUSION, None, lambda i: 0.0, BW)
    assert fast == frozenset()
