"""jax's Shardy-mode ``shard_map`` read as the manual region it is (issue 24, fresh 37 #1, #5, #6).

The exports in ``tests/data/shard_map`` are jax 0.10.2's (``make_shard_maps.py`` there): ``full`` (both mesh axes
manual, a psum over ``model``), ``partial`` (``axis_names={"model"}``), ``two`` (two bodies, a psum over ``model``
then a pmean over ``data``), ``both`` (a psum over both axes), each lowered with Shardy (jax's default) and, for
``full`` and ``partial``, with GSPMD.  Before: the Shardy form was read as a per-device program (``solve`` wrote a plan
3.6x the input's cost that XLA refused with a RET_CHECK; ``auto_shard``'s plan moved 5,120 B where ``jax.jit`` moves
3,072 B; ``plan.xla()`` said 0 B), and ``solve`` refused the partly manual GSPMD form."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from hloshard.autoshard import evaluate_module
from hloshard.cli import main
from hloshard.hlo import parse_module, print_module
from hloshard.hlo.manual import ANNOTATE, END, UNMANUAL, manual_like, manual_region_problems
from hloshard.hlo.partitioned import is_per_device_program
from hloshard.hlo.sharding import HloSharding
from hloshard.jax.check import xla_unmeasured
from hloshard.load import load_module, load_text
from hloshard.mesh import DeviceMesh
from hloshard.sdy_manual import read_manual_computations, region_shardings
from hloshard.sdy_mesh import module_meshes
from hloshard.xla_compare import Comparison
from tests.conftest import ROOT, require_jax

DATA = ROOT / "tests" / "data" / "shard_map"
SHARDY = ("full", "partial", "two", "both")
PART_LOCAL = "{devices=[1,1,4,2]<=[2,4]T(1,0) last_tile_dims={manual, replicated}}"


def _form(module) -> list[str]:
    """The entry and body as (opcode, custom-call target, sharding, backend_config) rows, sorted: names and text
    order aside (jax's GSPMD export writes each operand's pins after its parameter), what a reader sees."""
    rows = []
    for comp in module.computations:
        if not (comp.is_entry or "body" in comp.name):
            continue
        for i in comp.instructions:
            rows.append(str((i.opcode, i.custom_call_target, str(i.sharding), i.attrs.get("backend_config"))))
    return sorted(rows)


@pytest.mark.parametrize("name", ["full", "partial"])
def test_the_shardy_export_reads_as_jaxs_gspmd_export(name):
    """The two spellings of one shard_map give one module (but for names) and one price."""
    shardy = load_module(str(DATA / f"sm_{name}.hlo"))
    gspmd = load_module(str(DATA / f"sm_{name}_gspmd.hlo"))
    assert not any(i.custom_call_target and i.custom_call_target.startswith("xla.sdy.")
                   for i in shardy.all_instructions())
    assert _form(shardy) == _form(gspmd)
    assert not is_per_device_program(shardy)
    mesh = DeviceMesh.parse("2x4")
    a = evaluate_module(shardy, mesh).evaluation
    b = evaluate_module(gspmd, mesh).evaluation
    assert a.total == pytest.approx(b.total) and a.peak_memory == b.peak_memory
    assert a.total < 10_000   # read as a per-device program, solve's plan of it cost 11,030.56


def test_boundary_shardings_are_the_ones_jax_wrote():
    m = load_module(str(DATA / "sm_partial.hlo"))
    enter = [i for i in m.entry.instructions if i.custom_call_target == "SPMDFullToShardShape"]
    assert [str(i.sharding) for i in enter] == [PART_LOCAL, PART_LOCAL]
    assert [str(i.operands[0].sharding) for i in enter] == [
        "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}",
        "{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}"]
    leave = [i for i in m.entry.instructions if i.custom_call_target == "SPMDShardToFullShape"]
    assert len(leave) == 1 and leave[0].sharding.is_replicated
    assert leave[0].attrs["backend_config"] == "unspecified_dims=[0,1]"   # out_specs' open dims, as GSPMD's export


def test_region_shardings_of_a_mesh():
    mesh = module_meshes(parse_module((DATA / "sm_full.hlo").read_text()))["mesh"]
    glob, loc = region_shardings(mesh, [["data"], ["model"]], ["data", "model"])
    assert glob == HloSharding.parse("{devices=[2,4]<=[8]}") and loc.is_manual
    glob, loc = region_shardings(mesh, [[], ["model"]], ["model"])
    assert glob == HloSharding.parse("{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}")
    assert loc == HloSharding.parse(PART_LOCAL)
    # a free axis that splits a dim inside a partly manual region stays a tile dim of the local value
    _, loc = region_shardings(mesh, [["data"], ["model"]], ["model"])
    assert loc == HloSharding.parse("{devices=[2,1,4]<=[8] last_tile_dims={manual}}")


def test_manual_like_keeps_the_manual_groups():
    part = HloSharding.parse(PART_LOCAL)
    assert manual_like(part, 0) == HloSharding.parse("{devices=[4,2]<=[2,4]T(1,0) last_tile_dims={manual, replicated}}")
    assert manual_like(part, 3) == HloSharding.parse(
        "{devices=[1,1,1,4,2]<=[2,4]T(1,0) last_tile_dims={manual, replicated}}")
    assert manual_like(HloSharding.manual(), 2).is_manual
    assert manual_like(HloSharding.replicated(), 2) is None


def test_a_region_it_cannot_read_is_an_error_at_its_custom_call(tmp_path):
    """Left as written, it was priced as a per-device program (11,028.56) and XLA's partitioner refused the module
    with a RET_CHECK while ``cost --xla`` exited 0; now exit 2 at the custom-call, nothing priced."""
    text = (DATA / "sm_full.hlo").read_text().replace('[{\\"data\\"}, {\\"model\\"}]>, <@mesh',
                                                      '[{\\"data\\":(1)2}, {\\"model\\"}]>, <@mesh', 1)
    assert '\\"data\\":(1)2' in text
    path = tmp_path / "sub.hlo"
    path.write_text(text)
    line = next(k + 1 for k, ln in enumerate(text.splitlines()) if "xla.sdy.GlobalToLocalShape" in ln)
    r = CliRunner().invoke(main, ["cost", str(path), "--mesh", "2x4"])
    assert r.exit_code == 2 and r.stderr.startswith(f"{path}:{line}:"), r.output
    assert "shard_map boundary hloshard does not read" in r.stderr and "Traceback" not in r.output
    m = parse_module(text, "t.hlo")
    with pytest.raises(Exception):
        read_manual_computations(m)
    assert any(i.custom_call_target == "xla.sdy.GlobalToLocalShape" for i in m.all_instructions())   # unchanged


@pytest.mark.parametrize("name", ["partial_gspmd", "partial", "two", "partdata", "tuple"])
def test_solve_writes_a_partly_manual_region_xla_takes(name, tmp_path):
    """fresh 37 #5: solve refused the partly manual GSPMD export, naming a {manual} of its own completion.  Held out
    (``make_heldout.py``): ``partdata`` (``axis_names={"data"}``; a body constant, which reads no manual value, gets
    its region's manual subgroups, not ``{manual}``) and ``tuple`` (a body of two results: ``LocalToGlobalShape``
    of two operands)."""
    out = tmp_path / "o.hlo"
    r = CliRunner().invoke(main, ["solve", str(DATA / f"sm_{name}.hlo"), "--mesh", "2x4", "--deterministic",
                                  "--time-limit", "10", "-o", str(out)])
    assert r.exit_code == 0, r.output
    written = parse_module(out.read_text(), "o.hlo")
    assert manual_region_problems(written) == []
    assert "already a per-device program" not in r.output
    calls = [i for i in written.entry.instructions if i.opcode == "call"]
    assert calls and all(i.sharding is not None for i in calls)
    if "partial" in name:
        assert str(calls[0].sharding) == PART_LOCAL
    if name == "tuple":
        assert sum(1 for i in written.entry.instructions if i.custom_call_target == "SPMDShardToFullShape") == 3


MLP = (ROOT / "samples" / "mlp_train_step.pre.hlo").read_text()
BIAS = "params_3_.1 = f32[256]{0} parameter(3), sharding={replicated}"


def _manual_bias() -> str:
    assert BIAS in MLP
    return MLP.replace(BIAS, BIAS.replace("{replicated}", "{manual}"))


def _withdrawn_fixes(text: str) -> dict:
    """fresh 37 #6: the two fixes HS111 offered for the manual bias that XLA aborts on."""
    lines = text.splitlines()
    k = next(n for n, ln in enumerate(lines) if ln.lstrip().startswith("ROOT tuple"))
    root = lines[k]
    annotated = "\n".join(lines[:k] + [root + ", sharding={manual}"] + lines[k + 1:])
    head, args = root.split(" tuple(")
    names = [a.strip() for a in args.rstrip(")").split(",")]
    shapes = {i.name: str(i.shape) for i in parse_module(text, "m.hlo").entry.instructions}
    ends = []
    for n in names:
        ends.append(f'  {n}.m = {shapes[n]} custom-call({n}), custom_call_target="Sharding", sharding={{manual}}')
        ends.append(f'  {n}.f = {shapes[n]} custom-call({n}.m), custom_call_target="SPMDShardToFullShape", '
                    f'sharding={{replicated}}')
    ended = "\n".join(lines[:k] + ends + [head + " tuple(" + ", ".join(n + ".f" for n in names) + ")"] + lines[k + 1:])
    return {"annotate the root tuple": annotated, "end the region at the output": ended}


def test_hs111_offers_only_the_fix_xla_takes_for_a_manual_parameter():
    text = _manual_bias()
    (problem,) = manual_region_problems(parse_module(text, "m.hlo"))
    assert problem.fixes == (UNMANUAL,)
    assert problem.message.endswith("Give params_3_.1 a sharding that is not manual")
    assert "annotate tuple.1" not in problem.message
    # a value of a real region keeps all three; a root of one leaf may be annotated
    region = parse_module("""HloModule m, num_partitions=8

ENTRY e {
  p0 = f32[64,16] parameter(0), sharding={devices=[8,1]<=[8]}
  c = f32[64,16] custom-call(p0), custom_call_target="Sharding", sharding={devices=[8,1]<=[8]}
  f = f32[8,16] custom-call(c), custom_call_target="SPMDFullToShardShape", sharding={manual}
  ROOT n = f32[8,16] negate(f)
}
""", "r.hlo")
    (p,) = manual_region_problems(region)
    assert p.fixes == (END, ANNOTATE, UNMANUAL)


@pytest.mark.oracle
def test_the_fix_hs111_offers_compiles_and_the_withdrawn_ones_abort():
    """One XLA child, plus one per abort (2)."""
    require_jax()
    from tests import xla_oracle

    withdrawn = _withdrawn_fixes(_manual_bias())
    offered = MLP   # params_3_.1 given a sharding that is not manual: the sample itself
    results = xla_oracle.compile_many([offered] + list(withdrawn.values()))
    assert results[0][0], results[0][1][:300]
    for name, (ok, msg) in zip(withdrawn, results[1:]):
        assert not ok and "XLA child died" in msg, (name, msg[:300])


def test_xla_unmeasured_says_why_there_is_no_figure():
    failed = Comparison("m", 8, [], xla_error="JaxRuntimeError: INTERNAL: RET_CHECK failure")
    assert "did not partition" in xla_unmeasured(failed)
    measured = Comparison("m", 8, [])
    assert xla_unmeasured(measured) is None   # nothing predicted, nothing measured: no warning


@pytest.mark.oracle
def test_solved_shardy_exports_move_what_was_predicted():
    """Each Shardy export solved, then its written module partitioned by XLA (one child for the four): XLA's
    collective bytes equal the prediction (round 38: 3,072 / 6,400 / 3,584 / 3,584 B both sides)."""
    require_jax()
    from hloshard.autoshard import solve_module
    from hloshard.xla_compare import compare_module, run_xla, tag_module_text

    mesh = DeviceMesh.parse("2x4")
    modules, results = [], []
    for name in SHARDY:
        m = load_text((DATA / f"sm_{name}.hlo").read_text(), f"sm_{name}.hlo")
        solve_module(m, mesh, time_limit=10, deterministic=True)
        written = load_text(print_module(m), f"s_{name}.hlo")
        modules.append(written)
        results.append(evaluate_module(written, mesh))
    tagged = [tag_module_text(m) for m in modules]
    xla = run_xla([t for t, _ in tagged], 8)
    for name, m, res, x, (_, tags) in zip(SHARDY, modules, results, xla, tagged):
        c = compare_module(m, mesh, res, xla=(x, tags))
        assert c.xla_error is None, (name, c.xla_error)
        assert c.predicted_bytes > 0 and c.xla_bytes == pytest.approx(c.predicted_bytes), name


API_CHILD = r'''
import os, json, warnings
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import numpy as np, jax, jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import hloshard.jax as hj
from hloshard.jax.api import AutoShardResult

mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
def g(x, w):
    def body(xs, ws):
        return jax.lax.psum(xs @ ws, "model")
    y = jax.shard_map(body, mesh=mesh, in_specs=(P("data", "model"), P("model", None)), out_specs=P("data", None))(x, w)
    return jnp.tanh(y)
ins = (NamedSharding(mesh, P("data", "model")), NamedSharding(mesh, P("model", None)))
x = jax.device_put(jnp.arange(512, dtype=jnp.float32).reshape(16, 32) / 500, ins[0])
w = jax.device_put(jnp.ones((32, 64), jnp.float32) / 10, ins[1])
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    plan = hj.auto_shard(g, x, w, mesh=mesh, time_limit=10, deterministic=True)
    c = plan.xla()
jit = AutoShardResult.jit_bytes(plan, jax.jit(g, in_shardings=ins).lower(x, w).compile())
print(json.dumps({"warnings": [str(m.message) for m in caught if issubclass(m.category, UserWarning)],
                  "error": c.xla_error, "predicted": c.predicted_bytes, "xla": c.xla_bytes, "plan_jit": c.jit_bytes,
                  "user_jit": jit, "diff": float(jnp.abs(plan.jit()(x, w) - jax.jit(g)(x, w)).max())}))
'''


@pytest.mark.oracle
def test_auto_shard_of_a_shard_map_moves_what_jax_jit_moves():
    """fresh 37 #1 through the API: the plan moved 5,120 B (plan.jit()) where jax.jit moves 3,072 B, plan.xla() said
    0 B with no warning and the memory guard was off.  Now predicted = plan.xla() = plan.jit() = jax.jit's 3,072 B.
    In a child (8 CPU devices before jax is imported)."""
    import json
    import os
    import subprocess

    from hloshard.xla_check import child_argv

    require_jax()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    out = subprocess.run(child_argv(["-c", API_CHILD], env), capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert not [m for m in got["warnings"] if "memory guard off" in m or "plan.xla()" in m], got["warnings"]
    assert got["error"] is None, got
    assert got["predicted"] == got["xla"] == got["plan_jit"] == got["user_jit"] == 3072, got
    assert got["diff"] < 1e-5, got
