"""XLA's own cost analysis of a sharded module, per device: the reference for hloshard's flops, HBM bytes
and step time (``--device``), measured in a child process.

The module is compiled for N partitions (GSPMD, Shardy off, no propagation to parameters) and
``compiled.cost_analysis()`` (XLA's ``HloCostAnalysis`` over the optimised, partitioned per-device
program) gives:

* ``flops``: floating-point operations of one device's program (a dot: 2 per multiply-add; elementwise
  ops one per element; loop bodies once per trip when the trip count is known);
* ``bytes accessed``: bytes every instruction of the optimised program reads and writes (a fusion: its
  operands and result, not its inside), collectives included;
* on TPU also ``optimal_seconds``: the TPU compiler's own time estimate for the program (what it
  counts: BENCHMARKS.md "Seconds: predicted vs XLA", measured by experiment), and ``concat_bitcasts``: the
  ``ConcatBitcast`` custom-calls of its optimised program (the TPU's own).  Each of them adds -1 to
  ``optimal_seconds`` (measured: a 2-layer transformer with one gives -0.99926, the 48-layer one with
  177 gives -176.98, while 20 ``AsyncCollective*`` custom-calls of the sample transformer step leave it
  positive; BENCHMARKS.md "Round 9"), so :attr:`XlaCost.estimate_seconds` adds them back.

Two backends:

* :func:`xla_cost`: the CPU backend (jax in a child of this interpreter, 8 fake devices;
  :func:`hloshard.xla_check.compile_with_dump`, the options of every ``--xla`` check);
* :func:`tpu_cost`: the TPU compiler ahead of time (``libtpu``, no TPU needed: ``../shared/reference/
  tpu_aot.md``) for a topology such as ``v5e:2x4``, in a child of the Python given (one with libtpu);
  sharded ``copy`` pins become ``Sharding`` custom-calls first (:func:`copies_as_sharding_calls`).

jax is never imported in the calling process.  Raises :class:`hloshard.errors.InputError` when jax (or
libtpu) is missing or the child fails as a whole; a module XLA rejects gets :attr:`XlaCost.error`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import re
import subprocess
import sys

from .cost.tpu_layout import padded_bytes
from .errors import InputError, child_failure
from .xla_check import compile_with_dump, run_jax_child

# jax / jaxlib are optional (the ``jax`` extra): the CLI must run without them, so they are imported
# inside the functions that need them, never at module level (tests/test_import_contracts.py).

__all__ = ["XlaCost", "xla_cost", "tpu_cost"]


@dataclasses.dataclass
class XlaCost:
    """``cost_analysis()`` of one module, per device: ``flops``, ``bytes_accessed`` (bytes),
    ``transcendentals``, ``optimal_seconds`` (TPU only, else None), ``error`` (XLA's message or None),
    ``concat_bitcasts`` (TPU only: ``ConcatBitcast`` custom-calls in the optimised program, else None);
    ``intermediate_copies`` / ``intermediate_copy_bytes`` (TPU only, else None): the optimised program's
    asynchronous copies between HBM and on-chip memory of values other than entry parameters and constants
    (memory-space assignment moving intermediates: :func:`intermediate_copies`), and their padded bytes."""

    flops: float | None = None
    bytes_accessed: float | None = None
    transcendentals: float | None = None
    optimal_seconds: float | None = None
    error: str | None = None
    concat_bitcasts: int | None = None
    intermediate_copies: int | None = None
    intermediate_copy_bytes: float | None = None

    @property
    def estimate_seconds(self) -> float | None:
        """``optimal_seconds`` with the -1 of each ``ConcatBitcast`` added back (module docstring); None
        without an ``optimal_seconds``."""
        if self.optimal_seconds is None:
            return None
        return self.optimal_seconds + (self.concat_bitcasts or 0)

    def to_json(self) -> dict:
        out = dataclasses.asdict(self)
        out["estimate_seconds"] = self.estimate_seconds
        return out


def _analysis(exe, tpu: bool = False) -> dict:  # pragma: no cover - child side
    ca = exe.cost_analysis()
    if isinstance(ca, list):
        ca = ca[0] if ca else {}
    ca = dict(ca or {})
    out = {"flops": ca.get("flops"), "bytes_accessed": ca.get("bytes accessed"),
           "transcendentals": ca.get("transcendentals"), "optimal_seconds": ca.get("optimal_seconds")}
    if tpu:
        text = "\n".join(m.to_string() for m in exe.hlo_modules())
        out["concat_bitcasts"] = len(re.findall(r'custom_call_target="ConcatBitcast"', text))
        out["intermediate_copies"], out["intermediate_copy_bytes"] = intermediate_copies(text)
    return out


_DEF = re.compile(r"^\s*(?:ROOT )?%([\w.\-]+) = .*?\s([a-z][a-z\-]*)\(", re.M)
_COPY_START = re.compile(r"^\s*(?:ROOT )?%[\w.\-]+ = \((\w+)\[([0-9,]*)\][^\n]*?\scopy-start\(%([\w.\-]+)\)", re.M)


def intermediate_copies(text: str) -> tuple[int, int]:
    """``(count, bytes)`` of the ``copy-start`` instructions of a TPU-optimised HLO text (every computation)
    whose operand is not an entry ``parameter`` or a ``constant``: memory-space assignment's asynchronous
    copies of intermediates between HBM and on-chip memory (VMEM, ``S(1)``) -- a prefetch of a value a
    kernel wrote to HBM, or an eviction.  ``bytes``: the copied arrays' padded sizes
    (:func:`hloshard.cost.tpu_layout.padded_bytes` of the copy's first tuple element).  The TPU compiler's
    ``HloCostAnalysis`` counts each copy :data:`hloshard.cost.roofline.PREFETCH_COPY_FACTOR` x its size, as
    for a parameter's prefetch (BENCHMARKS.md "Round 23, helper seconds": libtpu 0.0.42.1 compiles the
    samples with such copies for ``v5p:2x2x2`` and none for ``v5e:2x4`` / ``v6e:2x4``).  An unknown element
    type counts 0 bytes."""
    opcode = {m.group(1): m.group(2) for m in _DEF.finditer(text)}
    count = total = 0
    for m in _COPY_START.finditer(text):
        dtype, dims, src = m.groups()
        if opcode.get(src) in ("parameter", "constant"):
            continue
        count += 1
        try:
            total += padded_bytes(dtype, [int(d) for d in dims.split(",") if d])
        except KeyError:
            pass
    return count, total


_PIN_COPY = re.compile(r"= (\S+) copy\(([^()]+)\), sharding=")


def copies_as_sharding_calls(text: str) -> str:
    """The HLO text with every sharded ``copy`` (an operand pin ``hloshard solve`` writes) as the
    ``Sharding`` custom-call it stands for: the TPU compiler's MLIR pipeline cannot legalize a sharded
    ``mhlo.copy`` ("failed to legalize operation 'mhlo.copy'"), and XLA's partitioner treats both as the
    same layout constraint. Other text is unchanged."""
    return _PIN_COPY.sub(lambda m: f'= {m.group(1)} custom-call({m.group(2)}), custom_call_target="Sharding", '
                                   f"sharding=", text)


def _compile_tpu(text: str, n: int, topology: str):  # pragma: no cover - child side
    import jax.extend
    import numpy as np
    from jax._src import compiler
    from jax._src.interpreters import mlir as jmlir
    from jax._src.lib import xla_client as xc
    from jax._src.lib.mlir import ir
    from jax.experimental import topologies

    topo = topologies.get_topology_desc(topology, "tpu")
    client = topo.devices[0].client
    mod = xc.hlo.hlo_module_from_text(copies_as_sharding_calls(text))
    bytecode = jax.extend.mlir.hlo_to_stablehlo(mod.as_serialized_hlo_module_proto())
    opts = jax.extend.backend.get_compile_options(num_replicas=1, num_partitions=n,
                                                  device_assignment=np.arange(n).reshape(1, n))
    b = opts.executable_build_options
    b.use_shardy_partitioner = False
    b.allow_spmd_sharding_propagation_to_parameters = [False]
    with jmlir.make_ir_context():
        return compiler.backend_compile_and_load(client, ir.Module.parse(bytecode),
                                                 xc.DeviceList(tuple(topo.devices[:n])), opts, [])


def _child_main() -> int:  # pragma: no cover - runs in the subprocess
    import tempfile

    request = json.load(sys.stdin)
    n = int(request["num_partitions"])
    topology = request.get("topology")
    results = []
    for text in request["texts"]:
        try:
            if topology:
                exe = _compile_tpu(text, n, topology)
            else:

                with tempfile.TemporaryDirectory(prefix="hloshard-xla-cost-") as dump:
                    exe = compile_with_dump(text, n, dump, "NO-PASS-MATCHES^")
            results.append(_analysis(exe, tpu=bool(topology)))
        except Exception as exc:  # one bad module must not hide the others
            results.append({"error": f"{type(exc).__name__}: {exc}".splitlines()[0]})
    json.dump({"results": results}, sys.stdout)
    return 0


def _to_costs(data: dict) -> list[XlaCost]:
    return [XlaCost(error=r["error"]) if r.get("error") else
            XlaCost(r.get("flops"), r.get("bytes_accessed"), r.get("transcendentals"), r.get("optimal_seconds"),
                    concat_bitcasts=r.get("concat_bitcasts"), intermediate_copies=r.get("intermediate_copies"),
                    intermediate_copy_bytes=r.get("intermediate_copy_bytes"))
            for r in data["results"]]


def xla_cost(texts: list[str], num_partitions: int, timeout: float = 900.0) -> list[XlaCost]:
    """XLA CPU's ``cost_analysis()`` of each HLO text compiled for ``num_partitions`` devices (one child
    for all).  Raises InputError when jax is missing or the child dies."""

    if not texts:
        return []
    return _to_costs(run_jax_child("hloshard.xla_cost", {"num_partitions": int(num_partitions),
                                                         "texts": list(texts)},
                                   num_partitions, timeout, what="XLA cost analysis", flag="--xla"))


def tpu_cost(texts: list[str], num_partitions: int, topology: str, python: str,
             timeout: float = 1800.0) -> list[XlaCost]:
    """The TPU compiler's ``cost_analysis()`` (with ``optimal_seconds``) of each HLO text for
    ``num_partitions`` chips of ``topology`` (e.g. ``'v5e:2x4'``), compiled ahead of time in a child run by
    ``python`` (an interpreter with jax and libtpu; this package is put on its path).  Raises
    InputError when the child fails or times out."""
    if not texts:
        return []
    env = dict(os.environ)
    src = str(pathlib.Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    env["ALLOW_MULTIPLE_LIBTPU_LOAD"] = "1"   # compile-only: no TPU is opened, other libtpu users may run
    env.pop("JAX_PLATFORMS", None)
    payload = {"num_partitions": int(num_partitions), "texts": list(texts), "topology": topology}
    try:
        proc = subprocess.run([python, "-m", "hloshard.xla_cost"], input=json.dumps(payload), capture_output=True,
                              text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise InputError(f"TPU cost analysis timed out after {timeout:.0f} s") from None
    except OSError as exc:
        raise InputError(f"cannot run {python}: {exc.strerror or exc}") from None
    if proc.returncode != 0:
        raise InputError(f"TPU cost analysis failed: {child_failure(proc.stderr, proc.returncode)}")
    return _to_costs(json.loads(proc.stdout))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_child_main())
