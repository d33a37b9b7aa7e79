"""The resharding planner against real XLA: the collectives GSPMD inserts (raw after-spmd-partitioning
HLO, jaxlib in a child process) must be the plan's, kind by kind, with the same replica groups and
collective-permute pairs, and a dynamic-slice exactly when the plan slices locally.

All cases of one device count are one module (a copy or reshape per case, told apart by the
``metadata={op_name=...}`` XLA attaches to what it inserts), partitioned in one child process through
:mod:`hloshard.xla_check`; the seed is cross-checked against the shared ``tests/xla_oracle.py`` harness.
Known disagreements (uneven dims that GSPMD re-pads with halo collective-permutes) are listed in
``KNOWN_UNEVEN`` and asserted to be flagged in the plan's notes.
"""

from __future__ import annotations

import functools

import pytest

from hloshard.cost.reshard import plan
from hloshard.explain import explain_reshape, xla_module_text
from hloshard.hlo.shape import parse_shape
from hloshard.hlo.sharding import HloSharding as H
from hloshard.mesh import DeviceMesh
from tests.conftest import require_jax

pytestmark = pytest.mark.oracle

MESH8 = DeviceMesh.parse("2x4", alpha="1,1", beta="0.01,1")
MESH4 = DeviceMesh.parse("2x2", alpha="1,1", beta="0.01,1")

# (shape, source sharding, destination sharding) on 8 devices: tiled->replicated, replicated->tiled,
# dim moves, device permutations, partial replication, 2-D/3-D tilings, maximal, non-divisible dims
COPY8 = [
    ('f32[64,64]', '{devices=[2,4]<=[8]}', '{replicated}'),
    ('f32[64,64]', '{devices=[8,1]<=[8]}', '{replicated}'),
    ('f32[64,64]', '{devices=[2,4]<=[8]}', '{devices=[2,1,4]<=[8] last_tile_dim_replicate}'),
    ('f32[64,64]', '{devices=[2,4]<=[8]}', '{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}'),
    ('f32[64,64]', '{replicated}', '{devices=[2,4]<=[8]}'),
    ('f32[64,64]', '{devices=[8,1]<=[8]}', '{devices=[1,8]<=[8]}'),
    ('f32[64,64]', '{devices=[2,4]<=[8]}', '{devices=[4,2]<=[8]}'),
    ('f32[64,64]', '{devices=[2,4]<=[8]}', '{devices=[4,2]<=[2,4]T(1,0)}'),
    ('f32[64,64]', '{devices=[8,1]0,1,2,3,4,5,6,7}', '{devices=[8,1]1,0,3,2,5,4,7,6}'),
    ('f32[10,64]', '{devices=[4,2]<=[8]}', '{replicated}'),
    ('f32[64,64]', '{devices=[2,1,4]<=[8] last_tile_dim_replicate}', '{devices=[2,4]<=[8]}'),
    ('f32[64,64]', '{devices=[2,1,4]<=[8] last_tile_dim_replicate}', '{devices=[1,2,4]<=[8] last_tile_dim_replicate}'),
    ('f32[64,64]', '{devices=[2,1,4]<=[8] last_tile_dim_replicate}', '{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}'),
    ('f32[64,64]', '{devices=[2,4]<=[8]}', '{devices=[4,2]<=[4,2]T(1,0)}'),
    ('f32[64,64,8]', '{devices=[2,4,1]<=[8]}', '{devices=[2,1,4]<=[8]}'),
    ('f32[64,64]', '{devices=[4,2]<=[8]}', '{devices=[2,4]<=[8]}'),
    ('f32[64,64]', '{devices=[2,4]<=[8]}', '{devices=[1,8]<=[8]}'),
    ('f32[64,64]', '{devices=[2,4]<=[8]}', '{devices=[8,1]<=[8]}'),
    ('f32[64,64]', '{devices=[8,1]<=[8]}', '{devices=[2,4]<=[8]}'),
    ('f32[64,64]', '{devices=[8,1]<=[8]}', '{devices=[4,2]<=[8]}'),
    ('f32[64,64]', '{devices=[2,4]<=[8]}', '{devices=[2,4]<=[2,4]T(1,0)}'),
    ('f32[64,64]', '{devices=[2,4]<=[8]}', '{devices=[2,4]0,1,2,3,5,4,7,6}'),
    ('f32[64,64,64]', '{devices=[2,2,2]<=[8]}', '{replicated}'),
    ('f32[64,64,64]', '{devices=[2,2,2]<=[8]}', '{devices=[2,2,1,2]<=[8] last_tile_dim_replicate}'),
    ('f32[64,64,64]', '{devices=[2,2,2]<=[8]}', '{devices=[2,1,2,2]<=[2,2,2]T(0,2,1) last_tile_dim_replicate}'),
    ('f32[64,64,64]', '{devices=[2,2,2]<=[8]}', '{devices=[2,2,2]<=[2,2,2]T(1,0,2)}'),
    ('f32[64,64,64]', '{devices=[2,2,1,2]<=[8] last_tile_dim_replicate}', '{devices=[2,2,2]<=[8]}'),
    ('f32[64,64,64]', '{devices=[2,2,1,2]<=[8] last_tile_dim_replicate}', '{devices=[2,1,2,2]<=[8] last_tile_dim_replicate}'),
    ('f32[64,64]', '{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}', '{replicated}'),
    ('f32[64,64]', '{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}', '{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}'),
    ('f32[64,64]', '{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}', '{devices=[2,4]<=[8]}'),
    ('f32[64,64]', '{devices=[2,1,4]<=[8] last_tile_dim_replicate}', '{devices=[8,1]<=[8]}'),
    ('f32[64,64]', '{devices=[8,1]<=[8]}', '{devices=[2,1,4]<=[8] last_tile_dim_replicate}'),
    ('f32[64,64]', '{devices=[8,1]<=[8]}', '{devices=[4,1,2]<=[8] last_tile_dim_replicate}'),
    ('f32[64,64]', '{devices=[8,1]<=[8]}', '{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}'),
    ('f32[64,64]', '{devices=[8,1]<=[8]}', '{devices=[1,4,2]<=[8] last_tile_dim_replicate}'),
    ('f32[64,64]', '{devices=[2,4]<=[8]}', '{devices=[1,2,4]<=[8] last_tile_dim_replicate}'),
    ('f32[10,64]', '{devices=[4,1,2]<=[8] last_tile_dim_replicate}', '{replicated}'),
    ('f32[10,64]', '{devices=[8,1]<=[8]}', '{devices=[1,8]<=[8]}'),
    ('f32[10,64]', '{replicated}', '{devices=[4,2]<=[8]}'),
    ('f32[64,64]', '{devices=[4,1,2]<=[8] last_tile_dim_replicate}', '{devices=[2,1,4]<=[8] last_tile_dim_replicate}'),
    ('f32[64,64]', '{devices=[2,4]<=[8]}', '{devices=[4,1,2]<=[8] last_tile_dim_replicate}'),
    ('f32[64,64]', '{devices=[2,4]<=[8]}', '{devices=[8,1]0,2,4,6,1,3,5,7}'),
    ('f32[64,64,64]', '{devices=[2,4,1]<=[8]}', '{devices=[1,2,4]<=[8]}'),
    ('f32[64,64,64]', '{devices=[2,4,1]<=[8]}', '{devices=[4,1,2]<=[8]}'),
    ('f32[64,64,64]', '{devices=[2,2,2]<=[8]}', '{devices=[1,4,2]<=[8]}'),
    ('f32[64,64,64]', '{devices=[2,2,2]<=[8]}', '{devices=[2,2,2]<=[2,2,2]T(2,1,0)}'),
    ('f32[64,64]', '{devices=[4,1,2]<=[8] last_tile_dim_replicate}', '{devices=[1,2,4]<=[8] last_tile_dim_replicate}'),
    ('f32[64,64]', '{devices=[4,1,2]<=[8] last_tile_dim_replicate}', '{devices=[2,4]<=[8]}'),
    ('f32[64,64]', '{devices=[1,8]<=[8]}', '{devices=[2,1,4]<=[8] last_tile_dim_replicate}'),
    ('f32[64,64]', '{maximal device=3}', '{replicated}'),
    ('f32[64,64]', '{maximal device=3}', '{devices=[2,4]<=[8]}'),
    ('f32[64,64]', '{devices=[2,4]<=[8]}', '{maximal device=3}'),
    ('f32[16,4,10,8]', '{devices=[2,4,1,1]<=[8]}', '{devices=[2,1,1,1,4]<=[8] last_tile_dim_replicate}'),
    ('f32[6,64]', '{devices=[8,1]<=[8]}', '{replicated}'),
    ('f32[64,64]', '{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}', '{devices=[2,1,4]<=[8] last_tile_dim_replicate}'),
    # whole-dim gathers + all-to-all, slice + all-to-all, full-replicate fallback, random device orders
    ('f32[32,8,8]', '{devices=[2,2,2]<=[8]}', '{devices=[1,4,1,2]<=[8] last_tile_dim_replicate}'),
    ('f32[16,16,32]', '{devices=[4,1,2]<=[2,4]T(1,0)}', '{devices=[1,4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}'),
    ('f32[8,8,16]', '{devices=[1,2,1,4]<=[8] last_tile_dim_replicate}', '{devices=[1,1,8]<=[8]}'),
    ('f32[16,32]', '{devices=[1,4,2]<=[4,2]T(1,0) last_tile_dim_replicate}', '{devices=[8,1]<=[4,2]T(1,0)}'),
    ('f32[8,8]', '{devices=[2,2,2]<=[8] last_tile_dim_replicate}', '{devices=[8,1]<=[8]}'),
    ('f32[32,16,8]', '{devices=[2,2,2]<=[2,2,2]T(1,0,2)}', '{devices=[1,8,1]<=[8]}'),
    ('f32[32,32]', '{devices=[2,1,4]<=[8] last_tile_dim_replicate}', '{devices=[1,8]7,1,3,4,0,2,5,6}'),
    ('f32[16,16]', '{devices=[2,1,4]<=[4,2]T(1,0) last_tile_dim_replicate}', '{devices=[1,8]<=[8]}'),
    ('f32[8,8,32]', '{devices=[1,1,2,4]<=[8] last_tile_dim_replicate}', '{devices=[1,8,1]<=[8]}'),
    ('f32[16,32,16]', '{devices=[1,2,2,2]<=[2,4]T(1,0) last_tile_dim_replicate}', '{devices=[4,2,1]<=[8]}'),
    ('f32[32,32,16]', '{devices=[2,2,1,2]<=[8] last_tile_dim_replicate}', '{devices=[1,2,4]4,0,6,2,7,3,5,1}'),
    ('f32[64,64]', '{devices=[8,1]2,5,0,7,1,4,6,3}', '{devices=[2,4]<=[8]}'),
    # 4 replicas become 4 tiles across a permutation: XLA slices, then permutes 1/4 of the source tile (new user
    # 17's GNN; the plan permuted the source tile first, 4x the bytes)
    ('f32[16,512,256]', '{devices=[1,1,2,4]<=[8] last_tile_dim_replicate}', '{devices=[1,2,4]<=[8]}'),
] + [
    # partially replicated -> fully tiled (round 23): GSPMD slices the replication into the FIRST dim the source
    # does not split and the target splits by a multiple of it, then all-to-alls and permutes (transformer_train_step
    # 2x2x2 reshape.103/104/105.pin: the plan sliced into dim 0 and skipped the permute XLA emits, 65,536 B
    # predicted, 196,608 B XLA)
    ('f32[8,128,256]', '{devices=[2,1,2,2]<=[8] last_tile_dim_replicate}', '{devices=[4,2,1]<=[2,2,2]T(0,2,1)}'),
    ('f32[8,128,256]', '{devices=[2,1,2,2]<=[8] last_tile_dim_replicate}', '{devices=[4,1,2]<=[2,2,2]T(0,2,1)}'),
    ('f32[16,32,16]', '{devices=[2,1,2,2]<=[2,2,2]T(2,1,0) last_tile_dim_replicate}', '{devices=[4,2,1]<=[2,2,2]T(2,1,0)}'),
    ('f32[32,16,32]', '{devices=[1,4,1,2]<=[2,2,2]T(2,1,0) last_tile_dim_replicate}', '{devices=[4,1,2]<=[2,4]T(1,0)}'),
    ('f32[32,8,8]', '{devices=[1,2,2,2]<=[2,2,2]T(0,2,1) last_tile_dim_replicate}', '{devices=[2,4,1]<=[4,2]T(1,0)}'),
    ('f32[32,16,32]', '{devices=[2,2,1,2]<=[2,2,2]T(2,1,0) last_tile_dim_replicate}', '{devices=[1,4,2]<=[4,2]T(1,0)}'),
    # ... unless the source is the target shifted one dim right, same device order (ReshardPartialReplicateWithAllToAll):
    # one all-to-all, then a local slice
    ('f32[8,16,8]', '{devices=[1,1,4,2]<=[4,2]T(1,0) last_tile_dim_replicate}', '{devices=[1,4,2]<=[4,2]T(1,0)}'),
    ('f32[16,16]', '{devices=[1,4,2]<=[4,2]T(1,0) last_tile_dim_replicate}', '{devices=[4,2]<=[4,2]T(1,0)}'),
    ('f32[8,16,3,12]', '{devices=[1,4,1,1,2]<=[4,2]T(1,0) last_tile_dim_replicate}', '{devices=[4,1,1,2]<=[4,2]T(1,0)}'),
    # onto a less replicated PARTIAL target with no GSPMD pattern: replicate fully, then slice (not slice + all-to-all)
    ('f32[8,16,32]', '{devices=[1,2,1,4]<=[2,2,2]T(1,0,2) last_tile_dim_replicate}',
     '{devices=[2,1,2,2]<=[4,2]T(1,0) last_tile_dim_replicate}'),
    ('f32[32,32,32]', '{devices=[1,1,2,4]<=[2,2,2]T(1,0,2) last_tile_dim_replicate}',
     '{devices=[2,2,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}'),
]

COPY4 = [
    ('f32[32,128]', '{devices=[2,2]<=[4]}', '{replicated}'),
    ('f32[32,128]', '{devices=[2,2]<=[4]}', '{devices=[2,2]<=[2,2]T(1,0)}'),
    ('f32[32,128]', '{devices=[2,2]<=[4]}', '{devices=[4,1]<=[4]}'),
    ('f32[32,128]', '{devices=[2,1,2]<=[4] last_tile_dim_replicate}', '{devices=[1,2,2]<=[4] last_tile_dim_replicate}'),
    ('f32[32,128]', '{devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}', '{devices=[2,2]<=[4]}'),
    ('f32[32,128]', '{devices=[4,1]<=[4]}', '{devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}'),
    ('f32[6,128]', '{devices=[4,1]<=[4]}', '{replicated}'),
]

# (operand shape, operand sharding, result shape, result sharding) for a reshape, 8 devices
RESHAPE8 = [
    ('f32[8,4,10,16]', '{devices=[2,4,1,1]<=[8]}', 'f32[32,10,16]', '{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}'),
    ('f32[8,4,10,16]', '{devices=[2,1,1,1,4]<=[8] last_tile_dim_replicate}', 'f32[32,10,16]', '{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}'),
    ('f32[8,4,10,16]', '{devices=[2,4,1,1]<=[8]}', 'f32[32,10,16]', '{devices=[8,1,1]<=[8]}'),
    ('f32[32,10,16]', '{devices=[8,1,1]<=[8]}', 'f32[8,4,10,16]', '{devices=[2,4,1,1]<=[8]}'),
    ('f32[32,10,16]', '{devices=[8,1,1]<=[8]}', 'f32[8,4,10,16]', '{devices=[8,1,1,1]<=[8]}'),
    ('f32[8,4,10,16]', '{devices=[2,4,1,1]<=[8]}', 'f32[32,10,16]', '{devices=[2,1,4]<=[8]}'),
    ('f32[8,4,10,16]', '{devices=[2,4,1,1]<=[8]}', 'f32[32,10,16]', '{replicated}'),
    ('f32[64,32]', '{devices=[8,1]<=[8]}', 'f32[2048]', '{devices=[8]<=[8]}'),
    ('f32[64,32]', '{devices=[1,8]<=[8]}', 'f32[2048]', '{devices=[8]<=[8]}'),
    ('f32[2048]', '{devices=[8]<=[8]}', 'f32[64,32]', '{devices=[1,8]<=[8]}'),
    ('f32[16,16]', '{devices=[2,4]<=[8]}', 'f32[256]', '{devices=[8]<=[8]}'),
]

KNOWN_UNEVEN = [
    ("f32[10,64]", "{devices=[4,1,2]<=[8] last_tile_dim_replicate}", "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"),
    ("f32[10,6]", "{devices=[2,4]<=[8]}", "{devices=[4,2]<=[8]}"),
]


def batch_module(copies, reshapes, n: int) -> str:
    """One module holding every case: case i is ``%case_i = copy(%p_i)`` and reshape j is
    ``%reshape_j = reshape(%q_j)``; XLA tags what it inserts with ``metadata={op_name=...}``, so one
    compile answers for all of them."""
    lines, outs, shardings = [], [], []
    k = 0
    for i, (shape, src, dst) in enumerate(copies):
        lines.append(f"  %p_{i} = {shape} parameter({k}), sharding={src}")
        lines.append(f"  %case_{i} = {shape} copy(%p_{i}), sharding={dst}")
        outs.append((f"%case_{i}", shape))
        shardings.append(dst)
        k += 1
    for j, (a, s, b, o) in enumerate(reshapes):
        lines.append(f"  %q_{j} = {a} parameter({k}), sharding={s}")
        lines.append(f"  %reshape_{j} = {b} reshape(%q_{j}), sharding={o}")
        outs.append((f"%reshape_{j}", b))
        shardings.append(o)
        k += 1
    tuple_shape = "(" + ", ".join(sh for _, sh in outs) + ")"
    lines.append(f"  ROOT %out = {tuple_shape} tuple({', '.join(n_ for n_, _ in outs)}), "
                 f"sharding={{{', '.join(shardings)}}}")
    return f"HloModule reshard_cases, num_partitions={n}\n\nENTRY %main {{\n" + "\n".join(lines) + "\n}\n"


def _random_cases(seed: int, count: int):
    """Random resharding pairs on 8 devices (iota, transposed-iota and random device orders, partial
    replication), divisible dims; deterministic for a seed."""
    import random

    import numpy as np

    rng = random.Random(seed)

    def factorizations(n, k):
        if k == 1:
            yield (n,)
            return
        for f in range(1, n + 1):
            if n % f == 0:
                for rest in factorizations(n // f, k - 1):
                    yield (f,) + rest

    def sharding(rank):
        if rng.random() < 0.1:
            return H.replicated()
        tiles = rng.choice(list(factorizations(8, rank + 1)))
        r = rng.random()
        if r < 0.4:
            devs = np.arange(8)
        elif r < 0.8:
            shp = rng.choice([(2, 4), (4, 2), (2, 2, 2)])
            perm = list(range(len(shp)))
            rng.shuffle(perm)
            devs = np.arange(8).reshape(shp).transpose(perm).ravel()
        else:
            devs = np.array(rng.sample(range(8), 8))
        ta = devs.reshape(tiles)
        return H.tiled(ta.reshape(tiles[:-1])) if tiles[-1] == 1 else H.tiled(ta, last_tile_dim_replicate=True)

    out = []
    while len(out) < count:
        rank = rng.choice([1, 2, 2, 3])
        dims = [rng.choice([8, 16, 32]) for _ in range(rank)]
        a, b = sharding(rank), sharding(rank)
        if a != b:
            out.append((f"f32[{','.join(map(str, dims))}]", str(a), str(b)))
    return out


RANDOM8 = _random_cases(20261130, 60)


def _random_reshapes(seed: int, count: int):
    """Random reshapes (merges and splits of 2-4 dims) with random operand and result shardings on 8
    devices (iota or transposed device orders, partial replication), every split dividing its dim."""
    import random

    import numpy as np

    rng = random.Random(seed)

    def factorizations(n, k):
        if k == 1:
            yield (n,)
            return
        for f in range(1, n + 1):
            if n % f == 0:
                for rest in factorizations(n // f, k - 1):
                    yield (f,) + rest

    def sharding(dims):
        if rng.random() < 0.1:
            return H.replicated()
        options = [t for t in factorizations(8, len(dims) + 1) if all(d % x == 0 for d, x in zip(dims, t))]
        tiles = rng.choice(options)
        devs = np.arange(8) if rng.random() < 0.6 else np.arange(8).reshape(2, 4).T.ravel()
        ta = devs.reshape(tiles)
        return H.tiled(ta.reshape(tiles[:-1])) if tiles[-1] == 1 else H.tiled(ta, last_tile_dim_replicate=True)

    out = []
    while len(out) < count:
        a, b = [], []
        for _ in range(rng.choice([1, 2, 3])):
            f, x = rng.choice([2, 4, 8]), rng.choice([2, 4])
            if rng.random() < 0.5:
                a, b = a + [f, x], b + [f * x]
            else:
                a, b = a + [f * x], b + [f, x]
        if len(a) > 4 or len(b) > 4:
            continue
        out.append((f"f32[{','.join(map(str, a))}]", str(sharding(a)), f"f32[{','.join(map(str, b))}]",
                    str(sharding(b))))
    return out


RANDOM_RESHAPES8 = _random_reshapes(20261130, 40)


# 16 devices (2x2x4): where GSPMD finds no pattern it keeps the dims both sides split alike (grouping the devices on
# them) and replicates only the rest before slicing (round 23)
COPY16 = [
    ('f32[16,16,16]', '{devices=[2,2,1,4]<=[16] last_tile_dim_replicate}', '{devices=[2,1,4,2]<=[16] last_tile_dim_replicate}'),
    ('f32[16,16,16]', '{devices=[2,2,1,4]<=[16] last_tile_dim_replicate}', '{devices=[2,1,8]<=[16]}'),
    ('f32[16,16,16]', '{devices=[2,1,2,4]<=[16] last_tile_dim_replicate}', '{devices=[4,2,2]<=[16]}'),
]
MESH16 = DeviceMesh.parse("2x2x4")


@functools.lru_cache(maxsize=None)
def _xla(n: int):
    require_jax()
    from hloshard.xla_check import spmd_collectives

    if n == 8:
        text = batch_module(COPY8 + KNOWN_UNEVEN + RANDOM8, RESHAPE8 + RANDOM_RESHAPES8, 8)
    elif n == 16:
        text = batch_module(COPY16, [], 16)
    else:
        text = batch_module(COPY4, [], 4)
    (res,) = spmd_collectives([text], n)
    assert res.error is None, res.error
    return res


def _report(case):
    a, s, b, o = case
    return explain_reshape(parse_shape(a), parse_shape(b), H.parse(s), H.parse(o), MESH8)


def _norm_xla(cols):
    return [(c.kind, sorted(sorted(g) for g in c.replica_groups), sorted(c.source_target_pairs))
            for c in cols]


def _norm_plan(steps):
    return [(s.kind, sorted(sorted(g) for g in s.replica_groups), sorted(s.source_target_pairs))
            for s in steps if s.kind != "dynamic-slice"]


@pytest.mark.parametrize("i", range(len(COPY8)))
def test_copy_8_devices(i):
    shape, src, dst = COPY8[i]
    cols, ds = _xla(8).for_op(f"case_{i}")
    p = plan(shape, H.parse(src), H.parse(dst), MESH8)
    assert _norm_plan(p.steps) == _norm_xla(cols)
    assert any(s.kind == "dynamic-slice" for s in p.steps) == ds
    # and a collective-permute moves what XLA's does (its result's bytes): a slice goes first when it can
    assert [s.input_bytes for s in p.steps if s.kind == "collective-permute"] == \
        [parse_shape(c.shape).byte_size for c in cols if c.kind == "collective-permute"]


@pytest.mark.parametrize("i", range(len(COPY4)))
def test_copy_4_devices(i):
    shape, src, dst = COPY4[i]
    cols, ds = _xla(4).for_op(f"case_{i}")
    p = plan(shape, H.parse(src), H.parse(dst), MESH4)
    assert _norm_plan(p.steps) == _norm_xla(cols)
    assert any(s.kind == "dynamic-slice" for s in p.steps) == ds


@pytest.mark.parametrize("i", range(len(COPY16)))
def test_copy_16_devices(i):
    shape, src, dst = COPY16[i]
    cols, ds = _xla(16).for_op(f"case_{i}")
    p = plan(shape, H.parse(src), H.parse(dst), MESH16)
    assert _norm_plan(p.steps) == _norm_xla(cols)
    assert any(s.kind == "dynamic-slice" for s in p.steps) == ds


@pytest.mark.parametrize("i", range(len(RESHAPE8)))
def test_reshape_8_devices(i):
    cols, _ = _xla(8).for_op(f"reshape_{i}")
    report = _report(RESHAPE8[i])
    assert _norm_plan(report.plan.steps) == _norm_xla(cols)


@pytest.mark.parametrize("i", range(len(KNOWN_UNEVEN)))
def test_known_uneven_cases_are_flagged(i):
    shape, src, dst = KNOWN_UNEVEN[i]
    cols, _ = _xla(8).for_op(f"case_{len(COPY8) + i}")
    p = plan(shape, H.parse(src), H.parse(dst), MESH8)
    assert any("uneven" in n for n in p.notes)
    if i in REPADDED:
        # the padding shift GSPMD does after re-tiling an uneven dim is planned: same kinds, and the
        # permute moves one row of the f32[5,64] tile (256 bytes), as XLA's does
        assert sorted(s.kind for s in p.collectives) == sorted(c.kind for c in cols)
        assert [s.bytes_sent for s in p.steps if s.kind == "collective-permute"] == [256]
        return
    # GSPMD adds halo collective-permutes the plan does not list; the plan must say so
    assert [c.kind for c in cols].count("collective-permute") > [s.kind for s in p.steps].count("collective-permute")


#: KNOWN_UNEVEN cases whose padding shift the planner now predicts (``ReshardStep`` collective-permute)
REPADDED = (0,)


def test_random_reshardings_mostly_agree():
    """60 random reshardings in one module: the plan must equal XLA's collectives (kinds, replica
    groups, permutation pairs, dynamic-slice) on at least 90% (measured: 60 of 60 here, 95-100% per
    seed; the rest are GSPMD device-order choices inside partially replicated groups). Every plan is
    still correct: the shard simulation in test_reshard.py checks that for any pair."""
    res = _xla(8)
    base = len(COPY8) + len(KNOWN_UNEVEN)
    agree = 0
    for i, (shape, src, dst) in enumerate(RANDOM8):
        cols, ds = res.for_op(f"case_{base + i}")
        p = plan(shape, H.parse(src), H.parse(dst), MESH8)
        if _norm_plan(p.steps) == _norm_xla(cols) and any(s.kind == "dynamic-slice" for s in p.steps) == ds:
            agree += 1
    assert agree >= 0.9 * len(RANDOM8), f"only {agree} of {len(RANDOM8)} plans match XLA"


def test_random_reshapes_mostly_agree():
    """40 random reshapes: the explain plan (operand or result resharding, as GSPMD chooses) equals
    XLA's collectives on at least 80% (measured: 38 of 40 here, 90-95% over other seeds; the rest are
    GSPMD's own reshape tricks, e.g. gathering a different dim first)."""
    res = _xla(8)
    agree = 0
    for j, case in enumerate(RANDOM_RESHAPES8):
        cols, _ = res.for_op(f"reshape_{len(RESHAPE8) + j}")
        report = _report(case)
        agree += _norm_plan(report.plan.steps) == _norm_xla(cols)
    assert agree >= 0.8 * len(RANDOM_RESHAPES8), f"only {agree} of {len(RANDOM_RESHAPES8)} reshape plans match XLA"


def test_seed_against_shared_harness():
    """xla_check's collectives agree with the shared tests/xla_oracle.py harness on the seed module."""
    require_jax()
    from tests import xla_oracle

    report = _report(RESHAPE8[0])
    raw = xla_oracle.spmd_partition(xla_module_text(report), 8)
    theirs = [(c["kind"], sorted(sorted(g) for g in c["replica_groups"] or [])) for c in xla_oracle.collectives(raw)]
    assert theirs == [("all-gather", [[0, 1, 2, 3], [4, 5, 6, 7]])]
    assert [(k, g) for k, g, _ in _norm_plan(report.plan.steps)] == theirs
