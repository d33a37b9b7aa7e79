"""Real XLA (jaxlib 0.10.2 CPU wheel) as a test oracle, always in a child process.

Why a child process: jaxlib's HLO parser and verifier hit C++ ``CHECK`` failures on some malformed
inputs (for example a reshape whose element counts differ), which abort the whole interpreter. Every
function here therefore runs XLA in a child interpreter (``python -c <script>``, one per test process,
serving one request at a time and replaced when a request kills or hangs it: :class:`_Server`) with
``XLA_FLAGS=--xla_force_host_platform_device_count=8`` (8 fake CPU devices) and a timeout, and returns
plain Python data (bool, str, list, dict, numpy arrays).

Public functions:

* :func:`parse_hlo` / :func:`parse_many` -- does ``hlo_module_from_text`` accept the text (no verifier).
* :func:`shardings_from_strings` -- what ``xla_client.HloSharding.from_string`` makes of sharding strings.
* :func:`compile_spmd` -- parse -> StableHLO -> compile for ``num_partitions`` CPU devices with GSPMD
  (Shardy silently drops plain ``sharding={...}`` on hand-written HLO, see shared/reference/xla_oracle.md);
  :func:`compile_many` does many in one child.
* :func:`spmd_partition` -- the RAW HLO right after XLA's ``spmd-partitioning`` pass (read from the
  ``xla_dump_to`` dump), i.e. before the CPU backend combines all-reduces or decomposes all-to-all.
* :func:`collectives` -- the collectives of an HLO text (regex parser; replica groups expanded from the
  explicit, iota ``[2,4]<=[8]`` and ``mesh[...] {...}`` forms).
* :func:`run_sharded` -- compile, execute on sharded inputs and gather every output to a global array.
* :func:`strip_variadic_collective_shardings` -- work around jaxlib's failure to export a tuple sharding
  on a multi-result collective (only the oracle's copy is changed).

The backend compiles with ``xla_backend_optimization_level=0`` (partitioning and numerics are what the
oracle checks, not code speed).

Failures of the oracle itself (timeout, interpreter abort, XLA error where a result was required) raise
:class:`OracleError` with XLA's message.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import re
import subprocess
import tempfile
import threading
from typing import Any, Sequence

import numpy as np

from hloshard.xla_check import child_argv

DEFAULT_TIMEOUT = 120.0


class OracleError(RuntimeError):
    """XLA failed where the caller needed a result, or the child process died / timed out."""


# --------------------------------------------------------------------------------------------------
# child process
# --------------------------------------------------------------------------------------------------

# The script run in the child. It reads one JSON request on stdin and writes one JSON answer (a single
# line starting with the marker) on stdout. Arrays travel through .npz files in a temporary directory.
_CHILD = r'''
import json, os, re, sys, glob, traceback
import numpy as np
import jax, jax.extend, jax.extend.mlir, jax.extend.backend
from jax._src.lib import xla_client as xc
MARK = "@@ORACLE@@"

def answer(obj):
    sys.stdout.write(MARK + json.dumps(obj) + "\n"); sys.stdout.flush()

def err(exc):
    return f"{type(exc).__name__}: {exc}"

def describe(h, other=None):
    d = {"str": str(h)}
    elems = h.tuple_elements()
    d["is_tuple"] = bool(elems)
    if elems:
        d["tuple_elements"] = [describe(e) for e in elems]
    else:
        d["is_replicated"] = h.is_replicated(); d["is_maximal"] = h.is_maximal()
        d["is_manual"] = h.is_manual(); d["is_tiled"] = h.is_tiled(); d["is_unknown"] = h.is_unknown()
        d["tile_assignment_dimensions"] = list(h.tile_assignment_dimensions())
        d["tile_assignment_devices"] = list(h.tile_assignment_devices())
        d["replicate_on_last_tile_dim"] = h.replicate_on_last_tile_dim()
        d["subgroup_types"] = [str(t).split(".")[-1] for t in h.subgroup_types()]
        d["num_devices"] = h.num_devices()
        d["is_tile_assignment_iota"] = h.is_tile_assignment_iota() if h.is_tiled() else False
    if other is not None:
        d["equal"] = (h == other)
    return d

def compile_text(text, n, dump_dir=None, propagate_to_output=False, shardy=False):
    mod = xc.hlo.hlo_module_from_text(text)
    mlir = jax.extend.mlir.hlo_to_stablehlo(mod.as_serialized_hlo_module_proto())
    backend = jax.extend.backend.get_backend("cpu")
    opts = jax.extend.backend.get_compile_options(
        num_replicas=1, num_partitions=n,
        device_assignment=np.arange(n).reshape(1, n), backend=backend)
    b = opts.executable_build_options
    b.use_shardy_partitioner = bool(shardy)
    b.allow_spmd_sharding_propagation_to_output = [bool(propagate_to_output)]
    b.allow_spmd_sharding_propagation_to_parameters = [False]
    # the oracle needs partitioning and correct numerics, not fast code: skip LLVM's expensive passes
    b.debug_options.xla_backend_optimization_level = 0
    b.debug_options.xla_llvm_disable_expensive_passes = True
    if dump_dir:
        b.debug_options.xla_dump_to = dump_dir
        b.debug_options.xla_dump_hlo_pass_re = "spmd-partitioning|shardy-xla" if shardy else "spmd-partitioning"
    devs = backend.devices()[:n]
    exe = backend.compile_and_load(mlir, xc.DeviceList(tuple(devs)), opts)
    return exe, devs

def handle(req):
    op = req["op"]
    if op == "parse":
        # one line per text as soon as it is done: if a later text aborts the interpreter, the parent
        # keeps these results and knows which text killed the child
        for t in req["texts"]:
            try:
                m = xc.hlo.hlo_module_from_text(t)
                item = [True, m.to_string()]
            except Exception as e:
                item = [False, err(e)]
            sys.stdout.write("@@ITEM@@" + json.dumps(item) + "\n"); sys.stdout.flush()
        answer("done")
    elif op == "shardings":
        out = []
        others = req.get("others") or [None] * len(req["strings"])
        for s, o in zip(req["strings"], others):
            try:
                h = xc.HloSharding.from_string(s)
                ho = xc.HloSharding.from_string(o) if o is not None else None
                out.append(describe(h, ho))
            except Exception as e:
                out.append({"error": err(e)})
        answer(out)
    elif op == "compile_many":
        for t in req["texts"]:
            try:
                mod = xc.hlo.hlo_module_from_text(t)
                exe, _ = compile_text(t, req["n"], propagate_to_output=req.get("propagate_to_output", False))
                item = [True, exe.hlo_modules()[0].to_string()]
            except Exception as e:
                item = [False, err(e)]
            sys.stdout.write("@@ITEM@@" + json.dumps(item) + "\n"); sys.stdout.flush()
        answer("done")
    elif op == "compile":
        try:
            exe, _ = compile_text(req["text"], req["n"], propagate_to_output=req.get("propagate_to_output", False))
            answer([True, exe.hlo_modules()[0].to_string()])
        except Exception as e:
            answer([False, err(e)])
    elif op == "partition":
        try:
            exe, _ = compile_text(req["text"], req["n"], dump_dir=req["dump"],
                                  propagate_to_output=req.get("propagate_to_output", False))
        except Exception as e:
            answer({"error": err(e)}); return
        files = sorted(glob.glob(os.path.join(req["dump"], "*after_spmd-partitioning*.txt")))
        if not files:
            answer({"error": "no after_spmd-partitioning dump was written"}); return
        with open(files[-1]) as f:
            answer({"text": f.read(), "final": exe.hlo_modules()[0].to_string()})
    elif op == "shardy_partition":
        try:
            exe, _ = compile_text(req["text"], req["n"], dump_dir=req["dump"], shardy=True,
                                  propagate_to_output=req.get("propagate_to_output", False))
        except Exception as e:
            answer({"error": err(e)}); return
        imported = sorted(glob.glob(os.path.join(req["dump"], "*after_shardy-xla*.txt")))
        files = sorted(glob.glob(os.path.join(req["dump"], "*after_spmd-partitioning*.txt")))
        if not imported:
            answer({"error": "Shardy did not run (XLA falls back to GSPMD when the module has sharding={...})"})
            return
        with open(imported[-1]) as f:
            imp = f.read()
        with open(files[-1]) as f:
            answer({"imported": imp, "text": f.read()})
    elif op == "sdy_to_hlo":
        # XLA's own conversion of Shardy shardings: one func argument per item, converted to HLO
        args = ", ".join(f"%arg{i}: tensor<{'x'.join(map(str, dims)) + 'x' if dims else ''}f32> "
                         f"{{sdy.sharding = #sdy.sharding{value}}}" for i, (value, dims) in enumerate(req["items"]))
        body = ("module @sdy_check {\n  sdy.mesh @" + req["mesh_name"] + " = " + req["mesh"] + "\n"
                "  func.func public @main(" + args + ") {\n    return\n  }\n}\n")
        try:
            comp = xc._xla.mlir.mlir_module_to_xla_computation(body, use_tuple_args=False, return_tuple=False)
        except Exception as e:
            answer({"error": err(e) + "\n" + body}); return
        found = {}
        for line in comp.as_hlo_text().splitlines():
            m = re.search(r"parameter\((\d+)\).*?, sharding=(\{.*?\})(?:, |$)", line)
            if m:
                found[int(m.group(1))] = m.group(2)
        answer({"shardings": [found.get(i) for i in range(len(req["items"]))]})
    elif op == "run":
        from jax._src.sharding_impls import GSPMDSharding
        n = req["n"]
        try:
            exe, devs = compile_text(req["text"], n, propagate_to_output=req.get("propagate_to_output", False))
        except Exception as e:
            answer({"error": err(e)}); return
        data = np.load(req["inputs"])
        def fix(a, name):
            if a.dtype.kind == "V":   # npz stores ml_dtypes (bfloat16, float8...) as raw void
                import ml_dtypes
                a = a.view(np.dtype(getattr(ml_dtypes, name)))
            return a
        inputs = [fix(data[f"a{i}"], req["dtypes"][i]) for i in range(len(data.files))]
        param_sh = [xc.HloSharding.from_proto(p) for p in exe.get_parameter_shardings()]
        given = req.get("shardings") or [None] * len(inputs)
        if len(param_sh) != len(inputs):
            answer({"error": f"module has {len(param_sh)} parameters, got {len(inputs)} inputs"}); return
        arrays = []
        for x, s, ps in zip(inputs, given, param_sh):
            h = xc.HloSharding.from_string(s) if s else ps
            if h != ps:
                answer({"error": f"input sharding {h} differs from the compiled parameter sharding {ps}"}); return
            sh = GSPMDSharding(tuple(devs), h)
            arrays.append(jax.make_array_from_callback(x.shape, sh, lambda idx, x=x: x[idx]))
        results = exe.execute_sharded(arrays).disassemble_into_single_device_arrays()
        out_sh = [xc.HloSharding.from_proto(p) for p in exe.get_output_shardings()]
        if len(out_sh) == 1 and len(results) > 1:
            elems = out_sh[0].tuple_elements()
            out_sh = list(elems) if elems else out_sh * len(results)
        shape_text = exe.hlo_modules()[0].to_string()
        outs = {}
        mismatch = []
        for k, (per_dev, h) in enumerate(zip(results, out_sh)):
            sample = np.asarray(per_dev[0])
            # global shape: from the replicated case or by tiling (XLA pads evenly; we use the index map)
            gshape = req["out_shapes"][k] if req.get("out_shapes") else None
            if gshape is None:
                dims = h.tile_assignment_dimensions() if h.is_tiled() else []
                rank = sample.ndim
                gshape = [sample.shape[d] * (dims[d] if d < len(dims) else 1) for d in range(rank)]
            gshape = tuple(gshape)
            idx_map = GSPMDSharding(tuple(devs), h).devices_indices_map(gshape)
            full = np.zeros(gshape, dtype=sample.dtype)
            seen = np.zeros(gshape, dtype=bool)
            for arr in per_dev:
                a = np.asarray(arr)
                idx = idx_map[arr.devices().pop() if hasattr(arr, "devices") else arr.device]
                region = full[idx]
                a = a[tuple(slice(0, s) for s in region.shape)]
                prev = seen[idx]
                if prev.any() and not np.array_equal(region[prev], a[prev], equal_nan=True):
                    mismatch.append(k)
                full[idx] = a
                seen[idx] = True
            outs[f"o{k}"] = full
        np.savez(req["outputs"], **outs)
        answer({"n": len(outs), "replica_mismatch": mismatch, "hlo": shape_text,
                "dtypes": [str(outs[f"o{k}"].dtype) for k in range(len(outs))],
                "output_shardings": [str(h) for h in out_sh]})
    else:
        answer({"error": f"unknown op {op}"})


# serve requests, one JSON line each, until stdin closes; every request ends with exactly one MARK line
for line in sys.stdin:
    try:
        handle(json.loads(line))
    except Exception:
        answer({"error": traceback.format_exc()})
'''

_MARK = "@@ORACLE@@"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    flags = env.get("XLA_FLAGS", "")
    flags = " ".join(f for f in flags.split() if not f.startswith(("--xla_force_host_platform_device_count",
                                                                    "--xla_dump")))
    env["XLA_FLAGS"] = (flags + " --xla_force_host_platform_device_count=8").strip()
    env.setdefault("JAX_PLATFORMS", "cpu")
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    return env


class _Died(Exception):
    """The server process ended (an XLA ``CHECK`` abort, a crash) or timed out in the middle of a request."""

    def __init__(self, message: str, items: list):
        super().__init__(message)
        self.items = items


class _Server:
    """One long-lived child interpreter per test process, serving requests one JSON line at a time.

    Importing jax and starting its CPU backend costs ~2 s of CPU per child; the suite makes hundreds of
    oracle requests, so they share a child. Isolation is kept where it matters: a request that aborts or
    hangs the interpreter kills only this child (the caller gets "XLA child died" / "timed out", as with
    a child per request) and the next request starts a fresh one. The child is also replaced after
    :data:`RECYCLE_AFTER` requests (so the memory a long-lived XLA client accumulates stays bounded), when
    the environment it would get changes, and in a forked process."""

    #: requests served by one child before it is replaced
    RECYCLE_AFTER = 64

    def __init__(self):
        self.proc: subprocess.Popen | None = None
        self.lock = threading.Lock()

    def _start(self, env: dict[str, str]) -> None:
        self.err = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")
        self.proc = subprocess.Popen(child_argv(["-c", _CHILD], env), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.err, text=True, env=env)
        self.env, self.pid, self.served = env, os.getpid(), 0
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines), daemon=True).start()

    @staticmethod
    def _pump(stream, lines: queue.Queue) -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)   # end of file: the child exited

    def stop(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.err.close()
        self.proc = None

    def _tail(self) -> str:
        self.err.seek(0)
        return "\n".join(self.err.read().strip().splitlines()[-5:])

    def request(self, request: dict, timeout: float) -> tuple[Any, list]:
        """Send ``request``; return ``(answer, streamed items)``. ``timeout`` (seconds) runs from the
        request and again from each streamed item. Raises :class:`_Died` (with the items received)."""
        with self.lock:
            env = _env()
            if self.proc is not None and self.pid != os.getpid():
                self.proc = None   # a forked copy of the process: that child is its parent's to stop
            if (self.proc is None or self.proc.poll() is not None or self.env != env
                    or self.served >= self.RECYCLE_AFTER):
                self.stop()
                self._start(env)
            self.served += 1
            items: list = []
            try:
                self.proc.stdin.write(json.dumps(request) + "\n")
                self.proc.stdin.flush()
            except OSError:
                pass   # the child is gone: its end of file below says so
            while True:
                try:
                    line = self.lines.get(timeout=timeout)
                except queue.Empty:
                    self.stop()
                    raise _Died(f"XLA child timed out after {timeout:.0f} s", items) from None
                if line is None:
                    code = self.proc.wait()
                    message = f"XLA child died (exit code {code}): {self._tail()}"
                    self.stop()
                    raise _Died(message, items)
                if line.startswith("@@ITEM@@"):
                    items.append(json.loads(line[len("@@ITEM@@"):]))
                elif line.startswith(_MARK):
                    return json.loads(line[len(_MARK):]), items


_SERVER = _Server()
atexit.register(lambda: _SERVER.stop() if _SERVER.proc is not None and _SERVER.pid == os.getpid() else None)


def _child(request: dict, timeout: float = DEFAULT_TIMEOUT) -> Any:
    """Run one request in the oracle's child interpreter; returns the decoded answer or raises OracleError."""
    try:
        return _SERVER.request(request, timeout)[0]
    except _Died as exc:
        raise OracleError(str(exc)) from None


# --------------------------------------------------------------------------------------------------
# parsing
# --------------------------------------------------------------------------------------------------

def parse_hlo(text: str, timeout: float = DEFAULT_TIMEOUT) -> tuple[bool, str]:
    """Does jaxlib's ``hlo_module_from_text`` (ParseAndReturnUnverifiedModule) accept ``text``?

    Returns ``(True, XLA's re-printed module)`` or ``(False, error message)``; a C++ abort in the parser
    counts as ``(False, "XLA child died ...")``.
    """
    return parse_many([text], timeout=timeout)[0]


def parse_many(texts: Sequence[str], timeout: float = DEFAULT_TIMEOUT) -> list[tuple[bool, str]]:
    """:func:`parse_hlo` for many texts in one child process. A text that aborts the interpreter gets
    ``(False, "XLA child died ...")`` and a new child carries on with the texts after it."""
    return _stream("parse", list(texts), timeout)


def _stream(op: str, texts: list[str], timeout: float, **extra) -> list[tuple[bool, str]]:
    """Run a per-text op, results streamed back one line per text (``timeout`` seconds per text): a text
    that kills or hangs the interpreter is reported as such and a fresh child resumes after it."""
    out: list[tuple[bool, str]] = []
    while len(out) < len(texts):
        rest = texts[len(out):]
        try:
            _answer, items = _SERVER.request({"op": op, "texts": rest, **extra}, timeout)
            out.extend((bool(ok), msg) for ok, msg in items)
            if len(items) < len(rest):   # the child answered an error before finishing the texts
                out.extend((False, f"XLA child error: {_answer}") for _ in rest[len(items):])
        except _Died as exc:
            out.extend((bool(ok), msg) for ok, msg in exc.items)
            out.append((False, str(exc) + (" per text" if "timed out" in str(exc) else "")))
    return out


def shardings_from_strings(strings: Sequence[str], others: Sequence[str | None] | None = None,
                           timeout: float = DEFAULT_TIMEOUT) -> list[dict]:
    """What ``xla_client.HloSharding.from_string`` makes of each string.

    Each dict has ``str`` (XLA's print), ``is_tuple`` and, for tuples, ``tuple_elements`` (dicts); for
    non-tuples ``is_replicated``, ``is_maximal``, ``is_manual``, ``is_tiled``, ``is_unknown``,
    ``tile_assignment_dimensions`` (incl. replicate/subgroup dims), ``tile_assignment_devices``
    (iota expanded), ``replicate_on_last_tile_dim``, ``subgroup_types`` (e.g. ``['MANUAL']``),
    ``num_devices``, ``is_tile_assignment_iota``. When ``others[i]`` is a string, ``equal`` says whether
    XLA considers the two shardings equal. A string XLA rejects gives ``{"error": message}``.
    Note XLA's from_string is lenient (pads missing device ids with 0).
    """
    strings = list(strings)
    req = {"op": "shardings", "strings": strings}
    if others is not None:
        req["others"] = list(others)
    return _child(req, timeout=timeout)


# --------------------------------------------------------------------------------------------------
# compiling / partitioning
# --------------------------------------------------------------------------------------------------

def compile_spmd(text: str, num_partitions: int = 8, propagate_to_output: bool = False,
                 timeout: float = DEFAULT_TIMEOUT) -> tuple[bool, str]:
    """Compile ``text`` for ``num_partitions`` CPU devices with GSPMD (the real verifier).

    Returns ``(True, final per-device HLO)`` or ``(False, XLA's error)``; an interpreter abort is
    ``(False, "XLA child died ...")``.
    """
    try:
        ok, msg = _child({"op": "compile", "text": text, "n": num_partitions,
                          "propagate_to_output": propagate_to_output}, timeout=timeout)
        return bool(ok), msg
    except OracleError as exc:
        return False, str(exc)


def compile_many(texts: Sequence[str], num_partitions: int = 8, propagate_to_output: bool = False,
                 timeout: float = DEFAULT_TIMEOUT) -> list[tuple[bool, str]]:
    """:func:`compile_spmd` (parse included) for many texts in one child process: ``(ok, final HLO or
    error)`` per text, in order; an interpreter abort costs only the text that caused it."""
    return _stream("compile_many", list(texts), timeout, n=num_partitions, propagate_to_output=propagate_to_output)


def spmd_partition(text: str, num_partitions: int = 8, propagate_to_output: bool = False,
                   timeout: float = DEFAULT_TIMEOUT, with_final: bool = False):
    """The raw HLO right after XLA's ``spmd-partitioning`` pass (GSPMD) for ``num_partitions`` devices.

    With ``with_final=True`` returns ``(raw, final per-device HLO after all CPU passes)`` (the final
    form has, e.g., XLA's own all-reduce combiner applied). Raises :class:`OracleError` when XLA
    rejects the module.
    """
    with tempfile.TemporaryDirectory(prefix="hloshard-oracle-") as dump:
        res = _child({"op": "partition", "text": text, "n": num_partitions, "dump": dump,
                      "propagate_to_output": propagate_to_output}, timeout=timeout)
    if "error" in res:
        raise OracleError(res["error"])
    return (res["text"], res["final"]) if with_final else res["text"]


def shardy_partition(text: str, num_partitions: int = 8, propagate_to_output: bool = False,
                     timeout: float = DEFAULT_TIMEOUT) -> tuple[str, str]:
    """Compile ``text`` with XLA's **Shardy** partitioner (it reads the ``xla.sdy.meshes`` /
    ``xla.sdy.sharding`` frontend attributes; XLA falls back to GSPMD when the module also carries
    ``sharding={...}``, so pass a text without them). Returns ``(imported, raw)``: the HLO right after
    the ``shardy-xla`` pass (Shardy's shardings converted by XLA to ``sharding={...}``, original names
    in ``metadata={op_name=...}``) and the raw ``after_spmd-partitioning`` HLO. Raises OracleError.
    """
    with tempfile.TemporaryDirectory(prefix="hloshard-oracle-") as dump:
        res = _child({"op": "shardy_partition", "text": text, "n": num_partitions, "dump": dump,
                      "propagate_to_output": propagate_to_output}, timeout=timeout)
    if "error" in res:
        raise OracleError(res["error"])
    return res["imported"], res["text"]


def sdy_to_hlo_shardings(mesh: str, items: Sequence[tuple[str, Sequence[int]]], mesh_name: str = "mesh",
                         timeout: float = DEFAULT_TIMEOUT) -> list[str | None]:
    """XLA's conversion of Shardy shardings to ``HloSharding`` text: ``mesh`` is a mesh body
    (``<["data"=2, "model"=4]>``), each item ``(per-value sharding '<@mesh, [{"data"}, {}]>', tensor dims)``.
    jaxlib converts a StableHLO module with one argument per item (``mlir_module_to_xla_computation``);
    returns each argument's ``sharding={...}`` text (None when XLA prints none). Raises OracleError."""
    res = _child({"op": "sdy_to_hlo", "mesh": mesh, "mesh_name": mesh_name,
                  "items": [[v, list(d)] for v, d in items]}, timeout=timeout)
    if "error" in res:
        raise OracleError(res["error"])
    return res["shardings"]


def run_sharded(text: str, inputs: Sequence[np.ndarray], input_shardings: Sequence[str | None] | None = None,
                num_partitions: int = 8, out_shapes: Sequence[Sequence[int]] | None = None,
                propagate_to_output: bool = False, timeout: float = DEFAULT_TIMEOUT,
                return_hlo: bool = False):
    """Compile ``text`` for ``num_partitions`` devices, execute it on ``inputs`` and gather the outputs.

    ``inputs`` are global arrays, one per entry parameter; each is split by its sharding
    (``input_shardings[i]``, a sharding string, or the parameter's own sharding when None: it must equal
    the compiled parameter sharding). Outputs are reassembled to global arrays with the compiled output
    shardings (a tuple root gives one array per element). ``out_shapes`` gives the global output shapes
    when shards are uneven (otherwise shard shape x tile count). Raises :class:`OracleError` when XLA
    rejects the module, or when replicated copies of an output disagree between devices.
    With ``return_hlo=True`` returns ``(outputs, final per-device HLO text)``.
    """
    with tempfile.TemporaryDirectory(prefix="hloshard-oracle-") as tmp:
        inp = os.path.join(tmp, "in.npz")
        outp = os.path.join(tmp, "out.npz")
        np.savez(inp, **{f"a{i}": np.asarray(x) for i, x in enumerate(inputs)})
        req = {"op": "run", "text": text, "n": num_partitions, "inputs": inp, "outputs": outp,
               "shardings": list(input_shardings) if input_shardings is not None else None,
               "out_shapes": [list(s) for s in out_shapes] if out_shapes is not None else None,
               "propagate_to_output": propagate_to_output,
               "dtypes": [str(np.asarray(x).dtype) for x in inputs]}
        res = _child(req, timeout=timeout)
        if "error" in res:
            raise OracleError(res["error"])
        if res["replica_mismatch"]:
            raise OracleError(f"replicated copies disagree for outputs {res['replica_mismatch']}")
        data = np.load(outp)
        outs = []
        for k in range(res["n"]):
            a = np.array(data[f"o{k}"])
            if a.dtype.kind == "V":
                import ml_dtypes

                a = a.view(np.dtype(getattr(ml_dtypes, res["dtypes"][k])))
            outs.append(a)
        return (outs, res["hlo"]) if return_hlo else outs


# --------------------------------------------------------------------------------------------------
# collectives of an HLO text (small regex parser: a test helper, not the project's parser)
# --------------------------------------------------------------------------------------------------

COLLECTIVE_OPCODES = ("all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute",
                      "collective-broadcast", "ragged-all-to-all")

_INSTR_RE = re.compile(
    r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*(?P<shape>.+?)\s+(?P<opcode>[a-z][a-z0-9\-]*)\((?P<rest>.*)$")


def _split_top(s: str, sep: str = ",") -> list[str]:
    out, depth, cur = [], 0, []
    for ch in s:
        if ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth -= 1
        if ch == sep and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if cur:
        out.append("".join(cur))
    return [x.strip() for x in out]


def _iota_list(dims: list[int], reshape: list[int] | None, perm: list[int] | None) -> np.ndarray:
    n = int(np.prod(dims))
    a = np.arange(n)
    if reshape:
        a = a.reshape(reshape)
        if perm:
            a = a.transpose(perm)
    return a.reshape(dims)


def expand_replica_groups(text: str) -> list[list[int]]:
    """Replica groups as a list of lists from any of XLA's three printed forms.

    ``{{0,1},{2,3}}`` (explicit), ``[2,4]<=[8]`` / ``[4,2]<=[2,4]T(1,0)`` (iota: each row one group) and
    ``mesh['axis_0'=2,'axis_1'=4] {'axis_1'}`` (devices that differ only along the listed mesh axes; the
    mesh's devices are iota-numbered). Raises ValueError for anything else.
    """
    t = text.strip()
    if t.startswith("{"):
        inner = t[1:-1].strip()
        if not inner:
            return []
        groups = []
        for g in _split_top(inner):
            g = g.strip()[1:-1].strip()
            groups.append([int(x) for x in g.split(",")] if g else [])
        return groups
    m = re.fullmatch(r"\[([\d,\s]+)\]<=\[([\d,\s]+)\](?:T\(([\d,\s]+)\))?", t)
    if m:
        dims = [int(x) for x in m.group(1).split(",")]
        rs = [int(x) for x in m.group(2).split(",")]
        perm = [int(x) for x in m.group(3).split(",")] if m.group(3) else None
        arr = _iota_list(dims, rs, perm)
        return arr.reshape(dims[0], -1).tolist()
    m = re.fullmatch(r"mesh\[(.*?)\]\s*(?:,\s*device_ids\s*=\s*\((.*?)\))?\s*\{(.*?)\}", t, re.S)
    if m:
        return _expand_mesh_groups(m.group(1), m.group(2), m.group(3))
    raise ValueError(f"unsupported replica_groups form {text!r}")


def _expand_mesh_groups(axes_text: str, device_ids: str | None, refs_text: str) -> list[list[int]]:
    """Groups of ``mesh[...][, device_ids=(...)] {refs}``: devices varying only along the referenced
    axes or sub-axes (``'y':(pre)size``: the size-``size`` piece of axis y whose more-major pieces
    multiply to ``pre``); every combination of the other (pieces of) axes is one group, in row-major
    order. ``device_ids`` is an explicit list or an iota ``[dims]T(perm)``; absent means 0..N-1."""
    names, sizes = [], []
    for part in _split_top(axes_text):
        am = re.fullmatch(r"'([^']+)'\s*=\s*(\d+)", part)
        if not am:
            raise ValueError(f"unsupported mesh replica-group axis {part!r}")
        names.append(am.group(1))
        sizes.append(int(am.group(2)))
    n = int(np.prod(sizes))
    if device_ids is None or not device_ids.strip():
        ids = np.arange(n)
    else:
        dm = re.fullmatch(r"\s*\[([\d,\s]+)\](?:T\(([\d,\s]+)\))?\s*", device_ids)
        if dm:
            dims = [int(x) for x in dm.group(1).split(",")]
            ids = np.arange(int(np.prod(dims))).reshape(dims)
            if dm.group(2):
                ids = ids.transpose([int(x) for x in dm.group(2).split(",")])
            ids = ids.reshape(-1)
        else:
            ids = np.array([int(x) for x in device_ids.split(",")])
    if ids.size != n:
        raise ValueError(f"mesh replica groups: {ids.size} device ids for {n} devices")
    # split every axis into (pre, size, rest) pieces where a sub-axis is referenced
    pieces: list[list[int]] = [[sz] for sz in sizes]     # piece sizes per axis
    refs = []                                            # (axis, piece index)
    for ref in [x.strip() for x in _split_top(refs_text) if x.strip()]:
        rm = re.fullmatch(r"(?:'([^']+)'|(\d+))(?::\((\d+)\)(\d+))?", ref)
        if not rm:
            raise ValueError(f"unsupported mesh replica-group axis selector {ref!r}")
        ax = names.index(rm.group(1)) if rm.group(1) is not None else int(rm.group(2))
        if rm.group(3) is None:
            refs.append((ax, None))
            continue
        pre, size = int(rm.group(3)), int(rm.group(4))
        if len(pieces[ax]) != 1 or sizes[ax] % (pre * size):
            raise ValueError(f"unsupported sub-axis {ref!r}")
        pieces[ax] = [pre, size, sizes[ax] // (pre * size)]
        refs.append((ax, 1))
    flat_sizes, index = [], {}
    for ax, ps in enumerate(pieces):
        for k, sz in enumerate(ps):
            index[(ax, k)] = len(flat_sizes)
            flat_sizes.append(sz)
    arr = ids.reshape(flat_sizes)
    varying = []
    for ax, k in refs:
        if k is None:
            varying += [index[(ax, j)] for j in range(len(pieces[ax]))]
        else:
            varying.append(index[(ax, k)])
    rest = [d for d in range(len(flat_sizes)) if d not in varying]
    size = int(np.prod([flat_sizes[d] for d in varying])) if varying else 1
    return arr.transpose(rest + varying).reshape(-1, size).tolist()


def _attr(rest: str, key: str) -> str | None:
    """Value text of ``key=...`` in an instruction's attribute list (top-level comma split)."""
    # drop operand list: rest starts right after 'opcode('
    depth, i = 1, 0
    while i < len(rest) and depth:
        if rest[i] == "(":
            depth += 1
        elif rest[i] == ")":
            depth -= 1
        i += 1
    parts = _split_top(rest[i:].lstrip(", "))
    for k, part in enumerate(parts):
        if part.startswith(key + "="):
            value = part[len(key) + 1:]
            # mesh replica groups: "mesh[...], device_ids=(...) {...}" spans a top-level comma
            if value.startswith("mesh[") and "{" not in value and k + 1 < len(parts) \
                    and parts[k + 1].startswith("device_ids="):
                value += ", " + parts[k + 1]
            return value
    return None


def collectives(text: str) -> list[dict]:
    """The collectives of an HLO text, in text order.

    Each dict: ``name``, ``kind`` (opcode without ``-start``), ``shape`` (the result shape text),
    ``replica_groups`` (list of lists, or None when absent), ``dimensions`` (list or None),
    ``channel_id`` (int or None), ``source_target_pairs`` (list of pairs, collective-permute only).
    """
    out = []
    for line in text.splitlines():
        m = _INSTR_RE.match(line)
        if not m:
            continue
        op = m.group("opcode")
        kind = op[:-6] if op.endswith("-start") else op
        if kind not in COLLECTIVE_OPCODES:
            continue
        rest = m.group("rest")
        rg = _attr(rest, "replica_groups")
        dims = _attr(rest, "dimensions")
        ch = _attr(rest, "channel_id")
        stp = _attr(rest, "source_target_pairs")
        out.append({
            "name": m.group("name"),
            "kind": kind,
            "shape": m.group("shape").strip(),
            "replica_groups": expand_replica_groups(rg) if rg is not None else None,
            "dimensions": [int(x) for x in dims.strip("{}").split(",") if x.strip()] if dims is not None else None,
            "channel_id": int(ch) if ch is not None else None,
            "source_target_pairs": expand_replica_groups(stp) if stp is not None else None,
        })
    return out


def strip_variadic_collective_shardings(text: str) -> str:
    """Drop ``sharding={...}`` from collectives with a tuple result (variadic all-gather / all-reduce /
    reduce-scatter), leaving every other line alone.

    Why: jaxlib 0.10.2's HLO -> StableHLO -> HLO compile path fails on a tuple sharding on a multi-result
    collective (``error: Failed to get shape`` at ``func.return``), although XLA itself writes such
    shardings. The get-tuple-element users keep their shardings, so the partitioner sees the same
    manual region; only the oracle's compile input is changed, never what hloshard writes.
    """
    out = []
    for line in text.splitlines(keepends=True):
        m = _INSTR_RE.match(line)
        if m and m.group("opcode") in COLLECTIVE_OPCODES and m.group("shape").lstrip().startswith("("):
            k = line.find(", sharding={")
            if k >= 0:
                depth, j = 0, k + len(", sharding=")
                while j < len(line):
                    if line[j] == "{":
                        depth += 1
                    elif line[j] == "}":
                        depth -= 1
                        if depth == 0:
                            break
                    j += 1
                line = line[:k] + line[j + 1:]
        out.append(line)
    return "".join(out)
