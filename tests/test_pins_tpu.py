"""Solved modules compile on the real TPU compiler, ahead of time for ``v5e:2x4`` (tests/tpu_oracle.py).

The operand pins used to be ``copy`` instructions carrying the planned sharding; the TPU compiler's way in
(HLO -> StableHLO -> its pipeline) rejects them ("failed to legalize operation 'mhlo.copy' that was
explicitly marked illegal", measured on every sample).  They are now ``Sharding`` custom-calls, the form
``jax.lax.with_sharding_constraint`` lowers to.  Three solved samples (a plain train step, a transformer
block, and a scanned train step with loop-state pins) must compile, and XLA-TPU's partitioner must move
no more collective bytes for them than for GSPMD's own plan of the same module (measured,
BENCHMARKS.md "The solved samples on the TPU compiler": 1.067 vs 1.624 MB, 1.966 vs 2.884 MB, 0.524 vs
3.506 MB per device).

Needs libtpu (``libtpu==0.0.42.*`` with jax 0.10.2, about 680 MB; not in the test extra, so that the
suite stays light): skipped with the reason where it is not installed.
"""

from __future__ import annotations

import pytest

from hloshard.autoshard import solve_module
from hloshard.hlo import parse_file, print_module
from hloshard.mesh import DeviceMesh
from tests.conftest import SAMPLES, require_jax
from tests.tpu_oracle import compile_for_tpu, tpu_available, with_trip_counts
from tests.xla_bytes import collective_bytes

CASES = ["mlp_train_step", "transformer_block", "scan_mlp_train_step"]


def _solved(name: str) -> str:
    module = parse_file(str(SAMPLES / f"{name}.pre.hlo"))
    solve_module(module, DeviceMesh.parse("2x4"), keep="io", time_limit=10, workers=1, deterministic=True,
                 pin_operands=True)
    return print_module(module)


def _ring_mb(rec: dict) -> float:
    return sum(c["bytes"] for c in collective_bytes(with_trip_counts(rec["partitioned"]))) / 1e6


@pytest.mark.oracle
def test_solved_samples_compile_for_tpu_and_move_no_more_than_gspmd():
    require_jax()
    why = tpu_available()
    if why:
        pytest.skip(why)
    solved = {n: _solved(n) for n in CASES}
    for n, text in solved.items():
        assert ".pin = " in text and 'custom_call_target="Sharding"' in text, n
    # GSPMD's plan: XLA's own propagation (scan_mlp's propagated file is rejected by XLA, CPU and TPU
    # alike, so XLA propagates its pre module itself: the same plan)
    gspmd = {n: (SAMPLES / (f"{n}.pre.hlo" if n == "scan_mlp_train_step" else f"{n}.propagated.hlo")).read_text()
             for n in CASES}
    recs = compile_for_tpu([solved[n] for n in CASES] + [gspmd[n] for n in CASES])
    for k, n in enumerate(CASES):
        s, g = recs[k], recs[len(CASES) + k]
        assert s["ok"], f"{n}: the solved module does not compile for TPU: {s['error'][:500]}"
        assert g["ok"], f"{n}: GSPMD's plan does not compile for TPU: {g['error'][:500]}"
        assert s["partitioned"] and g["partitioned"], n
        assert s["memory"]["argument"] > 0
        assert _ring_mb(s) <= _ring_mb(g) + 1e-9, (n, _ring_mb(s), _ring_mb(g))
