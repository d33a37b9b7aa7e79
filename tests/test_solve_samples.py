"""``solve`` on every JAX-generated sample on a 2x4 mesh: it finishes, XLA compiles the output for 8
partitions (oracle), and with --keep-shardings io the plan it writes makes XLA's SPMD partitioner move
no more bytes per device than XLA's own GSPMD propagation of the same module (both measured by XLA:
ring bytes of the collectives in the raw after-spmd-partitioning HLO, ``tests/xla_bytes.py``)."""

from __future__ import annotations

import pytest

from hloshard.autoshard import solve_module
from hloshard.hlo import parse_file, print_module
from hloshard.mesh import DeviceMesh
from hloshard.strategy.reshape import folds_onto_tuple
from tests.conftest import SAMPLES, require_jax

NAMES = ["mlp_train_step", "transformer_block", "transformer_train_step", "conv_layer", "attention_6heads",
         "moe_layer", "embedding_lookup", "fused_qkv_train_step"]
MESH = DeviceMesh.parse("2x4")
_CACHE: dict = {}


def solved(name):
    if name not in _CACHE:
        module = parse_file(str(SAMPLES / f"{name}.pre.hlo"))
        limit = 10.0
        res = solve_module(module, MESH, keep="io", time_limit=limit, deterministic=True, pin_operands=True)
        _CACHE[name] = (module, res, print_module(module))
    return _CACHE[name]


#: samples where hloshard's plan still moves more bytes than GSPMD's once XLA partitions it (issue 10:
#: the cost model does not yet predict XLA); strict, so the mark must go when the model is fixed
XLA_WORSE: dict = {}   # transformer_train_step was here (17.32 vs 16.53 MB) until solve pinned dot operands


@pytest.mark.parametrize("name", NAMES)
def test_solve_sample_keeps_user_shardings(name):
    module, res, text = solved(name)
    assert res.solution.status in ("optimal", "feasible")
    # every instruction written, but a fold onto a tuple element (XLA would put its sharding on the tuple)
    assert all(i.sharding is not None or folds_onto_tuple(i) for i in module.entry.instructions)
    # the user's entry parameter shardings survive (--keep-shardings io)
    pre = parse_file(str(SAMPLES / f"{name}.pre.hlo"))
    for p_old, p_new in zip(pre.entry.parameters, module.entry.parameters):
        if p_old.sharding is not None:
            assert p_new.sharding == p_old.sharding, p_old.name


@pytest.mark.oracle
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=XLA_WORSE[n]))
                                  if n in XLA_WORSE else n for n in NAMES])
def test_solve_sample_moves_no_more_bytes_than_gspmd_under_xla(name):
    require_jax()
    ours, gspmd = xla_bytes_of(name)
    assert ours <= gspmd * (1 + 1e-9), (ours, gspmd)


_XLA: dict = {}


def xla_bytes_of(name):
    """(XLA ring bytes per device of solve's plan, of GSPMD's propagation) for a sample, measured once."""
    if name not in _XLA:
        from tests.xla_bytes import xla_ring_bytes

        _, _, text = solved(name)
        _XLA[name] = (xla_ring_bytes(text, 8), xla_ring_bytes((SAMPLES / f"{name}.propagated.hlo").read_text(), 8))
    return _XLA[name]


@pytest.mark.oracle
def test_solve_moves_strictly_fewer_bytes_than_gspmd_on_half_the_samples():
    """Issue 10's bar: strictly fewer bytes than GSPMD (under XLA) on at least half of the modules
    that move any bytes at all."""
    require_jax()
    moving = [n for n in NAMES if xla_bytes_of(n)[1] > 0]
    fewer = [n for n in moving if xla_bytes_of(n)[0] < xla_bytes_of(n)[1] * (1 - 1e-9)]
    assert 2 * len(fewer) >= len(moving), {n: xla_bytes_of(n) for n in moving}


@pytest.mark.oracle
@pytest.mark.parametrize("name", NAMES)
def test_xla_compiles_solved_sample_for_8_partitions(name):
    require_jax()
    from tests import xla_oracle

    _, _, text = solved(name)
    ok, msg = xla_oracle.compile_spmd(text, 8)
    assert ok, msg[:2000]
