"""``cost --device``'s report says how many of the bytes accessed the roofline keeps on chip (fresh-clone
check 32: on tpu-v5e 46% of the "HBM bytes per device" were VMEM bytes, and neither the text nor the JSON
said so)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from hloshard.cli import main
from tests.conftest import SAMPLES


def _cost(device: str, fmt: str) -> str:
    r = CliRunner().invoke(main, ["cost", str(SAMPLES / "mlp_train_step.pre.hlo"), "--mesh", "2x4",
                                  "--device", device, "--format", fmt])
    assert r.exit_code == 0, r.output
    return r.output


def test_on_chip_bytes_in_the_json_and_the_text():
    v5e = json.loads(_cost("tpu-v5e", "json"))
    assert 0 < v5e["on_chip_bytes_per_device"] < v5e["hbm_bytes_per_device"], v5e
    h100 = json.loads(_cost("h100-sxm", "json"))
    assert h100["on_chip_bytes_per_device"] == 0, h100   # no VMEM rule off TPU
    text = " ".join(_cost("tpu-v5e", "text").split())
    assert f"{v5e['on_chip_bytes_per_device']:.4g} of them kept on chip" in text, text
    assert "kept on chip" not in _cost("h100-sxm", "text")
