"""fusion handler: a fusion computing a dot gets the dot's strategies, flops and all-reduce.

XLA's SPMD partitioner gives no reference here: it does not partition the body of a fusion that holds
a dot (jaxlib 0.10.2 fails its verifier or aborts, checked below), so the expectations are hand-derived from the
dot handler's rules (which are checked against XLA in tests/test_handlers_dot.py).
"""

from __future__ import annotations

import pytest

from hloshard.autoshard import build_graph
from hloshard.hlo.parser import parse_module
from hloshard.mesh import DeviceMesh
from hloshard.strategy.base import COMPUTE_COST_PER_FLOP
from tests.conftest import require_jax

FUSED = """HloModule m, num_partitions=8

fc {
  a = bf16[64,512] parameter(0)
  b = bf16[512,256] parameter(1)
  c = f32[64,256] parameter(2)
  d = f32[64,256] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT n = f32[64,256] add(d, c)
}

ENTRY e {
  p0 = bf16[64,512] parameter(0)
  p1 = bf16[512,256] parameter(1)
  p2 = f32[64,256] parameter(2)
  ROOT f1 = f32[64,256] fusion(p0, p1, p2), kind=kOutput, calls=fc
}
"""


def _group():
    g = build_graph(parse_module(FUSED), DeviceMesh.parse("2x4", alpha="0,0", beta="1,1"), keep="none")
    return g.ctx.groups[g.module.entry.root]


def test_fused_dot_gets_dot_strategies():
    grp = _group()
    by_out_in = {(st.out, st.inputs[:2]): st for st in grp.strategies}
    # rows on data, columns on model: lhs rows on data, rhs columns on model, the addend like the result
    st = by_out_in[(((0,), (1,)), (((0,), ()), ((), (1,))))]
    assert st.inputs[2] == ((0,), (1,))
    # 2*64*512*256 flops over 8 devices, plus one flop per result element of the f32[32,64] tile
    assert st.compute == pytest.approx((2 * 64 * 512 * 256 / 8 + 32 * 64) * COMPUTE_COST_PER_FLOP)
    assert st.comm == 0 and st.collectives == ()


def test_fused_dot_contracting_split_all_reduces():
    grp = _group()
    st = [s for s in grp.strategies if s.inputs[0] == ((), (1,)) and s.inputs[1] == ((1,), ()) and s.out == ((), ())][0]
    # partial sums of the f32[64,256] result over model (groups of 4): all-reduce of 65536 bytes,
    # ring 2*3/4*65536 = 98304 = comm with alpha 0, beta 1 (+ XLA's 0.01 tie-break)
    assert [(c.kind, c.group_size, c.nbytes) for c in st.collectives] == [("all-reduce", 4, 65536)]
    assert st.comm == pytest.approx(98304.01)
    assert st.collectives[0].replica_groups == ((0, 1, 2, 3), (4, 5, 6, 7))


@pytest.mark.oracle
def test_xla_does_not_partition_a_dot_fusion():
    require_jax()
    from tests import xla_oracle

    text = FUSED.replace("parameter(0)\n  p1", "parameter(0), sharding={devices=[2,1,4]<=[8] last_tile_dim_replicate}\n  p1")
    text = text.replace("calls=fc", "calls=fc, sharding={devices=[2,4]<=[8]}")
    with pytest.raises(xla_oracle.OracleError, match="[Ff]used computation shape|child died"):
        xla_oracle.spmd_partition(text, 8)
