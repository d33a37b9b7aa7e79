"""How a scan's captured operands are laid onto the HLO loop state (:func:`hloshard.jax.jaxpr._in_order`, used by
:func:`~hloshard.jax.jaxpr.loop_state`): in order, a candidate left out only when no laid candidate has its kind (a
scalar jax lowers as a constant inside the body), never a guess between two same-shaped candidates."""

from __future__ import annotations

from types import SimpleNamespace

from hloshard.jax.jaxpr import _in_order


def aval(*shape):
    return SimpleNamespace(shape=tuple(shape), dtype="float32")


def run(cands, slot_shapes):
    slots = list(range(10, 10 + len(slot_shapes)))
    shapes = dict(zip(slots, slot_shapes))
    kind = lambda a: a.shape  # noqa: E731
    return _in_order(cands, slots, lambda t, a: shapes[t] == a.shape, kind)


def test_xs_then_consts_in_order():
    cands = [("xs", aval(32, 16, 256)), ("w", aval(256, 256))]
    assert run(cands, [(32, 16, 256), (256, 256)]) == {10: "xs", 11: "w"}


def test_a_constant_scalar_is_left_out():
    # the forward scan of a jvp: consts (1.0 as f32[], w), the scalar lowered inside the body
    cands = [("xs", aval(32, 16, 256)), ("one", aval()), ("w", aval(256, 256))]
    assert run(cands, [(32, 16, 256), (256, 256)]) == {10: "xs", 11: "w"}


def test_leaving_out_one_of_two_same_shaped_candidates_is_refused():
    cands = [("a", aval(256, 256)), ("b", aval(256, 256))]
    assert run(cands, [(256, 256)]) is None       # which of a, b is the state is not known


def test_a_slot_nothing_fits_fails():
    assert run([("w", aval(256, 256))], [(8, 8)]) is None
