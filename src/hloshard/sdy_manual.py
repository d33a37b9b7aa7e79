"""jax's Shardy-mode ``shard_map`` read as the manual region it is: the ``xla.sdy.*`` spelling rewritten, at load,
into the GSPMD spelling that every later layer reads (one reading of a manual region, two spellings feeding it).

What jax 0.10.2 writes (``jax.jit(f).lower(...).as_text(dialect="hlo")``, Shardy the default partitioner) for
``shard_map(body, mesh, in_specs, out_specs, axis_names=...)``::

    g  = (f32[8,8], f32[8,64]) custom-call(x, w), custom_call_target="xla.sdy.GlobalToLocalShape",
         frontend_attributes={xla.sdy.in_shardings="#sdy.sharding_per_value<[<@mesh, [{"data"}, {"model"}]>, ...]>",
                              xla.sdy.manual_axes="#sdy<manual_axes{"data", "model"}>"}
    a  = get-tuple-element(g), index=0 ...                  (no tuple, no get-tuple-element for one operand)
    y  = call(a, b), to_apply=xla.sdy.manual_computation_body.2, frontend_attributes={inlineable="false"}
    r  = f32[16,64] custom-call(y), custom_call_target="xla.sdy.LocalToGlobalShape",
         frontend_attributes={xla.sdy.manual_axes=..., xla.sdy.out_shardings="#sdy.sharding_per_value<[...]>"}

(several results: the call returns a tuple, read through get-tuple-element, ``LocalToGlobalShape`` takes one
operand per result and returns a tuple).  The same
``shard_map`` lowered with ``jax_use_shardy_partitioner=False`` is, per operand, ``Sharding`` (the in-spec's global
sharding) -> ``SPMDFullToShardShape`` (``{manual}``, or a manual subgroup for a partly manual ``shard_map``), the
body ``call``, and per result ``Sharding`` (manual) -> ``SPMDShardToFullShape`` (the out-spec's global sharding).
:func:`read_manual_computations` writes the first form as the second, in place: the manual-region handling of
:mod:`hloshard.strategy.custom_call` (the body priced per device, the boundary shardings fixed), the manual rule of
:mod:`hloshard.hlo.manual`, the memory model and XLA's GSPMD partitioner (``cost --xla``, which rejects ``xla.sdy.*``
custom-calls with a RET_CHECK) then see one form.  Open dims (``{?}``, ``{"model", ?}``) are written as jax's
GSPMD export writes them, ``backend_config="unspecified_dims=[...]"``; a ``Sharding`` custom-call inside a partly
manual body (jax writes ``sharding={replicated}`` there, its Shardy value naming only free axes) gets the manual
subgroup of its region, as the GSPMD export writes it.  The body's ``inlineable="false"`` (Shardy's marker that
keeps the call for its round trip) is dropped: the GSPMD export has none, and hloshard keeps ``xla.sdy.*`` bodies
as calls by name (:func:`hloshard.hlo.inline.is_inlinable_call`).

Below :mod:`hloshard.load` (which applies it to every input) and above :mod:`hloshard.sdy_mesh` (whose mesh and
one-value reading it uses).  Shardings it cannot read (sub-axes ``"x":(1)2``, a mesh the header does not define,
a value count other than the operands') raise InputError at the custom-call (exit 2): left as written, the region
was priced as a per-device program and its written plan refused by XLA's partitioner (fresh 37 #1), numbers that
look like answers.
"""

from __future__ import annotations

import math
import re

from .errors import InputError
from .hlo.ir import Instruction
from .hlo.shape import Shape
from .hlo.sharding import HloSharding
from .sdy_mesh import SDY_SHARDING, _frontend, module_meshes

__all__ = ["GLOBAL_TO_LOCAL", "LOCAL_TO_GLOBAL", "read_manual_computations", "region_shardings"]

GLOBAL_TO_LOCAL = "xla.sdy.GlobalToLocalShape"
LOCAL_TO_GLOBAL = "xla.sdy.LocalToGlobalShape"

_VALUE = re.compile(r"<\s*@([\w.\-$]+)\s*,\s*\[(.*?)\]\s*(?:,[^>]*)?>", re.S)
_DIM = re.compile(r"\{([^{}]*)\}")
_NAME = re.compile(r'"((?:[^"\\]|\\.)*)"')


class _Unreadable(Exception):
    """A Shardy value this reader does not take (the region is left as written)."""


def _values(text: str, meshes: dict) -> list[tuple[object, list[list[str]], list[bool]]]:
    """Each value of ``#sdy.sharding_per_value<[...]>`` as (mesh, axes per dim, open per dim)."""
    out = []
    for name, body in _VALUE.findall(text or ""):
        mesh = meshes.get(name)
        if mesh is None or ":" in body:
            raise _Unreadable(f"{text!r}: mesh @{name} unknown or sub-axes")
        dims, opens = [], []
        for d in _DIM.findall(body):
            parts = [p.strip() for p in d.split(",") if p.strip()]
            axes = [p.strip('"') for p in parts if p != "?"]
            if any(a not in mesh.names for a in axes):
                raise _Unreadable(f"{text!r}: an axis not of mesh @{name}")
            dims.append(axes)
            opens.append("?" in parts)
        out.append((mesh, dims, opens))
    return out


def _manual_axes(text: str) -> list[str]:
    return _NAME.findall(text or "")


def region_shardings(mesh, dims: list[list[str]], manual: list[str]) -> tuple[HloSharding, HloSharding]:
    """(global, local) HloShardings of one boundary value of a ``shard_map`` over ``mesh`` (an
    :class:`~hloshard.sdy_mesh.SdyMesh`): ``dims`` the mesh axes each dim of the global value is split over (major
    to minor), ``manual`` the manual axes.  Global: each dim tiled by its axes, the other axes replicated
    (``last_tile_dim_replicate``).  Local (the per-device value inside the region): ``{manual}`` when every axis
    of size > 1 is manual; else its dims tiled by their free (non-manual) axes, then a manual subgroup over the
    manual axes and a replicated one over the rest (``last_tile_dims={manual, replicated}``: XLA's form of a
    partly manual value, the tile assignment's subgroup dims enumerating the manual axes, then the rest, as
    jax's GSPMD export writes ``{devices=[1,1,4,2]<=[2,4]T(1,0) last_tile_dims={manual, replicated}}`` for
    ``axis_names={"model"}`` on a ``data=2, model=4`` mesh).  Raises nothing for names of ``mesh``."""
    index = {n: k for k, n in enumerate(mesh.names)}
    sizes = mesh.sizes
    devices = mesh.devices()
    used = [index[a] for axes in dims for a in axes]
    rest = [k for k in range(len(sizes)) if k not in used]
    tiles = [math.prod(sizes[index[a]] for a in axes) for axes in dims]
    if math.prod(tiles) == 1:
        glob = HloSharding.replicated()
    else:
        ta = devices.transpose(used + rest)
        reps = math.prod(sizes[k] for k in rest)
        glob = HloSharding.tiled(ta.reshape(tiles + [reps]), last_tile_dim_replicate=True) if reps > 1 \
            else HloSharding.tiled(ta.reshape(tiles))
    man = [index[a] for a in manual if a in index and sizes[index[a]] > 1]
    free_dims = [[index[a] for a in axes if index[a] not in man] for axes in dims]
    free_used = [k for axes in free_dims for k in axes]
    others = [k for k in range(len(sizes)) if k not in man and k not in free_used]
    if not man:
        return glob, glob
    free_tiles = [math.prod(sizes[k] for k in axes) for axes in free_dims]
    n_others = math.prod(sizes[k] for k in others)
    if math.prod(free_tiles) == 1 and n_others == 1:
        return glob, HloSharding.manual()
    ta = devices.transpose(free_used + man + others)
    shape = free_tiles + [math.prod(sizes[k] for k in man)]
    kinds = ("manual",)
    if n_others > 1:
        shape.append(n_others)
        kinds = ("manual", "replicated")
    return glob, HloSharding.tiled(ta.reshape(shape), last_tile_dims=kinds)


def _unspecified(opens: list[bool]) -> str | None:
    """jax's GSPMD export's ``backend_config`` for open dims (``{?}``), None when none is open."""
    dims = [k for k, o in enumerate(opens) if o]
    return f"unspecified_dims=[{','.join(map(str, dims))}]" if dims else None


class _Names:
    """Fresh instruction names, unique in the module."""

    def __init__(self, module):
        self.taken = {i.name for i in module.all_instructions()}

    def __call__(self, base: str) -> str:
        name, k = base, 1
        while name in self.taken:
            k += 1
            name = f"{base}.{k}"
        self.taken.add(name)
        return name


def _custom_call(name: str, target: str, shape: Shape, operand, sharding, unspecified, like) -> Instruction:
    attrs = {"custom_call_target": target}
    if unspecified:
        attrs["backend_config"] = unspecified
    cc = Instruction(name, "custom-call", shape, [operand], attrs=attrs)
    cc.sharding = sharding
    if like.attrs.get("metadata") is not None:
        cc.set_attr("metadata", like.attrs["metadata"])
    return cc


def _leaf_shapes(shape: Shape) -> list[Shape]:
    return list(shape.tuple_shapes) if shape.is_tuple else [shape]


def _entering(g, meshes, names) -> tuple[list[Instruction], list[str], object]:
    """The GSPMD form of ``GlobalToLocalShape`` ``g``: per operand ``Sharding`` -> ``SPMDFullToShardShape``
    (not yet placed).  Returns (the custom-call pairs, in order, the manual axes, the mesh)."""
    fa = _frontend(g)
    values = _values(str(fa.get("xla.sdy.in_shardings", "")), meshes)
    manual = _manual_axes(str(fa.get("xla.sdy.manual_axes", "")))
    locals_ = _leaf_shapes(g.shape)
    if len(values) != len(g.operands) or len(locals_) != len(g.operands) or not manual:
        raise _Unreadable(f"{g.name}: {len(values)} in_shardings for {len(g.operands)} operands")
    made = []
    for k, (op, (mesh, dims, opens), local) in enumerate(zip(g.operands, values, locals_)):
        if len(dims) != len(op.shape.dims):
            raise _Unreadable(f"{g.name}: in_shardings of rank {len(dims)} for a rank {len(op.shape.dims)} operand")
        glob, loc = region_shardings(mesh, dims, manual)
        unspec = _unspecified(opens)
        pin = _custom_call(names(f"{g.name}.in{k}"), "Sharding", op.shape, op, glob, unspec, g)
        enter = _custom_call(names(f"{g.name}.local{k}"), "SPMDFullToShardShape", local, pin, loc, unspec, g)
        made.append((pin, enter))
    return made, manual, values[0][0]


def _leaving(l2g, meshes, names, comp) -> list[Instruction]:
    """The GSPMD form of ``LocalToGlobalShape`` ``l2g``: per result (get-tuple-element of a tuple operand)
    ``Sharding`` (local, manual) -> ``SPMDShardToFullShape`` (the out-spec's global sharding), placed before
    ``l2g``.  Returns the ``SPMDShardToFullShape`` of each result."""
    fa = _frontend(l2g)
    values = _values(str(fa.get("xla.sdy.out_shardings", "")), meshes)
    manual = _manual_axes(str(fa.get("xla.sdy.manual_axes", "")))
    globals_ = _leaf_shapes(l2g.shape)
    ops = list(l2g.operands)
    if len(ops) == 1 and ops[0].shape.is_tuple:   # one tuple operand: its elements, read through get-tuple-element
        sources = [(ops[0], k) for k in range(len(ops[0].shape.tuple_shapes))]
    else:                                         # jax 0.10.2: one operand per result
        sources = [(op, None) for op in ops]
    if len(values) != len(globals_) or not manual or len(sources) != len(globals_) or \
            any(k is None and op.shape.is_tuple for op, k in sources):
        raise _Unreadable(f"{l2g.name}: {len(values)} out_shardings for {len(globals_)} results")
    outs = []
    for k, ((mesh, dims, opens), glob_shape) in enumerate(zip(values, globals_)):
        if len(dims) != len(glob_shape.dims):
            raise _Unreadable(f"{l2g.name}: out_shardings of rank {len(dims)} for a rank {len(glob_shape.dims)} "
                              f"result")
        glob, loc = region_shardings(mesh, dims, manual)
        unspec = _unspecified(opens)
        value, index = sources[k]
        if index is not None:
            value = Instruction(names(f"{l2g.name}.elem{k}"), "get-tuple-element", value.shape.tuple_shapes[index],
                                [value], attrs={"index": index})
            comp.add_instruction(value, before=l2g)
        pin = _custom_call(names(f"{l2g.name}.local{k}"), "Sharding", value.shape, value, loc, unspec, l2g)
        comp.add_instruction(pin, before=l2g)
        out = _custom_call(names(f"{l2g.name}.global{k}"), "SPMDShardToFullShape", glob_shape, pin, glob, unspec,
                           l2g)
        outs.append(out)
    return outs


def _replace(comp, old: Instruction, news: list[Instruction]) -> None:
    """``old`` (an array, or a tuple read through get-tuple-element) replaced by ``news``, one per leaf: a
    get-tuple-element's users read the new leaf; any other user of a tuple reads a ``tuple`` of them."""
    if not old.shape.is_tuple:
        comp.replace_all_uses(old, news[0])
        return
    rest = []
    for user in list(old.users):
        index = user.attrs.get("index") if user.opcode == "get-tuple-element" else None
        if isinstance(index, int) and 0 <= index < len(news) and user.parent is comp:
            comp.replace_all_uses(user, news[index])
            if not user.users and user is not comp.root:
                comp.remove_instruction(user)
        else:
            rest.append(user)
    if rest or old is comp.root:
        tup = Instruction(old.name + ".t", "tuple", old.shape, news)
        comp.add_instruction(tup, before=old)
        comp.replace_all_uses(old, tup)


def _body_computations(call) -> list:
    """The computations a body ``call`` reaches (itself first), through any called computation."""
    out, seen, todo = [], set(), list(call.called_computations)
    while todo:
        c = todo.pop(0)
        if id(c) in seen:
            continue
        seen.add(id(c))
        out.append(c)
        for i in c.instructions:
            todo.extend(i.called_computations)
    return out


def _localize_constraints(call, mesh, manual, meshes) -> None:
    """A ``Sharding`` custom-call in a partly manual body: jax's Shardy export writes it over the free axes (its
    ``xla.sdy.sharding``) with ``sharding={replicated}``; the GSPMD form carries the region's manual subgroup."""
    for comp in _body_computations(call):
        for instr in comp.instructions:
            if not instr.is_sharding_constraint or instr.sharding is None or not instr.shape.is_array:
                continue
            fa = _frontend(instr)
            try:
                values = _values(str(fa.get(SDY_SHARDING, "")), meshes)
            except _Unreadable:
                continue
            if len(values) != 1 or len(values[0][1]) != len(instr.shape.dims):
                continue
            _, dims, opens = values[0]
            _, loc = region_shardings(mesh, dims, manual)
            instr.sharding = loc
            if _unspecified(opens) and "backend_config" not in instr.attrs:
                instr.set_attr("backend_config", _unspecified(opens))
            fa.pop(SDY_SHARDING, None)   # the named axes of a manual value have no GSPMD meaning
            instr.set_attr("frontend_attributes", fa or None)


def _body_call(g_users: list[Instruction]) -> Instruction | None:
    for u in g_users:
        if u.opcode == "call":
            return u
    return None


def read_manual_computations(module, filename: str | None = None) -> int:
    """Rewrite every Shardy-mode ``shard_map`` of ``module`` (``xla.sdy.GlobalToLocalShape`` / body ``call`` /
    ``xla.sdy.LocalToGlobalShape``) into jax's GSPMD form of it, in place (module docstring).  Returns the number
    of regions rewritten.  Raises InputError (``filename``, the custom-call's line and column) at the first
    custom-call whose Shardy values it cannot read, before changing anything."""
    targets = [i for i in module.all_instructions() if i.custom_call_target in (GLOBAL_TO_LOCAL, LOCAL_TO_GLOBAL)]
    if not targets:
        return 0
    meshes = module_meshes(module)
    names = _Names(module)
    for i in targets:   # the values read before anything is changed
        try:
            fa = _frontend(i)
            _values(str(fa.get("xla.sdy.in_shardings" if i.custom_call_target == GLOBAL_TO_LOCAL
                               else "xla.sdy.out_shardings", "")), meshes)
        except _Unreadable as exc:
            raise _error(i, exc, filename) from None
    done = 0
    for g in [i for i in targets if i.custom_call_target == GLOBAL_TO_LOCAL]:
        comp = g.parent
        try:
            made, manual, mesh = _entering(g, meshes, names)
        except _Unreadable as exc:
            raise _error(g, exc, filename) from None
        for pin, enter in made:
            comp.add_instruction(pin, before=g)
            comp.add_instruction(enter, before=g)
        gtes = [u for u in g.users if u.opcode == "get-tuple-element"]
        body = _body_call(list(g.users)) or _body_call([v for u in gtes for v in u.users])
        keep = {}   # the entering values keep the names jax gave them (the get-tuple-elements', or g's)
        if not g.shape.is_tuple:
            keep[g.name] = made[0][1]
        for u in gtes:
            k = u.attrs.get("index")
            if isinstance(k, int) and 0 <= k < len(made) and u.name not in keep:
                keep[u.name] = made[k][1]
        _replace(comp, g, [enter for _, enter in made])
        if not g.users:
            comp.remove_instruction(g)
        _keep_names(comp, keep)
        if body is not None:   # the call and the get-tuple-elements of its results
            for i in [body] + [u for u in body.users if u.opcode == "get-tuple-element"]:
                fa = _frontend(i)
                if fa.pop("inlineable", None) is not None:
                    i.set_attr("frontend_attributes", fa or None)
            if any(not e.sharding.is_manual for _, e in made):
                _localize_constraints(body, mesh, manual, meshes)
        done += 1
    for l2g in [i for i in targets if i.custom_call_target == LOCAL_TO_GLOBAL]:
        comp = l2g.parent
        try:
            outs = _leaving(l2g, meshes, names, comp)
        except _Unreadable as exc:
            raise _error(l2g, exc, filename) from None
        for out in outs:
            comp.add_instruction(out, before=l2g)
        keep = {l2g.name: outs[0]} if not l2g.shape.is_tuple else \
            {u.name: outs[u.attrs["index"]] for u in l2g.users if u.opcode == "get-tuple-element"
             and isinstance(u.attrs.get("index"), int) and 0 <= u.attrs["index"] < len(outs)}
        _replace(comp, l2g, outs)
        if not l2g.users and l2g is not comp.root:
            comp.remove_instruction(l2g)
        _keep_names(comp, keep)
    return done


def _error(instr, exc, filename) -> InputError:
    """The InputError of a boundary custom-call whose Shardy values are not read."""
    return InputError(f"{instr.name}: a shard_map boundary hloshard does not read ({exc}): its region cannot be priced "
                      f"per device; Shardy sub-axes and meshes the header does not define are not read",
                      filename=filename, line=instr.line, column=instr.column or 1)


def _keep_names(comp, keep: dict) -> None:
    """Give each new instruction of ``keep`` (old name -> instruction) the name of the one it stands for, where no
    instruction of ``comp`` holds that name any more."""
    for name, instr in keep.items():
        if name not in comp:
            comp.rename(instr, name)
