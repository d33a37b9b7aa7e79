"""Floating-point operations of matmul-like instructions: the one place their flops are counted.

``dot``: ``2 * prod(lhs dims) * prod(rhs free dims)``, i.e. ``2 * batch * M * N * K`` (a fused
multiply-add is 2 flops, as XLA's ``HloCostAnalysis`` counts a dot). ``convolution``:
``2 * prod(output dims) * prod(kernel spatial dims) * kernel input features`` (per output element one
multiply-add per kernel tap and input feature of its group; padding taps counted, as in the dense
formula). Fused attention (Transformer Engine's ``te_fused_attn_forward_ffi`` / ``_backward_ffi``
custom-calls, BSHD operands ``q[b, s_q, h_q, d_qk]``, ``k[b, s_kv, h_kv, d_qk]``, ``v[b, s_kv, h_kv, d_v]``
as operands 0-2): forward ``2 * b * h_q * s_q * s_kv * (d_qk + d_v)`` (``Q K^T`` and ``P V``); backward
``2 * b * h_q * s_q * s_kv * (3 d_qk + 2 d_v)`` (``Q K^T`` recomputed, ``dO V^T``, ``P^T dO``, ``dS K``,
``dS^T Q``: FlashAttention-2's backward, Dao 2023, section 3.1.2), the dense count: a causal mask lets the
kernel skip about half of it, which this does not model. The strategy handlers price a dot / convolution shard from these totals
(``strategy.dot``, ``strategy.convolution``); :func:`model_flops` sums them over a program for MFU.
"""

from __future__ import annotations

import math

from ..hlo.loops import execution_counts

__all__ = ["dot_flops", "convolution_flops", "attention_flops", "matmul_flops", "model_flops",
           "FUSED_ATTENTION_TARGETS"]

#: fused-attention custom-call targets and whether each is a backward pass
FUSED_ATTENTION_TARGETS = {"te_fused_attn_forward_ffi": False, "te_fused_attn_backward_ffi": True,
                           "te_fused_attn_forward": False, "te_fused_attn_backward": True}


def dot_flops(instr) -> float:
    """Flops of a ``dot`` (array operands; see the module docstring). Raises nothing: 0 for a dot
    whose dims cannot be read."""
    lhs, rhs = instr.operands[0], instr.operands[1]
    rb = set(instr.attrs.get("rhs_batch_dims") or ())
    rc = set(instr.attrs.get("rhs_contracting_dims") or ())
    free = [d for d in range(len(rhs.shape.dims)) if d not in rb and d not in rc]
    return 2.0 * math.prod(lhs.shape.dims) * math.prod(rhs.shape.dims[d] for d in free)


def convolution_flops(instr, rhs_layout: str) -> float:
    """Flops of a ``convolution`` whose kernel has the dim labels ``rhs_layout`` (e.g. ``'01io'``):
    see the module docstring."""
    rhs = instr.operands[1]
    kernel_spatial = math.prod(rhs.shape.dims[i] for i, c in enumerate(rhs_layout) if c.isdigit())
    in_feat = rhs.shape.dims[rhs_layout.index("i")]
    return 2.0 * math.prod(instr.shape.dims) * kernel_spatial * in_feat


def attention_flops(instr) -> float:
    """Flops of a fused-attention custom-call (:data:`FUSED_ATTENTION_TARGETS`; module docstring), from
    the shapes of its operands 0-2 (rank-4 BSHD ``q``, ``k``, ``v``); 0 for any other instruction or
    operands of another rank."""
    target = instr.custom_call_target
    if target not in FUSED_ATTENTION_TARGETS or len(instr.operands) < 3:
        return 0.0
    q, k, v = (o.shape for o in instr.operands[:3])
    if not all(s.is_array and len(s.dims) == 4 for s in (q, k, v)):
        return 0.0
    b, sq, hq, dqk = q.dims
    skv, dv = k.dims[1], v.dims[3]
    per = 2.0 * b * hq * sq * skv
    return per * (3 * dqk + 2 * dv) if FUSED_ATTENTION_TARGETS[target] else per * (dqk + dv)


def matmul_flops(instr) -> float:
    """Flops of a dot, convolution or fused-attention custom-call (0 for any other instruction, or one
    whose operands are not arrays)."""
    if instr.opcode == "custom-call":
        return attention_flops(instr)
    if instr.opcode not in ("dot", "convolution") or len(instr.operands) < 2 or not instr.shape.is_array:
        return 0.0
    if not (instr.operands[0].shape.is_array and instr.operands[1].shape.is_array):
        return 0.0
    if instr.opcode == "dot":
        return dot_flops(instr)
    labels = instr.attrs.get("dim_labels")
    text = str(labels) if labels is not None else ""
    try:
        rhs_layout = text.split("_")[1].split("->")[0]
    except IndexError:
        return 0.0
    if "i" not in rhs_layout or len(rhs_layout) != len(instr.operands[1].shape.dims):
        return 0.0
    return convolution_flops(instr, rhs_layout)


def model_flops(module) -> float:
    """Matmul flops of one run of the whole (unpartitioned) program: :func:`matmul_flops` of every
    dot, convolution and fused-attention call, fused ones included, times its computation's executions per run
    (``hlo.loops.execution_counts``: while bodies count once per trip). This is the numerator of MFU
    ("model flops": matmuls only, as in the PaLM paper's MFU; elementwise work is not model flops)."""
    counts = execution_counts(module)
    total = 0.0
    seen: set[int] = set()

    def walk(comp, times: float) -> None:
        nonlocal total
        for instr in comp.instructions:
            total += matmul_flops(instr) * times
            if instr.opcode == "fusion":
                for c in instr.called_computations:
                    walk(c, times)

    for comp in module.computations:
        times = counts.get(id(comp))
        if times is None or id(comp) in seen:
            continue
        seen.add(id(comp))
        walk(comp, times)
    return total
