"""``auto_shard``: lower a JAX function, choose shardings with hloshard, hand them back to ``jax.jit``.

Flow:

1. ``jax.make_jaxpr(fn)`` on the example arguments (``jax.ShapeDtypeStruct``; an argument the user
   already sharded keeps its ``NamedSharding``).
2. The jaxpr is evaluated equation by equation, equation ``k`` inside ``jax.named_scope(f"hloshard_eqn{k}")``
   (source info kept); a nested ``jit`` call without shardings of its own is evaluated inline, its
   equation ``i`` as ``hloshard_eqn{k}_{i}``, so every dot / gather / scatter is an equation of its own.
   That function is lowered with ``jax.jit(..., keep_unused=True)``: entry parameter i is flattened
   argument leaf i, output j flattened result leaf j, and every HLO instruction's
   ``metadata={op_name=...}`` names the equation it came from.
3. The step's state is tied (:func:`hloshard.jax.state.find_ties`): each result leaf that is the next value of an
   argument leaf leaves in that leaf's sharding (``module.ties``, :mod:`hloshard.autoshard.aliases`).
4. :func:`hloshard.autoshard.solve_module` chooses a sharding for every instruction on the mesh
   (logical device ids = positions in ``mesh.devices.flat``, the order of jax's device assignment, whatever the
   jax device ids are: a permuted ``Mesh`` is planned as the iota one, :func:`_positions`) and
   writes it with the operand pins (:mod:`hloshard.strategy.realize`), as ``hloshard solve
   --pin-operands`` does.
5. Entry parameter / output shardings become ``NamedSharding(mesh, PartitionSpec)`` over the mesh's axis
   names (:func:`hloshard.sdy.dim_axes`).  :attr:`AutoShardResult.fn` re-evaluates the jaxpr with
   ``jax.lax.with_sharding_constraint`` (a) on each equation's outputs (the sharding of the last
   instruction of that equation with the output's shape), except those XLA's propagation reaches from the
   constraints kept (an elementwise equation whose inputs are read in its output's layout:
   :func:`hloshard.jax.jaxpr.carried_outputs`; ``report["pins"]["outputs_left_to_xla"]``), and (b) on each operand the plan pins: the
   equation's input value in the pinned layout, seen by that equation only (what the CLI's pin copy /
   ``Sharding`` custom-call does), and (c) on a loop body's inputs (``scan``, ``while_loop``) where the
   body starts and its outputs where it ends, and on the loop's operands, in the loop state's layouts
   (:func:`hloshard.jax.jaxpr.loop_layouts`), and (d) on an
   equation's input that the equation broadcasts (jax's ``mul`` of ``[B,S,H]`` by ``[B,S,1]``), in the
   layout the plan's broadcast needs of it where the plan reshards it before broadcasting
   (:func:`hloshard.jax.jaxpr.broadcast_sources`; ``report["pins"]["broadcast_sources"]``), and (e) before
   an operand constraint XLA could reach from the value's own constraint only by replicating the value whole,
   on the layout between the two (:func:`hloshard.jax.jaxpr.meet_spec`; ``report["pins"]["meet_steps"]``),
   so XLA carries out the plan that was priced, not its own variant from the operands' layouts.  Loop bodies
   are re-traced equation by equation for this (their operand pins and outputs are constrained as the top
   level's).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any, Callable

from ..hlo.inline import inline_calls
from ..interrupts import interruptible
from .check import check_plan, program, warn_unmeasured
from .guard import (FIRST_SHARE, baseline_peak, cancel_baselines, entry_propagation, first_solve_deadline, guard_plan,
                    guard_share_figures, guard_summary, moves_seconds, start_baselines, user_sharded)
from .jaxpr import (
    broadcast_operand_spec, broadcast_sources, carried_outputs, equation_outputs, equations, loop_layouts,
    meet_spec, pin_operand, pin_steps, runner)
from .known import known_plans
from .layout import layout_text
from ..summary import render_summary, replicated_batch_inputs
from ..textout import jax_mesh_difference
from ..autoshard.report import _all_replicated_note, _computes_replicated, _replicated_step, parameter_floor_check
from .state import STATE_MODES, donated_args, find_ties
from ..autoshard import evaluate_as_written, solve_module
from ..autoshard.aliases import Tie
from ..autoshard.coarse import work_limit
from ..autoshard.report_json import build_report
from ..autoshard.solve import (
    MIN_SOLVE_SECONDS, UNBUDGETED_SHARE, apply_solution, cannot_bind, improve_applied, unbudgeted_within)
from ..devices import get_profile
from ..errors import HloshardError, InputError, SolveFailed
from ..hlo import parse_module, print_module
from ..sdy_manual import read_manual_computations
from ..load import SourceInfo
from ..mesh import DeviceMesh, refine_for_module
from ..mesh_setup import named_mesh_spec, timed_mesh_from_options
from ..partition_specs import complete_with_xla, partition_specs
from ..peak import peak_tensors_of
from ..sdy import NotExpressible, SdyMesh, dim_axes
from ..timing import plan_timing
from ..units import parse_memory_budget
from ..xla_check import parse_collectives, start_jax_child
from ..xla_compare import _xla_execution_counts, compare_module, predicted_collective_bytes, xla_ring_bytes

__all__ = ["AutoShardResult", "auto_shard", "baseline_peak"]


@dataclasses.dataclass
class AutoShardResult:
    """What :func:`auto_shard` returns.

    ``in_shardings``: a tuple (one entry per positional argument) of pytrees of ``NamedSharding``;
    ``out_shardings``: a pytree of ``NamedSharding`` shaped like ``fn``'s result (both ready for
    ``jax.jit(result.fn, in_shardings=..., out_shardings=...)``, which :meth:`jit` does); a result leaf
    tied to an argument leaf (``ties``) has that argument's sharding, so the step's outputs can be fed
    back as its next inputs without resharding.
    ``fn``: ``fn`` with hloshard's plan as ``with_sharding_constraint`` (equation outputs, but those XLA's
    propagation reaches from the others, :attr:`outputs_left_to_xla`, and pinned operands; same arguments and
    results); ``constraints``: the intermediate shardings XLA's
    propagation from the parameter / output shardings alone does not reach
    (:func:`hloshard.partition_specs.partition_specs` dicts: instruction, opcode, shape, sharding,
    partition_spec, xla_propagation, op_name, source); ``report``: the ``hloshard solve --report`` JSON
    (cost units; bytes per device; ``peak_tensors``; ``ties``, ``pins``;
    ``predicted_collective_bytes_per_device``: ring bytes of the collectives the plan predicts, the figure
    to hold beside XLA's); ``module``: the annotated
    HLO as a parsed :class:`hloshard.hlo.Module` (:attr:`hlo_text` is its text, what ``hloshard solve
    --pin-operands`` writes); ``solve_result``: the :class:`~hloshard.autoshard.SolveResult`;
    ``ties``: one dict per tied result leaf (``output`` / ``input``: jax key paths, ``mode``,
    ``donated``, ``source``); ``pins``: one dict per operand pin of the plan (``instruction``,
    ``operand``, ``sharding``, ``equation``: the jaxpr equation path it is applied to, None when it
    could not be carried into ``fn``); ``donate_argnums``: the donated positional arguments
    (:meth:`jit` passes them to ``jax.jit``)."""

    in_shardings: Any
    out_shardings: Any
    fn: Callable
    constraints: list
    report: dict
    module: Any
    solve_result: Any = None
    ties: list = dataclasses.field(default_factory=list)
    pins: list = dataclasses.field(default_factory=list)
    donate_argnums: tuple = ()
    #: the function auto_shard was given (the unsharded reference of :meth:`check`)
    source_fn: Callable | None = dataclasses.field(default=None, repr=False)
    #: (ClosedJaxpr of the flat arguments, argument treedef, result treedef, output constraints, operand
    #: constraints, loop-body constraints): what :attr:`fn` evaluates (:func:`hloshard.jax.jaxpr.runner`)
    program: tuple | None = dataclasses.field(default=None, repr=False)
    #: the :class:`hloshard.mesh.DeviceMesh` the plan was priced on (the user's axes, refined for the module)
    device_mesh: Any = dataclasses.field(default=None, repr=False)
    #: (equation path, output j) -> NamedSharding: the plan's equation-output layouts :attr:`fn` does not
    #: constrain, since XLA's propagation reaches them from the constraints kept
    #: (:func:`hloshard.jax.jaxpr.carried_outputs`); ``{**program[3], **outputs_left_to_xla}`` is every output
    outputs_left_to_xla: dict = dataclasses.field(default_factory=dict, repr=False)

    @property
    def hlo_text(self) -> str:
        """The annotated HLO module's text (shardings and operand pins written), as ``hloshard solve``
        writes it."""
        return print_module(self.module)

    def hlo_text_with(self, in_shardings, out_shardings=None) -> str:
        """:attr:`hlo_text`'s module -- the same instructions under the same names -- laid out by another layout
        (``in_shardings`` / ``out_shardings`` as ``jax.jit`` takes them; None leaves a value to XLA), the plan's
        annotations and pins taken off (:func:`hloshard.jax.layout.layout_text`), for ``hloshard diff``: two
        lowerings of one function number their instructions differently, so a ``jax.jit`` export of your layout
        cannot be diffed against :attr:`hlo_text`, this text can (``hloshard diff mine.hlo plan.hlo --mesh
        data=2,model=4 --complete xla``: your layout as ``jax.jit`` completes it, against the plan, per
        instruction).  Raises ValueError for shardings that do not fit the function's arguments or results."""
        return layout_text(self, in_shardings, out_shardings)

    def jit(self, **kwargs):
        """``jax.jit(self.fn, in_shardings=self.in_shardings, out_shardings=self.out_shardings,
        donate_argnums=self.donate_argnums, **kwargs)``."""
        import jax

        kwargs.setdefault("donate_argnums", self.donate_argnums)
        return jax.jit(self.fn, in_shardings=self.in_shardings, out_shardings=self.out_shardings, **kwargs)

    def summary(self, width: int | None = None) -> str:
        """The plan in words, as ``hloshard solve`` prints it on stderr (:func:`hloshard.summary.
        render_summary` of :attr:`report`): mesh, cost against the input as given (seconds with
        ``device=``), memory per device against the budget, the solver's status, the dearest resharding
        edges, the largest tensors at the peak, notes and warnings.  Plain text, ``width`` columns
        (default :data:`hloshard.textout.TEXT_WIDTH`)."""
        return render_summary(self.report, title="hloshard.jax.auto_shard", files=False, width=width)

    def xla(self):
        """XLA's figures for this plan beside hloshard's prediction, as ``hloshard cost --xla`` gives them for
        :attr:`hlo_text`: the written module (the plan :meth:`jit` carries out through :attr:`fn`'s constraints: new
        user 21's Falcon step compiled both ways moved the same bytes) partitioned by XLA's SPMD partitioner (GSPMD,
        jax in a child process).  :meth:`jit` compiles with jax's default partitioner (Shardy on jax 0.10.2), which
        completes what :attr:`fn` leaves open (:attr:`outputs_left_to_xla`, the instructions inside one equation)
        on its own: the two can differ (new user 31's T5 given its layout: 25.38 MB here, 30.17 MB in
        ``plan.jit()``, F3), so the comparison's ``jit_bytes`` / ``jit_peak`` are that program's figures
        (:meth:`jit_bytes`, one more compile, in this process), and a difference of more than 10% and 0.1 MB is warned
        about.  When the memory guard returned your layout as given (:attr:`your_layout_as_given`: :meth:`jit` is
        ``jax.jit`` of your function under your shardings), the module priced and partitioned is that program --
        :attr:`hlo_text`'s instructions under your shardings, completed by XLA's propagation (:meth:`_xla_module`,
        one more XLA run) -- not :attr:`hlo_text`, hloshard's rendering of your layout (new user 33's F22).  Its
        collectives matched to the instructions that make them, in ring bytes per device (all-gather
        (n-1)/n x result bytes, reduce-scatter (n-1)/n x operand, all-reduce 2(n-1)/n, all-to-all (n-1)/n,
        a ``while`` body's once per trip; n the replica group's size), and XLA's ``memory_analysis()`` per
        device.  Returns a :class:`hloshard.xla_compare.Comparison`: ``predicted_bytes`` / ``xla_bytes``
        (bytes per device), ``kind_agreement``, ``instructions`` (per instruction), ``xla_memory`` and
        ``memory_json()`` (predicted peak beside XLA's).  Use it rather than a regex over
        ``compiled.as_text()``: jaxlib 0.10 prints replica groups in three forms, one of which
        (``mesh['axis_0'=2,...] {'axis_0'}``) names mesh axes only -- read as all devices it added 13% to
        new user 21's count.  One compile, seconds to minutes.  Raises InputError (``hloshard.errors``)
        when jax cannot be imported or its child process fails as a whole."""
        module = self._xla_module()
        evaluation = evaluate_as_written(module, self.device_mesh, deterministic=True)
        comparison = compare_module(module, self.device_mesh, evaluation)
        compiled = self._jit_compiled() if self.program is not None else None
        comparison.jit_bytes = None if compiled is None else self.jit_bytes(compiled)
        comparison.jit_peak = None if compiled is None else _peak_of(compiled)
        warn_unmeasured(comparison)   # XLA failed, or counted nothing where the plan predicts collectives: said
        if comparison.jit_bytes is not None and not comparison.xla_error and \
                abs(comparison.jit_bytes - comparison.xla_bytes) > max(0.1 * comparison.xla_bytes, 1e5):
            if self.your_layout_as_given:   # the same module both times: the partitioners differ
                warnings.warn(f"plan.jit() (your layout, returned as given) compiles to {comparison.jit_bytes:,.0f} B "
                              f"of collectives per device with jax's partitioner as configured, and to "
                              f"{comparison.xla_bytes:,.0f} B with GSPMD (plan.xla()): the two partitioners propagate "
                              f"your shardings differently (jax.config.update('jax_use_shardy_partitioner', ...) "
                              f"chooses which one jax runs)", stacklevel=2)
            else:
                warnings.warn(f"plan.jit() compiles to {comparison.jit_bytes:,.0f} B of collectives per device, the "
                              f"written module (plan.hlo_text) to {comparison.xla_bytes:,.0f} B: the program jax runs "
                              f"is not the plan priced here (compare plan.jit().lower(*args).as_text(dialect='hlo') "
                              f"with plan.hlo_text)", stacklevel=2)
        return comparison

    @property
    def your_layout_as_given(self) -> bool:
        """Whether the memory guard returned your layout itself (``report["pins"]["your_layout_as_given"]``:
        :func:`hloshard.jax.guard._no_worse_than_yours` took "your layout"): :attr:`fn` is then your function with no
        constraint of hloshard's, and :meth:`jit` is ``jax.jit`` of it under your shardings."""
        return bool((self.report.get("pins") or {}).get("your_layout_as_given"))

    def _xla_module(self):
        """The module :meth:`xla` prices and partitions: the program :meth:`jit` runs.  A plan of hloshard's:
        :attr:`hlo_text` (the constraints of :attr:`fn` carry it out).  Your layout returned as given
        (:attr:`your_layout_as_given`): the module jax lowers for :meth:`jit` (:meth:`_jit_lowered`: :attr:`fn`, which
        is then your function, under :attr:`in_shardings` / :attr:`out_shardings`), completed by XLA's own
        propagation (:func:`hloshard.partition_specs.complete_with_xla`, a jax child: ``cost --complete xla``) --
        ``jax.jit``'s program of your shardings as GSPMD partitions it -- not :attr:`hlo_text`, hloshard's rendering
        of that layout, which partitions into another program (new user 33's F22: the Mixer given its layout, 18.10
        MB by XLA for the rendering where ``plan.jit()`` moves 20.82 MB), nor :attr:`hlo_text`'s instructions under
        your shardings (:func:`hloshard.jax.layout.layout_text`: 18.89 MB on that Mixer, its module not the one jax
        lowers for :meth:`jit`).  Raises InputError when jax's child fails."""
        if not self.your_layout_as_given or self.program is None:
            return parse_module(self.hlo_text, "<auto_shard plan>")
        from jax._src.lib import xla_client as xc

        opts = xc.hlo.HloPrintOptions()
        opts.print_metadata = True
        text = self._jit_lowered().compiler_ir("hlo").get_hlo_module().to_string(opts)
        module = parse_module(text, "<auto_shard plan: your layout, as plan.jit() lowers it>")
        complete_with_xla(module, self.device_mesh.num_devices)
        return module

    def _jit_lowered(self):
        """:meth:`jit` lowered on abstract arguments shaped and sharded as :attr:`in_shardings`."""
        import jax

        closed, in_tree = self.program[0], self.program[1]
        flat_sh = jax.tree_util.tree_leaves(self.in_shardings)
        args = in_tree.unflatten([jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sh,
                                                       weak_type=bool(getattr(a, "weak_type", False)))
                                  for a, sh in zip(closed.in_avals, flat_sh)])
        return self.jit().lower(*args)

    def _jit_compiled(self):
        """:meth:`jit` compiled on abstract arguments shaped and sharded as :attr:`in_shardings` (jax's partitioner
        as configured)."""
        return self._jit_lowered().compile()

    def jit_bytes(self, compiled=None) -> float:
        """Ring bytes of collectives per device (the formulas of :meth:`xla`, a ``while`` body's once per trip) of
        the program :meth:`jit` runs, compiled here, in this process, with jax's partitioner as configured (Shardy
        by default on jax 0.10.2) on abstract arguments shaped and sharded as :attr:`in_shardings` (or ``compiled``,
        that compile done before).  :meth:`xla` sets it as ``jit_bytes`` on its comparison (and ``jit_peak``: that
        program's ``memory_analysis()`` argument + output + temp - alias bytes per device) and warns when it differs
        from the written module's by more than 10% and 0.1 MB: on a loop the two parted before round 33 (new user
        32: 436 MB against 29 MB, issue 24).  One compile; raises what ``jax.jit(...).lower(...).compile()``
        raises."""
        text = (compiled if compiled is not None else self._jit_compiled()).as_text()
        counts = _xla_execution_counts(text)
        n = self.device_mesh.num_devices
        return float(sum(xla_ring_bytes(c, n) * counts.get(c.computation, 1.0) for c in parse_collectives(text)))

    def check(self, *args, rtol: float = 1e-4, float64: bool | None = None):
        """Do the numbers match?  Runs one step of the plan (:attr:`fn` under :attr:`in_shardings` /
        :attr:`out_shardings`, nothing donated) and of the function ``auto_shard`` was given, unsharded on
        one device, on ``args`` (concrete arrays shaped as the example arguments), and returns a
        :class:`hloshard.jax.check.CheckReport`: per output leaf the relative error ||got - want|| /
        ||want|| (for a floating leaf tied to an argument -- the step's state -- of its update
        ``new - old``), flagged above ``rtol``.  ``float64`` (default: whether jax's x64 mode is on in this
        process; True turns it on for the check only): the same two programs again in float64
        (:func:`hloshard.jax.jaxpr.runner` ``promote=True``: every float32 / bfloat16 / float16 value
        widened, the plan's constraints where they were), whose disagreement tells a plan that computes
        another function (``verdict`` ``"wrong"``: above :data:`hloshard.jax.check.F64_TOL`) from float
        rounding the step amplifies (``"rounding"``), and the unsharded float32 step against the float64
        one (the model's own rounding floor).  Costs two compiles, four with ``float64``.  One step of an
        adaptive optimizer (Adam, Adafactor) hides the gradients' errors: its first update is
        ``lr * m / (sqrt(v) + eps)``, about ``lr * sign(g)``, so most leaves agree to rounding whatever the
        gradients' error and only leaves whose gradient is near zero disagree (new user 30, F14: GPT-2's
        attention key bias, whose gradient is zero under softmax); check a gradient-returning step, or compare
        a few steps' losses.  Raises ValueError for arguments not shaped as the example arguments or a bad
        ``rtol``."""
        return check_plan(self, args, rtol, float64)


def _peak_of(compiled) -> int | None:
    """``memory_analysis()`` argument + output + temp - alias bytes per device of a compiled jax program, None when
    the backend gives none."""
    m = compiled.memory_analysis()
    if m is None:
        return None
    return int(m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes - m.alias_size_in_bytes)


def _is_sharded(leaf, mesh, path: str = "") -> bool:
    """Whether example argument ``leaf`` (at ``path``, a jax key path) comes sharded (a ``NamedSharding``) on ``mesh``.
    Raises ValueError, before any tracing, for a leaf on a mesh of another device count, or split (not fully
    replicated) on another mesh than ``mesh`` -- other axis names, sizes or device order: its layout names axes
    ``mesh`` does not have, and ``jax.jit`` refuses arguments on two meshes (new user 33's F17: such a leaf ended
    in a "no feasible solution" about even splits after the whole build)."""
    import numpy as np
    from jax.sharding import NamedSharding

    sh = getattr(leaf, "sharding", None)
    if not isinstance(sh, NamedSharding):
        return False
    what = f"example argument {path}" if path else "an example argument"
    if sh.mesh.devices.size != mesh.devices.size:
        raise ValueError(f"{what} is sharded over {sh.mesh.devices.size} devices "
                         f"({dict(sh.mesh.shape)}) but the mesh has {mesh.devices.size} "
                         f"({dict(mesh.shape)}): the mesh's device count must match the function's")
    same = tuple(sh.mesh.axis_names) == tuple(mesh.axis_names) and \
        tuple(np.shape(sh.mesh.devices)) == tuple(np.shape(mesh.devices)) and \
        [d.id for d in np.asarray(sh.mesh.devices).flat] == [d.id for d in np.asarray(mesh.devices).flat]
    if not same and not sh.is_fully_replicated:
        raise ValueError(f"{what} is sharded ({sh.spec}) on {jax_mesh_difference(sh.mesh, mesh)}: put it on `mesh` "
                         f"(jax.device_put(x, NamedSharding(mesh, spec))) or pass it unsharded")
    return True


def _positions(mesh) -> str:
    """The device ids of the :class:`hloshard.mesh.DeviceMesh` of a ``jax.sharding.Mesh`` as ``--device-ids`` takes
    them: ``0,1,...,N-1`` whatever the order of ``mesh.devices``.  A jax-lowered module numbers its devices by
    position in ``mesh.devices.flat`` (the compile's device assignment is that list), so the plan is made and
    written on positions and ``NamedSharding(mesh, spec)`` puts position i on ``mesh.devices.flat[i]``."""
    return ",".join(str(i) for i in range(int(mesh.devices.size)))


def _spec(sharding, rank: int, sdy_mesh):
    """HloSharding -> PartitionSpec over the mesh axis names (None: replicated dim). Raises
    ValueError when it needs Shardy sub-axes (no PartitionSpec form) or has no named-axis form."""
    from jax.sharding import PartitionSpec

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


def _sub_axis_sharding(sharding, rank: int, mesh, sdy_mesh, meshes: dict):
    """``NamedSharding`` of an HloSharding that splits a user mesh axis into Shardy sub-axes
    (``'"model":(1)2'``: :func:`hloshard.sdy.dim_axes`), which a ``PartitionSpec`` over ``mesh``'s axes
    cannot say: the same layout on a jax ``Mesh`` of the same devices (``mesh.devices`` reshaped) whose
    axes are the user's cut where the sub-axes begin and end, major to minor -- axis ``a`` of size 4 read as
    ``(1)2`` and ``(2)2`` becomes ``a__0`` and ``a__1`` of size 2 (a whole-axis reference names all of
    its pieces; an uncut axis keeps its name).  ``meshes`` caches the cut meshes by their axis sizes, so
    the constraints of one plan share one mesh per cut.  Why: the plan is priced on the refined mesh
    (:func:`hloshard.mesh.refine_for_module`), and a constraint left out of ``fn`` lets XLA choose its own
    layout for that value (tunix's Llama 3 under a budget, round 23: 42 of 99 operand pins needed
    sub-axes; ``plan.jit()`` moved 21.10 MB per device where the written module moves 16.84 MB).
    Raises ValueError for a sharding with no named-axis form."""
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    try:
        dims = dim_axes(sharding, rank, sdy_mesh)
    except NotExpressible as exc:
        raise ValueError(str(exc)) from None
    sizes = dict(zip(mesh.axis_names, (int(n) for n in mesh.devices.shape)))

    def parse(ref: str):   # '"model":(2)2' -> ("model", 2, 2); '"data"' -> ("data", 1, size)
        name, _, sub = ref.partition(":")
        name = name.strip('"')
        if not sub:
            return name, 1, sizes[name]
        pre, _, size = sub[1:].partition(")")
        return name, int(pre), int(size)

    refs = [[parse(r) for r in d] for d in dims]
    cuts = {a: {1, n} for a, n in sizes.items()}
    for d in refs:
        for a, pre, size in d:
            cuts[a] |= {pre, pre * size}
    pieces: dict = {}   # axis -> [(lo, hi, refined name)]
    names, shape = [], []
    for a, n in sizes.items():
        b = sorted(cuts[a])
        parts = [(lo, hi) for lo, hi in zip(b, b[1:])]
        pieces[a] = [(lo, hi, a if len(parts) == 1 else f"{a}__{i}") for i, (lo, hi) in enumerate(parts)]
        names += [nm for _, _, nm in pieces[a]]
        shape += [hi // lo for lo, hi, _ in pieces[a]]
    key = tuple(zip(names, shape))
    if key not in meshes:
        meshes[key] = Mesh(np.asarray(mesh.devices).reshape(shape), tuple(names))
    spec = []
    for d in refs:
        axes = [nm for a, pre, size in d for lo, hi, nm in pieces[a] if lo >= pre and hi <= pre * size]
        spec.append(None if not axes else axes[0] if len(axes) == 1 else tuple(axes))
    while spec and spec[-1] is None:
        spec.pop()
    return NamedSharding(meshes[key], PartitionSpec(*spec))


def _constraint(sharding, rank: int, mesh, sdy_mesh, meshes: dict):
    """``NamedSharding`` of a plan's intermediate layout for ``with_sharding_constraint``: over ``mesh``'s
    axes (:func:`_spec`), else, where it needs sub-axes, on a cut mesh of the same devices
    (:func:`_sub_axis_sharding`).  Raises ValueError for a sharding with neither form."""
    from jax.sharding import NamedSharding

    try:
        return NamedSharding(mesh, _spec(sharding, rank, sdy_mesh))
    except ValueError:
        return _sub_axis_sharding(sharding, rank, mesh, sdy_mesh, meshes)


def _padded(spec, rank: int) -> list:
    return list(spec) + [None] * (rank - len(spec))


def _broadcast_constraints(module, eqns: dict, operand_constraints: dict, mesh, sdy_mesh) -> int:
    """Add to ``operand_constraints`` (equation path -> ``[(input i, NamedSharding)]``) the layout each
    broadcast inside an equation needs of the equation's input it broadcasts
    (:func:`hloshard.jax.jaxpr.broadcast_sources`, :func:`~hloshard.jax.jaxpr.broadcast_operand_spec`)
    where the plan reshards that input before broadcasting it (the layout differs from the input's
    own) and no operand pin constrains it already.  Returns how many were added."""
    from jax.sharding import NamedSharding, PartitionSpec

    added = 0
    for path, i, b, src in broadcast_sources(module, eqns):
        if src.sharding is None or any(k == i for k, _ in operand_constraints.get(path, ())):
            continue
        try:
            out_spec = _padded(_spec(b.sharding, len(b.shape.dims), sdy_mesh), len(b.shape.dims))
        except ValueError:   # the broadcast's own layout needs sub-axes: left to XLA
            continue
        try:
            have = _padded(_spec(src.sharding, len(src.shape.dims), sdy_mesh), len(src.shape.dims))
        except ValueError:
            # the input's layout needs sub-axes (its constraint is on a cut mesh, _sub_axis_sharding): it is not the
            # layout the broadcast needs of it, which a PartitionSpec over the user's axes says (round 28, new user
            # 27's finding 5: the MoE's dispatch mask ``mul`` of f32[16,128,8,1] by f32[16,128,1,40], its input
            # split [4,2] over sub-axes and the plan's broadcast replicated: before, no constraint, and XLA
            # broadcast in the input's layout and all-gathered f32[16,128,8,40] -- 4.59 of the 3.79 MB plan.jit()
            # moved above the written module's 44.73 MB)
            have = None
        want = broadcast_operand_spec(out_spec, b.dimensions or [], b.operands[0].shape.dims, src.shape.dims)
        if want is None or want == have:
            continue
        operand_constraints.setdefault(path, []).append((i, NamedSharding(mesh, PartitionSpec(*want))))
        added += 1
    return added


def _meet_steps(closed, eqns: dict, pinned: dict, operand_constraints: dict, in_sh: list, mesh) -> int:
    """Before each operand constraint (``operand_constraints``: equation path -> ``[(input i, NamedSharding)]``)
    whose value XLA's partitioner could only reach by replicating it whole from the layout the value was
    constrained to where it was made (``pinned``: its equation's output constraint; ``in_sh``: an argument's
    sharding), a constraint to the layout between the two (:func:`hloshard.jax.jaxpr.meet_spec`): an
    all-gather, then a slice, the same collective as the replication at no more bytes, without XLA's
    "Involuntary full rematerialization" (new user 17's GNN: the mean of its readout, constrained
    ``P('model')`` where it is made and pinned ``P(None, 'data')`` for the dot that reads it; the written
    module has the same pair, and XLA replicates it there too).  Returns how many were added.

    A value is known by its variable *and* the path of the jaxpr it is evaluated in (an equation at path ``p``
    reads and makes the variables of the jaxpr at ``p[:-1]``): jax traces a function once per shapes, so the
    bodies of a Python loop's ``jax.checkpoint`` layers (and of an inlined ``jit`` called several times) are one
    Jaxpr object, each equation and variable listed under every path that evaluates it.  Keyed by the variable
    alone, the layout of the last such region's value stood for every region's: on a 4-layer Megatron MLP, each
    layer checkpointed, the backward of layer 1 took layer 2's ``P('data')`` for its cotangent (written ``P('data',
    'model')``) and gained a replicated step before its ``P(None, 'model')`` pin -- ``plan.jit()`` moved 12%
    (Shardy) / 30% (GSPMD) more than the written module (issue 24, round 34; fresh34 finding 1)."""
    from jax.sharding import NamedSharding, PartitionSpec

    made: dict = {((), v): sh for v, sh in zip(closed.jaxpr.invars, in_sh)}
    for (path, j), sh in pinned.items():
        eqn = eqns.get(path)
        if eqn is not None and j < len(eqn.outvars):
            made[(path[:-1], eqn.outvars[j])] = sh
    added = 0
    for path, rows in operand_constraints.items():
        eqn = eqns.get(path)
        if eqn is None:
            continue
        out = []
        last: dict = {}   # input i -> the layout its previous constraint here leaves it in (a pin's stop)
        for i, sh in rows:
            var = eqn.invars[i] if i < len(eqn.invars) else None
            have = last[i] if i in last else made.get((path[:-1], var)) \
                if var is not None and not hasattr(var, "val") else None
            last[i] = sh
            rank = len(getattr(var.aval, "shape", ())) if var is not None else 0
            # (a spec names the axes of its own mesh: layouts on two meshes -- one cut for sub-axes,
            # _sub_axis_sharding -- are not compared)
            step = meet_spec(have.spec, sh.spec, rank) if have is not None and have.mesh == sh.mesh else None
            if step is not None:
                out.append((i, NamedSharding(sh.mesh, PartitionSpec(*step))))
                added += 1
            out.append((i, sh))
        rows[:] = out
    return added


def _xla_seconds(deadline) -> float:
    """The seconds an XLA run (a child process) may take before ``deadline`` (a ``time.monotonic()`` instant; None:
    deterministic mode, no clock: 600 s, the runs' own time-out)."""
    import time

    return 600.0 if deadline is None else deadline - time.monotonic()


def _propagate_within(module, dmesh, entry: dict, deadline) -> dict:
    """XLA's propagation of ``entry`` (:func:`hloshard.jax.guard.entry_propagation`'s ``found``) cut at ``deadline``
    (:func:`_xla_seconds`): not started with less than the solver's minimum left.  Raises InputError when it is
    not started, times out or XLA fails (the guard's fallback then keeps its own completion)."""
    left = _xla_seconds(deadline)
    if left < MIN_SOLVE_SECONDS:
        raise InputError(f"the time limit ended before XLA's propagation ({max(0.0, left):.1f} s left)")
    return entry_propagation(module, dmesh, entry, timeout=left)[1]


def _start_child(num_devices: int):
    """The memory guard's XLA child (:func:`hloshard.xla_check.start_jax_child` of
    ``hloshard.partition_specs``), or None when it cannot be started (the guard then starts its own)."""
    try:
        return start_jax_child("hloshard.partition_specs", num_devices)
    except OSError:
        return None


def _stop_child(child) -> None:
    """End the guard's XLA child (:func:`_start_child`) when it is still running (given no payload), and close its
    pipes whether it ran or not (a child that had ended by itself left them open: new user 30's F13, a
    ``ResourceWarning: unclosed file`` from an ``auto_shard`` call)."""
    if child is None:
        return
    if child.poll() is None:
        child.kill()
        child.communicate()
    for stream in (child.stdin, child.stdout, child.stderr):
        if stream is not None and not stream.closed:
            stream.close()
    child.wait()



@interruptible
def auto_shard(fn, *example_args, mesh, memory_budget=None, keep_shardings: str = "io",
               time_limit: float = 60.0, seed: int = 0, deterministic: bool = False,
               with_constraints: bool = True, donate_argnums=(), donate_argnames=(), state=None,
               state_mode: str = "tie", pin_operands: bool = True,
               device: str | None = None, memory_guard: bool = True, links=None) -> AutoShardResult:
    """Choose shardings for ``fn(*example_args)`` on ``mesh``; return them as jax shardings.

    ``fn`` is traced once with ``example_args``, lowered to HLO, priced on the mesh (collective bytes per
    device, the compute each device repeats, memory per device) and solved; the plan comes back as
    ``NamedSharding`` pytrees for ``jax.jit`` and as ``fn`` with the plan's sharding constraints inside::

        plan = auto_shard(step, params, x, y, mesh=Mesh(devices.reshape(2, 4), ("data", "model")))
        step_sharded = plan.jit()          # jax.jit(plan.fn, in_shardings=..., out_shardings=...)

    Args:
        fn: the function to shard (a training step, a forward pass).
        *example_args: arrays or ``jax.ShapeDtypeStruct`` pytrees as ``fn`` takes them; only shapes and dtypes
            are read.  A leaf already sharded on ``mesh`` (a ``NamedSharding``) keeps its sharding unless
            ``keep_shardings="none"``.
        mesh: a ``jax.sharding.Mesh``; the plan names its axes.  Its devices may be in any order (a reversed or
            permuted device array, ``mesh_utils.create_device_mesh`` on a TPU slice): the plan is made on mesh
            positions, as jax numbers the devices of the module it lowers, and handed back on this ``Mesh``.
        memory_budget: the most bytes per device the plan may need: an int, a size string (``"64MiB"``) or a
            device name (``"tpu-v5e"``, ``"h100-sxm"``: its HBM); None (default): no budget.  The plan found
            without the budget is returned when it keeps the budget; otherwise the search runs under it.
        keep_shardings: ``"io"`` (default): the shardings the arguments come with are kept; ``"all"``: also the
            ``with_sharding_constraint`` s inside ``fn``; ``"none"``: every sharding is chosen.
        time_limit: seconds for the whole call, tracing included (default 60; see *Time*).
        seed: the solver's random seed.
        deterministic: the same plan on every run; ``time_limit`` is then a budget of solver work, not of
            wall seconds (see *Time*).
        with_constraints: also list, in ``plan.constraints``, the intermediate shardings XLA's own propagation
            does not reach from the plan's argument and result shardings (one XLA run in a child process).
        donate_argnums, donate_argnames: as ``jax.jit`` takes them; a donated argument is state (below) and
            ``plan.jit()`` donates it.
        state: which results are the next value of which arguments (a training step's parameters, optimizer
            state, counters, RNG keys).  None (default): matched by pytree path, shape and dtype (``return loss,
            new_params``); a dict ``{result path: argument path}`` names them (jax key paths such as
            ``"[1]['w']"``, or flat leaf numbers; ``{result path: (argument path, mode)}`` sets the mode per
            pair); ``{}``: no state.
        state_mode: ``"tie"`` (default): a state result leaves in the sharding its argument came in with, so the
            next step needs no resharding; ``"pay"``: it may leave otherwise, and the plan pays the resharding back
            once per step.
        pin_operands: carry the plan's operand layouts into ``plan.fn`` as sharding constraints, so that XLA
            runs the plan that was priced (default True; False: equation outputs only).
        device: a device profile (``"h100-sxm"``, ``"tpu-v5e"``, ... or a TOML file, as ``hloshard solve
            --device``): the plan is priced in seconds of its links and roofline, and ``memory_budget``
            defaults to its HBM.
        memory_guard: never return a plan whose predicted peak is above that of a plan XLA would make itself
            from the same argument shardings (default True; see *Memory guard*).
        links: with ``device``, the link each mesh axis crosses: ``"ici"`` (inside a node or TPU slice;
            NVLink on a GPU) or ``"dcn"`` (across them), e.g. ``{"data": "dcn"}`` for two 4-GPU nodes on a
            ``("data", "model")`` mesh of shape (2, 4); an axis left out follows the device's rule.
            ``report["step_time"]["axis_links"]`` says which link each axis got.

    Returns:
        :class:`AutoShardResult` ``plan``: ``plan.in_shardings`` / ``plan.out_shardings`` (``NamedSharding``
        pytrees shaped as ``example_args`` and as ``fn``'s result), ``plan.jit(**kwargs)`` (``jax.jit`` of
        ``plan.fn`` with them), ``plan.fn`` (``fn`` with the plan's constraints), ``plan.xla()`` (XLA's
        collective bytes and peak memory per device for the plan, beside the prediction), ``plan.check(*args)``
        (the sharded step against the unsharded one), ``plan.summary()`` (the plan in words),
        ``plan.hlo_text`` (the module as ``hloshard solve`` writes it), ``plan.hlo_text_with(in_shardings,
        out_shardings)`` (the same module under other shardings, e.g. your own layout for ``hloshard diff``) and
        ``plan.report`` (a dict: objective in
        cost units, predicted collective bytes and peak memory per device in bytes, ``"time"``, ``"warnings"``,
        ``"memory_guard"``, ``"known_plans"``, ``"local_moves"``).

    Raises:
        ValueError: before any search, for a bad argument: ``mesh`` not a jax Mesh or of another device count
            than ``fn``'s sharded arguments, ``fn`` that does not trace with ``example_args``, a bad
            ``memory_budget``, ``time_limit``, ``keep_shardings``, ``state``, ``state_mode``, ``donate_argnums``,
            ``device`` or ``links``, an argument split on another mesh than ``mesh`` (all but ``state`` said
            before tracing).  (A tie whose kept shardings differ is dropped with a report warning.)
        hloshard.errors.SolveFailed: no plan keeps ``memory_budget`` (the message names the liveness point, the
            tensors and the budget that would pass) or none was found in the time (when tracing alone used
            ``time_limit`` up, the message says so first, with the tracing's seconds); ``exc.report["time"]``
            gives the phases' seconds.
        KeyboardInterrupt: Ctrl-C stops the call promptly (a running search at once); the caller's SIGINT
            handler is in place again afterwards.

    *Time*: ``time_limit`` covers the call from its start: jax's tracing, the cost-graph builds, the solves, the
    memory guard's XLA runs and writing the plan share one deadline.  When a build would pass it, the plan of
    the 1-D mesh of the same devices is returned (a warning says so).  The call can still end late by what
    the clock does not stop: jax's tracing, the solver's minimum (0.5 s) and the re-pricing of the written
    plan.  ``report["time"]`` gives each phase's wall and CPU seconds and ``past_deadline``.  On a loaded
    machine the plan can depend on the load; ``deterministic=True`` makes ``time_limit`` a budget of solver
    work (calibrated to seconds of an idle 2-core machine), the plan the same on every run, and the wall time
    unbounded (builds, tracing and XLA runs are not in the budget).

    *State*: a tied state leaf is one decision for the argument and the result; ``report["ties"]`` lists them.

    *Memory guard*: the plan's predicted peak (its written module's, as ``hloshard cost`` prices it) is held to
    a baseline priced by the same memory model: XLA's own propagation from the user's argument shardings, or,
    with nothing sharded, from the plan's own argument shardings and from the data-parallel and fully sharded
    data-parallel entries (the lowest).  A plan above it is searched again under that peak; when the time is
    too short for the baseline the guard is off, ``report["memory_guard"]["off"]`` and a ``UserWarning`` say
    so.  ``report["memory_guard"]`` gives the baselines, the limit and what was applied.

    The replicated and data-parallel plans are priced before the search and the search starts from the
    cheapest of them, so the plan is never costlier than they are by the objective (``report["known_plans"]``).
    Without a ``memory_budget`` a plan within 10% of the cost at a lower peak is preferred (the Pareto step,
    ``report["memory_guard"]["pareto"]``; not run where the plan's written module already peaks within the lowest
    peak the step would ask, ``["pareto"]["skipped"]``); the written plan is then improved by local moves
    (``report["local_moves"]``).  How each phase shares the time and what it measured: ARCHITECTURE.md,
    "auto_shard's phases".
    """
    import time

    started = time.monotonic()   # the time limit covers the call from here (module docstring, "Time")
    cpu_started = time.process_time()
    import jax
    import numpy as np
    from jax.sharding import NamedSharding

    if keep_shardings not in ("io", "all", "none"):
        raise ValueError(f"keep_shardings must be 'io', 'all' or 'none', got {keep_shardings!r}")
    if state_mode not in STATE_MODES:
        raise ValueError(f"state_mode must be one of {', '.join(STATE_MODES)}, got {state_mode!r}")
    if not isinstance(mesh, jax.sharding.Mesh):
        raise ValueError(f"mesh must be a jax.sharding.Mesh, got {type(mesh).__name__}")
    # the mesh string of the user's axes, links marked (``links``: axis -> 'ici' / 'dcn', as --mesh data=2:dcn):
    # the one mesh parser reads it (mesh_setup.named_mesh_spec: ValueError for a bad name or link, new user 31 F14)
    mesh_spec = named_mesh_spec(mesh.axis_names, mesh.devices.shape, links, device)
    if device is not None:   # an unknown profile said before tracing, not after it (new user 33's F12: 17.5 s)
        try:
            get_profile(device)
        except HloshardError as exc:
            raise ValueError(str(exc)) from None
    if isinstance(time_limit, bool) or not isinstance(time_limit, (int, float, np.integer, np.floating)) \
            or not math.isfinite(time_limit) or time_limit <= 0:
        raise ValueError(f"time_limit must be a positive finite number of seconds, got {time_limit!r}")
    budget = None
    if isinstance(memory_budget, bool):   # an int to Python: True was read as 1 byte (new user 24)
        raise ValueError(f"memory_budget must be bytes per device (an int or a size such as '8GiB'), a device "
                         f"name or None, got {memory_budget!r}")
    if memory_budget is not None:
        try:
            budget = int(memory_budget) if isinstance(memory_budget, (int, np.integer)) else \
                parse_memory_budget(str(memory_budget))
        except HloshardError as exc:
            raise ValueError(str(exc)) from None
        if budget <= 0:   # as the CLI's --memory-budget (new user 15: -1 ran the search, then "infeasible")
            raise ValueError(f"memory_budget must be a positive number of bytes per device, got {memory_budget!r}")
    donated = donated_args(fn, len(example_args), donate_argnums, donate_argnames)
    # deterministic mode: the guard's XLA run (its baseline, a child process) is started before jax traces
    # ``fn``, so jax's start in it (1.8 s of CPU, 4.3 s wall at load 6) runs beside the tracing, the build and
    # the first solve instead of after them; the solves count work, so the plan is the same.  Not in
    # wall-clock mode: there the child's CPU is taken from the build's and the first solve's seconds (round
    # 14: the 4 MiB-budget decoder of tests/test_jax_time.py at load 7 found no plan in its 5 s beside it;
    # round 18, started before tracing: keras-hub's 4-layer Gemma at time_limit 10 and load 5.5 built in 3.7 s
    # instead of 2.0 s and its first solve had 0.36 s of solver instead of 1.69 s)
    warm = _start_child(int(mesh.devices.size)) if memory_guard and deterministic else None
    pending = None   # the user-sharded baseline's XLA propagation, started beside the first solve (below)
    try:
        leaves, in_tree = jax.tree_util.tree_flatten(example_args)
        leaf_paths = [jax.tree_util.keystr(k) for k, _ in jax.tree_util.tree_flatten_with_path(example_args)[0]]

        def abstract(leaf, path):
            shape, dtype = np.shape(leaf), getattr(leaf, "dtype", None) or np.asarray(leaf).dtype
            # a weakly typed leaf (jnp.full(n, 0.1), a Python scalar) stays weak, as jax.jit traces it: a
            # strong trace would hand back strong outputs and the next step would compile again
            weak = bool(getattr(leaf, "weak_type", False)) or type(leaf) in (int, float, complex)
            if _is_sharded(leaf, mesh, path):
                return jax.ShapeDtypeStruct(shape, dtype, sharding=leaf.sharding, weak_type=weak)
            return jax.ShapeDtypeStruct(shape, dtype, weak_type=weak)

        flat_abstract = [abstract(x, q) for x, q in zip(leaves, leaf_paths)]
        abstract_args = jax.tree_util.tree_unflatten(in_tree, flat_abstract)
        name = getattr(fn, "__name__", "fn")
        try:
            closed, out_struct = jax.make_jaxpr(fn, return_shape=True)(*abstract_args)
            # donated arguments lowered as jax.jit(..., donate_argnums=) lowers them: the module's header carries
            # their input_output_alias, so the memory model and plan.xla() free the donated inputs as plan.jit()
            # does (new user 34 F6: Falcon's donated plan reported at 73.7 MB, run at 55.4 MB)
            sizes = [len(jax.tree_util.tree_leaves(a)) for a in example_args]
            starts = np.cumsum([0] + sizes)
            flat_donated = tuple(k for i in donated for k in range(int(starts[i]), int(starts[i + 1])))
            lowered = jax.jit(runner(closed), keep_unused=True, donate_argnums=flat_donated).lower(*flat_abstract)
        except Exception as exc:  # noqa: BLE001 - any tracing error is the user's function's
            raise ValueError(f"{name} does not trace with these arguments: {type(exc).__name__}: {exc}") from exc
        out_leaves, out_tree = jax.tree_util.tree_flatten(out_struct)
        state_ties = find_ties(tuple(abstract_args), out_struct, donated, state, state_mode)
        from jax._src.lib import xla_client as xc

        opts = xc.hlo.HloPrintOptions()
        opts.print_metadata = True
        module = parse_module(lowered.compiler_ir("hlo").get_hlo_module().to_string(opts), f"<{name}>")
        read_manual_computations(module)   # a Shardy-mode shard_map read as its manual region (hloshard.sdy_manual)
        in_paths = leaf_paths
        out_paths = [jax.tree_util.keystr(k) for k, _ in jax.tree_util.tree_flatten_with_path(out_struct)[0]]
        module.source_info = SourceInfo("jax", module.name, in_paths, out_paths)
        tuple_root = module.entry.root.shape.is_tuple
        module.ties = [Tie((j,) if tuple_root else (), q, (), mode, don, source)
                       for j, q, mode, don, source in state_ties]
        # the user's axis names, so reports and constraints speak of "data" / "model".  The device ids are the
        # module's logical ids, which jax numbers by position in ``mesh.devices.flat`` (its device assignment is
        # that list: ``jax.jit``'s HLO writes P("data") of Mesh(devices[::-1]) as ``<=[8]``, as of the iota
        # mesh), so the mesh is iota whatever the jax ids are; NamedSharding(mesh, spec) maps a position back
        # to its device (issue 24, round 38: with the jax ids, a permuted mesh's plan had no PartitionSpec form)
        positions = _positions(mesh)
        dmesh = DeviceMesh.parse(named_mesh_spec(mesh.axis_names, mesh.devices.shape), device_ids=positions)
        sdy_mesh = SdyMesh("mesh", tuple(mesh.axis_names), tuple(int(s) for s in mesh.devices.shape))
        if device is not None:  # ``device``: a profile name / TOML path, as ``--device`` (hloshard.timing)
            try:
                dmesh, scale, budget = timed_mesh_from_options(
                    module, mesh_spec, positions, None, None, device, budget)
            except HloshardError as exc:   # e.g. an unknown device: a bad argument, as a bad memory_budget
                raise ValueError(str(exc)) from None
            dmesh.source = "given"   # the caller's jax Mesh, not the CLI's --mesh (DeviceMesh.describe)
        # jax.jit's arguments and results take even splits only (IndivisibleError otherwise): mesh.divisible_io
        dmesh.divisible_io = True
        # refined for the module as the CLI's mesh (reshapes carry a split onto sub-axes), the entry's values
        # kept on whole user axes: a PartitionSpec names no sub-axis (mesh.DeviceMesh.keep_io_on_user_axes)
        dmesh.keep_io_on_user_axes()
        if not dmesh.is_refined:   # device=: timed_mesh_from_options refined it already
            dmesh = refine_for_module(dmesh, module)
        if budget is not None:   # a budget the parameters alone exceed: said before any build (new user 23, #7)
            parameter_floor_check(module, dmesh.num_devices, budget)
        # the user's shardings: the memory guard's baseline entry is known now, so XLA's propagation of it starts
        # here, in a child, beside the first solve, and the guard reads it (round 26: started after the first solve,
        # wall-clock, it got the ~1 s the deadline left, timed out, and the guard was off: keras-hub's 4-layer Gemma
        # given its layout map, 1.05x the layout map's peak by XLA).  Deterministic mode: in the child started
        # before tracing.  Wall-clock: not when tracing left less than the solver's minimum before the deadline (the
        # guard cannot read it then, and its text and child would take the coarse build's seconds: keras-hub's
        # 4-layer Gemma at time_limit=10, load 17, round 26: the coarse build then stopped, BuildStopped)
        # Not for a module with while loops: solve rewrites their loop state (written whole, with keep pins), and
        # the baseline propagated from the module as traced then prices a plan of another program (round 26, lead:
        # tests/test_jax_e2e.py's two loop tests moved 917,504 B by XLA against 589,824 predicted, and XLA
        # rematerialised a loop-state constraint; the guard's baseline run after the first solve, as before round 26,
        # passes them)
        # Round 27: that was the module as traced, whose library calls (jax.nn.relu's ``call``) the build inlines
        # before the guard runs (build_graph: XLA's CallInliner): XLA propagated through a loop body's call
        # otherwise than through the same ops inlined, and the baseline peaked at 2,023,428 B where the inlined
        # module's peaks at 5,980,164 B (the while test's; the guard then re-solved into a plan XLA disagreed
        # with).  The calls are inlined here, as the build would (it then finds none), so the propagations started
        # now are of the program the guard prices, loops or not.
        # Round 27 too: the data-parallel and FSDP baselines' entries (nothing sharded) are known here as well: their
        # propagations start now, each in a child of its own, and the warm child is left to the plan's own baseline
        # (guard.start_baselines).  Round 28: in wall-clock mode too (before, deterministic mode only, as the warm
        # child): after the first solve the guard ran them one after the other, 16.2 s of XLA children for BERT's
        # step at time_limit=60 (load 6), and at load 8-20 the deadline left them none: the guard was off in every
        # call of new user 27's (finding 1); started here they run beside the build
        # Wall-clock: only where the guard's share of the time left (guard.first_solve_deadline) can hold an XLA run
        # of the module, estimated by the seconds jax took to trace and lower it here (guard.guard_share_holds);
        # else the first solve keeps all of the time, as before, and no child takes the build's CPU (keras-hub's
        # 4-layer Gemma at time_limit=10: 6.7 s of tracing at load 9, round 28)
        traced = time.monotonic() - started
        # (guard.guard_share_holds' rule, the figures kept for report["time"]["guard_share"])
        # (your shardings: their propagation starts beside the first solve below whatever the share, and the guard's
        # entry gate is one pricing then: guard.guard_share_figures' read_early, round 36)
        read_early = bool(memory_guard and not deterministic and user_sharded(module))
        share_figures = guard_share_figures(started + float(time_limit), time.monotonic(), traced, read_early)
        keep_share = memory_guard and not deterministic and share_figures[0] >= share_figures[1]
        if memory_guard and (deterministic or started + float(time_limit) - time.monotonic() > MIN_SOLVE_SECONDS):
            inline_calls(module)
            pending = start_baselines(module, dmesh, fsdp=budget is None, child=warm,
                                      others=deterministic or keep_share) or None
            if pending is not None and "user" in pending:
                warm = None   # the pending propagation owns it
        # one time budget (docstring, "Time"): wall-clock mode, one deadline every phase checks; deterministic
        # mode, one work budget shared by the first solve and the guard's re-solves
        deadline = None if deterministic else started + float(time_limit)
        first_limit = FIRST_SHARE * float(time_limit) if memory_guard else float(time_limit)
        # the plans known without a search (replicated, data-parallel: hloshard.jax.known), on each graph a
        # solve builds: the search starts from the cheapest, so it never returns a costlier plan
        state_params = [t.param for t in module.ties]
        known = {}

        def known_choices(graph):
            known[id(graph)] = plans = known_plans(graph, state_params, fast=deterministic)
            return [q.choice for p in plans for q in (p, p.greedy) if q is not None]
        # where the call's wall seconds went (report["time"]["phases"]): the docstring's "Time" names what the
        # limit covers; these say, per run, how far each phase ran and which ran past the deadline
        phases: dict = {"trace": time.monotonic() - started}
        # this process's CPU seconds per phase beside them (report["time"]["phases_cpu"]; the XLA children's not
        # counted): what a phase spent waiting shows as wall above CPU
        phases_cpu: dict = {"trace": time.process_time() - cpu_started}
        cpu_mark = [time.process_time()]

        def lap(name: str, since: float) -> float:
            now, cpu = time.monotonic(), time.process_time()
            phases[name] = phases.get(name, 0.0) + (now - since)
            phases_cpu[name] = phases_cpu.get(name, 0.0) + (cpu - cpu_mark[0])
            cpu_mark[0] = cpu
            return now
    except BaseException:
        _stop_child(warm)
        cancel_baselines(pending)
        raise

    late = None   # the constraints' XLA child (with_constraints), started beside the local moves
    failed = True
    try:
        def plan(limit, budget_, graph=None, hint=None, deadline_=deadline, child=warm, phase="first"):
            """The first solve and the memory guard (its Pareto step without a budget)."""
            t = time.monotonic()
            # (the search under the budget: the plan found without it was tried here already, unbudgeted_within)
            # wall-clock, the search under a budget: all the time the deadline leaves (round 24: a budget plan is the
            # promise, its guard gets what the search leaves; with the guard's half kept, Swin's "60MiB" search had
            # 2.5 s of solver and found nothing)
            whole = phase == "budget" and deadline_ is not None
            # wall-clock with the guard: the first solve ends by its own deadline, the guard's time kept before the
            # call's (guard.first_solve_deadline; round 28, new user 27's finding 1: the builds took the guard's share)
            solve_by = first_solve_deadline(deadline_, time.monotonic(), share_figures[1]) \
                if keep_share and not whole and deadline_ is not None else deadline_
            try:
                r = solve_module(module, dmesh, keep=keep_shardings, memory_budget=budget_,
                                 time_limit=limit if whole else limit * first_limit / float(time_limit), seed=seed,
                                 deterministic=deterministic, apply=False,
                                 deadline=solve_by, stop_build=deadline_ is not None and graph is None,
                                 pin_operands=pin_operands, known=known_choices, graph=graph, hint=hint,
                                 # wall-clock: the guard's share is of what the builds leave, not what they did not take
                                 # (deterministic: not passed, so the refined graph is sized for the first solve's
                                 # share, coarse.work_limit: sized for the whole limit, keras-hub's 4-layer Gemma
                                 # got its 2.70 M-pair refined graph at time_limit=10, and the first solve on it
                                 # ended at a 27.8% gap after 59 s, the guard's re-solves found nothing within
                                 # the baseline, auto_expert peaked 1.05x the expert's by XLA in 107 s; round 25)
                                 # (wall-clock: its own deadline keeps the guard's time, solve_by; before round 28
                                 # a share of what the builds left, solver_share=FIRST_SHARE, which slow builds
                                 # spent: BERT's 47.6 s of 60 at load 8-20; without keep_share, as before)
                                 solver_share=FIRST_SHARE if memory_guard and not keep_share and not whole
                                 and deadline_ is not None else 1.0,
                                 free_first=phase != "budget",
                                 # the user's budget: its nearest plans priced written before a refusal (round 36)
                                 nearest_written=phase == "budget",
                                 # the budget's refusal, when certain, said right after the build (new user 31 F6)
                                 later_budget=budget if budget_ is None else None)
            except SolveFailed:
                lap(f"{phase}_solve", t)   # where the seconds went, on the exception too (report["time"])
                raise
            kn = known.get(id(r.graph), [])
            g = None
            t = lap(f"{phase}_solve", t)
            if memory_guard:
                r, g = guard_plan(r, module, dmesh, keep_shardings, limit - limit * first_limit / float(time_limit),
                                  seed, deterministic, deadline=deadline_, known_plans=kn, child=child,
                                  propagate=lambda entry: _propagate_within(module, dmesh, entry, deadline_),
                                  # the plan judged by its written module; kept written when nothing writes after
                                  write="keep" if budget is None else "restore", pending=pending,
                                  fsdp=budget is None, traced=traced)
                lap(f"{phase}_guard", t)   # XLA's propagation (baseline; a fallback's), re-solves, Pareto step
            return r, g, kn

        written = False   # the plan is written into module and priced (the budget's candidate kept)
        if budget is None:
            result, guard, first_known = plan(float(time_limit), None)
            written = bool((guard or {}).get("written"))   # the guard's plan, written and priced by it
        else:
            # the plan a call without the budget writes (its first solve, memory guard and Pareto step: the step
            # may take a cheaper plan, or a lower peak within PARETO_SHARE, either of which a budget that does not
            # bind must not undo -- budget2's measurement, round 20: Perceiver 26.93 MB moved without a budget,
            # 29.20 MB at a 64 MiB budget that did not bind, when the step was left out) is a candidate
            # (autoshard.solve.unbudgeted_within, the rule solve --memory-budget keeps): written when its written
            # module keeps the budget's limit, so a budget that does not bind never changes the plan; else the search
            # under the budget, hinted by it, on the same graph (deterministic: the work budget again;
            # wall-clock: UNBUDGETED_SHARE of the time first, the share solve --memory-budget gives it too; all of
            # it where no plan can pass the budget, device='s HBM default: autoshard.solve.cannot_bind)
            share = 1.0 if deterministic or cannot_bind(module, budget, getattr(dmesh, "memory_device", None)) \
                else UNBUDGETED_SHARE
            free, guard, first_known = plan(share * float(time_limit), None,
                                            deadline_=None if deadline is None else started + share * float(time_limit))
            # written and priced here when it keeps the limit (apply=True): apply_solution below would write and
            # price the same plan again (one more evaluate_module of the written module, finding 9)
            t = time.monotonic()
            result, graph, note = unbudgeted_within(free, module, dmesh, pin_operands, budget, apply=True)
            lap("budget_check", t)   # the plan found without the budget written and priced
            written = result is not None
            if result is None:
                # wall-clock: what the deadline leaves (round 24: no more; before, at least (1 - share) of the
                # limit, past the deadline, and a coarse plan's graph was built again: new user 23's Swin at
                # "60MiB", time_limit=120 took 574.6 s).  The graph the plan was found on (a coarse mesh's too:
                # solve._coarse_fallback priced it under the budget), for the budget, hinted by the plan
                rest = float(time_limit) if deterministic else deadline - time.monotonic()
                result, guard, kn = plan(max(MIN_SOLVE_SECONDS, rest), budget, graph=graph, hint=list(free.choice),
                                         child=None, deadline_=deadline, phase="budget")
                first_known = kn or first_known
                result.graph.warnings.append(note)
        # (a written module over the budget's limit falls back to a known plan that keeps it: the pins
        # are those of the plan written, apply_solution's operand_pins)
        if not written:
            t = time.monotonic()
            apply_solution(result, module, dmesh, pin_operands=pin_operands, memory_budget=budget)
            lap("write", t)
        # solve's post-solve local moves on the written module, pins included, within the peak limit below
        # (new user 20, finding 6: explain found a 5% cheaper layout of a Perceiver pin that auto_shard missed);
        # wall-clock mode: none started past the call's deadline
        t_moves = time.monotonic()
        unmoved = result.written   # the written module's price before the moves (report["local_moves"])
        # up to the memory guard's baseline peak (its promise: not above what XLA makes of the same entry, or of
        # the user's shardings), not its bisected limit (Perceiver: 87.8 MB against a 70.1 MB baseline and a 62.2 MB
        # plan); no higher than the written peak where a Pareto step took a lower-peak plan, where the baseline is
        # the replicated plan (it bounds nothing) or without the guard
        held = None if guard is None or (guard.get("pareto") or {}).get("applied") or \
            guard.get("baseline_all_replicated") else guard.get("baseline_peak_bytes")
        # deterministic mode: within their share of the call's work (guard.moves_seconds), in resharding
        # pairs as the deterministic build counts its work (coarse.work_limit)
        pair_limit = work_limit(moves_seconds(time_limit), dmesh) if deterministic else None
        move_stats: dict = {}
        # the constraints' XLA run (with_constraints, after the report) in a child started now: its jax start (2-4 s
        # wall) runs beside the local moves, which keep one core (round 27)
        if with_constraints and _xla_seconds(deadline) > MIN_SOLVE_SECONDS:
            late = _start_child(int(mesh.devices.size))
        # (wall-clock: the guard's XLA run is inside the limit since round 24, "Time": the deadline does not move)
        improve_applied(result, module, dmesh, deadline=deadline,
                        peak_limit=held, pair_limit=pair_limit, stats=move_stats)
        lap("local_moves", t_moves)
        t_moves = phases["local_moves"]
        pins = list(result.operand_pins)
        failed = False
    except SolveFailed as exc:
        # where the call's seconds went, on the exception (new user 23: a SolveFailed after 574.6 s said nothing of
        # them): ``exc.report["time"]`` as a plan's report gives it, and the phases in the message
        end = time.monotonic()
        exc.report = {"time": {"time_limit": float(time_limit), "mode": "work" if deterministic else "wall-clock",
                               "seconds": round(end - started, 3),
                               "phases": {k: round(v, 3) for k, v in phases.items()},
                               "past_deadline": None if deadline is None else round(max(0.0, end - deadline), 3)}}
        said = ", ".join(f"{k} {v:.1f}" for k, v in exc.report["time"]["phases"].items())
        traced_s = phases.get("trace", 0.0)
        if deadline is not None and getattr(exc, "status", None) == "timeout" and \
                traced_s >= float(time_limit) - MIN_SOLVE_SECONDS:
            # tracing alone used the limit up, and the build that followed stopped at once (new user 33: "building
            # the cost graph passed its deadline after 0.0 s" after 21.0 s of tracing at time_limit=10): the cause
            # and the remedy first, the build's own words after them
            exc.args = (f"tracing and lowering {name} took {traced_s:.1f} s of time_limit={float(time_limit):g}, "
                        f"which leaves no time to build the cost graph and search: raise time_limit well above "
                        f"{traced_s:.0f} s (the build and the search come after tracing), or pass "
                        f"deterministic=True (a budget of solver work; tracing and builds are not counted in "
                        f"it). ({exc.args[0] if exc.args else exc})",) + tuple(exc.args[1:])
        exc.args = (f"{exc.args[0] if exc.args else exc} [auto_shard ran {end - started:.1f} s of its time_limit "
                    f"{float(time_limit):g}: {said} s; exception.report['time']]",) + tuple(exc.args[1:])
        raise
    except HloshardError as exc:
        raise ValueError(str(exc)) from None
    finally:
        _stop_child(warm)   # not used (a replicated baseline, the guard off) or not finished
        cancel_baselines(pending)   # those the guard did not read (off, or the call failed before it)
        if failed:   # the constraints' child (below) is not reached
            _stop_child(late)
    try:
        t_report = time.monotonic()
        report = build_report(result, dmesh, keep_shardings, budget)
        if device is not None:
            report.update(plan_timing(result.written or result, module, scale))
        report["peak_tensors"] = peak_tensors_of(result)
        # the plans known before the search (hloshard.jax.known) on the first solve's graph
        report["known_plans"] = [p.row() for p in first_known]
        if guard is not None:
            report["memory_guard"] = guard
            # the summary's "memory guard" row (summary.plan_rows); wall-clock: the share the guard was kept
            guard["summary"] = guard_summary(guard, None if deterministic or not memory_guard else
                                             {"kept": bool(keep_share), "share_seconds": share_figures[0],
                                              "needed_seconds": share_figures[1], "traced_seconds": traced,
                                              "read_early": read_early},
                                             peak=report.get("peak_memory_per_device"))
            if guard.get("note"):
                report.setdefault("warnings", []).append(guard["note"])
            if guard.get("unguarded"):   # round 28: never an unguarded plan silently (guard._lowest_priced)
                # stacklevel 3: the caller of auto_shard, past interrupts.interruptible's wrapper
                warnings.warn(guard["note"], UserWarning, stacklevel=3)
        # the collectives the plan predicts, ring bytes per device (as xla_compare / cost --xla count them)
        report["predicted_collective_bytes_per_device"] = predicted_collective_bytes(result)

        params = sorted(module.entry.parameters, key=lambda p: p.parameter_number)
        if len(params) != len(leaves):
            raise ValueError(f"the lowered function has {len(params)} parameters for {len(leaves)} argument leaves")
        in_sh = [NamedSharding(mesh, _spec(p.sharding, len(p.shape.dims), sdy_mesh)) for p in params]
        sharded_args = sum(1 for s in in_sh if not s.is_fully_replicated)
        # inputs that are not state, left replicated although a mesh axis divides their leading dim (new user 23, #5)
        report["replicated_inputs"] = replicated_batch_inputs(
            in_paths, [tuple(p.shape.dims) for p in params], [s.is_fully_replicated for s in in_sh],
            {q for _j, q, *_rest in state_ties}, dict(zip(mesh.axis_names, (int(n) for n in mesh.devices.shape))))
        if mesh.devices.size > 1 and in_sh and _replicated_step(report, sharded_args):
            note = _all_replicated_note(report, state_ties, device, int(mesh.devices.size), sharded_args, len(in_sh),
                                        scale if device is not None else None)
            report.setdefault("warnings", []).append(note)
            warnings.warn(note, UserWarning, stacklevel=3)   # the caller, past interruptible's wrapper
        root = module.entry.root
        if root.shape.is_tuple:
            outs = list(root.sharding.tuple_elements) if root.sharding.is_tuple else [root.sharding] * len(out_leaves)
            shapes = list(root.shape.tuple_shapes)
        else:
            outs, shapes = [root.sharding], [root.shape]
        if len(outs) != len(out_leaves):
            raise ValueError(f"the lowered function has {len(outs)} outputs for {len(out_leaves)} result leaves")
        out_sh = [NamedSharding(mesh, _spec(s, len(shp.dims), sdy_mesh)) for s, shp in zip(outs, shapes)]
        ties = []
        for j, q, mode, don, source in state_ties:
            same = out_sh[j].spec == in_sh[q].spec
            if same:
                out_sh[j] = in_sh[q]    # the very object: the output feeds the next step as it is
            ties.append({"output": out_paths[j], "input": in_paths[q], "mode": mode, "donated": don, "source": source,
                         "same_sharding": bool(same)})
        report["time"] = {"time_limit": float(time_limit), "mode": "work" if deterministic else "wall-clock",
                          # wall-clock: whether the guard's share was kept before the first solve (guard_share_holds)
                          # and the seconds of tracing it was judged by (round 28)
                          "guard_share_kept": bool(keep_share), "traced_seconds": round(traced, 3),
                          "first_solve_limit": first_limit, "guard_limit": float(time_limit) - first_limit
                          if memory_guard else 0.0}
        if memory_guard and not deterministic:
            # the guard's share against what it was estimated to need (guard.guard_share_figures): why the first solve
            # was or was not bounded by its half (first_solve_limit is then its solver's nominal limit only) and
            # why the data-parallel / FSDP baselines did or did not start early (new user 32's F2)
            report["time"]["guard_share"] = {
                "share_seconds": round(share_figures[0], 3), "needed_seconds": round(share_figures[1], 3),
                "kept": bool(keep_share), "read_early": read_early,
                "first_solve_bounded_by": "its half of the time left" if keep_share else
                "the call's deadline (builds), its solver by half of what the builds left"}
        # the post-solve local moves (autoshard.solve.improve_applied): annotations changed, wall seconds (noisy)
        report["local_moves"] = {"changed": len(result.local_moves or []), "seconds": round(t_moves, 3),
                                 "peak_limit": held, "pair_limit": pair_limit,
                                 "pairs_priced": move_stats.get("pairs"),
                                 "candidates": move_stats.get("candidates"),
                                 "cost_before": None if unmoved is None else round(float(unmoved.total_cost), 6),
                                 "peak_before": None if unmoved is None else int(unmoved.evaluation.peak_memory)}
        report["ties"] = {"tied": len(ties), "mismatches": sum(1 for t in ties if t["mode"] == "tie"
                                                               and not t["same_sharding"])}

        eqns = equations(closed)
        cut_meshes: dict = {}   # the meshes of sub-axis constraints (_sub_axis_sharding), shared
        pinned = {}
        for key, instr in equation_outputs(module, eqns).items():
            if instr.sharding is None:
                continue
            try:
                pinned[key] = _constraint(instr.sharding, len(instr.shape.dims), mesh, sdy_mesh, cut_meshes)
            except ValueError:  # a sub-axis sharding: left to XLA's propagation
                continue
        operand_constraints: dict = {}
        pin_rows = []
        for pin, operand in pins:
            at = pin_operand(pin, operand, eqns)
            steps = []
            if at is not None:
                try:   # through the pin's stop first (Pin.via, the written module's NAME.full.pin), then to the pin
                    steps = [_constraint(s, len(operand.shape.dims), mesh, sdy_mesh, cut_meshes)
                             for s in pin_steps(pin)]
                except ValueError:
                    at = None
            if at is not None:
                operand_constraints.setdefault(at[0], []).extend((at[1], sh) for sh in steps)
            pin_rows.append({"instruction": pin.user.name, "operand": operand.name, "sharding": str(pin.sharding),
                             "equation": None if at is None else "_".join(map(str, at[0])),
                             "input": None if at is None else at[1]})
        carried_broadcasts = _broadcast_constraints(module, eqns, operand_constraints, mesh, sdy_mesh) \
            if pin_operands else 0
        meet_steps = _meet_steps(closed, eqns, pinned, operand_constraints, in_sh, mesh)
        body_constraints: dict = {}   # the loops' state in the plan's layouts (jaxpr.loop_layouts; issue 24, r33)
        loop_operands = 0
        for path, rows in loop_layouts(module, eqns).items():
            for side, key in (("operand", "operands"), ("in", "inputs"), ("out", "outputs")):
                for i, sh, rank in rows[key]:
                    try:
                        c = _constraint(sh, rank, mesh, sdy_mesh, cut_meshes)
                    except ValueError:
                        continue
                    if side == "operand":
                        operand_constraints.setdefault(path, []).append((i, c))
                        loop_operands += 1
                    else:
                        body_constraints.setdefault(path, []).append((side, i, c))
        # the output constraints XLA's propagation reaches from the others (an elementwise equation whose inputs
        # are in its output's layout): left out of fn (jaxpr.carried_outputs; BENCHMARKS.md round 25, jitfast)
        carried = {k: pinned[k] for k in carried_outputs(closed, eqns, pinned, operand_constraints, in_sh, out_sh)}
        outputs = {k: v for k, v in pinned.items() if k not in carried}
        # your layout returned (guard._no_worse_than_yours, the guard off): fn is your function under your shardings
        # with no constraint of hloshard's -- the program jax.jit runs with them, which the plan of the graph only
        # renders (new user 32's LSTM: that rendering, plan.xla(), 145.1 MB / 45.7 MB by XLA against jax.jit's
        # 175.7 / 37.3 under GSPMD): "no worse than your layout" is then your layout itself
        as_given = ((guard or {}).get("your_layout") or {}).get("taken") == "your layout"
        if as_given:
            operand_constraints, body_constraints, outputs = {}, {}, {}
            carried, carried_broadcasts, meet_steps = dict(pinned), 0, 0
            for row in pin_rows:
                row["equation"] = row["input"] = None
        report["pins"] = {"your_layout_as_given": as_given, "operand_pins": len(pin_rows),
                          "carried": sum(1 for r in pin_rows if r["equation"]),
                          "loop_state_pins": int(getattr(result.graph, "loop_pins", 0) or 0),
                          "loop_state_carried": sum(len(v) for v in body_constraints.values()),
                          "loop_operands": loop_operands,
                          "broadcast_sources": carried_broadcasts, "meet_steps": meet_steps,
                          "output_constraints": len(outputs), "outputs_left_to_xla": len(carried)}
        constrained = program(closed, out_tree, outputs, operand_constraints, body_constraints)
        constrained.__name__ = f"{name}_hloshard"
        t = lap("report", t_report)
        constraints = []
        if with_constraints:
            # inside the time limit (round 24): not started past the deadline, cut at it ("Time")
            left = _xla_seconds(deadline)
            note = None
            if left < MIN_SOLVE_SECONDS:
                note = (f"the intermediates XLA's propagation leaves open (constraints) are not listed: the time limit "
                        f"ended before its XLA run ({max(0.0, left):.1f} s left)")
            else:
                try:
                    constraints = partition_specs(module, dmesh, timeout=left, child=late)["intermediates"]
                except HloshardError as exc:
                    note = f"the intermediates XLA's propagation leaves open (constraints) are not listed: {exc}"
            if note:
                report.setdefault("warnings", []).append(note)
            lap("constraints", t)   # XLA's propagation from the plan's entry shardings (a child process)
    finally:   # the constraints' child when it was not used (no time left, an error, Ctrl-C)
        _stop_child(late)
    end = time.monotonic()
    report["time"]["seconds"] = round(end - started, 3)   # the whole call (noisy: load)
    # wall seconds per phase (noisy: load), and how far past the deadline the call returned (wall-clock mode)
    report["time"]["phases"] = {k: round(v, 3) for k, v in phases.items()}
    report["time"]["phases_cpu"] = {k: round(v, 3) for k, v in phases_cpu.items()}
    report["time"]["past_deadline"] = None if deadline is None else round(max(0.0, end - deadline), 3)
    # re-solves on a work budget past the clock under a memory budget (autoshard.solve._fit_buffers' rescues)
    report["time"]["rescues"] = list(getattr(result.graph, "rescues", None) or [])
    module.state_partitions(dmesh.num_devices)   # hlo_text states its devices, as solve's output does
    return AutoShardResult(in_shardings=tuple(jax.tree_util.tree_unflatten(in_tree, in_sh)),
                           out_shardings=jax.tree_util.tree_unflatten(out_tree, out_sh), fn=constrained,
                           constraints=constraints, report=report, module=module, solve_result=result,
                           ties=ties, pins=pin_rows, donate_argnums=donated, source_fn=fn,
                           program=(closed, in_tree, out_tree, outputs, operand_constraints, body_constraints),
                           device_mesh=dmesh, outputs_left_to_xla=carried)
