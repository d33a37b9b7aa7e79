"""Reshape sharding inference in both directions, with merges, splits, dropped splits, uneven and
non-divisible dims, partial replication, and the seed (openxla/xla issue #12392)."""

from __future__ import annotations

import pytest

from hloshard.cost import reshape as R
from hloshard.errors import InputError
from hloshard.hlo.sharding import HloSharding as H
from hloshard.mesh import DeviceMesh

MESH = DeviceMesh.parse("2x4", alpha="1,1", beta="0.01,1")


def test_groups():
    g = R.reshape_groups([32, 16, 1000, 256], [512, 1000, 256])
    assert [(x.in_dims, x.out_dims) for x in g] == [((0, 1), (0,)), ((2,), (1,)), ((3,), (2,))]
    g = R.reshape_groups([6, 1, 4], [2, 3, 4, 1])
    assert [(x.in_dims, x.out_dims) for x in g] == [((0,), (0, 1)), ((1,), ()), ((2,), (2,)), ((), (3,))]
    with pytest.raises(InputError, match="element count"):
        R.reshape_groups([4, 4], [3, 5])


def test_seed_forward_drops_the_minor_split():
    # [2,4,1,1] on [32,16,...] -> the 16-dim split cannot merge into 512 (32 is not fully split):
    # XLA's ReshapeSharding keeps [2] and replicates the 4 -> [2,1,1,4] last_tile_dim_replicate
    inf = R.infer_output("f16[32,16,1000,256]", "f16[512,1000,256]", H.parse("{devices=[2,4,1,1]0,1,2,3,4,5,6,7}"))
    assert inf.sharding == H.parse("{devices=[2,1,1,4]0,1,2,3,4,5,6,7 last_tile_dim_replicate}")
    assert not inf.exact
    assert inf.source_needed == H.parse("{devices=[2,1,1,1,4]<=[8] last_tile_dim_replicate}")
    assert inf.groups[0].status == "dropped" and inf.groups[0].dropped == 4 and inf.groups[0].kept_tiles == 2
    assert "gathered" in inf.notes[0]
    assert R.xla_reshape_sharding("f16[32,16,1000,256]", "f16[512,1000,256]",
                                  H.parse("{devices=[2,4,1,1]<=[8]}")) == inf.sharding
    assert R.output_shardings_without_communication("f16[32,16,1000,256]", "f16[512,1000,256]",
                                                    H.parse("{devices=[2,4,1,1]<=[8]}"), MESH) == []


def test_seed_backward_required_operand():
    out = H.parse("{devices=[2,1,1,4]0,1,2,3,4,5,6,7 last_tile_dim_replicate}")
    req = R.required_operand_sharding("f16[32,16,1000,256]", "f16[512,1000,256]", out, MESH)
    assert req == H.parse("{devices=[2,1,1,1,4]0,1,2,3,4,5,6,7 last_tile_dim_replicate}")
    assert str(req) == "{devices=[2,1,1,1,4]<=[8] last_tile_dim_replicate}"
    assert R.infer_operand("f16[32,16,1000,256]", "f16[512,1000,256]", out).exact


@pytest.mark.parametrize("a,b,src,want", [
    # merge: the major dim fully split lets the minor one continue
    ("f32[2,16]", "f32[32]", "{devices=[2,4]<=[8]}", "{devices=[8]<=[8]}"),
    # merge: only the major dim split
    ("f32[8,4]", "f32[32]", "{devices=[8,1]<=[8]}", "{devices=[8]<=[8]}"),
    # split: 8 tiles over (2,16): dim 2 fully split, the rest (4) on 16
    ("f32[32]", "f32[2,16]", "{devices=[8]<=[8]}", "{devices=[2,4]<=[8]}"),
    # split: 8 tiles over (16,2): all on the major dim
    ("f32[32]", "f32[16,2]", "{devices=[8]<=[8]}", "{devices=[8,1]<=[8]}"),
    # partial replication passes through (device order kept)
    ("f32[32,10,16]", "f32[8,4,10,16]", "{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}",
     "{devices=[2,1,1,1,4]<=[8] last_tile_dim_replicate}"),
    # explicit device order carries over
    ("f32[16,4]", "f32[64]", "{devices=[8,1]7,6,5,4,3,2,1,0}", "{devices=[8]7,6,5,4,3,2,1,0}"),
    # untouched dims keep their split
    ("f32[4,6,10]", "f32[4,60]", "{devices=[4,1,1,2]<=[8] last_tile_dim_replicate}",
     "{devices=[4,1,2]<=[8] last_tile_dim_replicate}"),
])
def test_exact_carry_over(a, b, src, want):
    inf = R.infer_output(a, b, H.parse(src))
    assert inf.exact
    assert inf.sharding == H.parse(want)
    assert R.output_shardings_without_communication(a, b, H.parse(src), MESH)[0] == H.parse(want)
    # and back: the output sharding requires exactly the source sharding
    back = R.infer_operand(a, b, H.parse(want))
    assert back.exact and back.sharding == H.parse(src)


def test_uneven_split_is_reported():
    # 6 rows over 4 tiles: ceil tiles of 2 rows (the last empty) are not contiguous blocks of [24]
    inf = R.infer_output("f32[6,4]", "f32[24]", H.parse("{devices=[4,2]<=[8]}"))
    assert not inf.exact and inf.groups[0].status == "uneven"
    assert "uneven" in inf.groups[0].detail
    assert inf.sharding == H.replicated()


def test_non_divisible_factorisation_is_reported():
    # 8 blocks of 3 elements do not land on rows of [6,4]; the largest factor that does (2) is kept
    inf = R.infer_output("f32[24]", "f32[6,4]", H.parse("{devices=[8]<=[8]}"))
    assert not inf.exact and inf.groups[0].status == "uneven"
    assert "non-divisible" in inf.groups[0].detail
    assert inf.sharding.tile_dims == (2, 1) and inf.sharding.last_tile_dim_replicate
    assert inf.source_needed == H.parse("{devices=[2,4]<=[8] last_tile_dim_replicate}")


def test_sub_axis_split_is_reported():
    # dim 8 split 4 ways over mesh axis 1, reshaped to (2,4): tiles [2,2] split mesh axis 1 into sub-axes
    src = H.parse("{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}")
    inf = R.infer_output("f32[2,8]", "f32[2,2,4]", src)
    assert inf.exact
    assert inf.sharding.tile_dims == (1, 2, 2)
    axes, why = R.mesh_axes_report(inf.sharding, 3, MESH)
    assert axes is None and "axes" in why
    axes, why = R.mesh_axes_report(src, 2, MESH)
    assert axes == [[], [1]] and why == ""


def test_replication_can_be_sliced_without_communication():
    outs = R.output_shardings_without_communication("f32[32,10,16]", "f32[8,4,10,16]",
                                                    H.parse("{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}"), MESH)
    assert outs[0] == H.parse("{devices=[2,1,1,1,4]<=[8] last_tile_dim_replicate}")
    assert H.parse("{devices=[2,4,1,1]<=[8]}") in outs  # the 4 replicas each slice a quarter of dim 1
    assert len(outs) == len(set(outs))


def test_required_operand_when_output_splits_more():
    # [1,8] on [64,32] cannot be expressed on [2048] (the minor dim is split): the operand must be
    # replicated and each device slices after the reshape
    inf = R.infer_operand("f32[2048]", "f32[64,32]", H.parse("{devices=[1,8]<=[8]}"))
    assert not inf.exact and inf.sharding == H.replicated()


def test_errors():
    with pytest.raises(InputError, match="rank"):
        R.infer_output("f32[4,4]", "f32[16]", H.parse("{devices=[2,2,2]<=[8]}"))
    with pytest.raises(InputError, match="element count"):
        R.infer_operand("f32[4,4]", "f32[15]", H.parse("{devices=[8]<=[8]}"))
    with pytest.raises(InputError, match="manual"):
        R.infer_output("f32[4,4]", "f32[16]", H.parse("{devices=[2,2,2]<=[8] last_tile_dims={manual}}"))
    # replicated / maximal pass through
    assert R.infer_output("f32[4,4]", "f32[16]", H.replicated()).sharding == H.replicated()


# ------------------------------------------------------------------------------------------------
# property: an exact inference means every device holds the same elements on both sides


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
import numpy as np  # noqa: E402


def _elements(dims, sharding, device):
    """Flat (row-major) indices of the elements ``device`` holds."""
    x = np.arange(int(np.prod(dims))).reshape(dims)
    if sharding.kind != "tiled":
        return set(x.ravel().tolist())
    off = sharding.shard_offsets(dims, device)
    shp = sharding.shard_shape(dims, device)
    return set(x[tuple(slice(o, o + s) for o, s in zip(off, shp))].ravel().tolist())


@st.composite
def reshapes(draw):
    # groups of factors: each group is split differently on the two sides
    factors = draw(st.lists(st.sampled_from([1, 2, 2, 4, 3]), min_size=1, max_size=4))
    a, b = [], []
    for f in factors:
        x = draw(st.sampled_from([1, 2, 4]))
        if draw(st.booleans()):
            a += [f, x]
            b += [f * x]
        else:
            a += [f * x]
            b += [f, x]
    return a, b


@st.composite
def sharding_for(draw, rank):
    n = 8
    tiles = [1] * rank
    left = n
    for d in draw(st.permutations(list(range(rank)))):
        f = draw(st.sampled_from([1, 2, 4, 8]))
        if left % f == 0:
            tiles[d] = f
            left //= f
    perm = np.arange(n) if draw(st.booleans()) else np.array(draw(st.permutations(list(range(n)))))
    if left == n:
        return H.replicated()
    if left == 1:
        return H.tiled(perm.reshape(tiles))
    return H.tiled(perm.reshape(tiles + [left]), last_tile_dim_replicate=True)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_inference_keeps_every_devices_elements(data):
    a, b = data.draw(reshapes())
    src = data.draw(sharding_for(len(a)))
    fwd = R.infer_output(a, b, src)
    # what the operand must look like before the reshape holds the output's elements on every device
    for d in range(8):
        got = _elements(b, fwd.sharding, d)
        need = _elements(a, fwd.source_needed, d)
        if fwd.exact:
            assert fwd.source_needed == src
            assert got == _elements(a, src, d)
        else:
            assert got == need  # after the gather the reshape is exact again
            assert _elements(a, src, d) <= need  # gathering only adds data
    back = R.infer_operand(a, b, fwd.sharding)
    for d in range(8):
        # the required operand holds at least what the device's output tile needs (a local slice)
        assert _elements(b, fwd.sharding, d) <= _elements(a, back.sharding, d)
        if back.exact:
            assert _elements(b, fwd.sharding, d) == _elements(a, back.sharding, d)


# ------------------------------------------------------------------------------------------------
# the strategy handler's inference on mesh axes gives the layouts of the HloSharding inference

from hloshard.hlo.shape import Shape  # noqa: E402
from hloshard.strategy import reshape as SR  # noqa: E402
from hloshard.strategy.base import MeshInfo, is_mesh_spec  # noqa: E402

# (operand dims, output dims): part128's (the 128-partition per-device program of issue 26) and
# merges, splits, dropped and uneven splits, size-1 dims
AXES_CASES = [
    ((1, 32, 256, 64), (32, 256, 64)), ((32, 256, 128), (32, 256, 2, 64)), ((32, 256, 2, 64), (32, 256, 128)),
    ((2, 256, 1024), (2, 256, 16, 64)), ((16, 2, 256, 64), (32, 256, 64)), ((32, 256, 64), (16, 2, 256, 64)),
    ((2, 255), (2, 255, 1)), ((1, 1, 64), (64,)), ((8, 4, 10, 16), (32, 10, 16)), ((32, 10, 16), (8, 4, 10, 16)),
    ((32, 16), (4, 8, 16)), ((24, 16), (3, 8, 16)), ((1024,), (4, 256)), ((6, 4), (24,)), ((12, 10), (120,)),
    ((4, 6, 2), (2, 12, 2)), ((), (1,)),
]
AXES_MESHES = ["2x4", "4x2", "2x2x2", "2x8x2x4"]


def _layouts_compared(mesh_text, cases):
    """Per case and layout: the axes inference against ``cost.reshape`` (required operand layout of
    every output layout, no-communication output layouts of every operand layout); returns how many
    layouts the axes inference answered and how many it passed on (a sub-axis)."""
    minfo = MeshInfo(DeviceMesh.parse(mesh_text))
    answered = passed = 0
    for a, b in cases:
        sa, sb = Shape("f32", a), Shape("f32", b)
        for spec in minfo.enumerate(b):
            spec_in, _ = SR.axes_inference(b, a, spec, minfo.shape, False)
            want = SR.required_by_sharding(sa, sb, spec, minfo)
            if spec_in is None:
                passed += 1
                assert not is_mesh_spec(want), (a, b, spec, want)   # a sub-axis: not a spec
            else:
                answered += 1
                assert spec_in == want, (a, b, spec)
        for spec in minfo.enumerate(a):
            got = SR._axes_no_comm(a, b, spec, minfo)
            want = SR.forward_by_sharding(sa, sb, spec, minfo)
            if got is None:
                passed += 1
                assert want and not is_mesh_spec(want[0]), (a, b, spec, want)
            else:
                answered += 1
                assert got == [s for s in want if is_mesh_spec(s)], (a, b, spec)
    return answered, passed


@pytest.mark.parametrize("mesh_text", AXES_MESHES)
def test_axes_inference_agrees_with_the_sharding_inference(mesh_text):
    small = [c for c in AXES_CASES if len(c[0]) <= 3 and len(c[1]) <= 3] if mesh_text == "2x8x2x4" else AXES_CASES
    answered, passed = _layouts_compared(mesh_text, small)
    assert answered > 10 * passed   # the HloSharding path is the exception
