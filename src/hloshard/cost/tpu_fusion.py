"""What the TPU compiler's fusion materialises in HBM: the fusion rule of the roofline's HBM bytes with
``--device tpu-*`` (``DeviceProfile.backend == 'tpu'``).

The memory model's rule (:func:`hloshard.cost.liveness.is_fused`) is XLA's CPU backend: loop fusion of
elementwise producers into elementwise / reduce consumers (``CpuInstructionFusion``, an
``InstructionFusion``), with ``ComputeGloballyUnfusible`` keeping a buffer for every producer that
would be re-read by several consumers.  The TPU compiler fuses more; read off its optimised programs
(libtpu 0.0.42.1 ahead of time, ``compiled.as_text()`` of the samples on ``v5e:2x4``: ``kind=kOutput``
fusions holding a dot or convolution, ``kind=kLoop`` fusions with tuple results):

* **producer fusion into dot / convolution operands**: a layer norm's elementwise tail (subtract the
  mean, multiply by the rsqrt, scale, shift, convert) is computed inside the dot's fusion while it
  reads the activation; the normalised activation never reaches HBM.  Here: a fusible producer
  (:data:`hloshard.cost.liveness.FUSIBLE_PRODUCERS`) whose consumers are elementwise / reduce
  consumers *or dots and convolutions* is fused (:func:`is_fused`).  XLA's open-source analogue is
  ``InstructionFusion`` with the GPU backend's ``IsProducerConsumerFusible`` of a dot's operand;
  as in ``InstructionFusion`` an expensive producer (``HloInstruction::IsExpensive``:
  :data:`hloshard.cost.liveness.EXPENSIVE`) is not duplicated into several consumers.  The TPU
  compiler's fusion is not ``ComputeGloballyUnfusible``-bounded the way the CPU backend's is (its
  multi-output fusions compute a shared producer once beside its consumers, ``MultiOutputFusion``),
  so that rule is not applied.  A producer read by several consumers is inlined into each while its
  kernel reads one large buffer (``x - broadcast(mean)``: the mean, rsqrt, scale and shift of a layer
  norm are vectors); one whose inlined kernel reads two or more (a backward layer norm's
  ``convert(add(a, b))`` read by six dots) is written once and read by each
  (:func:`hloshard.cost.roofline.kernel_reads`, ``transitive_join``), as the TPU's multi-output loop
  fusions (``add_add_fusion``) write it.
* **output fusion**: a dot or convolution whose one consumer is elementwise (a bias or residual add,
  a convert to bf16, an activation) writes that consumer's result, not its own (``kind=kOutput``
  fusions rooted at the elementwise op; XLA's ``HloInstruction::FusionKind::kOutput``, the
  ``OutputFusion`` pass of its TPU pipeline).  Here: :func:`epilogue` names the consumer;
  the roofline charges the dot's kernel with the consumer's result and its other reads, and the
  consumer nothing (:func:`absorbed_by`).

Not modelled: the TPU's fusion of one dot into the next when both tiles stay on chip (seen on the
samples' 256-wide MLP), reduce epilogues of dots (``reduce-max`` of attention scores in the score dot's
multi-output fusion), padding to (8,128) tiles (:mod:`hloshard.cost.tpu_layout` is the memory
model's, not used for bytes moved), and the prefetch copies of parameters into on-chip memory
(``copy-start`` to ``S(1)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from . import liveness
from .liveness import EXPENSIVE, ELEMENTWISE, FUSIBLE_PRODUCERS, FUSING_CONSUMERS, effective_users

__all__ = ["FusionRule", "CPU_FUSION", "TPU_FUSION", "fusion_rule", "is_fused", "epilogue", "absorbed_by",
           "TPU_FUSING_CONSUMERS", "OUTPUT_FUSING"]

#: consumers the TPU compiler computes a fusible producer inside: the CPU's loop / reduce consumers and
#: dots and convolutions (producer fusion into their operands)
TPU_FUSING_CONSUMERS = FUSING_CONSUMERS | {"dot", "convolution"}

#: opcodes whose result an elementwise consumer's output fusion replaces (``kind=kOutput``)
OUTPUT_FUSING = frozenset({"dot", "convolution"})


def _same_parent(a, b) -> bool:
    return a.parent is b.parent


def is_fused(instr) -> bool:
    """True when the TPU compiler gives ``instr``'s result no HBM buffer (module docstring): what the CPU
    rule fuses (:func:`hloshard.cost.liveness.is_fused`: constants, forwarding copies and reshapes,
    loop-fused producers), and a fusible producer that is not a root whose consumers (through
    forwarding users) are all in :data:`TPU_FUSING_CONSUMERS` in its own computation, an expensive one
    (:data:`hloshard.cost.liveness.EXPENSIVE`) only when it has one consumer."""
    if liveness.is_fused(instr):
        return True
    if instr.opcode not in FUSIBLE_PRODUCERS or instr.is_root or not instr.users or not instr.shape.is_array:
        return False
    consumers = effective_users(instr)
    if not consumers or any(u.opcode not in TPU_FUSING_CONSUMERS or not _same_parent(u, instr) for u in consumers):
        return False
    return not (instr.opcode in EXPENSIVE and len(consumers) > 1)


def epilogue(instr):
    """The elementwise consumer whose result the dot / convolution ``instr`` writes instead of its own
    (output fusion, module docstring), or None: ``instr`` has exactly one consumer (through forwarding
    users), elementwise, in the same computation, that is not itself fused (:func:`is_fused`: then it
    has no buffer to write and its consumers read ``instr``'s)."""
    if instr.opcode not in OUTPUT_FUSING or instr.is_root or not instr.shape.is_array:
        return None
    consumers = effective_users(instr)
    if len(consumers) != 1:
        return None
    u = consumers[0]
    if u.opcode not in ELEMENTWISE or not _same_parent(u, instr) or not u.shape.is_array or is_fused(u):
        return None
    return u


def absorbed_by(instr):
    """The dot / convolution whose output fusion computes ``instr`` (``epilogue(dot) is instr``), or
    None."""
    if instr.opcode not in ELEMENTWISE:
        return None
    for o in instr.operands:
        src = o
        while liveness.is_fused(src) and src.opcode != "constant" and src.operands and src.opcode not in OUTPUT_FUSING \
                and len(src.operands) == 1:
            src = src.operands[0]     # a forwarding copy / reshape between the dot and its consumer
        if src.opcode in OUTPUT_FUSING and epilogue(src) is instr:
            return src
    return None


@dataclass(frozen=True)
class FusionRule:
    """A backend's fusion rule for the roofline's HBM bytes (:mod:`hloshard.cost.roofline`).

    ``is_fused(instr) -> bool``: no HBM buffer of its own; ``epilogue(instr)``: the consumer whose
    result a dot / convolution writes instead of its own (or None); ``absorbed_by(instr)``: the dot /
    convolution that computes ``instr`` in its fusion (or None); ``transitive_join``: whether a shared
    producer's join (the bound on inlining of :func:`hloshard.cost.roofline.kernel_reads`) counts the
    large buffers its inlined kernel reads (True) or its own operands, broadcasts included (False);
    ``relayout_copies``: whether the backend copies a dot operand whose dimensions are not in the
    order its kernel wants (the CPU's ``DotDecomposer``, priced by the memory model's
    ``autoshard.build.edge_buffers``) -- the TPU's layout assignment gives each dot operand the layout
    its fusion reads instead (the samples' optimised TPU programs hold no such copies)."""

    name: str
    is_fused: Callable
    epilogue: Callable
    absorbed_by: Callable
    transitive_join: bool = False
    relayout_copies: bool = True


def _none(instr):
    return None


#: XLA's CPU backend (the memory model's rule; no output fusion)
CPU_FUSION = FusionRule("cpu", liveness.is_fused, _none, _none, False, True)
#: the TPU compiler (module docstring)
TPU_FUSION = FusionRule("tpu", is_fused, epilogue, absorbed_by, True, False)


def fusion_rule(profile) -> FusionRule:
    """:data:`TPU_FUSION` for a profile whose ``backend`` is ``'tpu'``
    (:attr:`hloshard.devices.DeviceProfile.backend`), else :data:`CPU_FUSION` (also for None)."""
    return TPU_FUSION if profile is not None and getattr(profile, "backend", None) == "tpu" else CPU_FUSION
