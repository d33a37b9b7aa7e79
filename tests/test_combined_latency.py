"""Issue 27: with ``--device``, collectives XLA's combiners merge share one latency
(:mod:`hloshard.cost.combiner`), so a data-parallel train step is not priced as if each gradient
all-reduce paid a full ring latency."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from hloshard.cli import main
from hloshard.cost.collectives import PredictedCollective, latency_saving
from hloshard.cost.combiner import COMBINE_THRESHOLD_BYTES, height_classes, latency_share
from hloshard.hlo import parse_module


def train_step(batch: int, width: int, layers: int) -> str:
    """HLO of one SGD step of a ``layers``-deep ReLU MLP (``width`` x ``width`` weights, no bias) on a
    ``batch`` x ``width`` input, loss = sum(h_L ** 2) / 2: forward, backward (dh_L = h_L), each weight
    updated by ``w - 0.01 * dW``; the ROOT is the tuple of new weights."""
    f = f"f32[{batch},{width}]"
    w = f"f32[{width},{width}]"
    lines = [f"  x = {f} parameter(0)", "  zero = f32[] constant(0)", f"  zeros = {f} broadcast(zero), dimensions={{}}",
             "  lr = f32[] constant(0.01)", f"  lrs = {w} broadcast(lr), dimensions={{}}"]
    h = "x"
    for i in range(layers):
        lines += [f"  w{i} = {w} parameter({i + 1})",
                  f"  z{i} = {f} dot({h}, w{i}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}",
                  f"  h{i} = {f} maximum(z{i}, zeros)"]
        h = f"h{i}"
    dh = h
    for i in reversed(range(layers)):
        prev = "x" if i == 0 else f"h{i - 1}"
        lines += [f"  m{i} = pred[{batch},{width}] compare(z{i}, zeros), direction=GT",
                  f"  dz{i} = {f} select(m{i}, {dh}, zeros)",
                  f"  dw{i} = {w} dot({prev}, dz{i}), lhs_contracting_dims={{0}}, rhs_contracting_dims={{0}}",
                  f"  step{i} = {w} multiply(lrs, dw{i})",
                  f"  new{i} = {w} subtract(w{i}, step{i})"]
        if i:
            lines.append(f"  dh{i - 1} = {f} dot(dz{i}, w{i}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{1}}")
            dh = f"dh{i - 1}"
    news = ", ".join(f"new{i}" for i in range(layers))
    lines.append(f"  ROOT out = ({', '.join([w] * layers)}) tuple({news})")
    return "HloModule step, num_partitions=8\n\nENTRY e {\n" + "\n".join(lines) + "\n}\n"


def test_weight_gradient_dots_form_one_height_class():
    """The weight-gradient dots only feed the update: one class of ``layers``; every other dot has a
    dot downstream and a height of its own (the forward z_i and backward dh_i dots form one chain)."""
    m = parse_module(train_step(64, 32, 4))
    comp = m.entry
    k = height_classes(comp)
    by = {i.name: k.get(id(i)) for i in comp.instructions}
    assert [by[f"dw{i}"] for i in range(4)] == [4, 4, 4, 4]
    assert all(by[n] == 1 for n in ("z0", "z1", "z2", "z3", "dh0", "dh1", "dh2"))


PER_DEVICE = """HloModule pd, num_partitions=8

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY e {
  x = f32[16,32] parameter(0)
  w0 = f32[32,32] parameter(1)
  w1 = f32[32,32] parameter(2)
  g0 = f32[32,32] dot(x, x), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  g1 = f32[32,32] dot(x, w0), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  r0 = f32[32,32] all-reduce(g0), channel_id=1, replica_groups={{0,1,2,3,4,5,6,7}}, use_global_device_ids=true, to_apply=add
  r1 = f32[32,32] all-reduce(g1), channel_id=2, replica_groups={{0,1,2,3,4,5,6,7}}, use_global_device_ids=true, to_apply=add
  n0 = f32[32,32] subtract(w0, r0)
  n1 = f32[32,32] subtract(w1, r1)
  ROOT t = (f32[32,32], f32[32,32]) tuple(n0, n1)
}
"""


def test_written_all_reduces_of_a_per_device_program_form_the_class():
    """In a computation that writes its collectives (a per-device program) only they carry one: the two
    independent all-reduces are a class of 2 and the dots feeding them are not members (the default);
    counting every member opcode, the dots (height 1: an all-reduce follows each) form a class too."""
    comp = parse_module(PER_DEVICE).entry
    by = {i.name: k for i in comp.instructions for k in [height_classes(comp).get(id(i))] if k}
    assert by == {"r0": 2, "r1": 2}
    every = {i.name: height_classes(comp, written_only=False).get(id(i)) for i in comp.instructions}
    assert (every["r0"], every["g0"], every["g1"]) == (2, 2, 2)


def test_latency_share_follows_the_count_and_byte_thresholds():
    assert latency_share(1000, 1) == 1.0
    assert latency_share(1000, 4) == 0.25
    assert latency_share(1000, 1000) == 1 / 256                       # XLA's count limit
    assert latency_share(COMBINE_THRESHOLD_BYTES / 2, 8) == 0.5        # half a combined all-reduce's bytes
    assert latency_share(4 * COMBINE_THRESHOLD_BYTES, 8) == 1.0
    with pytest.raises(ValueError):
        latency_share(10, 0)


class _Mesh:
    shape = (2, 4)
    alpha = (3.0, 5.0)
    beta = (1.0, 1.0)


def test_latency_saving_is_the_largest_alpha_times_the_rest():
    col = PredictedCollective("all-reduce", (0, 1), 8, 4096)
    assert latency_saving(_Mesh(), col, 0.25) == pytest.approx(5.0 * 0.75)
    assert latency_saving(_Mesh(), PredictedCollective("collective-permute", (), 1, 10), 0.5) == 0.0
    with pytest.raises(ValueError):
        latency_saving(_Mesh(), col, 1.5)


def test_h100_chooses_data_parallel_over_replication(tmp_path):
    """The new user's finding (issue 27) on a small train step (8 layers, 256 wide, batch 4096): with
    each of the 8 gradient all-reduces paying a full NVLink ring latency (7 steps x 2 us in the h100-sxm
    profile), replication (108 us estimated) looked cheaper than data parallelism (about 138 us by the
    same model); with the latency shared as XLA's combiner leaves it, the batch is split over the 8
    devices (x's sharding) and the weight gradients are all-reduced, the 8 latencies costing one between
    them (40 us estimated)."""
    from hloshard.devices import get_profile

    path = tmp_path / "step.hlo"
    path.write_text(train_step(4096, 256, 8))
    r = CliRunner().invoke(main, ["solve", str(path), "--mesh", "8", "--tie", "matching", "--deterministic",
                                  "--time-limit", "10", "--device", "h100-sxm", "-o", str(tmp_path / "o.hlo"),
                                  "--format", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    text = (tmp_path / "o.hlo").read_text()
    x = next(line for line in text.splitlines() if line.strip().startswith("x = "))
    assert "devices=[8,1]" in x, x
    alpha_s = 7 * get_profile("h100-sxm").link("ici").latency        # one ring all-reduce's latency
    comm = d["step_time"]["breakdown_s"]["communication_s"]
    assert comm > alpha_s                        # one latency and the gradients' bytes are still paid
    assert comm < 8 * alpha_s                    # ... but not eight latencies
