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
plan, and G the per-device group count: a depthwise weight gradient split on its channels (its output
feature dim, :func:`hloshard.strategy.convolution._group_roles`) is partitioned into convolutions of G / k
groups each (XLA's ``CreateShardedConvConvolution`` sets ``batch_group_count`` to the per-device lhs batch;
measured on new user 36's Mamba conv1d weight gradient, ``f32[8,128,512]`` operands batch over ``data`` and
channels over ``model``: XLA CPU temp 768 KiB, of which the expansion 2 x 128 x 2 KiB; 2 x 512 x 2 KiB was
priced before round 36).  The TPU and GPU backends run grouped convolutions natively; the rule is the CPU backend's
(the memory model's default) and not applied with a TPU profile.
"""

from __future__ import annotations

import re

__all__ = ["batch_groups", "expansion_bytes", "parse_dim_labels"]


def parse_dim_labels(text):
    """``(lhs, rhs, output)`` label strings of a convolution's ``dim_labels`` (e.g. ``b01f_01io->b01f``: 'b'
    batch, 'f' feature, 'i' / 'o' kernel input / output feature, digits spatial), or None when ``text`` is
    not of that form.  The one parser (re-exported by :mod:`hloshard.strategy.convolution`)."""
    m = re.match(r"\s*([0-9a-z]+)_([0-9a-z]+)->([0-9a-z]+)", str(text or ""))
    if not m:
        return None
    return m.group(1), m.group(2), m.group(3)


def batch_groups(instr) -> int:
    """``batch_group_count`` of a ``convolution`` (1 for any other instruction or when absent)."""
    if getattr(instr, "opcode", None) != "convolution":
        return 1
    raw = instr.attrs.get("batch_group_count", 1)
    try:
        return max(int(str(raw).strip("\"") or 1), 1)
    except ValueError:
        return 1


def expansion_bytes(instr, output_tile_bytes: int, out_spec=None, axis_sizes=None) -> int:
    """Bytes per device XLA CPU's ``ConvolutionGroupConverter`` adds while ``instr`` runs (module
    docstring): ``2 * (G / k) * output_tile_bytes`` for a convolution with ``batch_group_count`` G > 1 whose
    per-device output tile is ``output_tile_bytes``, k the number of parts ``out_spec`` (mesh axes per output
    dim; None: unsplit) splits its output feature dim into (``axis_sizes[a]``: the size of mesh axis a); 0
    otherwise."""
    g = batch_groups(instr)
    if g <= 1:
        return 0
    labels = parse_dim_labels(instr.attrs.get("dim_labels"))
    if out_spec and axis_sizes is not None and labels is not None and "f" in labels[2]:
        k = 1
        for a in out_spec[labels[2].index("f")] or ():
            k *= int(axis_sizes[a])
        if k > 1 and g % k == 0:
            g //= k
    return 2 * g * int(output_tile_bytes)
