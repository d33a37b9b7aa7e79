"""Seconds with --device (issue 27): the roofline per instruction, fused-attention flops, cost / solve
reports in seconds, link classes of written collectives' replica groups."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from hloshard.cli import main
from hloshard.cost.flops import attention_flops, matmul_flops
from hloshard.cost.roofline import hbm_bytes, roofline
from hloshard.devices import get_profile
from hloshard.hlo import parse_module
from hloshard.timing import axis_link_name

PER_DEVICE = """HloModule pd, num_partitions=8

add {
  a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT s = bf16[] add(a, b)
}

ENTRY e {
  x = bf16[512,1024] parameter(0), sharding={replicated}
  w = bf16[1024,1024] parameter(1), sharding={replicated}
  d = bf16[512,1024] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  r = bf16[512,1024] all-reduce(d), channel_id=1, replica_groups={{0,1},{2,3},{4,5},{6,7}}, use_global_device_ids=true, to_apply=add
  ROOT g = bf16[512,4096] all-gather(r), channel_id=2, replica_groups={{0,2,4,6},{1,3,5,7}}, dimensions={1}, use_global_device_ids=true
}
"""

FUSION = """HloModule f

ENTRY e {
  x = f32[1024] parameter(0)
  y = f32[1024] parameter(1)
  z = f32[1024] parameter(2)
  m = f32[1024] multiply(x, y)
  a = f32[1024] add(m, z)
  ROOT n = f32[1024] negate(a)
}
"""

ATTN = """HloModule attn

ENTRY e {
  q = bf16[2,128,8,64] parameter(0)
  k = bf16[2,256,2,64] parameter(1)
  v = bf16[2,256,2,32] parameter(2)
  ROOT f = (bf16[2,128,8,32], f32[2,8,128,1]) custom-call(q, k, v), custom_call_target="te_fused_attn_forward_ffi"
  b = (bf16[2,128,8,64], bf16[2,256,2,64], bf16[2,256,2,32]) custom-call(q, k, v), custom_call_target="te_fused_attn_backward_ffi"
}
"""


def _cost_json(tmp_path, text, *args):
    path = tmp_path / "m.hlo"
    path.write_text(text)
    r = CliRunner().invoke(main, ["cost", str(path), "--format", "json", *args])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def test_fused_attention_flops_from_operand_shapes():
    m = parse_module(ATTN)
    f, b = m.entry.get("f"), m.entry.get("b")
    per = 2 * 2 * 8 * 128 * 256          # 2 * batch * q heads * s_q * s_kv
    assert attention_flops(f) == per * (64 + 32)
    assert attention_flops(b) == per * (3 * 64 + 2 * 32)
    assert matmul_flops(f) == attention_flops(f)
    assert attention_flops(m.entry.get("q")) == 0


def test_roofline_counts_what_fusion_materialises():
    """multiply and add fuse into negate (the root): one kernel reads x, y, z and writes n."""
    m = parse_module(FUSION)
    e = m.entry
    size = lambda i: i.shape.byte_size  # noqa: E731
    assert hbm_bytes(e.get("m"), size) == 0 and hbm_bytes(e.get("a"), size) == 0
    assert hbm_bytes(e.get("n"), size) == 4 * 4096
    roof = roofline(e.instructions, flops_of=lambda i: 1024.0 if i.opcode != "parameter" else 0.0,
                    size_of=size, executions_of=lambda i: 1.0, peak_of=lambda i: 1e12, hbm_bandwidth=1e9)
    assert roof.hbm_bytes == 4 * 4096
    assert roof.seconds == pytest.approx(4 * 4096 / 1e9 + 2 * 1024 / 1e12)   # n memory-bound, m and a compute
    assert roof.memory_bound_s == pytest.approx(4 * 4096 / 1e9)


def test_written_collectives_cost_the_link_their_groups_cross(tmp_path):
    """A per-device program: the all-reduce pairs devices along `model`, the all-gather runs along `data`;
    marking `data` as crossing nodes makes only the all-gather slower, by the ring formula."""
    h100 = get_profile("h100-sxm")
    ici = _cost_json(tmp_path, PER_DEVICE, "--mesh", "data=4,model=2", "--device", "h100-sxm")
    dcn = _cost_json(tmp_path, PER_DEVICE, "--mesh", "data=4:dcn,model=2", "--device", "h100-sxm")
    assert ici["step_time"]["per_device_program"] is True
    assert ici["step_time"]["axis_links"] == {"data": "ici", "model": "ici"}
    assert dcn["step_time"]["axis_links"] == {"data": "dcn", "model": "ici"}
    assert dcn["step_time"]["axis_link_names"] == {"data": "InfiniBand", "model": "NVLink"}
    mb = 512 * 1024 * 2
    ar = 2 * (1 / 2) * mb / h100.ici.bandwidth + 1 * h100.ici.latency     # ring all-reduce over 2 devices
    ag_ici = (3 / 4) * 4 * mb / h100.ici.bandwidth + 3 * h100.ici.latency  # ring all-gather of 4 MiB over 4
    ag_dcn = (3 / 4) * 4 * mb / h100.dcn.bandwidth + 3 * h100.dcn.latency
    # each collective also reads its input and writes its output in HBM (collectives.with_hbm)
    ar += 2 * mb / h100.hbm_bandwidth
    ag_ici += (mb + 4 * mb) / h100.hbm_bandwidth
    ag_dcn += (mb + 4 * mb) / h100.hbm_bandwidth
    assert ici["step_time"]["breakdown_s"]["communication_s"] == pytest.approx(ar + ag_ici, rel=1e-3)
    assert dcn["step_time"]["breakdown_s"]["communication_s"] == pytest.approx(ar + ag_dcn, rel=1e-3)
    # the whole per-device program runs on each device: flops of the dot, HBM bytes of what is materialised
    assert ici["flops_per_device"] == pytest.approx(2 * 512 * 1024 * 1024)
    assert ici["hbm_bytes_per_device"] == (mb + 2 * mb + mb) + (mb + mb) + (mb + 4 * mb)
    compute = max(2 * 512 * 1024 * 1024 / 989.5e12, 4 * mb / 3.35e12)
    assert ici["step_time"]["breakdown_s"]["compute_s"] == pytest.approx(compute)
    assert ici["estimated_step_time_s"] == pytest.approx(compute + ar + ag_ici, rel=1e-3)
    assert ici["mfu"] == pytest.approx(8 * 2 * 512 * 1024 * 1024 / (ici["estimated_step_time_s"] * 989.5e12 * 8))


def test_without_device_the_report_is_in_cost_units(tmp_path):
    d = _cost_json(tmp_path, PER_DEVICE, "--mesh", "data=4,model=2")
    assert "estimated_step_time_s" not in d and "step_time" not in d
    assert d["total_cost"] > 0


def test_cost_text_summary_says_seconds_and_links(tmp_path):
    path = tmp_path / "m.hlo"
    path.write_text(PER_DEVICE)
    r = CliRunner().invoke(main, ["cost", str(path), "--mesh", "data=4:dcn,model=2", "--device", "h100-sxm"])
    assert r.exit_code == 0, r.output
    assert "estimated step time" in r.output and "data: InfiniBand (dcn), model: NVLink (ici)" in r.output
    assert "total cost" not in r.output


def test_device_and_alpha_together_is_a_usage_error(tmp_path):
    path = tmp_path / "m.hlo"
    path.write_text(PER_DEVICE)
    r = CliRunner().invoke(main, ["cost", str(path), "--mesh", "8", "--device", "h100", "--alpha", "1"])
    assert r.exit_code == 2 and "--device" in r.output


# One MLP layer's train step, batch sharded over `data` as jax passes it; weights left to the solver.
# Tokens (32768) outnumber weight rows: per step a tensor-parallel all-reduce of activations moves more
# than a data-parallel all-reduce of the weight gradients, as in a real LLM step.
MLP_STEP = """HloModule mlp_step, num_partitions=8

ENTRY step {
  x = bf16[32768,2048] parameter(0), sharding={devices=[4,1,2]<=[8] last_tile_dim_replicate}
  t = bf16[32768,2048] parameter(1), sharding={devices=[4,1,2]<=[8] last_tile_dim_replicate}
  w1 = bf16[2048,8192] parameter(2)
  w2 = bf16[8192,2048] parameter(3)
  h = bf16[32768,8192] dot(x, w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  a = bf16[32768,8192] tanh(h)
  y = bf16[32768,2048] dot(a, w2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  dy = bf16[32768,2048] subtract(y, t)
  dw2 = bf16[8192,2048] dot(a, dy), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  da = bf16[32768,8192] dot(dy, w2), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  dh = bf16[32768,8192] multiply(da, a)
  dw1 = bf16[2048,8192] dot(x, dh), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  w1n = bf16[2048,8192] subtract(w1, dw1)
  w2n = bf16[8192,2048] subtract(w2, dw2)
  ROOT r = (bf16[2048,8192], bf16[8192,2048]) tuple(w1n, w2n)
}
"""


def _plan_collectives(spec: str):
    from hloshard.autoshard import solve_module
    from hloshard.mesh_setup import timed_mesh_from_options
    from hloshard.xla_compare import predicted_collectives

    m = parse_module(MLP_STEP)
    dmesh, scale, _ = timed_mesh_from_options(m, spec, None, None, None, "h100-sxm")
    r = solve_module(m, dmesh, keep="io", time_limit=10, deterministic=True)
    written = predicted_collectives(r.written)   # the collectives of the module as written
    return scale.links, [(name, c) for name, recs in sorted(written.items()) for c in recs]


@pytest.mark.parametrize("spec, dcn_axis", [("data=4:dcn,model=2", 0), ("data=4,model=2:dcn", 1)])
def test_hierarchy_keeps_activation_collectives_inside_a_node(spec, dcn_axis):
    """Whichever axis crosses nodes, the only collectives whose replica groups span nodes are the
    weight-gradient all-reduces (data parallelism); activation collectives (tensor parallelism) stay
    on the fast links. Device d of the iota 4x2 mesh sits at (d // 2, d % 2)."""
    links, collectives = _plan_collectives(spec)
    assert links[dcn_axis] == "dcn" and links[1 - dcn_axis] == "ici"
    assert collectives, "the plan communicates (a plan without collectives proves nothing)"
    coord = lambda d: (d // 2, d % 2)  # noqa: E731
    crossing = [(n, c.kind) for n, c in collectives
                if any(len({coord(d)[dcn_axis] for d in g}) > 1 for g in c.replica_groups)]
    assert all(n in ("dw1", "dw2") and k == "all-reduce" for n, k in crossing), collectives
    if dcn_axis == 0:   # the expert plan: data parallelism across nodes, tensor parallelism inside
        assert crossing
        tp = [c for n, c in collectives if n not in ("dw1", "dw2")]
        assert tp and all(len({coord(d)[0] for d in g}) == 1 for c in tp for g in c.replica_groups)


def test_pins_become_sharding_calls_for_the_tpu_compiler():
    from hloshard.xla_cost import copies_as_sharding_calls

    text = ("  x.pin = f32[64,512]{1,0} copy(x.1), sharding={replicated}\n"
            "  y = f32[64,512]{1,0} copy(x.1)\n")
    out = copies_as_sharding_calls(text)
    assert out.splitlines()[0] == ('  x.pin = f32[64,512]{1,0} custom-call(x.1), custom_call_target="Sharding", '
                                   'sharding={replicated}')
    assert out.splitlines()[1] == "  y = f32[64,512]{1,0} copy(x.1)"
    parse_module("HloModule m\nENTRY e {\n  x.1 = f32[64,512]{1,0} parameter(0)\n" + out.splitlines()[0]
                 .replace("x.pin", "ROOT x.pin") + "\n}\n")


def test_solve_with_device_reports_seconds_and_defaults_the_budget_to_hbm(tmp_path):
    path = tmp_path / "m.hlo"
    path.write_text(MLP_STEP)
    out = tmp_path / "o.hlo"
    r = CliRunner().invoke(main, ["solve", str(path), "--mesh", "data=4:dcn,model=2", "--device", "h100-sxm",
                                  "--deterministic", "--time-limit", "5", "-o", str(out), "--format", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)   # warnings (a train step's untied state) go to stderr
    h100 = get_profile("h100-sxm")
    assert d["memory_budget"] == h100.hbm_bytes
    b = d["step_time"]["breakdown_s"]
    assert d["estimated_step_time_s"] == pytest.approx(b["compute_s"] + b["communication_s"] + b["resharding_s"])
    assert b["communication_s"] > 0 and 0 < d["mfu"] < 1
    # model flops of the step: 5 dots (h, y, dw2, da, dw1; no input gradient) of 2 * 32768 * 2048 * 8192 flops
    assert d["step_time"]["model_flops"] == pytest.approx(5 * 2 * 32768 * 2048 * 8192)
    assert d["step_time"]["axis_links"] == {"data": "dcn", "model": "ici"}


@pytest.mark.oracle
@pytest.mark.parametrize("sample", ["transformer_block"])
def test_cost_xla_flops_and_bytes_beside_xla_cpu(sample):
    """`cost --xla --device`: XLA CPU's cost_analysis() beside the roofline's flops and HBM bytes per device
    (BENCHMARKS.md "Seconds: predicted vs XLA": flops within 5%, bytes within the measured 0.70-0.75).
    A GPU device: its roofline counts bytes with the CPU backend's fusion rule, the one XLA CPU's
    figure can check (a TPU device counts the TPU compiler's fusion, ``cost.tpu_fusion``)."""
    from tests.conftest import SAMPLES, require_jax

    require_jax()
    path = SAMPLES / f"{sample}.propagated.hlo"
    r = CliRunner().invoke(main, ["cost", str(path), "--mesh", "2x4", "--device", "h100-sxm", "--xla",
                                  "--format", "json"])
    assert r.exit_code == 0, r.output
    c = json.loads(r.output)["xla_cost"]
    assert c["xla_cost_error"] is None
    assert c["flops_per_device"] == pytest.approx(c["xla_flops_per_device"], rel=0.05)
    assert 0.6 < c["hbm_bytes_per_device"] / c["xla_bytes_accessed_per_device"] < 1.25


def test_an_axis_spanning_nodes_is_named_by_both_its_links():
    """`--mesh 16` on 8-GPU nodes: one axis whose groups hold 8 devices of each of 2 nodes is named by both link
    levels it is priced by (round 27); 4x4's outer axis holds 2 of each of 2 nodes; an axis marked `dcn` whose
    members are each on a node of their own, and an inner axis, keep one name."""
    h100 = get_profile("h100-sxm")
    assert axis_link_name(h100, (16,), 0, "dcn") == "NVLink x8 inside a node, InfiniBand across 2 nodes"
    assert axis_link_name(h100, (4, 4), 0, "dcn") == "NVLink x2 inside a node, InfiniBand across 2 nodes"
    assert axis_link_name(h100, (4, 4), 1, "ici") == "NVLink"
    assert axis_link_name(h100, (2, 8), 0, "dcn") == "InfiniBand"
    assert axis_link_name(get_profile("tpu-v5e"), (2, 4), 1, "ici") == "ICI"


REPEAT = """HloModule rep

ENTRY e {
  x = f32[64,256] parameter(0), sharding={SX}
  w = f32[256,512] parameter(1), sharding={SW}
  ROOT d = f32[64,512] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={SD}
}
"""


@pytest.mark.parametrize("sx,sw,sd,repeat", [
    # batch over all 8 devices: each device runs 1/8 of the dot
    ("devices=[8,1]<=[8]", "replicated", "devices=[8,1]<=[8]", 1.0),
    # batch over 'model' (4) only, 'data' (2) splits nothing: each device runs 2x its 1/8 share
    ("devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate", "replicated",
     "devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate", 2.0),
    ("replicated", "replicated", "replicated", 8.0),
])
def test_the_summary_says_when_a_plan_repeats_matmul_compute(tmp_path, sx, sw, sd, repeat):
    """New user 34 F11: a plan that leaves a (slow, dcn) axis out of every matmul repeats their flops on its
    devices; the report gives the factor and the text summary says it whenever it is above 1."""
    text = REPEAT.replace("SX", sx).replace("SW", sw).replace("SD", sd)
    d = _cost_json(tmp_path, text, "--mesh", "data=2:dcn,model=4", "--device", "h100-sxm")
    assert d["step_time"]["matmul_repeat"] == pytest.approx(repeat)
    path = tmp_path / "m.hlo"
    r = CliRunner().invoke(main, ["cost", str(path), "--mesh", "data=2:dcn,model=4", "--device", "h100-sxm"])
    assert r.exit_code == 0, r.output
    said = "matmuls repeated: each device runs" in " ".join(r.output.split())
    assert said == (repeat > 1.0)
    if said:
        assert f"{repeat:.2f}x its 1/8 share" in " ".join(r.output.split())
