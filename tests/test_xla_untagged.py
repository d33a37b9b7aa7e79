"""XLA collectives that carry no instruction's tag (new user 31, F11: "unmatched XLA collective: all-gather
f32[4,8,8,256] in region_19.38_spmd" printed beside totals that agreed to the byte -- the loop's own all-gather,
which hloshard prices on the ``while`` and XLA makes, untagged, in the body it renamed).
:func:`hloshard.xla_compare.place_untagged` gives such a collective to the instruction of its computation that
predicts one of its kind, group size and bytes; ``cost --xla`` says how many were placed and lists the rest, alike
ones together (:func:`hloshard.commands.cost.untagged_lines`)."""

from __future__ import annotations

from hloshard.commands.cost import untagged_lines
from hloshard.hlo.parser import parse_module
from hloshard.xla_compare import UNTAGGED, CollectiveRecord, Comparison, InstructionComparison, place_untagged

TEXT = """HloModule loop, num_partitions=8

cond {
  cp = (s32[], f32[8,256]{1,0}) parameter(0)
  ci = s32[] get-tuple-element(cp), index=0
  c4 = s32[] constant(4)
  ROOT lt = pred[] compare(ci, c4), direction=LT
}

body {
  p = (s32[], f32[8,256]{1,0}) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  acc = f32[8,256]{1,0} get-tuple-element(p), index=1
  a = f32[8,256]{1,0} add(acc, acc)
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT t = (s32[], f32[8,256]{1,0}) tuple(i1, a)
}

ENTRY main {
  x = f32[8,256]{1,0} parameter(0)
  r = f32[8,256]{1,0} negate(x)
  c0 = s32[] constant(0)
  init = (s32[], f32[8,256]{1,0}) tuple(c0, r)
  w = (s32[], f32[8,256]{1,0}) while(init), condition=cond, body=body
  ROOT o = f32[8,256]{1,0} get-tuple-element(w), index=1
}
"""


def _rec(kind, n, ring, executions, computation=None, source="xla"):
    return CollectiveRecord(kind=kind, group_size=n, nbytes=ring, ring_bytes=ring, executions=executions,
                            source=source, shape="f32[8,256]", computation=computation)


def _schedule():
    m = parse_module(TEXT)
    return [i for c in m.computations for i in c.instructions]


def test_a_loops_untagged_collective_goes_to_its_while_in_a_body_xla_renamed():
    predicted = {"w": [_rec("all-gather", 4, 6144.0, 4.0, source="reshard init"),
                       _rec("all-gather", 2, 4096.0, 1.0, source="reshard init")],
                 "a": [_rec("all-reduce", 4, 1024.0, 4.0, source="strategy")],
                 "r": [_rec("all-gather", 4, 384.0, 1.0, source="reshard x")]}
    # tagged: the while's entry-side gather and the body's all-reduce (which names XLA's body region_7.9_spmd)
    matched = {"w": [_rec("all-gather", 2, 4096.0, 1.0, "main_spmd")],
               "a": [_rec("all-reduce", 4, 1024.0, 4.0, "region_7.9_spmd")]}
    loop = _rec("all-gather", 4, 6144.0, 4.0, "region_7.9_spmd")
    entry = _rec("all-gather", 4, 384.0, 1.0, "main_spmd")
    again = _rec("all-gather", 4, 384.0, 1.0, "main_spmd")      # a second alike: r predicts one only
    other = _rec("all-to-all", 4, 512.0, 1.0, "main_spmd")       # nothing predicts it
    rest = place_untagged(matched, [loop, entry, again, other], predicted, _schedule())
    assert rest == [again, other]
    assert [(r.kind, r.total_bytes, r.source) for r in matched["w"]] == [
        ("all-gather", 4096.0, "xla"), ("all-gather", 24576.0, UNTAGGED)]
    assert [(r.total_bytes, r.source) for r in matched["r"]] == [(384.0, UNTAGGED)]
    assert [r.source for r in matched["a"]] == ["xla"]


def test_an_untagged_collective_in_an_unknown_computation_stays_unmatched():
    predicted = {"w": [_rec("all-gather", 4, 6144.0, 4.0, source="reshard init")]}
    lost = _rec("all-gather", 4, 6144.0, 4.0, "region_99.1_spmd")   # no tagged collective says what it is
    matched: dict = {}
    assert place_untagged(matched, [lost], predicted, _schedule()) == [lost] and matched == {}


def test_cost_xla_says_what_was_placed_and_lists_the_rest_together():
    placed = InstructionComparison("w", "while", 1.0, [_rec("all-gather", 4, 6144.0, 4.0, source="reshard init")],
                                   [_rec("all-gather", 4, 6144.0, 4.0, "region_7.9_spmd", UNTAGGED)])
    c = Comparison("loop", 8, [placed], unmatched=[_rec("all-gather", 4, 384.0, 1.0, "main_spmd")] * 2)
    lines = untagged_lines(c)
    assert lines[0].startswith("1 XLA collective carried no instruction's tag (XLA made it without one) and was "
                               "matched to the instruction of its computation that predicts one of that kind")
    assert lines[1] == ("2 x XLA all-gather f32[8,256] in main_spmd (384 B each, in XLA's total above): no "
                        "instruction predicts them and they carry no instruction's tag")
    assert len(lines) == 2 and c.xla_bytes == 6144.0 * 4 + 2 * 384.0
