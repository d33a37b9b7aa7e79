"""Two TPU fusions that depend on the plan (BENCHMARKS.md round 25, helper seconds): a dot's epilogue after
the all-reduce of its partial sums is a kernel of its own (``reduced_epilogue_bytes``, objective and report),
and an MLP's first dot is computed inside the second dot's kernel where the plan puts no collective between
(``dot_dot_reader``, the report).  Read off the TPU compiler's optimised programs of the samples on
``v5e:2x4`` (attention_6heads, moe_layer, transformer_block)."""

import pytest

from hloshard.autoshard import evaluate_module
from hloshard.cost.tpu_fusion import CPU_FUSION, TPU_FUSION, dot_dot_reader, reduced_epilogue_bytes
from hloshard.hlo import parse_module
from hloshard.mesh_setup import timed_mesh_from_options
from hloshard.strategy.base import Strategy, split_epilogue_bytes
from hloshard.cost.collectives import PredictedCollective
from hloshard.timing import plan_roofline

# a residual MLP block: x . w1 -> relu -> . w2 -> + x; shardings {S1} {S2} ... filled per plan
MLP = """HloModule mlp, num_partitions=8

ENTRY main {{
  x = f32[64,256] parameter(0), sharding={X}
  w1 = f32[256,512] parameter(1), sharding={W1}
  w2 = f32[512,256] parameter(2), sharding={W2}
  h = f32[64,512] dot(x, w1), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}, sharding={H}
  z = f32[] constant(0)
  zb = f32[64,512] broadcast(z), dimensions={{}}, sharding={H}
  r = f32[64,512] maximum(h, zb), sharding={R}
  y = f32[64,256] dot(r, w2), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}, sharding={X}
  ROOT o = f32[64,256] add(y, x), sharding={X}
}}
"""
REP = "{replicated}"
# Megatron's MLP: w1 by columns, w2 by rows over the 8 devices; y's partial sums all-reduced
MEGATRON = dict(X=REP, W1="{devices=[1,8]<=[8]}", W2="{devices=[8,1]<=[8]}", H="{devices=[1,8]<=[8]}",
                R="{devices=[1,8]<=[8]}")
# data parallel: the batch split, the weights replicated; no collective
DATA = dict(X="{devices=[8,1]<=[8]}", W1=REP, W2=REP, H="{devices=[8,1]<=[8]}", R="{devices=[8,1]<=[8]}")
# the hidden re-split from columns to rows between the two dots: a resharding collective between them
RESPLIT = dict(X="{devices=[8,1]<=[8]}", W1="{devices=[1,8]<=[8]}", W2=REP, H="{devices=[1,8]<=[8]}",
               R="{devices=[8,1]<=[8]}")


def _plan(sh, hbm_only=False):
    """``(module, roofline)`` of the plan ``sh`` on 8 v5e chips; ``hbm_only``: every byte at HBM bandwidth
    (the profile's on-chip terms, round 32's VMEM-resident results and kernel overhead, left out)."""
    import dataclasses
    module = parse_module(MLP.format(**sh))
    mesh, scale, _ = timed_mesh_from_options(module, "8", None, None, None, "tpu-v5e")
    res = evaluate_module(module, mesh)
    profile = dataclasses.replace(scale.profile, vmem_bandwidth=None, kernel_overhead_s=0.0) if hbm_only \
        else scale.profile
    roof = plan_roofline(res, module, profile)[0]
    return module, roof


def _ins(module):
    return {i.name: i for i in module.entry.instructions}


def test_the_epilogue_after_an_all_reduce_is_a_kernel_of_its_own():
    module, roof = _plan(MEGATRON)
    y = _ins(module)["y"]
    assert TPU_FUSION.epilogue(y) is _ins(module)["o"]        # the module as written: output fusion
    rows = [r for r in roof.rows if r.opcode == "split-epilogue"]
    assert [r.name for r in rows] == ["y"]
    assert rows[0].hbm_bytes == 2 * 64 * 256 * 4                # the partial result written, the sum read
    _, data = _plan(DATA)
    assert not [r for r in data.rows if r.opcode == "split-epilogue"]   # no all-reduce: fused


def test_reduced_epilogue_bytes_needs_an_epilogue_and_the_tpu_rule():
    ins = _ins(parse_module(MLP.format(**DATA)))
    assert reduced_epilogue_bytes(TPU_FUSION, ins["y"], 100.0) == 200.0
    assert reduced_epilogue_bytes(CPU_FUSION, ins["y"], 100.0) == 0.0
    assert reduced_epilogue_bytes(TPU_FUSION, ins["h"], 100.0) == 0.0   # h's consumer is fused into y's read


def test_the_objective_prices_the_split_per_strategy():
    ins = _ins(parse_module(MLP.format(**DATA)))
    plain = Strategy("r", ((), ()), ((), ()))
    reduced = Strategy("ar", ((), ()), ((), (0,)), collectives=(PredictedCollective("all-reduce", (0,), 8, 65536),))
    assert split_epilogue_bytes(ins["y"], plain, None, TPU_FUSION, 1000.0) == 0.0
    assert split_epilogue_bytes(ins["y"], reduced, None, TPU_FUSION, 1000.0) == 2000.0
    assert split_epilogue_bytes(ins["y"], reduced, None, None, 1000.0) == 0.0       # the CPU's rule


def test_dot_dot_reader_is_the_mlps_second_dot():
    ins = _ins(parse_module(MLP.format(**DATA)))
    reader, chain = dot_dot_reader(ins["h"], TPU_FUSION)
    assert reader is ins["y"] and chain == frozenset({id(ins["r"])})
    assert dot_dot_reader(ins["h"], CPU_FUSION) is None
    assert dot_dot_reader(ins["y"], TPU_FUSION) is None        # its reader is an add


@pytest.mark.parametrize("change", [
    # a reshape between the two dots (the attention's head split): not fused
    ("  r = f32[64,512] maximum(h, zb)", "  r0 = f32[64,512] maximum(h, zb)\n  r = f32[64,512] reshape(f32[64,8,64] reshape(r0))"),
    # the hidden also read by another kernel (a train step's backward): not fused
    ("  ROOT o = f32[64,256] add(y, x)", "  o = f32[64,256] add(y, x)\n  ROOT t = (f32[64,256], f32[64,512]) tuple(o, r)"),
])
def test_dot_dot_reader_rejects(change):
    text = MLP.format(**DATA).replace(*change)
    assert text != MLP.format(**DATA)
    ins = _ins(parse_module(text))
    assert dot_dot_reader(ins["h"], TPU_FUSION) is None


def _rows_without_dot_dot(monkeypatch, sh, hbm_only=False):
    import dataclasses
    import hloshard.timing as timing
    off = dataclasses.replace(TPU_FUSION, dot_dot_fusion=False)
    monkeypatch.setattr(timing, "fusion_rule", lambda profile: off)
    try:
        return {r.name: r for r in _plan(sh, hbm_only)[1].rows if r.opcode == "dot"}
    finally:
        monkeypatch.undo()


# h per device in the TPU's (8, 128) tiles: f32[8,512] (DATA), f32[64,64] padded to 128 lanes (MEGATRON)
@pytest.mark.parametrize("sh, taken", [(DATA, 8 * 512 * 4), (MEGATRON, 64 * 128 * 4), (RESPLIT, 0.0)])
def test_the_plan_decides_whether_the_hidden_stays_on_chip(monkeypatch, sh, taken):
    fused = taken > 0                                            # RESPLIT: a resharding between the dots
    rows = {r.name: r for r in _plan(sh)[1].rows if r.opcode == "dot"}
    before = _rows_without_dot_dot(monkeypatch, sh)
    assert before["h"].hbm_bytes - rows["h"].hbm_bytes == pytest.approx(taken)   # h not written
    assert before["y"].hbm_bytes - rows["y"].hbm_bytes == pytest.approx(taken)   # nor read by y
    # every byte at HBM bandwidth, the fused kernel is the faster; with v5e's on-chip terms (round 32) the
    # hidden value was on chip already, and the kernel is no slower for not writing it
    hbm = {r.name: r for r in _plan(sh, hbm_only=True)[1].rows if r.opcode == "dot"}
    hbm_before = _rows_without_dot_dot(monkeypatch, sh, hbm_only=True)
    assert hbm["h"].seconds < hbm_before["h"].seconds if fused else hbm["h"].seconds == hbm_before["h"].seconds
    assert rows["h"].seconds <= before["h"].seconds


def _fusions_with_two_dots(text: str) -> int:
    """Fusions of an optimised TPU program whose computation (nested ones included) holds 2+ convolutions
    (the TPU lowers dots as convolutions)."""
    import re
    comps = {m.group(1): m.group(2) for m in re.finditer(r"^(?:ENTRY )?%([\w.\-]+) .*?\{\n(.*?)^\}", text, re.M | re.S)}

    def convs(name, seen):
        body = comps.get(name, "")
        n = len(re.findall(r"\s(?:convolution|dot)\(", body))
        for callee in re.findall(r"calls=%([\w.\-]+)", body):
            if callee not in seen:
                n += convs(callee, seen | {callee})
        return n

    return sum(1 for body in comps.values() for callee in re.findall(r"fusion\(.*calls=%([\w.\-]+)", body)
               if convs(callee, {callee}) >= 2)


def test_the_tpu_compiler_fuses_as_the_rules_say():
    """libtpu ahead of time (v5e:2x4): the MLP's two dots are one kernel in the data-parallel and Megatron
    plans and two where the plan reshards the hidden between them; in Megatron's plan the residual add
    is a kernel after the all-reduce."""
    from tests.conftest import require_jax

    require_jax()
    from tests.tpu_oracle import tpu_available

    why = tpu_available()
    if why:
        pytest.skip(why)
    import re

    from hloshard.xla_cost import _compile_tpu   # in this process: one libtpu start

    def program(sh):
        exe = _compile_tpu(MLP.format(**sh), 8, "v5e:2x4")
        return "\n".join(m.to_string() for m in exe.hlo_modules())

    data, megatron, resplit = program(DATA), program(MEGATRON), program(RESPLIT)
    assert _fusions_with_two_dots(data) == 1 and _fusions_with_two_dots(megatron) == 1
    assert _fusions_with_two_dots(resplit) == 0
    entry = re.search(r"^ENTRY .*?^}", megatron, re.M | re.S).group(0)
    ar = re.search(r"%([\w.\-]+) = \S+ all-reduce\(", entry).group(1)
    root = re.search(r"ROOT %[\w.\-]+ = \S+ (\w+)\((.*)\)", entry)
    assert root.group(1) == "add" and f"%{ar}" in root.group(2)   # the add reads the all-reduced sum
