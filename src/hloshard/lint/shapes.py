"""Leaf shapes as tuple shardings count them; below :mod:`.context` and :mod:`.validity` (both use them,
:mod:`.context` re-exports them).
"""

from __future__ import annotations

__all__ = ["leaf_shapes", "sharding_arity"]


def leaf_shapes(shape) -> list:
    """Every non-tuple subshape in pre-order (arrays *and* tokens), the order tuple shardings use.
    An empty tuple has no leaves."""
    if getattr(shape, "is_tuple", False):
        out = []
        for sub in shape.tuple_shapes:
            out.extend(leaf_shapes(sub))
        return out
    return [shape]


def sharding_arity(shape) -> int:
    """Number of elements a tuple sharding of ``shape`` must have (1 for an empty tuple, XLA's rule)."""
    return max(1, len(leaf_shapes(shape)))
