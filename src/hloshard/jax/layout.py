"""Another layout written onto an ``auto_shard`` plan's own module, for ``hloshard diff`` (new user 31, F19).

``hloshard diff`` compares two plans of one module, instruction by instruction, matched by name; two lowerings of
one function (the user's ``jax.jit(step, in_shardings=mine)`` export and ``plan.hlo_text``) number their
instructions differently and are refused ("they are not two plans of one module").  :func:`layout_text` writes
the user's layout -- ``in_shardings`` / ``out_shardings`` as ``jax.jit`` takes them -- onto the plan's module
instead: the same instructions under the same names, with the plan's annotations taken off, so that::

    open("mine.hlo", "w").write(plan.hlo_text_with(my_in_shardings, my_out_shardings))
    open("plan.hlo", "w").write(plan.hlo_text)
    # hloshard diff mine.hlo plan.hlo --mesh data=2,model=4 --complete xla

prices the user's layout as ``jax.jit`` completes it (``--complete xla``: XLA's propagation from the entry
shardings, what ``jax.jit`` runs) against the plan, per instruction.

Public API::

    layout_text(plan, in_shardings, out_shardings=None) -> str     # AutoShardResult.hlo_text_with
    written_pin(instr) -> bool                                      # a Sharding custom-call solve wrote
    spec_sharding(sharding, rank, dmesh, axis_names, what) -> HloSharding | None
"""

from __future__ import annotations

import re

from ..hlo import parse_module, print_module
from ..hlo.sharding import HloSharding
from ..mesh import DeviceMesh
from ..mesh_setup import named_mesh_spec
from ..textout import mesh_difference

__all__ = ["layout_text", "written_pin", "spec_sharding"]

#: the names of the ``Sharding`` custom-calls ``solve`` writes (:mod:`hloshard.strategy.realize`): an operand's
#: pin ``NAME.pin`` and its replicated stop ``NAME.full.pin``, a loop init's ``NAME.init.pin``, a loop invariant's
#: ``NAME.keep``, a loop-state read's ``NAME.sh``, a transpose's ``NAME.tpin``; a taken name gets a number
WRITTEN_PIN = re.compile(r".+\.(?:pin|full\.pin|init\.pin|keep|sh|tpin)[0-9]*")


def written_pin(instr) -> bool:
    """Whether ``instr`` is a ``Sharding`` custom-call ``solve`` wrote (a pin of the plan, named as
    :data:`WRITTEN_PIN` says), not one of the function's own ``with_sharding_constraint``s (which jax names
    ``custom-call.N`` and marks with the equation's ``op_name``)."""
    return instr.is_sharding_constraint and instr.op_name is None and WRITTEN_PIN.fullmatch(instr.name) is not None


def spec_sharding(sharding, rank: int, dmesh: DeviceMesh, axis_names, what: str, mesh_ids=None):
    """The HloSharding of a value of ``rank`` dims laid out by ``sharding`` -- a ``jax.sharding.NamedSharding`` on
    the plan's mesh (the same axis names, sizes and devices, in order) or a ``PartitionSpec`` over its axis names
    -- on ``dmesh`` (the plan's mesh, unrefined: its device order is the module's), through
    :meth:`hloshard.mesh.DeviceMesh.axes_to_sharding` (a dim split over several axes: major to minor, as
    ``PartitionSpec(("data", "model"))`` lists them); None for ``None`` (the value left to XLA, as ``jax.jit``
    leaves an unspecified sharding).  Raises ValueError naming ``what`` (``in_shardings[0]['w']``) for another
    kind of sharding, another mesh, an axis the mesh lacks or used twice, a spec longer than the value's rank (a
    split that does not divide its dim is left to the validity rule ``diff`` applies to the module).  ``mesh_ids``:
    the jax device ids of the plan's mesh, position by position, that a NamedSharding's mesh must list (default
    ``dmesh``'s ids; :func:`layout_text` gives them, its ``dmesh`` numbering positions as the module does)."""
    import numpy as np
    from jax.sharding import NamedSharding, PartitionSpec

    if sharding is None:
        return None
    if isinstance(sharding, NamedSharding):
        mesh = sharding.mesh
        ids = [int(d.id) for d in np.asarray(mesh.devices).flat]
        want = [int(i) for i in np.asarray(dmesh.device_ids if mesh_ids is None else mesh_ids).flat]
        if tuple(mesh.axis_names) != tuple(axis_names) or tuple(int(n) for n in np.shape(mesh.devices)) != \
                tuple(dmesh.shape) or ids != want:
            raise ValueError(f"{what}: a NamedSharding on " + mesh_difference(   # (hook: textout.mesh_difference)
                dict(mesh.shape), ids, dict(zip(axis_names, dmesh.shape)), want, "the plan's mesh"))
        spec = sharding.spec
    elif isinstance(sharding, PartitionSpec):
        spec = sharding
    else:
        raise ValueError(f"{what}: expected a NamedSharding, a PartitionSpec or None, got {type(sharding).__name__}")
    if len(spec) > rank:
        raise ValueError(f"{what}: {spec} names {len(spec)} dims, the value has {rank}")
    dims = []
    for entry in tuple(spec) + (None,) * (rank - len(spec)):
        if entry is not None and not isinstance(entry, (str, tuple, list)):   # e.g. PartitionSpec.UNCONSTRAINED
            raise ValueError(f"{what}: {spec} gives a dim {entry!r}: name mesh axes, or None for a whole dim")
        names = () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)
        axes = []
        for n in names:
            if n not in axis_names:
                raise ValueError(f"{what}: {spec} names the axis {n!r}, which the mesh lacks ({', '.join(axis_names)})")
            axes.append(list(axis_names).index(n))
        dims.append(axes)
    used = [a for d in dims for a in d]
    if len(set(used)) != len(used):
        raise ValueError(f"{what}: {spec} uses a mesh axis twice")
    return dmesh.axes_to_sharding(dims)


def _leaves(treedef, given, what: str) -> list:
    """``given`` as one entry per leaf of ``treedef``: a single sharding (or None) for the whole subtree, else a
    pytree of shardings shaped as the subtree (``treedef.flatten_up_to``).  Raises ValueError naming ``what``."""
    from jax.sharding import NamedSharding, PartitionSpec

    if given is None or isinstance(given, (NamedSharding, PartitionSpec)):
        return [given] * treedef.num_leaves
    try:
        return list(treedef.flatten_up_to(given))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{what}: expected one sharding (or None) for it, or a pytree of shardings shaped as it: "
                         f"{exc}") from None


def layout_text(plan, in_shardings, out_shardings=None) -> str:
    """The text of ``plan``'s module (an :class:`hloshard.jax.AutoShardResult`: its instructions and names, as
    :attr:`~hloshard.jax.AutoShardResult.hlo_text` prints them) laid out by another layout: the plan's annotations
    and the pins ``solve`` wrote (:func:`written_pin`) taken off, then entry parameter ``i`` given the sharding of
    flattened argument leaf ``i`` of ``in_shardings`` and the root that of ``out_shardings``' leaves
    (:func:`spec_sharding`).  ``in_shardings``: as ``jax.jit`` takes it, one entry per positional argument of the
    function ``auto_shard`` was given (a tuple or list), each a NamedSharding / PartitionSpec / None for the whole
    argument or a pytree of them shaped as it; ``out_shardings``: the same for the result (None: every output left
    to XLA).  None leaves a value without a sharding (XLA's propagation chooses it, as ``jax.jit`` does; an output
    among others ``{unknown}``).  The function's own sharding constraints keep the sharding the plan's module gives
    them (the constraint itself under ``keep_shardings`` 'io' / 'all', which keep them).

    Returns the HLO text: ``hloshard diff THIS.hlo PLAN.hlo --mesh ... --complete xla`` then compares the two plans
    of one module instruction by instruction (the plan's pins are instructions only B has).  Raises ValueError
    for a structure or a sharding that does not fit (naming the argument path)."""
    import jax

    if plan.program is None:
        raise ValueError("this plan keeps no program (its argument and result structure): hlo_text_with needs one")
    _closed, in_tree, out_tree = plan.program[:3]
    leaves = jax.tree_util.tree_leaves(plan.in_shardings) + jax.tree_util.tree_leaves(plan.out_shardings)
    if not leaves:
        raise ValueError("this plan has no NamedSharding to read its mesh from")
    mesh = leaves[0].mesh
    names = tuple(mesh.axis_names)
    # the module's device ids are positions in mesh.devices.flat (hloshard.jax.api._positions): an iota mesh, the
    # plan's jax ids checked beside it (mesh_ids)
    dmesh = DeviceMesh.parse(named_mesh_spec(names, mesh.devices.shape))
    mesh_ids = [int(d.id) for d in mesh.devices.flat]
    arg_trees = in_tree.children()   # the example arguments' tuple: one subtree per positional argument
    if not isinstance(in_shardings, (tuple, list)) or len(in_shardings) != len(arg_trees):
        raise ValueError(f"in_shardings: expected a tuple of {len(arg_trees)} entries, one per positional argument "
                         f"(as plan.in_shardings), got {type(in_shardings).__name__}"
                         + (f" of {len(in_shardings)}" if isinstance(in_shardings, (tuple, list)) else ""))
    flat_in = [x for k, (t, s) in enumerate(zip(arg_trees, in_shardings))
               for x in _leaves(t, s, f"in_shardings[{k}]")]
    flat_out = _leaves(out_tree, out_shardings, "out_shardings")
    module = parse_module(plan.hlo_text, "<auto_shard plan>")
    for comp in module.computations:
        pins = [i for i in comp.instructions if written_pin(i)]
        for pin in reversed(pins):   # a stop's pin first: it reads the stop
            comp.replace_all_uses(pin, pin.operands[0])
        comp.remove_instructions(pins)
        for instr in comp.instructions:
            if not instr.is_sharding_constraint:
                instr.sharding = None
    params = sorted(module.entry.parameters, key=lambda p: p.parameter_number)
    if len(params) != len(flat_in):
        raise ValueError(f"in_shardings: {len(flat_in)} argument leaves, the plan's module has {len(params)} "
                         f"parameters")
    paths = [jax.tree_util.keystr(k) for k, _ in jax.tree_util.tree_flatten_with_path(in_tree.unflatten(
        [0] * in_tree.num_leaves))[0]]
    for p, given, path in zip(params, flat_in, paths):
        p.sharding = spec_sharding(given, len(p.shape.dims) if p.shape.is_array else 0, dmesh, names,
                                   f"in_shardings{path}", mesh_ids)
    root = module.entry.root
    outs = list(root.shape.tuple_shapes) if root.shape.is_tuple else [root.shape]
    if len(outs) != len(flat_out):
        raise ValueError(f"out_shardings: {len(flat_out)} result leaves, the plan's module has {len(outs)} outputs")
    out_paths = [jax.tree_util.keystr(k) for k, _ in jax.tree_util.tree_flatten_with_path(out_tree.unflatten(
        [0] * out_tree.num_leaves))[0]]
    shardings = [spec_sharding(g, len(s.dims), dmesh, names, f"out_shardings{path}", mesh_ids)
                 for g, s, path in zip(flat_out, outs, out_paths)]
    if any(sh is not None for sh in shardings):
        if root.shape.is_tuple:
            root.sharding = HloSharding.tuple([HloSharding.unknown() if sh is None else sh for sh in shardings])
        else:
            root.sharding = shardings[0]
    return print_module(module)
