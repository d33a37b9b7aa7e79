"""The TPU compiler's fusion rule for the roofline's HBM bytes (issue 27, :mod:`hloshard.cost.tpu_fusion`):
producers fused into dot operands, dot output fusion, expensive producers not duplicated (but f32 exp /
divide / sqrt / rsqrt, cheap on the TPU), the windowed einsum of a dot whose partial sums are scattered;
the CPU rule unchanged without a TPU device."""

from __future__ import annotations

from hloshard.cost.roofline import hbm_bytes, kernel_reads
from hloshard.cost.tpu_fusion import CPU_FUSION, TPU_FUSION, absorbed_by, epilogue, fusion_rule, is_fused
from hloshard.devices import get_profile
from hloshard.hlo import parse_module

_R = ", sharding={replicated}"

# a layer norm's elementwise tail feeding a dot, the dot's bias add (its one consumer, an output of the
# program), an exp read twice
LN_DOT = f"""HloModule ln, num_partitions=8

ENTRY main {{
  x = f32[128,256] parameter(0){_R}
  m = f32[128] parameter(1){_R}
  g = f32[256] parameter(2){_R}
  w = f32[256,512] parameter(3){_R}
  b = f32[128,512] parameter(4){_R}
  mb = f32[128,256] broadcast(m), dimensions={{0}}{_R}
  c = f32[128,256] subtract(x, mb){_R}
  gb = f32[128,256] broadcast(g), dimensions={{1}}{_R}
  n = f32[128,256] multiply(c, gb){_R}
  d = f32[128,512] dot(n, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}{_R}
  y = f32[128,512] add(d, b){_R}
  e = f32[128,512] exponential(y){_R}
  n1 = f32[128,512] negate(e){_R}
  n2 = f32[128,512] abs(e){_R}
  ROOT t = (f32[128,512], f32[128,512], f32[128,512]) tuple(y, n1, n2), sharding={{{{replicated}}, {{replicated}}, {{replicated}}}}
}}
"""


def _by_name(text):
    return _by_name_in(parse_module(text))


def _by_name_in(module):
    return {i.name: i for c in module.computations for i in c.instructions}


def _size(i) -> float:
    return float(i.shape.byte_size) if i.shape.is_array else 0.0


def test_producers_fuse_into_a_dot_on_tpu_only():
    ins = _by_name(LN_DOT)
    # the CPU backend materialises the dot's operand; the TPU computes it inside the dot's fusion
    assert not CPU_FUSION.is_fused(ins["n"])
    assert is_fused(ins["n"]) and is_fused(ins["c"])
    names = {b.name for b, _ in kernel_reads(ins["d"], TPU_FUSION)}
    assert {"x", "m", "g", "w"} <= names and "n" not in names
    assert {b.name for b, _ in kernel_reads(ins["d"], CPU_FUSION)} == {"n", "w"}


def test_dot_writes_its_bias_add_and_the_add_moves_nothing():
    ins = _by_name(LN_DOT)
    assert epilogue(ins["d"]) is ins["y"] and absorbed_by(ins["y"]) is ins["d"]
    assert hbm_bytes(ins["y"], _size, TPU_FUSION) == 0.0
    # dot kernel: reads x [128,256], m, g, w, the bias b; writes y (f32[128,512]); never d itself
    want = sum(_size(ins[k]) for k in ("x", "m", "g", "w", "b")) + _size(ins["y"])
    assert hbm_bytes(ins["d"], _size, TPU_FUSION) == want
    # the CPU rule: the dot reads n and w and writes d; the add reads d and b and writes y
    assert hbm_bytes(ins["d"], _size, CPU_FUSION) == _size(ins["n"]) + _size(ins["w"]) + _size(ins["d"])
    assert hbm_bytes(ins["y"], _size, CPU_FUSION) == 3 * _size(ins["y"])


def test_an_f32_exponential_read_twice_is_duplicated_on_the_tpu_only():
    """f32 exp is cheap on the accelerator (tpu_fusion.expensive_on_tpu; libtpu's program of LN_DOT
    writes y, n1 and n2 from one kernel, e never reaches HBM); the CPU rule keeps e's buffer
    (IsExpensive, two consumers), and so does the TPU rule for an f64 exp."""
    from hloshard.cost.tpu_fusion import expensive_on_tpu

    ins = _by_name(LN_DOT)
    assert is_fused(ins["e"]) and not expensive_on_tpu(ins["e"])
    assert hbm_bytes(ins["e"], _size, TPU_FUSION) == 0.0
    assert not CPU_FUSION.is_fused(ins["e"])
    assert hbm_bytes(ins["e"], _size, CPU_FUSION) == 2 * _size(ins["e"])   # reads y, writes e
    wide = _by_name(LN_DOT.replace("f32[128,512] exponential", "f64[128,512] exponential"))
    assert expensive_on_tpu(wide["e"]) and not is_fused(wide["e"])


def test_the_rule_follows_the_device_backend():
    assert fusion_rule(get_profile("tpu-v5e")) is TPU_FUSION
    assert fusion_rule(get_profile("h100-sxm")) is CPU_FUSION
    assert fusion_rule(None) is CPU_FUSION


# a residual add (x + dot) read by two consumers, and a layer norm's two reductions of the same sum
RESIDUAL = f"""HloModule res, num_partitions=8

add {{
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  ROOT s = f32[] add(p, q)
}}

ENTRY main {{
  x = f32[128,256] parameter(0){_R}
  w = f32[256,256] parameter(1){_R}
  d = f32[128,256] dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}{_R}
  r = f32[128,256] add(x, d){_R}
  z = f32[] constant(0)
  sa = f32[128] reduce(r, z), dimensions={{1}}, to_apply=add{_R}
  sq = f32[128,256] multiply(r, r){_R}
  sb = f32[128] reduce(sq, z), dimensions={{1}}, to_apply=add{_R}
  sc = f32[256] reduce(r, z), dimensions={{0}}, to_apply=add{_R}
  ROOT t = (f32[128], f32[128], f32[256]) tuple(sa, sb, sc), sharding={{{{replicated}}, {{replicated}}, {{replicated}}}}
}}
"""


def test_a_shared_residual_add_is_the_dots_output_and_sibling_reductions_read_it_once():
    ins = _by_name(RESIDUAL)
    r = ins["r"]
    # r joins two activations and has three consumers: written once, by the dot's output fusion
    assert is_fused(r) and epilogue(ins["d"]) is r and absorbed_by(r) is ins["d"]
    assert hbm_bytes(r, _size, TPU_FUSION) == 0.0
    assert hbm_bytes(ins["d"], _size, TPU_FUSION) == 2 * _size(x := ins["x"]) + _size(ins["w"])  # reads x, w; writes r
    assert x.shape.dims == r.shape.dims
    # sa, sb and sc reduce the result the dot's kernel writes: all three are outputs of that kernel and
    # read nothing (the TPU compiler's optimised program, v5e:2x4: one kOutput fusion of the dot with a
    # tuple result (sc, sb, sa); round 20, tpufuse)
    assert hbm_bytes(ins["sa"], _size, TPU_FUSION) == _size(ins["sa"])
    assert hbm_bytes(ins["sb"], _size, TPU_FUSION) == _size(ins["sb"])
    assert hbm_bytes(ins["sc"], _size, TPU_FUSION) == _size(ins["sc"])
    # the CPU rule reads r in each
    assert hbm_bytes(ins["sb"], _size, CPU_FUSION) == _size(r) + _size(ins["sb"])


def test_tpu_rule_bytes_against_the_tpu_compiler_on_the_train_step():
    """``cost --device tpu-v5e`` HBM bytes of GSPMD's transformer train step beside the TPU compiler's
    ``bytes accessed`` (libtpu ahead of time; BENCHMARKS.md "Seconds on the TPU compiler", round 12:
    0.83 with the TPU rule, 1.34 with the CPU rule; round 19: 0.74): below 1.25 and nearer than the CPU
    rule; an expected failure below 0.75 (what the TPU counts there is not in the written plan)."""
    import pytest

    from tests.conftest import SAMPLES, require_jax

    require_jax()
    from tests.tpu_oracle import compile_for_tpu, tpu_available

    why = tpu_available()
    if why:
        pytest.skip(why)
    from hloshard.autoshard import evaluate_module
    from hloshard.mesh_setup import timed_mesh_from_options
    from hloshard.timing import plan_roofline

    text = (SAMPLES / "transformer_train_step.propagated.hlo").read_text()
    rec = compile_for_tpu([text])[0]
    assert rec["ok"], rec["error"][:300]
    tpu_bytes = rec["cost"]["bytes accessed"]
    module = parse_module(text)
    mesh, scale, _ = timed_mesh_from_options(module, "2x4", None, None, None, "tpu-v5e")
    res = evaluate_module(module, mesh)
    tpu_rule = plan_roofline(res, module, scale.profile)[0].hbm_bytes
    cpu_rule = plan_roofline(res, module, get_profile("h100-sxm"))[0].hbm_bytes
    assert tpu_rule / tpu_bytes < 1.25
    assert abs(tpu_rule / tpu_bytes - 1) < abs(cpu_rule / tpu_bytes - 1)
    if tpu_rule / tpu_bytes <= 0.75:
        # round 19 (output regions, tanh duplicated, joins of distinct buffers): 0.738. The kernels both
        # sides name are 114.8 MB here / 104.2 MB by the TPU; what the TPU also counts is its partitioner's
        # own traffic: 41.7 MB of collectives against hloshard's 23.6 MB, 14.3 MB of layout copies and
        # reshapes (BENCHMARKS.md round 19)
        pytest.xfail(f"GSPMD plan: {tpu_rule / tpu_bytes:.3f} of the TPU's bytes accessed (the TPU "
                     "partitioner's collectives and relayouts, not in the written plan)")


# two dots in a chain: d1 reads only parameters (it can run first), d2 reads d1's kernel's result (its
# exponential epilogue), v, and x again through its residual add
CHAIN = f"""HloModule chain, num_partitions=8

ENTRY main {{
  x = f32[128,256] parameter(0){_R}
  w = f32[256,256] parameter(1){_R}
  v = f32[256,256] parameter(2){_R}
  d1 = f32[128,256] dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}{_R}
  e = f32[128,256] exponential(d1){_R}
  d2 = f32[128,256] dot(e, v), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}{_R}
  ROOT r = f32[128,256] add(d2, x){_R}
}}
"""


def test_entry_parameters_are_prefetched_unless_only_a_first_kernel_reads_them():
    """Memory-space assignment's copy-start / copy-done of a parameter into VMEM: 4x its bytes in the TPU
    compiler's bytes accessed; none for a parameter whose one reader reads nothing but parameters (w,
    read by d1 only), none under the CPU rule."""
    from hloshard.cost.roofline import PREFETCH_COPY_FACTOR, prefetched

    ins = _by_name(CHAIN)
    assert [prefetched(ins[k], TPU_FUSION) for k in ("x", "w", "v")] == [True, False, True]
    assert PREFETCH_COPY_FACTOR == 4
    assert hbm_bytes(ins["v"], _size, TPU_FUSION) == 4 * _size(ins["v"])
    assert hbm_bytes(ins["w"], _size, TPU_FUSION) == 0.0
    assert all(hbm_bytes(ins[k], _size, CPU_FUSION) == 0.0 for k in ("x", "w", "v"))
    # LN_DOT: every parameter is read by the dot's kernel alone, which reads only parameters
    ln = _by_name(LN_DOT)
    assert not any(prefetched(ln[k], TPU_FUSION) for k in ("x", "m", "g", "w", "b"))


def test_tpu_bytes_are_counted_in_padded_tiles():
    """The TPU lays an f32 tile of 16 x 32 out in 128 lanes: 4x its elements' bytes, per
    device under the sharding (tpu_layout.padded_bytes_per_device); the CPU rule counts elements."""
    from hloshard.cost.tpu_layout import padded_bytes_per_device
    from hloshard.hlo.sharding import parse_sharding
    from hloshard.hlo.shape import parse_shape

    assert TPU_FUSION.tiled_layout and not CPU_FUSION.tiled_layout
    shape = parse_shape("f32[16,32]")     # either dimension minor: 128 lanes of 16 or of 32 rows
    assert padded_bytes_per_device(shape, None) == 16 * 128 * 4
    assert padded_bytes_per_device(shape, parse_sharding("{devices=[2,1,4]<=[8] last_tile_dim_replicate}")) == 8 * 128 * 4
    tup = parse_shape("(f32[16,32], bf16[16,256])")
    assert padded_bytes_per_device(tup, None) == 16 * 128 * 4 + 16 * 256 * 2


def test_tpu_roofline_of_a_plan_counts_padding_and_prefetches():
    """plan_roofline with tpu-v5e: CHAIN's x and v rows are their prefetches, and a kernel on f32 rows of
    32 elements moves them at 128 lanes; with h100-sxm (the CPU rule) neither."""
    from hloshard.autoshard import evaluate_module
    from hloshard.timing import plan_roofline
    from hloshard.mesh import DeviceMesh

    def rows(text, device):
        module = parse_module(text)
        result = evaluate_module(module, DeviceMesh.for_module(module, "2x4"))
        return {r.name: r.hbm_bytes for r in plan_roofline(result, module, get_profile(device))[0].rows}

    tpu, gpu = rows(CHAIN, "tpu-v5e"), rows(CHAIN, "h100-sxm")
    assert tpu["x"] == 4 * 128 * 256 * 4 and tpu["v"] == 4 * 256 * 256 * 4 and tpu["w"] == 0
    assert gpu["x"] == gpu["v"] == gpu["w"] == 0
    narrow = f"""HloModule narrow, num_partitions=8

ENTRY main {{
  x = f32[16,32] parameter(0){_R}
  ROOT y = f32[16,32] exponential(x){_R}
}}
"""
    assert rows(narrow, "tpu-v5e")["y"] == 2 * 16 * 128 * 4     # read and written at 128 lanes
    assert rows(narrow, "h100-sxm")["y"] == 2 * 16 * 32 * 4


def _weight_grad(batch: int, seq: int, f: int, g: int, out_sharding: str) -> str:
    """A weight gradient ``f32[F,G] = dot(bf16[B,S,F], bf16[B,S,G])`` contracted over the batch split 8
    ways, its result under ``out_sharding`` (``{devices=[1,8]<=[8]}``: the partial sums scattered over
    G, a reduce-scatter; ``{replicated}``: an all-reduce)."""
    return f"""HloModule wgrad, num_partitions=8

ENTRY e {{
  a = bf16[{batch},{seq},{f}] parameter(0), sharding={{devices=[8,1,1]<=[8]}}
  b = bf16[{batch},{seq},{g}] parameter(1), sharding={{devices=[8,1,1]<=[8]}}
  ROOT d = f32[{f},{g}] dot(a, b), lhs_contracting_dims={{0,1}}, rhs_contracting_dims={{0,1}}, sharding={out_sharding}
}}
"""


def test_a_reduce_scattered_dot_pays_the_tpu_windowed_einsum():
    """The TPU lowers a dot whose partial sums are scattered as a windowed einsum (cost.tpu_fusion
    module docstring): over 8 devices 4 bidirectional steps, each reading the operand that does not
    carry the scattered dim (a) whole, and a layout copy of the larger operand; small operands: none.
    The all-reduce plan of the same dot and the CPU rule (h100-sxm) pay nothing of it."""
    from hloshard.autoshard import evaluate_module
    from hloshard.timing import plan_roofline
    from hloshard.cost.tpu_fusion import WINDOWED_EINSUM_MIN_OPERAND_BYTES, windowed_einsum_bytes, windowed_reread_operand
    from hloshard.mesh import DeviceMesh

    def roof(text, device):
        module = parse_module(text)
        result = evaluate_module(module, DeviceMesh.for_module(module, "8"))
        return plan_roofline(result, module, get_profile(device))[0]

    def hbm(text, device):
        return roof(text, device).hbm_bytes

    dot = _by_name(_weight_grad(64, 512, 4096, 1024, "{devices=[1,8]<=[8]}"))["d"]
    assert windowed_reread_operand(dot, [1]) == 0 and windowed_reread_operand(dot, [0]) == 1
    a, b = 8 * 512 * 4096 * 2, 8 * 512 * 1024 * 2          # per device
    assert windowed_einsum_bytes(TPU_FUSION, 8, 0, a, b) == 3 * a + 2 * a
    assert windowed_einsum_bytes(TPU_FUSION, 7, 0, a, b) == 6 * a + 2 * a    # odd: one direction
    assert windowed_einsum_bytes(CPU_FUSION, 8, 0, a, b) == 0.0
    small = WINDOWED_EINSUM_MIN_OPERAND_BYTES // 2
    assert windowed_einsum_bytes(TPU_FUSION, 8, 0, small, small) == 0.0
    rs, ar = (_weight_grad(64, 512, 4096, 1024, s) for s in ("{devices=[1,8]<=[8]}", "{replicated}"))
    extra = hbm(rs, "tpu-v5e") - hbm(ar, "tpu-v5e")
    # the scattered plan writes 1/8 of the result and all-reduces nothing, yet moves 5 x a more
    assert extra > 4 * a
    rows = [r for r in roof(rs, "tpu-v5e").rows if r.opcode == "windowed-einsum"]
    assert [r.name for r in rows] == ["d"] and rows[0].hbm_bytes == 5 * a     # its own row: 3 re-reads + copy
    assert hbm(rs, "h100-sxm") < hbm(ar, "h100-sxm")


def test_the_windowed_einsum_threshold_against_the_tpu_compiler():
    """libtpu (ahead of time, v5e:2x4): the scattered weight gradient above the operand threshold is a
    ``while`` loop of the TPU's windowed einsum and its bytes accessed exceed the all-reduce plan's, as
    the rule prices it; below the threshold no loop."""
    import pytest

    from tests.tpu_oracle import compile_for_tpu, tpu_available

    why = tpu_available()
    if why:
        pytest.skip(why)
    texts = [_weight_grad(64, 512, 1024, 1024, "{devices=[1,8]<=[8]}"),    # 8 + 8 MiB per device
             _weight_grad(64, 512, 1024, 1024, "{replicated}"),
             _weight_grad(8, 512, 1024, 1024, "{devices=[1,8]<=[8]}")]     # 1 + 1 MiB per device
    big, allreduce, small = compile_for_tpu(texts)
    assert big["ok"] and allreduce["ok"] and small["ok"]
    assert "windowed_dot_general_body_rs" in big["final"] and " while(" in big["final"]
    assert big["cost"]["bytes accessed"] > allreduce["cost"]["bytes accessed"]
    assert " while(" not in small["final"]


# a dot whose result goes through jax's jit(relu) as a `call` (as a solve plan written from the pre.hlo
# keeps it) into a second dot; the same program with the call inlined (as XLA's propagation leaves it)
_CALLED = f"""HloModule c, num_partitions=8

{{BODY}}
ENTRY main {{
  x = f32[128,64] parameter(0){_R}
  w = f32[64,256] parameter(1){_R}
  v = f32[256,32] parameter(2){_R}
  d = f32[128,256] dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}{_R}
  {{RELU}}
  ROOT e = f32[128,32] dot(h, v), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}{_R}
}}
"""


_RELU = """relu.1 {
  a = f32[128,256] parameter(0)
  z = f32[128,256] broadcast(f32[] constant(0)), dimensions={}
  ROOT r = f32[128,256] maximum(a, z)
}
"""


def test_a_called_computation_is_inlined_before_tpu_fusion():
    """XLA's CallInliner: the root of a computation a `call` inlines fuses into the call's consumers and
    the call moves nothing, so a plan that keeps jax's jit(relu) call is priced as the same program with
    the call inlined (round 15: moe_layer's solve plan was priced 0.71 us above GSPMD's, the same TPU
    program to 0.3%)."""
    def total(text, rule):
        ins = _by_name(text)
        return sum(hbm_bytes(i, _size, rule) for i in ins.values()), ins

    call = _CALLED.replace("{RELU}", "h = f32[128,256] call(d), to_apply=relu.1").replace("{BODY}", _RELU)
    inline = _CALLED.replace("{BODY}", "").replace("{RELU}", "zb = f32[128,256] broadcast(f32[] constant(0)), dimensions={}\n"
                                       "  h = f32[128,256] maximum(d, zb)")
    called, ci = total(call, TPU_FUSION)
    inlined, _ = total(inline, TPU_FUSION)
    assert is_fused(ci["r"]) and is_fused(ci["h"])
    assert {b.name for b, _ in kernel_reads(ci["e"], TPU_FUSION)} == {"d", "v"}
    assert called == inlined
    # the CPU rule (the memory model's) is unchanged: the call's root keeps its buffer
    assert not CPU_FUSION.is_fused(ci["r"]) and total(call, CPU_FUSION)[0] > called


def _conv_module(out_sharding: str) -> str:
    """A forward 3x3 convolution of a batch of 16 (b01f) under ``out_sharding``, and its filter gradient
    (f01b_i01o->01bf: the window spans the input)."""
    return f"""HloModule conv, num_partitions=8

ENTRY e {{
  x = f32[16,32,32,16] parameter(0), sharding={out_sharding}
  w = f32[3,3,16,16] parameter(1){_R}
  dy = f32[16,32,32,16] parameter(2), sharding={out_sharding}
  y = f32[16,32,32,16] convolution(x, w), window={{size=3x3 pad=1_1x1_1}}, dim_labels=b01f_01io->b01f, sharding={out_sharding}
  g = f32[3,3,16,16] convolution(x, dy), window={{size=32x32 pad=1_1x1_1}}, dim_labels=f01b_i01o->01bf{_R}
  ROOT t = (f32[16,32,32,16], f32[3,3,16,16]) tuple(y, g), sharding={{{out_sharding}, {{replicated}}}}
}}
"""


def test_conv_batch_factor_pads_a_small_forward_batch_to_a_tile():
    """conv_batch_factor: 8 / b for a forward (or input-gradient) convolution of per-device batch b < 8
    under the TPU rule; 1 at b >= 8, for a filter gradient, under the CPU rule, without a tile, for a
    dot."""
    from hloshard.cost.tpu_fusion import CONV_BATCH_TILE, conv_batch_factor

    ins = _by_name(_conv_module("{replicated}"))
    y, g = ins["y"], ins["g"]
    assert CONV_BATCH_TILE == 8
    assert conv_batch_factor(y, (2, 32, 32, 16), TPU_FUSION) == 4.0
    assert conv_batch_factor(y, (1, 32, 32, 16), TPU_FUSION) == 8.0
    assert conv_batch_factor(y, (8, 32, 32, 16), TPU_FUSION) == 1.0
    assert conv_batch_factor(y, (16, 32, 32, 16), TPU_FUSION) == 1.0
    assert conv_batch_factor(y, (2, 32, 32, 16), CPU_FUSION) == 1.0
    assert conv_batch_factor(y, None, TPU_FUSION) == 1.0
    assert conv_batch_factor(y, (2, 32, 32), TPU_FUSION) == 1.0          # does not fit: no factor
    assert conv_batch_factor(g, (3, 3, 2, 16), TPU_FUSION) == 1.0        # filter gradient (its b is C_in)
    assert conv_batch_factor(_by_name(LN_DOT)["d"], (2, 512), TPU_FUSION) == 1.0


def test_tpu_roofline_moves_a_convolution_batch_of_2_as_one_of_8():
    """plan_roofline with tpu-v5e: the forward convolution split 8 ways over its batch of 16 (2 rows per
    device) moves what the 2-way split (8 rows) moves, as the TPU compiler's chains of convolutions
    measured (BENCHMARKS.md round 17), but for its kernel operand, scaled too (tpu_fusion's docstring);
    the filter gradient and every kernel under h100-sxm scale with the rows. Solving with tpu-v5e prices
    the same factor (strategy.base.strategy_hbm_bytes)."""
    from hloshard.autoshard import evaluate_module
    from hloshard.timing import plan_roofline
    from hloshard.mesh import DeviceMesh
    from hloshard.strategy.base import strategy_hbm_bytes

    def rows(sharding, device):
        module = parse_module(_conv_module(sharding))
        result = evaluate_module(module, DeviceMesh.for_module(module, "2x4"))
        return {r.name: r.hbm_bytes for r in plan_roofline(result, module, get_profile(device))[0].rows}

    eight, two = "{devices=[8,1,1,1]<=[8]}", "{devices=[2,1,1,1,4]<=[8] last_tile_dim_replicate}"
    tpu8, tpu2 = rows(eight, "tpu-v5e"), rows(two, "tpu-v5e")
    kernel = 3 * 3 * 16 * 128 * 4      # w, replicated, at 128 lanes: scaled with the rest of the kernel
    from hloshard.cost.tpu_layout import padded_bytes_per_device
    from hloshard.hlo.sharding import parse_sharding

    y = _by_name(_conv_module(eight))["y"]
    copy8, copy2 = (2 * padded_bytes_per_device(y.shape, parse_sharding(s)) for s in (eight, two))
    # y is an entry output: the copy into the entry's layout (conv_output_relayout), not scaled
    assert tpu8["y"] - copy8 - 4 * kernel == tpu2["y"] - copy2 - kernel > 0
    assert (tpu8["g"] - kernel) * 4 == tpu2["g"] - kernel   # a filter gradient: no floor (its result: kernel-sized)
    gpu8, gpu2 = rows(eight, "h100-sxm"), rows(two, "h100-sxm")
    w = 3 * 3 * 16 * 16 * 4
    assert (gpu8["y"] - w) * 4 == gpu2["y"] - w

    # the objective's bytes of the forward convolution's strategies (solve --device tpu-v5e,
    # strategy.base.strategy_hbm_bytes, elements unpadded): splitting the batch over both mesh axes
    # (2 rows per device) costs what a split over the first (8 rows) does, but for the kernel operand
    from hloshard.strategy.base import MeshInfo, Strategy

    module = parse_module(_conv_module("{replicated}"))
    minfo = MeshInfo(DeviceMesh.for_module(module, "2x4"))
    y = _by_name_in(module)["y"]
    whole = ((), (), (), ())

    def objective_bytes(spec, fusion):
        st = Strategy(name="s", out=spec, inputs=(spec, whole))
        return strategy_hbm_bytes(y, st, y.operands, minfo, {}, fusion)

    split8, split2 = ((0, 1), (), (), ()), ((0,), (), (), ())
    y_bytes = 16 * 32 * 32 * 16 * 4    # the entry output's copy into the entry's layout: 2 x its share
    assert objective_bytes(split8, TPU_FUSION) - 2 * y_bytes / 8 - 4 * w == \
        objective_bytes(split2, TPU_FUSION) - 2 * y_bytes / 2 - w > 0
    assert (objective_bytes(split8, CPU_FUSION) - w) * 4 == objective_bytes(split2, CPU_FUSION) - w


# an Adam-like update: new moments m1, v1 (outputs) read again by the new weight's kernel, the new weight
# (an output) read again by its norm's reduce; p reads m1 directly and through a dot (its output fusion
# writes e; a kernel between them: no merge)
ADAM = f"""HloModule adam, num_partitions=8

add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}}

ENTRY main {{
  w = f32[128,256] parameter(0){_R}
  m = f32[128,256] parameter(1){_R}
  v = f32[128,256] parameter(2){_R}
  g = f32[128,256] parameter(3){_R}
  q = f32[256,256] parameter(4){_R}
  c9 = f32[] constant(0.9)
  b9 = f32[128,256] broadcast(c9), dimensions={{}}{_R}
  m0 = f32[128,256] multiply(b9, m){_R}
  m1 = f32[128,256] add(m0, g){_R}
  gg = f32[128,256] multiply(g, g){_R}
  v0 = f32[128,256] multiply(b9, v){_R}
  v1 = f32[128,256] add(v0, gg){_R}
  sr = f32[128,256] sqrt(v1){_R}
  u = f32[128,256] divide(m1, sr){_R}
  w1 = f32[128,256] subtract(w, u){_R}
  ww = f32[128,256] multiply(w1, w1){_R}
  z = f32[] constant(0)
  n = f32[] reduce(ww, z), dimensions={{0,1}}, to_apply=add{_R}
  dd = f32[128,256] dot(m1, q), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}{_R}
  e = f32[128,256] exponential(dd){_R}
  p = f32[128,256] add(m1, e){_R}
  ROOT t = (f32[128,256], f32[128,256], f32[128,256], f32[], f32[128,256]) tuple(w1, m1, v1, n, p)
}}
"""


def test_multi_output_fusion_of_an_optimizer_update_on_tpu_only():
    """The weight's kernel computes m1 and v1 (no read back), the norm's reduce computes w1, v1's
    kernel reads g with m1's (siblings); p is computed in the dot's output fusion; the CPU rule reads all."""
    from hloshard.cost.roofline import multi_output_skips

    ins = _by_name(ADAM)
    names = lambda instr, rule: {o.name for o in ins.values() if id(o) in multi_output_skips(instr, rule)}  # noqa: E731
    assert names(ins["w1"], TPU_FUSION) == {"m1", "v1"}
    assert names(ins["n"], TPU_FUSION) == {"w1"}
    assert "g" in names(ins["v1"], TPU_FUSION) and "v" not in names(ins["v1"], TPU_FUSION)
    assert names(ins["p"], TPU_FUSION) == set() and names(ins["m1"], TPU_FUSION) == set()
    assert all(not names(ins[k], CPU_FUSION) for k in ("w1", "n", "v1"))
    # the bytes: the weight's kernel reads w only and writes w1; the reduce writes its scalar
    assert hbm_bytes(ins["w1"], _size, TPU_FUSION) == _size(ins["w"]) + _size(ins["w1"])
    assert hbm_bytes(ins["n"], _size, TPU_FUSION) == _size(ins["n"])
    # p = m1 + exp(dd) is the dot's output region (libtpu's program: one kOutput fusion of dd, e and p
    # reading m1 and q): the dot's kernel reads m1 and q and writes p; p moves nothing of its own
    assert hbm_bytes(ins["p"], _size, TPU_FUSION) == 0
    assert hbm_bytes(ins["dd"], _size, TPU_FUSION) == _size(ins["m1"]) + _size(ins["q"]) + _size(ins["p"])


# a GELU's backward after the gradient dot (transformer_train_step's solve plan, round 19): the dot's result
# dy is read by two multiplies whose paths meet again at an add read by two dots; h (the forward
# activation) is a parameter here; the GELU's forward tanh is read three times
GELU_BWD = f"""HloModule gelu_bwd, num_partitions=8

ENTRY main {{
  g = f32[128,256] parameter(0){_R}
  w = f32[256,512] parameter(1){_R}
  h = f32[128,512] parameter(2){_R}
  v = f32[512,256] parameter(3){_R}
  dy = f32[128,512] dot(g, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}{_R}
  t = f32[128,512] tanh(h){_R}
  c1 = f32[] constant(1)
  one = f32[128,512] broadcast(c1), dimensions={{}}{_R}
  s = f32[128,512] subtract(one, t){_R}
  a = f32[128,512] multiply(dy, s){_R}
  b = f32[128,512] multiply(dy, t){_R}
  ab = f32[128,512] multiply(a, t){_R}
  dx = f32[128,512] add(ab, b){_R}
  o1 = f32[128,256] dot(dx, v), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}{_R}
  o2 = f32[512,256] dot(dx, g), lhs_contracting_dims={{0}}, rhs_contracting_dims={{0}}{_R}
  ROOT r = (f32[128,256], f32[512,256]) tuple(o1, o2)
}}
"""


def test_a_dots_output_region_is_computed_in_its_kernel_on_tpu():
    """The TPU compiler computes all of dy's elementwise readers up to their one sink dx in the dot's
    kOutput fusion (``output_region``) and writes dx only; tanh is duplicated (cheap on the TPU), so
    the region reads h; the CPU rule keeps every kernel."""
    from hloshard.cost.tpu_fusion import output_region

    ins = _by_name(GELU_BWD)
    members, sink = output_region(ins["dy"])
    assert sink is ins["dx"] and {ins[k].name for k in ("a", "b", "ab", "dx")} == {
        m.name for m in ins.values() if id(m) in members}
    assert epilogue(ins["dy"]) is ins["dx"] and all(absorbed_by(ins[k]) is ins["dy"] for k in ("a", "b", "ab", "dx"))
    assert is_fused(ins["t"])      # tanh duplicated into the region's kernel
    assert all(hbm_bytes(ins[k], _size, TPU_FUSION) == 0 for k in ("a", "b", "ab", "dx", "t"))
    assert hbm_bytes(ins["dy"], _size, TPU_FUSION) == sum(_size(ins[k]) for k in ("g", "w", "h", "dx"))
    # the CPU rule: no output fusion, dx a kernel of its own
    assert output_region(ins["dy"]) is not None and CPU_FUSION.epilogue(ins["dy"]) is None
    assert hbm_bytes(ins["dx"], _size, CPU_FUSION) > 0
    # a region with two exits (dx and b both read outside) is no region: back to the one-consumer rule
    two = _by_name(GELU_BWD.replace("tuple(o1, o2)", "tuple(o1, o2, b)").replace(
        "ROOT r = (f32[128,256], f32[512,256])", "ROOT r = (f32[128,256], f32[512,256], f32[128,512])"))
    assert output_region(two["dy"]) is None and epilogue(two["dy"]) is None


def _gather(precision: str = "", reader: str = "") -> str:
    """A weight split 8 ways over its rows, gathered for an f32 dot (``precision``: an
    ``operand_precision`` attribute; ``reader``: another instruction reading the gathered weight)."""
    extra, out, shapes = "", "d", "f32[512,1024]"
    if reader:
        extra, out, shapes = f"\n  e = f32[1024,1024] {reader}(wr, wr){_R}", "d, e", "f32[512,1024], f32[1024,1024]"
    return f"""HloModule gather, num_partitions=8

ENTRY main {{
  x = f32[512,1024] parameter(0){_R}
  w = f32[1024,1024] parameter(1), sharding={{devices=[8,1]<=[8]}}
  wr = f32[1024,1024] custom-call(w), custom_call_target="Sharding"{_R}
  d = f32[512,1024] dot(x, wr), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}{precision}{_R}{extra}
  ROOT t = ({shapes}) tuple({out})
}}
"""


def test_an_all_gather_read_only_by_default_precision_dots_moves_bf16_on_tpu():
    """The TPU compiler converts an f32 weight to bf16 before gathering it when every reader reads it as
    bf16 (an f32 dot at DEFAULT precision; libtpu 0.0.42.1, v5e:2x4: ``all-gather(convert)`` in bf16, 17.8
    MB accessed against 21.5 MB at ``operand_precision={highest,highest}`` and with an ``add`` reading
    the gathered weight too, which gather f32; BENCHMARKS.md round 19): the report's collectives are
    priced at bf16 under ``--device tpu-v5e`` only (not the solver's objective: ``moved_leaf_shape``)."""
    from hloshard.autoshard import evaluate_module
    from hloshard.mesh_setup import timed_mesh_from_options
    from hloshard.timing import plan_collective_hbm_bytes

    def gathered(text: str, device: str | None) -> float:
        module = parse_module(text)
        mesh, _, _ = timed_mesh_from_options(module, "8", None, None, None, device)
        return plan_collective_hbm_bytes(evaluate_module(module, mesh))

    default = gathered(_gather(), "tpu-v5e")
    highest = gathered(_gather(", operand_precision={highest,highest}"), "tpu-v5e")
    mixed = gathered(_gather(reader="add"), "tpu-v5e")
    assert highest > 0 and default == highest / 2
    assert mixed == highest
    assert gathered(_gather(), "h100-sxm") == highest     # another backend: the value's own type


def test_a_forward_convolution_writing_an_entry_output_pays_the_copy_into_its_layout():
    """libtpu's ``conv_layer`` program copies the convolution kernel's result (batch in the sublanes) into
    the entry's layout: 2 x the result more under the TPU rule, for a forward convolution only."""
    from hloshard.cost.tpu_fusion import conv_output_relayout

    ins = _by_name(_conv_module("{replicated}"))
    assert conv_output_relayout(ins["y"], ins["y"], TPU_FUSION)
    assert not conv_output_relayout(ins["g"], ins["g"], TPU_FUSION)       # a filter gradient
    assert not conv_output_relayout(ins["y"], ins["y"], CPU_FUSION)
    plain = hbm_bytes(ins["y"], _size, TPU_FUSION) - 2 * _size(ins["y"])
    assert plain == _size(ins["x"]) + _size(ins["w"]) + _size(ins["y"])


CONV_BN = """HloModule convbn

sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY e {
  x = f32[8,16,16,32] parameter(0)
  w = f32[3,3,32,64] parameter(1)
  y = f32[8,16,16,64] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  zero = f32[] constant(0)
  s = f32[64] reduce(y, zero), dimensions={0,1,2}, to_apply=sum
  sb = f32[8,16,16,64] broadcast(s), dimensions={3}
  d = f32[8,16,16,64] subtract(y, sb)
  zb = f32[8,16,16,64] broadcast(zero), dimensions={}
  ROOT r = f32[8,16,16,64] maximum(d, zb)
}
"""


def test_an_elementwise_kernel_writing_a_convolutions_result_to_the_entry_pays_the_copy_into_its_layout():
    """libtpu's held-out ``conv_bn_f32`` program (one v5e chip, ahead of time): the batch norm's statistics
    need the whole convolution result, so normalise-and-ReLU is a kernel of its own; it writes the output in
    the convolution's layout ({3,0,2,1}) and a ``copy`` writes the entry's: 2 x the output more under the TPU
    rule, none on the CPU's (the chip measured 902 us; the roofline without the copy said 468)."""
    from hloshard.cost.roofline import hbm_terms
    from hloshard.cost.tpu_fusion import conv_output_relayout

    ins = _by_name(CONV_BN)
    r, y = ins["r"], ins["y"]
    terms = hbm_terms(r, TPU_FUSION)
    assert terms[0] == "kernel" and y in terms[2] and terms[4] is True
    assert not conv_output_relayout(r, r, TPU_FUSION, ())           # no convolution read: no copy
    assert not conv_output_relayout(ins["s"], ins["s"], TPU_FUSION, (y,))   # a reduce: not entry output
    assert not hbm_terms(r, CPU_FUSION)[4]
    assert not hbm_terms(y, TPU_FUSION)[4]                          # y is no entry output
