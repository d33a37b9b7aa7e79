"""The step time of a plan in seconds (``cost`` / ``solve`` with ``--device``, ``auto_shard(device=)``): the
estimated step time, its breakdown, MFU and the link class of each mesh axis, as report fields
(:func:`plan_timing`); the summary's line is :func:`hloshard.summary.step_time_line`.

The figures (:func:`plan_timing`):

* **compute**: the roofline of every instruction the plan runs (:mod:`hloshard.cost.roofline`): flops of
  its shard (the chosen strategy's compute; fused-attention calls from their operand shapes,
  :func:`hloshard.cost.flops.attention_flops`, divided like their output) over the device's peak for its
  dtype, against the HBM bytes it reads and writes (per-device sizes under the plan's shardings, the
  memory model's fusion rule) over the HBM bandwidth; loop bodies once per trip;
* **communication** and **resharding**: the cost model's figures on the mesh the device profile priced
  (:func:`hloshard.devices.time_scale`: per-axis ring alpha / beta of the link each axis crosses), in
  seconds;
* step time, overlap and MFU: :func:`hloshard.cost.steptime.step_time` (no-overlap estimate, and the
  fully-overlapped bound beside it).

A module that is already a per-device program (a collective across partitions and no manual region, e.g. the corpus' GPU train steps: :func:`hloshard.autoshard.is_per_device_program`) runs whole on every device:
it is priced with every instruction replicated on the mesh (:func:`hloshard.autoshard.replicated_evaluation`, as ``cost`` prices it), so compute is
the whole program's and each written collective costs what its replica groups cross (a group inside one
node on the fast links); model flops for MFU are then one device's share, and the whole job's are that
times the device count.  Otherwise model flops are :func:`hloshard.cost.flops.model_flops` of the module.
"""

from __future__ import annotations

from .autoshard.apply import instruction_sharding
from .autoshard.build import edge_buffers
from .autoshard.evaluate import evaluate_module, replicated_evaluation
from .cost.collectives import collective_hbm_bytes
from .cost.flops import FUSED_ATTENTION_TARGETS, attention_flops, matmul_flops, model_flops
from .cost.memory import bytes_per_device
from .cost.roofline import (PREFETCH_COPY_FACTOR, PREFETCH_MAX_BYTES, RooflineRow, instruction_peak, roofline,
                             shared_intermediates, take_bytes)
from .cost.steptime import step_time
from .devices import node_spans
from .cost.tpu_fusion import dot_dot_reader, fusion_rule, gather_counted_bytes
from .cost.tpu_layout import padded_bytes_per_device
from .cost.tpu_partitioner import update_relayouts
from .hlo.partitioned import is_per_device_program
from .strategy.base import COMPUTE_COST_PER_FLOP, split_epilogue_bytes, windowed_dot_bytes
from .xla_compare import predicted_collectives

__all__ = ["plan_timing", "plan_roofline", "plan_collective_hbm_bytes", "body_once"]


def plan_roofline(result, module, profile=None):
    """``(Roofline, result priced, per_device_program)`` of the plan ``result`` of ``module`` (module
    docstring; a per-device program is re-evaluated replicated).  ``profile``: the
    :class:`hloshard.devices.DeviceProfile` whose peaks and HBM bandwidth give the seconds (None: flops
    and bytes only, the seconds are then meaningless)."""
    per_device = is_per_device_program(module)
    if per_device and result.method != "per-device":   # cost / diff / explain priced it so already
        result = replicated_evaluation(module, result.graph.mesh)
    elif _pinned_after_build(result, module):
        # solve's coarse fallback: its plan was written with pins and not re-priced (the fine build had
        # passed the deadline); its graph no longer matches the module, so price the written module on
        # the graph's (coarse) mesh, as the written module of any other solve is priced
        result = evaluate_module(module, result.graph.mesh)
    graph, choice = result.graph, result.choice
    node_flops: dict = {}
    for v, g in enumerate(graph.nodes):
        st = g.strategies[int(choice[v])]
        node_flops[id(g.instr)] = node_flops.get(id(g.instr), 0.0) + st.flop_count()
    sizes: dict = {}
    per_device_bytes = padded_bytes_per_device if fusion_rule(profile).tiled_layout else bytes_per_device

    def size_of(instr) -> float:
        key = id(instr)
        if key not in sizes:
            try:
                sharding = instruction_sharding(graph, instr, choice) if instr in graph.positions else instr.sharding
                sizes[key] = per_device_bytes(instr.shape, sharding)
            except (KeyError, ValueError, IndexError, AttributeError):
                sizes[key] = instr.shape.byte_size if instr.shape.is_array else 0
        return sizes[key]

    def flops_of(instr) -> float:
        if instr.custom_call_target in FUSED_ATTENTION_TARGETS:
            full = attention_flops(instr)
            whole = instr.shape.byte_size if instr.shape.is_array else sum(l.byte_size for l in instr.shape.leaves())
            return full * (size_of(instr) / whole if whole else 1.0)
        return node_flops.get(id(instr), 0.0)

    def tile_of(instr):
        try:
            sharding = instruction_sharding(graph, instr, choice) if instr in graph.positions else instr.sharding
            return tuple(instr.shape.dims) if sharding is None or not sharding.is_tiled else \
                tuple(sharding.tile_shape(instr.shape.dims))
        except (KeyError, ValueError, IndexError, AttributeError):
            return None

    def peak_of(instr) -> float:
        return 1.0 if profile is None else instruction_peak(instr, profile)

    roof = roofline(graph.schedule, flops_of=flops_of, size_of=size_of, executions_of=graph.ctx.weight,
                    peak_of=peak_of, hbm_bandwidth=1.0 if profile is None else profile.sustained_hbm_bandwidth,
                    fusion=fusion_rule(profile), tile_of=tile_of,
                    vmem_bandwidth=None if profile is None else getattr(profile, "vmem_bandwidth", None),
                    kernel_overhead=0.0 if profile is None else getattr(profile, "kernel_overhead_s", 0.0))
    if not per_device:   # a per-device program's collectives are instructions: already rows of the roofline
        roof.collective_bytes = plan_collective_hbm_bytes(result)
        roof.hbm_bytes += roof.collective_bytes
        roof.collective_bytes_once = plan_collective_hbm_bytes(result, once=True)
    # the layout copies the memory model counts (autoshard.build.edge_buffers: dot operand copies and
    # relayouts of gathered operands): a kernel reading and writing the copy, memory-bound
    bandwidth = 1.0 if profile is None else profile.sustained_hbm_bandwidth
    copies: list = []
    if fusion_rule(profile).relayout_copies:   # not on a TPU (cost.tpu_fusion.FusionRule.relayout_copies)
        edge_buffers(graph, choice, copies)
    # the TPU's windowed einsum of a reduce-scattered dot (cost.tpu_fusion.windowed_einsum_bytes):
    # re-reads and a layout copy, memory-bound, as the objective prices them (strategy.base)
    fusion = fusion_rule(profile)
    # and a dot whose partial sums the plan all-reduces: its epilogue as a kernel of its own
    # (cost.tpu_fusion.reduced_epilogue_bytes), as the objective prices it (strategy.base.split_epilogue_bytes)
    for v, g in enumerate(graph.nodes):
        if g.instr.opcode not in ("dot", "convolution"):
            continue
        st = g.strategies[int(choice[v])]
        for kind, extra in (("windowed-einsum", windowed_dot_bytes(g.instr, st, g.ops(), graph.ctx.minfo, fusion)),
                            ("split-epilogue", split_epilogue_bytes(g.instr, st, graph.ctx.minfo, fusion,
                                                                    size_of(g.instr)))):
            if extra:
                n = float(graph.ctx.weight(g.instr))
                moved = extra * n
                roof.hbm_bytes += moved
                roof.seconds += moved / bandwidth
                roof.memory_bound_s += moved / bandwidth
                roof.rows.append(RooflineRow(g.instr.name, kind, n, 0.0, moved, moved / bandwidth, "memory"))
    # the TPU's dot-dot fusion (cost.tpu_fusion.dot_dot_reader) where the plan puts no collective between
    _dot_dot_fusions(graph, choice, fusion, roof, size_of, peak_of, bandwidth)
    if profile is not None and getattr(profile, "megacore", False):
        _megacore_copies(graph, fusion, roof, size_of)
    if fusion.gather_tiles:
        _gather_tiles(graph, roof, size_of, tile_of)
    if profile is not None and profile.backend == "tpu":
        _update_relayouts(module, profile.name, roof, bandwidth)
    for instr, b in copies:
        moved = 2.0 * b
        roof.relayout_bytes_once += moved
        moved *= float(graph.ctx.weight(instr))
        roof.relayout_bytes += moved
        roof.hbm_bytes += moved
        roof.seconds += moved / bandwidth
        roof.memory_bound_s += moved / bandwidth
    return roof, result, per_device


def _megacore_copies(graph, fusion, roof, size_of) -> None:
    """Add to ``roof`` the copies memory-space assignment makes on a megacore TPU of each result several
    kernels read (:func:`hloshard.cost.roofline.shared_intermediates`): one row per copy (opcode
    ``'msa-copy'``), :data:`hloshard.cost.roofline.PREFETCH_COPY_FACTOR` x the buffer's per-device size
    per execution, as ``HloCostAnalysis`` counts them, in ``hbm_bytes`` and ``vmem_bytes`` and given no
    seconds (an asynchronous DMA beside the kernels: the step time does not change, the TPU compiler's
    estimate and bytes accessed do).  A buffer above
    :data:`hloshard.cost.roofline.PREFETCH_MAX_BYTES` is not copied (it does not fit beside the kernels'
    own VMEM)."""
    for instr, head in shared_intermediates(graph.schedule, fusion):
        size = float(size_of(head))
        if size > PREFETCH_MAX_BYTES:
            continue
        n = float(graph.ctx.weight(instr))
        moved = PREFETCH_COPY_FACTOR * size * n
        roof.hbm_bytes += moved
        roof.vmem_bytes += moved
        roof.rows.append(RooflineRow(head.name, "msa-copy", n, 0.0, moved, 0.0, "none", moved))


def _update_relayouts(module, device: str, roof, bandwidth: float) -> None:
    """Add to ``roof`` the layout copies libtpu makes around the weight updates that run in another layout than
    the weight's (:func:`hloshard.cost.tpu_partitioner.update_relayouts`: a GSPMD-style plan's folded weight
    gradients): one row per update (opcode ``'update-relayout'``), the copies' bytes (read in one layout,
    written in the other, at the TPU's tiles) in ``hbm_bytes``, at ``bandwidth`` (bytes/s) in the seconds and
    the memory-bound seconds -- copy kernels the chip runs, which ``HloCostAnalysis`` counts.  Entry updates
    only (one execution each).  Nothing for a plan whose dots are not folded (``solve``'s transpose pins)."""
    for r in update_relayouts(module, device):
        moved = float(r.copies * r.bytes_per_copy)
        roof.hbm_bytes += moved
        roof.seconds += moved / bandwidth
        roof.memory_bound_s += moved / bandwidth
        roof.rows.append(RooflineRow(r.update.name, "update-relayout", 1.0, 0.0, moved, moved / bandwidth, "memory"))


def _gather_tiles(graph, roof, size_of, tile_of) -> None:
    """Add to ``roof`` what the TPU compiler's ``HloCostAnalysis`` counts for each row gather beyond the
    gather's own row (its table shard and its result): :func:`hloshard.cost.tpu_fusion.gather_counted_bytes`
    less those two, per execution, one row per gather (opcode ``'gather-tiles'``), in ``hbm_bytes`` and given
    no seconds (the chip does not move them: the step time does not change, the report's bytes accessed do,
    and ``benchmarks/time_truth.py``'s like-for-like figure prices them at the HBM bandwidth).  Negative
    where the table shard is larger than the tiles the indices read (the roofline reads the whole shard).
    A gather with no HBM bytes of its own in the roofline (computed inside another kernel) adds nothing."""
    kernels = {r.name for r in roof.rows if r.opcode == "gather" and r.hbm_bytes}
    for instr in graph.schedule:
        if instr.opcode != "gather" or instr.name not in kernels:
            continue
        counted = gather_counted_bytes(instr, tile_of(instr))
        if counted is None:
            continue
        n = float(graph.ctx.weight(instr))
        extra = (counted - float(size_of(instr)) - float(size_of(instr.operands[0]))) * n
        roof.hbm_bytes += extra
        roof.rows.append(RooflineRow(instr.name, "gather-tiles", n, 0.0, extra, 0.0, "none"))


def _dot_dot_fusions(graph, choice, fusion, roof, size_of, peak_of, bandwidth) -> None:
    """Take off ``roof`` the bytes of the hidden activations the TPU's dot-dot fusion keeps on chip
    (:func:`hloshard.cost.tpu_fusion.dot_dot_reader`): the first dot's write and the second dot's read of
    its result, each at the first dot's size per device, where the plan puts no collective between them --
    the first dot's strategy all-reduces nothing, the chain keeps its output spec and the second dot's
    strategy takes that operand at the same spec (no resharding edge)."""
    if not fusion.dot_dot_fusion:
        return

    def chosen(instr):
        try:
            r = graph.ctx.resolve(instr, 0)
        except (KeyError, AttributeError):
            return None
        if not isinstance(r, tuple):
            return None
        g, k = r
        return g.strategies[int(choice[g.node])], k

    for g in graph.nodes:
        found = dot_dot_reader(g.instr, fusion) if g.instr.opcode == "dot" else None
        if found is None:
            continue
        reader, chain = found
        st = g.strategies[int(choice[g.node])]
        mine, theirs = chosen(g.instr), chosen(reader)
        if mine is None or theirs is None or mine[0] is not st \
                or any(c.kind == "all-reduce" and c.mesh_axes for c in st.collectives):
            continue
        rst = theirs[0]
        ops = [k for k, o in enumerate(reader.operands[:2]) if o is g.instr or id(o) in chain]
        if len(ops) != 1 or ops[0] >= len(rst.inputs) or rst.inputs[ops[0]] != st.out:
            continue
        members = [chosen(u) for u in g.instr.parent.instructions if id(u) in chain]
        if any(m is None or (m[0].out if m[1] is None else m[0].out[m[1]]) != st.out for m in members):
            continue
        n = float(graph.ctx.weight(g.instr))
        hidden = float(size_of(g.instr)) * n
        take_bytes(roof, g.instr, hidden, peak_of(g.instr), bandwidth)
        take_bytes(roof, reader, hidden, peak_of(reader), bandwidth)


def _pinned_after_build(result, module) -> bool:
    """Whether ``module`` holds operand pins (:mod:`hloshard.strategy.realize`'s ``Sharding``
    custom-calls) that ``result``'s graph did not build: the pins were written after the plan was priced."""
    positions = result.graph.positions
    return any(i.is_sharding_constraint and i not in positions
               for c in module.computations for i in c.instructions)


def plan_collective_hbm_bytes(result, once: bool = False) -> float:
    """HBM bytes one device reads and writes for the collectives hloshard predicts for the plan
    ``result`` (strategies' and reshardings', :func:`hloshard.xla_compare.predicted_collectives`, times
    their executions; ``once``: each counted once, a loop body's as XLA's ``HloCostAnalysis`` counts it):
    :func:`hloshard.cost.collectives.collective_hbm_bytes` each, operands plus result, what
    ``HloCostAnalysis`` counts as a collective's bytes accessed on the CPU backend and the TPU compiler
    alike (an all-to-all record's ``nbytes`` is its per-device buffer: 2 x that), plus the transposes
    around a resharding all-to-all that move data (``CollectiveRecord.transposed_bytes``)."""

    total = 0.0
    for recs in predicted_collectives(result).values():
        for r in recs:
            b = 2.0 * r.nbytes if r.kind == "all-to-all" else collective_hbm_bytes(r.kind, r.nbytes, r.group_size)
            b += r.transposed_bytes   # a resharding all-to-all's data-moving transposes (with a device)
            total += b * (1.0 if once else r.executions)
    return total


def body_once(roof) -> tuple[float, float]:
    """``(flops, HBM bytes)`` of the roofline ``roof`` with every instruction counted once, a loop
    body's once rather than once per trip: what XLA's ``HloCostAnalysis`` (``compiled.cost_analysis()``,
    CPU and TPU alike) counts, for a like-for-like comparison on modules with while loops (each row's
    figures over its executions; the plan's collectives and dot operand copies once each)."""
    flops = sum(r.flops / r.executions for r in roof.rows if r.executions > 0)
    hbm = sum(r.hbm_bytes / r.executions for r in roof.rows if r.executions > 0)
    return flops, hbm + roof.collective_bytes_once + roof.relayout_bytes_once


def axis_link_name(profile, shape, axis: int, link: str) -> str:
    """How the summary names mesh axis ``axis`` of the user's mesh ``shape``'s link ``link`` (``'ici'`` /
    ``'dcn'``): the device's name for it (:meth:`hloshard.devices.DeviceProfile.link_name`: ``InfiniBand``), or,
    for an axis whose groups straddle nodes (:func:`hloshard.devices.node_spans`: ``--mesh 16`` on 8-GPU nodes,
    priced by its link levels), both levels: ``NVLink x8 inside a node, InfiniBand across 2 nodes``."""
    span = node_spans(shape, axis, profile.devices_per_node) if link == "dcn" and axis < len(shape) else None
    if span is None:
        return profile.link_name(link)
    nodes, per_node = span
    return f"{profile.link_name('ici')} x{per_node} inside a node, {profile.link_name('dcn')} across {nodes} nodes"


def matmul_repeat(result, devices: int) -> float | None:
    """How many times its share each device runs the program's dots and convolutions under the plan
    ``result`` (an ``evaluate_module`` CostResult of a module before partitioning): the chosen strategies'
    flops per device (``Strategy.flop_count``) x ``devices`` over the unpartitioned flops
    (:func:`hloshard.cost.flops.matmul_flops`), each weighted by its executions per run.  1.0 when every
    matmul is split over all devices; ``devices`` when all are replicated; in between when a mesh axis splits
    none of some of them (new user 34 F11: a plan that keeps a slow ``dcn`` axis out of the matmuls repeats
    their compute, and the memory of their operands, on its devices).  None without matmuls."""
    graph, choice = result.graph, result.choice
    plan = full = 0.0
    seen: set[int] = set()
    for v, g in enumerate(graph.nodes):
        instr = g.instr
        if instr.opcode not in ("dot", "convolution"):
            continue
        whole = matmul_flops(instr)
        if whole <= 0:
            continue
        w = float(graph.ctx.weight(instr))
        plan += float(g.strategies[int(choice[v])].flop_count()) * w
        if id(instr) not in seen:
            seen.add(id(instr))
            full += whole * w
    return plan * devices / full if full > 0 else None


def plan_timing(result, module, scale) -> dict:
    """Report fields of the plan ``result`` (an ``evaluate_module`` CostResult, or the written
    re-evaluation of a solve) of ``module`` priced on ``scale`` (:class:`hloshard.devices.TimeScale`):
    ``estimated_step_time_s``, ``flops_per_device``, ``hbm_bytes_per_device`` (bytes accessed, as XLA's
    ``cost_analysis()`` counts them) and ``on_chip_bytes_per_device`` (those of them the roofline keeps in
    VMEM), ``mfu`` and
    ``step_time`` (the breakdown in seconds, device, peak, link class per mesh axis, the per-kind
    roofline split). Raises nothing for a well-formed result."""
    profile = scale.profile
    roof, result, per_device = plan_roofline(result, module, profile)
    graph, ev = result.graph, result.evaluation
    devices = int(graph.mesh.num_devices)
    mf = model_flops(module)
    if per_device:
        mf *= devices
    st = step_time(scale, ev.compute, ev.communication, ev.resharding, mf, devices, COMPUTE_COST_PER_FLOP,
                   roofline=roof)
    repeat = None if per_device else matmul_repeat(result, devices)
    user_shape = tuple(int(n) for n in (getattr(graph.mesh, "user_shape", None) or graph.mesh.shape))
    names = next((list(n) for n in (getattr(graph.mesh, "user_names", None), getattr(graph.mesh, "axis_names", None))
                  if n and len(n) == len(scale.links)), [f"axis{i}" for i in range(len(scale.links))])
    breakdown = {"compute_s": st.compute_s, "compute_bound_s": roof.compute_bound_s,
                 "memory_bound_s": roof.memory_bound_s, "flops_at_peak_s": st.compute_flops_s,
                 "communication_s": st.communication_s, "resharding_s": st.resharding_s,
                 "overlapped_step_time_s": st.overlapped_step_time_s,
                 "exposed_communication_s": st.exposed_communication_s}
    return {
        "estimated_step_time_s": st.estimated_step_time_s,
        "flops_per_device": st.flops_per_device,
        "hbm_bytes_per_device": st.hbm_bytes_per_device,
        # of them, the bytes the roofline keeps in on-chip memory (VMEM: prefetched parameters, and on tpu-v5e
        # the kernels' results, cost.roofline.vmem_intermediates), read and written there, not through HBM
        "on_chip_bytes_per_device": float(roof.vmem_bytes),
        "mfu": st.mfu,
        "step_time": {"device": profile.name, "peak_flops": st.peak_flops, "peak_dtype": st.peak_dtype,
                      # the report's cost-unit figures (objective, breakdown) in seconds: x this
                      "seconds_per_unit": scale.seconds_per_unit,
                      "hbm_bandwidth": profile.hbm_bandwidth, "devices": devices, "model_flops": mf,
                      "per_device_program": per_device,
                      # the plan's dot / convolution flops per device over its 1/devices share (matmul_repeat)
                      "matmul_repeat": repeat,
                      "axis_links": dict(zip(map(str, names), scale.links)),
                      "axis_link_names": {str(a): axis_link_name(profile, user_shape, i, c)
                                          for i, (a, c) in enumerate(zip(names, scale.links))},
                      "overlap_model": "estimated_step_time_s: no overlap (compute + communication + "
                                       "resharding); overlapped_step_time_s: every collective hidden",
                      "breakdown_s": breakdown},
    }
