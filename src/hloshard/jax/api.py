"""``auto_shard``: lower a JAX function, choose shardings with hloshard, hand them back to ``jax.jit``.

Flow:

1. ``jax.make_jaxpr(fn)`` on the example arguments (``jax.ShapeDtypeStruct``; an argument the user
   already sharded keeps its ``NamedSharding``).
2. The jaxpr is evaluated equation by equation inside ``jax.named_scope(f"hloshard_eqn{k}")`` (source
   info kept), and that function is lowered with ``jax.jit(..., keep_unused=True)``: entry parameter i
   is flattened argument leaf i, output j flattened result leaf j, and every HLO instruction's
   ``metadata={op_name=...}`` names the equation it came from.
3. :func:`hloshard.autoshard.solve_module` chooses a sharding for every instruction on the mesh
   (logical device ids = positions in ``mesh.devices.flat``, the order of jax's device assignment).
4. Entry parameter / output shardings become ``NamedSharding(mesh, PartitionSpec)`` over the mesh's axis
   names (:func:`hloshard.sdy.dim_axes`); each equation's output gets the sharding of the last
   instruction of that equation with the output's shape, and :attr:`AutoShardResult.fn` re-evaluates
   the jaxpr with ``jax.lax.with_sharding_constraint`` on those outputs, so that XLA implements the
   whole plan, not only what its propagation reaches from the parameter and output shardings.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable

__all__ = ["AutoShardResult", "auto_shard"]

_EQN = re.compile(r"hloshard_eqn(\d+)")


@dataclasses.dataclass
class AutoShardResult:
    """What :func:`auto_shard` returns.

    ``in_shardings``: a tuple (one entry per positional argument) of pytrees of ``NamedSharding``;
    ``out_shardings``: a pytree of ``NamedSharding`` shaped like ``fn``'s result (both ready for
    ``jax.jit(result.fn, in_shardings=..., out_shardings=...)``, which :meth:`jit` does);
    ``fn``: ``fn`` with hloshard's intermediate shardings as ``with_sharding_constraint`` (same
    arguments and results); ``constraints``: the intermediate shardings XLA's propagation from the
    parameter / output shardings alone does not reach (:func:`hloshard.partition_specs.partition_specs`
    dicts: instruction, opcode, shape, sharding, partition_spec, xla_propagation, op_name, source);
    ``report``: the ``hloshard solve --report`` JSON (cost units; bytes per device; ``peak_tensors``);
    ``module``: the annotated HLO module (``hlo_text`` prints it); ``solve_result``: the
    :class:`~hloshard.autoshard.SolveResult`."""

    in_shardings: Any
    out_shardings: Any
    fn: Callable
    constraints: list
    report: dict
    module: Any
    solve_result: Any = None

    @property
    def hlo_text(self) -> str:
        from ..hlo import print_module

        return print_module(self.module)

    def jit(self, **kwargs):
        """``jax.jit(self.fn, in_shardings=self.in_shardings, out_shardings=self.out_shardings, **kwargs)``."""
        import jax

        return jax.jit(self.fn, in_shardings=self.in_shardings, out_shardings=self.out_shardings, **kwargs)


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
    """HloSharding -> PartitionSpec over the mesh axis names (None: replicated dim). Raises
    ValueError when it needs Shardy sub-axes (no PartitionSpec form) or has no named-axis form."""
    from jax.sharding import PartitionSpec

    from ..sdy import NotExpressible, dim_axes

    try:
        dims = dim_axes(sharding, rank, sdy_mesh)
    except NotExpressible as exc:
        raise ValueError(str(exc)) from None
    out = []
    for refs in dims:
        if any(":" in r for r in refs):
            raise ValueError(f"sharding {sharding} splits a mesh axis into sub-axes ({refs}); "
                             f"PartitionSpec cannot say that")
        names = [r.strip('"') for r in refs]
        out.append(None if not names else names[0] if len(names) == 1 else tuple(names))
    while out and out[-1] is None:
        out.pop()
    return PartitionSpec(*out)


def _runner(closed, constraints: dict | None = None):
    """A flat function evaluating ``closed`` (a ClosedJaxpr) equation by equation, equation k under
    ``named_scope(f"hloshard_eqn{k}")``; ``constraints[(k, j)]`` (a Sharding) constrains output j
    of equation k."""
    import jax
    import jax.extend.core as jcore
    from jax._src import source_info_util as siu

    jaxpr = closed.jaxpr
    constraints = constraints or {}

    def run(*args):
        env: dict = {}

        def read(v):
            return v.val if isinstance(v, jcore.Literal) else env[v]

        for v, c in zip(jaxpr.constvars, closed.consts):
            env[v] = c
        for v, a in zip(jaxpr.invars, args):
            env[v] = a
        for k, eqn in enumerate(jaxpr.eqns):
            stack = siu.current_name_stack() + eqn.source_info.name_stack
            with siu.user_context(eqn.source_info.traceback, name_stack=stack), \
                    jax.named_scope(f"hloshard_eqn{k}"), eqn.ctx.manager:
                outs = eqn.primitive.bind(*map(read, eqn.invars), **eqn.primitive.get_bind_params(eqn.params))
            if not eqn.primitive.multiple_results:
                outs = [outs]
            for j, (v, o) in enumerate(zip(eqn.outvars, outs)):
                if isinstance(v, jcore.DropVar):
                    continue
                sh = constraints.get((k, j))
                env[v] = jax.lax.with_sharding_constraint(o, sh) if sh is not None else o
        return [read(v) for v in jaxpr.outvars]

    return run


def _equation_outputs(module, closed) -> dict:
    """(equation k, output j) -> the entry instruction that computes it: the last instruction whose
    op_name names equation k and whose shape is the output's."""
    from ..hlo.attributes import parse_metadata

    by_eqn: dict = {}
    for instr in module.entry.instructions:
        raw = instr.attrs.get("metadata")
        if not raw or instr.shape.is_tuple:
            continue
        try:
            m = _EQN.search(str(parse_metadata(str(raw)).get("op_name", "")))
        except Exception:  # noqa: BLE001
            continue
        if m:
            by_eqn.setdefault(int(m.group(1)), []).append(instr)
    out = {}
    for k, eqn in enumerate(closed.jaxpr.eqns):
        cands = by_eqn.get(k, [])
        for j, v in enumerate(eqn.outvars):
            shape = tuple(getattr(v.aval, "shape", ()))
            hits = [i for i in cands if tuple(i.shape.dims) == shape]
            if hits:
                out[(k, j)] = hits[-1]
    return out


def auto_shard(fn, *example_args, mesh, memory_budget=None, keep_shardings: str = "io",
               time_limit: float = 20.0, seed: int = 0, deterministic: bool = True,
               with_constraints: bool = True, device: str | None = None) -> AutoShardResult:
    """Choose shardings for ``fn(*example_args)`` on ``mesh`` (a ``jax.sharding.Mesh``).

    ``example_args``: arrays or ``jax.ShapeDtypeStruct`` pytrees (only shapes and dtypes are used;
    a leaf with a ``NamedSharding`` keeps it under ``keep_shardings="io"`` or ``"all"``, ``"none"``
    lets hloshard change it). ``memory_budget``: bytes per device, a size string (``"64MiB"``) or a
    device name (``"tpu-v5e"``, ``"h100-80gb"``; :data:`hloshard.units.DEVICE_MEMORY`), None for no
    budget. ``time_limit``: solver seconds. ``with_constraints``: also run XLA's sharding propagation
    from the chosen parameter / output shardings (a child process) to list the intermediate shardings it
    does not reach (``constraints``, as ``hloshard solve --partition-specs`` writes them).

    Raises ValueError naming the problem: a mesh whose device count differs from the function's
    (an argument sharded on another device count), ``fn`` that does not trace with these arguments,
    a bad ``memory_budget`` / ``keep_shardings``; :class:`hloshard.errors.SolveFailed` when no
    sharding fits the budget (its message names the liveness point and tensors).
    """
    import jax
    import numpy as np
    from jax.sharding import NamedSharding

    from ..autoshard import solve_module
    from ..commands.solve import build_report
    from ..errors import HloshardError, SolveFailed
    from ..hlo import parse_module
    from ..load import SourceInfo
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

    flat_abstract = [abstract(x) for x in leaves]
    abstract_args = jax.tree_util.tree_unflatten(in_tree, flat_abstract)
    name = getattr(fn, "__name__", "fn")
    try:
        closed, out_struct = jax.make_jaxpr(fn, return_shape=True)(*abstract_args)
        lowered = jax.jit(_runner(closed), keep_unused=True).lower(*flat_abstract)
    except Exception as exc:  # noqa: BLE001 - any tracing error is the user's function's
        raise ValueError(f"{name} does not trace with these arguments: {type(exc).__name__}: {exc}") from exc
    out_leaves, out_tree = jax.tree_util.tree_flatten(out_struct)
    from jax._src.lib import xla_client as xc

    opts = xc.hlo.HloPrintOptions()
    opts.print_metadata = True
    module = parse_module(lowered.compiler_ir("hlo").get_hlo_module().to_string(opts), f"<{name}>")
    module.source_info = SourceInfo(
        "jax", module.name,
        [jax.tree_util.keystr(k) for k, _ in jax.tree_util.tree_flatten_with_path(example_args)[0]],
        [jax.tree_util.keystr(k) for k, _ in jax.tree_util.tree_flatten_with_path(out_struct)[0]])
    # the user's axis names and device order, so reports and constraints speak of "data" / "model"
    dmesh = DeviceMesh.parse(",".join(f"{n}={int(s)}" for n, s in zip(mesh.axis_names, mesh.devices.shape)),
                             device_ids=",".join(str(d.id) for d in mesh.devices.flat))
    sdy_mesh = SdyMesh("mesh", tuple(mesh.axis_names), tuple(int(s) for s in mesh.devices.shape))
    if device is not None:  # ``device``: a profile name / TOML path, as ``--device`` (hloshard.commands.timing)
        from ..commands.options import timed_mesh_from_options
        dmesh, scale, budget = timed_mesh_from_options(module, ",".join(f"{n}={int(s)}" for n, s in zip(
            mesh.axis_names, mesh.devices.shape)), ",".join(str(d.id) for d in mesh.devices.flat), None, None, device, budget)
    try:
        result = solve_module(module, dmesh, keep=keep_shardings, memory_budget=budget, time_limit=time_limit,
                              seed=seed, deterministic=deterministic)
    except SolveFailed:
        raise
    except HloshardError as exc:
        raise ValueError(str(exc)) from None
    report = build_report(result, dmesh, keep_shardings, budget)
    if device is not None:
        from ..commands.timing import plan_timing
        report.update(plan_timing(result.written or result, module, scale))
    report["peak_tensors"] = peak_tensors_of(result)

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
    pinned = {}
    for key, instr in _equation_outputs(module, closed).items():
        if instr.sharding is None:
            continue
        try:
            pinned[key] = NamedSharding(mesh, _spec(instr.sharding, len(instr.shape.dims), sdy_mesh))
        except ValueError:  # a sub-axis sharding: left to XLA's propagation
            continue
    run = _runner(closed, pinned)

    def constrained(*args):
        return jax.tree_util.tree_unflatten(out_tree, run(*jax.tree_util.tree_leaves(args)))

    constrained.__name__ = f"{name}_hloshard"
    constraints = []
    if with_constraints:
        from ..partition_specs import partition_specs

        constraints = partition_specs(module, dmesh)["intermediates"]
    return AutoShardResult(in_shardings=tuple(jax.tree_util.tree_unflatten(in_tree, in_sh)),
                           out_shardings=jax.tree_util.tree_unflatten(out_tree, out_sh), fn=constrained,
                           constraints=constraints, report=report, module=module, solve_result=result)
