"""auto_shard's broadcast-source constraints (:func:`hloshard.jax.api._broadcast_constraints`) where the input's
layout needs Shardy sub-axes (round 28, new user 27's finding 5)."""

import types

import numpy as np
import pytest

from tests.conftest import require_jax
from tests.patching import setattr_everywhere


def test_a_broadcast_source_on_sub_axes_is_constrained_to_the_broadcasts_layout(monkeypatch):
    """The MoE's dispatch mask: jax's ``mul`` of f32[16,128,8,1] by f32[16,128,1,40] broadcasts its first input;
    the plan keeps that input split [4,2] on a 2x4 ('data', 'expert') mesh -- a layout that needs sub-axes of
    'expert', no PartitionSpec over the user's axes -- and broadcasts it replicated.  The input gets a constraint
    to the broadcast's layout (replicated), so XLA all-gathers f32[16,128,8] before broadcasting, as the written
    module does, not f32[16,128,8,40] after (plan.jit() moved 48.52 MB where plan.xla() said 44.73 MB).  Before,
    the input's sub-axis layout made the rule skip it."""
    require_jax()
    import jax
    from jax.sharding import Mesh

    from hloshard.hlo.sharding import HloSharding
    from hloshard.jax import api
    from hloshard.sdy import SdyMesh

    sdy = SdyMesh("mesh", ("data", "expert"), (2, 4))
    split = HloSharding.tiled(np.arange(8).reshape(4, 2, 1, 1))
    with pytest.raises(ValueError):   # the precondition: no PartitionSpec over the user's axes says it
        api._spec(split, 4, sdy)
    mesh = Mesh(np.array(jax.devices()[:1]).reshape(1, 1), ("data", "expert"))
    dims = types.SimpleNamespace
    src = dims(sharding=split, shape=dims(dims=(16, 128, 8, 1)))
    op = dims(shape=dims(dims=(16, 128, 8)))
    b = dims(sharding=HloSharding.replicated(), shape=dims(dims=(16, 128, 8, 40)), dimensions=[0, 1, 2], operands=[op])
    path = (147,)
    setattr_everywhere(monkeypatch, api, "broadcast_sources", lambda module, eqns: [(path, 0, b, src)])
    got: dict = {}
    assert api._broadcast_constraints(None, {}, got, mesh, sdy) == 1
    [(i, sh)] = got[path]
    assert i == 0 and all(x is None for x in sh.spec) and sh.mesh == mesh
    # a broadcast that keeps the input's layout needs no constraint; nor one whose own layout needs sub-axes
    same = dims(sharding=split, shape=dims(dims=(16, 128, 8, 1)), dimensions=[0, 1, 2, 3],
                operands=[dims(shape=dims(dims=(16, 128, 8, 1)))])
    setattr_everywhere(monkeypatch, api, "broadcast_sources", lambda module, eqns: [(path, 0, same, src)])
    got = {}
    assert api._broadcast_constraints(None, {}, got, mesh, sdy) == 0 and got == {}
