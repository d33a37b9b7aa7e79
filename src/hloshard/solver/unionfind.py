"""Disjoint sets (union-find with path halving) over the node ids ``0 .. n-1``."""

from __future__ import annotations


class UnionFind:
    """``find(x)``: the representative of ``x``'s set; ``union(keep, gone)``: join ``gone``'s set
    into ``keep``'s (``keep``'s representative stays the representative)."""

    def __init__(self, n: int):
        self.parent = list(range(n))

    def find(self, x: int) -> int:
        parent = self.parent
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(self, keep: int, gone: int) -> None:
        self.parent[self.find(gone)] = self.find(keep)
