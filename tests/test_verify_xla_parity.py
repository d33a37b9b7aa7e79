"""``verify_module`` (what ``solve`` / ``cost`` check first, and lint's HS002 / HS30x) against XLA
compiling each module for 8 partitions with GSPMD (jaxlib 0.10.2): the same verdict, and for a
rejection the instruction XLA names (``loc("name")`` or ``%name.N`` in its message) is the one
hloshard reports. Every case comes with a nearby module XLA compiles. XLA's verdict is asked every
run; nothing here states it.
"""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from hloshard.cli import main
from hloshard.errors import InputError
from hloshard.hlo import parse_module
from hloshard.hlo.verify import verify_module
from hloshard.lint.context import LintOptions
from hloshard.lint.engine import lint_text
from tests.conftest import require_jax

SUM = "sum {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n"
H8 = "HloModule m, num_partitions=8\n"


def _m(body: str, pre: str = "", header: str = H8) -> str:
    return header + pre + "ENTRY e {\n" + body + "\n}\n"


_VR = ("vr {\n  a = f32[] parameter(0)\n  b = s32[] parameter(1)\n  c = f32[] parameter(2)\n  d = s32[] parameter(3)\n"
       "  m = f32[] maximum(a, c)\n  n = s32[] minimum(b, d)\n  ROOT t = (f32[], s32[]) tuple(m, n)\n}\n")
_VRB = ("  x = f32[4,2] parameter(0)\n  y = s32[4,2] parameter(1)\n  i = f32[] constant(0)\n  j = s32[] constant(0)\n"
        "  ROOT r = SHAPE reduce(x, y, i, j), dimensions={0}, to_apply=vr")
_COND = ("cond {\n  p = (s32[], f32[3]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n  n = s32[] constant(5)\n"
         "  ROOT c = pred[] compare(i, n), direction=LT\n}\n")
_BODY = ("body {\n  p = (s32[], f32[3]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n  one = s32[] constant(1)\n"
         "  i2 = s32[] add(i, one)\n  v = f32[3] get-tuple-element(p), index=1\n  c = f32[N] constant({LIT})\n"
         "  b = f32[3] broadcast(c), dimensions={0}\n  m = f32[3] multiply(v, b)\n  ROOT t = (s32[], f32[3]) tuple(i2, m)\n}\n")
WHILE_ENTRY = ("  z = s32[] constant(0)\n  v = f32[3] parameter(0), sharding={replicated}\n  t = (s32[], f32[3]) tuple(z, v)\n"
               "  ROOT w = (s32[], f32[3]) while(t), condition=cond, body=body")
_R2 = "r2 {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n"
_R2V = "r2v {\n  x = f32[2] parameter(0)\n  y = f32[2] parameter(1)\n  ROOT s = f32[2] add(x, y)\n}\n"
_SDY = 'HloModule m, num_partitions=8, frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<["x"=8]>}}\n'
_SDY_P = '  a = f32[8] parameter(0), frontend_attributes={xla.sdy.sharding="#sdy.sharding<@%s, [{\\"x\\"}]>"}\n  ROOT r = f32[8] negate(a)'
_AR = "  a = f32[4] parameter(0)\n  ROOT r = f32[4] all-reduce(a), channel_id=1, replica_groups=G, use_global_device_ids=true, to_apply=sum"

_CONV = ("  a = f32[2,8,8,4] parameter(0)\n  k = f32[3,3,4,6] parameter(1)\n"
         "  ROOT c = SHAPE convolution(a, k), window={WINDOW}, dim_labels=b01f_01io->OUT")

CASES = {
    # the result's dims against dim_labels and the window (new user 34 F5: labels that contradict the result)
    "conv_strided_padded": _m(_CONV.replace("SHAPE", "f32[2,4,4,6]").replace("WINDOW", "size=3x3 stride=2x2 pad=1_1x1_1")
                              .replace("OUT", "b01f")),
    "conv_labels_contradict_result": _m(_CONV.replace("SHAPE", "f32[2,8,8,6]").replace("WINDOW", "size=3x3 pad=1_1x1_1")
                                        .replace("OUT", "bf01")),
    "conv_labels_moved_feature": _m(_CONV.replace("SHAPE", "f32[2,6,8,8]").replace("WINDOW", "size=3x3 pad=1_1x1_1")
                                    .replace("OUT", "bf01")),
    "conv_wrong_spatial": _m(_CONV.replace("SHAPE", "f32[2,5,5,6]").replace("WINDOW", "size=3x3 stride=2x2 pad=1_1x1_1")
                             .replace("OUT", "b01f")),
    "broadcast_size1_in_while": _m(WHILE_ENTRY, _COND + _BODY.replace("N", "1").replace("LIT", "2")),
    "broadcast_size2_in_while": _m(WHILE_ENTRY, _COND + _BODY.replace("N", "2").replace("LIT", "2, 3")),
    "broadcast_size1_rank2": _m("  a = f32[1,4] parameter(0)\n  ROOT b = f32[3,4,5] broadcast(a), dimensions={0,1}"),
    "broadcast_type_change": _m("  a = f32[1] parameter(0)\n  ROOT b = s32[3] broadcast(a), dimensions={0}"),
    "variadic_reduce": _m(_VRB.replace("SHAPE", "(f32[2], s32[2])"), _VR),
    "variadic_reduce_wrong_result": _m(_VRB.replace("SHAPE", "(f32[2], s32[3])"), _VR),
    "reduce_array_init": _m("  a = f32[4,2] parameter(0)\n  z = f32[2] parameter(1)\n"
                            "  ROOT r = f32[2] reduce(a, z), dimensions={0}, to_apply=r2", _R2),
    "reduce_array_computation": _m("  a = f32[4,2] parameter(0)\n  z = f32[2] parameter(1)\n"
                                   "  ROOT r = f32[2] reduce(a, z), dimensions={0}, to_apply=r2v", _R2V),
    "reduce_scalar": _m("  a = f32[4,2] parameter(0)\n  z = f32[] constant(0)\n"
                        "  ROOT r = f32[2] reduce(a, z), dimensions={0}, to_apply=r2", _R2),
    "all_reduce_flattened_half": _m(_AR.replace("G", "{{0,1,2,3}}"), SUM),
    "all_reduce_flattened_half_iota": _m(_AR.replace("G", "[1,4]<=[4]"), SUM),
    "all_reduce_flattened_all": _m(_AR.replace("G", "{{0,1,2,3},{4,5,6,7}}"), SUM),
    "all_reduce_flattened_singletons": _m(_AR.replace("G", "{{0},{1},{2},{3},{4},{5},{6},{7}}"), SUM),
    "all_reduce_flattened_empty": _m(_AR.replace("G", "{}"), SUM),
    "all_reduce_flattened_half_no_header": _m(_AR.replace("G", "{{0,1,2,3}}"), SUM, "HloModule m\n"),
    "all_gather_flattened_half": _m("  a = f32[4] parameter(0)\n  ROOT r = f32[16] all-gather(a), channel_id=1, "
                                    "replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true"),
    "all_to_all_partitions_half": _m("  a = f32[4] parameter(0)\n  ROOT r = f32[4] all-to-all(a), channel_id=1, "
                                     "replica_groups={{0,1,2,3}}, dimensions={0}"),
    "all_to_all_partitions_all": _m("  a = f32[4] parameter(0)\n  ROOT r = f32[4] all-to-all(a), channel_id=1, "
                                    "replica_groups={{0,1,2,3},{4,5,6,7}}, dimensions={0}"),
    "all_gather_done_shape": _m("  a = f32[4] parameter(0), sharding={replicated}\n  s = (f32[4], f32[32]) all-gather-start(a), "
                                "channel_id=1, replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}, "
                                "use_global_device_ids=true, sharding={{replicated}, {replicated}}\n"
                                "  ROOT d = f32[16] all-gather-done(s), sharding={replicated}"),
    "dot_result_dims": _m("  a = f32[8,32,256] parameter(0)\n  b = f32[256,64] parameter(1)\n"
                          "  ROOT d = f32[8,32,64] dot(a, b), lhs_contracting_dims={2}, rhs_contracting_dims={0}"),
    "dot_result_dims_wrong": _m("  a = f32[8,32,256] parameter(0)\n  b = f32[256,64] parameter(1)\n"
                                "  ROOT d = f32[8,32,60] dot(a, b), lhs_contracting_dims={2}, rhs_contracting_dims={0}"),
    "dot_batch_result_dims_wrong": _m("  a = f32[4,8,16] parameter(0)\n  b = f32[4,16,32] parameter(1)\n"
                                      "  ROOT d = f32[4,32,8] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
                                      "rhs_batch_dims={0}, rhs_contracting_dims={1}"),
    "sdy_mesh_defined": _m(_SDY_P % "mesh", header=_SDY),
    "sdy_mesh_undefined": _m(_SDY_P % "nomesh", header=_SDY),
    "sdy_no_meshes": _m(_SDY_P % "mesh"),
}
# verdicts XLA gives in the MLIR import rather than naming an instruction: the instruction is given here
NAMED_BY_US = {"all_gather_done_shape": "d", "reduce_array_computation": "r", "sdy_mesh_undefined": "a", "sdy_no_meshes": "a"}


def _ours(text: str):
    try:   # a module without num_partitions is compiled for 8 here: verify it for the same count
        verify_module(parse_module(text, "t.hlo"), "t.hlo", num_partitions=8)
    except InputError as exc:
        return str(exc)
    return None


def _line_of(text: str, name: str) -> int:
    for k, line in enumerate(text.splitlines(), 1):
        if re.match(rf"\s*(ROOT\s+)?%?{re.escape(name)} = ", line):
            return k
    raise AssertionError(f"no instruction {name}")


def _xla_names(msg: str) -> str | None:
    m = re.search(r'loc\("([^"]+)"\)', msg) or re.search(r"%([A-Za-z_][\w\-]*?)(?:\.\d+)? = ", msg)
    return m.group(1) if m else None


@pytest.mark.oracle
def test_verify_module_agrees_with_xla_compile():
    require_jax()
    from tests import xla_oracle

    names = list(CASES)
    results = xla_oracle.compile_many([CASES[n] for n in names])
    rejected = 0
    for name, (ok, msg) in zip(names, results):
        ours = _ours(CASES[name])
        if ok:
            assert ours is None, (name, ours)
            continue
        rejected += 1
        assert ours is not None, (name, "XLA rejects it: " + msg[:400])
        instr = NAMED_BY_US.get(name) or _xla_names(msg)
        assert instr, (name, msg[:400])
        assert ours.startswith(f"t.hlo:{_line_of(CASES[name], instr)}:"), (name, ours, msg[:300])
        # lint reports the verifier's first problem at the same instruction (HS002, or HS30x for a collective)
        errors = [f for f in lint_text(CASES[name], "t.hlo", LintOptions(num_partitions=8)) if f.severity == "error"]
        assert errors and ours.startswith(f"t.hlo:{errors[0].line}:{errors[0].column}: "), (name, ours, errors[:2])
        assert errors[0].message in ours, (name, errors[0].message, ours)
    assert rejected >= 8 and len(names) - rejected >= 8


@pytest.mark.oracle
def test_broadcast_of_a_size1_dim_is_solved_into_a_module_xla_compiles(tmp_path):
    require_jax()
    from tests import xla_oracle

    src = tmp_path / "w.hlo"
    src.write_text(CASES["broadcast_size1_in_while"])
    out = tmp_path / "w.solved.hlo"
    r = CliRunner().invoke(main, ["solve", str(src), "--mesh", "8", "-o", str(out), "--time-limit", "10"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["cost", str(src), "--mesh", "8"])
    assert r.exit_code == 0, r.output
    ok, msg = xla_oracle.compile_spmd(out.read_text())
    assert ok, msg[:400]


def test_solve_and_cost_exit_2_with_the_verifier_message(tmp_path):
    src = tmp_path / "bad.hlo"
    src.write_text(CASES["all_reduce_flattened_half"])
    for cmd in (["cost", str(src), "--mesh", "8"], ["solve", str(src), "--mesh", "8", "-o", str(tmp_path / "o.hlo")]):
        r = CliRunner().invoke(main, cmd)
        assert r.exit_code == 2, r.output
        assert "In flattened_id mode, replica groups should contain 8 flattened IDs, but found 4" in r.output
        assert f"{src}:{_line_of(CASES['all_reduce_flattened_half'], 'r')}:8:" in r.output
    assert not (tmp_path / "o.hlo").exists()
