"""Tests of the XLA oracle harness itself (tests/xla_oracle.py): real jaxlib in a child process."""

from __future__ import annotations

import numpy as np
import pytest

from tests import xla_oracle as xo
from tests.conftest import require_jax

SEED = """HloModule module
ENTRY %entry {
  %parameter1 = f32[8,4,10,16]{3,1,2,0} parameter(0), sharding={devices=[2,4,1,1]0,1,2,3,4,5,6,7}
  ROOT %reshape = f32[32,10,16] reshape(parameter1), sharding={devices=[2,1,1,4]0,1,2,3,4,5,6,7 last_tile_dim_replicate}
}
"""

BAD_RESHAPE = """HloModule bad
ENTRY %e {
  %p = f32[64,64] parameter(0)
  ROOT %r = f32[64,32] reshape(%p)
}
"""


# ---- pure-python parts (no XLA) -----------------------------------------------------------------

def test_expand_replica_groups_forms():
    assert xo.expand_replica_groups("{{0,4},{1,5},{2,6},{3,7}}") == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert xo.expand_replica_groups("[2,4]<=[8]") == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert xo.expand_replica_groups("[4,2]<=[2,4]T(1,0)") == [[0, 4], [1, 5], [2, 6], [3, 7]]
    mesh = "mesh['axis_0'=2,'axis_1'=4,'axis_2'=1,'axis_3'=1] {'axis_1'}"
    assert xo.expand_replica_groups(mesh) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert xo.expand_replica_groups("mesh['a'=2,'b'=4] {'a'}") == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert xo.expand_replica_groups("{}") == []
    # device_ids and sub-axes (shared/reference/hlo_syntax.md, mesh replica groups)
    assert xo.expand_replica_groups("mesh['a'=2,'b'=4], device_ids=(0,2,1,3,4,6,5,7) {'a'}") == \
        [[0, 4], [2, 6], [1, 5], [3, 7]]
    assert xo.expand_replica_groups("mesh['x'=2,'y'=4] {'y':(2)2}") == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert xo.expand_replica_groups("mesh['axis_0'=4,'axis_1'=2], device_ids=([2,2,2]T(0,2,1)) "
                                    "{'axis_0':(2)2}") == [[0, 1], [2, 3], [4, 5], [6, 7]]
    with pytest.raises(ValueError):
        xo.expand_replica_groups("nonsense")


def test_collectives_regex_parser():
    text = """
  %ag = f32[4,4,10,16]{3,2,1,0} all-gather(%param), channel_id=1, replica_groups=[2,4]<=[8], dimensions={1}, use_global_device_ids=true
  %ar.6 = (f32[256,512]{1,0}, /*index=1*/f32[256]{0}) all-reduce(%a, %b), channel_id=2, replica_groups={{0,4},{1,5},{2,6},{3,7}}, to_apply=%add
  ROOT %cp = f32[4]{0} collective-permute(%x), channel_id=3, source_target_pairs={{0,1},{1,0}}
  %add = f32[4] add(%x, %y)
"""
    cs = xo.collectives(text)
    assert [c["kind"] for c in cs] == ["all-gather", "all-reduce", "collective-permute"]
    assert cs[0]["replica_groups"] == [[0, 1, 2, 3], [4, 5, 6, 7]] and cs[0]["dimensions"] == [1]
    assert cs[1]["shape"].startswith("(f32[256,512]") and cs[1]["channel_id"] == 2
    assert cs[2]["source_target_pairs"] == [[0, 1], [1, 0]]


# ---- real XLA -----------------------------------------------------------------------------------

@pytest.mark.oracle
def test_parse_many_good_bad_and_abort():
    require_jax()
    res = xo.parse_many([SEED, "HloModule x\nENTRY e { ROOT r = f32[2] add(nope, nope) }", BAD_RESHAPE, SEED])
    assert res[0][0] is True and "reshape" in res[0][1]
    assert res[1][0] is False and "nope" in res[1][1]
    assert res[2][0] is False and "died" in res[2][1]  # C++ CHECK abort in the parser, contained
    assert res[3][0] is True                            # and a fresh child carries on after it


@pytest.mark.oracle
def test_shardings_from_strings():
    require_jax()
    d = xo.shardings_from_strings(
        ["{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}", "{devices=[4,2]0,4,1,5,2,6,3,7}",
         "{{replicated},{maximal device=3}}", "{devices=[2,1,4]<=[8] last_tile_dims={manual}}"],
        others=[None, "{devices=[4,2]<=[2,4]T(1,0)}", None, None])
    assert d[0]["tile_assignment_dimensions"] == [1, 4, 2]
    assert d[0]["tile_assignment_devices"] == [0, 4, 1, 5, 2, 6, 3, 7]
    assert d[0]["replicate_on_last_tile_dim"] is True and d[0]["is_tile_assignment_iota"] is True
    assert d[1]["equal"] is True and d[1]["str"] == "{devices=[4,2]0,4,1,5,2,6,3,7}"
    assert d[2]["is_tuple"] and d[2]["tuple_elements"][1]["is_maximal"]
    assert d[2]["tuple_elements"][1]["tile_assignment_devices"] == [3]
    assert d[3]["subgroup_types"] == ["MANUAL"]


@pytest.mark.oracle
def test_seed_reshape_partitions_to_one_all_gather():
    require_jax()
    raw = xo.spmd_partition(SEED)
    cs = xo.collectives(raw)
    assert len(cs) == 1
    assert cs[0]["kind"] == "all-gather" and cs[0]["dimensions"] == [1]
    assert cs[0]["replica_groups"] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert cs[0]["shape"].startswith("f32[4,4,10,16]")


@pytest.mark.oracle
def test_compile_many_streams_and_survives_an_abort():
    require_jax()
    bad = SEED.replace("devices=[2,4,1,1]0,1,2,3,4,5,6,7", "devices=[2,4,1,1]0,1,2,3,4,5,6,9")
    res = xo.compile_many([SEED, BAD_RESHAPE, bad, SEED])
    assert [ok for ok, _ in res] == [True, False, False, True]
    assert "all-gather" in res[0][1] and "died" in res[1][1] and "9" in res[2][1]


@pytest.mark.oracle
def test_mesh_groups_with_device_ids_from_real_xla():
    """[2,4] -> [4,2] needs an all-to-all within pairs; XLA prints its groups as a mesh with
    device_ids and a sub-axis (shared/reference/xla_oracle.md: groups {{0,1},{2,3},..})."""
    require_jax()
    text = """HloModule m, num_partitions=8

ENTRY %e {
  %p = f32[64,64] parameter(0), sharding={devices=[2,4]<=[8]}
  ROOT %c = f32[64,64] copy(%p), sharding={devices=[4,2]<=[8]}
}
"""
    cs = xo.collectives(xo.spmd_partition(text))
    kinds = {c["kind"]: c for c in cs}
    assert set(kinds) == {"all-to-all", "collective-permute"}
    assert kinds["all-to-all"]["replica_groups"] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert kinds["all-to-all"]["dimensions"] == [0]
    assert sorted(map(tuple, kinds["collective-permute"]["source_target_pairs"])) == \
        [(0, 0), (1, 2), (2, 1), (3, 3), (4, 4), (5, 6), (6, 5), (7, 7)]


@pytest.mark.oracle
def test_compile_spmd_rejects_bad_sharding_and_runs_seed():
    require_jax()
    bad = SEED.replace("devices=[2,4,1,1]0,1,2,3,4,5,6,7", "devices=[2,4,1,1]0,1,2,3,4,5,6,9")
    ok, msg = xo.compile_spmd(bad)
    assert not ok and "9" in msg
    x = np.arange(8 * 4 * 10 * 16, dtype=np.float32).reshape(8, 4, 10, 16)
    (out,), final = xo.run_sharded(SEED, [x], return_hlo=True)
    np.testing.assert_array_equal(out, x.reshape(32, 10, 16))
    assert [c["kind"] for c in xo.collectives(final)] == ["all-gather"]
