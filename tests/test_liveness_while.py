"""Memory liveness of values inside a while body (hloshard.cost.liveness through ``hloshard cost``),
against peaks derived by hand.

Every array instruction is annotated replicated on 8 devices (tuples and get-tuple-elements are left
unannotated, so they forward and allocate nothing), so every f32[1024] value holds 4096 bytes per
device and every s32[] 4.  The liveness model (cost/liveness.py docstring): the while's body and
condition are scheduled right after the while; a value lives from its definition to its last read
(get-tuple-element / tuple forward, they allocate nothing); the loop state is the while's own value
(the body's and the condition's parameters alias it); entry parameters live throughout.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from hloshard.cli import main

_R = ", sharding={replicated}"


def _loop_module(second_read_of_y: bool) -> str:
    w_rhs = "y" if second_read_of_y else "z"
    return f"""HloModule lw, num_partitions=8

cond {{
  c = (s32[], f32[1024]) parameter(0)
  ci = s32[] get-tuple-element(c), index=0
  n = s32[] constant(4){_R}
  ROOT lt = pred[] compare(ci, n), direction=LT{_R}
}}

body {{
  b = (s32[], f32[1024]) parameter(0)
  i = s32[] get-tuple-element(b), index=0
  x = f32[1024] get-tuple-element(b), index=1
  one = s32[] constant(1){_R}
  i2 = s32[] add(i, one){_R}
  y = f32[1024] exponential(x){_R}
  z = f32[1024] negate(y){_R}
  w = f32[1024] add(z, {w_rhs}){_R}
  ROOT r = (s32[], f32[1024]) tuple(i2, w)
}}

ENTRY main {{
  p = f32[1024] parameter(0){_R}
  e = f32[1024] exponential(p){_R}
  z0 = s32[] constant(0){_R}
  t = (s32[], f32[1024]) tuple(z0, e)
  wl = (s32[], f32[1024]) while(t), condition=cond, body=body
  ROOT g = f32[1024] get-tuple-element(wl), index=1
}}
"""


# Peak by hand.  At w (the last body instruction that allocates), live are: p 4096 (parameter), the
# loop state wl = s32 4 + f32 4096 (defined at the while, read in the body, the condition and by g;
# held replicated: a split state would need an all-gather before the replicated y every iteration),
# i2 4 (read by the body's root tuple), z 4096 (read by w), w 4096 (read by the root tuple) and, when
# w reads y a second time, y 4096.  e (4096) died at the while, one at i2.
#   y read twice: 4096 + 4 + 4096 + 4 + 4096 + 4096 + 4096 = 20488 bytes at w
#   y read once:  y dies at z, so at z: p + wl + i2 + y + z = 16392, and at w: p + wl + i2 + z + w = 16392
CASES = {"y_read_twice_in_the_body": (True, 20488), "y_read_once": (False, 16392)}


@pytest.mark.parametrize("case", sorted(CASES))
def test_peak_inside_a_while_body_derived_by_hand(tmp_path, case):
    second, peak = CASES[case]
    src = tmp_path / "loop.hlo"
    src.write_text(_loop_module(second))
    r = CliRunner().invoke(main, ["cost", str(src), "--mesh", "8", "--format", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["peak_memory_per_device"] == peak


@pytest.mark.oracle
def test_loop_modules_are_valid_for_xla():
    """The hand derivation is about modules XLA accepts (parse and verify, 8 partitions)."""
    from tests.conftest import require_jax

    require_jax()
    from tests import xla_oracle

    results = xla_oracle.compile_many([_loop_module(s) for s, _ in CASES.values()], 8)
    assert all(ok for ok, _ in results), [m[:500] for ok, m in results if not ok]
