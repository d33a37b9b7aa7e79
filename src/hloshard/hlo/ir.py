"""The HLO IR: :class:`Module` -> :class:`Computation` -> :class:`Instruction`.

Built by :func:`hloshard.hlo.parser.parse_module`, printed by :func:`hloshard.hlo.printer.print_module`.
Operands are resolved to instruction objects and ``users`` are kept in sync by the methods here
(``set_operands``, ``replace_operand``, ``Computation.add_instruction`` / ``remove_instruction`` /
``replace_all_uses``). Attributes live in ``Instruction.attrs`` in written order, typed for the keys
the engine needs (see :mod:`hloshard.hlo.attributes`), raw text otherwise.
"""

from __future__ import annotations

from typing import Iterator, Sequence

from .attributes import AttrError, COMPUTATION_KEYS, COMPUTATION_LIST_KEYS, ReplicaGroups, parse_metadata
from .shape import Shape, parse_shape
from .literal import parse_literal

# Printing order of the attributes every opcode may carry (XLA's printer puts them last, in this order).
_GENERIC_ORDER = ("sharding", "frontend_attributes", "control-predecessors", "statistics",
                  "result_accuracy", "origin", "metadata", "backend_config")


class Instruction:
    """One HLO instruction.

    * ``name`` (without ``%``), ``opcode`` (text name, e.g. ``'all-gather'``), ``shape`` (:class:`Shape`)
    * ``operands`` / ``users``: lists of instructions (users in the order they were added)
    * ``parent``: the :class:`Computation`
    * ``attrs``: ``{key: value}`` in written order (see :mod:`hloshard.hlo.attributes` for the types)
    * ``literal``: raw literal text of a ``constant(...)`` (None otherwise)
    * ``line``/``column``: 1-based source position (0 when created)
    * ``ignore_codes``: codes from a trailing ``/* hloshard: ignore[HS101,HS2] */`` comment
    """

    __slots__ = ("name", "opcode", "shape", "operands", "users", "parent", "attrs", "literal", "line",
                 "column", "ignore_codes", "_parameter_number", "__weakref__")

    def __init__(self, name: str, opcode: str, shape: Shape, operands: Sequence["Instruction"] = (),
                 attrs: dict | None = None, *, literal: str | None = None, parameter_number: int | None = None,
                 line: int = 0, column: int = 0, ignore_codes: Sequence[str] = ()):
        self.name = name
        self.opcode = opcode
        self.shape = shape
        self.operands: list[Instruction] = []
        self.users: list[Instruction] = []
        self.parent: Computation | None = None
        self.attrs: dict = dict(attrs) if attrs else {}
        self.literal = literal
        self.line = line
        self.column = column
        self.ignore_codes = tuple(ignore_codes)
        self._parameter_number = parameter_number
        self.set_operands(operands)

    @classmethod
    def _fast(cls, name, opcode, shape, operands, attrs, parameter_number, line, column, parent):
        """Parser fast path: a new instruction in ``parent`` (not yet in its instruction list)."""
        self = cls.__new__(cls)
        self.name = name
        self.opcode = opcode
        self.shape = shape
        self.operands = operands
        self.users = []
        self.parent = parent
        self.attrs = attrs
        self.literal = None
        self.line = line
        self.column = column
        self.ignore_codes = ()
        self._parameter_number = parameter_number
        if len(operands) == 1:
            operands[0].users.append(self)
        elif operands:
            seen = set()
            for op in operands:
                if id(op) not in seen:
                    seen.add(id(op))
                    op.users.append(self)
        return self

    # -- operands and users -----------------------------------------------------------------
    def set_operands(self, operands: Sequence["Instruction"]) -> None:
        """Replace the operand list, keeping every operand's ``users`` in sync."""
        for op in self.operands:
            if self in op.users:
                op.users.remove(self)
        self.operands = list(operands)
        seen: set[int] = set()
        for op in self.operands:
            if id(op) not in seen:
                seen.add(id(op))
                op.users.append(self)

    def replace_operand(self, old: "Instruction", new: "Instruction") -> None:
        """Replace every occurrence of ``old`` among the operands by ``new``."""
        self.set_operands([new if o is old else o for o in self.operands])

    # -- attributes -----------------------------------------------------------------------------
    def attr(self, key: str, default=None):
        return self.attrs.get(key, default)

    @property
    def custom_call_target(self) -> str | None:
        """A custom-call's ``custom_call_target`` (quotes stripped); None for any other opcode."""
        if self.opcode != "custom-call":
            return None
        return str(self.attrs.get("custom_call_target", "")).strip().strip('"')

    @property
    def is_sharding_constraint(self) -> bool:
        """A ``custom-call`` with target ``Sharding``: what ``jax.lax.with_sharding_constraint`` lowers to,
        and the form of hloshard's operand and loop-state pins."""
        return self.custom_call_target == "Sharding"

    def set_attr(self, key: str, value) -> None:
        """Set an attribute; a new key goes before the generic trailing ones (sharding, metadata ...)
        in XLA's printing order. ``value=None`` removes it."""
        if value is None:
            self.attrs.pop(key, None)
            return
        if key in self.attrs or not self.attrs:
            self.attrs[key] = value
            return
        rank = _GENERIC_ORDER.index(key) if key in _GENERIC_ORDER else -1
        items = list(self.attrs.items())
        pos = len(items)
        for i, (k, _) in enumerate(items):
            krank = _GENERIC_ORDER.index(k) if k in _GENERIC_ORDER else -1
            if krank > rank:
                pos = i
                break
        items.insert(pos, (key, value))
        self.attrs = dict(items)

    @property
    def sharding(self):
        """The :class:`~hloshard.hlo.sharding.HloSharding`, or None. Settable (None removes it)."""
        return self.attrs.get("sharding")

    @sharding.setter
    def sharding(self, value) -> None:
        self.set_attr("sharding", value)

    @property
    def metadata(self) -> str | None:
        """Raw ``metadata={...}`` text, or None."""
        v = self.attrs.get("metadata")
        return None if v is None else str(v)

    @property
    def op_name(self) -> str | None:
        """``op_name`` from the metadata (the jax source op, e.g. ``jit(f)/dot_general``), or None."""
        v = self.attrs.get("metadata")
        if v is None:
            return None

        try:
            return parse_metadata(str(v)).get("op_name")
        except AttrError:
            return None

    @property
    def dimensions(self) -> list[int] | None:
        v = self.attrs.get("dimensions")
        return None if v is None else list(v)

    @property
    def replica_groups(self) -> list[list[int]] | None:
        """Replica groups as an explicit list of lists (iota and mesh forms expanded); None when absent.
        ``[]`` means one group of all participants (``replica_groups={}``)."""
        v = self.attrs.get("replica_groups")
        if v is None:
            return None
        if isinstance(v, ReplicaGroups):
            return v.groups
        return [list(g) for g in v]

    @property
    def channel_id(self) -> int | None:
        return self.attrs.get("channel_id")

    @property
    def parameter_number(self) -> int | None:
        return self._parameter_number

    def literal_value(self):
        """The decoded literal of a constant (numpy array, 0-d for scalars; tuple for tuple
        shapes), see :func:`hloshard.hlo.literal.parse_literal`; None for other opcodes.
        Raises :class:`~hloshard.hlo.literal.LiteralError` when the literal does not fit the shape."""
        if self.literal is None:
            return None

        return parse_literal(self.literal, self.shape)

    @property
    def called_computations(self) -> list["Computation"]:
        """Computations this instruction calls, in attribute order (to_apply, calls, condition, body,
        branch_computations, ...)."""
        out: list[Computation] = []
        for k, v in self.attrs.items():
            if k in COMPUTATION_KEYS:
                if isinstance(v, Computation):
                    out.append(v)
            elif k in COMPUTATION_LIST_KEYS:
                out.extend(c for c in v if isinstance(c, Computation))
        return out

    @property
    def control_predecessors(self) -> list["Instruction"]:
        return list(self.attrs.get("control-predecessors", ()))

    @property
    def is_root(self) -> bool:
        return self.parent is not None and self.parent.root is self

    def __repr__(self) -> str:
        return f"<Instruction {self.name} = {self.shape} {self.opcode}>"


class Computation:
    """A named computation: instructions in text order, a root, parameters by number.

    ``has_signature`` records whether the source wrote ``(a: f32[]) -> f32[]`` (printed back if so).
    ``execution_thread`` is the ``}, execution_thread="..."`` suffix (None for the main thread).
    """

    def __init__(self, name: str, is_entry: bool = False):
        self.name = name
        self.is_entry = is_entry
        self.instructions: list[Instruction] = []
        self.root: Instruction | None = None
        self.parent: Module | None = None
        self.has_signature = False
        self.execution_thread: str | None = None
        self.line = 0
        self.column = 0
        self._by_name: dict[str, Instruction] = {}

    @property
    def parameters(self) -> list[Instruction]:
        """Parameter instructions indexed by parameter number."""
        params = [i for i in self.instructions if i.opcode == "parameter"]
        params.sort(key=lambda i: i._parameter_number if i._parameter_number is not None else 0)
        return params

    def get(self, name: str) -> Instruction:
        """The instruction called ``name`` (``%`` optional); raises KeyError."""
        return self._by_name[name[1:] if name.startswith("%") else name]

    def __contains__(self, name: str) -> bool:
        return (name[1:] if name.startswith("%") else name) in self._by_name

    def unique_name(self, base: str) -> str:
        """``base`` if unused in this computation, else ``base.N`` for the smallest free N."""
        if base not in self._by_name:
            return base
        i = 1
        while f"{base}.{i}" in self._by_name:
            i += 1
        return f"{base}.{i}"

    def add_instruction(self, instr: Instruction, before: Instruction | None = None) -> Instruction:
        """Insert ``instr`` (at the end, or just before ``before``); renames it if its name is taken."""
        if instr.name in self._by_name:
            instr.name = self.unique_name(instr.name)
        instr.parent = self
        if before is None:
            self.instructions.append(instr)
        else:
            self.instructions.insert(self.instructions.index(before), instr)
        self._by_name[instr.name] = instr
        return instr

    def remove_instruction(self, instr: Instruction) -> None:
        """Remove an instruction that has no users (raises ValueError otherwise)."""
        if instr.users:
            raise ValueError(f"cannot remove {instr.name}: it still has users "
                             f"{[u.name for u in instr.users]}")
        if instr is self.root:
            raise ValueError(f"cannot remove the root {instr.name}")
        instr.set_operands([])
        self.instructions.remove(instr)
        del self._by_name[instr.name]
        for other in self.instructions:
            preds = other.attrs.get("control-predecessors")
            if preds and instr in preds:
                rest = [p for p in preds if p is not instr]
                other.set_attr("control-predecessors", rest or None)
        instr.parent = None

    def remove_instructions(self, instrs) -> None:
        """Remove many user-less instructions at once in O(instructions + removed) (what
        :meth:`remove_instruction` does one by one, for passes that drop thousands). Users among the
        removed set itself are fine; raises ValueError for an instruction with other users or the root."""
        gone = {id(i): i for i in instrs}
        for instr in gone.values():
            if instr.parent is not self:
                raise ValueError(f"{instr.name} is not in computation {self.name}")
            if instr is self.root:
                raise ValueError(f"cannot remove the root {instr.name}")
            others = [u.name for u in instr.users if id(u) not in gone]
            if others:
                raise ValueError(f"cannot remove {instr.name}: it still has users {others}")
        for instr in gone.values():
            instr.set_operands([])
            del self._by_name[instr.name]
            instr.parent = None
        self.instructions = [i for i in self.instructions if id(i) not in gone]
        for other in self.instructions:
            preds = other.attrs.get("control-predecessors")
            if preds and any(id(p) in gone for p in preds):
                rest = [p for p in preds if id(p) not in gone]
                other.set_attr("control-predecessors", rest or None)

    def rename(self, instr: Instruction, new_name: str) -> None:
        if new_name in self._by_name:
            raise ValueError(f"name {new_name} is taken")
        del self._by_name[instr.name]
        instr.name = new_name
        self._by_name[new_name] = instr

    def replace_all_uses(self, old: Instruction, new: Instruction) -> None:
        """Make every user of ``old`` use ``new`` instead (and the root, if ``old`` was the root)."""
        for user in list(old.users):
            if user is not new:
                user.replace_operand(old, new)
        if self.root is old:
            self.root = new

    def post_order(self, first: list[Instruction] | None = None) -> list[Instruction]:
        """Instructions with operands and control predecessors before their users (iterative DFS,
        stable with respect to text order).  ``first``: instructions to start the DFS from before the
        text order (e.g. ``[root]``: post order from the root, as XLA's ``MakeInstructionPostOrder``)."""
        seen: set[int] = set()
        out: list[Instruction] = []
        for start in list(first or ()) + list(self.instructions):
            if id(start) in seen:
                continue
            stack = [(start, 0)]
            seen.add(id(start))
            while stack:
                node, i = stack[-1]
                preds = node.operands
                cps = node.attrs.get("control-predecessors")
                if cps:
                    preds = list(preds) + list(cps)
                if i < len(preds):
                    stack[-1] = (node, i + 1)
                    p = preds[i]
                    if id(p) not in seen and p.parent is self:
                        seen.add(id(p))
                        stack.append((p, 0))
                else:
                    stack.pop()
                    out.append(node)
        return out

    def __iter__(self) -> Iterator[Instruction]:
        return iter(self.instructions)

    def __len__(self) -> int:
        return len(self.instructions)

    def __repr__(self) -> str:
        return f"<Computation {self.name}: {len(self.instructions)} instructions>"


class Module:
    """An HLO module: header attributes (raw text, in written order) and computations in text order."""

    def __init__(self, name: str):
        self.name = name
        self.attrs: dict[str, str] = {}
        self.computations: list[Computation] = []
        self.entry: Computation | None = None
        self.stack_frames: str | None = None     # the FileNames/.../StackFrames prelude, verbatim
        self.has_header = True
        self.percent_names = True                 # print names with '%' (as the source did)
        self._by_name: dict[str, Computation] = {}

    def add_computation(self, comp: Computation, before: Computation | None = None) -> Computation:
        if comp.name in self._by_name:
            raise ValueError(f"computation {comp.name} already exists")
        comp.parent = self
        if before is None:
            self.computations.append(comp)
        else:
            self.computations.insert(self.computations.index(before), comp)
        self._by_name[comp.name] = comp
        return comp

    def remove_computation(self, comp: Computation) -> None:
        """Remove ``comp`` (the caller makes sure no instruction calls it; raises ValueError for the entry)."""
        if comp is self.entry:
            raise ValueError(f"cannot remove the entry computation {comp.name}")
        self.computations.remove(comp)
        del self._by_name[comp.name]
        comp.parent = None

    def get_computation(self, name: str) -> Computation:
        """The computation called ``name`` (``%`` optional); raises KeyError."""
        return self._by_name[name[1:] if name.startswith("%") else name]

    def all_instructions(self) -> Iterator[Instruction]:
        for comp in self.computations:
            yield from comp.instructions

    def _int_attr(self, key: str) -> int | None:
        v = self.attrs.get(key)
        if v is None:
            return None
        try:
            return int(str(v).strip())
        except ValueError:
            return None

    @property
    def num_partitions(self) -> int | None:
        return self._int_attr("num_partitions")

    def state_partitions(self, devices: int) -> None:
        """Write XLA's module header field ``num_partitions=devices`` (the device count of the mesh a plan was
        solved for) where the header states none or 1, so that a written plan says what it is for: ``cost``,
        ``lint``, ``explain`` and XLA read the device count from it, also for a plan that shards nothing (new
        user 32 F5).  A count already stated is the mesh's (a mesh of another count is refused,
        :meth:`hloshard.mesh.DeviceMesh.for_module`).  Nothing for one device."""
        if int(devices) > 1 and (self.num_partitions or 1) == 1:
            self.attrs["num_partitions"] = str(int(devices))

    @property
    def num_replicas(self) -> int | None:
        return self._int_attr("replica_count")

    @property
    def is_scheduled(self) -> bool:
        return str(self.attrs.get("is_scheduled", "false")).strip() == "true"

    @property
    def entry_computation_layout(self) -> tuple[list[Shape], Shape] | None:
        """``entry_computation_layout={(p0, p1)->result}`` as (parameter shapes, result shape); None
        when absent. Raises HloSyntaxError when the text is malformed."""

        text = self.attrs.get("entry_computation_layout")
        if not text:
            return None
        body = str(text).strip()
        if body.startswith("{") and body.endswith("}"):
            body = body[1:-1]
        depth = 0
        for k, ch in enumerate(body):
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth -= 1
            elif ch == "-" and depth == 0 and body.startswith("->", k):
                params = parse_shape(body[:k].strip())
                return list(params.tuple_shapes), parse_shape(body[k + 2:].strip())
        return None

    @property
    def input_output_alias(self) -> list[tuple[tuple[int, ...], int, tuple[int, ...]]]:
        """``input_output_alias={ {0}: (0, {}, may-alias) }`` as ``[(output_index, param_number, param_index)]``."""
        import re

        text = self.attrs.get("input_output_alias")
        if not text:
            return []
        out = []
        for m in re.finditer(r"\{([0-9,\s]*)\}\s*:\s*\(\s*(\d+)\s*,\s*\{([0-9,\s]*)\}", str(text)):
            oi = tuple(int(x) for x in m.group(1).split(",") if x.strip())
            pi = tuple(int(x) for x in m.group(3).split(",") if x.strip())
            out.append((oi, int(m.group(2)), pi))
        return out

    def __repr__(self) -> str:
        return f"<Module {self.name}: {len(self.computations)} computations>"
