"""Issue 14: a strategy space as wide as XLA's (mesh axes from the module, sub-axes, uneven splits,
``--mesh auto``). XLA-measured where XLA can run it (8 CPU devices); the 32- and 56-device cases are
checked in hloshard's model against hand-derived numbers."""

from __future__ import annotations

import math
import json
import re

import pytest
from click.testing import CliRunner

from hloshard.autoshard import solve_module
from hloshard.cli import main as cli_main
from hloshard.cost.memory import XLA_CPU_UNDERESTIMATE, model_limit
from hloshard.errors import UsageError
from hloshard.hlo import parse_module, print_module
from hloshard.hlo.sharding import HloSharding
from hloshard.mesh import DeviceMesh, infer_mesh, sharding_cuts
from hloshard.mesh_search import candidate_shapes
from hloshard.strategy.base import MeshInfo

from tests.conftest import SAMPLES, require_jax

B03 = """HloModule b03, num_partitions=8

ENTRY main {
  p0 = f32[2048,8192] parameter(0), sharding={devices=[4,1,2]0,1,2,3,4,5,6,7 last_tile_dim_replicate}
  p1 = f32[8192,4096] parameter(1), sharding={devices=[1,2,4]0,2,4,6,1,3,5,7 last_tile_dim_replicate}
  d = f32[2048,4096] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = f32[4096,2048] transpose(d), dimensions={1,0}
}
"""

B13 = """HloModule b13, num_partitions=8

ENTRY main {
  p0 = bf16[96,2048] parameter(0), sharding={replicated}
  p1 = bf16[2048,1024] parameter(1), sharding={devices=[1,8]<=[8]}
  d = bf16[96,1024] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={devices=[1,8]<=[8]}
  r1 = bf16[8,12,1024] reshape(d)
  ROOT r2 = bf16[8,12,4,256] reshape(r1)
}
"""


def _solve(text: str, spec: str | None, budget: int | None = None, **kw):
    module = parse_module(text)
    mesh = DeviceMesh.for_module(module, spec).with_policy(None, budget)
    result = solve_module(module, mesh, memory_budget=budget, time_limit=20, deterministic=True, **kw)
    return module, mesh, result


def _shardings(module) -> dict:
    return {i.name: i.sharding for i in module.entry.instructions}


# ------------------------------------------------------------------------- the two modules of the issue
@pytest.mark.oracle
def test_issue_modules_solve_with_no_collective_measured_by_xla():
    """b03 on --mesh 2x4 (the rows of p0 split over device pairs: a sub-axis of the axis of 4), b13 on
    --mesh 8 (the 8-way split of 1024 carried onto dims 2 and 3 of the reshape as 4 x 2) and an uneven
    user split: XLA's SPMD partitioner inserts no collective into the written modules."""
    require_jax()
    from tests import xla_oracle as xo

    texts = []
    m03, mesh03, r03 = _solve(B03, "2x4")
    assert mesh03.shape == (2, 2, 2) and mesh03.user_shape == (2, 4)
    assert [mesh03.axis_label(a) for a in range(3)] == ["0", "1:(1)2", "1:(2)2"]
    assert any("refined internally to 2x2x2" in n and "p0" in n for n in mesh03.notes)
    # hloshard's model: no communication, no resharding (before: a 64 MiB all-gather per device)
    assert r03.written.evaluation.communication == 0 and r03.written.evaluation.resharding == 0
    texts.append(print_module(m03))
    m13, mesh13, r13 = _solve(B13, "8")
    assert mesh13.shape == (4, 2) and [mesh13.axis_label(a) for a in range(2)] == ["0:(1)4", "0:(4)2"]
    assert _shardings(m13)["r2"] == HloSharding.parse("{devices=[1,1,4,2]<=[8]}")
    assert r13.written.evaluation.communication == 0 and r13.written.evaluation.resharding == 0
    texts.append(print_module(m13))
    # an uneven user split XLA can run here: 6 rows over 8 devices (padded / empty last shards) is
    # followed by exp and add (U24's 32 devices are beyond the oracle's 8 CPU devices)
    u6 = (U24.replace("num_partitions=32", "num_partitions=8").replace("[32,1]<=[32]", "[8,1]<=[8]")
          .replace("[24,512]", "[6,512]"))
    m6, _, r6 = _solve(u6, "8")
    assert _shardings(m6)["r"] == HloSharding.parse("{devices=[8,1]<=[8]}")
    assert r6.written.evaluation.resharding == 0
    texts.append(print_module(m6))
    for text in texts:
        raw = xo.spmd_partition(text, 8)
        assert xo.collectives(raw) == [], text


# ------------------------------------------------------------------------- mesh axes from the module
def test_mesh_inferred_from_device_orders_and_refined():
    module = parse_module(B03)
    # p0: rows over positions of stride 2 (4 ways), replicas stride 1; p1: cols stride 1, replicas stride 2:
    # both are whole axes of the 4x2 mesh (cuts {1, 2, 8})
    assert sharding_cuts(module.entry.get("p0").sharding) == {1, 2, 8}
    assert sharding_cuts(module.entry.get("p1").sharding) == {1, 2, 8}
    assert infer_mesh(module) == (4, 2)
    mesh = DeviceMesh.for_module(module)
    assert mesh.shape == (4, 2) and mesh.source == "inferred" and not mesh.is_refined
    # on the user's 2x4 (cuts {1, 4, 8}) they need the cut at 2 as well: 2x2x2, axis 1 split in two
    refined = DeviceMesh.for_module(module, "2x4")
    assert refined.shape == (2, 2, 2) and refined.source == "--mesh"
    assert [(s.user_axis, s.pre_size, s.size) for s in refined.sub_axes] == [(0, 1, 2), (1, 1, 2), (1, 2, 2)]
    assert refined.describe() == "2x4 from --mesh, refined internally to 2x2x2 [0, 1:(1)2, 1:(2)2]"
    # a reversed device order is no transposed iota of any mesh: no cuts
    assert sharding_cuts(HloSharding.parse("{devices=[2]1,0}")) is None


def test_mesh_precedence_named_inferred_num_partitions():
    # the module's Shardy mesh (frontend attribute xla.sdy.meshes) names the axes
    shardy = parse_module((SAMPLES / "mlp_train_step.shardy.pre.hlo").read_text())
    mesh = DeviceMesh.for_module(shardy)
    assert mesh.shape == (2, 4) and mesh.axis_names == ("data", "model") and mesh.source == "module mesh"
    assert mesh.describe().startswith("2x4 (data=2, model=4) from the module's mesh")
    # --mesh wins over the module's mesh, and says so when it is another mesh (new user 22)
    given = DeviceMesh.for_module(shardy, "8")
    assert given.user_shape == (8,)
    assert any("not the module's own mesh data=2,model=4" in n for n in given.notes)
    assert not any("own mesh" in n for n in DeviceMesh.for_module(shardy, "2x4").notes)
    # no mesh, no tiled sharding: the 1-D mesh of num_partitions
    plain = parse_module("HloModule m, num_partitions=4\nENTRY e {\n  ROOT p = f32[8] parameter(0)\n}\n")
    mesh = DeviceMesh.for_module(plain)
    assert mesh.shape == (4,) and mesh.source == "num_partitions"
    nothing = parse_module("HloModule m\nENTRY e {\n  ROOT p = f32[8] parameter(0)\n}\n")
    with pytest.raises(UsageError, match="pass --mesh"):
        DeviceMesh.for_module(nothing)


def test_named_mesh_spec_and_comma_hint():
    m = DeviceMesh.parse("data=2,model=4")
    assert m.shape == (2, 4) and m.axis_names == ("data", "model")
    assert m.axis_label(1) == "model" and m.refine((2, 2, 2)).axis_label(2) == "model:(2)2"
    with pytest.raises(UsageError, match=r"'x' \(2x4\), or name the axes \(a0=2,a1=4\)"):
        DeviceMesh.parse("2,4")
    with pytest.raises(UsageError, match="axis name listed twice"):
        DeviceMesh.parse("x=2,x=4")


# ------------------------------------------------------------------------- 2-D shardings, uneven splits
DOT_ADD = """HloModule dot_add, num_partitions=8

ENTRY e {
  a = f32[512,256] parameter(0)
  b = f32[256,512] parameter(1)
  c = f32[512,512] parameter(2)
  d = f32[512,512] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT s = f32[512,512] add(d, c)
}
"""


def test_matmul_and_add_get_2d_shardings_when_that_saves_memory_at_equal_cost():
    """On 2x4, every full split of the dot costs the same: compute 2*512*256*512/8 flops / 512 = 32768
    plus the add's 512*512/8 / 512 = 64 (32832 cost units, no communication). Memory differs: splitting
    the 8 devices over rows only keeps b whole (a/8 + b = 64 + 512 KiB), a 2-D split keeps a/2 + b/4 (or
    a/4 + b/2) = 384 KiB. With the 2-D peak as the budget (a, b, c, d, s live at the add: 256 + 128 +
    128 + 128 + 128 KiB = 768 KiB) the cost is unchanged and the dot and the add are 2-D."""
    _, _, free = _solve(DOT_ADD, "2x4")
    assert free.objective == pytest.approx(32832.0)
    # (a budget is kept with the memory model's measured under-estimate of XLA as margin: the model's
    # limit for it is budget / XLA_CPU_UNDERESTIMATE, hloshard.cost.memory.model_limit)
    budget = math.ceil(768 * 1024 * XLA_CPU_UNDERESTIMATE)
    assert model_limit(budget) == 768 * 1024
    module, _, tight = _solve(DOT_ADD, "2x4", budget=budget)
    assert tight.objective == pytest.approx(32832.0)
    assert tight.written.evaluation.peak_memory <= 768 * 1024
    for name in ("d", "s"):
        tiles = _shardings(module)[name].tile_dims
        assert len(tiles) == 2 and tiles[0] > 1 and tiles[1] > 1, (name, tiles)


DOT56 = """HloModule d56, num_partitions=56

ENTRY e {
  a = f32[32,64] parameter(0)
  b = f32[64,128] parameter(1), sharding={replicated}
  ROOT d = f32[32,128] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


def test_56_way_uneven_row_split_under_a_tight_budget():
    """1x2x4x7 mesh (56 devices). No even split uses the 7-axis (7 divides none of 32, 64, 128).
    Without a budget the cheapest plan splits rows 8 ways and columns 7 ways (128 -> padded tiles of
    19): compute 2 * 4 * 19 * 64 flops / 512 = 19.0. Under a budget of b (replicated, 32768 B) + a
    (256 B) + d (512 B) = 33536 B, only 32 rows over all 56 devices fits (ceil tiling: one row on
    devices 0..31, none on 32..55): compute on the padded tile 2 * 1 * 64 * 128 / 512 = 32.0."""
    module, _, free = _solve(DOT56, "1x2x4x7")
    assert free.objective == pytest.approx(19.0)
    assert _shardings(module)["d"] == HloSharding.parse("{devices=[8,7]<=[56]}")
    budget = math.ceil(33536 * XLA_CPU_UNDERESTIMATE)   # the model's limit: 33536 (model_limit)
    assert model_limit(budget) == 33536
    module, mesh, tight = _solve(DOT56, "1x2x4x7", budget=budget)
    assert _shardings(module)["d"] == HloSharding.parse("{devices=[56,1]<=[56]}")
    assert _shardings(module)["a"] == HloSharding.parse("{devices=[56,1]<=[56]}")
    assert tight.objective == pytest.approx(32.0)
    assert tight.written.evaluation.peak_memory == 33536
    # without the budget rule the 56-way split pads 75% (> --max-padding 0.5) and is not considered
    mi = MeshInfo(DeviceMesh.for_module(parse_module(DOT56), "1x2x4x7"))
    assert ((1, 2, 3), ()) not in mi.enumerate((32, 128))
    assert ((1, 2), (3,)) in mi.enumerate((32, 128))     # 128 over 7: padding 5/128


def test_divisible_io_splits_parameters_and_outputs_evenly():
    """``mesh.divisible_io`` (auto_shard's meshes, ``solve --partition-specs``): a jax.jit argument's or
    result's NamedSharding must divide its dims (new user 15: a budgeted plan put P('model') on a (10,)
    bias and jax raised IndivisibleError). DOT56 without it: the root d is split 8 x 7 with 128 columns over
    7 (padded tiles of 19); with it, d and the parameter a split evenly and the plan costs more."""
    module, _, free = _solve(DOT56, "1x2x4x7")
    assert _shardings(module)["d"] == HloSharding.parse("{devices=[8,7]<=[56]}")   # uneven without it
    module = parse_module(DOT56)
    mesh = DeviceMesh.for_module(module, "1x2x4x7").with_policy(None, None, divisible_io=True)
    even = solve_module(module, mesh, time_limit=20, deterministic=True)
    assert even.objective > free.objective
    for name in ("a", "d"):
        sh = _shardings(module)[name]
        dims = [i for i in module.entry.instructions if i.name == name][0].shape.dims
        assert all(d % t == 0 for d, t in zip(dims, sh.tile_dims)), (name, sh)
    # a refined or coarse copy of the mesh keeps the rule
    assert mesh.refine((1, 2, 2, 2, 7)).divisible_io


U24 = """HloModule u24, num_partitions=32

ENTRY e {
  p = f32[24,512] parameter(0), sharding={devices=[32,1]<=[32]}
  q = f32[24,512] parameter(1)
  x = f32[24,512] exponential(p)
  ROOT r = f32[24,512] add(x, q)
}
"""


def test_user_uneven_sharding_is_followed():
    """24 rows over 32 devices (one row on devices 0..23, empty shards on 24..31): exp and add keep the
    split. Cost: each op on its padded 1x512 tile, 512 flops / 512 = 1.0 each, no resharding (before:
    exp went to a column split and paid ~31,745 units of resharding)."""
    module, _, res = _solve(U24, "32")
    user = HloSharding.parse("{devices=[32,1]<=[32]}")
    assert _shardings(module)["x"] == user and _shardings(module)["r"] == user
    assert res.objective == pytest.approx(2.0)
    assert res.written.evaluation.resharding == 0


def test_padding_policy():
    mi = MeshInfo(DeviceMesh.parse("32"))
    assert mi.padding_ratio((24,), ((0,),)) == pytest.approx(8 / 24)
    assert ((0,),) in mi.enumerate((24,))                        # 1/3 <= 0.5
    strict = MeshInfo(DeviceMesh.parse("32").with_policy(max_padding=0.0))
    assert ((0,),) not in strict.enumerate((24,))
    assert mi.enumerate((64,))[0] == ((0,),)                     # even layouts first


def test_candidate_meshes():
    assert candidate_shapes(8) == [(8,), (2, 4), (4, 2), (2, 2, 2)]
    assert len(candidate_shapes(12)) == 1 + 4 + 3
    assert candidate_shapes(7) == [(7,)]


# ------------------------------------------------------------------------- --mesh auto
def test_mesh_auto_prints_the_table_and_writes_the_cheapest(tmp_path):
    out, rep = tmp_path / "o.hlo", tmp_path / "r.json"
    res = CliRunner().invoke(cli_main, ["solve", str(SAMPLES / "mlp_train_step.pre.hlo"), "--mesh", "auto",
                                        "--devices", "8", "--time-limit", "8", "--deterministic",
                                        "-o", str(out), "--report", str(rep)])
    assert res.exit_code == 0, res.output
    assert "--mesh auto: 8 devices" in res.output
    report = json.loads(rep.read_text())
    trials = report["mesh_search"]["trials"]
    assert {t["mesh"].split()[0] for t in trials} == {"8", "2x4", "4x2", "2x2x2"}
    costs = {t["mesh"]: t["objective"] for t in trials if t["objective"] is not None}
    best = report["mesh_search"]["best"]
    assert costs[best] == min(costs.values()) == report["objective"]
    assert out.read_text().startswith("HloModule")
    # the picked plan is written with its operand pins (--pin-operands is the default for --mesh auto too)
    # and priced as written: `hloshard cost` of the output is the reported objective
    assert report["pins"] > 0 and len(re.findall(r"\.pin = \S+ custom-call\(\S+\), custom_call_target=\"Sharding\"", out.read_text())) == report["pins"]
    cost = CliRunner().invoke(cli_main, ["cost", str(out), "--mesh", report["mesh"]["spec"]
                                         if isinstance(report["mesh"], dict) and "spec" in report["mesh"]
                                         else best.split()[0], "--format", "json"])
    assert cost.exit_code == 0, cost.output
    assert json.loads(cost.stdout)["total_cost"] == pytest.approx(report["objective"], rel=1e-9)


@pytest.mark.parametrize("head", ["cheapest", "dearest"])
def test_mesh_auto_in_parallel_is_the_sequential_search(monkeypatch, head):
    """Candidates solved in forked processes (``workers=2``) give the trials and the written module of
    the one-at-a-time search (``workers=1``), deterministic mode.  ``dearest``: the candidates are
    ordered the other way round, so the mesh picked is solved in a child process and its cost graph
    rebuilt here from the child's choice."""
    import hloshard.mesh_search as ms

    if head == "dearest":
        real = ms._work
        monkeypatch.setattr(ms, "_work", lambda counts: -real(counts))
    text = (SAMPLES / "mlp_train_step.pre.hlo").read_text()
    runs = {}
    for workers in (1, 2):
        module = parse_module(text, "mlp")
        search = ms.search_meshes(module, "mlp", devices=8, time_limit=4, workers=workers, deterministic=True,
                                  pin_operands=True)
        runs[workers] = (search, print_module(module))
    (seq, seq_text), (par, par_text) = runs[1], runs[2]
    assert [(t.label, t.status, t.objective, t.peak_memory) for t in seq.trials] == \
           [(t.label, t.status, t.objective, t.peak_memory) for t in par.trials]
    assert seq.best.label == par.best.label and par_text == seq_text
    picked_first = min(range(len(par.trials)), key=lambda i: ms._work(ms.layout_counts(module, par.trials[i].mesh)))
    if head == "dearest":   # the picked mesh was not the one solved in this process
        assert par.best_index != picked_first
    assert par.best.result.written is not None
    assert par.best.objective == pytest.approx(par.best.result.written.evaluation.total, rel=1e-12)


def test_mesh_auto_usage_errors(tmp_path):
    path = tmp_path / "m.hlo"
    path.write_text("HloModule m\nENTRY e {\n  ROOT p = f32[8] parameter(0)\n}\n")
    res = CliRunner().invoke(cli_main, ["solve", str(path), "--mesh", "auto"])
    assert res.exit_code == 2 and "--devices N" in res.output
    res = CliRunner().invoke(cli_main, ["solve", str(path), "--mesh", "2x4", "--devices", "8"])
    assert res.exit_code == 2 and "--devices is for --mesh auto" in res.output


def test_refinement_is_capped():
    """A sharding that would need 7 binary axes (128 devices tiled [2,2,2,2,2,2,2]) is left as written on
    the 1-D mesh (the strategy space grows as (rank + 1) ** axes); one needing 6 is refined."""
    def module(k):
        dims = ",".join(["2"] * k)
        return parse_module(f"HloModule m, num_partitions={2 ** k}\nENTRY e {{\n  ROOT p = f32[{dims}] "
                            f"parameter(0), sharding={{devices=[{dims}]<=[{2 ** k}]}}\n}}\n")
    assert DeviceMesh.for_module(module(6), str(2 ** 6)).shape == (2,) * 6
    capped = DeviceMesh.for_module(module(7), str(2 ** 7))
    assert capped.shape == (128,) and any("priced as written" in n for n in capped.notes)


@pytest.mark.parametrize("body, free", [
    ("ROOT t = f32[256,1024] transpose(p0), dimensions={1,0}, sharding={devices=[1,8]<=[2,4]T(1,0)}", True),
    ("ROOT r = f32[1024,16,16] reshape(p0), sharding={devices=[8,1,1]<=[2,4]T(1,0)}", True),
    ("ROOT s = f32[1024,128] slice(p0), slice={[0:1024], [0:128]}, sharding={devices=[8,1]<=[2,4]T(1,0)}", True),
    ("ROOT a = f32[1024,256] add(p0, p0), sharding={devices=[8,1]<=[2,4]T(1,0)}", False),
])
def test_a_written_layout_outside_the_enumeration_costs_what_the_handler_charges(body, free):
    """A dim split over the three axes of a 2x2x2 mesh in the order (1, 2, 0) (device order
    0,4,1,5,...) is not among the enumerated layouts there, so the kept written sharding gets a
    generated strategy; it must cost what the handler charges where the same layout *is* enumerated
    (a 2x4 mesh: the axes (1, 0)): a parameter, transpose, reshape or slice computes nothing (the
    generated strategy had charged one unit per element: 64 per instruction here), an add does."""
    text = ("HloModule m, num_partitions=8\nENTRY e {\n"
            "  p0 = f32[1024,256] parameter(0), sharding={devices=[8,1]<=[2,4]T(1,0)}\n"
            f"  {body}\n}}\n")
    costs = {}
    for spec in ("2x2x2", "2x4"):
        module = parse_module(text, "m")
        mesh = DeviceMesh.for_module(module, spec)
        assert mesh.shape == tuple(int(x) for x in spec.split("x"))
        from hloshard.autoshard.evaluate import evaluate_module

        costs[spec] = evaluate_module(module, mesh).total_cost
    assert costs["2x2x2"] == pytest.approx(costs["2x4"], abs=1e-9)
    assert (costs["2x4"] == 0) == free
