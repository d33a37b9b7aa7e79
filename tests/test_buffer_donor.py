"""``buffer_donor`` (what jax writes for ``donate_argnums`` of sharded arguments): parsed, paired with
outputs as XLA's ``OptimizeInputOutputBufferAlias`` pairs them, tied and donated like
``input_output_alias``, freed by the memory model, and written as ``input_output_alias`` into the text
the XLA reference compiles (jaxlib's HLO -> StableHLO route drops ``buffer_donor``: fresh35 finding 2,
``cost --xla`` measured alias 0 where ``jax.jit`` frees 133,636 B per device).  No XLA here (the measured
figures are in BENCHMARKS.md, "Loops that write into preallocated buffers")."""

from __future__ import annotations

import pytest

from hloshard.autoshard import evaluate_module
from hloshard.hlo.attributes import AttrError, parse_buffer_donor
from hloshard.hlo.parser import parse_module
from hloshard.mesh import DeviceMesh
from hloshard.strategy.ties import Tie, donated_aliases, donor_aliases, module_ties
from hloshard.xla_compare import tag_module_text

S = "{devices=[8,1]<=[8]}"


def _module(header: str) -> str:
    """A step: new ``w`` (f32[64,256]) and ``m`` (same shape) from ``w``, ``m`` and a gradient ``g``;
    ``b`` (f32[32]) has no output of its shape."""
    return f"""HloModule step{header}, num_partitions=8

sum {{
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}}

ENTRY main {{
  w = f32[64,256] parameter(0), sharding={S}
  m = f32[64,256] parameter(1), sharding={S}
  g = f32[64,256] parameter(2), sharding={S}
  b = f32[32] parameter(3), sharding={{replicated}}
  c = f32[] constant(0.9), sharding={{replicated}}
  cb = f32[64,256] broadcast(c), dimensions={{}}, sharding={S}
  mm = f32[64,256] multiply(m, cb), sharding={S}
  m2 = f32[64,256] add(mm, g), sharding={S}
  w2 = f32[64,256] subtract(w, m2), sharding={S}
  z = f32[] constant(0), sharding={{replicated}}
  l = f32[] reduce(w2, z), dimensions={{0,1}}, to_apply=sum, sharding={{replicated}}
  ROOT t = (f32[], f32[64,256], f32[64,256]) tuple(l, w2, m2), sharding={{{{replicated}}, {S}, {S}}}
}}
"""


DONOR = ", buffer_donor={ (0, {}), (1, {}), (3, {}) }"


def test_parse_buffer_donor():
    assert parse_buffer_donor("{ (0, {}), (2, {1,0}) }") == [(0, ()), (2, (1, 0))]
    assert parse_buffer_donor("{}") == []
    with pytest.raises(AttrError):
        parse_buffer_donor("{ (0) }")


def test_donors_pair_with_the_first_free_output_of_their_shape():
    """w takes output {1}, m output {2} (the first of its shape not taken), b (f32[32]) nothing; an
    output an ``input_output_alias`` pair took is not given to a donor."""
    m = parse_module(_module(DONOR))
    assert donor_aliases(m) == [((1,), 0, ()), ((2,), 1, ())]
    both = parse_module(_module(", input_output_alias={ {1}: (2, {}, may-alias) }" + DONOR))
    assert donor_aliases(both) == [((2,), 0, ())]
    assert donated_aliases(both) == [((1,), 2, ()), ((2,), 0, ())]
    ties = module_ties(m)
    assert [(t.output, t.param, t.donated, t.source) for t in ties] == [((1,), 0, True, "buffer_donor"),
                                                                      ((2,), 1, True, "buffer_donor")]
    m.ties = [Tie((1,), 0, source="state")]   # auto_shard's own tie of output 1: no second one from the donor
    assert [(t.output, t.source) for t in module_ties(m)] == [((2,), "buffer_donor"), ((1,), "state")]


def test_donated_inputs_are_freed_by_the_memory_model():
    """The peak with the donation is lower than without it, by at most the donated bytes (two
    f32[8,256] tiles of 8 KiB)."""
    mesh = DeviceMesh.parse("8")
    with_donor = evaluate_module(parse_module(_module(DONOR)), mesh).evaluation.peak_memory
    without = evaluate_module(parse_module(_module("")), mesh).evaluation.peak_memory
    assert 0 < without - with_donor <= 2 * 8 * 256 * 4


def test_the_xla_reference_text_carries_the_pairs_as_input_output_alias():
    """What ``cost --xla`` / ``plan.xla()`` compile: the donors as ``input_output_alias`` pairs (XLA then
    frees them as ``jax.jit`` does); the module's own header is put back."""
    m = parse_module(_module(DONOR))
    text, _tags = tag_module_text(m)
    header = text.splitlines()[0]
    assert "buffer_donor" not in header
    assert "input_output_alias={ {1}: (0, {}, may-alias), {2}: (1, {}, may-alias) }" in header
    assert "buffer_donor" in m.attrs and "input_output_alias" not in m.attrs


def test_a_donor_left_in_another_layout_is_not_aliased():
    """XLA pairs equal per-device shapes: an output written in another layout than its donor gets no
    ``input_output_alias`` in the reference text (the donation is then useless, as under jax.jit)."""
    text = _module(DONOR).replace(f"tuple(l, w2, m2), sharding={{{{replicated}}, {S}, {S}}}",
                                  "tuple(l, w2, m2), sharding={{replicated}, {replicated}, "
                                  "{devices=[8,1]<=[8]}}")
    m = parse_module(text)
    header = tag_module_text(m)[0].splitlines()[0]
    assert "input_output_alias={ {2}: (1, {}, may-alias) }" in header
