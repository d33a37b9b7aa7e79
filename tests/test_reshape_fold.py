"""What XLA folds away on the way in (``strategy.reshape.folded_value``), and the writer leaving it unsharded.

Round 26's held-out remat MLP (``jax.checkpoint`` in a scan) solved at 2x4 was rejected by XLA: in the
backward body ``add.23 = f32[512] reshape(add.22)`` (``add.22`` an identity broadcast of a reshape of an
opt-barrier element) carried an array sharding, and on the way back from StableHLO to HLO the MHLO
canonicalizer removed the chain and put that sharding on the opt-barrier ("Number of tile assignment
dimensions (excluding subgroups) is different than the input rank ... input_shape=f32[64,256]").  The
oracle test below measures the rule op by op (XLA rejects exactly the ops ``folded_value`` names), and
solves the pattern and compiles the written module.
"""

from __future__ import annotations

import pytest

from hloshard.autoshard import solve_module
from hloshard.hlo import parse_module, print_module
from hloshard.mesh import DeviceMesh
from hloshard.strategy.reshape import folded_value, folds_onto_tuple
from tests.conftest import require_jax

S = "{devices=[4,2]<=[2,4]T(1,0) last_tile_dim_replicate}"
HEAD = "HloModule m, entry_computation_layout={(f32[512]{0}, f32[64,256]{1,0})->f32[64,512]{1,0}}\n\n"

#: name -> (the lines making ``x`` from ``g`` = f32[512], folded by XLA: measured with jaxlib 0.10.2)
CASES = {
    "reshape_identity": (["x = f32[512]{0} reshape(g)"], True),
    "broadcast_identity": (["x = f32[512]{0} broadcast(g), dimensions={0}"], True),
    "transpose_identity": (["x = f32[512]{0} transpose(g), dimensions={0}"], True),
    "convert_same_type": (["x = f32[512]{0} convert(g)"], True),
    "slice_full": (["x = f32[512]{0} slice(g), slice={[0:512]}"], True),
    "add_zero": (["z = f32[] constant(0)", "zb = f32[512]{0} broadcast(z), dimensions={}",
                  "x = f32[512]{0} add(zb, g)"], True),
    "subtract_zero": (["z = f32[] constant(0)", "zb = f32[512]{0} broadcast(z), dimensions={}",
                       "x = f32[512]{0} subtract(g, zb)"], True),
    "multiply_one": (["z = f32[] constant(1)", "zb = f32[512]{0} broadcast(z), dimensions={}",
                      "x = f32[512]{0} multiply(g, zb)"], True),
    "reshape_back": (["r1 = f32[2,256]{1,0} reshape(g)", "x = f32[512]{0} reshape(r1)"], True),
    # round 26's chain: reshape -> identity broadcast -> reshape
    "remat_chain": (["r1 = f32[1,512]{1,0} reshape(g)", "b1 = f32[1,512]{1,0} broadcast(r1), dimensions={0,1}",
                     "x = f32[512]{0} reshape(b1)"], True),
    "unit_broadcast_back": (["r1 = f32[1,512]{1,0} broadcast(g), dimensions={1}", "x = f32[512]{0} reshape(r1)"], True),
    "unit_transpose_back": (["r1 = f32[1,512,1]{2,1,0} reshape(g)",
                             "t1 = f32[1,1,512]{2,1,0} transpose(r1), dimensions={0,2,1}",
                             "x = f32[512]{0} reshape(t1)"], True),
    "copy": (["x = f32[512]{0} copy(g)"], False),
    "concatenate_one": (["x = f32[512]{0} concatenate(g), dimensions={0}"], False),
    "pad_zero": (["z = f32[] constant(0)", "x = f32[512]{0} pad(g, z), padding=0_0"], False),
    "maximum_self": (["x = f32[512]{0} maximum(g, g)"], False),
    "real_transpose_back": (["r1 = f32[2,256]{1,0} reshape(g)", "t1 = f32[256,2]{1,0} transpose(r1), dimensions={1,0}",
                             "x = f32[512]{0} reshape(t1)"], False),
    "multiply_two": (["z = f32[] constant(2)", "zb = f32[512]{0} broadcast(z), dimensions={}",
                      "x = f32[512]{0} multiply(g, zb)"], False),
}


def _module_text(lines, x_sharding: str | None) -> str:
    """``g`` an element of an opt-barrier, ``x`` made from it by ``lines``, read by a broadcast."""
    body = ["ENTRY e {",
            "  p0 = f32[512]{0} parameter(0), sharding={replicated}",
            "  p1 = f32[64,256]{1,0} parameter(1), sharding={replicated}",
            f"  t = (f32[64,256]{{1,0}}, f32[512]{{0}}) tuple(p1, p0), sharding={{{{replicated}}, {S}}}",
            f"  b = (f32[64,256]{{1,0}}, f32[512]{{0}}) opt-barrier(t), sharding={{{{replicated}}, {S}}}",
            f"  g = f32[512]{{0}} get-tuple-element(b), index=1, sharding={S}"]
    for ln in lines:
        tail = f", sharding={x_sharding}" if x_sharding and ln.startswith("x = ") else ""
        body.append("  " + ln + tail)
    body += ["  ROOT o = f32[64,512]{1,0} broadcast(x), dimensions={1}, sharding={devices=[2,4]<=[8]}", "}"]
    return HEAD + "\n".join(body) + "\n"


@pytest.mark.parametrize("case", sorted(CASES))
def test_folded_value_names_what_xla_removes(case):
    lines, folded = CASES[case]
    module = parse_module(_module_text(lines, None))
    comp = module.entry
    x, g = comp.get("x"), comp.get("g")
    assert (folded_value(x) is g) == folded
    if not folded:
        assert folded_value(x) is None


def test_the_chain_members_themselves():
    module = parse_module(_module_text(CASES["remat_chain"][0], None))
    comp = module.entry
    assert folded_value(comp.get("r1")) is None          # a real reshape: 512 -> 1x512
    assert folded_value(comp.get("b1")) is comp.get("r1")  # identity broadcast
    assert folded_value(comp.get("o")) is None


@pytest.mark.oracle
def test_xla_rejects_a_sharding_exactly_on_what_folded_value_names():
    """The rule measured: on an opt-barrier element, a sharding on ``x`` breaks the module iff ``x`` folds."""
    require_jax()
    from tests import xla_oracle

    names = sorted(CASES)
    res = xla_oracle.compile_many([_module_text(CASES[n][0], S) for n in names], 8, timeout=600)
    for n, (ok, msg) in zip(names, res):
        folded = CASES[n][1]
        assert ok != folded, (n, msg[:300])
        if folded:
            assert "Number of tile assignment dimensions" in msg, (n, msg[:300])
    # and without the sharding on x every one compiles
    res = xla_oracle.compile_many([_module_text(CASES[n][0], None) for n in names], 8, timeout=600)
    assert [n for n, (ok, _) in zip(names, res) if not ok] == []


#: x folds onto a block argument (a while body's state element; an entry parameter) or onto a single-result op
OTHER_PRODUCERS = {
    "while_body_state": """HloModule m, entry_computation_layout={(f32[512]{0})->f32[512]{0}}

body {
  a = (s32[], f32[512]{0}) parameter(0), sharding={{replicated}, %(S)s}
  i = s32[] get-tuple-element(a), index=0, sharding={replicated}
  one = s32[] constant(1), sharding={replicated}
  i2 = s32[] add(i, one), sharding={replicated}
  v = f32[512]{0} get-tuple-element(a), index=1, sharding=%(S)s
  x = f32[512]{0} reshape(v), sharding={devices=[8]<=[8]}
  y = f32[512]{0} negate(x), sharding=%(S)s
  ROOT t = (s32[], f32[512]{0}) tuple(i2, y), sharding={{replicated}, %(S)s}
}

cond {
  a = (s32[], f32[512]{0}) parameter(0), sharding={{replicated}, %(S)s}
  i = s32[] get-tuple-element(a), index=0, sharding={replicated}
  n = s32[] constant(4), sharding={replicated}
  ROOT c = pred[] compare(i, n), direction=LT, sharding={replicated}
}

ENTRY e {
  p0 = f32[512]{0} parameter(0), sharding=%(S)s
  z = s32[] constant(0), sharding={replicated}
  t = (s32[], f32[512]{0}) tuple(z, p0), sharding={{replicated}, %(S)s}
  w = (s32[], f32[512]{0}) while(t), condition=cond, body=body, sharding={{replicated}, %(S)s}
  ROOT r = f32[512]{0} get-tuple-element(w), index=1, sharding=%(S)s
}
""",
    "entry_parameter": """HloModule m, entry_computation_layout={(f32[512]{0})->f32[64,512]{1,0}}

ENTRY e {
  p0 = f32[512]{0} parameter(0), sharding=%(S)s
  x = f32[512]{0} reshape(p0), sharding={devices=[8]<=[8]}
  ROOT o = f32[64,512]{1,0} broadcast(x), dimensions={1}, sharding={devices=[2,4]<=[8]}
}
""",
    "single_result_op": """HloModule m, entry_computation_layout={(f32[512]{0})->f32[64,512]{1,0}}

ENTRY e {
  p0 = f32[512]{0} parameter(0), sharding={replicated}
  g = f32[512]{0} negate(p0), sharding=%(S)s
  x = f32[512]{0} reshape(g), sharding={devices=[8]<=[8]}
  ROOT o = f32[64,512]{1,0} broadcast(x), dimensions={1}, sharding={devices=[2,4]<=[8]}
}
""",
}


def _x(text):
    m = parse_module(text)
    return next(i for c in m.computations for i in c.instructions if i.name == "x")


def test_folds_onto_tuple_only_for_an_instructions_tuple():
    assert folds_onto_tuple(parse_module(_module_text(CASES["remat_chain"][0], None)).entry.get("x"))
    assert not folds_onto_tuple(parse_module(_module_text(CASES["copy"][0], None)).entry.get("x"))
    for name, text in OTHER_PRODUCERS.items():
        x = _x(text % {"S": S})
        assert folded_value(x) is not None, name
        assert not folds_onto_tuple(x), name


@pytest.mark.oracle
def test_xla_compiles_a_folded_sharding_on_other_producers():
    """A block argument or a single-result producer takes the folded op's sharding without complaint (the
    writer keeps writing those)."""
    require_jax()
    from tests import xla_oracle

    res = xla_oracle.compile_many([t % {"S": S} for t in OTHER_PRODUCERS.values()], 8, timeout=600)
    assert [(n, m[:200]) for n, (ok, m) in zip(OTHER_PRODUCERS, res) if not ok] == []


REMAT_BODY = """HloModule remat, entry_computation_layout={(f32[64,256]{1,0}, f32[256,512]{1,0}, f32[512]{0})->f32[64,512]{1,0}}

ENTRY e {
  x = f32[64,256]{1,0} parameter(0)
  w = f32[256,512]{1,0} parameter(1)
  bias = f32[512]{0} parameter(2)
  t = (f32[64,256]{1,0}, f32[256,512]{1,0}, f32[512]{0}) tuple(x, w, bias)
  ob = (f32[64,256]{1,0}, f32[256,512]{1,0}, f32[512]{0}) opt-barrier(t)
  x1 = f32[64,256]{1,0} get-tuple-element(ob), index=0
  w1 = f32[256,512]{1,0} get-tuple-element(ob), index=1
  b1 = f32[512]{0} get-tuple-element(ob), index=2
  d = f32[64,512]{1,0} dot(x1, w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  r1 = f32[1,512]{1,0} reshape(b1)
  bb = f32[1,512]{1,0} broadcast(r1), dimensions={0,1}
  r2 = f32[512]{0} reshape(bb)
  bc = f32[64,512]{1,0} broadcast(r2), dimensions={1}
  s = f32[64,512]{1,0} add(d, bc)
  ROOT y = f32[64,512]{1,0} tanh(s)
}
"""


@pytest.mark.oracle
@pytest.mark.parametrize("mesh", ["2x4", "8"])
def test_solved_remat_pattern_compiles(mesh):
    """The rejected pattern (an opt-barrier element through reshape -> identity broadcast -> reshape) solved:
    the folded ``r2`` is written without a sharding and XLA compiles the module (before the fix: rejected,
    whatever sharding the solver gave ``r2``)."""
    require_jax()
    from tests import xla_oracle

    module = parse_module(REMAT_BODY)
    solve_module(module, DeviceMesh.parse(mesh), keep="io", time_limit=10, deterministic=True, workers=1)
    comp = module.entry
    assert comp.get("r2").sharding is None
    assert comp.get("ob").sharding is not None and comp.get("ob").sharding.is_tuple
    assert comp.get("bc").sharding is not None
    ok, msg = xla_oracle.compile_spmd(print_module(module), 8)
    assert ok, msg[:1000]
