"""v6e's algebraic simplifier puts a dot's computed operand first (``cost.tpu_partitioner.operand_swaps``;
BENCHMARKS.md round 32, helper tpurows): ``dot(w, h)`` with ``w`` a parameter and ``h`` computed is
partitioned as ``dot(h, w)`` under the written sharding's tile dims, on ``tpu-v6e`` only; a transposed dot
whose computed operand is already first is not folded there.  The expert einsum of ``moe_layer``, reduced.
"""

from __future__ import annotations

W2 = "{devices=[4,1,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}"
H = "{devices=[2,1,4,1]<=[8]}"
DOT_S = "{devices=[4,1,2,1]<=[2,4]T(1,0)}"       # [e, d, b, s]: e over 4, b over 2

EXPERT = f"""HloModule expert, num_partitions=8

ENTRY e {{
  x = f32[8,32,128] parameter(0), sharding={{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}}
  w1 = f32[8,128,256] parameter(1), sharding={W2}
  w2 = f32[8,256,128] parameter(2), sharding={W2}
  h = f32[8,32,8,256] dot(x, w1), lhs_contracting_dims={{2}}, rhs_contracting_dims={{1}}, sharding={H}
  z = f32[] constant(0)
  zb = f32[8,32,8,256] broadcast(z), dimensions={{}}, sharding={H}
  m = f32[8,32,8,256] maximum(h, zb), sharding={H}
  d = f32[8,128,8,32] dot(w2, m), lhs_batch_dims={{0}}, lhs_contracting_dims={{1}}, rhs_batch_dims={{2}}, rhs_contracting_dims={{3}}, sharding={DOT_S}
  ROOT t = f32[8,32,8,128] transpose(d), dimensions={{2,3,0,1}}, sharding={H}
}}
"""

ACT = "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"
FOLD_BLOCKED = f"""HloModule fold, num_partitions=8

ENTRY e {{
  x = f32[64,128] parameter(0), sharding={ACT}
  w1 = f32[128,256] parameter(1), sharding={{replicated}}
  w2 = f32[256,512] parameter(2), sharding={{replicated}}
  h = f32[64,256] dot(x, w1), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}, sharding={ACT}
  d = f32[64,512] dot(h, w2), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}, sharding={{devices=[2,4]<=[8]}}
  ROOT t = f32[512,64] transpose(d), dimensions={{1,0}}, sharding={{devices=[4,2]<=[2,4]T(1,0)}}
}}
"""


def test_read_only_operands():
    from hloshard.cost.tpu_partitioner import _read_only
    from hloshard.hlo import parse_module

    m = parse_module(EXPERT)
    by = {i.name: i for i in m.entry.instructions}
    assert _read_only(by["w2"]) and _read_only(by["x"])
    assert not _read_only(by["m"]) and not _read_only(by["h"])


def test_the_expert_dot_is_swapped_on_v6e_only():
    import numpy as np

    from hloshard.cost.tpu_partitioner import operand_swaps, tpu_partitioned_view
    from hloshard.hlo import parse_module

    m = parse_module(EXPERT)
    assert [d.name for d in operand_swaps(m)] == ["d"]
    assert tpu_partitioned_view(m, "tpu-v5e") == (m, [])
    assert tpu_partitioned_view(m)[0] is m
    view, names = tpu_partitioned_view(m, "tpu-v6e")
    assert names == [("d", "")]
    d = next(i for i in view.entry.instructions if i.name == "d")
    # dot(m, w2) is [e, b, s, d] under [4,1,2,1]: in the written dims [e, d, b, s] that is e:4, s:2
    assert list(np.asarray(d.sharding.tile_assignment).shape) == [4, 1, 1, 2]
    assert next(i for i in m.entry.instructions if i.name == "d").sharding.tile_assignment.shape == (4, 1, 2, 1)


def test_a_fold_that_would_put_the_weight_first_is_not_taken_on_v6e():
    from hloshard.cost.tpu_partitioner import folded_transposes, tpu_partitioned_view
    from hloshard.hlo import parse_module

    m = parse_module(FOLD_BLOCKED)
    assert [(d.name, t.name) for d, t in folded_transposes(m)] == [("d", "t")]
    assert tpu_partitioned_view(m, "tpu-v5e")[1] == [("d", "t")]
    assert tpu_partitioned_view(m, "tpu-v6e") == (m, [])


def test_the_swap_moves_collectives_as_the_v6e_partitioner_does():
    """Priced as written: the v5e view all-reduces the expert einsum's result (its contracting dim is
    whole, nothing to reduce: no all-to-all); the v6e view reshards the activation and the result
    (all-to-alls), as libtpu's v6e program of moe_layer does (3 all-to-alls, BENCHMARKS.md round 30)."""
    from hloshard.autoshard import evaluate_module
    from hloshard.cost.tpu_partitioner import tpu_partitioned_view
    from hloshard.hlo import parse_module
    from hloshard.mesh_setup import timed_mesh_from_options
    from hloshard.xla_compare import predicted_collectives

    m = parse_module(EXPERT)
    mesh, _, _ = timed_mesh_from_options(m, "2x4", None, None, None, "tpu-v6e")

    def kinds(module):
        return {r.kind for recs in predicted_collectives(evaluate_module(module, mesh)).values() for r in recs}

    assert "all-to-all" not in kinds(tpu_partitioned_view(m, "tpu-v5e")[0])
    assert "all-to-all" in kinds(tpu_partitioned_view(m, "tpu-v6e")[0])


def test_the_tpu_compiler_partitions_the_expert_dot_with_all_to_alls_on_v6e_only():
    """libtpu ahead of time (``after_tpu-spmd-partitioning``): the v6e program of EXPERT holds all-to-alls,
    the v5e program none -- what the two views above predict."""
    import pytest

    from tests.tpu_oracle import compile_for_tpu, tpu_available

    why = tpu_available()
    if why:
        pytest.skip(why)
    v6e = compile_for_tpu([EXPERT], topology="v6e:2x4")[0]
    v5e = compile_for_tpu([EXPERT], topology="v5e:2x4")[0]
    assert v6e["ok"] and v5e["ok"], (v6e["error"], v5e["error"])
    assert " all-to-all(" in v6e["partitioned"]
    assert " all-to-all(" not in v5e["partitioned"]
