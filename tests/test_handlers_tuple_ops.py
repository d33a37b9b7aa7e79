"""tuple, get-tuple-element and opt-barrier (``strategy/tuple_ops.py``) against XLA's SPMD partitioner
(GSPMD, raw after-spmd-partitioning HLO, 8 devices): they have no collective of their own; where a user
needs another layout than the element's, the resharding is attributed where XLA puts it (kind, replica
groups or source-target pairs, ring bytes, per instruction).

XLA reads the HLO text through StableHLO, which has no get-tuple-element: tuple / get-tuple-element
pairs fold away, a tuple parameter becomes one argument per leaf, a variadic sort's results are separate
values.  A get-tuple-element's (or an inner tuple's) written sharding therefore never reaches the
partitioner: the element's user reshards the producer's layout itself, under the user's ``op_name``.
The entry's root tuple is the output (``func.return``) and carries no ``op_name`` on XLA's side:
collectives with none are compared with hloshard's for the root ``out``.
"""

from __future__ import annotations

import functools

import pytest

from tests.handler_harness import chain_module, module_results

pytestmark = pytest.mark.oracle

T = "{devices=[2,4]<=[8]}"
R = "{replicated}"
V = "{devices=[2,4]<=[8] last_tile_dim_replicate}"        # a vector over data
ROWS = "{devices=[8,1]<=[8]}"
D0 = "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"      # dim 0 over data
PAIR = "(f32[64,32], f32[64])"
LT2 = ("lt2 {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  c = s32[] parameter(2)\n"
       "  d = s32[] parameter(3)\n  ROOT s = pred[] compare(a, b), direction=LT\n}\n\n")


def _pair(t):
    return "{" + t + ", " + V + "}"


CASES = [
    # tuple and get-tuple-element in the element's own layout: nothing
    ("passthrough", [("f32[64,32]", T), ("f32[64]", V)],
     [("t_pass", PAIR, "tuple($0, $1)", _pair(T)), ("g_pass", "f32[64,32]", "get-tuple-element(t_pass), index=0", T)]),
    # the element's user wants rows over 8: an all-to-all of the f32[32,8] tile inside the model groups
    # (3/4 * 1024 = 768), at the user
    ("user_rows", [("f32[64,32]", T), ("f32[64]", V)],
     [("t_rows", PAIR, "tuple($0, $1)", _pair(T)), ("g_rows", "f32[64,32]", "get-tuple-element(t_rows), index=0", T),
      ("c_rows", "f32[64,32]", "copy(g_rows)", ROWS)]),
    # through an opt-barrier, the vector's user wants it replicated: all-gather over data (1/2 * 256)
    ("barrier", [("f32[64,32]", T), ("f32[64]", V)],
     [("t_bar", PAIR, "tuple($0, $1)", _pair(T)), ("ob", PAIR, "opt-barrier(t_bar)", _pair(T)),
      ("g_bar", "f32[64]", "get-tuple-element(ob), index=1", V), ("c_bar", "f32[64]", "copy(g_bar)", R)]),
    # a get-tuple-element written replicated between a tiled element and a user of the same tiling:
    # XLA never sees the annotation, nothing moves (a pinned annotation would cost 3072 + 4096)
    ("gte_between", [("f32[64,32]", T), ("f32[64]", V)],
     [("t_bt", PAIR, "tuple($0, $1)", _pair(T)), ("g_bt", "f32[64,32]", "get-tuple-element(t_bt), index=0", R),
      ("c_bt", "f32[64,32]", "copy(g_bt)", T)]),
    # the indices of a variadic sort (rows over data), read replicated: the user gathers them over data
    # (s32[8,1024] tile: 1/2 * 65536 = 32768)
    ("sort_indices", [("f32[16,1024]", D0), ("s32[16,1024]", D0)],
     [("s_idx", "(f32[16,1024], s32[16,1024])", "sort($0, $1), dimensions={1}, to_apply=lt2", "{" + D0 + ", " + D0 + "}"),
      ("g_idx", "s32[16,1024]", "get-tuple-element(s_idx), index=1", R), ("n_idx", "s32[16,1024]", "negate(g_idx)", R)]),
    # a leaf of a tuple parameter read as rows over 8: the all-to-all (768) at the user
    ("tuple_param", [(PAIR, _pair(T))],
     [("g_tp", "f32[64,32]", "get-tuple-element($0), index=0", ROWS), ("n_tp", "f32[64,32]", "negate(g_tp)", ROWS)]),
    # an inner tuple written replicated over a tiled operand, read replicated by the output: the output
    # gathers it (3072 + 4096, at the root)
    ("tuple_other", [("f32[64,32]", T), ("f32[64]", V)],
     [("t_oth", PAIR, "tuple($0, $1)", "{" + R + ", " + V + "}"),
      ("g_oth", "f32[64,32]", "get-tuple-element(t_oth), index=0", R)]),
]

NAMES = [s[0] for c in CASES for s in c[2]]


@functools.lru_cache(maxsize=1)
def _results():
    res = module_results(chain_module(CASES, LT2), NAMES + [None, "out"])
    xla_root, pred_root = res.pop(None), res.pop("out")
    res["out"] = (xla_root[0], pred_root[1], xla_root[2], pred_root[3])
    return res


@pytest.mark.parametrize("name", NAMES + ["out"])
def test_tuple_ops_collectives_match_xla(name):
    """Per instruction (tuple ops, their users, the output): hloshard == XLA."""
    _, _, xla, pred = _results()[name]
    assert pred == xla


def test_tuple_ops_expected_figures():
    """The hand derivations of the comments above, on XLA's side: nothing on a tuple op itself."""
    res = {n: r[0] for n, r in _results().items()}
    for name in ("t_pass", "g_pass", "t_rows", "g_rows", "t_bar", "ob", "g_bar", "t_bt", "g_bt", "c_bt", "s_idx",
                 "g_idx", "g_tp", "t_oth", "g_oth"):
        assert res[name] == [], name
    assert res["c_rows"] == [("all-to-all", 4, 768)]
    assert res["c_bar"] == [("all-gather", 2, 128)]
    assert res["n_idx"] == [("all-gather", 2, 32768)]
    assert res["n_tp"] == [("all-to-all", 4, 768)]
    assert res["out"] == [("all-gather", 2, 4096), ("all-gather", 4, 3072)]
