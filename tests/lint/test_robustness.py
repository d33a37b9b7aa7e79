"""Lint never raises: random (seeded) modules full of odd shardings and collectives, and truncated /
damaged real samples. Every problem must come out as a finding (HS001 at worst), never a traceback."""

from __future__ import annotations

import random

from hloshard.lint.context import LintOptions
from hloshard.lint.engine import lint_text
from tests.conftest import SAMPLES

SUM = "sum {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n"


def _shape(rng):
    return "f32[" + ",".join(str(rng.choice([0, 1, 2, 3, 4, 5, 7, 8, 16])) for _ in range(rng.randint(0, 3))) + "]"


def _sharding(rng):
    k = rng.random()
    if k < 0.1:
        return "{replicated}"
    if k < 0.15:
        return "{maximal device=%d}" % rng.randint(-2, 9)
    if k < 0.2:
        return "{{replicated}, {devices=[2]0,1}}"
    dims = [rng.choice([1, 2, 3, 4]) for _ in range(rng.randint(1, 4))]
    n = 1
    for d in dims:
        n *= d
    if rng.random() < 0.5:
        devs = list(range(n))
        rng.shuffle(devs)
        if rng.random() < 0.2:
            devs[0] = devs[-1]
        if rng.random() < 0.1:
            devs = devs[:-1]
        body = "devices=[%s]%s" % (",".join(map(str, dims)), ",".join(map(str, devs)))
    else:
        reshape = rng.choice([[n], [n, 1], [2, n // 2] if n % 2 == 0 else [n], [n + 1]])
        perm = list(range(len(reshape)))
        rng.shuffle(perm)
        body = "devices=[%s]<=[%s]" % (",".join(map(str, dims)), ",".join(map(str, reshape)))
        if len(reshape) > 1 or rng.random() < 0.1:
            body += "T(%s)" % ",".join(map(str, perm))
    if rng.random() < 0.3:
        body += " last_tile_dim_replicate"
    elif rng.random() < 0.1:
        body += " last_tile_dims={manual}"
    return "{" + body + "}"


def _module(rng) -> str:
    np_ = rng.choice([None, 2, 4, 8])
    lines = ["HloModule m" + (f", num_partitions={np_}" if np_ else ""), SUM + "ENTRY e {"]
    params = []
    for i in range(rng.randint(1, 5)):
        sh = f", sharding={_sharding(rng)}" if rng.random() < 0.8 else ""
        params.append((f"p{i}", _shape(rng)))
        lines.append(f"  p{i} = {params[-1][1]} parameter({i}){sh}")
    for j in range(rng.randint(0, 3)):
        op = rng.choice(["all-gather", "reduce-scatter", "all-reduce", "all-to-all", "collective-permute"])
        groups = rng.choice(["{}", "{{0,1}}", "{{0,1},{2,3}}", "{{0,1,2},{3}}", "{{0,0}}", "[2,2]<=[4]"])
        attrs = f"channel_id={j + 1}, replica_groups={groups}"
        if op in ("all-gather", "reduce-scatter"):
            attrs += f", dimensions={{{rng.randint(-1, 3)}}}"
        if op in ("reduce-scatter", "all-reduce"):
            attrs += ", to_apply=sum"
        if op == "collective-permute":
            attrs = f"channel_id={j + 1}, source_target_pairs={{{{0,1}},{{1,{rng.randint(0, 9)}}}}}"
        elif rng.random() < 0.5:
            attrs += ", use_global_device_ids=true"
        operands = ", ".join(rng.choice(params)[0] for _ in range(rng.randint(0, 2)))
        lines.append(f"  c{j} = {_shape(rng)} {op}({operands}), {attrs}")
    name, shape = params[0]
    lines.append(f"  n = {shape} negate({name}), sharding={_sharding(rng)}")
    lines.append(f"  ROOT r = {shape} add(n, {name}), sharding={_sharding(rng)}")
    return "\n".join(lines) + "\n}\n"


def test_random_modules_never_raise():
    rng = random.Random(20261130)
    codes = set()
    for _ in range(150):
        options = LintOptions(mesh=rng.choice([None, "2x2", "8"]), reshard_threshold=rng.choice([0, 64 * 2**20]))
        codes |= {f.code for f in lint_text(_module(rng), "fuzz.hlo", options)}
    # the generator reaches most of the validity and collective rules
    assert {"HS101", "HS102", "HS103", "HS104", "HS105", "HS106", "HS107", "HS302", "HS303", "HS304",
            "HS307"} <= codes


def test_damaged_samples_never_raise():
    rng = random.Random(7)
    for path in sorted(SAMPLES.glob("*.hlo"))[:6]:
        text = path.read_text()
        for _ in range(4):
            cut = rng.randrange(len(text))
            for damaged in (text[:cut], text[:cut] + text[cut + rng.randrange(1, 40):],
                            text.replace("sharding={", "sharding={devices=[3]<=[2] ", 1)):
                findings = lint_text(damaged, path.name, LintOptions())
                assert all(f.line >= 1 and f.column >= 1 for f in findings if f.code == "HS001")
