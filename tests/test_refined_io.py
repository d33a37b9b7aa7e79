"""Entry values on whole user axes in a refined mesh (issues 24 and 26): ``auto_shard`` refines its mesh for
the module as the CLI does (2x4 -> 2x2x2 where a reshape carries a split onto part of an axis), while the
entry parameters and outputs, which jax.jit takes as ``NamedSharding``s whose PartitionSpec names whole user
axes only, keep off the sub-axes (``DeviceMesh.keep_io_on_user_axes``)."""

from __future__ import annotations

import numpy as np
import pytest

from hloshard.autoshard.build import build_graph
from hloshard.hlo import parse_module
from hloshard.mesh import DeviceMesh, refine_for_module
from hloshard.sdy import SdyMesh, dim_axes
from hloshard.strategy.base import is_mesh_spec
from tests.conftest import require_jax, run_python_child

# the reshape splits the 256 columns into 2 x 128: a split of them over the 4-way 'model' axis is carried
# onto both dims as model:(1)2 x model:(2)2, so the mesh is refined to 2x2x2
HEADS = """HloModule heads

ENTRY e {
  p = f32[16,256] parameter(0)
  w = f32[256,256] parameter(1)
  d = f32[16,256] dot(p, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  r = f32[16,2,128] reshape(d)
  x = f32[16,2,128] exponential(r)
  ROOT o = f32[16,2,128] add(x, r)
}
"""


def _named(sharding, rank: int) -> list:
    """The Shardy axes of ``sharding`` on the user's mesh data=2,model=4, per dim (sdy.dim_axes: an
    independent route from the strategy specs to the names a PartitionSpec would need)."""
    return dim_axes(sharding, rank, SdyMesh("mesh", ("data", "model"), (2, 4)))


def _io_layouts(flag: bool) -> dict:
    """Per entry parameter / root: (allowed, excluded) layouts as Shardy axes, on the refined mesh with
    or without ``keep_io_on_user_axes``."""
    module = parse_module(HEADS)
    mesh = DeviceMesh.parse("data=2,model=4")
    if flag:
        mesh.keep_io_on_user_axes()
    mesh = refine_for_module(mesh, module)
    assert mesh.shape == (2, 2, 2) and mesh.user_shape == (2, 4)
    graph = build_graph(module, mesh)
    minfo = graph.ctx.minfo
    out = {}
    for v, g in enumerate(graph.nodes):
        if g.instr.name not in ("p", "w", "o"):
            continue
        costs = np.asarray(graph.problem.node_costs[v], dtype=np.float64)
        finite = costs < 1e17   # build_graph's integer form of inf (_to_int)
        rank = len(g.instr.shape.dims)
        allowed, excluded = [], []
        for st, ok in zip(g.strategies, finite):
            assert is_mesh_spec(st.out)
            (allowed if ok else excluded).append(_named(minfo.to_sharding(st.out, rank), rank))
        out[g.instr.name] = (allowed, excluded)
    return out


def test_entry_values_keep_whole_user_axes_in_a_refined_mesh():
    sub = lambda dims: any(":" in ref for refs in dims for ref in refs)   # noqa: E731 - a Shardy sub-axis
    free = _io_layouts(False)
    for name, (allowed, excluded) in free.items():   # without the flag sub-axis layouts are offered
        assert not excluded and any(sub(d) for d in allowed), name
    kept = _io_layouts(True)
    for name, (allowed, excluded) in kept.items():
        assert allowed and not any(sub(d) for d in allowed), (name, [d for d in allowed if sub(d)])
        assert excluded and all(sub(d) for d in excluded), name   # only sub-axis layouts are excluded
        assert len(allowed) + len(excluded) == len(free[name][0])
    # whole axes in either order and products of both stay: model, (data, model), (model, data)
    w_allowed = [tuple(tuple(r) for r in d) for d in kept["w"][0]]
    for dims in ([[], ['"model"']], [['"data"', '"model"'], []], [['"model"', '"data"'], []]):
        assert tuple(tuple(r) for r in dims) in w_allowed, dims


def test_on_user_axes_chains():
    mesh = DeviceMesh.parse("data=2,model=4").keep_io_on_user_axes().refine((2, 2, 2))
    assert mesh.whole_axes_io == frozenset({1, 4, 8})
    for axes, whole in [((), True), ((0,), True), ((1, 2), True), ((0, 1, 2), True), ((1, 2, 0), True),
                        ((1,), False), ((2,), False), ((2, 1), False), ((0, 1), False), ((2, 0, 1), False)]:
        assert mesh.on_user_axes(axes) is whole, axes
    assert DeviceMesh.parse("2x4").refine((2, 2, 2)).on_user_axes((1,))   # no flag: no restriction
    # a coarse mesh of the same devices (the 1-D mesh refined 4x2) checks against the user's cuts
    coarse = DeviceMesh((8,)).refine((4, 2))
    coarse.whole_axes_io = mesh.whole_axes_io
    assert not coarse.on_user_axes((0,)) and not coarse.on_user_axes((1,)) and coarse.on_user_axes((0, 1))


SCRIPT = r'''
import os, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import numpy as np, jax, jax.numpy as jnp
from jax.sharding import Mesh
from hloshard.jax import auto_shard

mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))

def step(p, x):   # two heads of 128 over the 4-way model axis: the reshape refines it to 2x2
    def loss(p):
        h = (x @ p["w1"]).reshape(x.shape[0], 2, -1)
        h = jax.nn.softmax(h, axis=-1).reshape(x.shape[0], -1)
        return jnp.mean((h @ p["w2"]) ** 2)
    l, g = jax.value_and_grad(loss)(p)
    return l, jax.tree_util.tree_map(lambda a, b: a - 0.1 * b, p, g)

k = jax.random.split(jax.random.PRNGKey(0), 3)
p = {"w1": jax.random.normal(k[0], (64, 256)) * 0.1, "w2": jax.random.normal(k[1], (256, 64)) * 0.1}
x = jax.random.normal(k[2], (4096, 64))   # a batch whose replicated compute outweighs the gradient all-reduce
plan = auto_shard(step, p, x, mesh=mesh, time_limit=1, deterministic=True, with_constraints=False, memory_guard=False)
print("mesh", plan.report["mesh"]["shape"])
for s in jax.tree_util.tree_leaves(plan.in_shardings) + jax.tree_util.tree_leaves(plan.out_shardings):
    print("spec", repr(tuple(s.spec)))
f = plan.jit()
a = jax.device_put((p, x), plan.in_shardings)
l1, q = f(*a)
l2, q = f(q, a[1])
print("cache", f._cache_size())
ref = jax.jit(step)
r1, rq = ref(p, x)
r2, rq = ref(rq, x)
print("err", float(abs(l2 - r2) / abs(r2)))
'''


@pytest.mark.oracle
def test_auto_shard_refines_and_keeps_partition_specs_on_whole_axes():
    require_jax()
    stdout = run_python_child(SCRIPT, timeout=300)
    lines = stdout.strip().splitlines()
    assert "mesh [2, 2, 2]" in lines, lines   # refined, as the CLI refines it
    specs = [eval(line.split(" ", 1)[1]) for line in lines if line.startswith("spec ")]   # noqa: S307 - our own repr
    assert len(specs) == 6   # two parameters and the batch in; loss and two parameters out
    # the batch is split over both axes (data parallel over 8: (data, model) on the refined mesh's three axes)
    named = {a for s in specs for d in s if d is not None for a in ((d,) if isinstance(d, str) else d)}
    assert named and named <= {"data", "model"}, specs   # whole user axes only, and something is split
    assert "cache 1" in lines, lines   # the second step reuses the first compile: no resharding between
    err = float([line for line in lines if line.startswith("err ")][0].split()[1])
    assert err < 1e-4, err
