"""The one input loader of ``solve``, ``cost`` and ``explain-reshape``: HLO text or StableHLO MLIR.

``load_module(path)`` reads ``path`` (``-``: standard input), converts a ``.mlir`` file (StableHLO,
what ``jax.jit(f).lower(*args).as_text()`` prints) to HLO with :mod:`hloshard.stablehlo` (jaxlib in a
child process), and parses the HLO with :func:`hloshard.hlo.parse_module`. The module it returns
carries ``module.source_info`` (:class:`SourceInfo`): the input format and, for StableHLO, the JAX
paths of ``@main``'s arguments and results.

Errors: UsageError (unreadable file), HloSyntaxError (HLO that does not parse; MLIR that is not
StableHLO, at the line and column MLIR reports), InputError (``.mlir`` without the ``xla`` extra).
All exit 2.
"""

from __future__ import annotations

import dataclasses
import time

from .hlo import parse_module
from .io import is_stablehlo_path, read_text
from .sdy_manual import read_manual_computations
from .sdy_mesh import read_result_shardings
from .stablehlo import mlir_signature, stablehlo_to_hlo

__all__ = ["SourceInfo", "load_module", "load_text", "is_stablehlo_path"]


@dataclasses.dataclass
class SourceInfo:
    """Where a module came from: ``format`` ('hlo' | 'stablehlo'), ``filename``, and for StableHLO the
    JAX paths of the entry parameters (``arg_paths[parameter number]``) and of the outputs
    (``result_paths[output index]``), None where unknown; ``convert_seconds``: wall seconds of the
    StableHLO -> HLO conversion (jaxlib in a child process; 0 for HLO), which is not parsing: ``solve``
    reserves the parse's seconds again for writing its output, not the conversion's."""

    format: str
    filename: str
    arg_paths: list = dataclasses.field(default_factory=list)
    result_paths: list = dataclasses.field(default_factory=list)
    convert_seconds: float = 0.0


def load_text(text: str, filename: str, stablehlo: bool = False):
    """Parse ``text`` (HLO, or StableHLO when ``stablehlo``) into a Module with ``source_info``."""

    if stablehlo:
        sig = mlir_signature(text)
        began = time.monotonic()
        hlo = stablehlo_to_hlo(text, filename)
        converted = time.monotonic() - began
        module = parse_module(hlo, f"{filename} (as HLO)")
        module.source_info = SourceInfo("stablehlo", filename, list(sig["args"]), list(sig["results"]), converted)
    else:
        module = parse_module(text, filename)
        module.source_info = SourceInfo("hlo", filename)
    read_result_shardings(module)   # jax's Shardy-mode out_shardings: kept like any annotation
    read_manual_computations(module, filename)   # jax's Shardy-mode shard_map: the manual region in GSPMD's spelling
    return module


def load_module(path: str):
    """Read and parse ``path`` (``-`` for stdin: HLO text) into a :class:`~hloshard.hlo.ir.Module`."""

    name = "<stdin>" if path == "-" else path
    return load_text(read_text(path), name, stablehlo=is_stablehlo_path(path))
