"""Collectives already in the module (all-reduce, all-gather, reduce-scatter, all-to-all,
collective-permute) against XLA's SPMD partitioner (GSPMD, raw after-spmd-partitioning HLO, 8
devices): what XLA keeps and what it inserts around them, collective by collective (kind, replica groups
or source-target pairs, ring bytes); XLA attributes both to the collective's ``op_name``, hloshard
predicts the collective's own cost (``Strategy.collectives``) plus the resharding of its operand edge.

What GSPMD does with hand-written collectives outside a manual region (jaxlib 0.10.2):

* a cross-partition all-reduce (``channel_id``) with a tiled result is refused: ``RET_CHECK ...
  Cross-partition allreduce must be in (partial) manual partitioning mode``
  (:func:`test_xla_refuses_a_tiled_cross_partition_all_reduce`); with a replicated result, and every
  all-gather / reduce-scatter / all-to-all, XLA's default action: the operand is gathered to replicated
  and the collective runs on the full array as written (a tiled result is then sliced locally);
* a collective-permute of one array and a cross-replica all-reduce (no ``channel_id``) are partitioned
  like elementwise ops: the operand is resharded to the result's layout and the collective runs on the
  tiles.  With one replica the cross-replica all-reduce moves nothing (hloshard predicts no bytes for
  it); ``tests/xla_bytes.py`` counts its empty ``replica_groups={}`` as all 8 devices, so that one
  collective is compared by its shape (the tile) rather than its counted bytes.
"""

from __future__ import annotations

import functools

import pytest

from tests.handler_harness import chain_module, module_results

pytestmark = pytest.mark.oracle

T = "{devices=[2,4]<=[8]}"
R = "{replicated}"
ADD = "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n\n"
GROUPS = "replica_groups={{0,1,2,3},{4,5,6,7}}, use_global_device_ids=true"
PAIRS = "source_target_pairs={{0,1},{1,0},{2,3},{3,2},{4,5},{5,4},{6,7},{7,6}}"


def _case(name, operand, sharding, shape, body, out_sharding):
    return (name, [(operand, sharding)], [(name, shape, body, out_sharding)])


CASES = [
    # all-reduce of the replicated f32[64,32] (8192 bytes) in groups of 4: 2 * 3/4 * 8192 = 12288
    _case("ar_rep", "f32[64,32]", R, "f32[64,32]", f"all-reduce($0), channel_id=1, {GROUPS}, to_apply=add", R),
    # a tiled operand is gathered first: over model (3/4 * 4096 = 3072), then data (1/2 * 8192 = 4096)
    _case("ar_gathered", "f32[64,32]", T, "f32[64,32]", f"all-reduce($0), channel_id=2, {GROUPS}, to_apply=add", R),
    # all-gather to f32[64,128] (32768 bytes) in groups of 4: 3/4 * 32768 = 24576
    _case("ag_rep", "f32[64,32]", R, "f32[64,128]", f"all-gather($0), channel_id=3, {GROUPS}, dimensions={{1}}", R),
    # tiled in and out: operand gathered (3072 + 4096), the all-gather as written, result sliced locally
    _case("ag_tiled", "f32[64,32]", T, "f32[64,128]", f"all-gather($0), channel_id=4, {GROUPS}, dimensions={{1}}", T),
    # reduce-scatter of f32[64,128]: 3/4 * 32768 = 24576
    _case("rs_rep", "f32[64,128]", R, "f32[64,32]",
          f"reduce-scatter($0), channel_id=5, {GROUPS}, dimensions={{1}}, to_apply=add", R),
    # all-to-all of f32[64,32]: 3/4 * 8192 = 6144
    _case("a2a_rep", "f32[64,32]", R, "f32[64,32]",
          "all-to-all($0), channel_id=6, replica_groups={{0,1,2,3},{4,5,6,7}}, dimensions={1}", R),
    # collective-permute of the replicated array: 8192 bytes sent
    _case("cp_rep", "f32[64,32]", R, "f32[64,32]", f"collective-permute($0), channel_id=7, {PAIRS}", R),
    # ... of a tiled array: XLA permutes the f32[32,8] tiles (1024 bytes), nothing gathered
    _case("cp_tiled", "f32[64,32]", T, "f32[64,32]", f"collective-permute($0), channel_id=8, {PAIRS}", T),
    # tiled operand, replicated result: gathered (3072 + 4096), then 8192 bytes permuted
    _case("cp_to_rep", "f32[64,32]", T, "f32[64,32]", f"collective-permute($0), channel_id=9, {PAIRS}", R),
    # cross-replica all-reduce, tiled: kept on the f32[32,8] tile, nothing inserted
    _case("crs_tiled", "f32[64,32]", T, "f32[64,32]", "all-reduce($0), replica_groups={}, to_apply=add", T),
    # cross-replica all-reduce, replicated result: the operand gathered (3072 + 4096) first
    _case("crs_to_rep", "f32[64,32]", T, "f32[64,32]", "all-reduce($0), replica_groups={}, to_apply=add", R),
]

NAMES = [c[0] for c in CASES]
CROSS_REPLICA = ("crs_tiled", "crs_to_rep")


@functools.lru_cache(maxsize=1)
def _results():
    return module_results(chain_module(CASES, ADD), NAMES)


def _without_cross_replica(rows):
    """The rows without the module's own cross-replica all-reduce (XLA: no replica groups)."""
    return [r for r in rows if not (r[0] == "all-reduce" and r[1] == ())]


@pytest.mark.parametrize("name", [n for n in NAMES if n not in CROSS_REPLICA])
def test_collectives_match_xla(name):
    """Kind, replica groups / pairs and ring bytes, hloshard == XLA."""
    _, _, xla, pred = _results()[name]
    assert pred == xla


@pytest.mark.parametrize("name", CROSS_REPLICA)
def test_cross_replica_all_reduce_matches_xla(name):
    """The collectives XLA inserts match; XLA's own all-reduce runs on the layout hloshard keeps (ring
    bytes under the counter's 8-device convention: 2 * 7/8 * the bytes it reduces) and hloshard
    predicts no bytes for it (one replica)."""
    _, _, xla, pred = _results()[name]
    assert _without_cross_replica(pred) == _without_cross_replica(xla)
    kept = [r for r in xla if r[0] == "all-reduce" and r[1] == ()]
    tile = 1024 if name == "crs_tiled" else 8192       # f32[32,8] tile / the replicated f32[64,32]
    assert kept == [("all-reduce", (), round(2 * 7 / 8 * tile))]
    assert not [c for c in pred if c[0] == "all-reduce"]


def test_collective_expected_figures():
    """The hand derivations of the comments above, on XLA's side."""
    res = {n: r[0] for n, r in _results().items()}
    gathered = [("all-gather", 2, 4096), ("all-gather", 4, 3072)]
    assert res["ar_rep"] == [("all-reduce", 4, 12288)]
    assert res["ar_gathered"] == sorted(gathered + [("all-reduce", 4, 12288)])
    assert res["ag_rep"] == [("all-gather", 4, 24576)]
    assert res["ag_tiled"] == sorted(gathered + [("all-gather", 4, 24576)])
    assert res["rs_rep"] == [("reduce-scatter", 4, 24576)]
    assert res["a2a_rep"] == [("all-to-all", 4, 6144)]
    assert res["cp_rep"] == [("collective-permute", 1, 8192)]
    assert res["cp_tiled"] == [("collective-permute", 1, 1024)]
    assert res["cp_to_rep"] == sorted(gathered + [("collective-permute", 1, 8192)])


def test_xla_refuses_a_tiled_cross_partition_all_reduce():
    """A channel all-reduce whose result is tiled, outside a manual region: GSPMD cannot partition it
    (so no comparison exists; hloshard prices the replicated computation, as for every other form)."""
    from tests.conftest import require_jax
    from tests import xla_oracle
    from tests.handler_harness import partition_only

    require_jax()
    text = chain_module([_case("ar_tiled", "f32[64,32]", T, "f32[64,32]",
                               f"all-reduce($0), channel_id=1, {GROUPS}, to_apply=add", T)], ADD)
    with pytest.raises(xla_oracle.OracleError, match="manual partitioning mode"):
        partition_only(text)
