"""Validity checks of one written sharding (the HS1xx rules share them; the semantic rules use the
result to skip shardings they cannot reason about).

XLA's rules (``HloSharding::Validate`` and the SPMD partitioner's expectations, described in
``shared/reference/hlo_syntax.md`` section 6):

* a tile assignment ``devices=[d0,...,dk-1]`` holds ``prod(d)`` device ids: an explicit list of that
  length, or an iota ``<=[r...]T(p...)`` with ``prod(r) == prod(d)`` and ``p`` a permutation (HS102);
* in an SPMD module every tiled sharding names every partition exactly once: ``prod(d) ==
  num_partitions`` (HS101), no id twice (HS103), ids in ``[0, num_partitions)`` (HS104);
* ``k == rank + (1 if last_tile_dim_replicate) + len(last_tile_dims)`` (HS105);
* a tuple sharding has one element per leaf of the tuple shape, one for an empty tuple (HS106);
* ``maximal device=N`` needs ``0 <= N < num_partitions`` (``-1``, the host, is accepted) (HS107);
* a token holds no data and cannot be tiled (HS108).

``ctx`` is the file's :class:`~hloshard.lint.context.LintContext` (not imported: the context imports
this module for :attr:`~hloshard.lint.context.LintContext.unsound_sites`).
"""

from __future__ import annotations

from collections import Counter

from .shapes import leaf_shapes, sharding_arity
from .source import ShardingSite, ShardingSpec


def _fmt_ids(ids) -> str:
    """At most 8 ids, then the count (``ids`` is a sequence: a list or a range)."""
    if len(ids) > 8:
        return ", ".join(map(str, ids[:8])) + f", ... ({len(ids)} in all)"
    return ", ".join(map(str, ids))


def _leaf_problems(ctx, leaf: ShardingSpec, shape, where: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if leaf.kind == "tiled":
        for p in leaf.problems:
            out.append(("HS102", f"{where}{p}"))
        if leaf.num_devices is not None:
            n = leaf.num_devices
            if not leaf.is_iota:  # an iota is a permutation of 0..n-1: no duplicates
                counts = Counter(leaf.devices)
                dups = sorted(d for d, c in counts.items() if c > 1)
                if dups:
                    times = ", ".join(f"{d} ({counts[d]} times)" for d in dups[:8])
                    out.append(("HS103", f"{where}device id{'s' if len(dups) > 1 else ''} {times} "
                                         f"appear{'' if len(dups) > 1 else 's'} more than once in the tile assignment"))
            if ctx.num_partitions:
                if n != ctx.num_partitions:
                    src = ("--num-partitions" if ctx.options.num_partitions
                           else "num_partitions" if ctx.header_num_partitions else "the mesh")
                    out.append(("HS101", f"{where}the tile assignment holds {n} device id{'s' if n != 1 else ''} "
                                         f"but {src}={ctx.num_partitions}"))
            elif ctx.consistent_device_count and n != ctx.consistent_device_count:
                out.append(("HS101", f"{where}the tile assignment holds {n} device id{'s' if n != 1 else ''} but most shardings "
                                     f"in this module hold {ctx.consistent_device_count} (num_partitions is "
                                     f"not given)"))
            limit = ctx.device_count
            if leaf.is_iota:  # ids 0..n-1: the ones at or above the limit, without listing them all
                bad = range(limit, n) if limit is not None and n > limit else range(0)
            else:
                bad = sorted({d for d in leaf.devices if d < 0 or (limit is not None and d >= limit)})
            if len(bad):
                rng = f"[0, {limit})" if limit is not None else "non-negative"
                out.append(("HS104", f"{where}device id{'s' if len(bad) > 1 else ''} {_fmt_ids(bad)} "
                                     f"outside the partition range {rng}"))
        if shape is not None:
            if getattr(shape, "is_token", False):
                out.append(("HS108", f"{where}a token carries no data and cannot be tiled "
                                     f"(use {{replicated}} or {{maximal device=N}})"))
            elif not getattr(shape, "is_tuple", False):
                expected = shape.rank + leaf.num_subgroup_dims
                if len(leaf.tile_dims) != expected:
                    extra = ""
                    if leaf.last_tile_dim_replicate:
                        extra = " + 1 (last_tile_dim_replicate)"
                    elif leaf.last_tile_dims:
                        extra = f" + {len(leaf.last_tile_dims)} (last_tile_dims)"
                    out.append(("HS105", f"{where}tile assignment [{','.join(map(str, leaf.tile_dims))}] has "
                                         f"{len(leaf.tile_dims)} dims but {shape} needs {shape.rank}"
                                         + (f"{extra} = {expected}" if extra else "")))
    elif leaf.kind == "maximal":
        d = leaf.maximal_device
        limit = ctx.device_count
        if d < -1 or (limit is not None and d >= limit):
            rng = f"[0, {limit})" if limit is not None else "non-negative"
            out.append(("HS107", f"{where}maximal device={d} is outside the partition range {rng}"))
    return out


def site_problems(ctx, site: ShardingSite) -> list[tuple[str, str]]:
    """All (code, message) validity problems of one written sharding; cached on the context."""
    cache = ctx.__dict__.setdefault("_site_problem_cache", {})
    shape = site.instruction.shape if site.instruction is not None else None
    # the problems depend only on the sharding text and the shape: big dumps repeat both a lot
    key = (site.text, None if shape is None else str(shape))
    if key in cache:
        return cache[key]
    spec = site.spec
    out: list[tuple[str, str]] = []
    if spec.kind == "tuple":
        leaves = None
        if shape is not None:
            if not shape.is_tuple:
                out.append(("HS106", f"tuple sharding with {len(spec.elements)} elements on the non-tuple "
                                     f"shape {shape}"))
            else:
                arity = sharding_arity(shape)
                if len(spec.elements) != arity:
                    out.append(("HS106", f"tuple sharding has {len(spec.elements)} elements but the shape "
                                         f"{shape} has {arity} leaves"))
                else:
                    leaves = leaf_shapes(shape) or [None]
        for i, elem in enumerate(spec.elements):
            out.extend(_leaf_problems(ctx, elem, leaves[i] if leaves else None, f"tuple element {i}: "))
    elif shape is not None and shape.is_tuple:
        # one sharding for every leaf: report each distinct problem once
        seen = set()
        for leaf_shape in leaf_shapes(shape):
            for code, msg in _leaf_problems(ctx, spec, leaf_shape, ""):
                if (code, msg) not in seen:
                    seen.add((code, msg))
                    out.append((code, msg))
        if not leaf_shapes(shape):
            out.extend(_leaf_problems(ctx, spec, None, ""))
    else:
        out.extend(_leaf_problems(ctx, spec, shape, ""))
    cache[key] = out
    return out


def problems_by_code(ctx) -> dict[str, list[tuple[ShardingSite, str, int]]]:
    """Every site's problems grouped by code: ``code -> [(site, message, index among the site's
    problems of that code)]``, in site order. Computed once per context."""
    cached = ctx.__dict__.get("_problems_by_code")
    if cached is None:
        cached = {}
        for site in ctx.sites:
            counts: dict[str, int] = {}
            for code, msg in site_problems(ctx, site):
                n = counts.get(code, 0)
                counts[code] = n + 1
                cached.setdefault(code, []).append((site, msg, n))
        ctx.__dict__["_problems_by_code"] = cached
    return cached


def site_findings(rule, ctx):
    """Yield ``rule``'s findings over every written sharding (the HS1xx rules' evaluate)."""
    for site, msg, n in problems_by_code(ctx).get(rule.code, ()):
        yield rule.finding(ctx, site, msg, key=str(n))
