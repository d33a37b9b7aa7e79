"""reshape (and shape-changing bitcast) handler against XLA's SPMD partitioner (GSPMD, raw
after-spmd-partitioning HLO, 8 devices), collective by collective: kind, replica groups (or
source-target pairs) and ring bytes.

XLA's order (``SpmdPartitioningVisitor::HandleReshape``): the operand layout inferred back from the
written output layout when it keeps every split (the operand is resharded, the reshape is local); else
the output layout inferred forward from the operand (local reshape, then the *result* is resharded);
else its default action.  A bitcast that changes the shape has no handler of its own: the operand is
gathered.  hloshard is evaluated on the 2x4 mesh refined for the module (``DeviceMesh.for_module``), as
the commands do: the 4x2 tilings below need the model axis split into two sub-axes of 2.
"""

from __future__ import annotations

import functools

import pytest

from tests.handler_harness import chain_module, module_results

pytestmark = pytest.mark.oracle

S8 = "{devices=[8,1]<=[8]}"
T = "{devices=[2,4]<=[8]}"


def _case(name, operand, sharding, shape, out_sharding, op="reshape"):
    return (name, [(operand, sharding)], [(name, shape, f"{op}($0)", out_sharding)])


CASES = [
    # splits carried through merged / split dims: no collective
    _case("merge_major", "f32[16,8,32]", "{devices=[8,1,1]<=[8]}", "f32[128,32]", S8),
    _case("split_major", "f32[128,32]", S8, "f32[16,8,32]", "{devices=[8,1,1]<=[8]}"),
    _case("split_minor_dim", "f32[16,32]", T, "f32[16,4,8]", "{devices=[2,4,1]<=[8]}"),
    _case("from_replicated", "f32[128,32]", "{replicated}", "f32[16,8,32]", "{devices=[1,8,1]<=[8]}"),
    # sub-axis splits: the 8-way split of 1024 becomes 4x2 over two dims (and back); the mesh 2x4 is
    # refined to 2x2x2 for it
    _case("sub_axis", "f32[1024]", "{devices=[8]<=[8]}", "f32[4,256]", "{devices=[4,2]<=[8]}"),
    _case("sub_axis_back", "f32[4,256]", "{devices=[4,2]<=[8]}", "f32[1024]", "{devices=[8]<=[8]}"),
    _case("sub_axis_rows", "f32[1024,16]", S8, "f32[4,256,16]", "{devices=[4,2,1]<=[8]}"),
    # two split dims merged into one split 8 ways: the minor split moves with an all-to-all inside the
    # model groups: operand tile f32[4,1,10,16] = 2560 bytes, ring 3/4 * 2560 = 1920
    _case("merge_two_split", "f32[8,4,10,16]", "{devices=[2,4,1,1]<=[8]}", "f32[32,10,16]",
          "{devices=[8,1,1]<=[8]}"),
    # the minor split cannot be carried onto [32]: all-gather over model, result tile f32[4,4,10,16]
    # = 10240 bytes, ring 3/4 * 10240 = 7680
    _case("drop_minor_split", "f32[8,4,10,16]", "{devices=[2,4,1,1]<=[8]}", "f32[32,10,16]",
          "{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}"),
    # the reverse: the written [2,4] output would need the operand's [32] split only 2 ways (a dropped
    # split), so XLA reshapes in the forward layout [8,1,1,1] and all-to-alls the result within the
    # model groups (the same 1920 bytes; an all-gather of the operand would be 7680)
    _case("split_into_two", "f32[32,10,16]", "{devices=[8,1,1]<=[8]}", "f32[8,4,10,16]", "{devices=[2,4,1,1]<=[8]}"),
    # the written split is on the minor dim of [4,8]: forward layout [4,2,1], then an all-to-all of the
    # f32[1,4,16] result tile over pairs {0,2,4,6},{1,3,5,7} (ring 3/4 * 256 = 192) and a
    # collective-permute of 256 bytes putting the tiles in device order
    _case("split_to_minor", "f32[32,16]", S8, "f32[4,8,16]", "{devices=[1,8,1]<=[8]}"),
    # neither direction carries (8 blocks of 3 rows vs a split of the minor dim of [3,8]): XLA's default
    # action gathers the operand (7/8 * 1536 = 1344) and slices the result
    _case("no_carry", "f32[24,16]", S8, "f32[3,8,16]", "{devices=[1,8,1]<=[8]}"),
    # to replicated: all-gather of the f32[2,8,32] tile over all 8 (7/8 * 16384 = 14336)
    _case("to_replicated", "f32[128,32]", S8, "f32[16,8,32]", "{replicated}"),
    # uneven: [24,6] rows 3 per device -> [144] 18 per device: the same contiguous blocks
    _case("uneven_rows", "f32[24,6]", S8, "f32[144]", "{devices=[8]<=[8]}"),
    # a shape-changing bitcast: the operand is gathered to replicated (7/8 * 16384), then sliced
    _case("bitcast_merge", "f32[16,8,32]", "{devices=[8,1,1]<=[8]}", "f32[128,32]", S8, op="bitcast"),
    # ... in two steps for a 2-D split: over model (3/4 * 10240) then data (1/2 * 20480)
    _case("bitcast_gather", "f32[8,4,10,16]", "{devices=[2,4,1,1]<=[8]}", "f32[32,10,16]",
          "{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}", op="bitcast"),
]

NAMES = [c[0] for c in CASES]


@functools.lru_cache(maxsize=1)
def _results():
    return module_results(chain_module(CASES), NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_reshape_collectives_match_xla(name):
    """Kind, replica groups / pairs and ring bytes of every collective, hloshard == XLA."""
    _, _, xla, pred = _results()[name]
    assert pred == xla


def test_reshape_expected_figures():
    """The hand derivations of the comments above, on XLA's side."""
    res = {n: r[0] for n, r in _results().items()}
    for name in ("merge_major", "split_major", "split_minor_dim", "from_replicated", "sub_axis", "sub_axis_back",
                 "sub_axis_rows", "uneven_rows"):
        assert res[name] == [], name
    assert res["merge_two_split"] == [("all-to-all", 4, 1920)]
    assert res["drop_minor_split"] == [("all-gather", 4, 7680)]
    assert res["split_into_two"] == [("all-to-all", 4, 1920)]
    assert res["split_to_minor"] == [("all-to-all", 4, 192), ("collective-permute", 1, 256)]
    assert res["no_carry"] == [("all-gather", 8, 1344)]
    assert res["to_replicated"] == [("all-gather", 8, 14336)]
    assert res["bitcast_merge"] == [("all-gather", 8, 14336)]
    assert res["bitcast_gather"] == [("all-gather", 2, 10240), ("all-gather", 4, 7680)]


def test_sub_axis_cases_use_a_refined_mesh():
    """The 4x2 tilings are expressible only on the refined 2x2x2 mesh (whole sub-axes), which is the mesh
    the comparison above ran on."""
    from hloshard.hlo.parser import parse_module
    from hloshard.mesh import DeviceMesh

    mesh = DeviceMesh.for_module(parse_module(chain_module(CASES)), "2x4")
    assert mesh.shape == (2, 2, 2) and mesh.user_shape == (2, 4)
