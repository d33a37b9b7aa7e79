"""XLA's "fusible on all paths" (``InstructionFusion::CanFuseOnAllPaths``, openxla ``instruction_fusion.cc``): a
producer that widens reads is kept out of fusion when a consumer is not fusible or when an operand of a consumer
that the producer reaches is marked unfusible -- never because the consumer *itself* is marked.  New user 34's
U-Net: a SiLU derivative factor ``sigmoid * (1 - sigmoid)`` read once by an elementwise multiply that is itself
kept (its result feeds a convolution and a reduce) was kept too, from the forward to the backward (4.46 of the
7.84 MB the solve plan was predicted over XLA's peak, issue 25)."""

from __future__ import annotations

from hloshard.cost.liveness import _globally_unfusible, is_fused
from hloshard.hlo import parse_module

MODULE = """HloModule allpaths, num_partitions=8

region_add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  s = f32[8,64] parameter(0)
  g = f32[8,64] parameter(1)
  w = f32[64,32] parameter(2)
  one = f32[] constant(1)
  ones = f32[8,64] broadcast(one), dimensions={}
  t = f32[8,64] subtract(ones, s)
  d = f32[8,64] multiply(s, t)
  h = f32[8,64] multiply(g, s)
  m = f32[8,64] multiply(d, h)
  zero = f32[] constant(0)
  r = f32[64] reduce(m, zero), dimensions={0}, to_apply=region_add
  y = f32[8,32] dot(m, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT out = (f32[64], f32[8,32]) tuple(r, y)
}
"""


def test_a_producer_read_by_a_kept_consumer_is_still_fused():
    comp = parse_module(MODULE).entry
    d, m = comp.get("d"), comp.get("m")
    marked = _globally_unfusible(comp)
    # m reads two full-size operands and feeds a dot: it is kept (its own buffer)
    assert id(m) in marked and not is_fused(m)
    # d = s * (1 - s) is read once, by m; m's other operand h does not depend on d: XLA fuses d into m (checked,
    # 8 CPU devices: d, t and h are inside m's loop fusion `multiply_multiply_fusion`, read by the reduce and the dot)
    assert id(d) not in marked
    assert is_fused(d)
