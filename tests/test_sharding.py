"""Unit tests of the HloSharding model (hloshard.hlo.sharding).

The expected normalized prints in NORMALIZED were observed from jaxlib 0.10.2's
``xla_client.HloSharding.from_string`` (and are re-checked against it in test_sharding_oracle.py).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from hloshard.errors import HloSyntaxError
from hloshard.hlo.sharding import HloSharding, _canonical_iota, iota_form, parse_sharding

P = HloSharding.parse

# input -> what XLA prints after parsing it (normalization + form kept)
NORMALIZED = [
    ("{replicated}", "{replicated}"),
    ("{manual}", "{manual}"),
    ("{unknown}", "{unknown}"),
    ("{unreduced}", "{unreduced}"),
    ("{maximal device=3}", "{maximal device=3}"),
    ("{maximal device=-1}", "{maximal device=-1}"),
    ("{devices=[2,2] 0, 1,2 ,3}", "{devices=[2,2]0,1,2,3}"),
    ("{devices=[2,1,2]2,3,5,7}", "{devices=[2,1,2]2,3,5,7}"),
    ("{devices=[4,2]<=[8]}", "{devices=[4,2]<=[8]}"),
    ("{devices=[4,2]<=[2,4]T(1,0)}", "{devices=[4,2]<=[2,4]T(1,0)}"),
    ("{devices=[2,2]<=[2,2]T(0,1)}", "{devices=[2,2]<=[4]}"),
    ("{devices=[2,4]<=[2,2,2]T(0,2,1)}", "{devices=[2,4]<=[2,2,2]T(0,2,1)}"),
    ("{devices=[2,2]0,1,2,3 last_tile_dim_replicate}", "{devices=[2,2]0,1,2,3 last_tile_dim_replicate}"),
    ("{devices=[2,2]1,0,3,2 last_tile_dims={replicated}}", "{devices=[2,2]0,1,2,3 last_tile_dim_replicate}"),
    ("{devices=[4,1]<=[4] last_tile_dim_replicate}", "{devices=[4]<=[4]}"),
    ("{devices=[4]<=[4] last_tile_dim_replicate}", "{replicated}"),
    ("{devices=[2,4]<=[2,2,2]T(0,2,1) last_tile_dim_replicate}", "{devices=[2,4]<=[8] last_tile_dim_replicate}"),
    ("{devices=[2,4]<=[2,2,2]T(2,1,0) last_tile_dim_replicate}",
     "{devices=[2,4]<=[4,2]T(1,0) last_tile_dim_replicate}"),
    ("{devices=[2,2,2]<=[2,2,2]T(2,1,0) last_tile_dim_replicate}",
     "{devices=[2,2,2]<=[2,2,2]T(2,1,0) last_tile_dim_replicate}"),
    ("{devices=[2,2,2]<=[2,2,2]T(2,0,1) last_tile_dims={replicated}}",
     "{devices=[2,2,2]<=[4,2]T(1,0) last_tile_dim_replicate}"),
    # an iota whose replica groups do not align with its transposed dims falls back to explicit
    ("{devices=[1,1,4,3]<=[3,2,2]T(1,0,2) last_tile_dim_replicate}",
     "{devices=[1,1,4,3]0,1,4,5,8,9,2,3,6,7,10,11 last_tile_dim_replicate}"),
    ("{devices=[2,2,2]<=[8] last_tile_dims={replicated, manual}}",
     "{devices=[2,2,2]<=[2,2,2]T(0,2,1) last_tile_dims={manual, replicated}}"),
    ("{devices=[2,2,2,2]<=[16] last_tile_dims={replicated, manual, replicated}}",
     "{devices=[2,2,4]<=[2,2,2,2]T(0,2,1,3) last_tile_dims={manual, replicated}}"),
    ("{devices=[1,2,2]<=[4] last_tile_dims={unreduced, manual}}",
     "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dims={manual, unreduced}}"),
    ("{devices=[2,2,2]<=[8] last_tile_dims={replicated, unreduced}}",
     "{devices=[2,2,2]<=[2,2,2]T(0,2,1) last_tile_dims={unreduced, replicated}}"),
    ("{devices=[2,2]<=[4] last_tile_dims={unreduced}}", "{devices=[2,2]<=[4] last_tile_dims={unreduced}}"),
    ("{devices=[1,4]<=[4] last_tile_dims={unreduced}}", "{unreduced}"),
    ("{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dims={manual, replicated}}",
     "{devices=[2,2]<=[2,2]T(1,0) last_tile_dim_replicate}"),
    ("{devices=[2,1,2]1,0,3,2 last_tile_dims={manual, replicated}}",
     "{devices=[2,2]0,1,2,3 last_tile_dim_replicate}"),
    ("{devices=[2,2,1]<=[4] last_tile_dims={manual}}", "{devices=[2,2]<=[4]}"),
    ("{devices=[2,2,1]0,1,2,3 last_tile_dims={manual}}", "{devices=[2,2]0,1,2,3}"),
    ("{devices=[1,1,4]<=[4] last_tile_dims={manual}}", "{manual}"),
    ("{devices=[1,1,4]<=[4] last_tile_dims={replicated, manual}}", "{manual}"),
    ("{devices=[2,2,2]<=[8] last_tile_dims={replicated, replicated}}",
     "{devices=[2,4]<=[8] last_tile_dim_replicate}"),
    ("{devices=[2,2,2]0,2,1,3,4,6,5,7 last_tile_dims={manual, manual}}",
     "{devices=[2,4]0,2,1,3,4,6,5,7 last_tile_dims={manual}}"),
    ("{devices=[4,1,2]<=[8] last_tile_dims={replicated} shard_as 3}",
     "{devices=[4,1,2]<=[8] last_tile_dim_replicate shard_as 3}"),
    ("{maximal device=3 shard_as 2}", "{maximal device=3 shard_as 2}"),
    ("{manual shard_like 1}", "{manual shard_like 1}"),
    ("{{replicated}, {maximal device=1}}", "{{replicated}, {maximal device=1}}"),
    ("{{replicated},{replicated},{replicated},{replicated},{replicated},{maximal device=0},{manual}}",
     "{{replicated}, {replicated}, {replicated}, {replicated}, {replicated}, /*index=5*/{maximal device=0}, "
     "{manual}}"),
    ("{}", "{}"),
]


@pytest.mark.parametrize("text,expected", NORMALIZED)
def test_normalization_and_print(text, expected):
    s = P(text)
    assert s.to_string(include_metadata=False) == expected
    # printing is a fixed point after one round
    again = P(str(s))
    assert str(again) == str(s)
    assert again == s


def test_metadata_kept_printed_and_ignored_by_equality():
    a = P('{devices=[2,2]<=[4] shard_like 3 metadata={op_name="x" source_file="a.py" source_line=3}}')
    assert a.metadata == '{op_name="x" source_file="a.py" source_line=3}'
    assert str(a) == '{devices=[2,2]<=[4] shard_like 3 metadata={op_name="x" source_file="a.py" source_line=3}}'
    assert a.to_string(include_metadata=False) == "{devices=[2,2]<=[4] shard_like 3}"
    b = P("{devices=[2,2]0,1,2,3 shard_like 3}")
    assert a == b and hash(a) == hash(b)
    # metadata in another position, several metadata, braces inside strings
    c = P('{devices=[2,2]0,1,2,3 metadata={op_name="a}"} last_tile_dim_replicate}')
    assert c.metadata == '{op_name="a}"}' and c.last_tile_dim_replicate
    assert str(c) == '{devices=[2,2]0,1,2,3 last_tile_dim_replicate metadata={op_name="a}"}}'
    d = P('{maximal device=7 metadata={{op_name="b"}, {op_name="c"}}}')
    assert d.metadata == '{{op_name="b"}, {op_name="c"}}' and d.maximal_device == 7
    t = P('{{replicated metadata={op_name="p"}}, {devices=[2]0,1 metadata={op_name="q"}}}')
    assert [e.metadata for e in t.tuple_elements] == ['{op_name="p"}', '{op_name="q"}']
    assert t.without_metadata() == t and t.without_metadata().tuple_elements[1].metadata is None


def test_v1_v2_equality_and_hash():
    v1 = P("{devices=[4,2]0,4,1,5,2,6,3,7}")
    v2 = P("{devices=[4,2]<=[2,4]T(1,0)}")
    assert v1 == v2 and hash(v1) == hash(v2)
    assert str(v1) == "{devices=[4,2]0,4,1,5,2,6,3,7}"  # explicit stays explicit
    assert str(v2) == "{devices=[4,2]<=[2,4]T(1,0)}"
    assert v1.is_iota is False and v2.is_iota is True
    assert P("{devices=[2,4]<=[8]}") != P("{devices=[4,2]<=[8]}")
    assert P("{devices=[2,2]0,1,2,3 last_tile_dim_replicate}") == P("{devices=[2,2]1,0,2,3 last_tile_dim_replicate}")
    assert P("{devices=[2,2]0,1,2,3}") != P("{devices=[2,2]1,0,2,3}")
    assert P("{devices=[2,2]<=[4]}") != P("{devices=[2,2]<=[4] shard_as 1}")
    assert P("{replicated}") != P("{manual}")
    assert P("{maximal device=1}") != P("{maximal device=2}")
    assert len({v1, v2, P("{devices=[4,2]<=[8]}")}) == 2


def test_queries_tiled():
    s = P("{devices=[2,1,4]<=[4,2]T(1,0) last_tile_dim_replicate}")
    assert s.kind == "tiled" and s.is_tiled and not s.is_replicated
    assert s.tile_assignment.dtype == np.int64
    assert s.tile_assignment.tolist() == [[[0, 2, 4, 6]], [[1, 3, 5, 7]]]
    assert s.tile_dims == (2, 1) and s.num_tiles == 2 and s.replication_factor == 4
    assert s.tile_assignment_dims == (2, 1, 4)
    assert s.devices == (0, 2, 4, 6, 1, 3, 5, 7) and s.num_devices == 8
    assert s.iota_reshape_dims == (4, 2) and s.iota_transpose_perm == (1, 0)
    with pytest.raises(ValueError):
        s.tile_assignment[0, 0, 0] = 5  # read-only: shardings are shared through the parse cache
    g = P("{devices=[2,2,2]<=[8] last_tile_dims={manual, replicated}}")
    assert g.subgroup_types == ("manual", "replicated") and g.tile_dims == (2,) and g.has_manual_subgroup


def test_queries_other_kinds():
    r = HloSharding.replicated()
    assert r.is_replicated and r.tile_dims == () and r.num_tiles == 1 and r.devices == ()
    m = HloSharding.maximal(5)
    assert m.is_maximal and m.maximal_device == 5 and m.devices == (5,) and m.num_devices == 1
    assert HloSharding.manual().is_manual and HloSharding.unknown().is_unknown
    t = HloSharding.tuple([r, m])
    assert t.is_tuple and t.tuple_elements == (r, m) and not t.is_replicated
    assert HloSharding.tuple([r, r]).is_replicated
    with pytest.raises(ValueError):
        HloSharding.tuple([t])


def test_constructors_print_iota_when_possible():
    ta = np.array([0, 4, 1, 5, 2, 6, 3, 7]).reshape(4, 2)
    assert str(HloSharding.tiled(ta)) == "{devices=[4,2]<=[2,4]T(1,0)}"
    assert str(HloSharding.tiled(np.arange(8).reshape(2, 4))) == "{devices=[2,4]<=[8]}"
    assert str(HloSharding.tiled(np.array([[1, 0], [2, 3]]))) == "{devices=[2,2]1,0,2,3}"
    s = HloSharding.tiled(np.array([0, 2, 1, 3]).reshape(2, 1, 2), last_tile_dim_replicate=True)
    assert str(s) == "{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}"
    assert str(HloSharding.iota([4, 2], [2, 4], [1, 0])) == "{devices=[4,2]<=[2,4]T(1,0)}"
    assert str(HloSharding.iota([2, 2], [2, 2], [0, 1])) == "{devices=[2,2]<=[4]}"
    assert str(HloSharding.iota([2, 2], last_tile_dim_replicate=True)) == \
        "{devices=[2,2]<=[4] last_tile_dim_replicate}"
    assert HloSharding.iota([8], last_tile_dim_replicate=True) == HloSharding.replicated()
    with pytest.raises(ValueError, match="product"):
        HloSharding.iota([2, 4], [6])
    with pytest.raises(ValueError, match="permutation"):
        HloSharding.iota([2, 2], [2, 2], [0, 0])
    with pytest.raises(ValueError):
        HloSharding.tiled(np.arange(4).reshape(2, 2), last_tile_dim_replicate=True, last_tile_dims=["manual"])


def _all_transposed_iotas(n_max=16):
    for n in (2, 4, 6, 8, 12, 16):
        for k in (1, 2, 3, 4):
            for dims in itertools.product([1, 2, 3, 4], repeat=k):
                if int(np.prod(dims)) != n:
                    continue
                for perm in itertools.permutations(range(k)):
                    yield dims, perm


def test_iota_form_is_minimal_and_exact():
    seen = 0
    for dims, perm in _all_transposed_iotas():
        flat = np.arange(int(np.prod(dims))).reshape(dims).transpose(perm).ravel()
        form = iota_form(flat)
        assert form is not None
        reshape, p = form
        assert np.array_equal(np.arange(flat.size).reshape(reshape).transpose(p).ravel(), flat)
        assert 1 not in reshape or reshape == (1,)
        # minimal: no two reshape dims consecutive (ascending) in the permutation
        assert all(p[i + 1] != p[i] + 1 for i in range(len(p) - 1))
        # the symbolic canonicalization of the parser agrees with detection on the expanded list
        assert _canonical_iota(dims, perm) == form
        seen += 1
    assert seen > 100
    assert iota_form([1, 0, 2, 3]) is None
    assert iota_form([0, 1, 3, 2]) is None
    assert iota_form([0, 2, 4, 6, 1, 3, 5, 8]) is None
    assert iota_form([0, 0, 1, 1]) is None


def test_shard_shape_and_offsets_ceil_tiling():
    s = P("{devices=[4,2]<=[8]}")
    dims = (10, 10)
    assert s.tile_shape(dims) == (3, 5)
    # tile (i, j) is on device 2*i + j
    assert [s.shard_shape(dims, d) for d in range(8)] == [(3, 5)] * 6 + [(1, 5)] * 2
    assert [s.shard_offsets(dims, d) for d in range(8)] == [
        (0, 0), (0, 5), (3, 0), (3, 5), (6, 0), (6, 5), (9, 0), (9, 5)]
    # 5 elements in 4 tiles: ceil 2 -> 2, 2, 1, 0 (an empty shard)
    t = P("{devices=[4]3,2,1,0}")
    assert [t.shard_shape((5,), d) for d in (3, 2, 1, 0)] == [(2,), (2,), (1,), (0,)]
    assert [t.shard_offsets((5,), d) for d in (3, 2, 1, 0)] == [(0,), (2,), (4,), (5,)]
    assert t.tile_index(1) == (2,)
    # partial replication: the replicas hold the same shard
    r = P("{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}")
    assert r.shard_offsets((8, 3), 0) == r.shard_offsets((8, 3), 2) == (0, 0)
    assert r.shard_offsets((8, 3), 1) == r.shard_offsets((8, 3), 3) == (4, 0)
    assert HloSharding.replicated().shard_shape((7, 3), 5) == (7, 3)
    with pytest.raises(ValueError, match="rank"):
        s.shard_shape((10,), 0)
    with pytest.raises(ValueError, match="not in the tile assignment"):
        s.shard_shape((10, 10), 8)


def test_shards_cover_the_tensor_exactly():
    for text, dims in [("{devices=[4,2]<=[2,4]T(1,0)}", (7, 3)), ("{devices=[3,1,2]<=[6] last_tile_dim_replicate}", (5, 4)),
                       ("{devices=[2,2,2]<=[2,2,2]T(2,0,1)}", (3, 9, 1))]:
        s = P(text)
        count = np.zeros(dims, dtype=int)
        for d in s.devices:
            count[s.shard_slices(dims, d)] += 1
        assert (count == s.replication_factor).all()


def test_tuple_helpers():
    r = HloSharding.replicated()
    assert r.as_tuple(3) == HloSharding.tuple([r, r, r])
    assert str(r.as_tuple(0)) == "{{replicated}}"  # empty tuple shape: one element (XLA)
    assert r.leaf(2) is r
    t = P("{{replicated}, {maximal device=1}}")
    assert t.leaf(1) == HloSharding.maximal(1) and t.as_tuple(5) is t


def test_named_sharding_kept_raw():
    for text in ["{mesh[x=2,y=4], [{x}, {y, ?}], replicated={}}",
                 "{mesh[x=2,y=2], device_ids=([2,2]T(1,0)), replicated}", "{maximal_mesh[device_id=3]}"]:
        s = P(text)
        assert s.kind == "named" and str(s) == text
        assert s == P(text.replace(", ", ",")) and s != P("{replicated}")


@pytest.mark.parametrize("text,column,message", [
    ("{devices=[2,4]<=[6]}", 17, "iota product 6"),
    ("{devices=[2,2]<=[2,2]T(0,0)}", 22, "not a permutation"),
    ("{devices=[2,2]<=[2,2]T(0,1,2)}", 22, "3 entries"),
    ("{devices=[2,2]<=[2,2]}", 22, "needs a transpose"),
    ("{devices=[2,2]<=[4]T(0)}", 20, "takes no T"),
    ("{foo}", 2, "unknown sharding attribute 'foo'"),
    ("{devices=[2,2]0,1,2}", 15, "needs 4 devices but 3"),
    ("{devices=[1]0}", 13, "more than one device"),
    ("{replicated", 12, "expected '}'"),
    ("{maximal}", 2, "needs 'device=N'"),
    ("{replicated manual}", 13, "conflicting"),
    ("{replicated devices=[2]0,1}", 2, "takes no devices"),
    ("{last_tile_dim_replicate}", 1, "needs 'devices="),
    ("{devices=[2,2]0,1,2,3 last_tile_dim_replicate last_tile_dims={manual}}", 1, "cannot both"),
    ("{devices=[2,2]<=[4] last_tile_dims={manual, bogus}}", 45, "unknown subgroup type 'bogus'"),
    ("{devices=[2,0]<=[4]}", 10, "positive"),
    ("  {replicated} x", 16, "unexpected text after"),
    ("replicated", 1, "expected '{'"),
    ("{{replicated}, {maximal device=1}", 34, "',' or '}'"),
    ('{replicated metadata={op_name="a}', 22, "unterminated string"),
])
def test_errors_have_columns(text, column, message):
    with pytest.raises(HloSyntaxError) as info:
        P(text)
    err = info.value
    assert message in err.message
    assert err.line == 1 and err.column == column, (err.column, str(err))
    assert err.source_line == text


def test_parse_alias_and_cache():
    a = parse_sharding("{devices=[2,2]<=[4]}")
    assert a is P("{devices=[2,2]<=[4]}")
    m1 = P('{devices=[2,2]<=[4] metadata={op_name="a"}}')
    m2 = P('{devices=[2,2]<=[4] metadata={op_name="b"}}')
    assert m1.metadata != m2.metadata and m1 == m2 and m1.tile_assignment is m2.tile_assignment
