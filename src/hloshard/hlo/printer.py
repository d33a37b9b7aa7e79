"""IR -> HLO text that XLA's parser accepts.

Canonical form: the module header with its attributes in written order (``entry_computation_layout``
as XLA prints it, see :func:`format_entry_computation_layout`), computations in module order
(callees before callers, as parsed), each instruction on one line as
``[ROOT ]%name = shape opcode(%a, %b), attr=value, ...`` with operands written without their shapes,
attributes in the instruction's order, and a trailing ``/* hloshard: ignore[...] */`` comment when
the instruction has ignore codes. Names carry ``%`` when the source used them (``Module.percent_names``).
``print_module(parse_module(print_module(m)))`` equals ``print_module(m)`` (a fixed point).
"""

from __future__ import annotations

import re

from ..errors import HloSyntaxError
from .attributes import format_attr
from .ir import Computation, Instruction, Module


def _pfx(module: Module | None) -> str:
    return "%" if module is None or module.percent_names else ""


def format_instruction(instr: Instruction, pct: str = "%") -> str:
    """One instruction line (without indentation)."""
    parts = []
    if instr.is_root:
        parts.append("ROOT ")
    parts.append(f"{pct}{instr.name} = {instr.shape} ")
    if instr.opcode == "constant" and instr.literal is not None:
        parts.append(f"constant({instr.literal})")
    elif instr.opcode == "parameter" and instr.parameter_number is not None:
        parts.append(f"parameter({instr.parameter_number})")
    else:
        ops = []
        for i, o in enumerate(instr.operands):
            ops.append(f"/*index={i}*/{pct}{o.name}" if i and i % 5 == 0 else f"{pct}{o.name}")
        parts.append(f"{instr.opcode}({', '.join(ops)})")

    def name_of(obj) -> str:
        return f"{pct}{obj.name}"

    for key, value in instr.attrs.items():
        parts.append(f", {key}={format_attr(key, value, name_of)}")
    if instr.ignore_codes:
        parts.append(f" /* hloshard: ignore[{','.join(instr.ignore_codes)}] */")
    return "".join(parts)


def instruction_order(comp: Computation) -> list[Instruction]:
    """The computation's instructions in list order when every operand and control predecessor comes
    before its user (the text order, or a schedule); otherwise :meth:`Computation.post_order`,
    since XLA's parser needs names defined before use."""
    seen: set[int] = set()
    for instr in comp.instructions:
        for op in instr.operands:
            if id(op) not in seen:
                return comp.post_order()
        for op in instr.attrs.get("control-predecessors", ()) or ():
            if id(op) not in seen:
                return comp.post_order()
        seen.add(id(instr))
    return comp.instructions


def format_computation(comp: Computation, pct: str = "%") -> str:
    head = "ENTRY " if comp.is_entry else ""
    head += f"{pct}{comp.name}"
    if comp.has_signature:
        params = ", ".join(f"{p.name}: {p.shape.to_string(layout=False)}" for p in comp.parameters)
        head += f" ({params}) -> {comp.root.shape.to_string(layout=False)}"
    lines = [head + " {"]
    for instr in instruction_order(comp):
        lines.append("  " + format_instruction(instr, pct))
    tail = "}"
    if comp.execution_thread is not None:
        tail += f", execution_thread={format_attr('execution_thread', comp.execution_thread, str)}"
    lines.append(tail)
    return "\n".join(lines)


def computation_order(module: Module) -> list[Computation]:
    """Module computations with every callee before its callers (XLA's parser needs a computation
    defined before it is referenced): the module's order when it already satisfies that, otherwise
    a stable depth-first post-order. Iterative, so deep call chains cannot overflow the stack."""
    done: set[int] = set()
    out: list[Computation] = []
    for root in module.computations:
        if id(root) in done:
            continue
        stack = [(root, None)]
        on_stack = {id(root)}
        while stack:
            comp, it = stack[-1]
            if it is None:
                callees = []
                for instr in comp.instructions:
                    callees.extend(instr.called_computations)
                it = iter(callees)
                stack[-1] = (comp, it)
            nxt = next((c for c in it if id(c) not in done and id(c) not in on_stack), None)
            if nxt is None:
                stack.pop()
                on_stack.discard(id(comp))
                done.add(id(comp))
                out.append(comp)
            else:
                on_stack.add(id(nxt))
                stack.append((nxt, None))
    return out


_SQUEEZE_RE = re.compile(r"/\*.*?\*/|\s+", re.S)


def format_entry_computation_layout(module: Module) -> str | None:
    """``entry_computation_layout`` in canonical form, as XLA prints it: ``{(p0, ..., p4,
    /*index=5*/p5, ...)->result}``, each shape with its layout, ``/*index=N*/`` before every fifth
    element of the parameter list and of a result tuple, one space after each comma. When the value
    does not parse as shapes, or our shapes would not print it back exactly (ignoring comments and
    whitespace), the stored text is kept with its whitespace runs collapsed. None when absent."""
    text = module.attrs.get("entry_computation_layout")
    if text is None:
        return None
    text = re.sub(r"\s+", " ", str(text)).strip()
    try:
        layout = module.entry_computation_layout
    except HloSyntaxError:
        return text
    if layout is None:
        return text
    params, result = layout
    ps = ", ".join(f"/*index={i}*/{p}" if i and i % 5 == 0 else str(p) for i, p in enumerate(params))
    out = f"{{({ps})->{result}}}"
    return out if _SQUEEZE_RE.sub("", out) == _SQUEEZE_RE.sub("", text) else text


def print_module(module: Module) -> str:
    """The module as HLO text (ends with a newline). XLA's parser accepts it; computations are
    printed callees first (:func:`computation_order`)."""
    pct = _pfx(module)
    header = f"HloModule {module.name}"
    for key, value in module.attrs.items():
        if key == "entry_computation_layout":
            value = format_entry_computation_layout(module)
        header += f", {key}={value}"
    out = [header, ""]
    if module.stack_frames:
        out += [module.stack_frames, ""]
    for comp in computation_order(module):
        out.append(format_computation(comp, pct))
        out.append("")
    return "\n".join(out)
