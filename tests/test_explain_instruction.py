"""``hloshard explain``: figures as ``hloshard cost`` prices them, exact neighbourhood re-solves
(checked by enumeration), --why-not, errors, and XLA's collectives beside ours."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from click.testing import CliRunner

from hloshard.autoshard import evaluate_module
from hloshard.cli import main
from hloshard.explain_instruction import explain_instruction
from hloshard.hlo import parse_module
from hloshard.mesh import DeviceMesh
from tests.conftest import ROOT, require_jax

SAMPLES = ROOT / "samples"
MESH = DeviceMesh.parse("2x4")


def run(args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.mark.parametrize("sample,names", [
    ("transformer_block.propagated.hlo", ["reshape.4", "dot_general.10", "x.1"]),
    ("mlp_train_step.propagated.hlo", ["dot_general.6", "add.15"]),
])
def test_module_cost_and_instruction_row_are_hloshard_costs(sample, names):
    """explain's module total and the instruction's own cost are what `hloshard cost` reports."""
    cost = json.loads(run(["cost", SAMPLES / sample, "--mesh", "2x4", "--format", "json"]).stdout)
    rows = {r["name"]: r for r in cost["instructions"]}
    for name in names:
        r = run(["explain", SAMPLES / sample, "--instruction", name, "--mesh", "2x4", "--format", "json",
                 "--alternatives", "2"])
        assert r.exit_code == 0, r.output
        d = json.loads(r.stdout)
        assert d["module_cost"]["total"] == pytest.approx(cost["total_cost"], rel=1e-9)
        n = d["nodes"][0]
        assert n["compute"] + n["communication"] + n["resharding_in"] == pytest.approx(rows[name]["cost"], rel=1e-6,
                                                                                       abs=1e-6)
        assert d["sharding"] == rows[name]["sharding"] or d["sharding_used"] == rows[name]["sharding"]
        assert len(d["alternatives"]) <= 2


CHAIN = """HloModule chain
ENTRY e {
  a = f32[64,64] parameter(0), sharding={devices=[4,1]<=[4]}
  b = f32[64,64] parameter(1), sharding={devices=[1,4]<=[4]}
  t = f32[64,64] transpose(a), dimensions={1,0}, sharding={devices=[1,4]<=[4]}
  s = f32[64,64] add(t, b), sharding={devices=[1,4]<=[4]}
  d = f32[64,64] dot(s, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={devices=[4,1]<=[4]}
  ROOT n = f32[64,64] negate(d), sharding={devices=[4,1]<=[4]}
}
"""


@pytest.mark.parametrize("limit", [0, 4096])
def test_neighbourhood_resolve_is_the_enumerated_optimum(monkeypatch, limit):
    """The neighbourhood re-solve (t, s, d built without annotations, the rest as given) is, for each
    sharding of s, the best of all strategy combinations of the re-built groups (brute force over
    Site.value), both through CP-SAT (limit 0) and the exact elimination (local.eliminate)."""
    from hloshard.autoshard import local
    from hloshard.explain_local import Pricing

    monkeypatch.setattr(local, "ENUMERATE_LIMIT", limit)   # the local re-solve lives in autoshard.local
    mesh = DeviceMesh.parse("4")
    module = parse_module(CHAIN)
    given = evaluate_module(module, mesh)
    pricing = Pricing(given.graph, given.choice)
    free = [module.entry.get(n) for n in ("t", "s", "d")]
    site = pricing.site(free + [module.entry.get("n")], free=free)
    sizes = [len(g.strategies) for g in site.groups]
    assert np.prod(sizes) <= 200000 and len(site.pairs) >= 2
    k_s = site.instrs.index(module.entry.get("s"))
    outs = sorted({str(st.out) for st in site.groups[k_s].strategies})
    checked = 0
    for out in outs:
        mask = np.array([str(st.out) == out for st in site.groups[k_s].strategies])
        got = site.solve({k_s: mask}, given.graph.cost_scale)
        best = None
        for combo in itertools.product(*[range(n) for n in sizes]):
            if not mask[combo[k_s]]:
                continue
            tot = sum(site.value(combo).values())
            if np.isfinite(tot):
                best = tot if best is None else min(best, tot)
        if best is None:
            assert got is None
            continue
        assert got is not None and mask[got[k_s]]
        # integer rounding of the CP-SAT model (cost_scale) is the only allowed difference
        assert sum(site.value(got).values()) == pytest.approx(best, rel=1e-6, abs=given.graph.cost_scale * 10)
        checked += 1
    assert checked >= 3


def test_why_not_matches_the_alternatives_list_and_refuses_bad_shardings():
    sample = SAMPLES / "mlp_train_step.propagated.hlo"
    d = json.loads(run(["explain", sample, "--instruction", "dot_general.6", "--mesh", "2x4", "--format", "json",
                        "--alternatives", "3"]).stdout)
    alt = d["alternatives"][0]
    w = json.loads(run(["explain", sample, "--instruction", "dot_general.6", "--mesh", "2x4", "--format", "json",
                        "--alternatives", "0", "--why-not", alt["sharding"]]).stdout)["why_not"]
    assert w["possible"] and w["total_change"] == pytest.approx(alt["total_change"])
    same = json.loads(run(["explain", sample, "--instruction", "dot_general.6", "--mesh", "2x4", "--format", "json",
                           "--alternatives", "0", "--why-not", d["sharding"]]).stdout)["why_not"]
    assert same["total_change"] == 0.0 and "already" in same["reason"]
    r = run(["explain", sample, "--instruction", "dot_general.6", "--mesh", "2x4", "--why-not", "{devices=[2,2,2]<=[8]}"])
    assert r.exit_code == 2 and "rank" in r.stderr
    r = run(["explain", sample, "--instruction", "dot_general.6", "--mesh", "2x4", "--why-not", "{devices=[2"])
    assert r.exit_code == 2 and "Traceback" not in r.output
    # every alternative is reported with its total change, best first
    changes = [a["total_change"] for a in d["alternatives"]]
    assert changes == sorted(changes)


def test_unknown_instruction_suggests_close_names_and_fusion_members_are_refused(tmp_path):
    r = run(["explain", SAMPLES / "mlp_train_step.propagated.hlo", "--instruction", "dot_general.66", "--mesh", "2x4"])
    assert r.exit_code == 2 and "did you mean" in r.stderr and "dot_general.6" in r.stderr
    fused = tmp_path / "f.hlo"
    fused.write_text("""HloModule f
fc {
  p = f32[8] parameter(0)
  ROOT n = f32[8] negate(p)
}
ENTRY e {
  a = f32[8] parameter(0)
  ROOT f = f32[8] fusion(a), kind=kLoop, calls=fc
}
""")
    r = run(["explain", fused, "--instruction", "n", "--mesh", "8"])
    assert r.exit_code == 2 and "explain f instead" in r.stderr, r.output


def test_text_report_names_source_location_and_sections(tmp_path):
    src = tmp_path / "m.hlo"
    src.write_text(CHAIN.replace("dot(s, b), lhs_contracting_dims={1}, rhs_contracting_dims={0},",
                                 'dot(s, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, '
                                 'metadata={op_name="jit(f)/dot_general" source_file="model.py" source_line=12},'))
    r = run(["explain", src, "--instruction", "d", "--mesh", "4"])
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert f"{src}:7:3" in out and "model.py:12" in out and "jit(f)/dot_general" in out
    assert "best alternatives" in out and "operand shardings it needs" in out


@pytest.mark.oracle
def test_xla_collectives_beside_ours(tmp_path):
    """A dot whose contracting dim is split over all 8 devices with a replicated output needs one
    all-reduce over all 8 devices (partial sums): XLA's partitioner inserts it for this instruction."""
    require_jax()
    src = tmp_path / "m.hlo"
    src.write_text("""HloModule m, num_partitions=8
ENTRY e {
  a = f32[16,64] parameter(0), sharding={devices=[1,8]<=[8]}
  b = f32[64,32] parameter(1), sharding={devices=[8,1]<=[8]}
  ROOT d = f32[16,32] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={replicated}
}
""")
    r = run(["explain", src, "--instruction", "d", "--mesh", "8", "--xla", "--format", "json", "--alternatives", "0"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    x = d["xla"]
    assert x["xla_kinds"] == ["all-reduce"], x
    assert sorted(x["collectives"][0]["replica_groups"][0]) == list(range(8))
    assert d["nodes"][0]["communication"] > 0      # hloshard also charges communication for it


def test_verify_prices_each_alternative_as_cost_prices_the_rewritten_module(tmp_path):
    """--verify: the module rewritten with an alternative's shardings (written to a file, re-read by
    `hloshard cost`) costs the module as given plus verified_change."""
    from hloshard.explain_instruction import rewritten_module
    from hloshard.hlo import print_module

    sample = SAMPLES / "mlp_train_step.propagated.hlo"
    d = json.loads(run(["explain", sample, "--instruction", "add.15", "--mesh", "2x4", "--format", "json",
                        "--alternatives", "2", "--verify"]).stdout)
    given = d["module_cost"]["total"]
    assert len(d["alternatives"]) == 2
    for k, alt in enumerate(d["alternatives"]):
        out = tmp_path / f"alt{k}.hlo"
        out.write_text(print_module(rewritten_module(parse_module(sample.read_text()), "add.15", alt)))
        cost = json.loads(run(["cost", out, "--mesh", "2x4", "--format", "json"]).stdout)
        assert cost["total_cost"] - given == pytest.approx(alt["verified_change"], rel=1e-9, abs=1e-6)
        rows = {r["name"]: r for r in cost["instructions"]}
        assert rows["add.15"]["sharding"] == alt["sharding"]


def test_source_without_file_shows_op_name_alone_in_text_and_html(tmp_path):
    """Metadata with an op_name but no source_file: the source row is the op_name, never ': jit(...)'."""
    src = tmp_path / "m.hlo"
    src.write_text(CHAIN.replace("dot(s, b), lhs_contracting_dims={1}, rhs_contracting_dims={0},",
                                 'dot(s, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, '
                                 'metadata={op_name="jit(f)/dot_general"},'))
    html = tmp_path / "r.html"
    r = run(["explain", src, "--instruction", "d", "--mesh", "4", "--alternatives", "0", "--html", html])
    assert r.exit_code == 0, r.output
    assert "source  jit(f)/dot_general" in r.stdout and ": jit(f)" not in r.stdout
    page = html.read_text()
    assert "<td>jit(f)/dot_general</td>" in page and ": jit(f)" not in page and ":None" not in page


def test_device_counts_are_singular_for_one_device(tmp_path):
    """`--mesh 1` against an 8-partition module: '1 device', not '1 devices' (cost, explain, solve)."""
    for cmd in (["cost"], ["explain", "--instruction", "dot_general.6"]):
        r = run([cmd[0], SAMPLES / "mlp_train_step.propagated.hlo", *cmd[1:], "--mesh", "1"])
        assert r.exit_code == 2 and "has 1 device but" in r.stderr and "1 devices" not in r.stderr, r.stderr


def test_combine_says_when_there_is_nothing_to_combine():
    r = run(["combine", SAMPLES / "mlp_train_step.propagated.hlo", "--report-only"])
    assert r.exit_code == 0, r.output
    assert "nothing to combine: it has no all-gather, reduce-scatter or all-reduce collective" in r.stdout


@pytest.mark.oracle
def test_xla_collectives_of_an_instruction_inside_a_call(tmp_path):
    """The dot inside a called computation gets its all-reduce: hloshard inlines the call first, as
    XLA's CallInliner does (hlo.inline), and explain --xla matches XLA's collective to the inlined dot
    through xla_compare (the one matcher).
    Hand derivation: contracting dim 64 split over 8 devices, replicated f32[16,32] output = 2048 bytes,
    all-reduce over 8 devices: ring bytes 2 * 7/8 * 2048 = 3584 per device."""
    require_jax()
    src = tmp_path / "m.hlo"
    src.write_text("""HloModule m, num_partitions=8

inner {
  x = f32[16,64] parameter(0), sharding={devices=[1,8]<=[8]}
  y = f32[64,32] parameter(1), sharding={devices=[8,1]<=[8]}
  ROOT d = f32[16,32] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={replicated}
}

ENTRY e {
  a = f32[16,64] parameter(0), sharding={devices=[1,8]<=[8]}
  b = f32[64,32] parameter(1), sharding={devices=[8,1]<=[8]}
  ROOT c = f32[16,32] call(a, b), to_apply=inner, sharding={replicated}
}
""")
    r = run(["explain", src, "--instruction", "d", "--mesh", "8", "--xla", "--format", "json", "--alternatives", "0"])
    assert r.exit_code == 0, r.output
    x = json.loads(r.stdout)["xla"]
    assert x["xla_kinds"] == ["all-reduce"] and x["agrees"], x
    assert x["xla_ring_bytes"] == 3584.0 and x["predicted_ring_bytes"] == 3584.0


def test_sub_axes_in_words():
    """A refined mesh's sub-axes are named as parts of the user's axes, and consecutive sub-axes that
    make up a contiguous part of one user axis are one (new user 14: 'axis 1:(2)2' in explain)."""
    from hloshard.explain_instruction import axes_words, describe_spec
    from hloshard.mesh import DeviceMesh

    unnamed = DeviceMesh((2, 8)).refine((2, 2, 2, 2))
    assert axes_words(unnamed, (1,)) == "axis 1 (its major 2 of 8; 1:(1)2)"
    assert axes_words(unnamed, (2,)) == "axis 1 (2 of 8, after the major 2; 1:(2)2)"
    assert axes_words(unnamed, (3,)) == "axis 1 (its minor 2 of 8; 1:(4)2)"
    assert axes_words(unnamed, (1, 2, 3)) == "axis 1"                       # all of axis 1, merged
    assert axes_words(unnamed, (0, 2, 3)) == "axis 0+axis 1 (its minor 4 of 8; 1:(2)4)"
    assert axes_words(unnamed, (3, 1)) == ("axis 1 (its minor 2 of 8; 1:(4)2)+"   # not contiguous in
                                           "axis 1 (its major 2 of 8; 1:(1)2)")   # this order: not merged
    named = DeviceMesh((2, 4), axis_names=("data", "model")).refine((2, 2, 2))
    assert describe_spec(((0,), (), (1, 2)), named) == "dim 0 over data, dim 2 over model"
    assert describe_spec(((2,), (1,)), named) == ("rows over model (its minor 2 of 4; model:(2)2), "
                                                  "columns over model (its major 2 of 4; model:(1)2)")
