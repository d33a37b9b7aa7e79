"""XLA CPU's expansion of a batch-grouped convolution (``hloshard.cost.group_conv``): the kernel gradient
of a depthwise convolution (``batch_group_count`` = channels) is computed dense, G times its output,
then masked and summed.  A new user's ConvNeXt plan was accepted under ``--memory-budget 6MiB`` at a
predicted 4.7 MiB and XLA needed 9.7 MiB: two f32[7,7,128,128] temporaries the model did not count."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from hloshard.cli import main
from hloshard.cost.group_conv import batch_groups, expansion_bytes
from hloshard.hlo import parse_module

_R = ", sharding={replicated}"


def _depthwise_kernel_grad(x_sharding: str = "{replicated}") -> str:
    """What jax writes for d/dk of a 7x7 depthwise convolution over 128 channels of f32[16,4,4,128]."""
    return f"""HloModule dwgrad, num_partitions=8

ENTRY main {{
  x = f32[16,4,4,128] parameter(0), sharding={x_sharding}
  c = f32[] constant(1)
  b = f32[16,4,4,128] broadcast(c), dimensions={{}}{_R}
  ROOT g = f32[7,7,1,128] convolution(x, b), window={{size=4x4 pad=3_3x3_3}}, dim_labels=f01b_i01o->01bf, batch_group_count=128{_R}
}}
"""


def test_the_rule_counts_two_dense_copies_of_the_output():
    m = parse_module(_depthwise_kernel_grad())
    g, x = m.entry.get("g"), m.entry.get("x")
    assert batch_groups(g) == 128 and batch_groups(x) == 1
    out = 7 * 7 * 1 * 128 * 4
    assert expansion_bytes(g, out) == 2 * 128 * out          # f32[128,7,7,128] and f32[7,7,128,128]
    assert expansion_bytes(x, 16 * 4 * 4 * 128 * 4) == 0


def _peak(text, tmp_path, *extra):
    path = tmp_path / "m.hlo"
    path.write_text(text)
    r = CliRunner().invoke(main, ["cost", str(path), "--mesh", "8", "--format", "json", *extra])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)["peak_memory_per_device"]


def test_not_on_the_tpu_layout(tmp_path):
    """The TPU runs grouped convolutions natively: with a TPU profile the expansion is not counted."""
    cpu = _peak(_depthwise_kernel_grad(), tmp_path)
    tpu = _peak(_depthwise_kernel_grad(), tmp_path, "--device", "tpu-v5e")
    assert cpu > 2 * 128 * 7 * 7 * 128 * 4 > tpu


@pytest.mark.oracle
@pytest.mark.parametrize("x_sharding", ["{replicated}", "{devices=[8,1,1,1]<=[8]}"])
def test_predicted_peak_is_xlas(tmp_path, x_sharding):
    """Within 10% of XLA's memory_analysis() (it was 0.03x: 0.2 MB predicted, 6.5 MB by XLA)."""
    from tests.conftest import require_jax

    require_jax()
    from hloshard.xla_memory import xla_memory

    text = _depthwise_kernel_grad(x_sharding)
    (xla,) = xla_memory([text], 8)
    assert xla.error is None
    assert _peak(text, tmp_path) == pytest.approx(xla.total, rel=0.10)
