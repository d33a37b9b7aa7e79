"""reduce handler against XLA's SPMD partitioner (GSPMD, raw after-spmd-partitioning HLO, 8 devices).

Every case pins operand and result shardings (and metadata op_name = its name); hloshard's prediction
for the same shardings (the chosen strategy's collectives plus the resharding plans of its edges) must
name XLA's collectives: kind, group size, ring bytes, and the replica groups.  What XLA does (measured
here): the local reduce runs in the operand's own layout; each split reduced dim (minor dim first) is
all-reduced over its devices; the result is then resharded to the written layout (a local slice, or an
all-gather after the all-reduce).  A variadic reduce (argmax) is not all-reduced: each output's partial
results are all-gathered and reduced again.  Layouts the 2x4 mesh's axes cannot express (a dim over
every other device) keep XLA's device groups.
"""

from __future__ import annotations

import pytest

from tests.handler_harness import oracle_cases

pytestmark = pytest.mark.oracle

T = "{devices=[2,4]<=[8]}"
R = "{replicated}"
T3 = "{devices=[2,4,1]<=[8]}"
KEEP0 = "{devices=[2,4]<=[8] last_tile_dim_replicate}"            # a vector over data
ADD = "to_apply=add"
ARGMAX = "reduce({0}, {1}, {2}, {3}), dimensions={{%s}}, to_apply=argmax"
PAIR = ("f32[64,32]", "s32[64,32]")

PRELUDE = ("add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n\n"
           "addh {\n  x = bf16[] parameter(0)\n  y = bf16[] parameter(1)\n  ROOT s = bf16[] add(x, y)\n}\n\n"
           "mx {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] maximum(x, y)\n}\n\n"
           "argmax {\n  a = f32[] parameter(0)\n  i = s32[] parameter(1)\n  b = f32[] parameter(2)\n"
           "  j = s32[] parameter(3)\n  gt = pred[] compare(a, b), direction=GT\n  v = f32[] select(gt, a, b)\n"
           "  k = s32[] select(gt, i, j)\n  ROOT r = (f32[], s32[]) tuple(v, k)\n}\n\n")


def _red(dims: str, fn: str = ADD) -> str:
    return "reduce({0}, {1}), dimensions={{" + dims + "}}, " + fn


def _argmax(spec, dims, out_spec, out_shape):
    return [(PAIR[0], spec), (PAIR[1], spec), ("f32[]", R), ("s32[]", R)], ARGMAX % dims, out_spec, out_shape


CASES = [
    # reducing an unsplit dim: local
    ("r_unsplit", [("f32[64,32,16]", T3), ("f32[]", R)], _red("2"), T, "f32[64,32]"),
    # dim 0 over all 8 devices: all-reduce of the f32[32] result (128 B) over 8: 2*7/8*128 = 224
    ("r_8", [("f32[64,32]", "{devices=[8,1]<=[8]}"), ("f32[]", R)], _red("0"), R, "f32[32]"),
    # result split further than the reduce leaves it: all-reduce of the f32[32] tile over model
    # (2*3/4*128 = 192), then a local slice (no reduce-scatter, no operand all-to-all)
    ("r_scatter", [("f32[64,32]", T), ("f32[]", R)], _red("1"), "{devices=[8]<=[8]}", "f32[64]"),
    # replicated result: the same all-reduce (192), then the f32[32] result gathered over data
    # (1/2*256 = 128); the operand is not gathered
    ("r_to_rep", [("f32[64,32]", T), ("f32[]", R)], _red("1"), R, "f32[64]"),
    # two split reduced dims: one all-reduce per dim, minor first: of the f32[16] result (64 B) over
    # model (2*3/4*64 = 96), then over data (2*1/2*64 = 64)
    ("r_two", [("f32[16,64,32]", "{devices=[1,2,4]<=[8]}"), ("f32[]", R)], _red("1,2"), R, "f32[16]"),
    # two reduced dims, one split (model), the kept dim on data: f32[8] tile, 2*3/4*32 = 48
    ("r_two_keep", [("f32[16,64,32]", "{devices=[2,1,4]<=[8]}"), ("f32[]", R)], _red("1,2"), KEEP0, "f32[16]"),
    # bf16: all-reduce in bf16 of the bf16[32] tile (64 B): 2*3/4*64 = 96
    ("r_bf16", [("bf16[64,32]", T), ("bf16[]", R)], _red("1", "to_apply=addh"), KEEP0, "bf16[64]"),
    # max over an uneven split (30 over 4: tiles of 8, padded with the init value): 2*3/4*128 = 192
    ("r_max_uneven", [("f32[64,30]", T), ("f32[]", R)], _red("1", "to_apply=mx"), KEEP0, "f32[64]"),
    # operand in another device order (dim 1 over devices {0,2,4,6} / {1,3,5,7}): all-reduce of f32[32]
    # in those groups (192)
    ("r_order", [("f32[64,32]", "{devices=[2,4]<=[4,2]T(1,0)}"), ("f32[]", R)], _red("1"),
     "{devices=[2,4]<=[4,2]T(1,0) last_tile_dim_replicate}", "f32[64]"),
    # dim 1 over every other device, replicated pairwise: all-reduce of the whole f32[64] (256 B) in
    # groups {0,2,4,6}, {1,3,5,7}: 2*3/4*256 = 384
    ("r_partial_rep", [("f32[64,32]", "{devices=[1,4,2]<=[8] last_tile_dim_replicate}"), ("f32[]", R)], _red("1"),
     R, "f32[64]"),
    # dim 0 (6 rows) split 4 ways unevenly, dim 1 over device pairs: all-reduce of the f32[2] tile (8 B)
    # over the pairs: 2*1/2*8 = 8
    ("r_uneven_kept", [("f32[6,32]", "{devices=[4,2]<=[8]}"), ("f32[]", R)], _red("1"),
     "{devices=[4,2]<=[8] last_tile_dim_replicate}", "f32[6]"),
    # argmax over the dim on model: per output, the f32[32] / s32[32] partials (128 B) gathered over
    # model to 512 B: 3/4*512 = 384, twice
    ("argmax", *_argmax(T, "1", "{%s, %s}" % (KEEP0, KEEP0), "(f32[64], s32[64])")),
    # argmax over the dim on data: the [8] partials (32 B) gathered over data: 1/2*64 = 32, twice
    ("argmax_dim0", *_argmax(T, "0", "{%s, %s}" % (("{devices=[4,2]<=[2,4]T(1,0) last_tile_dim_replicate}",) * 2),
                             "(f32[32], s32[32])")),
    # argmax over both dims: scalar partials gathered over model (16 B: 3/4*16 = 12, twice), the gathered
    # [4] then over data (32 B: 1/2*32 = 16, twice)
    ("argmax_two", *_argmax(T, "0,1", "{{replicated}, {replicated}}", "(f32[], s32[])")),
    # over 8 devices: f32[64] partials (256 B) gathered to 2048 B: 7/8*2048 = 1792, twice
    ("argmax_8", *_argmax("{devices=[1,8]<=[8]}", "1", "{{replicated}, {replicated}}", "(f32[64], s32[64])")),
    # argmax of a raw layout (dim 1 over {0,2,4,6}): the f32[32] / s32[32] partials (128 B) gathered in
    # those groups to 512 B: 3/4*512 = 384, twice
    ("argmax_raw", *_argmax("{devices=[2,4]<=[4,2]T(1,0)}", "1",
                            "{%s, %s}" % (("{devices=[2,4]<=[4,2]T(1,0) last_tile_dim_replicate}",) * 2),
                            "(f32[64], s32[64])")),
    # argmax over an unsplit dim: local
    ("argmax_free", [("f32[64,32,16]", T3), ("s32[64,32,16]", T3), ("f32[]", R), ("s32[]", R)], ARGMAX % "2",
     "{%s, %s}" % (T, T), "(f32[64,32], s32[64,32])"),
]

_results, _groups, test_reduce_collectives_match_xla, test_reduce_replica_groups_match_xla = oracle_cases(CASES, PRELUDE)


def test_reduce_expected_figures():
    """XLA's figures as derived by hand in the comments above (ring bytes per device)."""
    res = _results()
    assert res["r_unsplit"][0] == [] and res["argmax_free"][0] == []
    assert res["r_8"][0] == [("all-reduce", 8, 224)]
    assert res["r_scatter"][0] == [("all-reduce", 4, 192)]
    assert res["r_to_rep"][0] == [("all-gather", 2, 128), ("all-reduce", 4, 192)]
    assert res["r_two"][0] == [("all-reduce", 2, 64), ("all-reduce", 4, 96)]
    assert res["r_two_keep"][0] == [("all-reduce", 4, 48)]
    assert res["r_bf16"][0] == [("all-reduce", 4, 96)]
    assert res["r_partial_rep"][0] == [("all-reduce", 4, 384)]
    assert res["r_uneven_kept"][0] == [("all-reduce", 2, 8)]
    assert res["argmax"][0] == [("all-gather", 4, 384)] * 2
    assert res["argmax_dim0"][0] == [("all-gather", 2, 32)] * 2
    assert res["argmax_two"][0] == [("all-gather", 2, 16)] * 2 + [("all-gather", 4, 12)] * 2
    assert res["argmax_8"][0] == [("all-gather", 8, 1792)] * 2
    groups = {n: g for n, (g, _) in _groups().items()}
    assert groups["r_order"] == [("all-reduce", [[0, 2, 4, 6], [1, 3, 5, 7]])]
    assert res["argmax_raw"][0] == [("all-gather", 4, 384)] * 2
    assert groups["argmax_raw"] == [("all-gather", [[0, 2, 4, 6], [1, 3, 5, 7]])] * 2
    assert groups["r_two"] == [("all-reduce", [[0, 1, 2, 3], [4, 5, 6, 7]]), ("all-reduce", [[0, 4], [1, 5], [2, 6], [3, 7]])]
