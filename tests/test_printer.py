"""Printer: IR built or edited in Python prints as text the parser (and XLA) reads back identically;
typed attribute values print canonically; hypothesis round trips for shapes and attribute values."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hloshard.hlo import Computation, Instruction, Module, Shape, parse_module, parse_shape, print_module
from hloshard.hlo.attributes import ReplicaGroups, decode_attr, format_attr, is_balanced_blob, quote, unquote
from hloshard.hlo.sharding import HloSharding


def build_module() -> Module:
    """f(x, y) = all-reduce(x * y) with a reducer, built without any text."""
    m = Module("built")
    m.attrs["num_partitions"] = "4"
    red = m.add_computation(Computation("sum"))
    a = red.add_instruction(Instruction("a", "parameter", parse_shape("f32[]"), parameter_number=0))
    b = red.add_instruction(Instruction("b", "parameter", parse_shape("f32[]"), parameter_number=1))
    red.root = red.add_instruction(Instruction("s", "add", parse_shape("f32[]"), [a, b]))
    e = m.add_computation(Computation("main", is_entry=True))
    m.entry = e
    f = parse_shape("f32[8,16]{1,0}")
    x = e.add_instruction(Instruction("x", "parameter", f, parameter_number=0))
    y = e.add_instruction(Instruction("y", "parameter", f, parameter_number=1))
    mul = e.add_instruction(Instruction("mul", "multiply", f, [x, y]))
    ar = Instruction("ar", "all-reduce", f, [mul])
    ar.set_attr("channel_id", 1)
    ar.set_attr("replica_groups", ReplicaGroups.iota(2, 2))
    ar.set_attr("use_global_device_ids", True)
    ar.set_attr("to_apply", red)
    e.root = e.add_instruction(ar)
    x.sharding = HloSharding.parse("{devices=[2,2]<=[4]}")
    return m


def test_built_module_prints_and_reparses():
    m = build_module()
    text = print_module(m)
    assert text.splitlines()[0] == "HloModule built, num_partitions=4"
    assert ("  ROOT %ar = f32[8,16]{1,0} all-reduce(%mul), channel_id=1, replica_groups=[2,2]<=[4], "
            "use_global_device_ids=true, to_apply=%sum") in text
    assert "  %x = f32[8,16]{1,0} parameter(0), sharding={devices=[2,2]<=[4]}" in text
    again = parse_module(text)
    assert print_module(again) == text
    assert again.entry.root.replica_groups == [[0, 1], [2, 3]]


def test_new_attributes_go_before_the_generic_trailing_ones():
    m = parse_module('HloModule m\nENTRY e {\n  ROOT p = f32[4] parameter(0), metadata={op_name="p"}, '
                     'backend_config="x"\n}\n')
    p = m.entry.root
    p.sharding = HloSharding.replicated()
    p.set_attr("frontend_attributes", {"k": "v"})
    assert list(p.attrs) == ["sharding", "frontend_attributes", "metadata", "backend_config"]
    p.sharding = None
    assert "sharding" not in p.attrs
    assert 'ROOT p = f32[4] parameter(0), frontend_attributes={k="v"}, metadata={op_name="p"}, backend_config="x"' \
        in print_module(m)


def test_names_print_with_or_without_percent_and_signatures():
    m = build_module()
    m.percent_names = False
    text = print_module(m)
    assert "  ROOT ar = f32[8,16]{1,0} all-reduce(mul)" in text and "%" not in text
    m.entry.has_signature = True
    assert "ENTRY main (x: f32[8,16], y: f32[8,16]) -> f32[8,16] {" in print_module(m)
    assert print_module(parse_module(print_module(m))) == print_module(m)


def test_operand_lists_get_index_comments_every_five():
    m = parse_module("HloModule m\nENTRY e {\n  a = f32[] parameter(0)\n"
                     "  ROOT t = (f32[], f32[], f32[], f32[], f32[], f32[], f32[]) tuple(a, a, a, a, a, a, a)\n}\n")
    text = print_module(m)
    assert "tuple(a, a, a, a, a, /*index=5*/a, a)" in text
    assert "(f32[], f32[], f32[], f32[], f32[], /*index=5*/f32[], f32[])" in text
    assert m.entry.get("a").users == [m.entry.root]


def test_string_and_blob_values():
    assert quote('a "b"\n\\') == '"a \\"b\\"\\n\\\\"'
    assert unquote(quote('x\ty"z')) == 'x\ty"z'
    assert unquote(r'"\x41\101\'"') == "AA'"
    assert is_balanced_blob('{"a":{"b":"}"}}') and not is_balanced_blob("{a}{b}") and not is_balanced_blob("{")
    fmt = lambda k, v: format_attr(k, v, lambda c: c.name)   # noqa: E731
    assert fmt("backend_config", '{"x":1}') == '{"x":1}'
    assert fmt("backend_config", "plain") == '"plain"'
    assert fmt("frontend_attributes", {"a": "1", "m": "{mesh = #sdy.mesh<[\"x\"=4]>}"}) == \
        '{a="1",m={mesh = #sdy.mesh<["x"=4]>}}'
    assert fmt("custom_call_target", "Sharding") == '"Sharding"'
    assert fmt("dimensions", (1, 0)) == "{1,0}"
    assert fmt("source_target_pairs", ((0, 1), (1, 0))) == "{{0,1},{1,0}}"
    assert fmt("is_stable", True) == "true"
    # plain Python values set by other layers print the same way
    assert fmt("dimensions", [0, 2]) == "{0,2}" and fmt("replica_groups", [[0, 1], [2, 3]]) == "{{0,1},{2,3}}"
    assert fmt("source_target_pairs", [[0, 1]]) == "{{0,1}}" and fmt("replica_groups", []) == "{}"
    assert fmt("channel_id", np.int64(3)) == "3"


# -- hypothesis ----------------------------------------------------------------------------------------

ELEMENT = st.sampled_from(["f32", "bf16", "s4", "u8", "pred", "f8e4m3fn", "c64", "s64", "token"])


@st.composite
def array_shapes(draw):
    etype = draw(ELEMENT)
    if etype == "token":
        return "token[]"
    rank = draw(st.integers(0, 4))
    dims = draw(st.lists(st.integers(0, 64), min_size=rank, max_size=rank))
    dyn = draw(st.lists(st.sampled_from(["", "<=", "?"]), min_size=rank, max_size=rank))
    parts = ["?" if d == "?" else f"{d}{n}" for d, n in zip(dyn, dims)]
    text = f"{etype}[{','.join(parts)}]"
    if draw(st.booleans()):
        perm = draw(st.permutations(list(range(rank))))
        tail = draw(st.sampled_from(["", ":T(8,128)", ":T(2,*,128)(2,1)S(1)", ":E(4)"]))
        if perm or tail:
            text += "{" + ",".join(map(str, perm)) + tail + "}"
    return text


shapes = st.recursive(array_shapes(), lambda inner: st.lists(inner, max_size=7).map(
    lambda xs: "(" + ", ".join(xs) + ")"), max_leaves=12)


@settings(max_examples=80, deadline=None)
@given(shapes)
def test_shape_text_round_trip(text):
    s = parse_shape(text)
    printed = str(s)
    again = parse_shape(printed)
    assert again == s and str(again) == printed
    assert sum(x.byte_size for x in s.leaves()) == s.byte_size
    # a shape survives inside an instruction too
    m = parse_module(f"HloModule m\nENTRY e {{\n  ROOT p = {printed} parameter(0)\n}}\n")
    assert m.entry.root.shape == s


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.data())
def test_iota_replica_groups_match_numpy(reshape, data):
    n = int(np.prod(reshape))
    perm = data.draw(st.permutations(list(range(len(reshape)))))
    divisors = [d for d in range(1, n + 1) if n % d == 0]
    groups = data.draw(st.sampled_from(divisors))
    text = f"[{groups},{n // groups}]<=[{','.join(map(str, reshape))}]"
    if len(reshape) > 1:
        text += f"T({','.join(map(str, perm))})"
    else:
        perm = [0]
    rg = decode_attr("replica_groups", text)
    expected = np.arange(n).reshape(reshape).transpose(perm).reshape(groups, n // groups).tolist()
    assert rg.groups == expected
    assert str(decode_attr("replica_groups", str(rg))) == str(rg)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3), st.data())
def test_mesh_replica_groups_match_a_reference(sizes, data):
    names = ["a", "b", "c"][: len(sizes)]
    varying = data.draw(st.lists(st.sampled_from(range(len(sizes))), unique=True, min_size=1))
    ids = data.draw(st.permutations(list(range(int(np.prod(sizes))))))
    text = ("mesh[" + ",".join(f"'{n}'={s}" for n, s in zip(names, sizes)) + "], device_ids=("
            + ",".join(map(str, ids)) + ") {" + ",".join(f"'{names[v]}'" for v in varying) + "}")
    groups = decode_attr("replica_groups", text).groups
    # reference: enumerate the mesh; a group is the devices sharing the coordinates of the fixed axes
    dev = np.array(ids).reshape(sizes)
    fixed = [i for i in range(len(sizes)) if i not in varying]
    expected = []
    for fc in itertools.product(*[range(sizes[i]) for i in fixed]):
        g = []
        for vc in itertools.product(*[range(sizes[i]) for i in varying]):
            coord = [0] * len(sizes)
            for i, c in zip(fixed, fc):
                coord[i] = c
            for i, c in zip(varying, vc):
                coord[i] = c
            g.append(int(dev[tuple(coord)]))
        expected.append(g)
    assert groups == expected


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(-3, 5), st.integers(-3, 5), st.integers(0, 2)), min_size=1, max_size=4),
       st.lists(st.tuples(st.integers(1, 5), st.integers(1, 3), st.integers(0, 2), st.integers(0, 2),
                          st.integers(1, 2), st.integers(1, 2), st.booleans()), min_size=1, max_size=3))
def test_padding_and_window_round_trip(pads, wins):
    ptext = "x".join(f"{lo}_{hi}_{it}" for lo, hi, it in pads)
    p = decode_attr("padding", ptext)
    assert p.dims == tuple(pads)
    assert decode_attr("padding", str(p)) == p
    fields = {
        "size": "x".join(str(w[0]) for w in wins), "stride": "x".join(str(w[1]) for w in wins),
        "pad": "x".join(f"{w[2]}_{w[3]}" for w in wins), "lhs_dilate": "x".join(str(w[4]) for w in wins),
        "rhs_dilate": "x".join(str(w[5]) for w in wins), "rhs_reversal": "x".join(str(int(w[6])) for w in wins)}
    w = decode_attr("window", "{" + " ".join(f"{k}={v}" for k, v in fields.items()) + "}")
    assert [(d.size, d.stride, d.padding_low, d.padding_high, d.lhs_dilation, d.rhs_dilation, d.reversal)
            for d in w.dims] == [tuple(x) for x in wins]
    assert decode_attr("window", str(w)) == w


def test_shape_equality_and_properties():
    s = Shape.array("bf16", (4, 8), (1, 0))
    assert str(s) == "bf16[4,8]{1,0}" and s.byte_size == 64 and s.rank == 2 and s.is_array
    assert parse_shape("s4[3]").byte_size == 2 and parse_shape("s4[3]").element_size == 0.5
    assert parse_shape("token[]").is_token and parse_shape("token[]").byte_size == 0
    assert hash(parse_shape("f32[2]{0}")) == hash(Shape.array("f32", (2,), (0,)))


def test_computations_print_callees_first():
    m = build_module()
    # a reducer added after the entry (as a pass would) is printed before its caller
    late = Computation("late_sum")
    a = late.add_instruction(Instruction("a", "parameter", parse_shape("f32[]"), parameter_number=0))
    b = late.add_instruction(Instruction("b", "parameter", parse_shape("f32[]"), parameter_number=1))
    late.root = late.add_instruction(Instruction("s", "add", parse_shape("f32[]"), [a, b]))
    m.add_computation(late)
    m.entry.root.set_attr("to_apply", late)
    text = print_module(m)
    assert text.index("%late_sum {") < text.index("ENTRY %main {")
    assert [c.name for c in parse_module(text).computations] == ["sum", "late_sum", "main"]


def test_instructions_print_definitions_before_uses():
    m = parse_module("HloModule m\nENTRY e {\n  a = f32[4] parameter(0)\n  ROOT c = f32[4] negate(a)\n}\n")
    e = m.entry
    b = e.add_instruction(Instruction("b", "abs", e.get("a").shape, [e.get("a")]))   # appended at the end
    e.root.set_operands([b])
    text = print_module(m)
    assert text.index("b = f32[4] abs(a)") < text.index("ROOT c = f32[4] negate(b)")
    assert print_module(parse_module(text)) == text


def test_remove_many_instructions_at_once():
    m = parse_module("HloModule m\nENTRY e {\n  a = f32[4] parameter(0)\n  b = f32[4] negate(a)\n"
                     "  c = f32[4] abs(b)\n  d = f32[4] copy(a), control-predecessors={c}\n  ROOT r = f32[4] add(a, d)\n}\n")
    e = m.entry
    b, c = e.get("b"), e.get("c")
    e.remove_instructions([c, b])
    assert [i.name for i in e.instructions] == ["a", "d", "r"]
    assert e.get("a").users == [e.get("d"), e.root] and "control-predecessors" not in e.get("d").attrs
    import pytest

    with pytest.raises(ValueError):
        e.remove_instructions([e.get("d")])   # r still uses it
    assert print_module(parse_module(print_module(m))) == print_module(m)


@settings(max_examples=120, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",), max_codepoint=0x2FF), max_size=30),
       st.text(alphabet='ab{}"\\, =:\n\t', max_size=20))
def test_string_attributes_survive_print_and_parse(free, tricky):
    """custom_call_target / backend_config / frontend attribute strings with quotes, backslashes,
    braces, control characters and non-ASCII text print to text that parses back to the same value."""
    p = Instruction("cc", "custom-call", parse_shape("f32[2]"), [])
    p.set_attr("custom_call_target", free)
    p.set_attr("backend_config", tricky)
    p.set_attr("frontend_attributes", {"a.b": tricky, "c": free})
    m = Module("s")
    e = m.add_computation(Computation("e", is_entry=True))
    m.entry = e
    e.root = e.add_instruction(p)
    text = print_module(m)
    q = parse_module(text).entry.root
    assert q.attrs["custom_call_target"] == free
    assert q.attrs["backend_config"] == tricky
    assert q.attrs["frontend_attributes"] == {"a.b": tricky, "c": free}
    assert print_module(parse_module(text)) == text
