"""Issue 24 (round 31, helper heldplan): ``plan.jit()`` runs the plan written.

* :func:`hloshard.jax.jaxpr.broadcast_sources` names the broadcast that expands a dim, not the unit-dim
  broadcast jax's ``mul`` lowering puts before it (``f32[16,64,1]`` -> ``f32[16,64,1]`` -> reshape -> ``f32[16,64,256]``):
  constraining the input to the unit step's layout made XLA broadcast in it and all-gather the broadcast result.

(The helper's second change, XLA's completion of the user's shardings as a candidate of the guard's cheapest rule,
was not merged: on the user's own wall-clock call it traded -2.2% bytes for +11% peak; BENCHMARKS.md, round 31.)
"""

from __future__ import annotations

import types

from hloshard.hlo import parse_module
from hloshard.jax.jaxpr import broadcast_sources

# jax's lowering of ``mul x r`` (x f32[16,64,256], r f32[16,64,1]) on a 2x4 mesh, as a held baseline plan writes it
# (GPT-2 given its expert layout, round 31): r replicated over 'model', the unit-dim broadcast split [2,4,1], the
# real broadcast split over 'data' only
CHAIN = """HloModule m

ENTRY %main (x: f32[16,64,256], r: f32[16,64,1]) -> f32[16,64,256] {
  %x = f32[16,64,256]{2,1,0} parameter(0), sharding={devices=[2,1,1,4]<=[8] last_tile_dim_replicate}
  %r = f32[16,64,1]{2,1,0} parameter(1), sharding={devices=[2,1,1,4]<=[8] last_tile_dim_replicate}
  %b1 = f32[16,64,1]{2,1,0} broadcast(%r), dimensions={0,1,2}, sharding={devices=[2,4,1]<=[8]}, metadata={op_name="jit(run)/hloshard_eqn26/mul"}
  %rs = f32[16,64]{1,0} reshape(%b1), sharding={devices=[2,4]<=[8]}, metadata={op_name="jit(run)/hloshard_eqn26/mul"}
  %b2 = f32[16,64,256]{2,1,0} broadcast(%rs), dimensions={0,1}, sharding={devices=[2,1,1,4]<=[8] last_tile_dim_replicate}, metadata={op_name="jit(run)/hloshard_eqn26/mul"}
  ROOT %m = f32[16,64,256]{2,1,0} multiply(%x, %b2), sharding={devices=[2,1,1,4]<=[8] last_tile_dim_replicate}, metadata={op_name="jit(run)/hloshard_eqn26/mul"}
}
"""


def _eqn(*shapes):
    var = lambda shape: types.SimpleNamespace(aval=types.SimpleNamespace(shape=shape))  # noqa: E731
    return types.SimpleNamespace(primitive=types.SimpleNamespace(name="mul"), params={},
                                 invars=[var(s) for s in shapes])


def test_broadcast_sources_name_the_broadcast_that_expands_a_dim():
    module = parse_module(CHAIN, "<chain>")
    got = broadcast_sources(module, {(26,): _eqn((16, 64, 256), (16, 64, 1))})
    assert [(path, i, b.name, src.name) for path, i, b, src in got] == [((26,), 1, "b2", "r")], got


