"""Random DAGs of collectives: combining keeps the program acyclic, never merges dependent collectives
and computes the same values (checked with a small numpy evaluator of the HLO subset used)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from hloshard.combine import combine_module
from hloshard.hlo import parse_module, print_module

GROUPS = ["replica_groups={{0,1,2,3,4,5,6,7}}", "replica_groups={{0,1,2,3},{4,5,6,7}}"]


def random_module(seed: int, n: int = 40) -> str:
    """Parameters f32[8,4], elementwise ops, and all-reduce / all-gather / reduce-scatter over two
    group layouts, wired at random (operands always earlier: a DAG)."""
    rnd = random.Random(seed)
    lines = []
    vals = []          # names of f32[8,4] values
    for p in range(3):
        lines.append(f"%p{p} = f32[8,4] parameter({p})")
        vals.append(f"p{p}")
    outs = []
    for k in range(n):
        r = rnd.random()
        a = rnd.choice(vals[-8:] if rnd.random() < 0.7 else vals)
        name = f"v{k}"
        if r < 0.3:
            b = rnd.choice(vals)
            lines.append(f"%{name} = f32[8,4] add(%{a}, %{b})")
        elif r < 0.4:
            lines.append(f"%{name} = f32[8,4] negate(%{a})")
        elif r < 0.7:
            g = rnd.choice(GROUPS)
            lines.append(f"%{name} = f32[8,4] all-reduce(%{a}), channel_id={k + 1}, {g}, "
                         f"use_global_device_ids=true, to_apply=%add")
        elif r < 0.85:
            gi = rnd.randrange(2)
            g, size = GROUPS[gi], (8, 4)[gi]
            lines.append(f"%{name}.ag = f32[{8 * size},4] all-gather(%{a}), channel_id={k + 1}, {g}, "
                         f"dimensions={{0}}, use_global_device_ids=true")
            lines.append(f"%{name} = f32[8,4] slice(%{name}.ag), slice={{[0:8], [0:4]}}")
        else:
            lines.append(f"%{name}.w = f32[64,4] concatenate(%{a}, %{a}, %{a}, %{a}, %{a}, %{a}, %{a}, %{a}), "
                         f"dimensions={{0}}")
            lines.append(f"%{name} = f32[8,4] reduce-scatter(%{name}.w), channel_id={k + 1}, {GROUPS[0]}, "
                         f"dimensions={{0}}, use_global_device_ids=true, to_apply=%add")
        vals.append(name)
        if rnd.random() < 0.2:
            outs.append(name)
    outs.append(vals[-1])
    outs = list(dict.fromkeys(outs))
    shape = "(" + ", ".join(["f32[8,4]"] * len(outs)) + ")"
    lines.append(f"ROOT %out = {shape} tuple({', '.join('%' + o for o in outs)})")
    body = "\n".join("  " + ln for ln in lines)
    return ("HloModule r, num_partitions=8\n\n%add (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n"
            "  %b = f32[] parameter(1)\n  ROOT %s = f32[] add(%a, %b)\n}\n\nENTRY %main {\n" + body + "\n}\n")


def _collective(op: str, x: np.ndarray, group: int, dim: int) -> np.ndarray:
    """A deterministic stand-in with the right shapes (one device's view is not simulated)."""
    if op == "all-reduce":
        return 2.0 * x + 1.0
    if op == "all-gather":
        return np.concatenate([x * (i + 1) for i in range(group)], axis=dim)
    n = x.shape[dim] // group                           # reduce-scatter: sum of the group's chunks
    return sum(np.take(x, range(i * n, (i + 1) * n), axis=dim) for i in range(group)) + 0.5


def evaluate(mod, inputs):
    env = {}
    for ins in mod.entry.post_order():
        ops = [env[id(o)] for o in ins.operands]
        oc = ins.opcode
        if oc == "parameter":
            v = inputs[ins.parameter_number]
        elif oc == "add":
            v = ops[0] + ops[1]
        elif oc == "negate":
            v = -ops[0]
        elif oc == "slice":
            v = ops[0][tuple(slice(a, b) for a, b in zip(ins.attrs["slice"].starts, ins.attrs["slice"].limits))]
        elif oc == "concatenate":
            v = np.concatenate(ops, axis=ins.dimensions[0])
        elif oc in ("all-reduce", "all-gather", "reduce-scatter"):
            group = len(ins.replica_groups[0])
            dim = ins.dimensions[0] if ins.dimensions else 0
            res = [_collective(oc, x, group, dim) for x in ops]
            v = tuple(res) if ins.shape.is_tuple else res[0]
        elif oc == "get-tuple-element":
            v = ops[0][ins.attrs["index"]]
        elif oc == "tuple":
            v = tuple(ops)
        else:  # pragma: no cover
            raise AssertionError(oc)
        if not isinstance(v, tuple):
            assert tuple(v.shape) == ins.shape.dims, (ins.name, v.shape, ins.shape)
        env[id(ins)] = v
    return env[id(mod.entry.root)]


def _deps(mod):
    anc = {}
    for i in mod.entry.post_order():
        s = set()
        for o in i.operands:
            s |= anc[o.name] | {o.name}
        anc[i.name] = s
    return anc


@pytest.mark.parametrize("seed", range(40))
def test_random_dag(seed):
    text = random_module(seed)
    before = parse_module(text)
    anc = _deps(before)
    rng = np.random.default_rng(seed)
    inputs = [rng.standard_normal((8, 4)).astype(np.float32) for _ in range(3)]
    want = evaluate(before, inputs)
    mod = parse_module(text)
    rep = combine_module(mod, bucket_bytes=random.Random(seed).choice([256, 1024, 2**20]))
    out = print_module(mod)
    again = parse_module(out)                      # text order is a valid def-before-use order
    seen = set()
    for ins in again.entry.instructions:
        assert all(o.name in seen for o in ins.operands), ins.name
        seen.add(ins.name)
    for g in rep.groups:
        for a in g.members:
            assert not (anc[a] & set(g.members)), (seed, a, g.members)
    got = evaluate(again, inputs)
    assert len(got) == len(want)
    for w, x in zip(want, got):
        np.testing.assert_array_equal(w, x)


def test_random_dags_do_combine():
    merged = 0
    for seed in range(40):
        mod = parse_module(random_module(seed))
        merged += combine_module(mod).merged
    assert merged > 100        # the generator really exercises combining
