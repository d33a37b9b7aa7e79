"""Strategy lists shared between structurally equal instructions (issue 26, "a cost graph that fits").

Real modules repeat their layers: the 48-layer generated transformer has 13,548 cost-graph nodes but
only a few hundred distinct (instruction, operand strategies) situations.  :class:`GroupSharing` builds
each situation's strategy group once (:func:`hloshard.strategy.handlers.build_group`) and gives every
later instruction with the same **signature** a group of its own (its ``instr``, its ``follow`` mapped
onto its own operands) holding the *same* strategy list object (a tuple, so that nothing can append
to it), whose ``Strategy`` objects are then shared and must not be changed after the build (nothing
does: handlers only change the strategies of the group they are building).

The signature (:meth:`GroupSharing.signature`) holds everything a shareable handler reads: the opcode,
shape, attributes (called computations by a structural fingerprint, metadata left out), literal, the
user sharding the instruction must keep (``ctx.fixed``, compared semantically), and per operand its
position of first occurrence, opcode, shape, whether XLA rematerialises it
(:func:`hloshard.strategy.registry.rematerialized`) and whether several instructions read it
(:func:`~hloshard.strategy.registry.read_anywhere`), a constant operand's literal (a
dynamic-update-slice's constant start decides whether XLA keeps the buffer split), and for each array leaf the identity of the
strategy list of the node that owns it (with its leaf index, ``fixed`` and ``multi``), and the order
in which those nodes were built (the elementwise handler breaks a tie between operands by it).  Only the
handlers in :data:`SHAREABLE_MODULES` are shared (they read nothing else of the module and change
nothing in the context); control flow, tuples, custom calls and collectives (which read the module,
alias called parameters or record manual nodes), manual instructions, groups with explicit
``operands``, a dynamic-update-slice into zeros other instructions read (priced from those readers'
layouts) and builds with a device roofline (:func:`hloshard.strategy.base.price_roofline` reads
the producers of the operands, beyond the signature) are built as before.

A group built afresh whose strategies equal an earlier list's field by field (:func:`content_key`) is
given that earlier list too, so that the signatures of its users match (e.g. a parameter of each layer
with the same shape).  ``tests/test_strategy_sharing.py`` checks that the shared build equals the
unshared one strategy by strategy on the samples."""

from __future__ import annotations

from ..hlo.ir import Computation
from .base import TOKEN, StrategyGroup, is_array, leaf_shapes
from .custom_call import is_manual_instruction
from .handlers import build_group
from .registry import HANDLERS, read_anywhere, rematerialized

#: handler modules whose groups depend only on the signature (see the module docstring)
SHAREABLE_MODULES = frozenset(f"hloshard.strategy.{m}" for m in (
    "elementwise", "broadcast", "reduce", "reshape", "transpose", "dot", "convolution", "slicing",
    "gather_scatter", "window", "sort", "parameter", "fusion"))

#: attributes that do not change how XLA partitions an instruction (source locations, names)
_IGNORED_ATTRS = frozenset({"metadata"})


def content_key(strategies) -> tuple | None:
    """A hashable key equal for two strategy lists exactly when their strategies are equal field by
    field (name, out, inputs, compute, comm, memory, collectives, flops); None when a field is not
    hashable."""
    key = tuple((s.name, s.out, s.inputs, s.compute, s.comm, s.memory, s.collectives, s.flops)
                for s in strategies)
    try:
        hash(key)
    except TypeError:
        return None
    return key


class GroupSharing:
    """Builds strategy groups for one :class:`~hloshard.strategy.registry.BuildContext`, sharing the
    strategy lists of structurally equal instructions (module docstring).  ``hits`` / ``built``: groups
    given a shared list by signature / built by their handler; ``interned``: built groups whose list
    equalled an earlier one."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.enabled = ctx.minfo.roofline_prices is None
        self.templates: dict = {}    # signature -> the group built for it
        self.lists: dict = {}        # content key -> strategy list
        self.fingerprints: dict = {}  # id(computation) -> structural fingerprint
        self.hits = self.built = self.interned = 0

    def build(self, instr):
        """The group of ``instr`` (recorded in ``ctx.groups``, as :func:`build_group` does)."""
        ctx = self.ctx
        sig = self.signature(instr) if self.enabled else None
        if sig is not None:
            tg = self.templates.get(sig)
            if tg is not None:
                g = self._copy(tg, instr)
                if g is not None:
                    self.hits += 1
                    ctx.set_group(instr, g)
                    return g
        g = build_group(instr, ctx)
        self.built += 1
        if self.enabled and isinstance(g, StrategyGroup) and g.operands is None and g.strategies:
            key = content_key(g.strategies)
            if key is not None:
                same = self.lists.get(key)
                if same is None:   # a tuple: a shared list can be read, not appended to
                    same = self.lists[key] = tuple(g.strategies)
                else:
                    self.interned += 1
                g.strategies = same
            if sig is not None and (g.follow is None or _position(instr, g.follow[0]) is not None):
                self.templates[sig] = g
        return g

    def signature(self, instr) -> tuple | None:
        """The structural signature of ``instr`` in the context built so far (module docstring); None
        when its group is not shared."""
        ctx = self.ctx
        fn = HANDLERS.get(instr.opcode)
        if fn is None or fn.__module__ not in SHAREABLE_MODULES or is_manual_instruction(instr, ctx):
            return None
        ops = []
        first: dict = {}
        seqs = []   # the operand nodes' build order (a followee is chosen by it on ties)
        for k, op in enumerate(instr.operands):
            if op not in ctx.groups:
                return None
            leaves = []
            for l, s in enumerate(leaf_shapes(op.shape)):
                if not is_array(s):
                    continue
                r = ctx.resolve(op, l)
                if r is TOKEN:
                    leaves.append(None)
                else:
                    g, leaf = r
                    leaves.append((id(g.strategies), leaf, g.fixed, g.multi))
                    seqs.append(g.seq)
            if k == 0 and instr.opcode == "dynamic-update-slice" and read_anywhere(op):
                return None   # priced from the shared zeros' other readers (slicing.propagated_buffer_layout)
            ops.append((first.setdefault(id(op), k), op.opcode, op.shape, rematerialized(op), read_anywhere(op),
                        tuple(leaves), getattr(op, "literal", None) if op.opcode == "constant" else None))
        order = tuple(sorted(seqs).index(q) for q in seqs)
        try:
            attrs = self._attrs(instr.attrs)
            fixed = ctx.fixed.get(instr)
            sig = (instr.opcode, instr.shape, attrs, getattr(instr, "literal", None), fixed,
                   tuple(self._fingerprint(c) for c in instr.called_computations), tuple(ops), order)
            hash(sig)
        except TypeError:
            return None
        return sig

    def _attrs(self, attrs: dict) -> tuple:
        return tuple((k, self._value(v)) for k, v in attrs.items() if k not in _IGNORED_ATTRS)

    def _value(self, v):
        if isinstance(v, Computation):
            return ("computation", self._fingerprint(v))
        if isinstance(v, (list, tuple)):
            return tuple(self._value(x) for x in v)
        if isinstance(v, dict):
            return tuple((k, self._value(x)) for k, x in v.items())
        return v

    def _fingerprint(self, comp) -> tuple:
        """Structural fingerprint of a called computation: per instruction in text order its opcode,
        shape, attributes, literal and operand positions (names left out)."""
        hit = self.fingerprints.get(id(comp))
        if hit is None:
            index = {id(i): n for n, i in enumerate(comp.instructions)}
            hit = tuple((i.opcode, i.shape, self._attrs(i.attrs), getattr(i, "literal", None),
                         tuple(index.get(id(o), -1) for o in i.operands), i is comp.root)
                        for i in comp.instructions)
            self.fingerprints[id(comp)] = hit
        return hit

    def _copy(self, tg: StrategyGroup, instr) -> StrategyGroup | None:
        follow = None
        if tg.follow is not None:
            k = _position(tg.instr, tg.follow[0])
            if k is None:
                return None
            follow = (instr.operands[k], tg.follow[1])
        return StrategyGroup(instr, tg.strategies, follow=follow, operands=None,
                             operand_weights=None if tg.operand_weights is None else list(tg.operand_weights),
                             multi=tg.multi, leaf_shapes=tg.leaf_shapes, fixed=tg.fixed)


def _position(instr, operand) -> int | None:
    for k, op in enumerate(instr.operands):
        if op is operand:
            return k
    return None
