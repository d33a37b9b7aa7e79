"""Floating-point operations of matmul-like instructions: the one place their flops are counted.

``dot``: ``2 * prod(lhs dims) * prod(rhs free dims)``, i.e. ``2 * batch * M * N * K`` (a fused
multiply-add is 2 flops, as XLA's ``HloCostAnalysis`` counts a dot). ``convolution``:
``2 * batch * output features * kernel input features * prod over spatial dimensions of the (output
position, kernel tap) pairs whose tap reads an input element`` (per output element one multiply-add
per kernel tap and input feature of its group; a tap that falls on padding or between the elements of
a dilated input is no work: as XLA's ``HloCostAnalysis`` counts a convolution -- with padding taps
counted, ``conv_layer``'s 3x3 convolution padded by 1 on 32 x 32 was 4.5% above XLA CPU's flops). Fused attention (Transformer Engine's ``te_fused_attn_forward_ffi`` / ``_backward_ffi``
custom-calls, BSHD operands ``q[b, s_q, h_q, d_qk]``, ``k[b, s_kv, h_kv, d_qk]``, ``v[b, s_kv, h_kv, d_v]``
as operands 0-2): forward ``2 * b * h_q * s_q * s_kv * (d_qk + d_v)`` (``Q K^T`` and ``P V``); backward
``2 * b * h_q * s_q * s_kv * (3 d_qk + 2 d_v)`` (``Q K^T`` recomputed, ``dO V^T``, ``P^T dO``, ``dS K``,
``dS^T Q``: FlashAttention-2's backward, Dao 2023, section 3.1.2), the dense count: a causal mask lets the
kernel skip about half of it, which this does not model. The strategy handlers price a dot / convolution shard from these totals
(``strategy.dot``, ``strategy.convolution``); :func:`model_flops` sums them over a program for MFU.
"""

from __future__ import annotations

import functools
import math

from ..hlo.loops import execution_counts

__all__ = ["dot_flops", "convolution_flops", "valid_taps", "attention_flops", "matmul_flops", "model_flops",
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


def valid_taps(size: int, stride: int, pad_low: int, lhs_dilation: int, rhs_dilation: int, in_size: int,
               out_size: int) -> int:
    """(output position, kernel tap) pairs of one spatial dimension of a convolution whose tap reads an
    element of the input: the tap of output ``o`` and kernel index ``k`` reads padded coordinate
    ``o * stride + k * rhs_dilation - pad_low`` of the input dilated by ``lhs_dilation``, an element when
    it lies in ``[0, (in_size - 1) * lhs_dilation]`` and is a multiple of ``lhs_dilation``.  All sizes
    are element counts (non-negative; a stride or dilation below 1 counts as 1)."""
    return _valid_taps(int(size), max(1, int(stride)), int(pad_low), max(1, int(lhs_dilation)),
                       max(1, int(rhs_dilation)), int(in_size), int(out_size))


@functools.lru_cache(maxsize=4096)
def _valid_taps(size, stride, pad_low, lhs_d, rhs_d, in_size, out_size) -> int:
    span = (in_size - 1) * lhs_d
    if in_size <= 0 or size <= 0:
        return 0
    total = 0
    for o in range(out_size):
        base = o * stride - pad_low
        if lhs_d == 1:     # taps k with 0 <= base + k * rhs_d <= span
            lo = -(base // rhs_d) if base < 0 else 0      # ceil(-base / rhs_d)
            hi = min(size - 1, (span - base) // rhs_d) if span >= base else -1
            total += max(0, hi - lo + 1)
        else:
            total += sum(1 for k in range(size) if 0 <= base + k * rhs_d <= span and (base + k * rhs_d) % lhs_d == 0)
    return total


def convolution_flops(instr, rhs_layout: str) -> float:
    """Flops of a ``convolution`` whose kernel has the dim labels ``rhs_layout`` (e.g. ``'01io'``):
    see the module docstring (valid taps per spatial dimension, :func:`valid_taps`, from its
    ``window`` and ``dim_labels``; the dense count ``2 * prod(output dims) * prod(kernel spatial dims)
    * kernel input features`` when either is missing or does not fit the shapes)."""
    lhs, rhs = instr.operands[0], instr.operands[1]
    kernel_spatial = math.prod(rhs.shape.dims[i] for i, c in enumerate(rhs_layout) if c.isdigit())
    in_feat = rhs.shape.dims[rhs_layout.index("i")]
    dense = 2.0 * math.prod(instr.shape.dims) * kernel_spatial * in_feat
    window = instr.attrs.get("window")
    try:
        lhs_l, out_l = str(instr.attrs.get("dim_labels")).split("_")[0], str(instr.attrs.get("dim_labels")).split("->")[1]
    except IndexError:
        return dense
    wdims = getattr(window, "dims", None)
    nsp = sum(c.isdigit() for c in out_l)
    if not wdims or len(wdims) != nsp or len(lhs_l) != len(lhs.shape.dims) or len(out_l) != len(instr.shape.dims):
        return dense
    pairs = 1
    out_spatial = 1
    for j, w in enumerate(wdims):
        d = str(j)
        if d not in lhs_l or d not in out_l:
            return dense
        n_in, n_out = lhs.shape.dims[lhs_l.index(d)], instr.shape.dims[out_l.index(d)]
        pairs *= valid_taps(w.size, w.stride, w.padding_low, w.lhs_dilation, w.rhs_dilation, n_in, n_out)
        out_spatial *= n_out
    if out_spatial == 0:
        return 0.0
    return 2.0 * (math.prod(instr.shape.dims) // out_spatial) * pairs * in_feat


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
