"""``auto_shard``: lower a JAX function, choose shardings with hloshard, hand back ``NamedSharding`` pytrees.

Flow: the example arguments become ``jax.ShapeDtypeStruct`` (keeping the ``NamedSharding`` of every
argument the user already sharded), ``jax.jit(fn, keep_unused=True).lower(...)`` gives the
pre-optimization HLO (entry parameter i = flattened argument leaf i, output j = flattened result leaf
j), :func:`hloshard.autoshard.solve_module` chooses a sharding for every instruction on the mesh
(logical device ids = positions in ``mesh.devices.flat``, the order jax's device assignment uses), and
each entry parameter / output sharding is turned into a ``PartitionSpec`` over the mesh's axis names
(:func:`hloshard.sdy.dim_axes`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["AutoShardResult", "auto_shard"]


@dataclasses.dataclass
class AutoShardResult:
    """What :func:`auto_shard` returns.

    ``in_shardings``: a tuple (one entry per positional argument) of pytrees of ``NamedSharding``;
    ``out_shardings``: a pytree of ``NamedSharding`` shaped like ``fn``'s result (both ready for
    ``jax.jit(fn, in_shardings=..., out_shardings=...)``); ``constraints``: intermediate shardings as
    ``{"instruction", "partition_spec", "shape"}`` dicts; ``report``: the ``hloshard solve --report``
    JSON (cost units; bytes per device; ``peak_tensors``); ``module``: the annotated HLO module
    (``hlo_text`` prints it); ``solve_result``: the :class:`~hloshard.autoshard.SolveResult`."""

    in_shardings: Any
    out_shardings: Any
    constraints: list
    report: dict
    module: Any
    solve_result: Any = None

    @property
    def hlo_text(self) -> str:
        from ..hlo import print_module

        return print_module(self.module)


def _is_sharded(leaf, mesh) -> bool:
    from jax.sharding import NamedSharding

    sh = getattr(leaf, "sharding", None)
    if not isinstance(sh, NamedSharding):
        return False
    if sh.mesh.devices.size != mesh.devices.size:
        raise ValueError(f"an example argument is sharded over {sh.mesh.devices.size} devices "
                         f"({dict(sh.mesh.shape)}) but the mesh has {mesh.devices.size} "
                         f"({dict(mesh.shape)}): the mesh's device count must match the function's")
    return True


def _spec(sharding, rank: int, sdy_mesh):
    """HloSharding -> PartitionSpec over the mesh axis names (None: replicated dim)."""
    from jax.sharding import PartitionSpec

    from ..sdy import dim_axes

    dims = dim_axes(sharding, rank, sdy_mesh)
    out = []
    for refs in dims:
        names = [r.strip('"') for r in refs]
        if any(":" in r for r in refs):
            raise ValueError(f"sharding {sharding} splits a mesh axis into sub-axes ({refs}); "
                             f"PartitionSpec cannot say that")
        out.append(None if not names else names[0] if len(names) == 1 else tuple(names))
    while out and out[-1] is None:
        out.pop()
    return PartitionSpec(*out)


def auto_shard(fn, *example_args, mesh, memory_budget=None, keep_shardings: str = "io",
               time_limit: float = 20.0, seed: int = 0, deterministic: bool = True) -> AutoShardResult:
    """Choose shardings for ``fn(*example_args)`` on ``mesh`` (a ``jax.sharding.Mesh``).

    ``example_args``: arrays or ``jax.ShapeDtypeStruct`` pytrees (only shapes and dtypes are used;
    a leaf with a ``NamedSharding`` keeps it under ``keep_shardings="io"`` or ``"all"``, ``"none"``
    lets hloshard change it). ``memory_budget``: bytes per device, a size string (``"64MiB"``) or a
    device name (``"tpu-v5e"``, ``"h100-80gb"``; :data:`hloshard.units.DEVICE_MEMORY`), None for no
    budget. ``time_limit``: solver seconds.

    Raises ValueError naming the problem: a mesh whose device count differs from the function's
    (an argument sharded on another device count), ``fn`` that does not trace with these arguments,
    a bad ``memory_budget`` / ``keep_shardings``; :class:`hloshard.errors.SolveFailed` when no
    sharding fits the budget (its message names the liveness point and tensors).
    """
    import jax
    import numpy as np

    from ..autoshard import solve_module
    from ..commands.solve import build_report
    from ..errors import HloshardError, SolveFailed
    from ..hlo import parse_module
    from ..mesh import DeviceMesh
    from ..peak import peak_tensors_of
    from ..sdy import SdyMesh
    from ..units import parse_memory_budget

    if keep_shardings not in ("io", "all", "none"):
        raise ValueError(f"keep_shardings must be 'io', 'all' or 'none', got {keep_shardings!r}")
    if not isinstance(mesh, jax.sharding.Mesh):
        raise ValueError(f"mesh must be a jax.sharding.Mesh, got {type(mesh).__name__}")
    budget = None
    if memory_budget is not None:
        try:
            budget = int(memory_budget) if isinstance(memory_budget, (int, np.integer)) else \
                parse_memory_budget(str(memory_budget))
        except HloshardError as exc:
            raise ValueError(str(exc)) from None
    leaves, in_tree = jax.tree_util.tree_flatten(example_args)

    def abstract(leaf):
        shape, dtype = np.shape(leaf), getattr(leaf, "dtype", None) or np.asarray(leaf).dtype
        if _is_sharded(leaf, mesh):
            return jax.ShapeDtypeStruct(shape, dtype, sharding=leaf.sharding)
        return jax.ShapeDtypeStruct(shape, dtype)

    abstract_args = jax.tree_util.tree_unflatten(in_tree, [abstract(x) for x in leaves])
    try:
        lowered = jax.jit(fn, keep_unused=True).lower(*abstract_args)
    except Exception as exc:  # noqa: BLE001 - any tracing error is the user's function's
        raise ValueError(f"{getattr(fn, '__name__', 'fn')} does not trace with these arguments: "
                         f"{type(exc).__name__}: {exc}") from exc
    out_struct = jax.eval_shape(fn, *abstract_args)
    out_leaves, out_tree = jax.tree_util.tree_flatten(out_struct)
    module = parse_module(lowered.as_text(dialect="hlo"), f"<{getattr(fn, '__name__', 'fn')}>")
    dmesh = DeviceMesh.parse("x".join(str(s) for s in mesh.devices.shape))
    sdy_mesh = SdyMesh("mesh", tuple(mesh.axis_names), tuple(int(s) for s in mesh.devices.shape))
    try:
        result = solve_module(module, dmesh, keep=keep_shardings, memory_budget=budget, time_limit=time_limit,
                              seed=seed, deterministic=deterministic)
    except SolveFailed:
        raise
    except HloshardError as exc:
        raise ValueError(str(exc)) from None
    report = build_report(result, dmesh, keep_shardings, budget)
    report["peak_tensors"] = peak_tensors_of(result)

    from jax.sharding import NamedSharding

    params = sorted(module.entry.parameters, key=lambda p: p.parameter_number)
    if len(params) != len(leaves):
        raise ValueError(f"the lowered function has {len(params)} parameters for {len(leaves)} argument leaves")
    in_sh = [NamedSharding(mesh, _spec(p.sharding, len(p.shape.dims), sdy_mesh)) for p in params]
    root = module.entry.root
    if root.shape.is_tuple:
        outs = list(root.sharding.tuple_elements) if root.sharding.is_tuple else [root.sharding] * len(out_leaves)
        shapes = list(root.shape.tuple_shapes)
    else:
        outs, shapes = [root.sharding], [root.shape]
    if len(outs) != len(out_leaves):
        raise ValueError(f"the lowered function has {len(outs)} outputs for {len(out_leaves)} result leaves")
    out_sh = [NamedSharding(mesh, _spec(s, len(shp.dims), sdy_mesh)) for s, shp in zip(outs, shapes)]
    constraints = []
    for instr in module.entry.instructions:
        if instr.opcode in ("parameter", "tuple", "get-tuple-element", "constant") or instr.shape.is_tuple \
                or instr.sharding is None or instr is root:
            continue
        try:
            spec = _spec(instr.sharding, len(instr.shape.dims), sdy_mesh)
        except Exception:  # noqa: BLE001 - sub-axis shardings have no PartitionSpec
            spec = None
        constraints.append({"instruction": instr.name, "shape": str(instr.shape), "partition_spec": spec,
                            "sharding": str(instr.sharding)})
    return AutoShardResult(in_shardings=tuple(jax.tree_util.tree_unflatten(in_tree, in_sh)),
                           out_shardings=jax.tree_util.tree_unflatten(out_tree, out_sh),
                           constraints=constraints, report=report, module=module, solve_result=result)
