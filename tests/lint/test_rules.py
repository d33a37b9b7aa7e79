"""Every rule: one failing and one passing HLO file (tests/lint/cases), its docstring examples, its
metadata. Bad files declare their findings in ``// expect: CODE LINE:COL`` header comments."""

from __future__ import annotations

import json
import pathlib
import re

import pytest

from hloshard.lint.context import LintOptions
from hloshard.lint.engine import lint_text
from hloshard.lint.registry import all_rules
from hloshard.lint.reporters import render_sarif

CASES = pathlib.Path(__file__).parent / "cases"
BAD = sorted(CASES.glob("hs*_bad*.hlo"))
GOOD = sorted(CASES.glob("hs*_good*.hlo"))
_EXPECT = re.compile(r"^// expect: (HS\d{3}) (\d+):(\d+)\s*$", re.M)
GROUP_OF_HUNDREDS = {"0": "syntax", "1": "validity", "2": "divisibility", "3": "collectives", "4": "cost",
                     "5": "consistency"}


def _code(path: pathlib.Path) -> str:
    return path.name[:5].upper()


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.name)
def test_bad_case_reports_exactly_the_expected_findings(path):
    text = path.read_text()
    expected = [(c, int(line), int(col)) for c, line, col in _EXPECT.findall(text)]
    assert expected, f"{path.name} declares no // expect: lines"
    assert all(c == _code(path) for c, _, _ in expected)
    findings = lint_text(text, str(path), LintOptions(select=(_code(path),)))
    assert [(f.code, f.line, f.column) for f in findings] == expected
    for f in findings:
        assert f.message and f.severity == all_rules_by_code()[f.code].severity


@pytest.mark.parametrize("path", GOOD, ids=lambda p: p.name)
def test_good_case_is_clean_under_every_rule(path):
    findings = lint_text(path.read_text(), str(path), LintOptions())
    assert [(f.code, f.line, f.column, f.message) for f in findings] == []


def all_rules_by_code():
    return {r.code: r for r in all_rules()}


def test_every_rule_has_a_bad_and_a_good_case():
    codes = {r.code for r in all_rules()}
    assert codes == {_code(p) for p in BAD}
    assert codes == {_code(p) for p in GOOD}


def _example(doc: str, label: str) -> str:
    m = re.search(r"\*\*%s\*\*::\n\n((?:    .*\n|\n)+)" % label, doc + "\n")
    assert m, f"no **{label}** example"
    return "\n".join(line[4:] for line in m.group(1).splitlines()) + "\n"


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_docstring_examples_bad_triggers_and_good_is_clean(rule):
    doc = rule.explanation()
    bad = lint_text(_example(doc, "Bad"), "bad.hlo", LintOptions())
    assert rule.code in [f.code for f in bad]
    good = lint_text(_example(doc, "Good"), "good.hlo", LintOptions())
    assert [(f.code, f.message) for f in good] == []


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_rule_metadata(rule):
    assert re.fullmatch(r"HS\d{3}", rule.code)
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", rule.name)
    assert rule.severity in ("error", "warning", "info")
    assert rule.groups == (GROUP_OF_HUNDREDS[rule.code[2]],)
    assert rule.summary().endswith(".")
    module = rule.__module__.rsplit(".", 1)[1]
    assert module == f"{rule.code.lower()}_{rule.name.replace('-', '_')}"


def test_issue_defaults_severities():
    sev = {r.code[:3]: r.severity for r in all_rules() if not r.code.startswith("HS0")}
    assert sev == {"HS1": "error", "HS2": "warning", "HS3": "error", "HS4": "warning", "HS5": "info"}


def test_seed_reshape_reports_the_hidden_all_gather():
    text = (CASES / "hs401_bad.hlo").read_text()
    [f] = [f for f in lint_text(text, "x.hlo", LintOptions(select=("HS401",))) if f.line == 7]
    assert "all-gather dim 1 in groups of 4" in f.message
    assert "93.8 MiB per device" in f.message


def test_reshard_threshold_is_respected():
    text = (CASES / "hs401_bad.hlo").read_text()
    above = lint_text(text, "x.hlo", LintOptions(select=("HS401",), reshard_threshold=100 * 2**20))
    assert [f.line for f in above] == [8]  # 93.8 MiB edge now under the threshold, 218.8 MiB is not
    assert lint_text(text, "x.hlo", LintOptions(select=("HS401",), reshard_threshold=2**30)) == []


def test_cost_rule_alternative_for_elementwise():
    text = (CASES / "hs401_bad.hlo").read_text()
    [f] = [f for f in lint_text(text, "x.hlo", LintOptions(select=("HS401",))) if f.line == 8]
    assert "annotate %s with {devices=[2,4,1,1]<=[8]}" in f.message


def test_cost_rule_with_a_2d_mesh():
    text = (CASES / "hs401_bad.hlo").read_text()
    findings = lint_text(text, "x.hlo", LintOptions(select=("HS401",), mesh="2x4"))
    reshape = [f for f in findings if f.line == 7]
    assert reshape and "mesh axis 1" in reshape[0].message


def test_divisibility_names_devices_of_empty_shards():
    text = "HloModule m, num_partitions=8\nENTRY e {\n  ROOT p = f32[3] parameter(0), sharding={devices=[4,2]<=[8] last_tile_dim_replicate}\n}\n"
    [f] = lint_text(text, "x.hlo", LintOptions(select=("HS2",)))
    assert f.code == "HS201" and "shard 3 (devices 6,7)" in f.message


def test_uneven_padding_per_shard():
    text = "HloModule m, num_partitions=4\nENTRY e {\n  ROOT p = f32[7,8] parameter(0), sharding={devices=[4,1]<=[4]}\n}\n"
    [f] = lint_text(text, "x.hlo", LintOptions(select=("HS2",)))
    assert f.code == "HS202"
    assert "held: 2,2,2,1" in f.message and "shard 3 pads 1" in f.message


def test_uneven_intermediate_is_info_and_what_crosses_the_boundary_a_warning():
    # a caller gets %c back (a root tuple operand) and passes %p in: jax.jit refuses an uneven
    # in/out sharding there; %b lives only inside the program, where the partitioner pads it
    text = """HloModule m, num_partitions=4
ENTRY e {
  p = f32[10] parameter(0), sharding={devices=[4]<=[4]}
  b = f32[10] negate(p), sharding={devices=[4]<=[4]}
  c = f32[10] exponential(b), sharding={devices=[4]<=[4]}
  ROOT t = (f32[10]) tuple(c)
}
"""
    got = {f.instruction: f.severity for f in lint_text(text, "x.hlo", LintOptions(select=("HS202",)))}
    assert got == {"p": "warning", "b": "info", "c": "warning"}
    log = json.loads(render_sarif(lint_text(text, "x.hlo", LintOptions(select=("HS202",))), all_rules()))
    assert [r["level"] for r in log["runs"][0]["results"]] == ["warning", "note", "warning"]


def test_no_divisibility_finding_on_a_per_device_program():
    # XLA's partitioned output keeps the parameters' global shardings on per-device shapes: f32[2,32]
    # is one device's rows of f32[16,32] (new user 16: false HS201 on jax's compiled step)
    body = """HloModule m, num_partitions=8
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  p = f32[2,32] parameter(0), sharding={devices=[8,1]<=[8]}
  r = f32[32] reduce(p, f32[] constant(0)), dimensions={0}, to_apply=add
  ROOT a = f32[32] %s
}
"""
    per_device = body % "all-reduce(r), replica_groups={{0,1,2,3,4,5,6,7}}, to_apply=add"
    assert lint_text(per_device, "x.hlo", LintOptions(select=("HS2",))) == []
    logical = body % "negate(r)"   # no collective: a logical module, its split of 2 rows 8 ways is empty shards
    assert [f.code for f in lint_text(logical, "x.hlo", LintOptions(select=("HS2",)))] == ["HS201"]


def test_costly_resharding_behind_a_sharding_custom_call():
    # with_sharding_constraint lowers to a Sharding custom-call: its all-gather went unreported (new user 16)
    text = """HloModule m, num_partitions=8
ENTRY e {
  p = f32[8192,8192] parameter(0), sharding={devices=[8,1]<=[8]}
  c = f32[8192,8192] custom-call(p), custom_call_target="Sharding", sharding={replicated}
  k = f32[8192,8192] custom-call(p), custom_call_target="Sharding", sharding={devices=[8,1]<=[8]}
  t = f32[8192,8192] custom-call(p), custom_call_target="SomethingElse", sharding={replicated}
  ROOT n = (f32[8192,8192], f32[8192,8192], f32[8192,8192]) tuple(c, k, t)
}
"""
    [f] = lint_text(text, "x.hlo", LintOptions(select=("HS401",)))
    assert f.instruction == "c" and "all-gather" in f.message and "224.0 MiB" in f.message


def test_variadic_reduce_scatter_must_divide():
    text = """HloModule m, num_partitions=4
sum {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  a = f32[8] parameter(0)
  b = f32[6] parameter(1)
  ROOT rs = (f32[2], f32[1]) reduce-scatter(a, b), channel_id=1, replica_groups={{0,1,2,3}}, use_global_device_ids=true, dimensions={0}, to_apply=sum
}
"""
    [f] = lint_text(text, "x.hlo", LintOptions(select=("HS303",)))
    assert (f.line, f.column) == (10, 8)  # ROOT instructions are located at their name
    assert "operand 1" in f.message and "not divisible by the group size 4" in f.message


def test_cross_replica_and_partition_group_size_multiplies_by_partitions():
    # channel_id without use_global_device_ids: groups of replica ids, every partition takes part
    text = """HloModule m, num_partitions=4
ENTRY e {
  a = f32[2] parameter(0)
  ROOT ag = f32[8] all-gather(a), channel_id=1, replica_groups={{0}}, dimensions={0}
}
"""
    assert lint_text(text, "x.hlo", LintOptions(select=("HS3",))) == []
    wrong = text.replace("f32[8] all-gather", "f32[2] all-gather")
    [f] = lint_text(wrong, "x.hlo", LintOptions(select=("HS3",)))
    assert f.code == "HS303" and "expected 8" in f.message


def test_broadcast_edge_needs_the_result_sharding_without_broadcast_dims():
    text = """HloModule m, num_partitions=8
ENTRY e {
  p = f32[64,32] parameter(0), sharding={devices=[8,1]<=[8]}
  ok = f32[64,16,32] broadcast(p), dimensions={0,2}, sharding={devices=[8,1,1]<=[8]}
  ROOT b = f32[64,16,32] broadcast(p), dimensions={0,2}, sharding={devices=[1,1,8]<=[8]}
}
"""
    findings = lint_text(text, "x.hlo", LintOptions(select=("HS401",), reshard_threshold=0))
    assert [(f.line, f.column) for f in findings] == [(5, 8)]
    msg = findings[0].message
    assert "needs operand 0 %p f32[64,32] as {devices=[1,8]<=[8]}" in msg
    assert "all-to-all" in msg
    assert "annotate %b with {devices=[8,1,1]<=[8]}" in msg


def test_seed_reshape_suggests_a_cheaper_annotation():
    text = (CASES / "hs401_bad.hlo").read_text()
    [f] = [f for f in lint_text(text, "x.hlo", LintOptions(select=("HS401",))) if f.line == 7]
    assert "cheaper: annotating %r with {devices=[8,1,1]<=[8]} needs only 23.4 MiB per device" in f.message
    [f2] = [f for f in lint_text(text, "x.hlo", LintOptions(select=("HS401",), mesh="2x4")) if f.line == 7]
    assert "cheaper: annotating %r with {devices=[2,1,4]<=[8]} needs only 23.4 MiB per device" in f2.message
