"""The test-side byte counter (tests/xla_bytes.py) on modules whose partitioned collectives are known by
hand: what the other oracle tests measure must itself be right."""

from __future__ import annotations

import pytest

from tests.conftest import require_jax
from tests.xla_bytes import collective_bytes, shape_bytes

DOT_K_SPLIT = """HloModule k, num_partitions=8

ENTRY %main {
  %a = f32[16,64] parameter(0), sharding={devices=[1,8]<=[8]}
  %b = f32[64,16] parameter(1), sharding={devices=[8,1]<=[8]}
  ROOT %d = f32[16,16] dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={replicated}
}
"""

GATHER_ROWS = """HloModule g, num_partitions=8

ENTRY %main {
  %a = f32[64,32] parameter(0), sharding={devices=[8,1]<=[8]}
  ROOT %c = f32[64,32] copy(%a), sharding={replicated}
}
"""


def test_shape_bytes_of_arrays_and_tuples():
    assert shape_bytes("f32[16,16]{1,0}") == 1024
    assert shape_bytes("(bf16[8], s32[2,2], token[])") == 16 + 16
    assert shape_bytes("pred[]") == 1


@pytest.mark.oracle
def test_counts_match_hand_derivation():
    require_jax()
    from tests import xla_oracle

    # contracting dim split 8 ways, replicated result: one all-reduce of f32[16,16] = 1024 B over 8
    # devices: 2 * 7/8 * 1024 = 1792 B per device
    (ar,) = collective_bytes(xla_oracle.spmd_partition(DOT_K_SPLIT, 8))
    assert ar["kind"] == "all-reduce" and ar["n"] == 8 and ar["bytes"] == pytest.approx(1792.0)
    # rows split 8 ways -> replicated: one all-gather whose result is f32[64,32] = 8192 B: 7/8 * 8192 = 7168
    (ag,) = collective_bytes(xla_oracle.spmd_partition(GATHER_ROWS, 8))
    assert ag["kind"] == "all-gather" and ag["n"] == 8 and ag["bytes"] == pytest.approx(7168.0)


# a loop body whose parameter tuple has six leaves: XLA prints /*index=5*/ in its header, which once
# made the counter miss the body (its collectives then counted once instead of once per trip)
LONG_TUPLE_LOOP = """HloModule w, num_partitions=8

%body (p: (s32[], f32[8], f32[8], f32[8], f32[8], /*index=5*/f32[8])) -> (s32[], f32[8], f32[8], f32[8], f32[8], /*index=5*/f32[8]) {
  %p = (s32[], f32[8], f32[8], f32[8], f32[8], /*index=5*/f32[8]) parameter(0)
  %x = f32[8] get-tuple-element(%p), index=1
  %ar = f32[8] all-reduce(%x), replica_groups={{0,1,2,3,4,5,6,7}}, to_apply=%add
  ROOT %t = (s32[], f32[8], f32[8], f32[8], f32[8], /*index=5*/f32[8]) tuple(%i, %ar, %x, %x, %x, %x)
}

ENTRY %main (a: f32[8]) -> f32[8] {
  %w = (s32[], f32[8], f32[8], f32[8], f32[8], /*index=5*/f32[8]) while(%init), condition=%cond, body=%body, backend_config={"known_trip_count":{"n":"3"}}
  ROOT %r = f32[8] get-tuple-element(%w), index=1
}
"""


def test_loop_body_with_index_comment_counts_per_trip(monkeypatch):
    from tests import xla_bytes

    monkeypatch.setattr(xla_bytes.xla_oracle, "collectives", lambda text: [
        {"name": "ar", "kind": "all-reduce", "replica_groups": [list(range(8))], "shape": "f32[8]"}])
    (row,) = collective_bytes(LONG_TUPLE_LOOP)
    assert row["bytes"] == pytest.approx(3 * 2.0 * 7 / 8 * 32)   # 3 trips of a 32-byte all-reduce over 8
