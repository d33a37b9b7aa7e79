"""XLA CPU's canonical-transpose copies of convolutions (``hloshard.autoshard.conv_copies``, issue 25).

XLA's CPU backend computes every convolution as input ``[b, spatial..., f]``, kernel ``[spatial..., i, o]``,
result ``[b, spatial..., f]`` (``cpu/conv_canonicalization.cc``) and copies operands / results in other
orders; jax's kernel gradient ``f01b_i01o->01bf`` copies all three.  New user 34's U-Net in its FSDP layout
was predicted at 0.66x of XLA's peak without these copies (21.7 MB vs 32.9 MB)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from hloshard.autoshard.conv_copies import (canonical_orders, conv_copies, made_at_source, output_copy_bytes,
                                            transposed_operands, transposed_output)
from hloshard.cli import main
from hloshard.hlo import parse_module

_R = ", sharding={replicated}"


def _module(x_sharding: str = "{replicated}") -> str:
    """A forward convolution and the kernel gradient of the same activation ``a`` (jax's dim_labels)."""
    xs = x_sharding
    return f"""HloModule kgrad, num_partitions=8

ENTRY main {{
  x = f32[16,16,16,64] parameter(0), sharding={xs}
  k = f32[3,3,64,64] parameter(1){_R}
  dy = f32[16,16,16,64] parameter(2), sharding={xs}
  a = f32[16,16,16,64] multiply(x, x), sharding={xs}
  y = f32[16,16,16,64] convolution(a, k), window={{size=3x3 pad=1_1x1_1}}, dim_labels=b01f_01io->b01f, sharding={xs}
  e = f32[16,16,16,64] exponential(y), sharding={xs}
  z = f32[16,16,16,64] add(e, dy), sharding={xs}
  kr = f32[3,3,64,64] reverse(k), dimensions={{0,1}}{_R}
  dx = f32[16,16,16,64] convolution(z, kr), window={{size=3x3 pad=1_1x1_1}}, dim_labels=b01f_01oi->b01f, sharding={xs}
  g = f32[3,3,64,64] convolution(a, z), window={{size=16x16 pad=1_1x1_1}}, dim_labels=f01b_i01o->01bf{_R}
  ROOT t = (f32[16,16,16,64], f32[16,16,16,64], f32[3,3,64,64]) tuple(y, dx, g), sharding={{{xs}, {xs}, {{replicated}}}}
}}
"""


def test_which_operands_and_results_are_copied():
    m = parse_module(_module())
    y, dx, g = (m.entry.get(n) for n in ("y", "dx", "g"))
    assert canonical_orders(y) == ((0, 1, 2, 3), (0, 1, 2, 3), (0, 1, 2, 3))
    assert transposed_operands(y) == [] and not transposed_output(y)          # forward: canonical
    assert transposed_operands(dx) == [1] and not transposed_output(dx)       # input gradient: the kernel
    assert canonical_orders(g) == ((3, 1, 2, 0), (1, 2, 0, 3), (2, 0, 1, 3))
    assert transposed_operands(g) == [0, 1] and transposed_output(g)          # kernel gradient: all three
    assert transposed_operands(m.entry.get("a")) == [] and canonical_orders(m.entry.get("a")) is None


def test_a_transpose_of_unit_dimensions_is_a_bitcast():
    """A 1x1 kernel gradient's result ``[1,1,i,o]`` in canonical order ``[i,1,1,o]``: a bitcast, no copy
    (XLA's compiled U-Net: ``bitcast(convolution.52)`` of ``f32[64,1,1,3]``)."""
    text = """HloModule k1, num_partitions=8

ENTRY main {
  a = f32[16,8,8,64] parameter(0)
  z = f32[16,8,8,3] parameter(1)
  ROOT g = f32[1,1,64,3] convolution(a, z), window={size=8x8}, dim_labels=f01b_i01o->01bf
}
"""
    g = parse_module(text).entry.get("g")
    assert transposed_operands(g) == [0, 1] and not transposed_output(g)


def test_result_copy_only_without_a_collective_after_it():
    g = parse_module(_module()).entry.get("g")
    plain = SimpleNamespace(memory=147456, collectives=[])
    reduced = SimpleNamespace(memory=147456, collectives=[SimpleNamespace(kind="all-reduce", nbytes=147456)])
    assert output_copy_bytes(g, plain) == 147456
    assert output_copy_bytes(g, reduced) == 0


def test_cpu_only():
    conv = SimpleNamespace(opcode="convolution")
    assert made_at_source(SimpleNamespace(memory_device=None), conv)
    assert not made_at_source(SimpleNamespace(memory_device="tpu-v5e"), conv)
    assert not made_at_source(SimpleNamespace(memory_device=None), SimpleNamespace(opcode="dot"))
    assert conv_copies(SimpleNamespace(memory_device="tpu-v5e"), None, {}, None, set()) == []


def _peak(text, tmp_path, *extra):
    path = tmp_path / "m.hlo"
    path.write_text(text)
    r = CliRunner().invoke(main, ["cost", str(path), "--mesh", "8", "--format", "json", *extra])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)["peak_memory_per_device"]


@pytest.mark.oracle
def test_predicted_peak_is_xlas(tmp_path):
    """Replicated: XLA's peak holds the transposed activation and output gradient and the kernel
    gradient's canonical result beside the input gradient's transposed kernel; predicted within 1%."""
    from tests.conftest import require_jax

    require_jax()
    from hloshard.xla_memory import xla_memory

    text = _module()
    (xla,) = xla_memory([text], 8)
    assert xla.error is None
    assert _peak(text, tmp_path) == pytest.approx(xla.total, rel=0.01)
