"""HLO text front end: parsing every construct into the typed IR, and round trips.

Inputs: hand-written modules in tests/data/hlo/ (one per construct family) and the real jax dumps in
samples/. Oracle checks (XLA accepts our printed text) are in test_parser_oracle.py.
"""

from __future__ import annotations

import pathlib
import re

import pytest

from hloshard.hlo import Shape, parse_file, parse_module, parse_shape, print_module
from hloshard.hlo.attributes import PaddingConfig, ReplicaGroups, SliceSpec, Window
from hloshard.hlo.ir import Computation, Instruction
from tests.conftest import ROOT, SAMPLES

DATA = ROOT / "tests" / "data" / "hlo"
DATA_FILES = sorted(DATA.glob("*.hlo"))
SAMPLE_FILES = sorted(SAMPLES.glob("*.hlo"))


def structure(module) -> list:
    """Everything the IR holds, as plain data (for comparing two parses)."""
    out = [module.name, sorted(module.attrs.items()), module.stack_frames, module.entry.name]
    for comp in module.computations:
        out.append((comp.name, comp.is_entry, comp.root.name, comp.execution_thread,
                    [p.name for p in comp.parameters]))
        for i in comp.instructions:
            out.append((i.name, i.opcode, str(i.shape), [o.name for o in i.operands],
                        sorted(u.name for u in i.users), i.literal, i.parameter_number, i.ignore_codes,
                        [(k, _plain(v)) for k, v in i.attrs.items()]))
    return out


def _plain(v):
    if isinstance(v, (Computation, Instruction)):
        return ("ref", v.name)
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return str(v) if not isinstance(v, (int, bool, tuple, dict)) else v


# -- round trips ----------------------------------------------------------------------------------

@pytest.mark.parametrize("path", DATA_FILES + SAMPLE_FILES, ids=lambda p: p.name)
def test_print_is_a_fixed_point_and_reparse_is_equal(path):
    m1 = parse_file(str(path))
    text1 = print_module(m1)
    m2 = parse_module(text1, "printed")
    text2 = print_module(m2)
    assert text2 == text1
    assert structure(m2) == structure(m1)


_COMP_HEAD = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s*(?:\(.*\)\s*->\s*.*)?\{\s*$")
_INSTR_LINE = re.compile(r"^\s+(ROOT\s+)?%?([\w.\-]+)\s*=\s*\S")


def _computations_by_text(text: str) -> list[tuple[str, bool, list[str], str | None]]:
    """(name, is_entry, instruction names, ROOT name) per computation, read off the text line by line
    with two regular expressions (no grammar): the independent count the parser is checked against."""
    out, cur = [], None
    for line in text.splitlines():
        if cur is None:
            m = _COMP_HEAD.match(line)
            if m and not line.startswith("HloModule"):
                cur = (m.group(2), bool(m.group(1)), [], [None])
        elif line.startswith("}"):
            out.append((cur[0], cur[1], cur[2], cur[3][0]))
            cur = None
        else:
            m = _INSTR_LINE.match(line)
            if m:
                cur[2].append(m.group(2))
                if m.group(1):
                    cur[3][0] = m.group(2)
    return out


def test_samples_parse_to_exactly_the_instructions_their_text_lists():
    """Every sample's computations, instructions (in order), entry and roots as the parser builds them
    equal what a line-by-line read of the text finds (was: 'it parsed and has >= 10 instructions')."""
    assert len(SAMPLE_FILES) >= 13
    for p in SAMPLE_FILES:
        text = p.read_text()
        m = parse_module(text, p.name)
        got = [(c.name, c.is_entry, [i.name for i in c.instructions], c.root.name) for c in m.computations]
        want = _computations_by_text(text)
        # the parser keeps a computation's instructions in text order; a computation without a ROOT
        # line has its last instruction as root (XLA's rule)
        want = [(n, e, names, root or names[-1]) for n, e, names, root in want]
        assert got == want, p.name
        assert sum(e for _, e, _, _ in want) == 1 and m.entry.name == next(n for n, e, _, _ in want if e)


def test_printed_module_keeps_every_instruction_of_a_propagated_dump():
    path = SAMPLES / "transformer_block.propagated.hlo"
    m = parse_file(str(path))
    text = path.read_text()
    # one line per instruction, in each computation
    n_lines = sum(1 for ln in text.splitlines() if " = " in ln and not ln.startswith("HloModule"))
    assert sum(1 for _ in m.all_instructions()) == n_lines
    with_sharding = [i for i in m.entry.instructions if i.sharding is not None]
    assert len(with_sharding) >= 0.9 * len(m.entry.instructions)
    assert m.num_partitions == 8


# -- module header, computations ---------------------------------------------------------------------

def test_header_attributes_and_entry():
    m = parse_file(str(DATA / "basics.hlo"))
    assert m.name == "jit_step"
    assert list(m.attrs) == ["is_scheduled", "input_output_alias", "entry_computation_layout",
                             "allow_spmd_sharding_propagation_to_output", "num_partitions", "frontend_attributes"]
    assert m.num_partitions == 8 and m.num_replicas is None and m.is_scheduled
    assert m.input_output_alias == [((0,), 0, ()), ((1,), 1, ())]
    params, result = m.entry_computation_layout
    assert [str(p) for p in params] == ["f32[8,16]{1,0}", "s32[]"] and str(result) == "(f32[8,16]{1,0}, s32[])"
    assert m.attrs["frontend_attributes"] == '{xla.sdy.meshes={mesh = #sdy.mesh<["x"=2, "y"=4]>}}'
    assert m.entry.name == "main.5" and m.entry.is_entry
    assert [c.name for c in m.computations] == ["add_F32.v3", "max_f32", "main.5"]
    assert [p.name for p in m.entry.parameters] == ["Arg_0.1", "Arg_1.2"]
    assert m.entry.root.name == "tuple.9" and m.entry.root.is_root
    assert m.get_computation("%max_f32").has_signature and not m.get_computation("add_F32.v3").has_signature


def test_headerless_module_and_last_computation_is_entry():
    m = parse_module("c1 {\n  a = f32[] parameter(0)\n  ROOT n = f32[] negate(a)\n}\n"
                     "c2 {\n  b = f32[] parameter(0)\n  ROOT r = f32[] call(b), to_apply=c1\n}\n")
    assert m.entry.name == "c2" and m.name == "module_c2"
    assert m.entry.root.called_computations == [m.get_computation("c1")]
    assert m.entry.root.shape == parse_shape("f32[]")


def test_legacy_module_name_with_colon_and_no_space_before_signature():
    m = parse_module("HloModule foo:\nENTRY %configuration_test() -> s32[] {\n"
                     "  %constant = s32[] constant(42)\n}\n")
    assert m.name == "foo" and m.entry.root.literal == "42"


def test_stack_frames_block_is_kept_verbatim():
    m = parse_file(str(DATA / "stack_frames.hlo"))
    assert m.stack_frames.startswith("FileNames\n1 \"/src/model.py\"")
    assert m.stack_frames.rstrip().endswith("2 {file_location_id=2 parent_frame_id=1}")
    assert "stack_frame_id=2" in m.entry.root.metadata
    assert m.stack_frames in print_module(m)


def test_execution_thread_and_async_ops():
    m = parse_file(str(DATA / "threads.hlo"))
    wrapped = m.get_computation("async_wrapped")
    assert wrapped.execution_thread == "parallel_thread"
    start = m.entry.get("start")
    assert start.attrs["calls"] is wrapped and start.attrs["async_execution_thread"] == "parallel_thread"
    assert m.entry.root.operands == [start]
    assert '}, execution_thread="parallel_thread"' in print_module(m)


def test_names_with_and_without_percent_keep_their_style():
    bare = parse_file(str(DATA / "nested.hlo"))
    assert not bare.percent_names and "\n  p0 = f32[10] parameter(0)" in print_module(bare)
    pct = parse_file(str(DATA / "basics.hlo"))
    assert pct.percent_names and "\n  %Arg_1.2 = s32[] parameter(1)" in print_module(pct)
    # a module may mix both; references resolve either way
    m = parse_module("ENTRY e {\n  %a = f32[] parameter(0)\n  ROOT b = f32[] negate(a)\n}\n")
    assert m.entry.root.operands == [m.entry.get("a")]


# -- instructions, operands -----------------------------------------------------------------------

def test_operands_users_and_inline_operand_shapes():
    m = parse_file(str(DATA / "basics.hlo"))
    e = m.entry
    rmax = e.get("rmax")
    assert rmax.operands == [e.get("Arg_0.1"), e.get("constant.3")]
    assert rmax in e.get("Arg_0.1").users and rmax in e.get("constant.3").users
    t5 = e.get("t5")
    assert len(t5.operands) == 6 and t5.shape.is_tuple and len(t5.shape.tuple_shapes) == 6
    assert e.get("gte").attrs["index"] == 5
    assert e.get("cmp").attrs["direction"] == "GT"


def test_nested_anonymous_instructions_become_instructions():
    m = parse_file(str(DATA / "nested.hlo"))
    e = m.entry
    names = [i.name for i in e.instructions]
    assert names.index("negate.anon") < names.index("multiply.anon") < names.index("r")
    r = e.get("r")
    assert [o.name for o in r.operands] == ["p0", "multiply.anon"]
    assert e.get("multiply.anon").operands == [e.get("p1"), e.get("negate.anon")]
    assert e.get("broadcast.anon").operands[0].literal == "2"
    # omitted shape inferred for an elementwise op
    assert e.get("v").shape == parse_shape("f32[10]")


def test_inline_computation_body():
    m = parse_file(str(DATA / "inline.hlo"))
    reducer = m.entry.root.attrs["to_apply"]
    assert isinstance(reducer, Computation) and reducer in m.computations
    assert [i.opcode for i in reducer.instructions] == ["parameter", "parameter", "add"]
    assert m.computations.index(reducer) < m.computations.index(m.entry)


def test_ignore_comment_codes_are_kept():
    m = parse_file(str(DATA / "nested.hlo"))
    assert m.entry.get("m").ignore_codes == ("HS101", "HS2")
    assert m.entry.get("r").ignore_codes == ()
    assert "m = f32[10] multiply(p1, p2) /* hloshard: ignore[HS101,HS2] */" in print_module(m)


def test_other_comments_are_dropped_and_crlf_is_accepted():
    text = "HloModule m\r\n// line comment\r\nENTRY e {\r\n  a = /*x*/f32[1]{0} constant({12345 /*bar*/})\r\n}\r\n"
    m = parse_module(text)
    assert m.entry.root.literal == "{12345 /*bar*/}"
    assert m.entry.root.line == 4


def test_constants_keep_their_literal_text():
    e = parse_file(str(DATA / "basics.hlo")).entry
    assert e.get("nan").literal == "{nan, 7, -nan, inf, -inf}"
    assert e.get("bf").literal == "{-nan(0x7f), -nan(0x3f)}"
    assert e.get("cplx").literal == "{(1, 2), (-inf, nan)}"
    assert e.get("tup").literal == "( {1, 2}, 3 )" and e.get("tup").shape.is_tuple
    assert e.get("big.u64").literal == "18446744073709551615"
    assert e.get("empty").shape.dims == (0,)


def test_positions_are_one_based():
    m = parse_file(str(DATA / "basics.hlo"))
    gte = m.entry.get("gte")
    lines = (DATA / "basics.hlo").read_text().splitlines()
    assert lines[gte.line - 1].lstrip().startswith("%gte =")
    assert gte.column == 3


# -- attributes ------------------------------------------------------------------------------------

def test_replica_groups_in_all_three_forms_are_expanded():
    e = parse_file(str(DATA / "collectives.hlo")).entry
    assert e.get("ag").replica_groups == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert e.get("agv").replica_groups == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert e.get("ar").replica_groups == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert e.get("arv").replica_groups == []
    # device_ids=(0,2,1,3,4,6,5,7), vary axis 'a' (size 2)
    assert e.get("arm").replica_groups == [[0, 4], [2, 6], [1, 5], [3, 7]]
    # sub-axis: the minor half of 'y'
    assert e.get("ars").replica_groups == [[0, 1], [2, 3], [4, 5], [6, 7]]
    # [2,4]<=[4,2]T(1,0)
    assert e.get("rs").replica_groups == [[0, 2, 4, 6], [1, 3, 5, 7]]
    rg = e.get("rs").attrs["replica_groups"]
    assert isinstance(rg, ReplicaGroups) and rg.form == "iota" and str(rg) == "[2,4]<=[4,2]T(1,0)"
    assert str(e.get("ar").attrs["replica_groups"]).startswith("mesh['axis_0'=2")
    assert e.get("rs").channel_id == 6 and e.get("rs").attrs["use_global_device_ids"] is True


def test_mesh_replica_groups_with_iota_device_ids():
    m = parse_module("HloModule m\ns {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n"
                     "  ROOT a = f32[] add(x, y)\n}\nENTRY e {\n  p = f32[8] parameter(0)\n"
                     "  ROOT r = f32[8] all-reduce(p), channel_id=1, "
                     "replica_groups=mesh['a'=2,'b'=4], device_ids=([4,2]T(1,0)) {'b'}, "
                     "use_global_device_ids=true, to_apply=s\n}\n")
    # device array: arange(8).reshape(4,2).T = [[0,2,4,6],[1,3,5,7]] seen as a 2x4 mesh
    assert m.entry.root.replica_groups == [[0, 2, 4, 6], [1, 3, 5, 7]]


def test_variadic_collectives_and_async_pairs():
    e = parse_file(str(DATA / "collectives.hlo")).entry
    assert e.get("agv").shape.is_tuple and len(e.get("agv").operands) == 2
    assert e.get("rsv").dimensions == [0]
    assert e.get("a2at").shape.is_tuple and "dimensions" not in e.get("a2at").attrs
    assert e.get("cp").attrs["source_target_pairs"] == ((0, 1), (1, 2), (2, 3), (3, 0))
    assert e.get("agd").operands == [e.get("ags")]
    assert e.get("as").attrs["calls"].name == "wrapped_add"
    assert e.get("ad").operands == [e.get("au")]


def test_convolution_window_dim_labels_padding_slice():
    e = parse_file(str(DATA / "convolution.hlo")).entry
    conv = e.get("conv")
    win = conv.attrs["window"]
    assert isinstance(win, Window) and [d.size for d in win.dims] == [3, 3]
    assert [d.stride for d in win.dims] == [2, 2] and [(d.padding_low, d.padding_high) for d in win.dims] == [(0, 1), (0, 1)]
    assert str(win) == "{size=3x3 stride=2x2 pad=0_1x0_1}"
    assert str(e.get("conv2").attrs["window"]) == "{size=3x3 rhs_reversal=0x1}"
    assert conv.attrs["dim_labels"] == "b01f_01io->b01f"
    pad = e.get("pad").attrs["padding"]
    assert isinstance(pad, PaddingConfig) and pad.dims == ((0, 0, 0), (1, 1, 0), (0, 1, 0), (0, 0, 0))
    assert str(pad) == "0_0x1_1x0_1x0_0"
    assert e.get("negpad").attrs["padding"].dims[1] == (-1, -1, 0)
    sl = e.get("slice").attrs["slice"]
    assert isinstance(sl, SliceSpec) and sl.strides == (2, 2, 1, 1) and sl.limits == (16, 32, 32, 64)
    assert str(sl) == "{[0:16:2], [0:32:2], [0:32:1], [0:64:1]}"
    assert str(e.get("slice2").attrs["slice"]) == "{[0:16], [0:32], [0:32], [32:64]}"


def test_dot_gather_scatter_dimension_numbers():
    e = parse_file(str(DATA / "convolution.hlo")).entry
    bdot = e.get("bdot")
    assert bdot.attrs["lhs_batch_dims"] == (0, 1) and bdot.attrs["rhs_contracting_dims"] == (2,)
    assert bdot.attrs["operand_precision"] == "{highest,highest}"
    g = e.get("gather")
    assert g.attrs["offset_dims"] == (1, 2) and g.attrs["slice_sizes"] == (1, 1, 32, 64)
    assert g.attrs["indices_are_sorted"] is True and g.attrs["index_vector_dim"] == 1
    sc = e.get("scatter")
    assert sc.attrs["to_apply"].name == "add" and sc.attrs["unique_indices"] is True


def test_control_flow_and_called_computations():
    m = parse_file(str(DATA / "convolution.hlo"))
    e = m.entry
    w = e.get("while")
    assert [c.name for c in w.called_computations] == ["cond", "body"]
    assert w.attrs["backend_config"] == '{"known_trip_count":{"n":"10"}}'
    assert [c.name for c in e.get("cond2").called_computations] == ["br0", "br1"]
    assert [c.name for c in e.get("cond1").called_computations] == ["br0", "br1"]
    assert e.get("sas").attrs["select"].name == "ge"
    assert e.get("fusion").attrs["kind"] == "kLoop"
    assert e.get("fusion").attrs["calls"] is m.get_computation("fused_computation")


def test_custom_call_attributes_and_strings():
    e = parse_file(str(DATA / "convolution.hlo")).entry
    cc = e.get("cc")
    assert cc.attrs["custom_call_target"] == "Sharding"
    assert cc.attrs["backend_config"] == 'opaque "text"'
    cc2 = e.get("cc2")
    assert [str(s) for s in cc2.attrs["operand_layout_constraints"]] == ["f32[4]{0}", "s32[]"]
    assert cc2.attrs["frontend_attributes"] == {
        "_xla_x": "1", "xla.sdy.sharding": '#sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>'}
    assert cc2.attrs["custom_call_has_side_effect"] is True
    assert e.get("cc3").attrs["literal"] == "f32[2]{0} {1, 2}"
    text = print_module(parse_file(str(DATA / "convolution.hlo")))
    assert 'backend_config="opaque \\"text\\""' in text
    assert 'frontend_attributes={_xla_x="1",xla.sdy.sharding="#sdy.sharding_per_value<[<@mesh, [{\\"x\\"}, {}]>]>"}' in text


def test_control_predecessors_resolve_and_order_post_order():
    e = parse_file(str(DATA / "convolution.hlo")).entry
    copy = e.get("copy")
    assert copy.control_predecessors == [e.get("cc"), e.get("cc3")]
    order = e.post_order()
    assert len(order) == len(e.instructions)
    pos = {id(i): k for k, i in enumerate(order)}
    for instr in order:
        for p in list(instr.operands) + instr.control_predecessors:
            assert pos[id(p)] < pos[id(instr)]
    assert copy.attrs["statistics"] == "{visualizing_index=1,stat-1=33,stat-2=44}"


def test_shardings_are_typed():
    from hloshard.hlo.sharding import HloSharding

    e = parse_file(str(DATA / "basics.hlo")).entry
    s = e.get("Arg_0.1").sharding
    assert isinstance(s, HloSharding) and s.is_tiled and s.tile_dims == (2, 4)
    assert e.get("Arg_1.2").sharding.is_replicated
    root = e.root.sharding
    assert root.is_tuple and len(root.tuple_elements) == 2
    c = parse_file(str(DATA / "collectives.hlo")).entry
    assert c.get("b").sharding.subgroup_types == ("manual", "replicated")
    conv = parse_file(str(DATA / "convolution.hlo")).entry
    assert conv.get("idx").sharding.is_maximal and conv.get("idx").sharding.maximal_device == 0


def test_shapes_layouts_and_element_types():
    e = parse_file(str(DATA / "convolution.hlo")).entry
    dyn = e.get("dyn").shape
    assert dyn.dynamic == (True, True) and str(dyn) == "f32[<=16,?]{1,0}"
    tiled = e.get("tiled").shape
    assert tiled.layout.minor_to_major == (1, 0) and tiled.layout.attrs == "T(8,128)(2,1)S(1)"
    assert tiled.layout.memory_space == 1
    assert str(e.get("scal").shape) == "u32[]{:T(128)}"
    assert e.get("s4v").shape.byte_size == (4 * 123 * 456 + 7) // 8
    f8 = e.get("f8").shape
    assert [s.element_type for s in f8.tuple_shapes] == ["f8e4m3fn", "f8e5m2", "f4e2m1fn", "u4", "s2"]
    assert f8.byte_size == 2 + 2 + 1 + 1 + 1


# -- IR editing ------------------------------------------------------------------------------------

def test_ir_edits_keep_users_in_sync_and_print():
    m = parse_module("HloModule m\nENTRY e {\n  a = f32[4] parameter(0)\n  b = f32[4] negate(a)\n"
                     "  ROOT c = f32[4] add(b, b)\n}\n")
    e = m.entry
    a, b, c = e.get("a"), e.get("b"), e.get("c")
    new = e.add_instruction(Instruction("b", "abs", a.shape, [a]), before=c)
    assert new.name == "b.1" and new in a.users
    e.replace_all_uses(b, new)
    assert c.operands == [new, new] and b.users == []
    e.remove_instruction(b)
    assert "b" not in e and b not in a.users
    from hloshard.hlo.sharding import HloSharding

    c.sharding = HloSharding.parse("{devices=[4]<=[4]}")
    text = print_module(m)
    assert "b.1 = f32[4] abs(a)" in text
    assert "ROOT c = f32[4] add(b.1, b.1), sharding={devices=[4]<=[4]}" in text
    assert print_module(parse_module(text)) == text


def test_shape_parser():
    s = parse_shape("(f32[2,3]{1,0}, (s32[], /*index=1*/pred[4]), token[], ())")
    assert isinstance(s, Shape) and s.is_tuple
    assert [str(x) for x in s.leaves()] == ["f32[2,3]{1,0}", "s32[]", "pred[4]", "token[]"]
    assert s.byte_size == 24 + 4 + 4
    assert str(parse_shape("f32[ 1, 2]{0, 1 }")) == "f32[1,2]{0,1}"
    assert str(parse_shape("b(f32[8]{0})")) == "b(f32[8]{0})"
    assert parse_shape("f32[8]{0}") != parse_shape("f32[8]")
    assert parse_shape("f32[8]{0}").compatible(parse_shape("f32[8]"))
    assert parse_shape("bf16[3,5]").with_dims((15,)) == parse_shape("bf16[15]")
    six = parse_shape("(f32[], f32[], f32[], f32[], f32[], f32[])")
    assert str(six) == "(f32[], f32[], f32[], f32[], f32[], /*index=5*/f32[])"


# -- literals ---------------------------------------------------------------------------------------

def test_literal_values_decode_to_numpy():
    import numpy as np

    e = parse_file(str(DATA / "basics.hlo")).entry
    v = e.get("nan").literal_value()
    assert v.dtype == np.float32 and np.isnan(v[0]) and v[1] == 7 and np.isnan(v[2]) and v[3] == np.inf and v[4] == -np.inf
    assert e.get("cplx").literal_value().tolist()[0] == 1 + 2j
    assert e.get("preds").literal_value().tolist() == [[False, True], [True, False]]
    assert e.get("empty").literal_value().shape == (0,)
    assert int(e.get("big.u64").literal_value()) == 2**64 - 1
    assert float(e.get("exp").literal_value()) == 300.0
    a, b = e.get("tup").literal_value()
    assert a.tolist() == [1.0, 2.0] and int(b) == 3
    big = e.get("big").literal_value()
    assert big.shape == (3, 2, 2, 1) and big[2, 1, 1, 0] == 12
    assert e.get("Arg_0.1").literal_value() is None


@pytest.mark.parametrize("shape,text,message", [
    ("s32[3]", "{1, 2}", "expected 3 elements"),
    ("s32[2,2]", "{1, 2, 3, 4}", "nested array"),
    ("s32[]", "1.5", "expected an integer"),
    ("s4[]", "8", "out of range"),
    ("u8[]", "-1", "out of range"),
    ("c64[]", "1", "(re, im)"),
    ("pred[]", "1.5", "pred literal"),   # XLA takes any integer for pred (2 parses), not a float
    ("f32[2]", "{1, 2} 3", "after the literal"),
    ("(f32[], s32[])", "( 1 )", "expected ','"),
])
def test_bad_literals_are_reported(shape, text, message):
    from hloshard.hlo.literal import LiteralError, parse_literal

    with pytest.raises(LiteralError) as info:
        parse_literal(text, parse_shape(shape))
    assert message in str(info.value)


def test_elided_large_constant_reads_as_zeros():
    m = parse_module("HloModule m\nENTRY e {\n  ROOT c = f32[67,89] constant({...})\n}\n")
    v = m.entry.root.literal_value()
    assert v.shape == (67, 89) and not v.any()
    assert "constant({...})" in print_module(m)


def test_comments_anywhere_between_tokens():
    m = parse_file(str(DATA / "comments.hlo"))
    e = m.entry
    assert m.num_partitions == 2
    p = e.get("p")
    assert list(p.attrs) == ["sharding", "metadata"] and p.ignore_codes == ("HS1",)
    assert e.get("q").attrs["frontend_attributes"] == {"k": "v"}
    assert e.root.operands == [p, e.get("q")]


def test_metadata_fields_decode_on_request():
    from hloshard.hlo.attributes import AttrError, parse_metadata

    e = parse_file(str(DATA / "convolution.hlo")).entry
    conv = e.get("conv")
    assert conv.op_name == "jit(f)/conv" and e.get("x").op_name is None
    meta = parse_metadata(conv.metadata)
    assert meta == {"op_type": "conv_general_dilated", "op_name": "jit(f)/conv", "source_file": "m.py",
                    "source_line": 12}
    assert parse_metadata('{source_line=5, op_type="::const", op_name="\\"it\\\'s\\n" profile_type={1}}') == {
        "source_line": 5, "op_type": "::const", "op_name": "\"it's\n", "profile_type": (1,)}
    with pytest.raises(AttrError):
        parse_metadata("{op_name=}")


def test_opcode_coverage_file():
    from hloshard.hlo.opcodes import async_wrapped_opcode, is_known_opcode

    m = parse_file(str(DATA / "opcodes.hlo"))
    e = m.entry
    ops = {i.opcode for i in e.instructions}
    assert {"custom-call-start", "custom-call-done", "copy-start", "copy-done", "send", "recv-done", "domain",
            "topk", "batch-norm-training", "fft", "triangular-solve", "opt-barrier", "set-dimension-size"} <= ops
    assert async_wrapped_opcode("custom-call-start") == "custom-call" and async_wrapped_opcode("all-gather-start") is None
    assert is_known_opcode("add-done") and not is_known_opcode("frobnicate-start")
    assert e.get("ccd").operands == [e.get("ccs")]
    assert e.get("topk").attrs["k"] == 2 and e.get("topk").attrs["largest"] is True
    assert e.get("exp").attrs["result_accuracy"] == "{mode=highest}"
    assert e.get("sds").shape.dynamic == (True, False)
    # the nested tuple operand of opt-barrier became its own instruction
    assert e.get("ob").operands[0].opcode == "tuple" and e.get("ob").operands[0].name == "tuple.anon"


def test_named_mesh_sharding_prints_back_unchanged():
    text = ("HloModule m\n\nENTRY e {\n  ROOT p = f32[8,8] parameter(0), "
            "sharding={mesh[x=2,y=4], [{x}, {y, ?}], replicated={}, metadata={op_name=\"a\"}}\n}\n")
    m = parse_module(text)
    assert m.entry.root.sharding.kind == "named"
    assert print_module(m) == text


def test_brace_block_end_skips_strings_and_reports_unbalanced_text():
    from hloshard.hlo.attributes import brace_block_end, is_balanced_blob

    text = 'x{a{b}"}\\""}y'          # '}' and an escaped quote inside the string do not count
    assert brace_block_end(text, 1) == len(text) - 1
    assert is_balanced_blob('{"a":"}"}') and not is_balanced_blob("{a}{b}")
    with pytest.raises(ValueError, match="unterminated string"):
        brace_block_end('{"x}', 0)
    with pytest.raises(ValueError, match="unbalanced"):
        brace_block_end("{{}", 0)
