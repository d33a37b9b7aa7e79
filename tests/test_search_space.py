"""The strategy search space does not depend on module size (issue 16 item 5: the old
EXHAUSTIVE_LIMIT)."""

from __future__ import annotations

from hloshard.hlo import parse_module
from hloshard.mesh import DeviceMesh


def test_dot_search_space_does_not_depend_on_module_size():
    """The same dot gets the same strategies in a 3-instruction module and in one with 600 more
    instructions (the old EXHAUSTIVE_LIMIT of 500 dropped the strategies that leave a mesh axis idle
    in large modules)."""
    from hloshard.autoshard import build_graph

    def module(extra: int) -> str:
        chain = "".join(f"  %n{k} = f32[64] negate(%n{k - 1})\n" for k in range(1, extra + 1))
        return f"""HloModule d
ENTRY %main (a: f32[64,128], b: f32[128,256], c: f32[64]) -> (f32[64,256], f32[64]) {{
  %a = f32[64,128] parameter(0)
  %b = f32[128,256] parameter(1)
  %n0 = f32[64] parameter(2)
{chain}  %d = f32[64,256] dot(%a, %b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  ROOT %t = (f32[64,256], f32[64]) tuple(%d, %n{extra})
}}
"""

    mesh = DeviceMesh.parse("2x4")
    names = []
    for extra in (0, 600):
        m = parse_module(module(extra))
        g = build_graph(m, mesh)
        names.append(sorted(s.name for s in g.ctx.groups[m.entry.get("d")].strategies))
    assert names[0] == names[1]
    # not equal by being empty or cut alike: in the 600-instruction module the dot still has the
    # strategies that leave a mesh axis idle (one output dim over one axis of 2x4, or replicated: what
    # the old limit dropped), the 2-D output splits, and the contracting split with its all-reduce
    idle_axis = {"R", "S0@0", "S0@1", "S1@0", "S1@1"}
    assert idle_axis | {"S0@0,S1@1", "S0@1,S1@0", "R|allreduce"} <= set(names[1]), names[1]
