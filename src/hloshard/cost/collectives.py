"""Alpha-beta costs of collectives on a logical device mesh.

The default model is the one of XLA's (experimental, since deleted) auto-sharding pass,
``cluster_environment.cc``, reproduced from its formulas (see
``../shared/reference/xla_autosharding.md`` section 1.2) so our numbers are comparable with XLA's
``communication_resharding_costs``:

=====================  ===================================================================
collective             cost (``n`` = devices in one group, ``B`` = bytes, see each function)
=====================  ===================================================================
all-gather             ``round(alpha + beta * (n-1)/n * B) + 0.1``
all-reduce             ``round(alpha + beta * 2(n-1)/n * B) + 0.01``
reduce-scatter         ``round(alpha + beta * (n-1)/n * B) + 0.001``
all-to-all             ``round(alpha + beta * (n-1)/n/n * B * n/2) + 0.001``
collective-permute     ``max over (src, dst) pairs of sum over the mesh axes where the two
                       devices' coordinates differ of (alpha_i + beta_i * B)``  (no rounding)
=====================  ===================================================================

``round`` is C ``std::round`` (halves away from zero, :func:`round_half_away`), not Python's
banker's rounding. The constants 0.1 / 0.01 / 0.001 are XLA's tie-breakers (an all-gather is a hair
dearer than a reduce-scatter or an all-to-all moving the same bytes).

Units: byte counts are bytes **per device**; alpha is in cost units per collective (latency), beta
in cost units per byte (inverse bandwidth); every function returns cost units (floats).

Several mesh axes at once (a tensor dim split over mesh axes 0 and 1, gathered in one collective):
XLA's model defines this only for all-reduce (``AllReduceCost(B, d, d')``: alpha = max alpha,
beta = max beta, n = product of the axis sizes); we apply the same rule to every collective, except
on a device-priced mesh (``--device``) where the axes cross links of different prices (NVLink and
InfiniBand, ICI and DCN), or over one axis whose devices span nodes (``--mesh 16`` on 8-GPU nodes): such a
collective is priced over its link levels (:func:`link_levels`): on a GPU as the faster of a ring through the
levels (:func:`ring_link_cost`: NCCL's ring, paced by its slowest link) and the level-by-level schedule
(:func:`hierarchical_link_cost`: one ring per level, the slow level moving only the fast levels' shard), on a
TPU as the latter (:func:`level_schedule`, :func:`ring_schedules`).
``group_size`` (optional on every function): devices per replica group when the groups cover only a
sub-axis of the named mesh axes (e.g. pairs along an axis of size 4); n is then the group size.

HBM traffic (only when the mesh carries a device's roofline prices, ``mesh.roofline_prices``, i.e.
``--device``): a collective also reads its input from and writes its output to HBM on every device;
:func:`collective_hbm_bytes` gives those bytes, :func:`hbm_units_per_byte` their price, and each cost
function adds them to the link cost (:func:`with_hbm`; the model and its measurement are stated there).
Without a device the costs are exactly the formulas above.

Variadic (tuple) collectives, e.g. ``all-reduce((f32[8], f32[16]))``: pass a sequence of byte counts;
they pay one alpha and beta over the summed bytes (that saving is why variadic collectives exist,
see ``../shared/seeds/003_52935072611a13a9.txt``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from collections.abc import Iterable, Sequence
from typing import Protocol, Union

#: XLA's tie-break constants (cluster_environment.cc), added after rounding.
ALL_GATHER_TIE_BREAK = 0.1
ALL_REDUCE_TIE_BREAK = 0.01
REDUCE_SCATTER_TIE_BREAK = 0.001
ALL_TO_ALL_TIE_BREAK = 0.001

Bytes = Union[int, float, Sequence[Union[int, float]]]
Axes = Union[int, Iterable[int]]


class MeshLike(Protocol):  # what the cost functions need from hloshard.mesh.DeviceMesh
    shape: tuple[int, ...]
    alpha: tuple[float, ...]
    beta: tuple[float, ...]


def round_half_away(x: float) -> float:
    """C ``std::round``: round to the nearest integer, halves away from zero (2.5 -> 3, -2.5 -> -3).

    Python's ``round`` rounds halves to even (2.5 -> 2), which would change XLA's numbers.
    """
    if x >= 0:
        return float(math.floor(x + 0.5))
    return -float(math.floor(-x + 0.5))


def total_bytes(nbytes: Bytes) -> float:
    """Bytes of one (possibly variadic) collective: an int/float, or the sum of a sequence of them."""
    if isinstance(nbytes, (int, float)):
        b = float(nbytes)
    else:
        b = float(sum(nbytes))
    if b < 0 or math.isnan(b):
        raise ValueError(f"byte count must be >= 0, got {nbytes!r}")
    return b


def _axes(axes: Axes) -> tuple[int, ...]:
    if isinstance(axes, int):
        return (axes,)
    return tuple(int(a) for a in axes)


def axis_params(mesh: MeshLike, axes: Axes, group_size: int | None = None) -> tuple[float, float, int]:
    """``(alpha, beta, n)`` for one collective over ``axes`` of ``mesh``.

    One axis: that axis's alpha, beta and size. Several axes: max alpha, max beta and the product of
    the sizes (XLA's rule for ``AllReduceCost`` over two mesh dims). ``group_size`` overrides ``n``
    when the replica groups span only part of those axes (a sub-axis, e.g. groups of 2 along a mesh
    axis of size 4). Raises ValueError for an empty or out-of-range axis list.
    """
    ax = _axes(axes)
    if not ax:
        raise ValueError("a collective needs at least one mesh axis")
    for a in ax:
        if not 0 <= a < len(mesh.shape):
            raise ValueError(f"mesh axis {a} out of range for a mesh of shape {tuple(mesh.shape)}")
    alpha = max(float(mesh.alpha[a]) for a in ax)
    beta = max(float(mesh.beta[a]) for a in ax)
    n = 1
    for a in ax:
        n *= int(mesh.shape[a])
    if group_size is not None:
        n = int(group_size)
    if n < 1:
        raise ValueError(f"group size must be >= 1, got {n}")
    return alpha, beta, n


@dataclass(frozen=True)
class LinkLevel:
    """One level of a hierarchical collective: the mesh axes of one link price it spans.

    ``alpha``: its ring's latency in cost units, ``(n - 1)`` steps of the level's per-step latency (the
    largest ``alpha_axis / (size_axis - 1)`` of its axes: :func:`hloshard.devices.time_scale` makes that
    the link's latency); ``beta``: cost units per byte of its link; ``n``: devices of the group along it;
    ``axes``: the mesh axes."""

    alpha: float
    beta: float
    n: int
    axes: tuple = ()


def link_levels(mesh: MeshLike, axes: Axes, group_size: int | None = None) -> tuple[LinkLevel, ...] | None:
    """The link levels of one collective over ``axes`` of ``mesh``, fastest first, or None when the
    collective is one flat ring (:func:`axis_params`).

    Levels exist only on a mesh priced on a device (``mesh.roofline_prices`` set, ``--device``; the unit
    model, with or without ``--alpha`` / ``--beta``, is always flat) when the axes of more than one
    device that ``axes`` name carry different betas (links of different bandwidth: ``ici`` / ``dcn``), or
    one of them carries levels inside it (``mesh.axis_levels``: an axis whose devices span nodes,
    ``--mesh 16`` on 8-GPU nodes, :meth:`hloshard.mesh.DeviceMesh.apply_levels`).  The pieces of one beta
    (whole axes, or an axis' inner levels) form one level: ``n`` = the product of their sizes, ``alpha`` =
    ``(n - 1)`` x the largest per-step latency among them.  Levels are priced by :func:`level_schedule`.
    ``group_size`` (replica groups that cover part of the axes): the group's devices are given to the levels slowest first, ``n = gcd(devices left, level's
    devices)``; a group that does not factor so, or whose devices all fall in one level, is priced flat
    over that level alone (one level returned) or, if it does not factor, None.  Raises ValueError as
    :func:`axis_params` does."""
    if getattr(mesh, "roofline_prices", None) is None:
        return None
    ax = _axes(axes)
    if len(ax) < 2:   # one axis: one link unless levels run inside it (the common case: no validation here)
        inside = getattr(mesh, "axis_levels", None)
        if inside is None or not ax or not 0 <= ax[0] < len(inside) or inside[ax[0]] is None:
            return None
    key = (id(mesh), ax, group_size)
    hit = _LEVEL_CACHE.get(key)
    if hit is not None and hit[0] is mesh and hit[1] is mesh.alpha and hit[2] is mesh.beta:
        return hit[3]
    levels = _link_levels(mesh, ax, group_size)
    if len(_LEVEL_CACHE) > 4096:
        _LEVEL_CACHE.clear()
    _LEVEL_CACHE[key] = (mesh, mesh.alpha, mesh.beta, levels)   # keeps the mesh alive so its id is not reused
    return levels


_LEVEL_CACHE: dict = {}


def _link_levels(mesh, ax: tuple, group_size: int | None) -> tuple[LinkLevel, ...] | None:
    """:func:`link_levels` without its cache (``ax``: two or more axes, on a device-priced mesh)."""
    axis_params(mesh, ax, group_size)   # validates the axes and the group size
    inside = getattr(mesh, "axis_levels", None)
    pieces = []   # (axis, size, step, beta): each axis' own levels (an axis spanning nodes has two), else the axis
    for a in ax:
        size = int(mesh.shape[a])
        if size <= 1:
            continue
        own = inside[a] if inside is not None else None
        if own:
            pieces.extend((a, int(p.size), float(p.step), float(p.beta)) for p in own if int(p.size) > 1)
        else:
            pieces.append((a, size, float(mesh.alpha[a]) / (size - 1), float(mesh.beta[a])))
    if len({p[3] for p in pieces}) < 2:
        return None
    by_beta: dict[float, list] = {}
    for p in pieces:
        by_beta.setdefault(p[3], []).append(p)
    levels = []
    for beta in sorted(by_beta):
        group = by_beta[beta]
        n = math.prod(p[1] for p in group)
        step = max(p[2] for p in group)
        levels.append([step, beta, n, tuple(dict.fromkeys(p[0] for p in group))])
    total = math.prod(lv[2] for lv in levels)
    if group_size is not None and int(group_size) != total:
        left = int(group_size)
        for lv in reversed(levels):   # slowest first: a partial group spans as much of the slow links as it can
            lv[2] = math.gcd(left, lv[2])
            left //= lv[2]
        if left != 1:
            return None
        levels = [lv for lv in levels if lv[2] > 1]
    return tuple(LinkLevel(step * (n - 1), beta, n, ax) for step, beta, n, ax in levels)


def hierarchical_link_cost(kind: str, levels: Sequence[LinkLevel], nbytes: float) -> float:
    """Link cost (cost units, no HBM term, no rounding) of one collective run level by level over
    ``levels`` (:func:`link_levels`, fastest first; level ``i`` has ``alpha_i``, ``beta_i``, ``n_i``).

    ``nbytes`` ``B`` as each cost function takes it; ``B_i = B / (n_0 ... n_{i-1})``: the bytes per device
    a level handles once the faster levels have split them.

    =====================  ==================================================================================
    all-reduce             ``sum_{i<L} [2 alpha_i + beta_i 2(n_i-1)/n_i B_i] + alpha_L + beta_L 2(n_L-1)/n_L B_L``
                           (reduce-scatter over each faster level, all-reduce of the ``1/(n_0...)`` shard
                           over the slowest, all-gather back; ``L`` the slowest level)
    all-gather (result B)  ``sum_i [alpha_i + beta_i (n_i-1)/n_i B_i]``: the slow levels gather the fast
    reduce-scatter (in B)  levels' shards (``B_i``), the fast levels the rest
    all-to-all (group B)   ``sum_i [alpha_i + beta_i (n_i-1)/n_i b n_i/2]``, ``b = B / n`` the per-device
                           buffer: an all-to-all inside each level in turn, each moving the whole buffer
                           (nothing is reduced), with :func:`all_to_all_cost`'s ``n/2`` factor per level
    =====================  ==================================================================================

    Each level is a ring: ``n_i - 1`` steps, so ``alpha_i`` latency (an all-reduce's reduce-scatter and
    all-gather phases over a faster level each pay it; its slowest level pays it once, as a flat
    all-reduce does).  Per device: every device of the group runs the slow level's step at once on its
    own shard, over its own share of the slow link (a DGX H100 node has one 400 Gb/s NIC per GPU: the
    profiles' ``dcn`` bandwidth is that per-GPU share), so the slow step moves ``1/n_0`` of the bytes at
    the per-device bandwidth.

    Sources: the hierarchical all-reduce of Mikami et al., "Massively Distributed SGD: ImageNet/ResNet-50
    Training in a Flash" (2018, 2D-torus all-reduce: reduce-scatter in one dimension, all-reduce in the
    other, all-gather back), Horovod's ``HOROVOD_HIERARCHICAL_ALLREDUCE`` (NCCL reduce-scatter in the node,
    all-reduce across, NCCL all-gather in the node), Huawei HCCL's "Hierarchical Communication Principles"
    (all-reduce: reduce-scatter in the server, all-reduce across servers, all-gather in the server;
    all-gather / reduce-scatter one level after the other), DeepSpeed-MoE (Rajbhandari et al. 2022,
    section 5.3) and Tutel's 2D hierarchical all-to-all (intra-node then inter-node); XLA's SPMD
    partitioner emits the same decomposition itself when a plan reduces over ``model`` then ``data``
    (an HSDP gradient: an all-reduce in groups of 8, then one in groups of 2; new user 25b).  NCCL itself
    runs multi-channel rings or trees over both levels instead (NVIDIA/nccl-tests#196: on two nodes its
    tree can exceed the network bottleneck); this model prices the explicit hierarchical schedule of the
    libraries above, not NCCL's choice.
    Raises ValueError for another kind."""
    b = float(nbytes)
    if kind == "all-reduce":
        cost = 0.0
        for i, lv in enumerate(levels):
            frac = (lv.n - 1) / lv.n
            if i == len(levels) - 1:
                cost += lv.alpha + lv.beta * 2.0 * frac * b
            else:
                cost += 2.0 * lv.alpha + lv.beta * 2.0 * frac * b
                b /= lv.n
        return cost
    if kind in ("all-gather", "reduce-scatter"):
        cost = 0.0
        for lv in levels:
            cost += lv.alpha + lv.beta * (lv.n - 1) / lv.n * b
            b /= lv.n
        return cost
    if kind == "all-to-all":
        n = math.prod(lv.n for lv in levels)
        per_device = b / n
        return sum(lv.alpha + lv.beta * (lv.n - 1) / lv.n * per_device * lv.n / 2.0 for lv in levels)
    raise ValueError(f"not a hierarchical collective kind: {kind!r}")


def ring_link_cost(kind: str, levels: Sequence[LinkLevel], nbytes: float) -> tuple[float, float]:
    """``(link cost, latency)`` in cost units (no HBM term, no rounding) of one collective run as a single
    ring through ``levels`` (:func:`link_levels`, fastest = innermost first; ``n = n_0 n_1 ...``): what NCCL
    runs for one all-reduce / all-gather / reduce-scatter over a group that spans nodes (each ring enters
    and leaves a node once per channel, through NVLink inside it and a NIC between).

    ``nbytes`` ``B`` as each cost function takes it.  With ``f`` = ``2(n-1)/n`` (all-reduce) or ``(n-1)/n``
    (all-gather, reduce-scatter):

    * bandwidth ``f B max_i(beta_i / (n_0 ... n_{i-1}))``: every byte crosses every link of the ring, and the
      ring's steps are pipelined, so the slowest link sets the pace; a level-``i`` boundary is crossed by as
      many rings (channels) as a level-``i`` block has devices, each through its own device's share of the
      link (one NIC per GPU on DGX H100: two nodes of 8 cross at 8 x 50 GB/s = 400 GB/s, against NVLink's
      450 GB/s per GPU).  Source: NCCL's ring bandwidth (``src/graph/tuning.cc``, ``ncclTopoTuneModel``:
      bus bandwidth = channels x per-channel speed, algorithm bandwidth = bus bandwidth x n / nsteps) and
      nccl-tests' ``doc/PERFORMANCE.md`` (bus bandwidth ``B x 2(n-1)/n / t`` for all-reduce, ``(n-1)/n`` for
      all-gather / reduce-scatter, bounded by the slowest link of the ring);
    * latency: one pass of the ring, ``sum_i alpha_i (n_{i+1} ... n_last)`` (``alpha_i = (n_i - 1)`` step
      latencies of level ``i``; :func:`hloshard.devices.pieces_ring_latency`): the ``n - 1`` hops of a chunk,
      ``(n_last - 1)`` of them across the slowest boundary (two nodes of 8: 14 NVLink hops, 1 InfiniBand); NCCL's
      ``(nsteps - nInterSteps) x intraLat + nInterSteps x interLat``, counted once for an all-reduce as the
      flat formula counts ``(n - 1)`` (:func:`hloshard.devices.time_scale`).

    One level: the flat ring of :func:`axis_params`.  Raises ValueError for another kind (an all-to-all is
    no ring: :func:`hierarchical_link_cost`)."""
    if kind == "all-reduce":
        factor = 2.0
    elif kind in ("all-gather", "reduce-scatter"):
        factor = 1.0
    else:
        raise ValueError(f"not a ring collective kind: {kind!r}")
    n = math.prod(lv.n for lv in levels)
    latency, per_byte, below, above = 0.0, 0.0, 1, n
    for lv in levels:
        above //= lv.n
        latency += lv.alpha * above
        per_byte = max(per_byte, lv.beta / below)
        below *= lv.n
    return latency + factor * (n - 1) / n * float(nbytes) * per_byte, latency


def _hierarchical_latency(kind: str, levels: Sequence[LinkLevel]) -> float:
    if kind == "all-reduce":
        return sum(lv.alpha for lv in levels) + sum(lv.alpha for lv in levels[:-1])
    return sum(lv.alpha for lv in levels)


def level_schedule(kind: str, levels: Sequence[LinkLevel], nbytes: float,
                   ring: bool = True) -> tuple[float, float, str]:
    """``(link cost, latency, schedule)`` of one collective over link ``levels`` (:func:`link_levels`): with
    ``ring`` (a GPU: :func:`ring_schedules`) the faster of the ring through the levels (:func:`ring_link_cost`,
    ``'ring'``) and the level-by-level schedule (:func:`hierarchical_link_cost`, ``'levels'``) for an
    all-reduce, all-gather or reduce-scatter; else, and for an all-to-all, the level-by-level one.  The collective library picks, per collective and
    size, the algorithm its own model predicts fastest (NCCL: ``getAlgoInfo`` over ``ncclTopoTuneModel``'s
    ring and tree times, ``src/graph/tuning.cc``); the level-by-level schedule sends across the slow link the
    bytes NCCL's tree does on two nodes (one shard per device, nccl-tests#196) and is what XLA writes itself
    for a gradient reduced over ``model`` then ``data``.  On ``h100-sxm`` the ring wins a 4 MiB all-reduce over
    two nodes of 8 (55.66 against 62.80 us of link time: the same latency, the slow link's bytes spread over 8
    NICs), the levels win an all-gather of the same size (7 NVLink latencies, not 14) and groups with few
    devices per node (``4x4``'s outer axis: 2 NICs per node pace the ring).  Raises ValueError for an unknown
    kind."""
    hier = hierarchical_link_cost(kind, levels, nbytes)
    if kind == "all-to-all" or not ring:
        return hier, _hierarchical_latency(kind, levels), "levels"
    ring, ring_latency = ring_link_cost(kind, levels, nbytes)
    if ring < hier:
        return ring, ring_latency, "ring"
    return hier, _hierarchical_latency(kind, levels), "levels"


def ring_schedules(mesh) -> bool:
    """Whether a collective over several links of ``mesh`` may run as one ring through them
    (:func:`level_schedule`): on a GPU (``mesh.roofline_prices.profile.backend == 'gpu'``), where NCCL runs
    one collective over the whole group and picks ring or tree by its own model; not on a TPU, whose
    collectives across slices (DCN) no ring through the slices is documented for: they keep the
    level-by-level schedule XLA's partitioner itself writes (an HSDP gradient's two all-reduces), so the TPU
    estimates of a multi-slice mesh stay round 26's."""
    prices = getattr(mesh, "roofline_prices", None)
    return prices is not None and getattr(prices.profile, "backend", "gpu") == "gpu"


def collective_latency(mesh: MeshLike, kind: str, axes: Axes, group_size: int | None = None,
                       nbytes: float | None = None) -> float:
    """The latency (cost units) the cost function of ``kind`` charges one collective over ``axes``:
    with link levels (:func:`link_levels`) that of the schedule :func:`level_schedule` picks for ``nbytes``
    (the bytes as the cost function takes them; without them, the level-by-level schedule's: the sum of
    each level's ``alpha``, an all-reduce's faster levels twice), else :func:`axis_params`' alpha (the
    largest of the axes').  0.0 for no axes.  Raises ValueError for an out-of-range axis."""
    if not _axes(axes):
        return 0.0
    levels = link_levels(mesh, axes, group_size)
    if levels is None:
        return axis_params(mesh, axes)[0]
    if nbytes is None:
        return _hierarchical_latency(kind, levels)
    return level_schedule(kind, levels, float(nbytes), ring_schedules(mesh))[1]


def _level_total(levels: Sequence[LinkLevel]) -> int:
    return math.prod(lv.n for lv in levels)


def hbm_units_per_byte(mesh) -> float | None:
    """Cost units one byte of HBM traffic costs on ``mesh``'s device: ``1 / (sustained HBM bandwidth x
    seconds_per_unit)`` from ``mesh.roofline_prices`` (:class:`hloshard.cost.roofline.RooflinePrices`,
    set by ``--device``); None when the mesh carries no device (the unit model: no HBM term)."""
    prices = getattr(mesh, "roofline_prices", None)
    if prices is None:
        return None
    return 1.0 / (float(prices.profile.sustained_hbm_bandwidth) * float(prices.seconds_per_unit))


def collective_hbm_bytes(kind: str, nbytes: float, group_size: int) -> float:
    """HBM bytes one device reads and writes for one collective: its input plus its output.

    ``nbytes`` as the cost function of ``kind`` takes it, ``group_size`` ``n``:

    ========================  ===========================  =================================
    kind (``nbytes``)         read + written               per device
    ========================  ===========================  =================================
    all-gather (gathered B)   ``B/n + B``                  the shard in, the gathered result out
    reduce-scatter (input B)  ``B + B/n``                  the partial sums in, one shard out
    all-reduce (buffer B)     ``2 B``
    all-to-all (group's B)    ``2 B/n``                    ``B``: bytes the group holds together
                                                           (the resharding convention,
                                                           :func:`all_to_all_cost`)
    collective-permute (B)    ``2 B``                      the bytes each pair sends
    ========================  ===========================  =================================

    This is what the TPU compiler's ``HloCostAnalysis`` counts as a collective's ``bytes accessed``
    (operands plus result), measured with libtpu 0.0.42 ahead of time on ``v5e:2x4`` (BENCHMARKS.md,
    "Round 10: collectives' HBM traffic"). Raises ValueError for another kind."""
    n = max(int(group_size), 1)
    b = float(nbytes)
    if kind in ("all-gather", "reduce-scatter"):
        return b + b / n
    if kind in ("all-reduce", "collective-permute"):
        return 2.0 * b
    if kind == "all-to-all":
        return 2.0 * b / n
    raise ValueError(f"not a collective kind: {kind!r}")


def with_hbm(mesh, link_cost: float, kind: str, nbytes: float, group_size: int) -> float:
    """A collective's cost on ``mesh``: ``link_cost`` (alpha-beta units), plus, when the mesh carries a
    device (:func:`hbm_units_per_byte`), the time its HBM traffic (:func:`collective_hbm_bytes`) takes at
    the device's HBM bandwidth, in the same units.

    The model, stated: **a collective costs its link time plus its HBM time**.  The two are summed, not
    overlapped, for two reasons measured or stated elsewhere: (1) the TPU compiler's own time estimate
    (``optimal_seconds``) charges a collective alone exactly its HBM bytes at the HBM bandwidth it
    charges every memory-bound kernel (0.9 x 819 GB/s on v5e) and no link time at all, for all-gather,
    all-reduce, reduce-scatter, all-to-all and collective-permute, in groups of 2 and 8, from 0.26 MB to
    3.4 GB (ratio 0.9992 on every probe); (2) when a collective runs asynchronously beside compute its
    link time can hide, but its HBM traffic shares the HBM with the (mostly memory-bound) kernels and
    cannot: the step time's no-overlap model (:mod:`hloshard.cost.steptime`) sums both.  For one
    collective alone on real hardware the two stream together (a DMA reads HBM while the link sends),
    so this over-estimates an isolated collective by its HBM share (v5e ICI, 100 GB/s per axis vs
    737 GB/s sustained HBM: an all-gather's HBM time is 14% of its link time in a large group, 41% in
    a pair)."""
    per_byte = hbm_units_per_byte(mesh)
    if per_byte is None:
        return link_cost
    return link_cost + per_byte * collective_hbm_bytes(kind, nbytes, group_size)


def all_gather_cost(mesh: MeshLike, nbytes: Bytes, axes: Axes, group_size: int | None = None) -> float:
    """Cost of an all-gather over ``axes``: ``round(alpha + beta*(n-1)/n*B) + 0.1``.

    ``nbytes``: the **gathered (output) bytes per device** (XLA passes the result size), or a sequence
    of them for a variadic all-gather. Returns cost units. Source: XLA ``ClusterEnvironment::AllGatherCost``.
    """
    alpha, beta, n = axis_params(mesh, axes, group_size)
    b = total_bytes(nbytes)
    levels = link_levels(mesh, axes, group_size)
    if levels is None:
        link = alpha + beta * (n - 1) / n * b
    else:
        link, n = level_schedule("all-gather", levels, b, ring_schedules(mesh))[0], _level_total(levels)
    return round_half_away(with_hbm(mesh, link, "all-gather", b, n)) + ALL_GATHER_TIE_BREAK


def all_reduce_cost(mesh: MeshLike, nbytes: Bytes, axes: Axes, group_size: int | None = None) -> float:
    """Cost of an all-reduce over ``axes``: ``round(alpha + beta*2(n-1)/n*B) + 0.01``.

    ``nbytes``: bytes per device of the reduced buffer (input = output size), or a sequence for a
    variadic all-reduce. Several axes: max alpha, max beta, n = product of sizes (XLA's two-dim form).
    Returns cost units. Source: XLA ``ClusterEnvironment::AllReduceCost``.
    """
    alpha, beta, n = axis_params(mesh, axes, group_size)
    b = total_bytes(nbytes)
    levels = link_levels(mesh, axes, group_size)
    if levels is None:
        link = alpha + beta * 2 * (n - 1) / n * b
    else:
        link, n = level_schedule("all-reduce", levels, b, ring_schedules(mesh))[0], _level_total(levels)
    return round_half_away(with_hbm(mesh, link, "all-reduce", b, n)) + ALL_REDUCE_TIE_BREAK


def reduce_scatter_cost(mesh: MeshLike, nbytes: Bytes, axes: Axes, group_size: int | None = None) -> float:
    """Cost of a reduce-scatter over ``axes``: ``round(alpha + beta*(n-1)/n*B) + 0.001``.

    ``nbytes``: the **input (unscattered) bytes per device**. Returns cost units.
    Source: XLA ``ClusterEnvironment::ReduceScatterCost``.
    """
    alpha, beta, n = axis_params(mesh, axes, group_size)
    b = total_bytes(nbytes)
    levels = link_levels(mesh, axes, group_size)
    if levels is None:
        link = alpha + beta * (n - 1) / n * b
    else:
        link, n = level_schedule("reduce-scatter", levels, b, ring_schedules(mesh))[0], _level_total(levels)
    return round_half_away(with_hbm(mesh, link, "reduce-scatter", b, n)) + REDUCE_SCATTER_TIE_BREAK


def all_to_all_transposes(in_shape: Sequence[int], concat_dim: int, split_dim: int, k: int) -> tuple[int, list]:
    """How many of the two transposes XLA's SPMD partitioner writes around an all-to-all resharding move
    data, and the per-device dims each test read: ``(count, [(dim, size), ...])``.

    ``ReshardWithAllToAll`` (``spmd_partitioner.cc``) moves a factor ``k`` of the split from
    ``concat_dim`` to ``split_dim`` as: reshape ``split_dim`` into ``[k, size / k]``; **transpose** that
    ``k`` dim to the front; an all-to-all on dim 0; **transpose** it back to just before
    ``concat_dim``; reshape it into ``concat_dim``.  A transpose that moves a dim to or from the front
    is a bitcast when every dim before that position is of size 1 per device, else a kernel that reads
    and writes the per-device buffer (on the TPU a transposing loop fusion and a layout copy, read off
    ``attn_h6m4_d32_s64_fwd``'s optimised program, libtpu 0.0.42.1, BENCHMARKS.md round 16).
    ``in_shape``: the per-device (padded) dims before the all-to-all; the first transpose reads them
    before ``split_dim``, the second the dims before ``concat_dim`` after the exchange (``split_dim``
    then ``in_shape[split_dim] / k``)."""
    looked: list = []
    count = 0
    for d in range(split_dim):
        looked.append((d, int(in_shape[d])))
        if in_shape[d] > 1:
            count += 1
            break
    for d in range(concat_dim):
        size = -(-int(in_shape[d]) // k) if d == split_dim else int(in_shape[d])
        looked.append((d, size))
        if size > 1:
            count += 1
            break
    return count, looked


def all_to_all_cost(mesh: MeshLike, nbytes: Bytes, axes: Axes, group_size: int | None = None,
                    hbm_bytes: float | None = None, transposes: int = 0) -> float:
    """Cost of an all-to-all over ``axes``: ``round(alpha + beta*(n-1)/n/n*B*(n/2)) + 0.001``.

    ``nbytes``: bytes per device of the buffer being exchanged (XLA's resharding cost passes the
    **full unsharded** tensor bytes here; the planner passes what its callers document). The factor
    ``n/2`` is XLA's "penalty factor to match v100+nvlink". ``hbm_bytes``: with a device, the HBM
    bytes read and written per device (:func:`with_hbm`) when ``nbytes`` is not the group's bytes
    (default: :func:`collective_hbm_bytes`, ``2 B/n``); ``transposes``: with a device, the
    partitioner's transposes around it that move data (:func:`all_to_all_transposes`), each reading and
    writing the per-device buffer (``2 B/n`` more HBM bytes each; none without a device). Returns cost
    units. Source: XLA ``ClusterEnvironment::AllToAllCostUtil``.
    """
    alpha, beta, n = axis_params(mesh, axes, group_size)
    b = total_bytes(nbytes)
    levels = link_levels(mesh, axes, group_size)
    if levels is None:
        penalty = n / 2.0
        link = alpha + beta * (n - 1) / n / n * b * penalty
    else:
        link, n = hierarchical_link_cost("all-to-all", levels, b), _level_total(levels)
    if hbm_bytes is not None:   # the buffer's own bytes per device, read and written: 2 B_device = 2 B/n
        b = float(hbm_bytes) / 2.0 * n
    cost = with_hbm(mesh, link, "all-to-all", b, n)
    per_byte = hbm_units_per_byte(mesh) if transposes else None
    if per_byte is not None:   # each transposing copy reads and writes the per-device buffer B/n
        cost += per_byte * transposes * collective_hbm_bytes("all-to-all", b, n)
    return round_half_away(cost) + ALL_TO_ALL_TIE_BREAK


def mesh_coordinates(mesh, device: int) -> tuple[int, ...]:
    """Coordinates of ``device`` in ``mesh.device_ids``. Raises ValueError if absent."""
    import numpy as np

    hits = np.argwhere(np.asarray(mesh.device_ids) == device)
    if len(hits) != 1:
        raise ValueError(f"device {device} is not in the mesh")
    return tuple(int(c) for c in hits[0])


def collective_permute_cost(mesh, nbytes: Bytes, pairs: Iterable[tuple[int, int]]) -> float:
    """Cost of a collective-permute that moves ``nbytes`` per (source, target) pair.

    For each pair: the sum, over the mesh axes along which source and target coordinates differ,
    of ``alpha_i + beta_i * B``; the cost is the max over pairs (pairs run in parallel). A pair with
    source == target costs 0; no pairs cost 0. No rounding, no tie-break (as in XLA's
    ``ClusterEnvironment::CollectivePermuteCost``). ``mesh`` must have ``device_ids``. Returns cost units.
    """
    b = total_bytes(nbytes)
    coords = _coordinate_table(mesh)
    best = 0.0
    for src, dst in pairs:
        cs, cd = coords.get(int(src)), coords.get(int(dst))
        if cs is None or cd is None:
            raise ValueError(f"collective-permute pair ({src}, {dst}) names a device outside the mesh")
        cost = 0.0
        for i, (a, c) in enumerate(zip(cs, cd)):
            if a != c:
                cost += float(mesh.alpha[i]) + float(mesh.beta[i]) * b
        best = max(best, cost)
    if best > 0:   # some pair moves: its source reads and its target writes the bytes (with_hbm)
        best = with_hbm(mesh, best, "collective-permute", b, 1)
    return best


_COORD_CACHE: dict[int, tuple[object, dict[int, tuple[int, ...]]]] = {}


def _coordinate_table(mesh) -> dict[int, tuple[int, ...]]:
    """device id -> mesh coordinates (cached per mesh object; do not mutate the result)."""
    hit = _COORD_CACHE.get(id(mesh))
    if hit is not None and hit[0] is mesh:
        return hit[1]
    import numpy as np

    ids = np.asarray(mesh.device_ids)
    table = {int(ids[idx]): tuple(int(i) for i in idx) for idx in np.ndindex(*ids.shape)}
    if len(_COORD_CACHE) > 256:
        _COORD_CACHE.clear()
    _COORD_CACHE[id(mesh)] = (mesh, table)  # keeps the mesh alive so its id is not reused
    return table


def replicated_penalty(mesh: MeshLike) -> float:
    """XLA's ``GetDefaultReplicatedPenalty``: ``round(sum over mesh axes of all_reduce_cost(1 byte, axis))``.

    E.g. 2x4 with alpha (1,1), beta (0.01,1): round(1.01 + 3.01) = 4. Size-1 axes are skipped
    (XLA drops them from the mesh). Returns cost units.
    """
    total = 0.0
    for axis, size in enumerate(mesh.shape):
        if int(size) > 1:
            total += all_reduce_cost(mesh, 1, axis)
    return round_half_away(total)


COST_FUNCTIONS = {
    "all-gather": all_gather_cost,
    "all-reduce": all_reduce_cost,
    "reduce-scatter": reduce_scatter_cost,
    "all-to-all": all_to_all_cost,
}


def collective_cost(kind: str, mesh, nbytes: Bytes, axes: Axes = (), pairs=(),
                    group_size: int | None = None) -> float:
    """Dispatch by HLO opcode name (``all-gather``, ``all-reduce``, ``reduce-scatter``, ``all-to-all``,
    ``collective-permute``); ``dynamic-slice`` and other local ops cost 0. Raises ValueError for an
    unknown collective kind."""
    if kind == "collective-permute":
        return collective_permute_cost(mesh, nbytes, pairs)
    if kind in ("dynamic-slice", "slice", "reshape", "copy", "transpose"):
        return 0.0
    fn = COST_FUNCTIONS.get(kind)
    if fn is None:
        raise ValueError(f"unknown collective {kind!r}")
    return fn(mesh, nbytes, axes, group_size)


# ---------------------------------------------------------------------------------------------
# predicted collectives (what a strategy or a resharding plan expects XLA's partitioner to insert)
# ---------------------------------------------------------------------------------------------

#: collective kinds a prediction may name (XLA opcodes)
COLLECTIVE_KINDS = ("all-gather", "reduce-scatter", "all-reduce", "all-to-all", "collective-permute")


def ring_bytes(kind: str, nbytes: float, group_size: int) -> float:
    """Bytes one device moves under the ring formulas, independent of alpha and beta.

    ``nbytes`` per device: the all-gather's result bytes, the reduce-scatter's operand bytes, the
    all-reduce's / all-to-all's bytes, the bytes a collective-permute sends.  ``group_size`` ``n``:
    devices per replica group (ignored for a collective-permute).

    ========================  ======================
    all-gather                ``(n-1)/n * B``
    reduce-scatter            ``(n-1)/n * B``
    all-reduce                ``2(n-1)/n * B``
    all-to-all                ``(n-1)/n * B``
    collective-permute        ``B``
    ========================  ======================

    These are the byte counts the issue-8 measurement of XLA's partitioned HLO uses (bandwidth-optimal
    ring algorithms, e.g. Patarasuk & Yuan 2009 for all-reduce).  Raises ValueError for another kind.
    """
    if kind == "collective-permute":
        return float(nbytes)
    if kind not in COLLECTIVE_KINDS:
        raise ValueError(f"not a collective kind: {kind!r}")
    n = max(int(group_size), 1)
    frac = (n - 1) / n
    return float(nbytes) * (2.0 * frac if kind == "all-reduce" else frac)


def total_ring_bytes(collectives) -> float:
    """Ring-formula bytes per device of a sequence of :class:`PredictedCollective` (e.g.
    ``ReshardPlan.predicted_collectives()``): the sum of their :func:`ring_bytes`, the figure
    :mod:`hloshard.xla_compare` measures on XLA's partitioned HLO.  The one byte count that lint HS401
    and ``explain-reshape`` report for a resharding (the alpha-beta ``cost`` is a different quantity: an
    all-to-all's carries XLA auto-sharding's ``n/2`` penalty)."""
    return float(sum(c.ring_bytes for c in collectives))


@dataclass(frozen=True)
class PredictedCollective:
    """One collective a strategy (or resharding step) expects XLA's SPMD partitioner to insert.

    ``kind``: one of :data:`COLLECTIVE_KINDS`; ``mesh_axes``: the mesh axes its replica groups span
    (empty for a collective-permute); ``group_size``: devices per replica group; ``nbytes``: bytes per
    device as :func:`ring_bytes` takes them; ``replica_groups``: explicit groups when known (else empty:
    derive them from ``mesh_axes`` with ``DeviceMesh.replica_groups``).
    """

    kind: str
    mesh_axes: tuple = ()
    group_size: int = 1
    nbytes: int = 0
    replica_groups: tuple = ()

    @property
    def ring_bytes(self) -> float:
        """Ring-formula bytes per device (:func:`ring_bytes`)."""
        return ring_bytes(self.kind, self.nbytes, self.group_size)


def priced(kind: str, mesh, nbytes: Bytes, axes: Axes = (), pairs=(), group_size: int | None = None,
           cost_bytes: Bytes | None = None) -> tuple[float, PredictedCollective]:
    """``(cost, PredictedCollective)`` of one collective a strategy expects: the alpha-beta cost
    (:func:`collective_cost`) and the same collective as a prediction, so that a handler's ``comm`` and
    its ``Strategy.collectives`` always describe the same thing.

    ``nbytes`` per device as :func:`ring_bytes` takes it (all-gather: gathered bytes; reduce-scatter:
    input bytes; all-reduce / all-to-all: the buffer; collective-permute: bytes per pair).
    ``cost_bytes``: the bytes the cost formula takes when they differ from ``nbytes`` (a resharding
    all-to-all is priced over the bytes its group holds together, the planner's convention).  ``axes``: mesh
    axes of the replica groups (replica groups are derived from them when the mesh can, i.e. for a
    :class:`hloshard.mesh.DeviceMesh` and whole axes).  Raises ValueError for an unknown kind.
    """
    b = int(round(total_bytes(nbytes)))
    if kind == "all-to-all":   # its HBM traffic is the buffer's per-device bytes in and out, whatever cost_bytes
        cost = all_to_all_cost(mesh, nbytes if cost_bytes is None else cost_bytes, axes, group_size,
                               hbm_bytes=2.0 * total_bytes(nbytes))
    else:
        cost = collective_cost(kind, mesh, nbytes if cost_bytes is None else cost_bytes, axes, pairs, group_size)
    if kind == "collective-permute":
        moving = tuple((int(s), int(t)) for s, t in pairs if int(s) != int(t))
        ax = sorted({i for s, t in moving for i, (a, c) in enumerate(zip(_coordinate_table(mesh)[s],
                                                                      _coordinate_table(mesh)[t])) if a != c})
        return cost, PredictedCollective(kind, tuple(ax), 1, b, moving)
    ax = _axes(axes)
    n = 1
    for a in ax:
        n *= int(mesh.shape[a])
    groups: tuple = ()
    if group_size is None and hasattr(mesh, "replica_groups"):
        groups = _mesh_groups(mesh, ax)
    return cost, PredictedCollective(kind, ax, int(group_size or n), b, groups)


_GROUP_CACHE: dict = {}


def _mesh_groups(mesh, axes: tuple) -> tuple:
    """``mesh.replica_groups(axes)`` as a tuple of tuples (cached per mesh object and axes)."""
    key = (id(mesh), axes)
    hit = _GROUP_CACHE.get(key)
    if hit is not None and hit[0] is mesh:
        return hit[1]
    try:
        groups = tuple(tuple(int(d) for d in g) for g in mesh.replica_groups(axes))
    except (ValueError, TypeError):
        groups = ()
    if len(_GROUP_CACHE) > 1024:
        _GROUP_CACHE.clear()
    _GROUP_CACHE[key] = (mesh, groups)
    return groups


def latency_saving(mesh: MeshLike, col: PredictedCollective, share: float) -> float:
    """Cost units a collective ``col`` (a :class:`PredictedCollective` over mesh axes) saves when it
    pays only ``share`` (in [0, 1]) of its latency, the rest being paid by the collectives XLA's combiner
    merges it with (:mod:`hloshard.cost.combiner`): ``latency x (1 - share)``, the latency its cost
    function charges (:func:`collective_latency`: the largest alpha of ``col.mesh_axes``, or with link
    levels the sum of the levels' ring latencies).  0.0 for a collective
    over no mesh axis.  Raises ValueError for a share outside [0, 1]."""
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"latency share must be in [0, 1], got {share!r}")
    if not col.mesh_axes:
        return 0.0
    gsize = int(col.group_size) if col.group_size and col.group_size > 1 else None
    return collective_latency(mesh, col.kind, col.mesh_axes, gsize, col.nbytes) * (1.0 - share)
