"""The shared replica-group check (hloshard.hlo.replica_groups) and its two users: lint HS304 and combine."""

from __future__ import annotations

import pytest

from hloshard.combine import collective_problems, replica_id_bound
from hloshard.hlo.attributes import ReplicaGroups
from hloshard.hlo.parser import parse_module
from hloshard.hlo.replica_groups import GroupProblem, check_groups, group_mode, id_bound, replica_group_problems
from hloshard.lint.context import LintOptions
from hloshard.lint.engine import lint_text

_MODULE = """HloModule m, HEADER
sum {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  a = f32[4] parameter(0)
  ROOT ar = f32[4] all-reduce(a), ATTRSreplica_groups=GROUPS, to_apply=sum
}
"""


def _text(groups: str, attrs: str = "", header: str = "num_partitions=4") -> str:
    return _MODULE.replace("HEADER", header).replace("ATTRS", attrs).replace("GROUPS", groups)


def _hs304(text: str) -> list:
    return [(f.key.split("|")[-1], f.message) for f in lint_text(text, "x.hlo", LintOptions(select=("HS304",)))]


def test_check_groups_structured_problems():
    assert check_groups([[3, 1], [1, 9, 2], []], 4) == [
        GroupProblem("empty", (2,), 1), GroupProblem("sizes", (2, 3), 2), GroupProblem("dups", (1,), 1),
        GroupProblem("range", (9,), 1, largest=9)]
    assert check_groups([], 4) == [] and check_groups(None, 4) == []
    assert check_groups([[-1, 0]], None) == [GroupProblem("range", (-1,), 1, largest=0)]
    # ids are listed up to `limit`, the count is exact
    [p] = check_groups([list(range(20))], 4, limit=3)
    assert (p.kind, p.items, p.count, p.largest) == ("range", (4, 5, 6), 16, 19)


def test_check_groups_iota_is_judged_from_its_numbers():
    # 10^12 ids: O(1), nothing expanded
    [p] = check_groups(None, 8, iota_shape=(10**6, 10**6), limit=4)
    assert (p.kind, p.items, p.count, p.largest) == ("range", (8, 9, 10, 11), 10**12 - 8, 10**12 - 1)
    assert check_groups([[0, 0]], 8, iota_shape=(2, 4)) == []          # groups ignored for the iota form
    assert check_groups(None, 8, iota_shape=(0, 4)) == [GroupProblem("empty", (), 0, "no groups")]
    assert check_groups(None, 8, iota_shape=(4, 0)) == [GroupProblem("empty", (), 0, "group size 0")]


def test_mode_and_bound_follow_xla():
    assert group_mode(False, False, "all-to-all") == "cross_replica"
    assert group_mode(True, False, "all-reduce") == "cross_replica_and_partition"
    assert group_mode(True, False, "all-to-all") == "cross_partition"
    assert group_mode(True, True, "all-gather") == "flattened_id"
    assert id_bound("cross_replica", 1, 8) is None        # XLA does not check replica ids with one replica
    assert id_bound("cross_replica", 2, 8) == 2
    assert id_bound("cross_partition", 2, 8) == 8
    assert id_bound("flattened_id", 2, 8) == 16 and id_bound("flattened_id", 2, None) is None
    with pytest.raises(ValueError, match="unknown collective group mode"):
        id_bound("cross_device", 1, 8)


def test_sentences_are_combines_wording():
    rg = ReplicaGroups.iota(2, 4, [2, 4], [1, 0])
    assert replica_group_problems(rg, 7) == ["replica groups [2,4]<=[2,4]T(1,0) name ids up to 7, outside [0, 7)"]
    assert replica_group_problems([[0, 1, 2, 3, 4, 5]], 2, limit=2) == [
        "replica group ids 2, 3 (and 2 more) outside [0, 2)"]


@pytest.mark.parametrize("groups, attrs, header, lint_key, combine_msg", [
    # one replica, no channel_id: XLA and lint check nothing; combine prices ids as the 4 mesh devices
    ("{{0},{5}}", "", "num_partitions=4", None, "replica group id 5 outside [0, 4)"),
    ("{{0,1},{2,3}}", "", "num_partitions=4", None, None),
    # replica ids with replica_count 2: both refuse id 2
    ("{{0,2}}", "", "num_partitions=4, replica_count=2", "range", "replica group id 2 outside [0, 2)"),
    # flattened ids: 2 x 4
    ("{{0,1,2},{3}}", "channel_id=1, use_global_device_ids=true, ", "num_partitions=4, replica_count=2",
     "sizes", "replica groups have different sizes [1, 3]; all groups must be equally large"),
    ("{{0,1},{1,8}}", "channel_id=1, use_global_device_ids=true, ", "num_partitions=4, replica_count=2",
     "dups", "id 1 appears more than once in the replica groups"),
    ("[3,4]<=[12]", "channel_id=1, use_global_device_ids=true, ", "num_partitions=4, replica_count=2",
     "range", "replica groups [3,4]<=[12] name ids up to 11, outside [0, 8)"),
    ("[0,4]<=[0]", "channel_id=1, use_global_device_ids=true, ", "num_partitions=4", "empty",
     "replica groups [0,4]<=[0] are empty (no groups)"),
])
def test_lint_and_combine_agree_except_for_one_replica(groups, attrs, header, lint_key, combine_msg):
    text = _text(groups, attrs, header)
    found = _hs304(text)
    assert [k for k, _ in found][:1] == ([lint_key] if lint_key else [])
    root = parse_module(text).entry.root
    problems = collective_problems(root)
    assert problems[:1] == ([f"all-reduce: {combine_msg}"] if combine_msg else [])


def test_lint_iota_wording():
    found = _hs304(_text("[4,0]<=[0]", "channel_id=1, use_global_device_ids=true, "))
    assert found == [("empty", "%ar (all-reduce): replica groups [4,0]<=[0] are all empty")]
    found = _hs304(_text("[0,4]<=[0]", "channel_id=1, use_global_device_ids=true, "))
    assert found == [("empty", "%ar (all-reduce): replica groups [0,4]<=[0] name no group")]
    found = _hs304(_text("{{0,1,2,3,4,5,6,7,8,9,10,11,12,13}}", "channel_id=1, use_global_device_ids=true, "))
    assert found == [("range", "%ar (all-reduce): replica group ids 4, 5, 6, 7, 8, 9, 10, 11, ... (10 in all) "
                               "outside [0, 4) (flattened device ids: flattened-id mode)")]


def test_combine_bound_is_stricter_only_for_one_replica():
    one = parse_module(_text("{{0}}")).entry.root
    assert replica_id_bound(one) == 4                                   # XLA / lint: unchecked (None)
    two = parse_module(_text("{{0}}", header="num_partitions=4, replica_count=2")).entry.root
    assert replica_id_bound(two) == 2
