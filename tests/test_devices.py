"""Device profiles (hloshard.devices): datasheet numbers, TOML profiles, link classes per mesh axis and
the unit that turns the cost model into seconds."""

import math

import pytest

from hloshard import devices
from hloshard.errors import UsageError
from hloshard.strategy.base import COMPUTE_COST_PER_FLOP
from hloshard.cost.collectives import all_gather_cost


def test_every_profile_is_complete_and_sourced():
    for name, p in devices.PROFILES.items():
        assert p.name == name
        assert p.sources, name
        assert p.hbm_bytes > 2**30 and p.hbm_bandwidth > 1e11
        assert "bf16" in p.peak_flops and p.f32_matmul in p.peak_flops
        # the slow links are slower than the fast ones, and slower in latency too
        assert p.dcn.bandwidth < p.ici.bandwidth and p.dcn.latency > p.ici.latency


def test_h100_figures_are_the_datasheet_dense_ones():
    p = devices.get_profile("H100")          # alias, case-insensitive
    assert p.name == "h100-sxm"
    assert p.peak_flops["bf16"] == pytest.approx(989.5e12)
    assert p.hbm_bandwidth == pytest.approx(3.35e12)
    assert p.ici.bandwidth == pytest.approx(450e9) and p.dcn.bandwidth == pytest.approx(50e9)


def test_unknown_device_names_the_known_ones():
    with pytest.raises(UsageError, match="h100-sxm.*tpu-v6e"):
        devices.get_profile("z80")


def test_axis_links_default_rule_and_marks():
    # innermost axes up to devices_per_node are intra-node
    assert devices.axis_links((2, 8), 8) == ("dcn", "ici")
    assert devices.axis_links((2, 4), 8) == ("ici", "ici")
    assert devices.axis_links((4, 4), 8) == ("dcn", "ici")
    assert devices.axis_links((16,), 8) == ("dcn",)          # one axis straddling nodes
    assert devices.axis_links((4, 2), 8, ["dcn", None]) == ("dcn", "ici")
    assert devices.axis_links((2, 4), 8, [None, "dcn"]) == ("ici", "dcn")
    with pytest.raises(UsageError):
        devices.axis_links((2, 4), 8, ["nvlink", None])


def test_split_link_marks():
    assert devices.split_link_marks("data=16:dcn,model=8") == ("data=16,model=8", ("dcn", None))
    assert devices.split_link_marks("2x4:ici") == ("2x4", (None, "ici"))
    assert devices.split_link_marks("2x4") == ("2x4", None)
    with pytest.raises(UsageError, match="unknown link mark"):
        devices.split_link_marks("data=2:pcie,model=4")


def test_time_scale_prices_flops_and_bytes_in_seconds():
    p = devices.get_profile("h100-sxm")
    ts = devices.time_scale(p, (2, 8), ("dcn", "ici"), "bf16", COMPUTE_COST_PER_FLOP)
    # one flop costs COMPUTE_COST_PER_FLOP units = 1/peak seconds
    assert ts.seconds(COMPUTE_COST_PER_FLOP * 989.5e12) == pytest.approx(1.0)
    # a byte over the fast axis costs 1/450e9 s, over the slow one 1/50e9 s
    assert ts.seconds(ts.beta[1]) == pytest.approx(1 / 450e9)
    assert ts.seconds(ts.beta[0]) == pytest.approx(1 / 50e9)
    # latency: (n-1) ring steps
    assert ts.seconds(ts.alpha[1]) == pytest.approx(7 * 2e-6)

    class M:  # a mesh as the collective cost functions see it
        shape = (2, 8)
        alpha = ts.alpha
        beta = ts.beta

    # all-gathering 8 GB over the 8 NVLink-connected GPUs: 7/8 * 8e9 / 450e9 s + 7 steps of latency
    t = ts.seconds(all_gather_cost(M, 8e9, 1))
    assert t == pytest.approx(7 / 8 * 8e9 / 450e9 + 7 * 2e-6, rel=1e-6)
    # the same over the 2-node axis is 9x slower in bandwidth
    t_slow = ts.seconds(all_gather_cost(M, 8e9, 0))
    assert t_slow == pytest.approx(1 / 2 * 8e9 / 50e9 + 1 * 8e-6, rel=1e-6)


def test_matmul_peak_by_dtype():
    gpu, tpu = devices.get_profile("h100-sxm"), devices.get_profile("tpu-v5e")
    assert devices.matmul_peak(gpu, "f32") == ("tf32", pytest.approx(494.5e12))
    assert devices.matmul_peak(tpu, "f32") == ("bf16", pytest.approx(197e12))
    assert devices.matmul_peak(gpu, "f8e4m3fn")[0] == "fp8"
    assert devices.matmul_peak(tpu, "f8e4m3fn")[0] == "bf16"   # v5e lists no fp8: bf16 fallback


def test_toml_profile(tmp_path):
    f = tmp_path / "lab-gpu.toml"
    f.write_text("""
devices_per_node = 4
hbm_gib = 48
hbm_bandwidth_gbps = 960
f32_matmul = "fp32"
[peak_tflops]
bf16 = 181
fp32 = 90.5
[ici]
bandwidth_gbps = 32
latency_us = 3
[dcn]
bandwidth_gbps = 12.5
latency_us = 10
""")
    p = devices.get_profile(str(f))
    assert p.name == "lab-gpu" and p.devices_per_node == 4
    assert p.hbm_bytes == 48 * 2**30 and p.peak_flops["fp32"] == pytest.approx(90.5e12)
    assert p.ici.latency == pytest.approx(3e-6)
    assert p.hbm_efficiency == 1.0 and p.sustained_hbm_bandwidth == pytest.approx(960e9)
    f.write_text(f.read_text().replace("hbm_bandwidth_gbps = 960", "hbm_bandwidth_gbps = 960\nhbm_efficiency = 0.8"))
    assert devices.get_profile(str(f)).sustained_hbm_bandwidth == pytest.approx(768e9)
    f.write_text(f.read_text().replace("hbm_efficiency = 0.8", "hbm_efficiency = 1.5"))
    with pytest.raises(UsageError, match="at most 1"):
        devices.get_profile(str(f))


def test_links_are_named_as_the_device_calls_them(tmp_path):
    """The marks stay :ici / :dcn on every device; reports name them NVLink / InfiniBand on a GPU, ICI /
    DCN on a TPU, or what a TOML profile calls them."""
    for gpu in ("h100-sxm", "h200", "a100-80gb", "b200"):
        p = devices.get_profile(gpu)
        assert (p.link_name("ici"), p.link_name("dcn")) == ("NVLink", "InfiniBand")
    for tpu in ("tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e"):
        p = devices.get_profile(tpu)
        assert (p.link_name("ici"), p.link_name("dcn")) == ("ICI", "DCN")
    with pytest.raises(UsageError, match="unknown link class"):
        devices.get_profile("h100").link_name("nvlink")
    body = ("devices_per_node = 4\nhbm_gib = 1\nhbm_bandwidth_gbps = 1\n[peak_tflops]\nbf16 = 3\n"
            "[ici]\nbandwidth_gbps = 2\nlatency_us = 1\n[dcn]\nbandwidth_gbps = 1\nlatency_us = 9\n")
    f = tmp_path / "lab.toml"
    f.write_text(body)
    assert devices.get_profile(str(f)).link_name("dcn") == "InfiniBand"      # not tpu-*: a GPU's names
    f.write_text(body + 'name = "RoCE"\n')
    assert devices.get_profile(str(f)).link_name("dcn") == "RoCE"
    f.write_text(body + "name = 3\n")
    with pytest.raises(UsageError, match=r"\[dcn\]: 'name' must be a non-empty string"):
        devices.get_profile(str(f))


def test_tpu_profiles_sustain_the_tpu_compilers_hbm_bandwidth():
    """The TPU compiler's cost model (libtpu 0.0.42) charges HBM-bound work at 0.90 x 819 GB/s on v5e,
    0.85 x 2,765 GB/s on v5p, the datasheet figure on v6e (BENCHMARKS.md, Round 10); GPUs: no figure."""
    assert devices.get_profile("tpu-v5e").sustained_hbm_bandwidth == pytest.approx(737.1e9)
    assert devices.get_profile("tpu-v5p").sustained_hbm_bandwidth == pytest.approx(2350.25e9)
    assert devices.get_profile("tpu-v6e").sustained_hbm_bandwidth == pytest.approx(1638e9)
    assert devices.get_profile("h100-sxm").sustained_hbm_bandwidth == pytest.approx(3.35e12)


@pytest.mark.parametrize("body, message", [
    ("devices_per_node = 4\n", "peak_tflops"),
    ("devices_per_node = 4\nhbm_gib = 1\nhbm_bandwidth_gbps = 1\n[peak_tflops]\nbf16 = -3\n", "positive"),
    ("devices_per_node = 4\nhbm_gib = 1\nhbm_bandwidth_gbps = 1\n[peak_tflops]\nbf16 = 3\n[ici]\nbandwidth_gbps = 1\nlatency_us = 1\n", r"\[dcn\]"),
    ("devices_per_node = [\n", "invalid TOML"),
    # a typo in an optional key was ignored silently (a new user's finding): one error naming the closest
    ("devices_per_node = 4\nhbm_efficency = 0.9\n", r"unknown key 'hbm_efficency' \(did you mean 'hbm_efficiency'\?\)"),
    ("devices_per_node = 4\nhbm_gib = 1\nhbm_bandwidth_gbps = 1\n[peak_tflops]\nbf16 = 3\n[ici]\nbandwith_gbps = 1\n",
     r"\[ici\]: unknown key 'bandwith_gbps'"),
])
def test_bad_toml_profile_is_a_usage_error(tmp_path, body, message):
    f = tmp_path / "bad.toml"
    f.write_text(body)
    with pytest.raises(UsageError, match=message):
        devices.get_profile(str(f))


def test_missing_toml_profile(tmp_path):
    with pytest.raises(UsageError, match="cannot read"):
        devices.get_profile(str(tmp_path / "nope.toml"))


def test_timed_mesh_from_options_sets_link_costs_and_budget():
    from hloshard.mesh_setup import mesh_from_options, timed_mesh_from_options
    from hloshard.hlo import parse_module
    text = """HloModule m, num_partitions=8
ENTRY e {
  a = bf16[64,64] parameter(0)
  ROOT d = bf16[64,64] dot(a, a), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""
    m = parse_module(text)
    dm, ts, budget = timed_mesh_from_options(m, "data=2:dcn,model=4", None, None, None, "h100")
    assert ts.links == ("dcn", "ici") and ts.peak_key == "bf16"
    assert budget == 80 * 2**30
    assert dm.beta[0] > dm.beta[1] > 0
    assert math.isclose(dm.beta[0] / dm.beta[1], 450 / 50)
    with pytest.raises(UsageError, match="need --device"):
        mesh_from_options(m, "data=2:dcn,model=4", None, None, None)
    with pytest.raises(UsageError, match="--alpha"):
        timed_mesh_from_options(m, "2x4", None, "1,1", None, "h100")


def test_every_profile_name_is_a_memory_budget():
    from hloshard.units import DEVICE_ALIASES, parse_memory_budget
    for name, p in devices.PROFILES.items():
        assert parse_memory_budget(name) == p.hbm_bytes
    # the short names --device takes are budgets too (``--memory-budget h100`` was refused)
    for short, name in DEVICE_ALIASES.items():
        assert parse_memory_budget(short) == devices.get_profile(short).hbm_bytes, short


def test_a_sub_axis_pays_the_ring_latency_of_its_own_size():
    """--mesh 8 refined to 4x2 by a sharding: with a device, an all-gather in groups of 2 takes one
    ring step of latency, not the seven of the whole axis; the unit model keeps its alpha per
    sub-axis; the user's mesh is recovered with the whole axis' alpha (round 15: the refined mesh's
    sub-axes paid 7 steps, which made solve prefer a plan the TPU compiler puts 19% slower)."""
    from hloshard.autoshard.evaluate import module_mesh, user_mesh
    from hloshard.mesh_setup import mesh_from_options, timed_mesh_from_options
    from hloshard.hlo import parse_module
    m = parse_module("""HloModule m, num_partitions=8
ENTRY e {
  a = bf16[64,64] parameter(0), sharding={devices=[4,1,2]<=[8] last_tile_dim_replicate}
  ROOT d = bf16[64,64] dot(a, a), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
""")
    dm, ts, _ = timed_mesh_from_options(m, "8", None, None, None, "tpu-v5e")
    assert dm.shape == (4, 2) and ts.alpha == (7 * 1e-6 / ts.seconds_per_unit,)
    assert [ts.seconds(a) for a in dm.alpha] == pytest.approx([3e-6, 1e-6])
    # an all-gather in groups of 2 (the minor sub-axis) pays 1 step of latency, in groups of 4 three
    assert ts.seconds(all_gather_cost(dm, 0, 1)) == pytest.approx(1e-6, rel=1e-3)
    assert ts.seconds(all_gather_cost(dm, 0, 0)) == pytest.approx(3e-6, rel=1e-3)
    # the user's mesh has the whole axis' alpha back, and the written module is priced on the same mesh
    assert user_mesh(dm).alpha == ts.alpha and module_mesh(m, dm) is dm
    # a refinement of the refined mesh keeps the rule: each sub-axis its own ring
    finer = dm.refine((2, 2, 2))
    assert [ts.seconds(a) for a in finer.alpha] == pytest.approx([1e-6, 1e-6, 1e-6])
    # the unit model (no device): every sub-axis keeps the axis' alpha
    assert mesh_from_options(m, "8", None, None, None).alpha == (1.0, 1.0)
    assert devices.sub_axis_alpha(7.0, 8, 8) == 7.0 and devices.sub_axis_alpha(7.0, 8, 1) == 0.0
    assert devices.whole_axis_alpha(devices.sub_axis_alpha(7.0, 8, 4), 8, 4) == pytest.approx(7.0)
    with pytest.raises(ValueError):
        devices.sub_axis_alpha(7.0, 8, 3)


# ------------------------------------------------------------------ round 26 (new user 25b, findings 4 and 7)

_GOOD = ("%sdevices_per_node = 8\nhbm_gib = 80\nhbm_bandwidth_gbps = 3350\n[peak_tflops]\nbf16 = 989.5\n"
         "[ici]\nbandwidth_gbps = 450\nlatency_us = 2\n[dcn]\nbandwidth_gbps = 50\nlatency_us = 8\n")
_F32_DOT = """HloModule m
ENTRY e {
  a = f32[64,64] parameter(0)
  ROOT d = f32[64,64] dot(a, a), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


def test_a_profile_missing_several_fields_names_all_of_them(tmp_path):
    """bad1.toml: no hbm_bandwidth_gbps and no [dcn]; the error named the first only, fixing it revealed the next."""
    f = tmp_path / "bad1.toml"
    f.write_text("devices_per_node = 8\nhbm_gib = 80\n[peak_tflops]\nbf16 = 989.5\n[ici]\nbandwidth_gbps = 450\n")
    with pytest.raises(UsageError) as e:
        devices.get_profile(str(f))
    msg = str(e.value)
    assert "hbm_bandwidth_gbps" in msg and "[dcn]" in msg and "[ici] 'latency_us'" in msg, msg
    f.write_text(_GOOD.replace("hbm_gib = 80", "hbm_gib = -80").replace("devices_per_node = 8", "devices_per_node = 0")
                 % "")
    with pytest.raises(UsageError, match=r"'devices_per_node' must be a positive number, got 0; 'hbm_gib' must"):
        devices.get_profile(str(f))


def test_f32_peak_default_and_peak_keys(tmp_path):
    f = tmp_path / "p.toml"
    f.write_text(_GOOD % "")                       # bf16 only: no f32 peak
    assert devices.get_profile(str(f)).f32_matmul == ""
    f.write_text(_GOOD.replace("bf16 = 989.5\n", "bf16 = 989.5\ntf32 = 494.5\n") % "")
    assert devices.get_profile(str(f)).f32_matmul == "tf32"      # the only f32 format listed
    f.write_text(_GOOD.replace("bf16 = 989.5\n", "bf16 = 989.5\ntf32 = 494.5\nf32 = 67\n") % "")
    p = devices.get_profile(str(f))
    assert p.f32_matmul == "fp32" and p.peak_flops["fp32"] == pytest.approx(67e12)   # HLO's name read as fp32
    f.write_text(_GOOD.replace("bf16 = 989.5\n", "bf16 = 989.5\nbfloat16 = 3\n") % "")
    with pytest.raises(UsageError, match=r"\[peak_tflops\]: unknown key 'bfloat16'"):
        devices.get_profile(str(f))


def test_no_f32_peak_for_f32_dots_is_an_error_that_says_what_to_add(tmp_path):
    """bad2.toml: f32 dots were priced at the bf16 peak (MFU 0.35% where h100-sxm says 0.69%), silently."""
    from hloshard.hlo import parse_module
    from hloshard.mesh_setup import timed_mesh_from_options

    m = parse_module(_F32_DOT)
    assert devices.f32_matmul_count(m) == 1
    f = tmp_path / "bad2.toml"
    f.write_text(_GOOD % "")
    with pytest.raises(UsageError, match=r"1 f32 dot/convolution but the profile gives no f32 peak.*tf32 = .*"
                                         r"fp32 = .*f32_matmul = \"bf16\""):
        timed_mesh_from_options(m, "2x4", None, None, None, str(f))
    bf16 = parse_module(_F32_DOT.replace("f32", "bf16"))
    timed_mesh_from_options(bf16, "2x4", None, None, None, str(f))   # no f32 dot: nothing to refuse
    f.write_text(_GOOD % 'f32_matmul = "bf16"\n')                      # said on purpose (a TPU's passes)
    _, ts, _ = timed_mesh_from_options(m, "2x4", None, None, None, str(f))
    assert ts.peak_key == "bf16"
    for name in devices.PROFILES:                                       # every built-in names its f32 peak
        devices.check_matmul_peaks(devices.get_profile(name), m)


def test_marks_on_unnamed_axes_and_spaces_are_read_by_one_rule():
    """Finding 7: ``"data=2 :dcn,model=4"`` and ``2:dcnx4`` were accepted without documentation; now one splitter,
    documented; the axes are split as DeviceMesh.parse splits them (``2X4:ICI`` no longer gave 1 mark for 2 axes)."""
    s = devices.split_link_marks
    assert s("data=2 :dcn,model=4") == ("data=2,model=4", ("dcn", None))
    assert s("data=2: DCN ,model=4") == ("data=2,model=4", ("dcn", None))
    assert s("2:dcnx4") == s("2:dcn x 4") == ("2x4", ("dcn", None))
    assert s("2X4:ICI") == s("2*4:ici") == ("2x4", (None, "ici"))
    with pytest.raises(UsageError, match=r"--mesh 2:nvlinkx4: unknown link mark ':nvlink'"):
        s("2:nvlinkx4")


def test_node_spans():
    assert devices.node_spans((4, 2, 2), 0, 8) == (2, 2)      # axis 0's groups: 2 devices in each of 2 nodes
    assert devices.node_spans((16,), 0, 8) == (2, 8)
    assert devices.node_spans((2, 8), 0, 8) is None           # one device per node: a clean dcn axis
    assert devices.node_spans((2, 8), 1, 8) is None           # inside a node
    assert devices.node_spans((4, 4), 0, 8) == (2, 2)
