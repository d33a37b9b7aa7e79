"""The convolution operand pins solve's local moves need (new user 34 F12, :func:`hloshard.strategy.realize.
pin_resharded_convolution_operands`): a kernel gradient whose images come in batch-split over ``data`` and whose
output gradient is batch-split over all 8 devices, result replicated.  Left to choose, hloshard slices the images
further (a local slice, 0 B) and all-reduces the 6.9 KB kernel gradient; XLA's handler, given the two
contracting splits of different part counts, all-gathers both operands instead (3.8 MB; priced so since this
round when the convolution is written: tests/test_handlers_convolution.py ``wg_mismatched``).  The pin on the
images makes XLA move what was priced."""

from __future__ import annotations

import pytest

from hloshard.autoshard import evaluate_module
from hloshard.hlo.parser import parse_module
from hloshard.hlo.printer import print_module
from hloshard.mesh import DeviceMesh
from hloshard.strategy.realize import pin_resharded_convolution_operands

HEAD = """HloModule f12, num_partitions=8

ENTRY e {
  x = f32[16,32,32,3] parameter(0), sharding={devices=[2,1,1,1,4]<=[8] last_tile_dim_replicate}
  dy = f32[16,32,32,64] parameter(1), sharding={devices=[8,1,1,1]<=[8]}
"""
CONV = "convolution(x, dy), window={size=32x32 pad=1_1x1_1}, dim_labels=f01b_i01o->01bf"
# the convolution left open (as a local move leaves it for the re-evaluation to choose): its strategy slices x
FREE = HEAD + f"  c = f32[3,3,3,64] {CONV}\n  ROOT t = (f32[3,3,3,64]) tuple(c), sharding={{{{replicated}}}}\n}}\n"
# the convolution written replicated: priced as XLA's handler realizes it (both operands gathered)
WRITTEN = HEAD + f"  ROOT c = f32[3,3,3,64] {CONV}, sharding={{replicated}}\n}}\n"
MESH = "data=2,model=4"


def _pinned():
    module = parse_module(FREE)
    res = evaluate_module(module, DeviceMesh.parse(MESH))
    return module, res, pin_resharded_convolution_operands(res)


def test_slice_planned_operand_is_pinned_once():
    module, _, pins = _pinned()
    assert [(p.user.name, p.index, str(p.sharding), op.name) for p, op in pins] == \
        [("c", 0, "{devices=[8,1,1,1]<=[8]}", "x")]
    text = print_module(module)
    assert "x.pin = f32[16,32,32,3]" in text and "convolution(x.pin, dy)" in text
    # the pinned operand is a Sharding custom-call now: nothing more to pin
    assert pin_resharded_convolution_operands(evaluate_module(module, DeviceMesh.parse(MESH))) == []


def test_gathered_operands_are_not_pinned():
    """The written convolution is priced as XLA gathers it: a resharding XLA does itself needs no pin."""
    res = evaluate_module(parse_module(WRITTEN), DeviceMesh.parse(MESH))
    assert pin_resharded_convolution_operands(res) == []


@pytest.mark.oracle
def test_pinned_module_moves_what_was_priced():
    from tests.conftest import require_jax
    from tests.handler_harness import partition_only, predicted_collectives, total_ring, xla_collectives

    require_jax()
    module, _, _ = _pinned()
    text = print_module(module)
    predicted = total_ring(sum(predicted_collectives(parse_module(text), DeviceMesh.parse(MESH, alpha="0,0",
                                                                                           beta="1,1")).values(), []))
    xla = total_ring(xla_collectives(partition_only(text)))
    assert predicted == 12096   # the all-reduce of the f32[3,3,3,64] kernel gradient over 8 (2*7/8*6912)
    assert xla == predicted     # unpinned, XLA moves 3,768,320 B here (wg_mismatched)
