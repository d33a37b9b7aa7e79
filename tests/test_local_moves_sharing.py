"""solve's post-solve local moves share the re-built strategy lists of repeated layers
(``autoshard.local.Pricing.build``: one ``strategy.sharing.GroupSharing`` for every site of a pass), and
find exactly what the pass finds with every group built by its handler."""

from __future__ import annotations

import pytest

import hloshard.autoshard.local as local
from hloshard.autoshard import evaluate_module
from hloshard.autoshard.local import improve_written
from hloshard.hlo import parse_module
from hloshard.mesh import DeviceMesh
from hloshard.strategy.handlers import build_group

MESH = DeviceMesh.parse("4")
ROWS, COLS = "{devices=[4,1]<=[4]}", "{devices=[1,4]<=[4]}"


def layers(n: int, x_sharding: str = COLS) -> str:
    """``n`` equal layers, each a detour (x to columns, z back to rows: two all-to-alls that x in rows removes)."""
    lines = [f"  a = f32[64,64] parameter(0), sharding={ROWS}"]
    prev = "a"
    for k in range(n):
        lines += [f"  x{k} = f32[64,64] negate({prev}), sharding={x_sharding}",
                  f"  z{k} = f32[64,64] exponential(x{k}), sharding={ROWS}",
                  f"  {'ROOT ' if k == n - 1 else ''}w{k} = f32[64,64] negate(z{k}), sharding={ROWS}"]
        prev = f"w{k}"
    return "HloModule layers\nENTRY e {\n" + "\n".join(lines) + "\n}\n"


def run(text: str):
    module = parse_module(text)
    before = evaluate_module(module, MESH)
    after, moves = improve_written(module, MESH, before)
    return before, after, moves


def test_repeated_layers_share_their_rebuilt_groups_and_the_moves_are_the_unshared_ones(monkeypatch):
    made = []

    class Recording(local.GroupSharing):
        def __init__(self, ctx):
            super().__init__(ctx)
            made.append(self)

    monkeypatch.setattr(local, "GroupSharing", Recording)
    before, after, moves = run(layers(4))
    # every layer's detour removed, and the figure is hloshard cost of the module written so
    assert sorted(m[0] for m in moves) == ["x0", "x1", "x2", "x3"] and all(m[2] == ROWS for m in moves)
    assert after.total_cost < before.total_cost
    direct = evaluate_module(parse_module(layers(4, ROWS)), MESH)
    assert after.total_cost == pytest.approx(direct.total_cost, rel=1e-12)
    # one sharing per Pricing (here one round priced), and later layers' groups came from earlier ones
    assert len(made) == 1 and made[0].hits > 0
    shared_hits = made[0].hits

    # the same pass with every re-built group made by its handler: the same moves and figure
    monkeypatch.setattr(local.Pricing, "build", lambda self, instr, ctx: build_group(instr, ctx))
    made.clear()
    before2, after2, moves2 = run(layers(4))
    assert not made
    assert sorted(moves2) == sorted(moves)
    assert after2.total_cost == after.total_cost and before2.total_cost == before.total_cost
    assert shared_hits > 0
