"""Inlining ``call`` instructions, as XLA's ``CallInliner`` does before fusion and SPMD partitioning.

jax lowers every jitted library function (``jax.nn.relu``, ``log_softmax``, ``jnp.where``, ``take`` ...)
to an HLO ``call`` of a computation of its own.  XLA inlines each of them on every backend before
sharding propagation, the SPMD partitioner, fusion and buffer assignment run (``CallInliner`` in the
SPMD pipeline, then again in the optimisation pipeline), so neither memory nor time ever sees a call
boundary there.  :func:`inline_calls` does the same to hloshard's IR, so that the cost graph, the memory
model and the roofline price the program XLA partitions, and the written module is the inlined one.

What one inlined call becomes (XLA's ``CallInliner`` behaviour, our own code):

* every instruction of the callee but its parameters is copied right before the call, in post order;
  a parameter's copy is the call's operand of that number; attributes (shardings, metadata, called
  computations -- reducers, while bodies, shared by the copies as XLA's ``CloneWithNewOperands``
  shares them) are kept; a copy's control predecessors are the copies of the original's, plus the
  call's own control predecessors;
* a copy's ``op_name`` (metadata) is the call's ``op_name``, ``/``, then its own, when both have one: jax
  writes a callee's ops with op_names relative to the callee (``max`` inside ``jit(relu)``) and XLA's
  ``CallInliner`` prefixes them with the call site's (``jit(f)/jvp(hloshard_eqn177)/jit(relu)/max`` in
  the compiled module); without it an inlined op named no ``hloshard_eqn`` equation and
  ``hloshard.jax.auto_shard`` left that equation's output unconstrained (new user 24's CNN: every relu);
* the call's users (and the caller's root, and instructions that named the call as a control
  predecessor) read the copy of the callee's root;
* the call's ``sharding=`` goes to that root copy when the copy has none (XLA's
  ``HloComputation::ReplaceInstruction`` copies the old instruction's sharding onto a replacement
  without one); a root that has its own keeps it;
* a tuple root read through ``get-tuple-element``: each such GTE's users read the tuple's operand
  directly (what XLA's tuple simplification does after inlining); a GTE whose sharding differs from
  the operand's is kept, so no annotation is lost;
* what became dead (copies nothing reads, operands only the call read) is removed, side-effecting and
  collective instructions excepted; computations left without any caller are removed.

Calls inside callees are inlined first (callees before callers, as XLA's call-graph post order), so
one pass leaves no inlinable call.  Names stay unique module-wide: a copy keeps its original name when
no instruction that survives holds it, otherwise gets ``<name>.<k>``.

Left as calls (as XLA leaves them): calls with a ``backend_config``, calls whose
``frontend_attributes`` say ``inlineable="false"``, calls of ``shmap_body`` /
``xla.sdy.manual_computation_body`` computations (Shardy's manual computations), and calls in
computations that are not program parts (fusion bodies, reducers, async computations: only the entry
and computations reached from it through ``while`` / ``conditional`` / ``call`` are visited).
"""

from __future__ import annotations

import re

from .attributes import Raw, quote, unquote
from .callgraph import reverse_post_order
from .ir import Computation, Instruction

__all__ = ["inline_calls", "is_inlinable_call"]

#: opcodes never removed as dead code (side effects, or collectives whose channels pair up)
_KEEP_WHEN_DEAD = frozenset({
    "parameter", "custom-call", "send", "send-done", "recv", "recv-done", "infeed", "outfeed", "rng",
    "rng-get-and-update-state", "after-all", "add-dependency", "all-reduce", "all-reduce-start",
    "all-reduce-done", "all-gather", "all-gather-start", "all-gather-done", "all-to-all", "ragged-all-to-all",
    "reduce-scatter", "collective-permute", "collective-permute-start", "collective-permute-done",
    "collective-broadcast", "async-start", "async-update", "async-done", "copy-start", "copy-done",
    "while", "conditional", "call", "domain",
})

#: callee names XLA keeps as calls under Shardy (the bodies of manual computations / shard_map)
_MANUAL_BODY_MARKERS = ("shmap_body", "xla.sdy.manual_computation_body")


def is_inlinable_call(instr: Instruction) -> bool:
    """True when ``instr`` is a ``call`` XLA's ``CallInliner`` inlines: one called computation, no
    ``backend_config``, no ``frontend_attributes`` ``inlineable="false"``, not a manual-computation
    body (``shmap_body`` / ``xla.sdy.manual_computation_body``)."""
    if instr.opcode != "call":
        return False
    callee = instr.attrs.get("to_apply")
    if not isinstance(callee, Computation) or len(instr.called_computations) != 1:
        return False
    if instr.attrs.get("backend_config") not in (None, "", "{}"):
        return False
    fa = instr.attrs.get("frontend_attributes")
    if fa:
        try:
            items = dict(fa)
        except (TypeError, ValueError):
            items = {}
        if str(items.get("inlineable", "true")).strip('"') != "true":
            return False
    return not any(m in callee.name for m in _MANUAL_BODY_MARKERS)


def inline_calls(module) -> list[tuple[str, str]]:
    """Inline every inlinable ``call`` (:func:`is_inlinable_call`) of the entry and of the computations
    it reaches through control flow, recursively, in place (see the module docstring for what each
    call becomes).  Returns ``(call name, callee name)`` pairs in the order they were inlined (empty:
    the module is unchanged).  ``module.inlined_calls`` (added to, never reset) maps each inlined call's
    name to ``(stand-in, its operands)``: the instruction that now stands for its result (the copy of the
    callee's root) and that copy's operands (a tuple root whose every reader was forwarded is no longer
    in any computation, ``parent`` None: its elements are those operands).  Raises nothing
    on well-formed IR (a call's operand count is checked by the parser / verifier: a parameter number
    without an operand raises IndexError)."""
    if module.entry is None:
        return []
    order = reverse_post_order(module)                    # callers before callees
    visited = {id(c) for c in order}
    sites: dict[int, list[Instruction]] = {}                # callee -> inlinable call sites
    refs: dict[int, int] = {}                               # callee -> references of any kind
    for comp in module.computations:
        for instr in comp.instructions:
            for callee in instr.called_computations:
                refs[id(callee)] = refs.get(id(callee), 0) + 1
                if id(comp) in visited and is_inlinable_call(instr):
                    sites.setdefault(id(callee), []).append(instr)
    if not sites:
        return []
    # computations whose every reference is an inlinable call: they go away, and so do their names
    dying = {cid for cid, calls in sites.items() if len(calls) == refs.get(cid, 0)}
    taken = {i.name for c in module.computations if id(c) not in dying for i in c.instructions}

    done: list[tuple[str, str]] = []
    stand_in = module.__dict__.setdefault("inlined_calls", {})
    for comp in reversed(order):                            # callees before callers
        calls = [i for i in comp.instructions if is_inlinable_call(i)]
        if not calls:
            continue
        before = list(comp.instructions)
        ctrl = any("control-predecessors" in i.attrs for i in before)
        placed: dict[int, list[Instruction]] = {}
        candidates: list[Instruction] = []
        for call in calls:
            callee = call.attrs["to_apply"]
            copies, loose, root = _inline_one(call, callee, taken, id(comp) not in dying, ctrl)
            stand_in[call.name] = (root, tuple(root.operands))
            ctrl = ctrl or any("control-predecessors" in c.attrs for c in copies)
            placed[id(call)] = copies
            candidates.extend(loose)
            done.append((call.name, callee.name))
        # the copies stand where their call stood (text order), then the dead ones go in one sweep
        ordered: list[Instruction] = []
        for instr in before:
            ordered.extend(placed.get(id(instr), ()))
            ordered.append(instr)
        comp.instructions = ordered
        _remove_dead(comp, calls, candidates, ctrl)
    _remove_uncalled(module, set(sites))
    return done


#: the ``op_name`` field of raw metadata text (a quoted string, escapes allowed)
_OP_NAME = re.compile(r'(?<![\w])op_name="((?:[^"\\]|\\.)*)"')


def _prefixed_metadata(raw, prefix: str):
    """Raw metadata text with its ``op_name`` prefixed by ``prefix + "/"`` (XLA's ``CallInliner`` names an
    inlined op after its call site so); None when the text has no ``op_name``."""
    text = str(raw)
    m = _OP_NAME.search(text)
    if m is None:
        return None
    inner = unquote('"' + m.group(1) + '"')
    return Raw(text[:m.start()] + "op_name=" + quote(f"{prefix}/{inner}") + text[m.end():])


def _pick_name(name: str, comp: Computation, taken: set, live: bool) -> str:
    """``name``, or ``name.<k>`` for the smallest free k: unique in ``comp``, and among the surviving
    names ``taken`` when ``comp`` survives (then recorded there)."""
    cand, k = name, 0
    while cand in comp or (live and cand in taken):
        k += 1
        cand = f"{name}.{k}"
    if live:
        taken.add(cand)
    return cand


def _inline_one(call: Instruction, callee: Computation, taken: set, live: bool,
                ctrl: bool) -> tuple[list[Instruction], list[Instruction], Instruction]:
    """Copy ``callee`` into the call's computation (appended; the caller puts them in place) and rewire
    the call's users to the root copy.  Returns (the copies, instructions that may have become dead:
    the copies, the call's operands, forwarded GTEs; the root copy); the call is left without users."""
    comp = call.parent
    mapping: dict[int, Instruction] = {}
    for p in callee.parameters:
        mapping[id(p)] = call.operands[p.parameter_number]
    call_preds = list(call.attrs.get("control-predecessors", ()))
    call_op = call.op_name if call.attrs.get("metadata") is not None else None
    copies: list[Instruction] = []
    for instr in callee.post_order([callee.root] if callee.root is not None else None):
        if instr.opcode == "parameter":
            continue
        attrs = dict(instr.attrs)
        preds = [mapping[id(p)] for p in attrs.pop("control-predecessors", ())] + call_preds
        if call_op and attrs.get("metadata") is not None:
            named = _prefixed_metadata(attrs["metadata"], call_op)
            if named is not None:
                attrs["metadata"] = named
        clone = Instruction(_pick_name(instr.name, comp, taken, live), instr.opcode, instr.shape,
                            [mapping[id(o)] for o in instr.operands], attrs, literal=instr.literal,
                            parameter_number=instr.parameter_number, line=instr.line, column=instr.column,
                            ignore_codes=instr.ignore_codes)
        if preds:
            clone.set_attr("control-predecessors", list(dict.fromkeys(preds)))
        comp.add_instruction(clone)
        mapping[id(instr)] = clone
        copies.append(clone)
    root = mapping[id(callee.root)]
    if call.sharding is not None and root.sharding is None:
        root.sharding = call.sharding
    if ctrl:   # instructions that waited for the call now wait for the root copy
        for other in comp.instructions:
            preds = other.attrs.get("control-predecessors")
            if preds and any(p is call for p in preds):
                other.set_attr("control-predecessors",
                               list(dict.fromkeys(root if p is call else p for p in preds)))
    # a tuple root read through get-tuple-element: the GTE's users read the element itself
    loose: list[Instruction] = list(copies) + list(call.operands)
    if root.opcode == "tuple" and root in copies:
        for gte in [u for u in call.users if u.opcode == "get-tuple-element"]:
            elem = root.operands[int(gte.attrs.get("index", 0))]
            if gte.sharding is not None and gte.sharding != elem.sharding:
                continue
            comp.replace_all_uses(gte, elem)
            loose.append(gte)
    comp.replace_all_uses(call, root)
    call.set_operands([])
    return copies, loose, root


def _remove_dead(comp: Computation, calls: list[Instruction], candidates: list[Instruction],
                 ctrl: bool) -> None:
    """Remove the inlined ``calls`` and the candidates nothing reads any more (and, in turn, their
    operands nothing else reads), in one sweep; never the root, parameters, instructions with side
    effects (:data:`_KEEP_WHEN_DEAD`) or control predecessors."""
    gone = {id(c): c for c in calls}
    held = ({id(p) for i in comp.instructions for p in i.attrs.get("control-predecessors", ())}
            if ctrl else set())
    stack = list(reversed(candidates))
    while stack:
        instr = stack.pop()
        if (id(instr) in gone or instr.parent is not comp or instr is comp.root
                or instr.opcode in _KEEP_WHEN_DEAD or id(instr) in held
                or any(id(u) not in gone for u in instr.users)):
            continue
        gone[id(instr)] = instr
        stack.extend(instr.operands)
    comp.remove_instructions(list(gone.values()))


def _remove_uncalled(module, candidates: set[int]) -> None:
    """Remove the computations among ``candidates`` (ids) that no instruction calls any more; repeated,
    since a removed computation's own calls (reducers ...) may leave others uncalled."""
    while True:
        called = {id(c) for i in module.all_instructions() for c in i.called_computations}
        gone = [c for c in module.computations
                if id(c) in candidates and id(c) not in called and c is not module.entry]
        if not gone:
            return
        for c in gone:
            module.remove_computation(c)
