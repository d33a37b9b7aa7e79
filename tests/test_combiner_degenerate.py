"""The combiner's height classes skip a ``reduce`` over dimensions of extent 1 (``cost.combiner.carries_collective``):
it sums nothing, so it carries no collective and XLA's algebraic simplifier makes it a reshape before the
combiners run.  A bias gradient written as ``reduce(dz) -> reshape [1, n] -> reduce`` (what jax emits for
``jnp.sum`` of a ``[1, 1, n]`` value: GPT-2's 24 bias gradients, round 27) must sit in the weight gradients'
class; XLA's CPU pipeline merges all of them into one variadic all-reduce (oracle test, tests/xla_oracle.py)."""

from __future__ import annotations

import re

import pytest

from hloshard.cost.combiner import carries_collective, height_classes, independent_values, latency_share
from hloshard.hlo import parse_module
from tests import xla_oracle as xo
from tests.conftest import require_jax

LAYERS = 3
BATCH, WIDTH = 64, 32


def biased_step(batch: int = BATCH, width: int = WIDTH, layers: int = LAYERS, degenerate: bool = True) -> str:
    """HLO of one SGD step of a ``layers``-deep ReLU MLP with biases (loss = sum(h_L ** 2) / 2), input
    split over the batch on 8 devices, weights and biases replicated.  Each bias gradient is
    ``reduce(dz, dims={0}) -> reshape [1, width] -> reduce(dims={0})`` when ``degenerate`` (a sum over a
    dimension of extent 1), else the first reduce alone."""
    f, w, b = f"f32[{batch},{width}]", f"f32[{width},{width}]", f"f32[{width}]"
    lines = [f"  x = {f} parameter(0), sharding={{devices=[8,1]<=[8]}}", "  zero = f32[] constant(0)",
             f"  zeros = {f} broadcast(zero), dimensions={{}}", "  lr = f32[] constant(0.01)",
             f"  lrw = {w} broadcast(lr), dimensions={{}}", f"  lrb = {b} broadcast(lr), dimensions={{}}"]
    h, p = "x", 1
    for i in range(layers):
        lines += [f"  w{i} = {w} parameter({p}), sharding={{replicated}}",
                  f"  b{i} = {b} parameter({p + 1}), sharding={{replicated}}",
                  f"  y{i} = {f} dot({h}, w{i}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}",
                  f"  bb{i} = {f} broadcast(b{i}), dimensions={{1}}",
                  f"  z{i} = {f} add(y{i}, bb{i})",
                  f"  h{i} = {f} maximum(z{i}, zeros)"]
        h, p = f"h{i}", p + 2
    dh = h
    for i in reversed(range(layers)):
        prev = "x" if i == 0 else f"h{i - 1}"
        lines += [f"  m{i} = pred[{batch},{width}] compare(z{i}, zeros), direction=GT",
                  f"  dz{i} = {f} select(m{i}, {dh}, zeros)",
                  f"  dw{i} = {w} dot({prev}, dz{i}), lhs_contracting_dims={{0}}, rhs_contracting_dims={{0}}",
                  f"  sw{i} = {w} multiply(lrw, dw{i})",
                  f"  nw{i} = {w} subtract(w{i}, sw{i})",
                  f"  db{i} = {b} reduce(dz{i}, zero), dimensions={{0}}, to_apply=%add"]
        g = f"db{i}"
        if degenerate:
            lines += [f"  r{i} = f32[1,{width}] reshape(db{i})",
                      f"  dd{i} = {b} reduce(r{i}, zero), dimensions={{0}}, to_apply=%add"]
            g = f"dd{i}"
        lines += [f"  sb{i} = {b} multiply(lrb, {g})", f"  nb{i} = {b} subtract(b{i}, sb{i})"]
        if i:
            lines.append(f"  dh{i - 1} = {f} dot(dz{i}, w{i}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{1}}")
            dh = f"dh{i - 1}"
    outs = [n for i in range(layers) for n in (f"nw{i}", f"nb{i}")]
    shapes = ", ".join([w, b] * layers)
    lines.append(f"  ROOT out = ({shapes}) tuple({', '.join(outs)})")
    head = "HloModule biased, num_partitions=8\n\n%add { a = f32[] parameter(0)\n b = f32[] parameter(1)\n" \
           " ROOT s = f32[] add(a, b) }\n\n"
    return head + "ENTRY e {\n" + "\n".join(lines) + "\n}\n"


def _by_name(text: str):
    comp = parse_module(text).entry
    return comp, {i.name: i for i in comp.instructions}


def test_a_reduce_over_extent_one_carries_no_collective():
    comp, by = _by_name(biased_step())
    assert not carries_collective(by["dd0"])        # reduce over the [1, n] reshape's extent-1 dimension
    assert carries_collective(by["db0"])            # the batch sum: an all-reduce under data parallelism
    assert carries_collective(by["dw0"]) and not carries_collective(by["nw0"])
    assert id(by["dd0"]) not in height_classes(comp)  # not a member either


def test_bias_and_weight_gradients_share_one_class():
    comp, by = _by_name(biased_step())
    k = height_classes(comp)
    grads = [f"{n}{i}" for i in range(LAYERS) for n in ("dw", "db")]
    assert {k[id(by[g])] for g in grads} == {2 * LAYERS}
    # the same step without the extent-1 reduce: the classes are the same
    comp2, by2 = _by_name(biased_step(degenerate=False))
    k2 = height_classes(comp2)
    assert {k2[id(by2[g])] for g in grads} == {2 * LAYERS}


def test_independent_values_pass_through_an_extent_one_reduce():
    """A value computed from parameters by a reshape and an extent-1 reduce stays collective-free."""
    text = ("HloModule m, num_partitions=8\n\n%add { a = f32[] parameter(0)\n b = f32[] parameter(1)\n"
            " ROOT s = f32[] add(a, b) }\n\nENTRY e {\n  p = f32[1,64,32] parameter(0)\n  z = f32[] constant(0)\n"
            "  r = f32[64,32] reduce(p, z), dimensions={0}, to_apply=%add\n"
            "  s = f32[32] reduce(r, z), dimensions={0}, to_apply=%add\n"
            "  q = f32[32,32] parameter(1)\n  ROOT d = f32[64,32] dot(r, q), lhs_contracting_dims={1}, "
            "rhs_contracting_dims={0}\n}\n")
    comp, by = _by_name(text)
    free, _ = independent_values(comp)
    assert id(by["r"]) in free and id(by["s"]) not in free and id(by["d"]) not in free


@pytest.mark.oracle
def test_xla_merges_bias_and_weight_gradients_into_one_all_reduce():
    require_jax()
    text = biased_step()
    raw, final = xo.spmd_partition(text, 8, with_final=True)
    assert len(re.findall(r" all-reduce(?:-start)?\(", raw)) == 2 * LAYERS   # dw_i and db_i each
    assert len(re.findall(r" all-reduce(?:-start)?\(", final)) == 1          # one variadic all-reduce
    comp, by = _by_name(text)
    k = height_classes(comp)
    paid = sum(latency_share(4 * (WIDTH * WIDTH if g.startswith("dw") else WIDTH), k[id(by[g])])
               for g in (f"{n}{i}" for i in range(LAYERS) for n in ("dw", "db")))
    assert paid == pytest.approx(1.0)


def _pinned(text: str, sharding: str) -> str:
    """``biased_step``'s text with each weight gradient ``dw_i`` written with the sharding ``{replicated}``
    and read by the optimizer through a ``Sharding`` custom-call pin ``dw_i.tpin`` with ``sharding``
    (what ``hloshard solve`` writes after a weight-gradient dot)."""
    w = f"f32[{WIDTH},{WIDTH}]"
    for i in range(LAYERS):
        text = text.replace(f"rhs_contracting_dims={{0}}\n  sw{i} = {w} multiply(lrw, dw{i})",
                            f"rhs_contracting_dims={{0}}, sharding={{replicated}}\n"
                            f"  dw{i}.tpin = {w} custom-call(dw{i}), custom_call_target=\"Sharding\", "
                            f"sharding={sharding}\n"
                            f"  sw{i} = {w} multiply(lrw, dw{i}.tpin)")
    return text


def test_a_pin_in_its_operands_layout_carries_no_collective():
    """A ``Sharding`` pin whose operand is written with the same sharding is a copy to XLA's partitioner: the
    pinned weight gradients stay in the bias gradients' class.  A pin to another layout may reshard (an
    all-gather or a slice on the edge), so it stays a barrier and the weight gradients sit above it."""
    text = _pinned(biased_step(), "{replicated}")
    assert text.count(".tpin = ") == LAYERS
    comp, by = _by_name(text)
    assert not carries_collective(by["dw0.tpin"])
    k = height_classes(comp)
    assert {k[id(by[f"{n}{i}"])] for i in range(LAYERS) for n in ("dw", "db")} == {2 * LAYERS}
    comp, by = _by_name(_pinned(biased_step(), "{devices=[8,1]<=[8]}"))
    assert carries_collective(by["dw0.tpin"])
    k = height_classes(comp)
    assert {k[id(by[f"db{i}"])] for i in range(LAYERS)} == {LAYERS}
    assert {k[id(by[f"dw{i}"])] for i in range(LAYERS)} == {LAYERS}   # two classes of 3, not one of 6


def _per_device(groups_b: str) -> str:
    """A per-device program with two independent all-reduces, ``a`` over {{0..3},{4..7}} and ``b`` over
    ``groups_b``, and a third ``c`` over ``a``'s groups that depends on ``a``."""
    return ("HloModule pd, num_partitions=8\n\n%add { x = f32[] parameter(0)\n y = f32[] parameter(1)\n"
            " ROOT s = f32[] add(x, y) }\n\nENTRY e {\n  p = f32[64,32] parameter(0)\n  q = f32[64,32] parameter(1)\n"
            "  a = f32[64,32] all-reduce(p), channel_id=1, replica_groups={{0,1,2,3},{4,5,6,7}}, "
            "use_global_device_ids=true, to_apply=%add\n"
            f"  b = f32[64,32] all-reduce(q), channel_id=2, replica_groups={groups_b}, use_global_device_ids=true, "
            "to_apply=%add\n"
            "  c = f32[64,32] all-reduce(a), channel_id=3, replica_groups={{0,1,2,3},{4,5,6,7}}, "
            "use_global_device_ids=true, to_apply=%add\n"
            "  ROOT t = (f32[64,32], f32[64,32]) tuple(b, c)\n}\n")


def test_written_collectives_combine_only_with_their_key():
    """In a program that writes its collectives the class is (height, XLA's combiner key): two independent
    all-reduces share a class only over the same replica groups (listed in any order)."""
    comp, by = _by_name(_per_device("{{4,5,6,7},{0,1,2,3}}"))
    k = height_classes(comp)
    assert (k[id(by["a"])], k[id(by["b"])], k[id(by["c"])]) == (1, 2, 2)   # heights 1, 0, 0: {a}, {b, c}
    comp, by = _by_name(_per_device("{{0,1,2,3,4,5,6,7}}"))
    k = height_classes(comp)
    assert (k[id(by["a"])], k[id(by["b"])], k[id(by["c"])]) == (1, 1, 1)   # b over all 8: a key of its own
