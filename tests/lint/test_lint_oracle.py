"""The lint cases against real XLA (jaxlib, in a child process).

Every passing case is HLO that XLA's parser accepts; HS001's failing case is rejected by it. The errors
lint reports statically for HS101 (device count), HS102 (malformed tile assignment), HS103 (duplicate
device), HS104 (device out of range), HS105 (tile rank), HS106 (tuple arity), HS107 (maximal device out
of range) and HS307 (repeated collective-permute source) pass XLA's *parser* -- which is the point of
linting -- and are rejected only when XLA compiles the module for its partitions (some fixed versions
are compiled too). HS305 and HS401 are checked against XLA below as well.
"""

from __future__ import annotations

import pathlib
import re

import pytest

from tests.conftest import require_jax

CASES = pathlib.Path(__file__).parent / "cases"
COMPILE_CHECKED = ["hs101", "hs102", "hs103", "hs104", "hs105", "hs106", "hs107", "hs307"]
COMPILE_GOOD = {"hs101", "hs103", "hs106"}


@pytest.mark.oracle
def test_good_cases_parse_in_xla_and_the_syntax_error_case_does_not():
    require_jax()
    from tests import xla_oracle

    good = sorted(CASES.glob("*_good*.hlo"))
    # the sharding errors below are not syntax errors for XLA
    semantic = [CASES / f"{name}_bad.hlo" for name in COMPILE_CHECKED]
    bad = CASES / "hs001_bad.hlo"
    results = xla_oracle.parse_many([p.read_text() for p in good + semantic + [bad]])
    for path, (ok, msg) in zip(good + semantic, results):
        assert ok, (path.name, msg)
    assert results[-1][0] is False


@pytest.mark.oracle
@pytest.mark.parametrize("name", COMPILE_CHECKED)
def test_xla_does_not_compile_what_lint_reports(name):
    require_jax()
    from tests import xla_oracle

    bad = (CASES / f"{name}_bad.hlo").read_text()
    good = (CASES / f"{name}_good.hlo").read_text()
    n = int(re.search(r"num_partitions=(\d+)", good).group(1))
    bad_ok, bad_msg = xla_oracle.compile_spmd(bad, num_partitions=n)
    assert not bad_ok, bad_msg
    if name in COMPILE_GOOD:  # (every good case parses in XLA, see above; compiling all is slow)
        good_ok, good_msg = xla_oracle.compile_spmd(good, num_partitions=n)
        assert good_ok, good_msg


REDUCE_BF16_WITH_F32 = """HloModule m, num_partitions=2
sum {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  b = bf16[8] parameter(0), sharding={replicated}
  ROOT ar = bf16[8] all-reduce(b), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=sum
}
"""


@pytest.mark.oracle
def test_reduction_type_mismatch_is_what_xla_rejects():
    require_jax()
    from hloshard.lint.context import LintOptions
    from hloshard.lint.engine import lint_text
    from tests import xla_oracle

    fixed = REDUCE_BF16_WITH_F32.replace("f32", "bf16")
    assert [f.code for f in lint_text(REDUCE_BF16_WITH_F32, "x.hlo", LintOptions())] == ["HS305"]
    assert lint_text(fixed, "x.hlo", LintOptions()) == []
    bad_ok, bad_msg = xla_oracle.compile_spmd(REDUCE_BF16_WITH_F32, num_partitions=2)
    assert not bad_ok and "incompatible" in bad_msg
    good_ok, good_msg = xla_oracle.compile_spmd(fixed, num_partitions=2)
    assert good_ok, good_msg


SEED_SMALL = """HloModule m, num_partitions=8
ENTRY e {
  p = f16[32,16,10,8] parameter(0), sharding={devices=[2,4,1,1]<=[8]}
  ROOT r = f16[512,10,8] reshape(p), sharding={devices=[2,1,1,4]<=[8] last_tile_dim_replicate}
}
"""


@pytest.mark.oracle
def test_costly_resharding_names_the_collective_xla_inserts():
    """The seed reshape at a small size: lint (threshold 0) reports an all-gather of dim 1 in groups
    of 4, and XLA's SPMD partitioner inserts exactly that all-gather."""
    require_jax()
    from hloshard.lint.context import LintOptions
    from hloshard.lint.engine import lint_text
    from tests import xla_oracle

    [finding] = lint_text(SEED_SMALL, "x.hlo", LintOptions(select=("HS401",), reshard_threshold=0))
    assert "via all-gather dim 1 in groups of 4:" in finding.message
    [ag] = xla_oracle.collectives(xla_oracle.spmd_partition(SEED_SMALL, 8))
    assert ag["kind"] == "all-gather" and ag["dimensions"] == [1]
    assert {len(g) for g in ag["replica_groups"]} == {4}


CRP_ALL_GATHER = """HloModule m, num_partitions=4
ENTRY e {
  a = f32[2] parameter(0), sharding={replicated}
  ROOT ag = f32[8] all-gather(a), channel_id=1, replica_groups={{0}}, dimensions={0}, sharding={replicated}
}
"""


@pytest.mark.oracle
def test_cross_replica_and_partition_group_size_agrees_with_xla():
    """channel_id without use_global_device_ids: a replica group {0} spans all 4 partitions, so the
    all-gather multiplies by 4 -- lint and XLA's verifier agree on both the right and a wrong shape."""
    require_jax()
    from hloshard.lint.context import LintOptions
    from hloshard.lint.engine import lint_text
    from tests import xla_oracle

    wrong = CRP_ALL_GATHER.replace("f32[8] all-gather", "f32[2] all-gather")
    assert lint_text(CRP_ALL_GATHER, "x.hlo", LintOptions(select=("HS3",))) == []
    assert [f.code for f in lint_text(wrong, "x.hlo", LintOptions(select=("HS3",)))] == ["HS303"]
    assert xla_oracle.compile_spmd(CRP_ALL_GATHER, num_partitions=4)[0]
    ok, msg = xla_oracle.compile_spmd(wrong, num_partitions=4)
    assert not ok and "subgroup_size" in msg
