"""The resharding-cost caches give exactly the planner's figures.

``resharding_cost`` plans one (source, target) pair once for every array shape whose dims have the
same gcd with the device count and re-prices the plan for the other shapes' bytes
(``reshard._planned_cost``); the planner memoises its layout geometry across plans and meshes. Each
check compares a cached figure with a fresh ``plan(...)`` (every cache cleared first, so nothing is
reused), on random pairs of shardings: mesh-axis shardings and arbitrary device orders, partial
replication, tensor dims that divide the tile counts and dims that pad (uneven), sub-byte types, and
meshes with unequal alpha / beta per axis.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from hloshard.cost import reshard
from hloshard.cost.reshard import plan, resharding_cost
from hloshard.hlo.shape import parse_shape
from hloshard.hlo.sharding import HloSharding as H
from hloshard.mesh import DeviceMesh

MESHES = {
    "2x4": DeviceMesh.parse("2x4", alpha="1,1", beta="0.01,1"),
    "2x2x2": DeviceMesh.parse("2x2x2", alpha="1,2,3", beta="0.5,1,2"),
    "8": DeviceMesh.parse("8"),
}


def _device_mesh() -> DeviceMesh:
    """2x2x2 with a TPU v5e's HBM priced (``--device``'s ``roofline_prices``): all-to-alls then charge
    the partitioner's transposes, whose decisions read padded sizes (``_decision`` kind 2). One cost
    unit = the time of one HBM byte at the profile's sustained bandwidth, so an HBM byte costs about
    what a link byte does (beta 1); the value only scales those terms."""
    from hloshard.cost.roofline import RooflinePrices
    from hloshard.devices import get_profile

    mesh = DeviceMesh.parse("2x2x2", alpha="1,2,3", beta="0.5,1,2")
    profile = get_profile("tpu-v5e")
    mesh.roofline_prices = RooflinePrices(profile, 1.0 / float(profile.sustained_hbm_bandwidth))
    return mesh

# pairs of shapes whose dims have the same gcd with 8 (so the second reuses the first one's plan when
# that plan pads nothing); the last two pad on most splits
SHAPE_PAIRS = [
    ("f32[64,48]", "bf16[8,24]"),            # gcd (8, 8)
    ("f32[16,4,40]", "f16[8,12,8]"),         # gcd (8, 4, 8)
    ("s4[32,2,8,16]", "f32[8,6,24,8]"),      # gcd (8, 2, 8, 8), a sub-byte type
    ("f32[6,10]", "s8[14,2]"),               # gcd (2, 2): uneven over 4 or 8 tiles
    ("pred[3,24,5]", "f32[5,8,9]"),          # gcd (1, 8, 1)
]


def _divisor_split(rng, n: int, rank: int) -> tuple[int, ...]:
    """Random tile counts per dim whose product divides n."""
    tiles = [1] * rank
    left = n
    for _ in range(rng.integers(0, 4)):
        fs = [f for f in range(2, left + 1) if left % f == 0]
        if not fs:
            break
        f = int(rng.choice(fs))
        tiles[int(rng.integers(rank))] *= f
        left //= f
    return tuple(tiles)


def _random_sharding(rng, mesh, rank: int) -> H:
    n = mesh.num_devices
    if rng.random() < 0.5:
        # along the mesh's axes: each axis to one dim (or unused), in mesh order or reversed
        dims = [[] for _ in range(rank)]
        for a in range(mesh.ndim):
            d = int(rng.integers(-1, rank))
            if d >= 0:
                dims[d].append(a)
        if rng.random() < 0.5:
            dims = [list(reversed(x)) for x in dims]
        return mesh.axes_to_sharding([tuple(x) for x in dims])
    tiles = _divisor_split(rng, n, rank)
    rep = n // math.prod(tiles)
    if rep == n:
        return H.replicated()
    devices = rng.permutation(n)
    if rep == 1:
        return H.tiled(devices.reshape(tiles))
    return H.tiled(devices.reshape(tiles + (rep,)), last_tile_dim_replicate=True)


def _fresh_cost(shape, src, dst, mesh) -> float:
    reshard.clear_cache()
    return plan(shape, src, dst, mesh).total_cost


@pytest.mark.parametrize("mesh_name", sorted(MESHES))
@pytest.mark.parametrize("first, second", SHAPE_PAIRS)
def test_reused_plan_equals_fresh_plan(mesh_name, first, second):
    mesh = MESHES[mesh_name]
    rng = np.random.default_rng(sum(map(ord, mesh_name + first)))
    rank = parse_shape(first).rank
    reused = nonzero = 0
    for _ in range(40):
        src, dst = _random_sharding(rng, mesh, rank), _random_sharding(rng, mesh, rank)
        want_first = _fresh_cost(first, src, dst, mesh)
        want_second = _fresh_cost(second, src, dst, mesh)
        reshard.clear_cache()
        assert resharding_cost(first, src, dst, mesh) == want_first
        recipes = [r for r in reshard._RECIPE_CACHE.values() if r is not None]
        got = resharding_cost(second, src, dst, mesh)  # from the first shape's plan when it is even
        assert got == want_second, (str(src), str(dst))
        reused += bool(recipes)
        nonzero += want_second != 0
        # and again from a warm cache: the exact-shape entry
        assert resharding_cost(second, src, dst, mesh) == want_second
    assert nonzero > 10   # the pairs really communicate
    if (first, second) not in SHAPE_PAIRS[-2:]:
        assert reused > 10   # and the even shapes really reuse plans


def test_uneven_plans_are_reused_only_for_the_same_decisions():
    """f32[6,64] over 4 row tiles pads (6 = 2*2 + 2); its plan re-pads with a collective-permute of one
    row. f32[10,64] pads differently but its re-pad moves one row too (the same decisions): it replays
    the 6-row plan for its own bytes; f32[8,64] pads nothing (no re-pad: another decision) and is
    planned in full; f32[6,128] (the other dim only sizes bytes) replays the 6-row plan. Every figure
    is the fresh planner's."""
    mesh = MESHES["2x4"]
    src = H.parse("{devices=[4,1,2]<=[8] last_tile_dim_replicate}")
    dst = H.parse("{devices=[2,1,4]<=[8] last_tile_dim_replicate}")
    shapes = ("f32[6,64]", "f32[10,64]", "f32[8,64]", "f32[6,128]")
    want = {s: _fresh_cost(s, src, dst, mesh) for s in shapes}
    assert len(set(want.values())) == 4
    reshard.clear_cache()
    assert resharding_cost("f32[6,64]", src, dst, mesh) == want["f32[6,64]"]
    (entries,) = reshard._RECIPE_CACHE.values()
    assert len(entries) == 1
    (decisions,) = [reshard._TESTS[tid] for tid, _ in entries]
    assert ((1, 0, 4, 2), 1) in decisions   # the re-pad from 4 to 2 row tiles moves 1 row
    assert resharding_cost("f32[10,64]", src, dst, mesh) == want["f32[10,64]"]
    assert len(entries) == 1   # replayed: the same decisions
    assert resharding_cost("f32[8,64]", src, dst, mesh) == want["f32[8,64]"]
    assert len(entries) == 2   # no re-pad on 8 rows: planned and recorded
    assert resharding_cost("f32[6,128]", src, dst, mesh) == want["f32[6,128]"]
    assert len(entries) == 2   # replayed from the 6-row plan


def _drop_unit_dims_pairs(rng, mesh, n_pairs: int):
    """Random (src, dst) pairs of rank 4 with two dims that neither side splits, and the same pair
    written for rank 3 (one of those dims removed): both reduce to one canonical pair."""
    out = []
    while len(out) < n_pairs:
        a, b = _random_sharding(rng, mesh, 2), _random_sharding(rng, mesh, 2)

        def widen(s: H, rank: int, at: tuple[int, ...]) -> H:
            if s.kind != "tiled":
                return s
            tiles = list(s.tile_dims)
            for d in at:
                tiles.insert(d, 1)
            ta = np.asarray(s.tile_assignment).reshape(tuple(tiles) + ((-1,) if s.replication_factor > 1 else ()))
            return H.tiled(ta, last_tile_dim_replicate=s.replication_factor > 1)

        out.append(((widen(a, 4, (0, 2)), widen(b, 4, (0, 2))), (widen(a, 3, (1,)), widen(b, 3, (1,)))))
    return out


@pytest.mark.parametrize("mesh_name", sorted(MESHES) + ["2x2x2 tpu-v5e"])
def test_canonical_pairs_equal_full_plans(mesh_name):
    """Dims split by neither side are dropped (their product kept as one trailing dim) and a recorded
    plan is replayed for every shape whose dims pass its tile-count test: random pairs on rank 4 and
    rank 3 (one canonical pair for both) and shapes that are even, padded, sub-byte or share padded dims,
    each cost against a fresh full plan (nothing cached), from a cache warmed in random order, and
    through ``resharding_cost_table``."""
    mesh = MESHES[mesh_name] if mesh_name in MESHES else _device_mesh()
    rng = np.random.default_rng(sum(map(ord, mesh_name)) + 11)
    shapes4 = ["f32[3,16,5,40]", "bf16[7,8,1,24]", "s4[2,32,9,12]", "f32[1,6,3,10]", "f32[5,12,2,6]"]
    shapes3 = ["f32[16,5,40]", "f32[8,7,24]", "s4[32,18,12]", "f32[6,30,10]"]
    pairs = _drop_unit_dims_pairs(rng, mesh, 25)
    cases = []
    for (s4, d4), (s3, d3) in pairs:
        cases += [(sh, s4, d4) for sh in shapes4] + [(sh, s3, d3) for sh in shapes3]
    want = [_fresh_cost(sh, s, d, mesh) for sh, s, d in cases]
    assert sum(w != 0 for w in want) > len(want) // 3   # the pairs really communicate
    reshard.clear_cache()
    order = rng.permutation(len(cases))
    got = {int(k): resharding_cost(cases[k][0], cases[k][1], cases[k][2], mesh) for k in order}
    assert [got[k] for k in range(len(cases))] == want
    # the canonical pairs' recorded plans (GSPMD's shifted all-to-all pairs are planned by the gcd path instead)
    replayed = sum(len(e) for k, e in reshard._RECIPE_CACHE.items() if k[0] == "canonical")
    assert replayed < len({(s, d) for _, s, d in cases}) + len(cases) // 2   # plans really are shared
    # the matrix form: all pairs of one shape at once, from cold caches
    reshard.clear_cache()
    srcs = [s for (s4, _), _ in pairs for s in [s4]]
    dsts = [d for (_, d4), _ in pairs for d in [d4]]
    for sh in shapes4:
        table = reshard.resharding_cost_table(sh, srcs, dsts, mesh)
        for i, s in enumerate(srcs):
            for j, d in enumerate(dsts):
                ref = _fresh_cost(sh, s, d, mesh) if (i + j) % 7 == 0 else None
                if ref is not None:
                    assert table[i, j] == ref, (sh, str(s), str(d))
        reshard.clear_cache()
        table_cold = reshard.resharding_cost_table(sh, srcs, dsts, mesh)
        assert np.array_equal(table, table_cold)


def test_layout_memo_shared_across_meshes_is_exact():
    """The geometry memo is keyed on device arrays only (no mesh): planning on one mesh and then on
    another with the same device count gives each mesh's fresh figures."""
    rng = np.random.default_rng(7)
    a, b = MESHES["2x4"], MESHES["2x2x2"]
    pairs = [(_random_sharding(rng, a, 3), _random_sharding(rng, a, 3)) for _ in range(30)]
    want = [(_fresh_cost("f32[16,8,32]", s, d, a), _fresh_cost("f32[16,8,32]", s, d, b)) for s, d in pairs]
    reshard.clear_cache()
    got = [(resharding_cost("f32[16,8,32]", s, d, a), resharding_cost("f32[16,8,32]", s, d, b)) for s, d in pairs]
    assert got == want
    assert any(x != y for x, y in want)  # the two meshes price differently


def test_cost_graph_independent_of_cache_state():
    """The cost graph of a sample on a refined 3-axis mesh is the same built from cold caches and built
    after other modules and meshes have filled them (the layout memo is shared across meshes)."""
    from pathlib import Path

    from hloshard.autoshard import build_graph
    from hloshard.hlo import parse_file

    root = Path(__file__).resolve().parents[1] / "samples"

    def edges(name, spec="4x2"):
        module = parse_file(str(root / name))
        return build_graph(module, DeviceMesh.for_module(module, spec), keep="io").edge_float

    reshard.clear_cache()
    cold = edges("mlp_train_step.pre.hlo")
    reshard.clear_cache()
    edges("conv_layer.pre.hlo", "2x4")
    edges("mlp_train_step.pre.hlo", "2x4")
    warm = edges("mlp_train_step.pre.hlo")
    assert len(cold) == len(warm) > 0
    assert all(np.array_equal(x, y) for x, y in zip(cold, warm))


@pytest.mark.parametrize("mesh_name", sorted(MESHES))
def test_shifted_all_to_all_pairs_are_planned_in_full(mesh_name):
    """GSPMD's shifted all-to-all (``reshard._shifted_pair``) reads dim positions, which the canonical
    reduction drops: the cached cost and the table must still equal a fresh full plan, with and without
    dims split by neither side (the plan is one all-to-all, then a local slice)."""
    mesh = MESHES[mesh_name]
    cases = [("f32[16,16]", "{devices=[1,4,2]<=[4,2]T(1,0) last_tile_dim_replicate}", "{devices=[4,2]<=[4,2]T(1,0)}"),
             ("f32[8,16,8]", "{devices=[1,1,4,2]<=[4,2]T(1,0) last_tile_dim_replicate}", "{devices=[1,4,2]<=[4,2]T(1,0)}"),
             ("f32[8,16,3,12]", "{devices=[1,4,1,1,2]<=[8] last_tile_dim_replicate}", "{devices=[4,1,1,2]<=[8]}")]
    for shape, s, d in cases:
        src, dst = H.parse(s), H.parse(d)
        want = _fresh_cost(shape, src, dst, mesh)
        assert [x.kind for x in plan(shape, src, dst, mesh).steps] == ["all-to-all", "dynamic-slice"]
        reshard.clear_cache()
        assert resharding_cost(shape, src, dst, mesh) == want
        reshard.clear_cache()
        rank = shape.count(",") + 1
        others = [H.parse("{replicated}"), dst, H.parse("{devices=[8" + ",1" * (rank - 1) + "]<=[8]}")]
        table = reshard.resharding_cost_table(shape, [src, others[0]], others, mesh)
        assert table[0, 1] == want
        assert table[0, 0] == _fresh_cost(shape, src, others[0], mesh)
        assert table[0, 2] == _fresh_cost(shape, src, others[2], mesh)


def test_table_on_scalars_and_vectors():
    # rank 0 and 1: no shifted pattern to look for (an index error once, in every solve)
    mesh = MESHES["2x4"]
    rep = H.parse("{replicated}")
    part = H.parse("{devices=[8]<=[8] last_tile_dim_replicate}")
    assert reshard.resharding_cost_table("f32[]", [rep, part], [rep, part], mesh).tolist() == [[0.0, 0.0], [0.0, 0.0]]
    vec = [rep, H.parse("{devices=[2,4]<=[8] last_tile_dim_replicate}"), H.parse("{devices=[8]<=[8]}")]
    table = reshard.resharding_cost_table("f32[64]", vec, vec, mesh)
    assert table.tolist() == [[_fresh_cost("f32[64]", s, d, mesh) for d in vec] for s in vec]
