"""``call`` inlined as XLA's CallInliner inlines it (hlo.inline), before the cost graph is built."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from hloshard.autoshard import build_graph
from hloshard.hlo import parse_module, print_module
from hloshard.hlo.inline import inline_calls, is_inlinable_call
from hloshard.mesh import DeviceMesh

SAMPLES = pathlib.Path(__file__).resolve().parent.parent / "samples"

#: main calls %g twice, %g calls %f (a call inside a callee); %f's root carries no sharding, the
#: first call of %g does
NESTED = """HloModule nested, num_partitions=8

%f (a: f32[64,64]) -> f32[64,64] {
  %a = f32[64,64] parameter(0)
  %e = f32[64,64] exponential(%a)
  ROOT %n = f32[64,64] negate(%e)
}

%g (b: f32[64,64]) -> f32[64,64] {
  %b = f32[64,64] parameter(0)
  %c = f32[64,64] call(%b), to_apply=%f
  ROOT %s = f32[64,64] sine(%c)
}

ENTRY %main (p: f32[64,64]) -> (f32[64,64], f32[64,64]) {
  %p = f32[64,64] parameter(0), sharding={devices=[8,1]<=[8]}
  %x = f32[64,64] call(%p), to_apply=%g, sharding={devices=[1,8]<=[8]}
  %y = f32[64,64] call(%x), to_apply=%g
  ROOT %t = (f32[64,64], f32[64,64]) tuple(%x, %y)
}
"""

#: a callee returning a tuple, read through get-tuple-element; one operand the callee never reads;
#: a reducer the callee's reduce shares with the entry; a call with a backend_config (kept)
TUPLE_ROOT = """HloModule tuple_root, num_partitions=8

%add (u: f32[], v: f32[]) -> f32[] {
  %u = f32[] parameter(0)
  %v = f32[] parameter(1)
  ROOT %w = f32[] add(%u, %v)
}

%pair (a: f32[16,32], b: f32[16,32], unused: f32[16,32]) -> (f32[16,32], f32[16]) {
  %a = f32[16,32] parameter(0)
  %b = f32[16,32] parameter(1)
  %unused = f32[16,32] parameter(2)
  %m = f32[16,32] multiply(%a, %b)
  %dead = f32[16,32] cosine(%a)
  %z = f32[] constant(0)
  %r = f32[16] reduce(%m, %z), dimensions={1}, to_apply=%add
  ROOT %t = (f32[16,32], f32[16]) tuple(%m, %r)
}

%kept (k: f32[16]) -> f32[16] {
  %k = f32[16] parameter(0)
  ROOT %kn = f32[16] negate(%k)
}

ENTRY %main (x: f32[16,32], y: f32[16,32]) -> (f32[16,32], f32[16], f32[16]) {
  %x = f32[16,32] parameter(0)
  %y = f32[16,32] parameter(1)
  %only = f32[16,32] exponential(%y)
  %c = (f32[16,32], f32[16]) call(%x, %y, %only), to_apply=%pair
  %g0 = f32[16,32] get-tuple-element(%c), index=0
  %g1 = f32[16] get-tuple-element(%c), index=1
  %z2 = f32[] constant(0)
  %s = f32[16] reduce(%x, %z2), dimensions={1}, to_apply=%add
  %k = f32[16] call(%g1), to_apply=%kept, backend_config={"flag":1}
  %sum = f32[16] add(%k, %s)
  ROOT %out = (f32[16,32], f32[16], f32[16]) tuple(%g0, %g1, %sum)
}
"""


def test_nested_calls_inline_recursively_with_unique_names():
    m = parse_module(NESTED)
    done = inline_calls(m)
    assert [c for _, c in done] == ["f", "g", "g"]           # callees first
    assert [c.name for c in m.computations] == ["main"]       # nothing calls f or g any more
    e = m.entry
    assert [i.opcode for i in e.instructions] == [
        "parameter", "exponential", "negate", "sine", "exponential", "negate", "sine", "tuple"]
    names = [i.name for i in e.instructions]
    assert len(set(names)) == len(names)
    assert names[1:4] == ["e", "n", "s"] and names[4:7] == ["e.1", "n.1", "s.1"]
    # the first call's sharding went to its root copy (the second call had none)
    assert str(e.get("s").sharding) == "{devices=[1,8]<=[8]}" and e.get("s.1").sharding is None
    assert e.root.operands == [e.get("s"), e.get("s.1")]
    assert e.get("e.1").operands == [e.get("s")]
    # print -> parse -> print is a fixed point
    text = print_module(m)
    assert " call(" not in text and print_module(parse_module(text)) == text


def test_tuple_root_forwarded_dead_code_removed_shared_reducer_kept():
    m = parse_module(TUPLE_ROOT)
    done = inline_calls(m)
    assert done == [("c", "pair")]
    e = m.entry
    assert [c.name for c in m.computations] == ["add", "kept", "main"]
    # GTEs of the inlined tuple: their users read the elements; the tuple and the GTEs are gone
    assert e.root.operands[:2] == [e.get("m"), e.get("r")]
    assert not any(i.opcode == "get-tuple-element" for i in e.instructions)
    assert "t" not in e and "dead" not in e and "only" not in e   # dead copy; operand only the call read
    assert e.get("k").operands == [e.get("r")]
    assert e.get("r").attrs["to_apply"] is m.get_computation("add")   # reducer shared, not cloned
    # the call with a backend_config stays (XLA keeps it too)
    assert not is_inlinable_call(e.get("k")) and is_inlinable_call(parse_module(TUPLE_ROOT).entry.get("c"))
    assert e.get("k").opcode == "call"
    text = print_module(m)
    assert print_module(parse_module(text)) == text


def test_control_predecessors_follow_the_inlined_call():
    text = """HloModule ctrl
%f (a: f32[8]) -> f32[8] {
  %a = f32[8] parameter(0)
  %e = f32[8] exponential(%a)
  ROOT %n = f32[8] negate(%e), control-predecessors={%e}
}
ENTRY %main (p: f32[8]) -> f32[8] {
  %p = f32[8] parameter(0)
  %q = f32[8] sine(%p)
  %c = f32[8] call(%p), to_apply=%f, control-predecessors={%q}
  ROOT %r = f32[8] cosine(%p), control-predecessors={%c}
}
"""
    m = parse_module(text)
    inline_calls(m)
    e = m.entry
    assert e.get("e").control_predecessors == [e.get("q")]
    assert e.get("n").control_predecessors == [e.get("e"), e.get("q")]
    assert e.root.control_predecessors == [e.get("n")]
    out = print_module(m)
    assert print_module(parse_module(out)) == out


def test_a_module_without_calls_is_left_alone():
    text = (SAMPLES / "attention_6heads.pre.hlo").read_text()
    m = parse_module(text)
    assert inline_calls(m) == []
    assert print_module(m) == print_module(parse_module(text))


@pytest.mark.parametrize("name", ["mlp_train_step", "embedding_lookup", "moe_layer", "scan_mlp_train_step",
                                  "conv_layer"])
def test_samples_have_no_calls_after_building(name):
    """The cost graph is built from the inlined module (build_graph's hook): no call left, and the
    while bodies jax's scan wraps around its calls are still there."""
    m = parse_module((SAMPLES / f"{name}.pre.hlo").read_text())
    n_while = sum(i.opcode == "while" for i in m.all_instructions())
    assert any(i.opcode == "call" for i in m.all_instructions())
    build_graph(m, DeviceMesh.parse("2x4"))
    assert not any(i.opcode == "call" for i in m.all_instructions())
    assert sum(i.opcode == "while" for i in m.all_instructions()) == n_while


@pytest.mark.oracle
def test_xla_accepts_the_inlined_samples_and_computes_the_same():
    """XLA compiles every inlined sample with calls (8 devices, its own shardings), and the inlined
    nested module computes what the module with calls computes, on sharded inputs."""
    from tests.conftest import require_jax

    require_jax()
    from tests import xla_oracle

    texts = []
    for name in ["mlp_train_step", "embedding_lookup", "moe_layer", "scan_mlp_train_step", "conv_layer"]:
        m = parse_module((SAMPLES / f"{name}.pre.hlo").read_text())
        inline_calls(m)
        texts.append(print_module(m))
    for name, (ok, msg) in zip(["mlp", "embedding", "moe", "scan_mlp", "conv"], xla_oracle.compile_many(texts)):
        assert ok, f"{name}: {msg[:400]}"

    m = parse_module(NESTED)
    inline_calls(m)
    x = np.random.default_rng(3).standard_normal((64, 64)).astype(np.float32)
    want = xla_oracle.run_sharded(NESTED, [x])
    got = xla_oracle.run_sharded(print_module(m), [x])
    for a, b in zip(want, got):
        np.testing.assert_allclose(b, a, rtol=1e-6)
    np.testing.assert_allclose(got[1], np.sin(-np.exp(np.sin(-np.exp(x)))), rtol=1e-5)


@pytest.mark.oracle
def test_the_calls_sharding_lands_where_xla_puts_it():
    """A call's ``sharding=`` goes to the root copy: XLA partitions the module with the call and the
    inlined one alike (the all-to-all to [1,8] before the negate, the one back to [8,1] before the sine)."""
    from tests.conftest import require_jax

    require_jax()
    from tests import xla_oracle

    text = """HloModule callsh, num_partitions=8

%f (a: f32[64,64]) -> f32[64,64] {
  %a = f32[64,64] parameter(0)
  %e = f32[64,64] exponential(%a)
  ROOT %n = f32[64,64] negate(%e)
}

ENTRY %main (x: f32[64,64]) -> f32[64,64] {
  %x = f32[64,64] parameter(0), sharding={devices=[8,1]<=[8]}
  %c = f32[64,64] call(%x), to_apply=%f, sharding={devices=[1,8]<=[8]}
  ROOT %r = f32[64,64] sine(%c), sharding={devices=[8,1]<=[8]}
}
"""
    m = parse_module(text)
    inline_calls(m)
    assert str(m.entry.get("n").sharding) == "{devices=[1,8]<=[8]}" and m.entry.get("e").sharding is None
    kinds = [[(c["kind"], c["shape"], c["dimensions"]) for c in xla_oracle.collectives(xla_oracle.spmd_partition(t, 8))]
             for t in (text, print_module(m))]
    assert kinds[0] == kinds[1] == [("all-to-all", "f32[8,8,8]{2,1,0}", [1]), ("all-to-all", "f32[8,8,8]{2,1,0}", [0])]


def test_explain_names_an_inlined_call_by_its_root_copy():
    """``explain --instruction CALL``: the call is gone after inlining; its name stands for the copy of
    the callee's root (a tuple root whose readers were all forwarded: an error naming its elements)."""
    from hloshard.errors import InputError
    from hloshard.explain_instruction import explain_instruction

    m = parse_module(NESTED)
    expl = explain_instruction(m, DeviceMesh.parse("8"), "y", alternatives=0)
    assert expl.data["instruction"] == "s.1" and expl.data["opcode"] == "sine"
    m = parse_module(TUPLE_ROOT)
    with pytest.raises(InputError, match="c was a call, inlined as XLA inlines it; its result is the tuple of m, r"):
        explain_instruction(m, DeviceMesh.parse("8"), "c", alternatives=0)


def test_inlined_ops_are_named_after_their_call_site():
    """jax writes a callee's op_names relative to it (``max`` inside ``jit(relu)``); XLA's CallInliner
    prefixes them with the call's (the compiled module reads ``jit(f)/jvp(hloshard_eqn7)/jit(relu)/max``),
    so an inlined op names its ``hloshard_eqn`` equation (new user 24's CNN: every relu was unnamed).
    Nested calls compose; an op or a call without an op_name is left as it is."""
    from hloshard.jax.jaxpr import equation_of

    text = """HloModule m
inner.1 {
  a.1 = f32[8,4]{1,0} parameter(0)
  ROOT n.1 = f32[8,4]{1,0} negate(a.1), metadata={op_name="neg" source_line=3}
}
relu.1 {
  a.2 = f32[8,4]{1,0} parameter(0)
  c.1 = f32[] constant(0), metadata={op_name="max"}
  b.1 = f32[8,4]{1,0} broadcast(c.1), dimensions={}
  i.1 = f32[8,4]{1,0} call(a.2), to_apply=inner.1, metadata={op_name="jit(inner)"}
  ROOT m.1 = f32[8,4]{1,0} maximum(i.1, b.1), metadata={op_name="max" stack_frame_id=3}
}
plain.1 {
  a.3 = f32[8,4]{1,0} parameter(0)
  ROOT e.1 = f32[8,4]{1,0} exponential(a.3), metadata={op_name="exp"}
}
ENTRY e {
  x.1 = f32[8,4]{1,0} parameter(0)
  r.1 = f32[8,4]{1,0} call(x.1), to_apply=relu.1, metadata={op_name="jit(f)/jvp(hloshard_eqn7)/jit(relu)"}
  ROOT p.1 = f32[8,4]{1,0} call(r.1), to_apply=plain.1
}
"""
    m = parse_module(text, "t")
    inline_calls(m)
    by = {i.name: i for i in m.entry.instructions}
    assert by["m.1"].op_name == "jit(f)/jvp(hloshard_eqn7)/jit(relu)/max"
    assert 'stack_frame_id=3' in str(by["m.1"].attrs["metadata"])
    assert by["n.1"].op_name == "jit(f)/jvp(hloshard_eqn7)/jit(relu)/jit(inner)/neg"
    assert 'source_line=3' in str(by["n.1"].attrs["metadata"])
    assert "metadata" not in by["b.1"].attrs          # no op_name of its own: none invented
    assert by["e.1"].op_name == "exp"                 # a call without an op_name prefixes nothing
    assert equation_of(by["m.1"]) == equation_of(by["n.1"]) == (7,)
    # the printed module parses back with the same names
    again = {i.name: i for i in parse_module(print_module(m), "t2").entry.instructions}
    assert again["m.1"].op_name == by["m.1"].op_name
