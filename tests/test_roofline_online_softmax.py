"""Round 21 (issue 27): the TPU compiler's ``online-softmax`` -- a softmax whose probabilities are a dot's
lhs, over a key length that is a multiple of 128, is one kernel that reads the scores once
(:func:`hloshard.cost.tpu_fusion.online_softmax_dot`, BENCHMARKS.md "Round 21, helper chip").  Expected
bytes derived by hand from the module text.  No jax needed."""

from __future__ import annotations

from hloshard.cost.roofline import hbm_bytes
from hloshard.cost.tpu_fusion import CPU_FUSION, TPU_FUSION, online_softmax_dot
from hloshard.hlo import parse_module


def attention(keys: int, probs_lhs: bool = True) -> str:
    """``softmax(q k^T) v`` over f32[64, keys] scores; the probabilities the PV dot's lhs or its rhs."""
    pv = ("out = f32[64,32] dot(p, v), lhs_contracting_dims={1}, rhs_contracting_dims={0}" if probs_lhs else
          "out = f32[32,64] dot(vt, p), lhs_contracting_dims={1}, rhs_contracting_dims={1}")
    vshape = f"f32[{keys},32]" if probs_lhs else f"f32[32,{keys}]"
    return f"""HloModule attn

max_f {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}}

add_f {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}}

ENTRY main {{
  q = f32[64,32] parameter(0)
  k = f32[{keys},32] parameter(1)
  {'v' if probs_lhs else 'vt'} = {vshape} parameter(2)
  s = f32[64,{keys}] dot(q, k), lhs_contracting_dims={{1}}, rhs_contracting_dims={{1}}
  ninf = f32[] constant(-inf)
  mx = f32[64] reduce(s, ninf), dimensions={{1}}, to_apply=max_f
  mxb = f32[64,{keys}] broadcast(mx), dimensions={{0}}
  c = f32[64,{keys}] subtract(s, mxb)
  e = f32[64,{keys}] exponential(c)
  zero = f32[] constant(0)
  sm = f32[64] reduce(e, zero), dimensions={{1}}, to_apply=add_f
  smb = f32[64,{keys}] broadcast(sm), dimensions={{0}}
  p = f32[64,{keys}] divide(e, smb)
  ROOT {pv}
}}
"""


def _ins(text):
    return {i.name: i for i in parse_module(text).entry.instructions}


def _size(i) -> float:
    return float(i.shape.byte_size) if i.shape.is_array else 0.0


def test_the_sum_is_computed_in_the_pv_dot_when_the_tpu_rewrites_it():
    ins = _ins(attention(128))
    S, V, Q, K, O = 64 * 128 * 4, 64 * 4, 64 * 32 * 4, 128 * 32 * 4, 64 * 32 * 4
    assert online_softmax_dot(ins["sm"], TPU_FUSION) is ins["out"]
    assert hbm_bytes(ins["sm"], _size, TPU_FUSION) == 0                   # no kernel of its own
    assert hbm_bytes(ins["s"], _size, TPU_FUSION) == Q + K + S            # the scores written once
    assert hbm_bytes(ins["mx"], _size, TPU_FUSION) == V                   # a second output of s's kernel
    # the PV kernel reads the scores once (and v, the max; the sum is its own running value)
    assert hbm_bytes(ins["out"], _size, TPU_FUSION) == S + V + V + K + O
    assert online_softmax_dot(ins["sm"], CPU_FUSION) is None
    assert hbm_bytes(ins["sm"], _size, CPU_FUSION) > 0


def test_forms_the_tpu_keeps_read_the_scores_twice():
    for text, keys in ((attention(64), 64), (attention(192), 192), (attention(128, probs_lhs=False), 128)):
        ins = _ins(text)
        S, V = 64 * keys * 4, 64 * 4
        assert online_softmax_dot(ins["sm"], TPU_FUSION) is None
        assert hbm_bytes(ins["sm"], _size, TPU_FUSION) == S + V + V        # reads s (and the max), writes the sum
