"""DeviceMesh: parsing, module fallback, sharding <-> mesh-axes mapping, replica groups, CLI options."""

from __future__ import annotations

import itertools
import math
from types import SimpleNamespace

import click
import numpy as np
import pytest
from click.testing import CliRunner

from hloshard.commands.options import BYTE_SIZE, mesh_from_options, mesh_options
from hloshard.errors import InputError, UsageError
from hloshard.hlo.sharding import HloSharding
from hloshard.mesh import DeviceMesh, DimAxes, ShardingMeshMismatch

P = HloSharding.parse


# ------------------------------------------------------------------------------------------ parsing
def test_parse_specs():
    m = DeviceMesh.parse("2x4")
    assert m.shape == (2, 4) and m.ndim == 2 and m.num_devices == 8 and m.is_iota
    assert m.device_ids.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert m.alpha == (1.0, 1.0) and m.beta == (1.0, 1.0)
    assert DeviceMesh.parse("8").shape == (8,)
    assert DeviceMesh.parse(" 2x2x2 ").shape == (2, 2, 2)
    m = DeviceMesh.parse("2x4", device_ids="0,2,4,6,1,3,5,7", alpha="1,2", beta="0.01,1")
    assert m.device_ids.tolist() == [[0, 2, 4, 6], [1, 3, 5, 7]] and not m.is_iota
    assert m.alpha == (1.0, 2.0) and m.beta == (0.01, 1.0)
    assert m.coords(6) == (0, 3)
    assert str(m) == "2x4" and m.to_json()["device_ids"] == [0, 2, 4, 6, 1, 3, 5, 7]
    assert DeviceMesh.parse("2x4") == DeviceMesh((2, 4)) != m
    assert DeviceMesh.from_json(m.to_json()) == m
    with pytest.raises(UsageError):
        DeviceMesh.from_json({"shape": [2, 2], "device_ids": [0, 1]})
    with pytest.raises(UsageError):
        DeviceMesh.from_json({"device_ids": [0, 1]})


@pytest.mark.parametrize("kwargs,message", [
    (dict(spec="2y4"), "invalid --mesh '2y4'"),
    (dict(spec=""), "invalid --mesh"),
    (dict(spec="0x4"), "positive"),
    (dict(spec="2x4", device_ids="0,1,2"), "lists 3 devices but the mesh 2x4 has 8"),
    (dict(spec="2x2", device_ids="0,1,1,2"), "permutation of 0..3"),
    (dict(spec="2x2", device_ids="0,a,1,2"), "'a' is not a number"),
    (dict(spec="2x4", alpha="1"), "--alpha has 1 value(s) but the mesh 2x4 has 2 axes"),
    (dict(spec="2x4", beta="1,2,3"), "--beta has 3 value(s)"),
    (dict(spec="2x4", beta="1,,2"), "invalid --beta"),
    (dict(spec="2x4", alpha="1,-1"), "non-negative"),
    (dict(spec="2x4", beta="1,x"), "'x' is not a number"),
])
def test_parse_errors(kwargs, message):
    with pytest.raises(UsageError) as info:
        DeviceMesh.parse(**kwargs)
    assert message in str(info.value)


def test_for_module():
    mod8 = SimpleNamespace(num_partitions=8)
    assert DeviceMesh.for_module(mod8).shape == (8,)
    assert DeviceMesh.for_module(mod8, "2x4").shape == (2, 4)
    assert DeviceMesh.for_module(mod8, beta="0.5").beta == (0.5,)
    with pytest.raises(UsageError, match=r"--mesh 2x2 has 4 devices but the module has num_partitions=8"):
        DeviceMesh.for_module(mod8, "2x2")
    for n in (None, 1):
        with pytest.raises(UsageError, match="pass --mesh"):
            DeviceMesh.for_module(SimpleNamespace(num_partitions=n))
        assert DeviceMesh.for_module(SimpleNamespace(num_partitions=n), "2x2").num_devices == 4


# ------------------------------------------------------------------------------------ sharding <-> axes
def test_axes_to_sharding_examples():
    m = DeviceMesh.parse("2x4")
    assert str(m.axes_to_sharding([(0,), (1,)])) == "{devices=[2,4]<=[8]}"
    assert str(m.axes_to_sharding([(1,), (0,)])) == "{devices=[4,2]<=[2,4]T(1,0)}"
    assert str(m.axes_to_sharding([(1, 0), ()])) == "{devices=[8,1]<=[2,4]T(1,0)}"
    assert str(m.axes_to_sharding([(), ()])) == "{replicated}"
    # the seed example: the operand sharding the reshape requires
    req = m.axes_to_sharding([(0,), (), (), ()])
    assert req == P("{devices=[2,1,1,1,4]0,1,2,3,4,5,6,7 last_tile_dim_replicate}")
    assert str(req) == "{devices=[2,1,1,1,4]<=[8] last_tile_dim_replicate}"
    # xla_autosharding.md 1.1: 2x2 ids 0..3, tensor dim 0 along mesh dim 1
    m22 = DeviceMesh.parse("2x2")
    assert m22.axes_to_sharding([(1,), ()]) == P("{devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}")
    # explicit device ids keep XLA's order convention
    mx = DeviceMesh.parse("2x2", device_ids="3,1,0,2")
    assert str(mx.axes_to_sharding([(1,), (0,)])) == "{devices=[2,2]3,0,1,2}"
    assert str(mx.axes_to_sharding([(0,)])) == "{devices=[2,2]1,3,0,2 last_tile_dim_replicate}"
    with pytest.raises(ValueError):
        m.axes_to_sharding([(0,), (0,)])
    with pytest.raises(ValueError):
        m.axes_to_sharding([(2,)])


def _assignments(ndim: int, rank: int):
    """Every assignment of distinct mesh axes (ordered tuples) to `rank` tensor dims."""
    axes = list(range(ndim))

    def rec(t, free):
        if t == rank:
            yield []
            return
        for k in range(len(free) + 1):
            for combo in itertools.permutations(free, k):
                for rest in rec(t + 1, [a for a in free if a not in combo]):
                    yield [combo] + rest

    yield from rec(0, axes)


@pytest.mark.parametrize("spec,ids", [
    ("2x4", None), ("2x2x2", None), ("8", None), ("4x2", "7,6,5,4,3,2,1,0"), ("2x1x4", None),
    ("2x3", "0,3,1,4,2,5"), ("2x2x2", "0,4,2,6,1,5,3,7"),
])
def test_round_trip_axes(spec, ids):
    m = DeviceMesh.parse(spec, device_ids=ids)
    count = 0
    for rank in (1, 2, 3):
        for assignment in _assignments(m.ndim, rank):
            s = m.axes_to_sharding(assignment)
            got = m.sharding_to_axes(s, rank)
            # axes of size 1 carry no split: they come back unused
            want = tuple(tuple(a for a in d if m.shape[a] > 1) for d in assignment)
            assert tuple(got) == want, (assignment, str(s))
            used = {a for d in want for a in d}
            assert got.unused_axes == tuple(a for a in range(m.ndim) if a not in used)
            # V1 / V2 forms of the same sharding map the same way
            if s.is_tiled:
                text = (f"{{devices=[{','.join(map(str, s.tile_assignment_dims))}]"
                        f"{','.join(map(str, s.devices))}"
                        f"{' last_tile_dim_replicate' if s.last_tile_dim_replicate else ''}}}")
                v1 = P(text)
                assert not v1.is_iota and v1 == s
                assert m.sharding_to_axes(v1, rank) == got
            count += 1
    assert count >= 9


def test_sharding_to_axes_examples():
    m = DeviceMesh.parse("2x4")
    got = m.sharding_to_axes(P("{devices=[2,1,1,1,4]0,1,2,3,4,5,6,7 last_tile_dim_replicate}"), 4)
    assert got == DimAxes([(0,), (), (), ()], [1]) and got.used_axes == (0,)
    got = m.sharding_to_axes(P("{devices=[2,4,1,1]0,1,2,3,4,5,6,7}"), 4)
    assert tuple(got) == ((0,), (1,), (), ()) and got.unused_axes == ()
    got = m.sharding_to_axes(P("{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}"), 2)
    assert tuple(got) == ((), (1,)) and got.unused_axes == (0,)
    # replication group order does not matter (XLA sorts it)
    got = m.sharding_to_axes(P("{devices=[4,2]<=[2,4]T(1,0)}"), 2)
    assert tuple(got) == ((1,), (0,))
    assert m.sharding_to_axes(HloSharding.replicated(), 3) == DimAxes([(), (), ()], [0, 1])
    assert m.sharding_axes(P("{devices=[8,1]<=[2,4]T(1,0)}"), 2) == (1, 0)


@pytest.mark.parametrize("text,rank,message", [
    ("{devices=[2,2,2]<=[8] last_tile_dim_replicate}", 2, "not products of distinct whole axes"),
    ("{devices=[4,1,2]<=[8] last_tile_dim_replicate}", 2, "device order matches no assignment"),
    ("{devices=[2,4]0,1,2,3,4,5,7,6}", 2, "device order matches no assignment"),
    ("{devices=[2,2]<=[4]}", 2, "uses 4 devices but the mesh 2x4 has 8"),
    ("{devices=[2,4]<=[8]}", 3, "tiles 2 dims but the tensor has rank 3"),
    ("{maximal device=1}", 2, "one device"),
    ("{manual}", 2, "manually partitioned"),
    ("{{replicated}, {replicated}}", 2, "tuple"),
    ("{devices=[2,2,2]<=[8] last_tile_dims={manual}}", 2, "subgroups"),
])
def test_sharding_to_axes_mismatch(text, rank, message):
    m = DeviceMesh.parse("2x4")
    for _ in range(2):  # the second call is served from the cache and must raise too
        with pytest.raises(ShardingMeshMismatch) as info:
            m.sharding_to_axes(P(text), rank)
        assert message in str(info.value)
        assert isinstance(info.value, InputError)


# ------------------------------------------------------------------------------------ replica groups
def test_replica_groups():
    m = DeviceMesh.parse("2x4")
    assert m.replica_groups([1]) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert m.replica_groups([0]) == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert m.replica_groups([0, 1]) == [list(range(8))]
    assert m.replica_groups([]) == [[d] for d in range(8)]
    assert m.replica_groups([1, 0], sort=False) == [[0, 4, 1, 5, 2, 6, 3, 7]]
    m3 = DeviceMesh.parse("2x2x2")
    assert m3.replica_groups([0, 2]) == [[0, 1, 4, 5], [2, 3, 6, 7]]
    mx = DeviceMesh.parse("2x2", device_ids="3,1,0,2")
    assert mx.replica_groups([1]) == [[0, 2], [1, 3]]
    assert mx.replica_groups([1], sort=False) == [[3, 1], [0, 2]]
    with pytest.raises(ValueError):
        m.replica_groups([2])


def test_axes_for_replica_groups():
    m = DeviceMesh.parse("2x4")
    assert m.axes_for_replica_groups([[0, 1, 2, 3], [4, 5, 6, 7]]) == (1,)
    assert m.axes_for_replica_groups([[4, 0], [1, 5], [6, 2], [3, 7]]) == (0,)
    assert m.axes_for_replica_groups([list(range(8))]) == (0, 1)
    assert m.axes_for_replica_groups([[0, 4, 1, 5, 2, 6, 3, 7]]) == (1, 0)
    assert m.axes_for_replica_groups([]) == (0, 1)
    assert m.axes_for_replica_groups([[d] for d in range(8)]) == ()
    assert m.axes_for_replica_groups([[0, 1], [2, 3], [4, 5], [6, 7]]) is None
    m3 = DeviceMesh.parse("2x1x4")
    assert m3.axes_for_replica_groups([[0, 1, 2, 3], [4, 5, 6, 7]]) == (2,)
    for axes in itertools.permutations([0, 1, 2]):
        mm = DeviceMesh.parse("2x2x2", device_ids="0,4,2,6,1,5,3,7")
        for k in range(1, 4):
            sub = axes[:k]
            assert mm.axes_for_replica_groups(mm.replica_groups(sub, sort=False)) == sub


# ------------------------------------------------------------------------------------ click options
@click.command()
@mesh_options
@click.option("--budget", type=BYTE_SIZE, default=None)
def _cmd(mesh, device_ids, alpha, beta, budget):
    m = mesh_from_options(None, mesh, device_ids, alpha, beta)
    click.echo(f"{m!r} {budget}")


def test_options_cli():
    r = CliRunner().invoke(_cmd, ["--mesh", "2x4", "--alpha", "1,1", "--beta", "0.01,1", "--budget", "64MiB"])
    assert r.exit_code == 0, r.output
    assert r.output.strip() == "DeviceMesh(2x4, alpha=[1.0, 1.0], beta=[0.01, 1.0]) 67108864"
    r = CliRunner().invoke(_cmd, ["--mesh", "2x4", "--budget", "12"])
    assert r.output.strip().endswith(" 12")
    r = CliRunner().invoke(_cmd, ["--mesh", "2x4", "--budget", "64QB"])
    assert r.exit_code == 2 and "invalid byte size '64QB'" in r.output


@pytest.mark.parametrize("text, says", [
    ("0.5", "a fraction of a byte"),                            # was 0 B, then "infeasible" (exit 3)
    ("1.5", "a fraction of a byte"),                            # was 2 B (new user 16: meant 1.5 GiB)
    ("0.0001KiB", "less than one byte"),
    ("-5MiB", "negative"),
    ("99999999999999999999999999TiB", "larger than any device"),  # was accepted, shown as 1e26 TiB
    ("1e30GiB", "larger than any device"),   # was "expected ... a size like 64MiB" (new user 17)
    ("1e999", "larger than any device"),     # float infinity: was an OverflowError traceback (new user 18)
    ("1E400MiB", "larger than any device"),
    ("-1e3", "negative"),
    ("-x", "expected an integer or a size"),
])
def test_a_budget_no_device_can_have_is_a_usage_error(text, says):
    r = CliRunner().invoke(_cmd, ["--mesh", "2x4", "--budget", text])
    assert r.exit_code == 2 and says in r.output, r.output
    assert "Traceback" not in r.output


def test_sizes_in_exponent_notation_and_minus_zero():
    from hloshard.units import parse_bytes
    assert parse_bytes("1e9") == 10**9 and parse_bytes("2.5e3") == 2500 and parse_bytes("1E3KiB") == 1024000
    assert parse_bytes("-0") == 0 and parse_bytes("-0MiB") == 0   # zero, not "negative" (new user 17)


def test_huge_sizes_print_in_the_largest_unit():
    from hloshard.units import format_bytes
    assert format_bytes(4e18) == "3.5 EiB"
    assert format_bytes(5 * 2**50) == "5.0 PiB"
    assert format_bytes(2**40) == "1.0 TiB"
    assert format_bytes(1023) == "1023 B"


def test_mesh_from_options():
    with pytest.raises(UsageError, match="pass --mesh"):
        mesh_from_options(None, None, None, None, None)
    with pytest.raises(UsageError, match="need --mesh"):
        mesh_from_options(None, None, None, "1", None)
    mod = SimpleNamespace(num_partitions=4)
    assert mesh_from_options(mod, None, "3,2,1,0", None, None).device_ids.tolist() == [3, 2, 1, 0]
    with pytest.raises(UsageError, match="num_partitions=4"):
        mesh_from_options(mod, "2x4", None, None, None)
    assert np.array_equal(mesh_from_options(mod, "2x2", None, None, None).device_ids, [[0, 1], [2, 3]])


# ------------------------------------------------------------------------------------ real modules
@pytest.mark.parametrize("name", ["mlp_train_step", "transformer_block", "transformer_train_step", "conv_layer"])
def test_every_sharding_of_a_propagated_sample_maps_onto_its_mesh(name):
    """XLA's GSPMD propagation dumps (made on a 2x4 mesh): every array leaf's sharding maps onto the
    2x4 mesh for its tensor rank, rebuilds itself from the mesh axes, and its shards tile the tensor."""
    from tests.conftest import SAMPLES

    path = SAMPLES / f"{name}.propagated.hlo"
    if not path.exists():
        pytest.skip(f"{path.name} not generated in this checkout")
    from hloshard.hlo.parser import parse_file

    module = parse_file(str(path))
    assert module.num_partitions == 8
    inferred = DeviceMesh.for_module(module)   # no --mesh, no named mesh: inferred from the shardings
    assert inferred.shape == (2, 4) and inferred.source == "inferred"   # the 2x4 mesh the dump was made on
    mesh = DeviceMesh.for_module(module, "2x4")
    checked = split = 0
    for instr in module.all_instructions():
        sharding = instr.sharding
        if sharding is None:
            continue
        leaves = instr.shape.leaves() if instr.shape.is_tuple else [instr.shape]
        if sharding.is_tuple and len(sharding.tuple_elements) != len(leaves):
            continue
        for i, leaf in enumerate(leaves):
            s = sharding.leaf(i)
            axes = mesh.sharding_to_axes(s, leaf.rank)
            assert mesh.axes_to_sharding(axes) == s, (instr.name, str(s))
            checked += 1
            if s.is_tiled:
                split += 1
                if math.prod(leaf.dims) > 1 << 18:
                    assert s.tile_shape(leaf.dims) == tuple(-(-n // t) for n, t in zip(leaf.dims, s.tile_dims))
                    continue
                count = np.zeros(leaf.dims, dtype=np.int32)
                for d in s.devices:
                    count[s.shard_slices(leaf.dims, d)] += 1
                assert (count == s.replication_factor).all()
    assert checked >= 8 and split >= 5


def test_more_mesh_axes_than_supported_is_a_usage_error():
    # 12 axes of 2 on a two-instruction module did not end in 150 s (new user 16, finding 2)
    with pytest.raises(UsageError, match="9 axes of size > 1; at most 8"):
        DeviceMesh.parse("x".join(["2"] * 9))
    assert DeviceMesh.parse("x".join(["2"] * 8 + ["1"] * 4)).shape == (2,) * 8 + (1,) * 4
    from hloshard.cli import main
    from tests.conftest import ROOT
    r = CliRunner().invoke(main, ["cost", str(ROOT / "samples" / "mlp_train_step.pre.hlo"),
                                  "--mesh", "a=2,b=2,c=2,d=2,e=2,f=2,g=2,h=2,i=2"])
    assert r.exit_code == 2 and "at most 8 are supported" in r.output and "Traceback" not in r.output
