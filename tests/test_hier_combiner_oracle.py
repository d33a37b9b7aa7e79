"""The combiner's latency shares (``cost.combiner``) against what XLA's own pipeline merges: a data-parallel
train step's weight-gradient all-reduces are one height class, and XLA's CPU compiler (jaxlib 0.10.2, in a
child process: tests/xla_oracle.py) merges them into one variadic all-reduce; hloshard's shares over that class
sum to the one latency XLA's program pays.  (All-gathers: the CPU pipeline runs no all-gather combiner, the GPU
pipeline does; the shares follow the GPU, so they are not checked against the CPU here.)"""

from __future__ import annotations

import re

import pytest

from hloshard.cost.combiner import height_classes, latency_share
from hloshard.hlo import parse_module
from tests import xla_oracle as xo
from tests.conftest import require_jax
from tests.test_combined_latency import train_step

pytestmark = pytest.mark.oracle

LAYERS = 4


def _data_parallel(text: str) -> str:
    """The step with its input split over the batch on 8 devices and every weight replicated."""
    text = re.sub(r"(x = f32\[[0-9,]+\] parameter\(0\))", r"\1, sharding={devices=[8,1]<=[8]}", text)
    return re.sub(r"(w[0-9]+ = f32\[[0-9,]+\] parameter\([0-9]+\))", r"\1, sharding={replicated}", text)


def _all_reduces(hlo: str) -> int:
    return len(re.findall(r" all-reduce(?:-start)?\(", hlo))


def test_gradient_all_reduces_share_one_latency_as_xla_merges_them():
    require_jax()
    text = _data_parallel(train_step(64, 32, LAYERS))
    raw, final = xo.spmd_partition(text, 8, with_final=True)
    assert _all_reduces(raw) == LAYERS            # one per weight gradient after partitioning
    assert _all_reduces(final) == 1               # XLA's all-reduce combiner: one variadic all-reduce
    comp = parse_module(text).entry
    classes = height_classes(comp)
    grads = [i for i in comp.instructions if i.name.startswith("dw")]
    assert len(grads) == LAYERS and {classes[id(g)] for g in grads} == {LAYERS}
    nbytes = 32 * 32 * 4                          # each gradient's buffer, replicated
    paid = sum(latency_share(nbytes, classes[id(g)]) for g in grads)
    assert paid == pytest.approx(_all_reduces(final))
