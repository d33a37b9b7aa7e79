"""What the TPU compiler's SPMD partitioner is given: a written plan as the TPU pipeline rewrites it first.

The CPU backend partitions a module as written; the TPU compiler (libtpu 0.0.42.1, read off its
``after_tpu-spmd-partitioning`` dumps ahead of time for ``v5e:2x4``) simplifies the module before its
partitioner runs, and one of those rewrites changes what the partitioner moves:

* **a transposed dot is computed transposed** (XLA's algebraic simplifier turns
  ``transpose(dot(a, b))`` into ``dot(b, a)`` when the dot's only user is a transpose that swaps the
  two non-contracting dims of a dot with batch dims first and one non-contracting dim per operand).
  The new dot is derived from the old one -- it keeps the old dot's ``op_name`` **and its sharding**,
  whose tile dims now fall on the swapped dims -- and it replaces the transpose, whose own sharding is
  dropped.  So the partitioner computes the dot with the transpose of its written layout and hands the
  transpose's users the dot's written layout in the transposed dims, resharding there to what they
  read.  Measured on ``samples/transformer_train_step.propagated.hlo`` (GSPMD's plan): each weight
  gradient ``dot(f32[8,128,256] {data}, f32[8,128,1024] {data, model on dim 2})`` written
  ``[1,4]`` over ``model`` and transposed to the ``[4,1]`` its update reads: the CPU partitioner
  all-reduces ``f32[256,256]`` over ``data`` (262,144 ring bytes); the TPU's all-gathers the
  ``f32[4,128,1024]`` operand over ``model``, all-reduces ``f32[4,256,64]`` over ``data`` and
  all-to-alls ``f32[4,256,64]`` over ``model`` (1,835,008 + 196,608 ring bytes) -- 18 such dots, all
  of the 15.9 MB of ring bytes by which the TPU's partitioned program exceeds the CPU's (16.53 MB).

:func:`folded_transposes` finds the pairs; :func:`tpu_partitioned_view` returns a copy of the module
with the two shardings as the TPU's partitioner sees them (the dot: its written layout transposed;
the transpose: the dot's written layout), which ``evaluate_module`` then prices as written -- the
dot's operand resharding, its partial sums and the transpose users' resharding are priced by the same
strategies and resharding plans as any other plan.  Only for ``--device tpu-*`` reports
(``DeviceProfile.backend == 'tpu'``); the solver's objective does not use it.
"""

from __future__ import annotations

import numpy as np

from ..hlo import parse_module, print_module
from ..hlo.sharding import HloSharding


def _ints(instr, key: str) -> list[int]:
    v = instr.attrs.get(key)
    if v is None:
        return []
    if isinstance(v, (list, tuple)):
        return [int(x) for x in v]
    text = str(v).strip().strip("{}")
    return [int(x) for x in text.split(",") if x.strip()]


def _swap_perm(dot, transpose) -> list[int] | None:
    """The transpose's permutation when ``transpose(dot)`` is the rewritten form (batch dims first and kept in
    place, the last two output dims -- lhs's and rhs's one non-contracting dim each -- swapped); else None."""
    if dot.opcode != "dot" or len(dot.operands) != 2:
        return None
    lb, lc = _ints(dot, "lhs_batch_dims"), _ints(dot, "lhs_contracting_dims")
    rb, rc = _ints(dot, "rhs_batch_dims"), _ints(dot, "rhs_contracting_dims")
    lrank, rrank = len(dot.operands[0].shape.dims), len(dot.operands[1].shape.dims)
    if lrank - len(lb) - len(lc) != 1 or rrank - len(rb) - len(rc) != 1:
        return None
    nb = len(lb)
    perm = list(transpose.dimensions or [])
    want = list(range(nb)) + [nb + 1, nb]
    return perm if perm == want else None


def folded_transposes(module) -> list[tuple]:
    """``(dot, transpose)`` pairs of ``module`` that the TPU pipeline computes as one transposed dot: the
    transpose's operand is a dot whose only user it is, and it swaps the dot's two non-contracting
    output dims (batch dims first, one non-contracting dim per operand; :func:`_swap_perm`), both
    written with a tiled sharding (a replicated or unannotated one gives the partitioner nothing to
    transpose).  In computation order."""
    out = []
    for comp in module.computations:
        for t in comp.instructions:
            if t.opcode != "transpose" or len(t.operands) != 1:
                continue
            d = t.operands[0]
            if d.opcode != "dot" or len(d.users) != 1 or _swap_perm(d, t) is None:
                continue
            s = d.sharding
            if s is None or not getattr(s, "is_tiled", False) or s.has_manual_subgroup or t.sharding is None:
                continue
            out.append((d, t))
    return out


def transposed_layout(sh: HloSharding, perm: list[int]) -> HloSharding:
    """``sh`` (a tiled HloSharding of rank ``len(perm)``) with its data tile dims permuted by ``perm``
    (dim i takes ``sh``'s dim ``perm[i]``; replica / subgroup dims kept last): the layout a transpose by
    ``perm`` gives a value laid out as ``sh``."""
    ta = np.asarray(sh.tile_assignment)
    ta = np.transpose(ta, list(perm) + list(range(len(perm), ta.ndim)))
    return HloSharding.tiled(ta, last_tile_dim_replicate=sh.last_tile_dim_replicate,
                             last_tile_dims=sh.subgroup_types)


def tpu_partitioned_view(module):
    """A copy of ``module`` with the shardings the TPU's SPMD partitioner is given for each of
    :func:`folded_transposes`' pairs: the dot takes its written layout transposed by the transpose's
    permutation (the rewritten dot computes the transposed result under the old dot's tile dims), the
    transpose takes the dot's written layout (the rewritten dot replaces it; its readers reshard from
    that).  Returns ``(copy, pairs)`` with ``pairs`` the ``(dot name, transpose name)`` rewritten;
    ``(module, [])`` itself when there is none.  ``module`` is not changed."""
    pairs = folded_transposes(module)
    if not pairs:
        return module, []
    names = [(d.name, t.name) for d, t in pairs]
    copy = parse_module(print_module(module))
    by_name = {i.name: i for c in copy.computations for i in c.instructions}
    for dn, tn in names:
        d, t = by_name[dn], by_name[tn]
        written = d.sharding
        perm = list(t.dimensions or [])
        d.sharding = transposed_layout(written, perm)
        t.sharding = written
    return copy, names
