"""``plan.check``'s verdict per leaf (:func:`hloshard.jax.check.verdict`), from measured error triples."""

from __future__ import annotations

from hloshard.jax.check import F64_TOL, verdict


def test_a_leaf_whose_exact_value_is_zero_is_rounding_not_wrong():
    # new user 19, keras-hub OPT's attention key bias (its gradient vanishes): float32 1.2, float64 1.3,
    # the float32 step against the float64 one 4.9e8 -- both precisions are rounding noise
    assert verdict(1.2, 1e-4, 1.3, 4.9e8) == "rounding"


def test_a_dropped_partial_sum_is_wrong():
    # tests/test_jax_check.py's injected error: float64 differs at the size of what it gets wrong while
    # the model's own rounding is ordinary
    assert verdict(1.7e-1, 1e-4, 1.7e-1, 3e-7) == "wrong"
    assert verdict(1e-6, 1e-4, 2 * F64_TOL, 1e-6) == "wrong"   # even below rtol in float32


def test_float32_above_rtol_is_rounding_when_float64_agrees_and_unknown_without_it():
    assert verdict(3e-4, 1e-4, 1e-13, 1e-6) == "rounding"
    assert verdict(3e-4, 1e-4) == "unknown"
    assert verdict(1e-6, 1e-4, 1e-14, 1e-6) == "ok"
    assert verdict(1e-6, 1e-4) == "ok"
