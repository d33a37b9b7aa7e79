"""Click options shared by every command that takes a device mesh, and a byte-size parameter type.

``@mesh_options`` adds ``--mesh`` (``2x4``, ``data=2,model=4``), ``--device-ids`` (``0,2,1,3,...``; default
iota), ``--alpha`` and ``--beta`` (one comma-separated value per mesh axis; default 1.0 each, cost units
per collective and per byte); ``@space_options`` adds ``--max-padding`` (the uneven-split policy) and
``--devices`` (the device count of ``solve --mesh auto``). Turn them into a
:class:`~hloshard.mesh.DeviceMesh` with :func:`hloshard.mesh_setup.mesh_from_options` (re-exported here).
"""

from __future__ import annotations

import click

from ..strategy.ties import check_ties, matching_ties, parse_tie
from ..errors import UsageError
from ..mesh_setup import mesh_from_options, timed_mesh_from_options
from ..units import parse_bytes

__all__ = ["mesh_options", "space_options", "device_option", "tie_option", "apply_ties", "tie_words", "Integer",
           "mesh_from_options", "timed_mesh_from_options", "ByteSize", "BYTE_SIZE"]


def mesh_options(func):
    """Click decorator: adds ``--mesh``, ``--device-ids``, ``--alpha``, ``--beta`` (passed to the command
    as ``mesh``, ``device_ids``, ``alpha``, ``beta``, each a string or None)."""
    options = [
        click.option("--mesh", "mesh", metavar="AxB", default=None,
                     help="Logical device mesh: axis sizes (2x4, 2x2x2, 8) or named axes "
                          "(data=2,model=4); `solve` also takes `auto` (try every mesh of 1-3 axes). "
                          "Default: the module's Shardy mesh, else the mesh its shardings imply, else "
                          "the 1-D mesh of num_partitions. An axis a user sharding splits is refined "
                          "internally (2x4 as 2x2x2) instead of resharding."),
        click.option("--device-ids", "device_ids", metavar="IDS", default=None,
                     help="Comma-separated device ids in mesh order (row-major). Default: 0,1,...,N-1."),
        click.option("--alpha", "alpha", metavar="A,..", default=None,
                     help="Collective latency per mesh axis, one comma-separated value per axis "
                          "(cost units). Default 1.0 each."),
        click.option("--beta", "beta", metavar="B,..", default=None,
                     help="Inverse bandwidth per mesh axis, one comma-separated value per axis "
                          "(cost units per byte). Default 1.0 each."),
    ]
    for opt in reversed(options):
        func = opt(func)
    return func


def space_options(func):
    """Click decorator for commands that search the strategy space (``solve``): adds ``--max-padding``
    (passed as ``max_padding``, float or None) and ``--devices`` (``devices``, int or None; the device
    count of ``--mesh auto``)."""
    options = [
        click.option("--max-padding", "max_padding", type=click.FloatRange(min=0.0), default=None,
                     metavar="RATIO",
                     help="Uneven splits (padded / empty last shards) are considered when they pad a dim "
                          "by at most this fraction of its size (default 0.5); user shardings are always "
                          "kept, and under --memory-budget uneven splits that use more devices than any "
                          "even one are considered too."),
        click.option("--devices", "devices", type=Integer(min=1), default=None, metavar="N",
                     help="Device count for --mesh auto (default: num_partitions, else the user "
                          "shardings' device count)."),
    ]
    for opt in reversed(options):
        func = opt(func)
    return func


def device_option(func):
    """Click decorator: adds ``--device NAME|FILE.toml`` (passed as ``device``, a string or None): a
    device profile (:mod:`hloshard.devices`) that prices the plan in seconds."""
    return click.option(
        "--device", "device", metavar="NAME|FILE.toml", default=None,
        help="Price in seconds on this accelerator: h100-sxm, h200, a100-80gb, b200, tpu-v4, tpu-v5e, "
             "tpu-v5p, tpu-v6e, or a TOML profile file. Sets alpha/beta per mesh axis from its links "
             "(mark axes with --mesh data=16:dcn,model=8: :ici inside a node or TPU slice, NVLink on a "
             "GPU; :dcn across them, InfiniBand on a GPU; unmarked: the innermost axes up to a node's "
             "devices are intra-node) and defaults --memory-budget to its HBM.")(func)


def complete_option(func):
    """Click decorator: adds ``--complete hloshard|xla`` (passed as ``complete``), one option with one meaning
    for ``cost`` and ``diff``: who chooses the shardings of the instructions a module leaves open (applied by
    :func:`hloshard.commands.cost.xla_completion`)."""
    return click.option(
        "--complete", "complete", type=click.Choice(["hloshard", "xla"]), default="hloshard", show_default=True,
        help="Who chooses the shardings of unannotated instructions: hloshard (the cheapest it finds) or "
             "xla (XLA's GSPMD propagation from the written shardings, what jax.jit runs under GSPMD: prices a "
             "hand-written plan as XLA carries it out; a Shardy-mode export, which jax.jit partitions with "
             "Shardy by default, can move other bytes there; needs the xla extra).")(func)


def _tie_values(ctx, param, values):
    """``--tie OUTPUT_INDEX=PARAM_NUMBER`` -> :class:`hloshard.strategy.ties.Tie`, ``--tie matching``
    -> ``"matching"`` (expanded against the module by :func:`apply_ties`); anything else is the CLI's usage
    error (``hloshard: error:``, exit 2)."""
    return tuple("matching" if str(v).strip() == "matching" else parse_tie(v) for v in values or ())


def tie_option(func):
    """Click decorator: adds ``--tie OUTPUT_INDEX=PARAM_NUMBER|matching`` (repeatable; passed as ``ties``, a
    tuple of :class:`hloshard.strategy.ties.Tie` and ``"matching"``), one option with one meaning for
    ``solve``, ``cost``, ``diff`` and ``explain``: apply it with :func:`apply_ties`."""
    return click.option(
        "--tie", "ties", multiple=True, callback=_tie_values, metavar="OUTPUT_INDEX=PARAM_NUMBER|matching",
        help="Output element OUTPUT_INDEX of the root tuple is the next value of parameter PARAM_NUMBER (a "
             "training step's state): it leaves in the sharding the parameter came in with, one decision "
             "for both. Repeatable; input_output_alias pairs are tied already. A nested index: 1,0=2. "
             "'matching': every top-level output with the shape and dtype of an entry parameter, each "
             "paired with the first unpaired such parameter in order (jax flattens a step's state in and "
             "out alike); pairs given explicitly take precedence.")(func)


def apply_ties(module, ties) -> None:
    """Add ``ties`` (:func:`tie_option`'s value) to ``module.ties`` (read when the cost graph is built,
    :func:`hloshard.strategy.ties.module_ties`) and check every tie of the module against it at once
    (:func:`hloshard.strategy.ties.check_ties`: UsageError, exit 2, for a tie naming nothing or tying different
    shapes): ``"matching"`` becomes :func:`hloshard.strategy.ties.matching_ties` for the outputs no explicit pair
    names."""
    if not ties:
        return
    given = [t for t in ties if t != "matching"]
    if "matching" in ties:   # every output with a parameter's shape and dtype, paired in order
        taken = {t.output for t in given}
        given += [t for t in matching_ties(module) if t.output not in taken]
    module.ties = list(getattr(module, "ties", None) or []) + given
    # checked against the parsed module at once, before any work (new user 33 F11: `--tie 1=5` tying different
    # shapes was found only after the cost graph's build, 85-119 s, or not at all when the build ran out of time)
    check_ties(module)


def tie_words(ties) -> str:
    """How a module was priced, in words, for reports: ``untied``, ``--tie matching``, ``--tie 1=0 --tie 2=1``."""
    if not ties:
        return "untied"
    return " ".join("--tie matching" if t == "matching" else
                    f"--tie {','.join(map(str, t.output))}={','.join(map(str, (t.param,) + tuple(t.param_index)))}"
                    for t in ties)


class Integer(click.IntRange):
    """``click.IntRange`` that calls a non-integer what it is: ``'abc' is not a valid integer`` (click's own type
    said ``'abc' is not a valid integer range``: fresh-clone check 33, ``--seed abc``); out of range as click says
    it (``0<=x<=2147483647``)."""

    name = "integer"


class ByteSize(click.ParamType):
    """A byte size: a plain integer or a size with a suffix (``64MiB``, ``2GiB``, ``1.5GB``) -> int bytes
    (:func:`hloshard.units.parse_bytes`, its one rule :data:`hloshard.units.UNIT_RULE`)."""

    name = "bytes"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            if value < 0:
                self.fail(f"byte size must be non-negative, got {value}", param, ctx)
            return value
        try:
            return parse_bytes(value)
        except UsageError as exc:
            self.fail(str(exc), param, ctx)


#: Shared instance: ``click.option('--memory-budget', type=BYTE_SIZE)``.
BYTE_SIZE = ByteSize()
