"""Round 30 (issue 27): on a megacore TPU (v5p) memory-space assignment copies a result that several
kernels read from HBM into VMEM, and the TPU compiler's ``HloCostAnalysis`` counts each copy 4x its size
(BENCHMARKS.md "steptime, round 30").  ``hloshard.cost.roofline.shared_intermediates`` names those results;
``hloshard.timing.plan_roofline`` adds their copies as ``msa-copy`` rows (bytes, no seconds) for a profile
with ``megacore`` set."""

from __future__ import annotations

import dataclasses

from hloshard.autoshard import evaluate_module
from hloshard.autoshard.apply import instruction_sharding
from hloshard.cost.roofline import PREFETCH_COPY_FACTOR, shared_intermediates
from hloshard.cost.tpu_fusion import TPU_FUSION
from hloshard.cost.tpu_layout import padded_bytes_per_device
from hloshard.devices import get_profile
from hloshard.hlo import parse_module
from hloshard.mesh import DeviceMesh
from hloshard.timing import plan_roofline

#: ``d`` is read by two kernels (a reduce and a second dot), ``e`` by one (the output)
SHARED = """HloModule shared, num_partitions=8

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY e {
  x = f32[64,256] parameter(0)
  w = f32[256,256] parameter(1)
  v = f32[256,128] parameter(2)
  d = f32[64,256] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  c = f32[] constant(0)
  r = f32[64] reduce(d, c), dimensions={1}, to_apply=add
  e = f32[64,128] dot(d, v), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = (f32[64], f32[64,128]) tuple(r, e)
}
"""


def _roof(profile, sizes=None):
    module = parse_module(SHARED)
    result = evaluate_module(module, DeviceMesh.for_module(module, "2x4"))
    roof, priced, _ = plan_roofline(result, module, profile)
    if sizes is not None:
        d = next(i for i in module.entry.instructions if i.name == "d")
        sizes["d"] = padded_bytes_per_device(d.shape, instruction_sharding(priced.graph, d, priced.choice))
    return roof


def test_a_result_two_kernels_read_is_shared_and_one_read_once_is_not():
    module = parse_module(SHARED)
    named = [(i.name, h.name) for i, h in shared_intermediates(module.entry.instructions, TPU_FUSION)]
    assert named == [("d", "d")]


def test_v5p_counts_the_copy_as_bytes_without_seconds_and_v5e_does_not():
    v5p = get_profile("tpu-v5p")
    assert v5p.megacore and not get_profile("tpu-v5e").megacore and not get_profile("tpu-v6e").megacore
    sizes: dict = {}
    with_copies = _roof(v5p, sizes)
    without = _roof(dataclasses.replace(v5p, megacore=False))
    copies = [r for r in with_copies.rows if r.opcode == "msa-copy"]
    assert [r.name for r in copies] == ["d"]
    # the copy of d: 4x its per-device size in the TPU's tiled layout, under the plan's sharding of d
    assert sizes["d"] > 0
    assert copies[0].hbm_bytes == copies[0].vmem_bytes == PREFETCH_COPY_FACTOR * sizes["d"]
    assert copies[0].seconds == 0.0
    assert with_copies.hbm_bytes - without.hbm_bytes == copies[0].hbm_bytes
    assert with_copies.vmem_bytes - without.vmem_bytes == copies[0].hbm_bytes
    assert with_copies.seconds == without.seconds          # the step time does not change
    assert not [r for r in _roof(get_profile("tpu-v5e")).rows if r.opcode == "msa-copy"]



#: ``r`` (a loop kernel: a reduce of the dot ``d``) is read by three kernels (the broadcast and exponential
#: fuse into ``s`` and ``e``; the output tuple), ``d`` by two
LOOP_SHARED = """HloModule loopshared, num_partitions=8

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY e {
  x = f32[64,256] parameter(0)
  w = f32[256,256] parameter(1)
  v = f32[256,128] parameter(2)
  d = f32[64,256] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  c = f32[] constant(0)
  r = f32[64] reduce(d, c), dimensions={1}, to_apply=add
  r2 = f32[64,256] broadcast(r), dimensions={0}
  m = f32[64,256] exponential(r2)
  s = f32[64] reduce(m, c), dimensions={1}, to_apply=add
  e = f32[64,128] dot(m, v), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  f = f32[256,128] dot(d, e), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  ROOT o = (f32[64], f32[64], f32[256,128]) tuple(r, s, f)
}
"""


def test_a_loop_kernels_shared_result_is_not_copied_a_dots_is():
    # round 31: a loop kernel writes its result into VMEM directly (kind=kLoop, S(1)); a matmul's result
    # is written to HBM and copied before its later reader
    from hloshard.cost.roofline import _kernels_reading, hbm_terms

    module = parse_module(LOOP_SHARED)
    entry = {i.name: i for i in module.entry.instructions}
    named = [i.name for i, _ in shared_intermediates(module.entry.instructions, TPU_FUSION)]
    assert hbm_terms(entry["r"], TPU_FUSION)[0] == "kernel"
    assert len({id(k) for k in _kernels_reading(entry["r"], TPU_FUSION)}) >= 2
    assert named == ["d"]
