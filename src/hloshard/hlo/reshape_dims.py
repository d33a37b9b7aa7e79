"""The dim groups of an HLO reshape: runs of consecutive operand and result dims holding the same
elements (``[32,16,1000,256] -> [512,1000,256]``: ``(32,16) -> (512)``, ``(1000) -> (1000)``,
``(256) -> (256)``).  Shape arithmetic only; used by the reshape sharding inference
(:mod:`hloshard.cost.reshape`, which re-exports both names) and by the mesh refinement
(:func:`hloshard.mesh.refine_for_module`: sub-axes a reshape can split onto).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

from ..errors import InputError

__all__ = ["ReshapeGroup", "reshape_groups"]


@dataclasses.dataclass(frozen=True)
class ReshapeGroup:
    """Consecutive input dims ``in_dims`` and output dims ``out_dims`` holding the same elements."""

    in_dims: tuple[int, ...]
    out_dims: tuple[int, ...]


def reshape_groups(in_dims: Sequence[int], out_dims: Sequence[int]) -> list[ReshapeGroup]:
    """Split a reshape into minimal groups of consecutive dims with equal element counts.

    Size-1 dims that fall between groups get their own group (with an empty other side).
    Raises InputError when the element counts differ.
    """
    a, b = list(map(int, in_dims)), list(map(int, out_dims))
    if math.prod(a) != math.prod(b):
        raise InputError(f"reshape changes the element count: [{','.join(map(str, a))}] has "
                         f"{math.prod(a)} elements, [{','.join(map(str, b))}] has {math.prod(b)}")
    if math.prod(a) == 0:
        return [ReshapeGroup(tuple(range(len(a))), tuple(range(len(b))))]
    groups: list[ReshapeGroup] = []
    i = j = 0
    while i < len(a) or j < len(b):
        if i < len(a) and a[i] == 1:
            groups.append(ReshapeGroup((i,), ()))
            i += 1
            continue
        if j < len(b) and b[j] == 1:
            groups.append(ReshapeGroup((), (j,)))
            j += 1
            continue
        gi, gj = [i], [j]
        pa, pb = a[i], b[j]
        i += 1
        j += 1
        while pa != pb:
            if pa < pb:
                gi.append(i)
                pa *= a[i]
                i += 1
            else:
                gj.append(j)
                pb *= b[j]
                j += 1
        # trailing size-1 dims stay in their own groups
        groups.append(ReshapeGroup(tuple(gi), tuple(gj)))
    return groups
