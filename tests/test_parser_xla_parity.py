"""The parser against XLA's (jaxlib 0.10.2 ``hlo_module_from_text``), case by case.

Each kind of input that XLA's own parser tests expect it to reject comes with a nearby module XLA
accepts. The test asks XLA for its verdict every run (one child process for all cases) and requires
hloshard to agree: the same verdict, and for a rejection the same line and column (XLA's
``was parsing L:C``). The verdict is XLA's, never written here.
"""

from __future__ import annotations

import re

import pytest

from hloshard.errors import HloSyntaxError
from hloshard.hlo import parse_module
from hloshard.lint.context import LintOptions
from hloshard.lint.engine import lint_text
from tests.conftest import require_jax


def _entry(body: str, header: str = "HloModule m", pre: str = "") -> str:
    return f"{header}\n{pre}ENTRY e {{\n{body}\n}}\n"


def _const(shape: str, value: str) -> str:
    return _entry(f"  ROOT c = {shape} constant({value})")


CASES: dict[str, str] = {}
# literal ranges, per type (reject, then the nearest value XLA takes)
for _name, _shape, _value in [
    ("f16_-65520", "f16[]", "-65520"), ("f16_-65504", "f16[]", "-65504"), ("f16_65519", "f16[]", "65519"),
    ("f16_array", "f16[2]", "{1, 70000}"),
    ("bf16_1e100", "bf16[]", "1e100"), ("bf16_1e38", "bf16[]", "1e38"),
    ("s4_8", "s4[]", "8"), ("s4_7", "s4[]", "7"), ("s4_-9", "s4[]", "-9"), ("s4_-8", "s4[]", "-8"),
    ("u4_16", "u4[]", "16"), ("u4_15", "u4[]", "15"), ("u4_-1", "u4[]", "-1"), ("u4_array", "u4[3]", "{1, 2, 16}"),
    ("u32_2^32", "u32[]", "4294967296"), ("u32_max", "u32[]", "4294967295"), ("u32_-1", "u32[]", "-1"),
    ("s32_2^31", "s32[]", "2147483648"), ("s32_min", "s32[]", "-2147483648"),
    ("s64_2^63", "s64[]", "9223372036854775808"), ("s64_below_lexer", "s64[]", "-9223372036854775809"),
    ("u64_max", "u64[]", "18446744073709551615"), ("u64_-1", "u64[]", "-1"),
    ("c64_real", "c64[]", "(1e40, 0)"), ("c64_imag", "c64[]", "(0, 1e40)"), ("c64_ok", "c64[]", "(1, 2)"),
    ("f64_1e309", "f64[]", "1e309"), ("f64_1e308", "f64[]", "1e308"), ("c128_1e309", "c128[]", "(1e309, 0)"),
    ("f32_1e39", "f32[]", "1e39"), ("f32_3e38", "f32[]", "3e38"), ("f32_array", "f32[2,2]", "{{1, 2}, {3, 1e39}}"),
    ("f32_huge_int", "f32[]", "340282356779733661637539395458142568448"),
    ("f8e4m3fn_464", "f8e4m3fn[]", "464"), ("f8e4m3fn_465", "f8e4m3fn[]", "465"),
    ("f8e5m2_1e6", "f8e5m2[]", "1e6"), ("f4e2m1fn_7", "f4e2m1fn[]", "7"),
    ("s32_float", "s32[]", "1.5"), ("pred_2", "pred[]", "2"), ("pred_float", "pred[]", "1.5"),
    # NaN payloads
    ("bf16_nan_0x1ff", "bf16[]", "nan(0x1ff)"), ("bf16_nan_0x7f", "bf16[]", "nan(0x7f)"),
    ("bf16_nan_0x0", "bf16[]", "nan(0x0)"), ("f16_nan_0x400", "f16[]", "nan(0x400)"),
    ("f32_nan_0x800000", "f32[]", "nan(0x800000)"), ("f32_nan_0x7fffff", "f32[]", "nan(0x7fffff)"),
    ("f8e4m3fn_nan_0x1", "f8e4m3fn[]", "nan(0x1)"), ("f8e4m3fn_nan", "f8e4m3fn[]", "nan"),
    ("f8e4m3b11fnuz_nan_0x1", "f8e4m3b11fnuz[]", "nan(0x1)"), ("f8e4m3b11fnuz_nan", "f8e4m3b11fnuz[]", "nan"),
    ("f8e5m2_nan_0x4", "f8e5m2[]", "-nan(0x4)"), ("f8e5m2_nan_0x3", "f8e5m2[]", "nan(0x3)"),
]:
    CASES["literal_" + _name] = _const(_shape, _value)

_P = "  a = f32[2] parameter(0)\n  ROOT r = f32[2] negate(a)"
for _name, _hdr in [
    ("ioa_ok", "input_output_alias={ {}: (0, {}, may-alias) }"),
    ("ioa_trailing_comma", "input_output_alias={ {}: (0, {}), }"),
    ("ioa_kind", "input_output_alias={ {}: (0, {}, maybe-alias) }"),
    ("ioa_no_parens", "input_output_alias={ {}: 0 }"),
    ("ioa_no_index", "input_output_alias={ {}: (0) }"),
    ("ioa_no_colon", "input_output_alias={ {} (0, {}) }"),
    ("donor_ok", "buffer_donor={ (0, {}) }"),
    ("donor_no_index", "buffer_donor={ (0) }"),
    ("donor_no_parens", "buffer_donor={ 0, {} }"),
    ("donor_extra", "buffer_donor={ (0, {}, x) }"),
]:
    CASES["header_" + _name] = _entry(_P, "HloModule m, " + _hdr)

_CC = '  a = f32[2] parameter(0)\n  ROOT r = f32[2] custom-call(a), custom_call_target="foo"'
for _v in ("API_VERSION_STATUS_RETURNING", "API_VERSION_TYPED_FFI", "API_VERSION_UNSPECIFIED", "API_VERSION_FOO", "1"):
    CASES["api_version_" + _v] = _entry(_CC + ", api_version=" + _v)

CASES["infeed_array"] = _entry("  t = token[] after-all()\n  ROOT i = f32[3] infeed(t)")
CASES["infeed_tuple"] = _entry("  t = token[] after-all()\n  ROOT i = (f32[3], token[]) infeed(t)")
_LC = ('  a = f32[2,3] parameter(0)\n  b = f32[3] parameter(1)\n  ROOT r = f32[2]{0} custom-call(a, b), '
       'custom_call_target="foo", operand_layout_constraints=')
CASES["layout_constraints_ok"] = _entry(_LC + "{f32[2,3]{1,0}, f32[3]{0}}")
CASES["layout_constraints_count"] = _entry(_LC + "{f32[2,3]{1,0}}")
CASES["layout_constraints_dims"] = _entry(_LC + "{f32[3,2]{1,0}, f32[3]{0}}")
CASES["layout_constraints_type"] = _entry(_LC + "{s32[2,3]{1,0}, f32[3]{0}}")

_BR = ("b0 {\n  p = f32[] parameter(0)\n  ROOT n = f32[] negate(p)\n}\n"
       "b1 {\n  p = f32[] parameter(0)\n  ROOT n = f32[] abs(p)\n}\n")
for _t in ("s32[]", "f32[]", "pred[2]", "s64[]", "u32[]"):
    CASES["conditional_" + _t] = _entry(f"  i = {_t} parameter(0)\n  x = f32[] parameter(1)\n"
                                        "  ROOT c = f32[] conditional(i, x, x), branch_computations={b0, b1}", pre=_BR)
CASES["conditional_pred_true_false"] = _entry("  i = pred[] parameter(0)\n  x = f32[] parameter(1)\n  ROOT c = f32[] "
                                              "conditional(i, x, x), true_computation=b0, false_computation=b1", pre=_BR)

_A = "  a = f32[2] parameter(0)\n  ROOT r = f32[2] "
for _name, _instr, _pre in [
    ("branch_computations_on_add", "add(a, a), branch_computations={b0}", _BR),
    ("unknown_name", "add(a, a), foo=bar", ""),
    ("result_accuracy_on_exp", "exponential(a), result_accuracy={mode=highest}", ""),
    ("result_accuracy_on_add", "add(a, a), result_accuracy={mode=highest}", ""),
    ("dimensions_on_add", "add(a, a), dimensions={0}", ""),
    ("channel_id_on_negate", "negate(a), channel_id=1", ""),
    ("common_attributes", 'negate(a), metadata={op_name="x"}, frontend_attributes={a="b"}, backend_config=""', ""),
]:
    CASES["attribute_" + _name] = _entry(_A + _instr, pre=_pre)

for _layout in ("{0:D(C)}", "{0:D(Z)}", "{0:T(128)}", "{0:X(1)}", "{0:I(32)}", "{0:P(s32[])}", "{0:D(C)P(s32[])}",
                "{0:S(1)}", "{0:E(4)}", "{0:*}", "{0:#(u8)}"):
    CASES["layout_" + _layout] = _entry(f"  ROOT a = f32[10]{_layout} parameter(0)")

_W = "wrapped {\n  p = f32[4] parameter(0)\n  ROOT n = f32[4] negate(p)\n}\n"
_S = "  a = f32[4] parameter(0)\n"
CASES["async_ok"] = _entry(_S + "  s = ((f32[4]), f32[4], u32[]) async-start(a), calls=wrapped\n"
                           "  ROOT d = f32[4] async-done(s)", pre=_W)
CASES["async_start_array_shape"] = _entry(_S + "  s = f32[4] async-start(a), calls=wrapped\n"
                                          "  ROOT d = f32[4] async-done(s)", pre=_W)
CASES["async_sugar_ok"] = _entry(_S + "  s = ((f32[4]), f32[4], u32[]) negate-start(a)\n  ROOT d = f32[4] negate-done(s)")
CASES["async_sugar_other_opcode"] = _entry(_S + "  s = ((f32[4]), f32[4], u32[]) negate-start(a)\n"
                                           "  ROOT d = f32[4] abs-done(s)")
CASES["async_two_starts_one_computation"] = _entry(
    _S + "  s = ((f32[4]), f32[4], u32[]) async-start(a), calls=wrapped\n  d = f32[4] async-done(s)\n"
    "  s2 = ((f32[4]), f32[4], u32[]) async-start(a), calls=wrapped\n  d2 = f32[4] async-done(s2)\n"
    "  ROOT t = (f32[4], f32[4]) tuple(d, d2)", pre=_W)
for _op in ("atan", "atan2", "collective-reduce", "shuffle", "tan"):   # opcode names XLA does / does not know
    CASES["opcode_" + _op] = _entry(f"  a = f32[2] parameter(0)\n  ROOT r = f32[2] {_op}(a{', a' if _op == 'atan2' else ''})")
_WT = _W.replace("}\n", '}, execution_thread="foo"\n', 1)
for _name, _start, _done in [("thread_ok", ', async_execution_thread="foo"', ', async_execution_thread="foo"'),
                             ("thread_differs", ', async_execution_thread="foo"', ', async_execution_thread="bar"'),
                             ("start_thread_only", ', async_execution_thread="bar"', ""),
                             ("done_calls_other", "", ", calls=w2")]:
    CASES["async_" + _name] = _entry(_S + f"  s = ((f32[4]), f32[4], u32[]) async-start(a), calls=wrapped{_start}\n"
                                     f"  ROOT d = f32[4] async-done(s){_done}",
                                     pre=_WT + "w2 {\n  p = f32[4] parameter(0)\n  ROOT n = f32[4] abs(p)\n}\n")
CASES["async_done_of_non_async"] = _entry(_S + "  ROOT d = f32[4] async-done(a)")


def _ours(text: str):
    try:
        parse_module(text, "t.hlo")
    except HloSyntaxError as exc:
        return exc
    return None


@pytest.mark.oracle
def test_parser_agrees_with_xla_on_every_case():
    require_jax()
    from tests import xla_oracle

    names = list(CASES)
    results = xla_oracle.parse_many([CASES[n] for n in names])
    rejected = 0
    for name, (ok, msg) in zip(names, results):
        ours = _ours(CASES[name])
        if ok:
            assert ours is None, (name, str(ours))
            continue
        rejected += 1
        assert ours is not None, (name, "XLA rejects it: " + msg[:300])
        where = re.search(r"was parsing (\d+):(\d+)", msg)
        assert where, (name, msg[:300])
        assert (ours.line, ours.column) == (int(where.group(1)), int(where.group(2))), (name, str(ours), msg[:300])
        # lint reports the parser's error, at the same place (one source of truth)
        hs001 = [(f.line, f.column, f.message) for f in lint_text(CASES[name], "t.hlo", LintOptions(select=("HS001",)))]
        assert hs001 == [(ours.line, ours.column, ours.message)], (name, hs001)
    # the suite is only meaningful with both kinds of case
    assert 30 <= rejected <= len(names) - 20


def test_literal_and_attribute_errors_use_xlas_words():
    e = _ours(CASES["literal_f16_-65520"])
    assert e.message == "value -65520 is out of range for literal's primitive type F16 namely [-65504, 65504]."
    e = _ours(CASES["attribute_unknown_name"])
    assert e.message.startswith('unexpected attribute "foo". Allowed attributes: backend_config, ')
    e = _ours(CASES["api_version_API_VERSION_UNSPECIFIED"])
    assert e.message.startswith("Invalid API version: API_VERSION_UNSPECIFIED")
