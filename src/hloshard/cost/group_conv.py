"""XLA CPU's expansion of a batch-grouped convolution: the temporaries it materialises.

A ``convolution`` with ``batch_group_count`` G > 1 is what jax writes for the kernel gradient of a
grouped (e.g. depthwise) convolution.  XLA's CPU compiler has no grouped kernel for it: its
``ConvolutionGroupConverter`` pass (run with ``convert_batch_groups_only``, every batch-grouped
convolution expanded) rewrites it as a dense convolution whose output holds every group's result for
every output feature -- G times the grouped output -- then masks the cross-group entries with a
``select`` on an ``iota`` comparison and sums the groups with a ``reduce-window`` (measured with
jaxlib 0.10.2 on CPU: the kernel gradient of a 7x7 depthwise convolution over 128 channels, output
``f32[7,7,1,128]``, makes ``f32[128,7,7,128]`` (the dense convolution) and ``f32[7,7,128,128]`` (the
masked copy, a loop fusion) of 3.2 MB each: temp 6,422,528 B against 131,072 B for the forward).

So the memory model counts, for such a convolution, two buffers of G x its output tile live while it
runs (the dense result and its masked copy; the ``reduce-window`` writes the convolution's own
output).  The partitioner runs before the converter, so the tile is the per-device output under the
plan.  The TPU and GPU backends run grouped convolutions natively; the rule is the CPU backend's
(the memory model's default) and not applied with a TPU profile.
"""

from __future__ import annotations

__all__ = ["batch_groups", "expansion_bytes"]


def batch_groups(instr) -> int:
    """``batch_group_count`` of a ``convolution`` (1 for any other instruction or when absent)."""
    if getattr(instr, "opcode", None) != "convolution":
        return 1
    raw = instr.attrs.get("batch_group_count", 1)
    try:
        return max(int(str(raw).strip("\"") or 1), 1)
    except ValueError:
        return 1


def expansion_bytes(instr, output_tile_bytes: int) -> int:
    """Bytes per device XLA CPU's ``ConvolutionGroupConverter`` adds while ``instr`` runs (module
    docstring): ``2 * G * output_tile_bytes`` for a convolution with ``batch_group_count`` G > 1 whose
    per-device output tile is ``output_tile_bytes``; 0 otherwise."""
    g = batch_groups(instr)
    return 2 * g * int(output_tile_bytes) if g > 1 else 0
