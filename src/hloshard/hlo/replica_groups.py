"""Replica-group validity: the one check shared by lint (HS304) and ``hloshard combine``.

A collective's ``replica_groups`` are valid when (``shared/reference/hlo_syntax.md`` section 5.9):
``{}`` (one group of every participant), or every group is non-empty, all groups are equally large
(all-gather / reduce-scatter multiply / divide by *the* group size), no id appears twice across the
groups, and every id lies in ``[0, bound)`` where ``bound`` depends on the id space of the collective's
mode (:func:`group_mode`, :func:`id_bound`).

The iota form ``[G,S]<=[...]T(...)`` names every id of ``range(G*S)`` exactly once, so it is judged
from ``G`` and ``S`` alone in O(1), never expanded (a ``[1000,1000]`` form would be 10^6 Python ints).

Callers format the structured :class:`GroupProblem` list in their own words; :func:`replica_group_problems`
gives the plain strings ``hloshard combine`` prints.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from .attributes import ReplicaGroups

#: The four collective group modes of XLA (``CollectiveOpGroupMode``), by the ids groups name.
MODES = ("cross_replica", "cross_replica_and_partition", "cross_partition", "flattened_id")


def group_mode(has_channel_id: bool, use_global_device_ids: bool, family: str) -> str:
    """The group mode of a collective: no channel_id -> ``cross_replica`` (replica ids); channel_id
    with ``use_global_device_ids=true`` -> ``flattened_id`` (``replica * num_partitions + partition``);
    otherwise ``cross_partition`` (partition ids) for all-to-all / collective-permute, else
    ``cross_replica_and_partition`` (replica ids). ``family`` is the opcode without ``-start``."""
    if not has_channel_id:
        return "cross_replica"
    if use_global_device_ids:
        return "flattened_id"
    if family in ("all-to-all", "collective-permute"):
        return "cross_partition"
    return "cross_replica_and_partition"


def id_bound(mode: str, num_replicas: int | None, num_partitions: int | None) -> int | None:
    """Exclusive upper bound of the ids replica groups may name in ``mode``, following XLA's HLO
    verifier; None when unknown or unchecked.

    Replica ids (``cross_replica``, ``cross_replica_and_partition``) are bounded by ``num_replicas``
    only when it is above 1: with one replica XLA's verifier does not check them, and neither does
    this function. Partition ids by ``num_partitions``; flattened ids by their product (None when
    ``num_partitions`` is unknown). Raises ValueError for an unknown mode.
    """
    r = num_replicas or 1
    if mode in ("cross_replica", "cross_replica_and_partition"):
        return r if r > 1 else None
    if mode == "cross_partition":
        return num_partitions
    if mode == "flattened_id":
        return r * num_partitions if num_partitions else None
    raise ValueError(f"unknown collective group mode {mode!r}; expected one of {', '.join(MODES)}")


@dataclass(frozen=True)
class GroupProblem:
    """One thing wrong with replica groups.

    ``kind``: ``"empty"`` (``items``: indices of empty groups; for an iota form ``items`` is ``()`` and
    ``detail`` is ``"no groups"`` or ``"group size 0"``), ``"sizes"`` (``items``: the distinct group
    sizes), ``"dups"`` (``items``: ids named more than once) or ``"range"`` (``items``: ids ``< 0`` or
    ``>= bound``; ``largest`` the largest id named). ``items`` is sorted and holds at most ``limit``
    entries; ``count`` is how many there are in all.
    """

    kind: str
    items: tuple[int, ...]
    count: int
    detail: str = ""
    largest: int | None = None


def check_groups(groups: Sequence[Sequence[int]] | None, bound: int | None, *,
                 iota_shape: tuple[int, int] | None = None, limit: int = 8) -> list[GroupProblem]:
    """What is wrong with replica groups; ``[]`` when valid.

    ``groups``: the explicit groups (list of lists of ids); ``[]`` / None means ``{}`` (everyone), which
    is valid. ``iota_shape``: ``(G, S)`` of an iota form ``[G,S]<=[...]`` -- when given, ``groups`` is
    ignored and the check is O(1) (an iota form names ``range(G*S)`` once each, so only emptiness and the
    range can be wrong; unlike ``{}``, ``G == 0`` or ``S == 0`` is an empty list of groups). ``bound``:
    exclusive id bound (:func:`id_bound`); None flags only negative ids. Problems come in the order
    empty, sizes, dups, range.
    """
    if iota_shape is not None:
        g, s = iota_shape
        if g == 0 or s == 0:
            return [GroupProblem("empty", (), 0, "no groups" if g == 0 else "group size 0")]
        n = g * s
        if bound is not None and n > bound:
            return [GroupProblem("range", tuple(range(bound, min(n, bound + limit))), n - bound, largest=n - 1)]
        return []
    if not groups:
        return []
    out: list[GroupProblem] = []

    def problem(kind: str, values, **kw) -> GroupProblem:
        values = sorted(values)
        return GroupProblem(kind, tuple(values[:limit]), len(values), **kw)

    empty = [i for i, grp in enumerate(groups) if not grp]
    if empty:
        out.append(problem("empty", empty))
    sizes = {len(grp) for grp in groups if grp}
    if len(sizes) > 1:
        out.append(problem("sizes", sizes))
    counts = Counter(i for grp in groups for i in grp)
    dups = [i for i, c in counts.items() if c > 1]
    if dups:
        out.append(problem("dups", dups))
    bad = [i for i in counts if i < 0 or (bound is not None and i >= bound)]
    if bad:
        out.append(problem("range", bad, largest=max(counts)))
    return out


def describe(p: GroupProblem, bound: int | None, text: str | None = None) -> str:
    """``p`` as one sentence (combine's wording). ``text``: the iota form as written, for its problems."""
    def ids() -> str:
        more = p.count - len(p.items)
        return ", ".join(map(str, p.items)) + (f" (and {more} more)" if more > 0 else "")

    plural = p.count > 1
    if p.kind == "empty":
        if p.detail:
            return f"replica groups {text} are empty ({p.detail})"
        return f"replica group{'s' if plural else ''} {ids()} {'are' if plural else 'is'} empty"
    if p.kind == "sizes":
        return f"replica groups have different sizes {list(p.items)}; all groups must be equally large"
    if p.kind == "dups":
        return f"id{'s' if plural else ''} {ids()} appear{'' if plural else 's'} more than once in the replica groups"
    rng = f"[0, {bound})" if bound is not None else "non-negative ids"
    if text is not None:
        return f"replica groups {text} name ids up to {p.largest}, outside {rng}"
    return f"replica group id{'s' if plural else ''} {ids()} outside {rng}"


def replica_group_problems(replica_groups, bound: int | None = None, limit: int = 8) -> list[str]:
    """:func:`check_groups` of a :class:`~hloshard.hlo.attributes.ReplicaGroups` (any form; the iota
    form is judged from ``[G,S]`` without expansion) or a list of lists of ids, as sentences
    (:func:`describe`); ``[]`` when valid."""

    if isinstance(replica_groups, ReplicaGroups):
        shape = replica_groups.iota_shape
        if shape is not None:
            return [describe(p, bound, replica_groups.text)
                    for p in check_groups(None, bound, iota_shape=shape, limit=limit)]
        replica_groups = replica_groups.groups
    groups = [list(grp) for grp in replica_groups]
    return [describe(p, bound) for p in check_groups(groups, bound, limit=limit)]
