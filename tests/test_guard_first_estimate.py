"""The memory guard's time figures before it has priced anything (issue 24, round 36; new user 35's F1 / F8): its
first estimate of a pricing is the tracing seconds where they are below the 1-D build's estimate, and with your
shardings read early its share of the call needs what its entry gate needs (one pricing and the solver's minimum),
not an XLA run and two pricings more.  No jax, no solve."""

import types

from hloshard.autoshard.solve import MIN_SOLVE_SECONDS, later_phase_seconds
from hloshard.jax import guard


def _graph(reprice, measured=None):
    return types.SimpleNamespace(reprice_seconds=reprice, reprice_measured=measured)


def test_the_first_pricing_estimate_is_the_tracing_where_it_is_lower():
    # new user 35's Perceiver under the slow clock x3: 43.5 s kept from the coarse build, 31.3 s of tracing, the
    # written module priced in 22.1 s
    assert guard.first_pricing_estimate(_graph(43.5), 43.5, 31.3) == (43.5, 31.3)
    # the tracing above the build's estimate: the build's stands (RWKV-7's 58.0 s of tracing, a 1-D estimate below)
    assert guard.first_pricing_estimate(_graph(20.0), 20.0, 58.0) is None
    # a pricing of the graph's module was measured: that is the figure, not an estimate
    assert guard.first_pricing_estimate(_graph(43.5, measured=9.0), 43.5, 31.3) is None
    # no tracing figure (a caller other than auto_shard): the reserve stands
    assert guard.first_pricing_estimate(_graph(43.5), 43.5, None) is None
    assert guard.first_pricing_estimate(_graph(43.5), 43.5, 0.0) is None


def test_with_your_shardings_read_early_the_share_needs_one_pricing():
    # RWKV-7 given its layout (slow clock x3, round 36's main run): 61.0 s of share, 58.0 s of tracing
    share, need = guard.guard_share_figures(180.0, 58.0, 58.0)
    assert need == later_phase_seconds(58.0) + 58.0 and share < need
    assert not guard.guard_share_holds(180.0, 58.0, 58.0)
    share, need = guard.guard_share_figures(180.0, 58.0, 58.0, read_early=True)
    assert need == MIN_SOLVE_SECONDS + 58.0 and share >= need
    assert guard.guard_share_holds(180.0, 58.0, 58.0, read_early=True)
    # and the summary says which figure it was
    off = {"off": True}
    words = guard.guard_summary(off, {"kept": False, "share_seconds": 10.0, "needed_seconds": 58.5,
                                      "traced_seconds": 58.0, "read_early": True})
    assert "one pricing was estimated to need" in words and "two pricings" not in words
    words = guard.guard_summary(off, {"kept": False, "share_seconds": 10.0, "needed_seconds": 174.5,
                                      "traced_seconds": 58.0})
    assert "an XLA run and two pricings were estimated to need" in words
