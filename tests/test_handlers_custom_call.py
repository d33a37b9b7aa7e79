"""custom-call handlers against XLA's SPMD partitioner (GSPMD, raw after-spmd-partitioning HLO, 8 devices):
XLA's ``TopK`` custom-call (two-stage top-k over a split sort dim), the ``topk`` opcode (which XLA
replicates), and a custom-call XLA cannot partition (TransformerEngine's fused attention target, as in
the Llama 3.1 module of the corpus): its operands are all-gathered.  The CPU backend cannot compile the
TE target, so the partitioner's dump is read regardless (``partition_only``).
"""

from __future__ import annotations

import functools

import pytest

from tests.handler_harness import case_module, case_results

pytestmark = pytest.mark.oracle

T = "{devices=[2,4]<=[8]}"
R = "{replicated}"
D0 = "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"              # dim 0 over data

TD = "{" + D0 + ", " + D0 + "}"
TOPK = "(f32[16,4], s32[16,4])"
PRELUDE = ""
CASES = [
    # the sort dim split over model: local top-4 of each f32[8,256] shard, all-gather of the [8,4] values
    # and indices over model (result [8,16], 512 bytes: ring 3/4*512 = 384 each), final top-4
    ("topk_cc", [("f32[16,1024]", T)], 'custom-call({0}), custom_call_target="TopK"', TD, TOPK),
    # sort dim unsplit: XLA does not partition TopK, it gathers the rows (1/2*65536)
    ("topk_cc_rows", [("f32[16,1024]", D0)], 'custom-call({0}), custom_call_target="TopK"', TD, TOPK),
    # the topk opcode: XLA gathers the whole operand (rows too: 1/2*65536, then 3/4*32768)
    ("topk_op", [("f32[16,1024]", T)], "topk({0}), k=4, largest=true", TD, TOPK),
    # fused attention: both operands all-gathered over data and model
    ("te_attn", [("f32[16,1024]", T), ("f32[16,1024]", T)],
     'custom-call({0}, {1}), custom_call_target="te_fused_attn_forward_ffi"', T, "f32[16,1024]"),
]


_results = functools.lru_cache(maxsize=1)(functools.partial(case_results, CASES, PRELUDE))


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_collectives_match_xla(name):
    xla, pred, _ = _results()[name]
    assert pred == xla


def test_topk_expected_figures():
    res = _results()
    assert res["topk_cc"][0] == [("all-gather", 4, 384)] * 2
    assert res["topk_cc_rows"][0] == [("all-gather", 2, 32768)]   # sort dim unsplit: XLA replicates
    assert res["te_attn"][0] == [("all-gather", 2, 32768)] * 2 + [("all-gather", 4, 24576)] * 2


def test_unpartitioned_custom_calls_are_named():
    from hloshard.autoshard import build_graph
    from hloshard.hlo.parser import parse_module
    from hloshard.mesh import DeviceMesh
    from hloshard.strategy.custom_call import unpartitioned_custom_call

    module = parse_module(case_module(CASES))
    names = {i.name: unpartitioned_custom_call(i) for i in module.entry.instructions}
    assert names["te_attn"] == "te_fused_attn_forward_ffi" and names["topk_cc"] is None
    g = build_graph(module, DeviceMesh.parse("2x4"), keep="none")
    assert all("te_fused_attn_forward_ffi" in st.name for st in g.ctx.groups[module.entry.get("te_attn")].strategies)
