"""Round 21 (issue 27): a scatter the TPU compiler turns into an elementwise select fuses like one
(:func:`hloshard.cost.tpu_fusion.one_hot_scatter`, BENCHMARKS.md "Round 21, helper chip").  Each expected
figure is derived by hand from the module text: which kernels the TPU compiler runs (read off its optimised
programs of the same forms, libtpu 0.0.42.1) and what each reads and writes.  No jax needed.

* a cross-entropy gradient's one-hot scatter (``take_along_axis``'s transpose: ``s32[n,1,1]`` indices,
  ``f32[n,1]`` updates into zeros) has no buffer: the kernel that reads it computes it from the labels,
  and a reduction over it reads only the labels;
* the same form into a non-zero operand is one elementwise kernel (read the operand, write the result);
* an elementwise producer a gather reads is written in full on the TPU (fused into the gather on the CPU);
* the forms the TPU keeps as a scatter (updates of a lower rank than the operand, several indices per
  row) and the CPU rule are unchanged: the scatter writes its result and its reader reads it.
"""

from __future__ import annotations

from hloshard.cost.roofline import hbm_bytes
from hloshard.cost.tpu_fusion import CPU_FUSION, TPU_FUSION, gathered_from, is_fused, one_hot_scatter
from hloshard.hlo import parse_module

# f32[64,256]: X = 65,536 bytes; s32[64,1,1] / s32[64,1] labels: L = 256 bytes; f32[64] row vector: V = 256
X, L, V = 64 * 256 * 4, 64 * 4, 64 * 4

HEAD = """HloModule xent_grad

add_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""

# the cross-entropy gradient's shape: g = onehot(labels) * -1/n; out = exp(x) * s + g; r = sum(-g)
ONE_HOT = HEAD + """
ENTRY main {
  x = f32[64,256] parameter(0)
  lab = s32[64,1,1] parameter(1)
  zero = f32[] constant(0)
  zeros = f32[64,256] broadcast(zero), dimensions={}
  c = f32[] constant(-0.015625)
  upd = f32[64,1] broadcast(c), dimensions={}
  g = f32[64,256] scatter(zeros, lab, upd), update_window_dims={}, inserted_window_dims={1}, scatter_dims_to_operand_dims={1}, input_batching_dims={0}, scatter_indices_batching_dims={0}, index_vector_dim=2, to_apply=add_f
  ng = f32[64,256] negate(g)
  r = f32[64] reduce(ng, zero), dimensions={1}, to_apply=add_f
  rb = f32[64,256] broadcast(r), dimensions={0}
  e = f32[64,256] exponential(x)
  m = f32[64,256] multiply(e, rb)
  out = f32[64,256] add(m, g)
  ROOT t = (f32[64,256], f32[64]) tuple(out, r)
}
"""

# the same form into a parameter, updates a parameter: one elementwise kernel
NON_ZERO = HEAD + """
ENTRY main {
  x = f32[64,256] parameter(0)
  lab = s32[64,1,1] parameter(1)
  u = f32[64,1] parameter(2)
  ROOT g = f32[64,256] scatter(x, lab, u), update_window_dims={}, inserted_window_dims={1}, scatter_dims_to_operand_dims={1}, input_batching_dims={0}, scatter_indices_batching_dims={0}, index_vector_dim=2, to_apply=add_f
}
"""

# kept as a scatter by the TPU compiler: s32[64,1] indices with f32[64] updates (a lower rank)
LOW_RANK = HEAD + """
ENTRY main {
  x = f32[64,256] parameter(0)
  lab = s32[64,1] parameter(1)
  u = f32[64] parameter(2)
  zero = f32[] constant(0)
  zeros = f32[64,256] broadcast(zero), dimensions={}
  g = f32[64,256] scatter(zeros, lab, u), update_window_dims={}, inserted_window_dims={1}, scatter_dims_to_operand_dims={1}, input_batching_dims={0}, scatter_indices_batching_dims={0}, index_vector_dim=1, to_apply=add_f
  ROOT out = f32[64,256] add(x, g)
}
"""

# kept as a scatter: four indices per row
FOUR_PER_ROW = HEAD + """
ENTRY main {
  x = f32[64,256] parameter(0)
  lab = s32[64,4,1] parameter(1)
  u = f32[64,4] parameter(2)
  zero = f32[] constant(0)
  zeros = f32[64,256] broadcast(zero), dimensions={}
  g = f32[64,256] scatter(zeros, lab, u), update_window_dims={}, inserted_window_dims={1}, scatter_dims_to_operand_dims={1}, input_batching_dims={0}, scatter_indices_batching_dims={0}, index_vector_dim=2, to_apply=add_f
  ROOT out = f32[64,256] add(x, g)
}
"""


def _ins(text):
    return {i.name: i for i in parse_module(text).entry.instructions}


def _size(i) -> float:
    return float(i.shape.byte_size) if i.shape.is_array else 0.0


def test_a_one_hot_scatter_is_computed_where_it_is_read():
    ins = _ins(ONE_HOT)
    assert one_hot_scatter(ins["g"])
    assert is_fused(ins["g"]) and is_fused(ins["zeros"])
    assert hbm_bytes(ins["g"], _size, TPU_FUSION) == 0
    assert hbm_bytes(ins["r"], _size, TPU_FUSION) == L + V                # the labels in, the sums out
    assert hbm_bytes(ins["out"], _size, TPU_FUSION) == X + V + L + X      # x, r, the labels in; out
    kernels = sum(hbm_bytes(i, _size, TPU_FUSION) for i in ins.values() if i.opcode != "parameter")
    assert kernels == 2 * X + 2 * L + 2 * V         # (parameters: their prefetch copies, not kernels)
    # the CPU rule (the memory model's) keeps the scatter a kernel: it writes g, out reads it
    assert hbm_bytes(ins["g"], _size, CPU_FUSION) > X
    assert hbm_bytes(ins["out"], _size, CPU_FUSION) >= X + X + X


def test_a_one_hot_scatter_into_an_operand_is_one_elementwise_kernel():
    ins = _ins(NON_ZERO)
    assert one_hot_scatter(ins["g"])
    assert not is_fused(ins["g"])                                         # the root: written
    assert hbm_bytes(ins["g"], _size, TPU_FUSION) == X + L + V + X        # x, labels, updates in; g


def test_scatters_the_tpu_keeps_are_kernels():
    for text in (LOW_RANK, FOUR_PER_ROW):
        ins = _ins(text)
        assert not one_hot_scatter(ins["g"])
        assert not is_fused(ins["g"])
        assert hbm_bytes(ins["g"], _size, TPU_FUSION) >= X                  # writes g
        assert hbm_bytes(ins["out"], _size, TPU_FUSION) == X + X + X        # reads x and g; out


# take rows of x - m: the CPU computes the subtract inside the gather's loop fusion, the TPU writes it
GATHERED = """HloModule gathered

ENTRY main {
  x = f32[64,256] parameter(0)
  m = f32[64] parameter(1)
  ids = s32[16,1] parameter(2)
  mb = f32[64,256] broadcast(m), dimensions={0}
  c = f32[64,256] subtract(x, mb)
  ROOT g = f32[16,256] gather(c, ids), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,256}
}
"""


def test_a_gathers_elementwise_operand_is_written_on_the_tpu():
    ins = _ins(GATHERED)
    assert gathered_from(ins["c"]) and not gathered_from(ins["x"])
    assert not is_fused(ins["c"])
    assert hbm_bytes(ins["c"], _size, TPU_FUSION) == X + V + X            # x and m in; c out
    assert hbm_bytes(ins["c"], _size, CPU_FUSION) == 0                    # fused into the gather
