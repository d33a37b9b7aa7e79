"""Parameters, constants and iotas (``strategy/parameter.py``) against XLA's SPMD partitioner (GSPMD, raw
after-spmd-partitioning HLO, 8 devices): a source whose user wants another layout is resharded on the
edge, attributed to the user (XLA's collectives carry the user's ``op_name``), priced as XLA does:
kind, replica groups or source-target pairs, ring bytes.

A replicated source feeding a tiled user is sliced locally (no collective); a constant is rebuilt in
whatever layout its user needs, whatever its own annotation (the StableHLO route XLA takes from the
HLO text drops a constant's sharding: ``add(constant, p)`` becomes one computation of the user's
layout), so its edges are free.
"""

from __future__ import annotations

import functools

import pytest

from tests.handler_harness import chain_module, module_results

pytestmark = pytest.mark.oracle

T = "{devices=[2,4]<=[8]}"
R = "{replicated}"
ROWS = "{devices=[8,1]<=[8]}"
PERM = "{devices=[8,1]1,0,3,2,5,4,7,6}"          # rows over 8, neighbouring devices swapped
ROW = "{" + ",".join(str(k) for k in range(1, 9)) + "}"
CONST = "constant({" + ",".join([ROW] * 4) + "})"  # f32[4,8], rows 1..8


def _use(name, shape, sharding, use_sharding, body="negate($0)"):
    return (name, [(shape, sharding)], [(name, shape, body, use_sharding)])


CASES = [
    # a tiled parameter used replicated: gathered over model (3/4 * 4096 = 3072), then data (1/2 * 8192)
    _use("param_to_rep", "f32[64,32]", T, R),
    # a replicated or partially replicated parameter used tiled: local slices
    _use("param_from_rep", "f32[64,32]", R, T),
    _use("param_partial", "f32[64,32]", "{devices=[2,1,4]<=[8] last_tile_dim_replicate}", T),
    # [2,4] -> rows over 8: the column split moves to the rows inside the model groups, an all-to-all of
    # the f32[32,8] tile (3/4 * 1024 = 768)
    _use("param_to_rows", "f32[64,32]", T, ROWS),
    # [2,4] -> [4,2]: an all-to-all in pairs (1/2 * 1024 = 512) and a collective-permute of the 1024-byte
    # tiles that end up on the wrong device
    _use("param_swap", "f32[64,32]", T, "{devices=[4,2]<=[8]}"),
    # a device permutation of the user's layout: one collective-permute of the f32[8,32] tile (1024)
    _use("param_permuted", "f32[64,32]", PERM, ROWS),
    # a 1-D iota tiled 8 ways, used replicated: gathered (7/8 * 256 = 224)
    ("iota_to_rep", [("s32[64]", R)], [("iota_8", "s32[64]", "iota(), iota_dimension=0", "{devices=[8]<=[8]}"),
                                      ("iota_to_rep", "s32[64]", "add(iota_8, $0)", R)]),
    # constants: replicated into a tiled user (a local slice), tiled into a replicated user (rebuilt)
    ("const_to_tiled", [], [("const_r", "f32[4,8]", CONST, R), ("const_to_tiled", "f32[4,8]", "negate(const_r)", T)]),
    ("const_to_rep", [("f32[4,8]", R)], [("const_t", "f32[4,8]", CONST, T),
                                         ("const_to_rep", "f32[4,8]", "add(const_t, $0)", R)]),
]

NAMES = [c[0] for c in CASES]


@functools.lru_cache(maxsize=1)
def _results():
    return module_results(chain_module(CASES), NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_source_resharding_matches_xla(name):
    """Kind, replica groups / pairs and ring bytes of the user's collectives, hloshard == XLA."""
    _, _, xla, pred = _results()[name]
    assert pred == xla


def test_source_expected_figures():
    """The hand derivations of the comments above, on XLA's side."""
    res = {n: r[0] for n, r in _results().items()}
    assert res["param_to_rep"] == [("all-gather", 2, 4096), ("all-gather", 4, 3072)]
    for name in ("param_from_rep", "param_partial", "const_to_tiled", "const_to_rep"):
        assert res[name] == [], name
    assert res["param_to_rows"] == [("all-to-all", 4, 768)]
    assert res["param_swap"] == [("all-to-all", 2, 512), ("collective-permute", 1, 1024)]
    assert res["param_permuted"] == [("collective-permute", 1, 1024)]
    assert res["iota_to_rep"] == [("all-gather", 8, 224)]
