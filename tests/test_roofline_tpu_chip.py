"""Round 20 (issue 27): the roofline's HBM bytes and seconds under the TPU rule, checked against a real
v5e chip (BENCHMARKS.md "Round 20, helper tpufuse").  Each expected figure is derived by hand from the
module text: which kernels the TPU compiler runs and what each reads and writes.

* a reduction that reads an earlier one's result is no sibling of it (a softmax's sum of
  ``exp(x - max(x))`` reads ``x`` again), while independent reductions of one row share the read;
* a producer whose consumers all end in one kernel is no shared join (computed in that kernel);
* a parameter is prefetched only up to :data:`PREFETCH_MAX_BYTES`, and a prefetch takes no seconds.
"""

from __future__ import annotations

from hloshard.cost.roofline import (PREFETCH_COPY_FACTOR, PREFETCH_MAX_BYTES, hbm_bytes, hbm_terms, hbm_total,
                                    instruction_seconds)
from hloshard.cost.tpu_fusion import TPU_FUSION, shared_join
from hloshard.hlo import parse_module

# f32[64,256]: X = 65,536 bytes; a row vector f32[64]: V = 256 bytes
X, V = 64 * 256 * 4, 64 * 4

SOFTMAX = """HloModule softmax

max_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}

add_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  x = f32[64,256] parameter(0)
  ninf = f32[] constant(-inf)
  mx = f32[64] reduce(x, ninf), dimensions={1}, to_apply=max_f
  mxb = f32[64,256] broadcast(mx), dimensions={0}
  c = f32[64,256] subtract(x, mxb)
  e = f32[64,256] exponential(c)
  zero = f32[] constant(0)
  sm = f32[64] reduce(e, zero), dimensions={1}, to_apply=add_f
  smb = f32[64,256] broadcast(sm), dimensions={0}
  ROOT out = f32[64,256] divide(e, smb)
}
"""

# mean and mean of squares of one row: independent siblings, one kernel, x read once
MOMENTS = """HloModule moments

add_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  x = f32[64,256] parameter(0)
  zero = f32[] constant(0)
  sum1 = f32[64] reduce(x, zero), dimensions={1}, to_apply=add_f
  sq = f32[64,256] multiply(x, x)
  sum2 = f32[64] reduce(sq, zero), dimensions={1}, to_apply=add_f
  ROOT t = (f32[64], f32[64]) tuple(sum1, sum2)
}
"""

# a GELU-backward-like chain: t = a * b joins two buffers and is read by two elementwise ops whose
# results meet again in u, the one operand of the dot: every consumer of t ends in the dot's kernel
ONE_SINK = """HloModule one_sink

ENTRY main {
  a = f32[64,256] parameter(0)
  b = f32[64,256] parameter(1)
  w = f32[256,128] parameter(2)
  t = f32[64,256] multiply(a, b)
  p = f32[64,256] negate(t)
  q = f32[64,256] abs(t)
  u = f32[64,256] add(p, q)
  ROOT d = f32[64,128] dot(u, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""

# the same t read by two dots: two kernels, so t is written once and read by each
TWO_SINKS = """HloModule two_sinks

ENTRY main {
  a = f32[64,256] parameter(0)
  b = f32[64,256] parameter(1)
  w = f32[256,128] parameter(2)
  t = f32[64,256] multiply(a, b)
  p = f32[64,256] negate(t)
  q = f32[64,256] abs(t)
  d1 = f32[64,128] dot(p, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  d2 = f32[64,128] dot(q, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT r = (f32[64,128], f32[64,128]) tuple(d1, d2)
}
"""


def _ins(text):
    return {i.name: i for c in parse_module(text).computations for i in c.instructions}


def _size(i) -> float:
    return float(i.shape.byte_size) if i.shape.is_array else 0.0


def test_a_reduction_reading_an_earlier_one_reads_the_row_again():
    ins = _ins(SOFTMAX)
    # kernel 1: max over x (reads X, writes V); kernel 2: sum of exp(x - max) recomputed from x (reads X
    # and the max vector, writes V); kernel 3: exp(x - max) / sum (reads X, both vectors, writes X)
    assert hbm_bytes(ins["mx"], _size, TPU_FUSION) == X + V
    assert hbm_bytes(ins["sm"], _size, TPU_FUSION) == X + V + V
    assert hbm_bytes(ins["out"], _size, TPU_FUSION) == X + V + V + X
    entry = [i for i in ins.values() if i.parent.is_entry and i.opcode != "parameter"]
    assert sum(hbm_bytes(i, _size, TPU_FUSION) for i in entry) == 4 * X + 5 * V


def test_independent_reductions_of_one_row_share_its_read():
    ins = _ins(MOMENTS)
    # one multi-output kernel: x read once (by the first), each writes its vector
    assert hbm_bytes(ins["sum1"], _size, TPU_FUSION) == X + V
    assert hbm_bytes(ins["sum2"], _size, TPU_FUSION) == V


def test_a_producer_whose_consumers_end_in_one_kernel_is_computed_there():
    ins = _ins(ONE_SINK)
    assert not shared_join(ins["t"], TPU_FUSION)
    W, D = 256 * 128 * 4, 64 * 128 * 4
    # the dot's kernel reads a, b (t, p, q, u computed inside) and w, writes d; t has no buffer
    assert hbm_bytes(ins["d"], _size, TPU_FUSION) == X + X + W + D
    assert hbm_bytes(ins["t"], _size, TPU_FUSION) == 0


def test_a_producer_read_by_two_kernels_is_still_written_once():
    ins = _ins(TWO_SINKS)
    assert shared_join(ins["t"], TPU_FUSION)
    W, D = 256 * 128 * 4, 64 * 128 * 4
    assert hbm_bytes(ins["t"], _size, TPU_FUSION) == X + X + X      # reads a, b; writes t
    assert hbm_bytes(ins["d1"], _size, TPU_FUSION) == X + W + D      # reads t, w; writes d1


def test_prefetch_limit_and_its_seconds():
    ins = _ins(SOFTMAX)
    x = ins["x"]
    terms = hbm_terms(x, TPU_FUSION)
    assert terms == ("prefetch", True)            # read by three kernels, the later ones after other kernels
    mib = 2 ** 20
    assert PREFETCH_MAX_BYTES == 112 * mib
    assert hbm_total(x, terms, lambda _: 112 * mib, TPU_FUSION) == PREFETCH_COPY_FACTOR * 112 * mib
    assert hbm_total(x, terms, lambda _: 113 * mib, TPU_FUSION) == 0.0
    # the copy's bytes stay (XLA's bytes accessed counts them), its seconds are 0; a kernel's are not
    assert instruction_seconds(x, 0.0, 4.0e8, 1e12, 8e11) == (0.0, "none")
    assert instruction_seconds(ins["out"], 0.0, 4.0e8, 1e12, 8e11) == (0.0005, "memory")


# attention-like scores: a dot, its row max (a second output of the dot's kernel), then the sum of
# exp(scores - max), which needs the max first and so is a kernel of its own that reads the scores
DOT_REDUCE = """HloModule dot_reduce

max_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}

add_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  q = f32[64,32] parameter(0)
  k = f32[32,256] parameter(1)
  d = f32[64,256] dot(q, k), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ninf = f32[] constant(-inf)
  mx = f32[64] reduce(d, ninf), dimensions={1}, to_apply=max_f
  mxb = f32[64,256] broadcast(mx), dimensions={0}
  c = f32[64,256] subtract(d, mxb)
  e = f32[64,256] exponential(c)
  zero = f32[] constant(0)
  sm = f32[64] reduce(e, zero), dimensions={1}, to_apply=add_f
  ROOT t = (f32[64,256], f32[64], f32[64]) tuple(d, mx, sm)
}
"""


def test_a_reduce_of_a_dot_result_is_computed_in_the_dot_kernel():
    ins = _ins(DOT_REDUCE)
    Q, K = 64 * 32 * 4, 32 * 256 * 4
    assert hbm_bytes(ins["d"], _size, TPU_FUSION) == Q + K + X       # reads q, k; writes the scores
    assert hbm_bytes(ins["mx"], _size, TPU_FUSION) == V              # a second output: writes the max only
    assert hbm_bytes(ins["sm"], _size, TPU_FUSION) == X + V + V      # reads the scores and the max again
