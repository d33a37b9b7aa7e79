"""``solve --partition-specs FILE.json``: the solved shardings as JAX ``PartitionSpec``s.

Per entry parameter and per output: its PartitionSpec over the named mesh axes (a JSON list, one item
per tensor dim: ``null`` replicated, ``"data"`` one axis, ``["data", "model"]`` several axes major to
minor, ``"model:(1)2"`` a Shardy sub-axis), the instruction name and the JAX path (``jax.arg_info`` /
``jax.result_info`` or the argument's name location of a StableHLO input; a parameter's
``metadata={op_name=...}`` otherwise), plus the **intermediate** shardings XLA would not reach from the
parameter and output shardings alone: one extra XLA GSPMD sharding propagation of the module with only
those (in a child process, :func:`hloshard.xla_check.run_jax_child`), compared instruction by
instruction with hloshard's (semantic HloSharding equality; instructions XLA simplified away before
propagating are only counted, ``not_in_xla_propagation``); each differing instruction is listed
with its source file and line when the metadata has them (``source_file``/``source_line`` or a
``stack_frame_id`` into the module's stack-frame table).

The mesh axes are those of the module's named Shardy mesh (:func:`hloshard.sdy.module_sdy_mesh`),
else those of the user's mesh (``--mesh data=2,model=4``: ``data``, ``model``; unnamed: ``axis_0, axis_1,
...``), a split over part of an axis as its Shardy sub-axis, never the internal refinement's axes.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import sys
import tempfile
import threading

from .cost.liveness import program_schedule
from .errors import InputError
from .hlo import loops, parse_module, print_module
from .hlo.attributes import Raw, parse_metadata
from .hlo.inline import inline_calls
from .hlo.manual import manual_kind
from .hlo.sharding import HloSharding
from .io import write_text_atomic
from .sdy import NotExpressible, SdyMesh, dim_axes, module_sdy_mesh
from .sdy_mesh import SDY_RESULT_TARGETS
from .xla_check import compile_with_dump, run_jax_child, start_jax_child

# jax / jaxlib are optional (the ``jax`` extra): the CLI must run without them, so they are imported
# inside the functions that need them, never at module level (tests/test_import_contracts.py).

__all__ = ["partition_specs", "spec_json", "xla_propagate", "source_location"]


def _mesh(module, dmesh):
    m = module_sdy_mesh(module)
    if m is not None:
        return m
    # the user's mesh (its names, its axes), not the internal refinement: a split over part of an axis is
    # a Shardy sub-axis ("model:(1)2") of it (new user 15: specs on 'axis_0..2' of a 2x2x2 refinement of
    # data=2,model=4); a refinement keeps the device order, so the ids are the same
    shape = tuple(getattr(dmesh, "user_shape", None) or dmesh.shape)
    names = tuple(getattr(dmesh, "user_names", None) or (f"axis_{i}" for i in range(len(shape))))
    ids = None if dmesh.is_iota else tuple(int(x) for x in dmesh.device_ids.reshape(-1))
    return SdyMesh("mesh", names, shape, ids)


def spec_json(sharding, rank: int, mesh) -> list | None:
    """The PartitionSpec of ``sharding`` as JSON (see the module docstring); None when it has no
    named-axis form (maximal, manual, a device order no axes produce)."""

    try:
        dims = dim_axes(sharding, rank, mesh)
    except NotExpressible:
        return None
    out: list = []
    for refs in dims:
        names = [r.replace('"', "") for r in refs]
        out.append(None if not names else names[0] if len(names) == 1 else names)
    return out


def _frames(module) -> tuple[dict, dict, dict]:
    """(file names, file locations, stack frames) of the module's stack-frame table."""
    files, locs, frames = {}, {}, {}
    section = None
    for line in (getattr(module, "stack_frames", None) or "").splitlines():
        s = line.strip()
        if s in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            section = s
            continue
        m = re.match(r'(\d+)\s+(.*)$', s)
        if not m:
            continue
        k, rest = int(m.group(1)), m.group(2)
        if section == "FileNames":
            files[k] = rest.strip().strip('"')
        elif section == "FileLocations":
            f = re.search(r"file_name_id=(\d+)", rest)
            ln = re.search(r"\bline=(\d+)", rest)
            if f and ln:
                locs[k] = (int(f.group(1)), int(ln.group(1)))
        elif section == "StackFrames":
            f = re.search(r"file_location_id=(\d+)", rest)
            if f:
                frames[k] = int(f.group(1))
    return files, locs, frames


def source_location(instr, frames=None) -> str | None:
    """``file:line`` of ``instr`` from its metadata (``source_file``/``source_line``, or the innermost
    frame of ``stack_frame_id``); None when the metadata has neither."""

    raw = instr.attrs.get("metadata")
    if not raw:
        return None
    try:
        md = parse_metadata(str(raw))
    except Exception:  # noqa: BLE001 - a malformed metadata field only loses the location
        return None
    if md.get("source_file"):
        return f"{md['source_file']}:{md.get('source_line', 0)}"
    fid = md.get("stack_frame_id")
    if fid is None:
        return None
    files, locs, fr = frames if frames is not None else _frames(instr.parent.parent)
    loc = locs.get(fr.get(int(fid), -1))
    if loc is None or loc[0] not in files:
        return None
    return f"{files[loc[0]]}:{loc[1]}"


def _op_name(instr) -> str | None:
    raw = instr.attrs.get("metadata")
    try:
        return parse_metadata(str(raw)).get("op_name") if raw else None
    except Exception:  # noqa: BLE001
        return None


def xla_propagate(module, num_devices: int, timeout: float = 300.0, keep=(), child=None, nested: bool = False):
    """XLA's GSPMD sharding propagation of ``module`` with only its entry parameter and output
    shardings kept (and those of the instructions named in ``keep``): name -> HloSharding of every
    instruction of the propagated entry computation.  ``nested``: also of every instruction of the
    computations the entry calls (while bodies and conditions, branches: XLA's propagation runs through
    them, :func:`complete_with_xla`); their own written shardings are kept.  ``child``: a child started before
    (``hloshard.xla_check.start_jax_child("hloshard.partition_specs", num_devices)``) to run it in.
    Raises InputError when jax is missing or XLA rejects the module."""
    text, dims = _propagation_text(module, keep, nested)
    # the dump folder is the parent's: the child ends by os._exit as soon as the propagation's dump is
    # written, while its compile may still be writing more, so only here, after it has exited, can the
    # folder be removed (the child removing it raced with those writes: 1,748 folders left in /tmp)
    with tempfile.TemporaryDirectory(prefix="hloshard-prop-") as dump:
        data = run_jax_child("hloshard.partition_specs", {"text": text, "n": num_devices, "dump": dump},
                             num_devices, timeout, what="XLA sharding propagation", flag="--partition-specs",
                             child=child)
    return _read_propagation(data, dims, nested)


class PendingPropagation:
    """:func:`xla_propagate` started now and read later (:meth:`result`): the module's text is made at once (the
    module may change afterwards), the child (``child``, or one started here) is given it in a thread, so XLA
    propagates beside the caller's own work.  :func:`hloshard.jax.auto_shard` starts the memory guard's baseline
    so, beside its first solve, when the user's shardings (the baseline's entry) are known at the call's start.
    ``nested`` as :func:`xla_propagate`'s (the guard's baselines read loop bodies too).
    Raises InputError from :meth:`result` as :func:`xla_propagate` does, and on a time-out."""

    def __init__(self, module, num_devices: int, keep=(), child=None, nested: bool = False):
        text, self._dims = _propagation_text(module, keep, nested)
        self._nested = nested
        self._child = child if child is not None else start_jax_child("hloshard.partition_specs", num_devices)
        self._dump = tempfile.mkdtemp(prefix="hloshard-prop-")
        self._out: dict = {}
        payload = {"text": text, "n": num_devices, "dump": self._dump}

        def run():
            try:
                self._out["data"] = run_jax_child("hloshard.partition_specs", payload, num_devices, 86400.0,
                                                  what="XLA sharding propagation", flag="--partition-specs",
                                                  child=self._child)
            except BaseException as exc:   # noqa: BLE001 - handed to result()
                self._out["error"] = exc
            finally:   # the child has ended (xla_propagate's reason to remove the folder only now)
                shutil.rmtree(self._dump, ignore_errors=True)

        self._thread = threading.Thread(target=run, name="hloshard-propagation", daemon=True)
        self._thread.start()

    def done(self) -> bool:
        """Whether XLA's child has answered (or failed)."""
        return not self._thread.is_alive()

    def result(self, timeout: float) -> dict:
        """:func:`xla_propagate`'s answer, waiting at most ``timeout`` seconds more for it (the same answer on every
        call).  Raises InputError when the child failed, or timed out (it is then ended)."""
        if "found" in self._out:
            return self._out["found"]
        self._thread.join(max(0.0, float(timeout)))
        if self._thread.is_alive():
            self.cancel()
            raise InputError(f"XLA sharding propagation timed out after {max(0.0, float(timeout)):.0f} s more")
        if "error" in self._out:
            err = self._out["error"]
            raise err if isinstance(err, InputError) else InputError(f"XLA sharding propagation failed: {err}")
        self._out["found"] = _read_propagation(self._out["data"], self._dims, self._nested)
        return self._out["found"]

    def cancel(self) -> None:
        """End XLA's child when it is still running (nothing is read afterwards)."""
        if self._child.poll() is None:
            self._child.kill()
        self._thread.join(5.0)
        if "found" not in self._out and "data" not in self._out:
            self._out.setdefault("error", RuntimeError("cancelled"))


def _manual_boundary(instr) -> bool:
    """A ``shard_map``'s boundary as jax writes it (``SPMDFullToShardShape`` / ``SPMDShardToFullShape``, the
    ``Sharding`` custom-call that feeds the first or is fed by a manual value, any manual value): what the program
    fixes, kept for XLA's propagation (dropped, XLA's partitioner stops on a RET_CHECK, custom_call_handler.cc:
    ``hlo->sharding().IsManual() || hlo->sharding().IsManualSubgroup()``; issue 24)."""
    if instr.custom_call_target in ("SPMDFullToShardShape", "SPMDShardToFullShape"):
        return True
    if manual_kind(instr.sharding) is not None:
        return True
    return instr.is_sharding_constraint and any(u.custom_call_target == "SPMDFullToShardShape" for u in instr.users)


def _propagation_text(module, keep=(), nested: bool = False) -> tuple:
    """``(text, dims)``: ``module`` printed for XLA's propagation (:func:`xla_propagate`: every sharding but the
    entry's and ``keep``'s dropped, each instruction's name sent as its op_name -- with ``nested`` also in
    the other computations, whose shardings are kept; ``module`` left as it was) and instruction name -> dims
    of its entry instructions, with ``nested`` of every computation's (:func:`_read_propagation`'s map back)."""

    # XLA renumbers instruction names on its HLO -> StableHLO -> HLO round trip but keeps
    # metadata op_name: send each instruction's name as its op_name and map back by it
    saved, meta, pins = {}, {}, {}
    root = module.entry.root
    for instr in module.entry.instructions:
        meta[instr] = instr.attrs.get("metadata")
        quoted = instr.name.replace("\\", "\\\\").replace('"', '\\"')
        instr.set_attr("metadata", Raw('{op_name="' + quoted + '"}'))
        if instr.custom_call_target in SDY_RESULT_TARGETS:
            # jax's out_shardings (xla.sdy.FuncResultSharding): an output sharding, kept, in GSPMD's form
            # (XLA's partitioner rejects xla.sdy.* custom-calls; as cost --xla hands them over,
            # xla_compare.tag_module_text); without a sharding, propagated through as a copy
            pins[instr] = dict(instr.attrs)
            instr.attrs.pop("custom_call_has_side_effect", None)
            if instr.sharding is not None:
                instr.attrs["custom_call_target"] = Raw('"Sharding"')
            else:
                instr.opcode = "copy"
                instr.attrs.pop("custom_call_target", None)
            continue
        if instr.opcode != "parameter" and instr is not root and instr.sharding is not None \
                and instr.name not in keep and not _manual_boundary(instr):
            saved[instr] = instr.sharding
            instr.sharding = None
            if instr.is_sharding_constraint:
                # a Sharding custom-call without its sharding is invalid HLO: propagate through it as a copy
                pins[instr] = dict(instr.attrs)
                instr.opcode = "copy"
                instr.attrs.pop("custom_call_target", None)
    inner = called_instructions(module) if nested else []
    for instr in inner:   # named as the entry's are: XLA keeps a body op's op_name through StableHLO
        meta[instr] = instr.attrs.get("metadata")
        quoted = instr.name.replace("\\", "\\\\").replace('"', '\\"')
        instr.set_attr("metadata", Raw('{op_name="' + quoted + '"}'))
    try:
        text = print_module(module)
    finally:
        for instr, attrs in pins.items():
            instr.opcode = "custom-call"
            instr.attrs.clear()
            instr.attrs.update(attrs)
        for instr, sh in saved.items():
            instr.sharding = sh
        for instr, md in meta.items():
            instr.set_attr("metadata", md)
    dims = {i.name: i.shape.dims for i in list(module.entry.instructions) + inner}
    for w in (list(module.entry.instructions) + inner) if nested else ():
        if w.opcode == "while" and _flat_state(w):   # the loop state read back by its body root's values
            passed = set(loops.invariant_elements(w))
            body = loops.called(w, "body", 0)
            dims[w.name] = _WhileState(tuple(None if k in passed else o.name
                                             for k, o in enumerate(body.root.operands)))
    return text, dims


class _WhileState(tuple):
    """A ``while``'s entry in :func:`_propagation_text`'s map: per loop-state element the name of the body
    root's value for it (None: a loop invariant, passed through)."""


def _flat_state(w) -> bool:
    """The ``while`` ``w``'s state is a tuple of arrays (no nested tuple or token) that its body's root
    ``tuple`` returns element by element."""
    body = loops.called(w, "body", 0)
    return w.shape.is_tuple and all(t.is_array for t in w.shape.tuple_shapes) and \
        body is not None and body.root is not None and body.root.opcode == "tuple" and \
        len(body.root.operands) == len(w.shape.tuple_shapes)


def _loop_state(ins, state: "_WhileState"):
    """XLA's propagated sharding of each loop-state element of the original ``while`` (``state``: its
    :class:`_WhileState`) from ``ins``, the propagated ``while`` of the same op_name, or None where it cannot
    be told.  The StableHLO round trip may reorder the elements (loop invariants it captured come back
    elsewhere): an element the body changes is matched by the op_name of the body root's value for it; a
    loop invariant is left None (its layout is the init value's, :func:`complete_with_xla`)."""
    body = loops.called(ins, "body", 0)
    sh = ins.sharding
    if body is None or body.root is None or body.root.opcode != "tuple" or sh is None or not sh.is_tuple \
            or len(sh.tuple_elements) != len(body.root.operands):
        return None
    where: dict = {}
    for j, o in enumerate(body.root.operands):
        name = _op_name(o)
        if name is not None:
            where[name] = j if name not in where else -1   # -1: ambiguous
    out = []
    for name in state:
        j = where.get(name, -1) if name is not None else -1
        out.append(sh.tuple_elements[j] if j >= 0 else None)
    return out


def called_instructions(module) -> list:
    """The instructions of the computations ``module``'s entry calls through while / call / conditional (loop
    bodies and conditions, branches: those the cost graph shards, :func:`hloshard.cost.liveness.program_schedule`;
    not reducers or fusions), in text order."""
    placed = {id(i) for i in program_schedule(module, breadth_first=False)}
    return [i for c in module.computations if c is not module.entry for i in c.instructions if id(i) in placed]


def _read_propagation(data: dict, dims: dict, nested: bool = False) -> dict:
    """The child's answer (:func:`_child_main`'s JSON) as :func:`xla_propagate` returns it.  Raises InputError
    when XLA failed."""
    if data.get("error"):
        raise InputError(f"XLA sharding propagation failed: {data['error']}")
    prop = parse_module(data["text"], "<xla propagation>")
    # several instructions can carry one op_name (a call is inlined into its body plus a tuple /
    # get-tuple-element): take the last one with the instruction's own dims
    out = {}
    inner = [i for c in prop.computations if c is not prop.entry for i in c.instructions] if nested else []
    for ins in inner + list(prop.entry.instructions):   # the entry's last: its op's own name wins over a copy
        name = _op_name(ins)
        if isinstance(dims.get(name), _WhileState) and ins.opcode == "while":
            out[name] = _loop_state(ins, dims[name])   # a list: per loop-state element, or None
        elif name in dims and ins.shape.dims == dims[name] and not ins.shape.is_tuple:
            out[name] = ins.sharding
    return out


def complete_with_xla(module, num_devices: int, timeout: float = 300.0) -> list:
    """Write XLA's GSPMD propagation onto the instructions of ``module`` that carry no sharding, in
    place, every written sharding kept (XLA propagates from all of them, as ``jax.jit`` does from its
    constraints): ``cost --complete xla`` prices the plan XLA would run instead of hloshard's cheapest
    completion.  The entry's instructions and those of the computations it calls through while / call /
    conditional (:func:`called_instructions`: a ``lax.scan`` body, whose instructions XLA's propagation
    shards from the loop's operands and the body's own constraints; left to hloshard, new user 31 F15's
    GN-ResNet was priced at 9.63 MB where XLA moves 12.90 MB, kinds agreeing 32%).
    Tuple-shaped instructions (a ``while``, its body's parameter and root) are not written: the loop state
    XLA's propagation chose for an element the body changes is recorded as ``module.xla_loop_states``
    (while name -> per element HloSharding or None, :func:`_loop_state`), which the pricing holds that
    element to (:func:`hloshard.strategy.control_flow.handle_while`), a loop invariant being captured
    in its init value's layout as for any while written without a sharding.  Those XLA's propagation does
    not name (simplified away before it propagates: CSE'd broadcasts and constants, a loop invariant
    StableHLO captures) stay unannotated, for hloshard to complete.  An entry root tuple left open takes
    its operands' shardings (``jax.jit``'s unspecified out_shardings: XLA propagates to the outputs).
    Returns the names written, in text order (callees first, the entry last).  Raises InputError when jax
    is missing or XLA rejects the module.

    The module's ``call``s are inlined first (:func:`hloshard.hlo.inline.inline_calls`, in place, as every
    pricing and ``--xla``'s text inline them): the instructions of a called computation (jax's ``_where``,
    ``_take``, ``_var``...) are then entry instructions XLA's propagation names.  Left in their callees they
    stayed open, hloshard chose them, and XLA's partitioner -- handed every other instruction pinned --
    re-propagated them differently from ``jax.jit`` (new user 27 F2: keras-hub BERT FSDP priced at 46.50 MB
    and partitioned at 40.60 MB where ``jax.jit`` moves 63.26 MB)."""

    inline_calls(module)
    entry = module.entry
    keep = {i.name for i in entry.instructions if i.sharding is not None}
    found = xla_propagate(module, num_devices, timeout=timeout, keep=keep, nested=True)
    written = []
    order = called_instructions(module) + list(entry.instructions)
    for ins in order:
        if ins.sharding is None and not ins.shape.is_tuple and found.get(ins.name) is not None:
            ins.sharding = found[ins.name]
            written.append(ins.name)
    # the loop state XLA's propagation chose, for the pricing only: a while written with a sharding of its
    # own is not what XLA got (and jaxlib's StableHLO import rejects a full-length tuple sharding once it
    # has captured the loop invariants: RET_CHECK leaf_count == tuple_elements_.size())
    module.xla_loop_states = {ins.name: found[ins.name] for ins in order if ins.opcode == "while"
                              and ins.sharding is None and isinstance(found.get(ins.name), list)}
    root = entry.root
    if root.sharding is None and root.opcode == "tuple" and root.operands and \
            all(op.sharding is not None and not op.shape.is_tuple for op in root.operands):
        # outputs left open leave as XLA's propagation produces them (jax.jit's unspecified out_shardings:
        # propagation to the outputs), not replicated
        root.sharding = HloSharding.tuple([op.sharding for op in root.operands])
        written.append(root.name)
    return written


def partition_specs(module, dmesh, propagate: bool = True, timeout: float = 300.0, child=None) -> dict:
    """The ``--partition-specs`` JSON of a solved ``module`` on ``dmesh`` (a DeviceMesh):
    ``{"mesh": {"axes": [...], "sizes": [...]}, "parameters": [...], "outputs": [...],
    "intermediates": [...]}``; see the module docstring. ``propagate=False`` leaves out the
    intermediates (no XLA run); ``timeout``: seconds the XLA run may take (InputError past them); ``child``: the
    XLA child to run it in, started before (:func:`xla_propagate`'s)."""
    mesh = _mesh(module, dmesh)
    info = getattr(module, "source_info", None)
    arg_paths = list(getattr(info, "arg_paths", []) or [])
    res_paths = list(getattr(info, "result_paths", []) or [])
    entry = module.entry
    params = []
    for p in sorted(entry.parameters, key=lambda p: p.parameter_number):
        n = p.parameter_number
        path = arg_paths[n] if n < len(arg_paths) and arg_paths[n] else _op_name(p)
        params.append({"index": n, "instruction": p.name, "path": path, "shape": str(p.shape),
                       "sharding": str(p.sharding) if p.sharding is not None else None,
                       "partition_spec": spec_json(p.sharding, len(p.shape.dims), mesh) if not p.shape.is_tuple else None})
    root = entry.root
    outputs = []
    if root.shape.is_tuple and root.opcode == "tuple":
        leaves = list(zip(root.operands, root.sharding.tuple_elements if root.sharding is not None and
                          root.sharding.is_tuple else [root.sharding] * len(root.operands)))
    else:
        leaves = [(root, root.sharding)]
    for j, (ins, sh) in enumerate(leaves):
        outputs.append({"index": j, "instruction": ins.name, "path": res_paths[j] if j < len(res_paths) else None,
                        "shape": str(ins.shape), "sharding": str(sh) if sh is not None else None,
                        "partition_spec": spec_json(sh, len(ins.shape.dims), mesh)
                        if sh is not None and not ins.shape.is_tuple else None})
    out = {"mesh": {"name": mesh.name, "axes": list(mesh.names), "sizes": list(mesh.sizes)},
           "parameters": params, "outputs": outputs, "loops": loop_specs(module, mesh)}
    if propagate:
        xla = xla_propagate(module, dmesh.num_devices, timeout=timeout, child=child)
        frames = _frames(module)
        inter, absent = [], 0
        for ins in entry.instructions:
            if ins.opcode in ("parameter", "tuple", "get-tuple-element", "constant") or ins is root \
                    or ins.sharding is None or ins.shape.is_tuple:
                continue
            theirs = xla.get(ins.name)
            if theirs is None:
                absent += 1  # XLA simplified it away before propagating: nothing to constrain
                continue
            if theirs == ins.sharding:
                continue
            inter.append({"instruction": ins.name, "opcode": ins.opcode, "shape": str(ins.shape),
                          "sharding": str(ins.sharding),
                          "partition_spec": spec_json(ins.sharding, len(ins.shape.dims), mesh),
                          "xla_propagation": str(theirs),
                          "op_name": _op_name(ins), "source": source_location(ins, frames)})
        out["intermediates"] = inter
        out["not_in_xla_propagation"] = absent
    return out


def loop_specs(module, mesh) -> list:
    """One dict per ``while`` of ``module`` (a ``lax.scan`` / ``while_loop`` / ``fori_loop``), outermost first in
    text order: ``instruction``, ``op_name``, ``source``, ``trip_count`` (None when not exact,
    :func:`hloshard.hlo.loops.trip_count`), ``state`` (the loop state's PartitionSpecs, one per element, None for a
    tuple or an unexpressible one) and ``body_sharded`` (instructions the plan shards inside its body and the
    computations it calls).  The shardings inside a loop body are out of reach of ``jax.jit``'s in/out shardings --
    and of XLA's propagation from them -- so a plan is carried out inside loops only by constraints written in the
    body (``with_sharding_constraint`` in the scanned function; ``hloshard.jax.auto_shard``'s ``plan.fn`` writes
    them): new user 32's LSTM jitted with the specs of ``solve --partition-specs`` alone moved 711 MB per device
    under Shardy against 33 MB predicted (F17, issue 24, round 33)."""
    out = []
    for w in module.all_instructions():
        if w.opcode != "while":
            continue
        body = loops.called(w, "body", 0)
        seen, stack, sharded = set(), [body] if body is not None else [], 0
        while stack:
            comp = stack.pop()
            if comp is None or id(comp) in seen:
                continue
            seen.add(id(comp))
            for ins in comp.instructions:
                sharded += ins.sharding is not None and not ins.shape.is_tuple and ins.opcode != "parameter"
                stack.extend(ins.called_computations)
        elements = w.sharding.tuple_elements if w.sharding is not None and w.sharding.is_tuple else ()
        shapes = list(w.shape.tuple_shapes) if w.shape.is_tuple else []
        state = []
        for k, shape in enumerate(shapes):
            sh = elements[k] if k < len(elements) else None
            try:
                state.append(None if sh is None or shape.is_tuple else spec_json(sh, len(shape.dims), mesh))
            except (NotExpressible, ValueError):
                state.append(None)
        trips = loops.trip_count(w)
        out.append({"instruction": w.name, "op_name": _op_name(w), "source": source_location(w),
                    "trip_count": trips.count if trips.exact else None, "state": state, "body_sharded": sharded})
    return out


def write_partition_specs(path: str, module, dmesh, child=None) -> dict:
    """Write :func:`partition_specs` as JSON to ``path`` (atomically); ``child``: the XLA child started before
    (``start_jax_child("hloshard.partition_specs", n)``: ``solve`` starts it when its parse ends, so jax imports
    beside the solve)."""

    specs = partition_specs(module, dmesh, child=child)
    write_text_atomic(path, json.dumps(specs, indent=2) + "\n")
    return specs


def unnamed_paths_note(specs: dict) -> str | None:
    """A warning when no entry parameter of ``specs`` (:func:`partition_specs`) has a JAX path: the input carries
    no source locations (jax's StableHLO printed without ``debug_info=True``, or its HLO text), so a user cannot
    tell which leaf each spec is for but by the instruction name (new user 30, F13: every ``path`` was null and
    nothing said why).  None when one has a path, or there are no parameters."""
    params = specs.get("parameters") or []
    if not params or any(p.get("path") for p in params):
        return None
    return ("--partition-specs: no parameter has a JAX path (`path` is null): the input carries no source "
            "locations; export it with `lowered.as_text(debug_info=True)` (StableHLO) to have them, or match the "
            "leaves by `instruction`")



def loops_note(specs: dict) -> str | None:
    """A warning when ``specs`` (:func:`partition_specs`) lists loops whose bodies the plan shards: ``jax.jit``'s
    in/out shardings cannot reach inside a loop body, so the plan is carried out there only by constraints written
    in the scanned function (:func:`loop_specs`; new user 32's F17).  None when no loop body holds a sharded
    instruction."""
    held = [lp for lp in specs.get("loops") or [] if lp.get("body_sharded")]
    if not held:
        return None
    n = sum(lp["body_sharded"] for lp in held)
    return (f"--partition-specs: {len(held)} loop{'s' if len(held) != 1 else ''} (their bodies hold {n:,} sharded "
            f"instruction{'s' if n != 1 else ''}; `loops` in the file): jax.jit's in/out shardings cannot reach "
            "inside a loop body, so jitting with these specs alone does not carry out the plan there; write "
            "with_sharding_constraint inside the scanned function (the file's `loops[].state`), or use "
            "hloshard.jax.auto_shard, whose plan.fn writes them")

# ------------------------------------------------------------------------------------------------
# the child process (jax imported only there)

#: seconds between two looks of the child's watcher at XLA's dump folder (small beside the ~0.1 s between
#: the propagation's and the partitioner's dumps on keras-hub's 4-layer Gemma; a look is one glob)
_WATCH_S = 0.02


def _child_main() -> int:  # pragma: no cover - runs in the subprocess
    """Compile the request's module with the dumps around sharding propagation and SPMD partitioning; print
    the module after propagation as JSON.  A watcher thread prints it and ends the process as soon as the
    partitioner's dump appears (XLA writes each dump whole, so the propagation's is complete then): the
    rest of the compile -- the CPU backend's passes and code generation, ~90% of it on keras-hub's 4-layer
    Gemma (0.3 s of 6.5 s, round 12) -- is of no use here."""
    import threading

    import jax.extend.backend


    # jax and its CPU backend first: a child started ahead of its request (xla_check.start_jax_child) is
    # then ready when the request comes
    jax.extend.backend.get_backend("cpu")
    request = json.load(sys.stdin)

    def answer(out: dict) -> None:
        sys.stdout.write(json.dumps(out))
        sys.stdout.flush()
        os._exit(0)   # not sys.exit: the compile is still running in the main thread (the parent removes the dump)

    def propagated(dump: str):
        files = sorted(glob.glob(os.path.join(dump, "*after_sharding-propagation*.txt")))
        if not files:
            return None
        with open(files[-1]) as fh:
            return fh.read()

    def watch(dump: str, stop: threading.Event) -> None:
        while not stop.wait(_WATCH_S):
            if glob.glob(os.path.join(dump, "*after_spmd-partitioning*.txt")):
                text = propagated(dump)
                if text is not None:
                    answer({"text": text})

    dump = request["dump"]   # the parent's folder (xla_propagate), removed by it once this process has ended
    stop = threading.Event()
    watcher = threading.Thread(target=watch, args=(dump, stop), daemon=True)
    watcher.start()
    try:
        compile_with_dump(request["text"], int(request["n"]), dump, "sharding-propagation|spmd-partitioning")
        text = propagated(dump)
        out = {"text": text} if text is not None else {"error": "no sharding-propagation dump"}
    except Exception as exc:  # noqa: BLE001
        out = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
    stop.set()
    watcher.join()
    json.dump(out, sys.stdout)
    return 0

if __name__ == "__main__":  # pragma: no cover
    sys.exit(_child_main())
