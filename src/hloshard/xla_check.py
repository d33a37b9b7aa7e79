"""Ask real XLA (jaxlib's SPMD partitioner) which collectives it inserts, in a child process.

Used by ``hloshard explain-reshape --xla`` to put XLA's own answer beside our plan. jax is **never**
imported in the calling process: :func:`spmd_collectives` starts ``python -m hloshard.xla_check``,
which sets ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` before importing jax, parses each
HLO text with ``hlo_module_from_text``, converts it to StableHLO, compiles it for N partitions with
the GSPMD partitioner (Shardy off: hand-written ``sharding={...}`` is GSPMD's input) and reads the HLO
dumped **right after the ``spmd-partitioning`` pass** (the raw partitioner output, before the CPU
backend rewrites all-to-all into tuples or combines all-reduces; see
``../shared/reference/xla_oracle.md`` section 3). A crash in XLA (C++ CHECK) kills only the child.

Public API::

    jax_available() -> bool                          # is jax importable (checked in a child)
    require_jax()                                    # InputError naming the 'xla' extra when not
    spmd_collectives(texts, num_partitions, propagated=False) -> list[XlaResult]
    parse_collectives(hlo_text) -> list[XlaCollective]   # pure text scan, no jax
    expand_replica_groups(text) -> list[list[int]]
    child_argv(args, env=None) -> list[str]          # argv of every jax child: plain, or through the opt-in
                                                     # fork server (HLOSHARD_XLA_FORKSERVER=1; section below)

Raises :class:`hloshard.errors.InputError` when jax is missing or the child fails as a whole;
a per-module compile error is reported in ``XlaResult.error``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import time
from typing import Any

import numpy as np

from .errors import InputError, child_failure

# jax / jaxlib are optional (the ``jax`` extra): the CLI must run without them, so they are imported
# inside the functions that need them, never at module level (tests/test_import_contracts.py).

COLLECTIVE_OPCODES = ("all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute",
                      "all-gather-start", "all-reduce-start", "collective-permute-start",
                      "collective-broadcast", "ragged-all-to-all")


@dataclasses.dataclass
class XlaCollective:
    """One collective in partitioned HLO: opcode, result shape text, ``dimensions``, expanded
    ``replica_groups`` (list of lists, [] when absent) and ``source_target_pairs``."""

    kind: str
    shape: str
    dims: tuple[int, ...]
    replica_groups: list[list[int]]
    source_target_pairs: list[tuple[int, int]]
    line: str
    op_name: str | None = None
    computation: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "shape": self.shape, "dims": list(self.dims), "op_name": self.op_name,
                "computation": self.computation,
                "replica_groups": [list(g) for g in self.replica_groups],
                "source_target_pairs": [list(p) for p in self.source_target_pairs]}


@dataclasses.dataclass
class XlaResult:
    """XLA's answer for one module: the raw partitioned text, its collectives, or an error."""

    partitioned: str | None
    collectives: list[XlaCollective]
    error: str | None = None
    #: the partitioner ran but a later compile pass failed (e.g. the CPU backend rejects the module)
    compile_error: str | None = None
    #: GSPMD's ``after_sharding-propagation`` module (only when asked for with ``propagated=True``)
    propagated: str | None = None
    #: where ``error`` arose: 'parse' (XLA's HLO parser rejected the text), 'compile', or None (no error,
    #: or the child crashed)
    error_stage: str | None = None
    has_dynamic_slice: bool = False
    dynamic_slices: list[tuple[str, str | None]] = dataclasses.field(default_factory=list)

    def for_op(self, op_name: str) -> tuple[list[XlaCollective], bool]:
        """The collectives (and whether a data dynamic-slice exists) XLA created for the instruction
        whose ``metadata={op_name=...}`` is ``op_name``: lets one module hold many cases."""
        cols = [c for c in self.collectives if c.op_name == op_name]
        ds = any(o == op_name for _, o in self.dynamic_slices)
        return cols, ds


# --------------------------------------------------------------------------------------------
# text scanning (no jax)

_COMPUTATION = re.compile(r"^(?:ENTRY\s+)?%?(?P<name>[\w.\-]+)\s*(?:\(.*\)\s*->\s*.*)?\{\s*$")
_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*(?P<shape>.+?)\s+(?P<op>[a-z][a-z0-9\-]*)\((?P<rest>.*)$")


def _balanced(text: str, start: int) -> str:
    """The ``{...}`` group starting at ``text[start] == '{'`` (inclusive)."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start:i + 1]
    return text[start:]


def _iota_groups(dims: list[int], reshape: list[int], perm: list[int] | None) -> list[list[int]]:
    arr = np.arange(int(np.prod(reshape))).reshape(reshape)
    if perm is not None:
        arr = arr.transpose(perm)
    return arr.reshape(dims).tolist()


def expand_replica_groups(text: str) -> list[list[int]]:
    """Expand the three replica-group syntaxes XLA prints into explicit groups:

    * ``{{0,1},{2,3}}`` (explicit),
    * ``[2,4]<=[8]`` / ``[4,2]<=[2,4]T(1,0)`` (iota: rows are groups),
    * ``mesh['a'=2,'b'=4] {'b'}`` (devices that differ only along the named axes; optional
      ``device_ids=...`` not supported: raises ValueError).
    """
    text = text.strip()
    if text.startswith("{"):
        inner = text[1:-1].strip()
        if not inner:
            return []
        return [[int(x) for x in g.split(",") if x.strip()] for g in re.findall(r"\{([^{}]*)\}", inner)]
    m = re.match(r"\[([\d,]+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?", text)
    if m:
        dims = [int(x) for x in m.group(1).split(",")]
        reshape = [int(x) for x in m.group(2).split(",")]
        perm = [int(x) for x in m.group(3).split(",")] if m.group(3) else None
        return _iota_groups(dims, reshape, perm)
    m = re.match(r"mesh\[(.*?)\]\s*(?:,\s*device_ids=\((.*?)\))?\s*\{(.*?)\}", text)
    if m:
        axes = re.findall(r"'([^']*)'\s*=\s*(\d+)", m.group(1))
        names = [a for a, _ in axes]
        sizes = [int(s) for _, s in axes]
        total = int(np.prod(sizes)) if sizes else 1
        ids = np.arange(total)
        if m.group(2):
            d = m.group(2).strip()
            im = re.match(r"\[([\d,]+)\](?:T\(([\d,]+)\))?$", d)
            if im:
                shp = [int(x) for x in im.group(1).split(",")]
                arr = np.arange(total).reshape(shp)
                if im.group(2):
                    arr = arr.transpose([int(x) for x in im.group(2).split(",")])
                ids = arr.reshape(-1)
            else:
                ids = np.array([int(x) for x in re.findall(r"\d+", d)])
        # split every axis into (major, chosen sub-axis, minor) factors
        chosen = re.findall(r"'([^']*)'(?::\((\d+)\)(\d+))?", m.group(3))
        factors: list[int] = []
        pick: list[int] = []
        for i, (name, size) in enumerate(zip(names, sizes)):
            subs = [(int(p), int(s)) for n2, p, s in chosen if n2 == name and p]
            whole = any(n2 == name and not p for n2, p, s in chosen)
            if subs:
                pre, sz = subs[0]
                factors += [pre, sz, size // (pre * sz)]
                pick.append(len(factors) - 2)
            else:
                factors.append(size)
                if whole:
                    pick.append(len(factors) - 1)
        arr = ids.reshape(factors)
        rest = [i for i in range(len(factors)) if i not in pick]
        arr = arr.transpose(rest + pick)
        k = int(np.prod([factors[i] for i in pick])) if pick else 1
        return arr.reshape(-1, k).tolist()
    raise ValueError(f"unrecognised replica_groups {text!r}")


def _attr(rest: str, key: str) -> str | None:
    m = re.search(r"(?:^|[\s,])" + re.escape(key) + r"=", rest)
    if not m:
        return None
    i = m.end()
    if rest[i] == "{":
        return _balanced(rest, i)
    if rest.startswith("mesh[", i):
        j = rest.index("]", i)
        k = rest.index("{", j)
        return rest[i:k] + _balanced(rest, k)
    m2 = re.match(r"\[[\d,]*\]<=\[[\d,]*\](?:T\([\d,]*\))?|[^\s,]+", rest[i:])
    return m2.group(0) if m2 else None


def parse_collectives(hlo_text: str) -> list[XlaCollective]:
    """The collectives in ``hlo_text`` (entry and other computations), in text order; each records the
    computation it is in (``computation``) and its ``metadata`` ``op_name``."""
    out: list[XlaCollective] = []
    comp = None
    for line in hlo_text.splitlines():
        if line[:1] not in (" ", "\t", "") and not line.startswith("HloModule"):
            cm = _COMPUTATION.match(line)
            if cm:
                comp = cm.group("name")
                continue
        m = _INSTR.match(line)
        if not m or m.group("op") not in COLLECTIVE_OPCODES:
            continue
        rest = m.group("rest")
        dims_text = _attr(rest, "dimensions")
        dims = tuple(int(x) for x in re.findall(r"\d+", dims_text)) if dims_text else ()
        rg = _attr(rest, "replica_groups")
        groups = expand_replica_groups(rg) if rg else []
        stp = _attr(rest, "source_target_pairs")
        pairs = [tuple(int(x) for x in p.split(",")) for p in re.findall(r"\{(\d+,\d+)\}", stp)] if stp else []
        out.append(XlaCollective(kind=m.group("op").replace("-start", ""), shape=m.group("shape"),
                                 dims=dims, replica_groups=groups, source_target_pairs=pairs,
                                 line=line.strip(), op_name=_op_name(rest), computation=comp))
    return out


def _op_name(rest: str) -> str | None:
    m = re.search(r'op_name="([^"]*)"', rest)
    return m.group(1) if m else None


def data_dynamic_slices(hlo_text: str) -> list[tuple[str, str | None]]:
    """(result shape, op_name) of every dynamic-slice that slices data: the partitioner's own
    one-element offset-table lookups (``s32[1] dynamic-slice(constant, partition-id)``) are skipped."""
    out = []
    for line in hlo_text.splitlines():
        m = _INSTR.match(line)
        if not m or m.group("op") != "dynamic-slice":
            continue
        shape = m.group("shape")
        if re.fullmatch(r"[su](8|16|32|64)\[1?\](\{[^}]*\})?", shape.strip()):
            continue
        out.append((shape, _op_name(m.group("rest"))))
    return out


# --------------------------------------------------------------------------------------------
# the child process (jax imported only there)

def _child_main() -> int:  # pragma: no cover - runs in the subprocess
    request = json.load(sys.stdin)
    n = int(request["num_partitions"])
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={max(n, 1)}"
    import glob
    import tempfile

    propagated = bool(request.get("propagated"))
    pass_re = "sharding-propagation|spmd-partitioning" if propagated else "spmd-partitioning"
    results = []
    for text in request["texts"]:
        progress: list = []
        try:
            with tempfile.TemporaryDirectory(prefix="hloshard-xla-") as dump:
                error = None
                try:
                    compile_with_dump(text, n, dump, pass_re, propagate_outputs=propagated, progress=progress)
                except Exception as exc:  # a later pass may fail after the partitioner ran
                    if not progress:  # XLA's parser rejected the text
                        raise
                    error = f"{type(exc).__name__}: {exc}".splitlines()[0]
                files = sorted(glob.glob(os.path.join(dump, "*after_spmd-partitioning*.txt")))
                raw = open(files[0]).read() if files else None
                props = sorted(glob.glob(os.path.join(dump, "*after_sharding-propagation*.txt")))
                prop = open(props[-1]).read() if props and propagated else None
                if raw is None:
                    results.append({"partitioned": None, "error": error or "no spmd-partitioning dump",
                                    "propagated": prop, "stage": "compile"})
                else:
                    results.append({"partitioned": raw, "error": None, "compile_error": error, "propagated": prop})
        except Exception as exc:  # one bad module must not hide the others
            results.append({"partitioned": None, "error": f"{type(exc).__name__}: {exc}".splitlines()[0],
                            "stage": "compile" if progress else "parse"})
    json.dump({"results": results}, sys.stdout)
    return 0


def compile_with_dump(text: str, n: int, dump: str, pass_re: str, propagate_outputs: bool = False,
                      progress: list | None = None):  # pragma: no cover - child side
    """Child side (imports jax): parse HLO ``text`` with jaxlib, convert it to StableHLO and compile it
    for ``n`` partitions with GSPMD (Shardy off; no propagation to parameters; to outputs only with
    ``propagate_outputs``, as jax compiles a jit without out_shardings; CPU backend optimisations off),
    dumping the HLO around the passes matching ``pass_re`` into ``dump``.  ``progress``: when given,
    ``'parsed'`` is appended once XLA's parser accepted the text (tells a parse error from a later one).
    Returns the loaded executable (``hloshard.xla_memory`` reads its memory statistics)."""
    import jax
    import jax.extend  # noqa: F401
    import jax.extend.backend
    import jax.extend.mlir
    from jax._src.lib import xla_client as xc

    backend = jax.extend.backend.get_backend("cpu")
    mod = xc.hlo.hlo_module_from_text(text)
    if progress is not None:
        progress.append("parsed")
    mlir = jax.extend.mlir.hlo_to_stablehlo(mod.as_serialized_hlo_module_proto())
    opts = jax.extend.backend.get_compile_options(num_replicas=1, num_partitions=n,
                                                  device_assignment=np.arange(n).reshape(1, n), backend=backend)
    b = opts.executable_build_options
    b.use_shardy_partitioner = False
    b.allow_spmd_sharding_propagation_to_output = [bool(propagate_outputs)]
    b.allow_spmd_sharding_propagation_to_parameters = [False]
    b.debug_options.xla_dump_to = dump
    b.debug_options.xla_dump_hlo_pass_re = pass_re
    b.debug_options.xla_backend_optimization_level = 0
    b.debug_options.xla_llvm_disable_expensive_passes = True
    return backend.compile_and_load(mlir, xc.DeviceList(tuple(backend.devices()[:n])), opts)


def _python() -> str:
    return sys.executable or "python3"


def jax_available() -> bool:
    """True when ``import jax`` works for this interpreter (checked in a child, cached)."""
    global _JAX_OK
    if _JAX_OK is None:
        try:
            r = subprocess.run([_python(), "-c", "import jax, jaxlib, jax.extend"], capture_output=True,
                               timeout=120)
            _JAX_OK = r.returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            _JAX_OK = False
    return _JAX_OK


_JAX_OK: bool | None = None

#: the error every ``--xla`` option gives when jax cannot be imported
NO_JAX_MESSAGE = "--xla needs jax and jaxlib (pip install 'hloshard[xla]')"  # = run_jax_child's for --xla


def require_jax() -> None:
    """Raise InputError (exit 2) naming the ``xla`` extra when :func:`jax_available` is False."""
    if not jax_available():
        raise InputError(NO_JAX_MESSAGE)


def spmd_collectives(texts: list[str], num_partitions: int, timeout: float = 300.0,
                     propagated: bool = False, crash_as_error: bool = False) -> list[XlaResult]:
    """Partition each HLO module text with XLA for ``num_partitions`` devices, in one child process.

    Returns one :class:`XlaResult` per text (same order), with the raw after-spmd-partitioning HLO and
    its collectives; with ``propagated`` also GSPMD's after-sharding-propagation module (every
    instruction annotated: XLA's own plan for a module that annotates only some), and GSPMD may then
    choose the shardings of unannotated outputs as jax lets it (else they are replicated).  Raises InputError
    when jax cannot be imported, or when the child dies on a single text (e.g. an XLA CHECK failure
    on malformed input); when it dies on a batch, each text is retried in its own child and a text that
    kills XLA gets ``XlaResult.error`` ("XLA crashed: ...") instead (also for a single text with
    ``crash_as_error``).
    """
    if not texts:
        return []
    try:
        return _spmd_batch(texts, num_partitions, timeout, propagated)
    except InputError as exc:
        if (len(texts) == 1 and not crash_as_error) or str(exc) == NO_JAX_MESSAGE:
            raise
    out = []
    for text in texts:
        try:
            out += _spmd_batch([text], num_partitions, timeout, propagated)
        except InputError as exc:
            if str(exc) == NO_JAX_MESSAGE:
                raise
            out.append(XlaResult(partitioned=None, collectives=[], error=f"XLA crashed: {exc}"))
    return out


def _spmd_batch(texts: list[str], num_partitions: int, timeout: float, propagated: bool) -> list[XlaResult]:
    """One child process for all of ``texts`` (see :func:`spmd_collectives`)."""
    data = run_jax_child("hloshard.xla_check", {"num_partitions": num_partitions, "texts": list(texts),
                                                "propagated": bool(propagated)},
                         num_partitions, timeout, what="XLA check", flag="--xla")
    out = []
    for r in data["results"]:
        text = r.get("partitioned")
        dss = data_dynamic_slices(text) if text else []
        out.append(XlaResult(partitioned=text, collectives=parse_collectives(text) if text else [],
                             error=r.get("error"), compile_error=r.get("compile_error"),
                             propagated=r.get("propagated"), error_stage=r.get("stage"),
                             has_dynamic_slice=bool(dss), dynamic_slices=dss))
    return out


def start_jax_child(module: str, num_devices: int) -> subprocess.Popen:
    """Start ``python -m MODULE`` now, for :func:`run_jax_child` to give it its payload later (``child=``):
    a child that imports jax before it reads its stdin (``hloshard.partition_specs``) is then ready when
    the payload comes -- its start (1.8 s of CPU, 4.3 s wall at load 6 on the 2-core machine, round 14) runs
    beside the caller's own work.  The caller ends it (``kill``) when it gives it no payload.  With
    ``HLOSHARD_XLA_FORKSERVER=1`` the process is a fork of a warm server (:func:`child_argv`)."""
    env = _child_env(num_devices)
    return subprocess.Popen(child_argv(["-m", module], env), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def _child_env(num_devices: int) -> dict:
    env = dict(os.environ)
    env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={max(int(num_devices), 1)}"
    env.setdefault("JAX_PLATFORMS", "cpu")
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    return env


def run_jax_child(module: str, payload: dict, num_devices: int, timeout: float, what: str,
                  flag: str, child: subprocess.Popen | None = None) -> dict:
    """Run ``python -m MODULE`` with ``payload`` as JSON on stdin and return its JSON stdout.

    The child sees ``num_devices`` fake CPU devices (``XLA_FLAGS`` set before it imports jax); jax is
    never imported here.  ``child``: that process already started (:func:`start_jax_child`, the same
    module and device count), given the payload instead of starting one.  Raises InputError naming
    ``flag`` and the ``xla`` extra when jax is missing, ``what`` and the last stderr line when the child
    fails, or a time-out after ``timeout`` seconds.
    """
    try:
        if child is None:
            env = _child_env(num_devices)
            proc = subprocess.run(child_argv(["-m", module], env), input=json.dumps(payload), capture_output=True,
                                  text=True, timeout=timeout, env=env)
        else:
            try:
                out, err = child.communicate(json.dumps(payload), timeout=timeout)
            except subprocess.TimeoutExpired:
                child.kill()
                child.communicate()
                raise
            proc = subprocess.CompletedProcess(child.args, child.returncode, out, err)
    except subprocess.TimeoutExpired:
        raise InputError(f"{what} timed out after {timeout:.0f} s") from None
    if proc.returncode != 0:
        tail = (proc.stderr or "").strip().splitlines()
        if any("No module named 'jax" in t for t in tail):
            raise InputError(f"{flag} needs jax and jaxlib (pip install 'hloshard[xla]')")
        msg = child_failure(proc.stderr, proc.returncode)   # a C++ CHECK's own line, not its stack (errors.py)
        raise InputError(f"{what} failed: {msg}")
    return json.loads(proc.stdout)


# --------------------------------------------------------------------------------------------
# the fork server: jax imported once, each child a fork of it (opt-in, HLOSHARD_XLA_FORKSERVER=1)
#
# Every jax child of this package (and a script run through :func:`child_argv`) starts a fresh Python that
# imports jax: ~1.3 CPU s (import jax, 2-core machine, round 30) plus ~0.4 s for hloshard's XLA modules
# (PYTHONDONTWRITEBYTECODE=1: compiled from source each time), while the work of a test-sized child is often
# less.  With ``HLOSHARD_XLA_FORKSERVER=1`` such a child is instead a fork of a server process that has
# imported jax and those modules once and not started any backend (jax's backends are created in the
# fork, after ``XLA_FLAGS`` is set there: each fork sees its own device count).  The process the caller
# holds is a small proxy (``python -S``, stdlib only) that hands its stdin / stdout / stderr to the
# server, which forks a worker onto them; the proxy exits with the worker's status (a signal as that
# signal) and a proxy killed ends its worker.  While the server is starting (its lock held, its socket not yet
# there) the proxy waits for it rather than import jax itself; when no server answers, the proxy execs the plain
# ``python -m MODULE`` (or ``-c CODE``) itself: the child is the same program either way.  The server
# ends after :data:`FORKSERVER_IDLE_S` seconds without a child; it is one per interpreter, PYTHONPATH,
# source tree (the mtimes of hloshard's files: an edited file means a new server) and user.

#: environment variable that routes jax children through the fork server when "1" (and never when "0"; unset or
#: empty: the process's default, :func:`set_forkserver_default`)
FORKSERVER_ENV = "HLOSHARD_XLA_FORKSERVER"
#: whether a child goes through the fork server when ``HLOSHARD_XLA_FORKSERVER`` is unset (:func:`set_forkserver_default`)
_FORKSERVER_DEFAULT = False
#: seconds the fork server waits without any child before it exits
FORKSERVER_IDLE_S = 120.0
#: what the fork server imports before its first fork (hloshard's jax-child modules and their imports)
_WARM_MODULES = ("numpy", "jax", "jax.extend", "jax.extend.backend", "jax.extend.mlir", "jax._src.lib",
                 "hloshard.xla_check", "hloshard.xla_cost", "hloshard.xla_memory", "hloshard.partition_specs",
                 "hloshard.stablehlo", "ctypes", "runpy", "types", "traceback", "warnings")

# the proxy: stdlib only, run with ``python -S``; argv: SOCKET, then the arguments ``python`` would get
_PROXY = r"""
import json, os, signal, socket, struct, sys, time
path, args = sys.argv[1], sys.argv[2:]
worker, pending = None, []
def forward(sig, frame):
    if worker is None:
        pending.append(sig)   # before the worker exists: given to it once it does
        return
    try:
        os.kill(worker, sig)
    except OSError:
        pass
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
def plain():
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_DFL)
    for sig in pending:
        os.kill(os.getpid(), sig)
    os.execv(sys.executable, [sys.executable] + args)
for sig in SIGNALS:
    signal.signal(sig, forward)
def starting():   # the server's lock is held: it is up, or importing jax (this child waits rather than import it too)
    import fcntl
    try:
        fd = os.open(path + ".lock", os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False
deadline = time.monotonic() + 120
while True:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        break
    except OSError:
        s.close()
        if time.monotonic() > deadline or not starting():
            plain()
        time.sleep(0.05)
try:
    msg = json.dumps({"args": args, "env": dict(os.environ), "cwd": os.getcwd()}).encode()
    socket.send_fds(s, [struct.pack("!Q", len(msg))], [0, 1, 2])
    s.sendall(msg)
    f = s.makefile("rb")
    line = f.readline()
except OSError:
    plain()
if not line.startswith(b"pid "):
    plain()
worker = int(line.split()[1])
for sig in pending:
    forward(sig, None)
line = f.readline()
if not line.startswith(b"exit "):
    os._exit(70)
code = int(line.split()[1])
if code < 0:
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
os._exit(code)
"""


def set_forkserver_default(on: bool) -> None:
    """Route this process's jax children through the fork server (``on``) or not when its environment leaves
    ``HLOSHARD_XLA_FORKSERVER`` unset (``"1"`` / ``"0"`` there always win).  ``import hloshard.jax`` turns it on:
    one :func:`hloshard.jax.auto_shard` call starts three jax children (the memory guard's baselines), each a
    fresh Python importing jax (~1.8 CPU-s apiece, round 14) while the user's process already has jax; through
    the server the call pays one jax start (keras-hub's 4-layer Gemma: 6.26 -> 3.62 CPU-s of children, round 37).
    A server started by default ends with the process that started it (as soon as it has no child left), or after
    :data:`FORKSERVER_IDLE_S` seconds without a child.  Raises nothing."""
    global _FORKSERVER_DEFAULT
    _FORKSERVER_DEFAULT = bool(on)


def forkserver_on(env: dict | None = None) -> bool:
    """Whether a child started in the environment ``env`` (None: this process's) goes through the fork server:
    ``HLOSHARD_XLA_FORKSERVER`` is ``"1"``, or it is unset (or empty) and :func:`set_forkserver_default` turned
    the default on."""
    flag = (os.environ if env is None else env).get(FORKSERVER_ENV) or ""
    return flag == "1" or (flag == "" and _FORKSERVER_DEFAULT)


#: the longest Unix socket path ``bind`` takes on Linux (``sun_path``: 108 bytes with its NUL), less a margin
_SOCKET_PATH_MAX = 100


def _forkserver_path(env: dict) -> str:
    """The fork server's socket for this interpreter, source tree, user and the child environment ``env``'s
    PYTHONPATH and jax settings (``JAX_*``, ``TF_CPP_MIN_LOG_LEVEL``: read when jax is imported), in the temporary
    folder -- ``/tmp`` where that folder's path is too long for a socket (pytest-xdist's ``tmp_path`` is: the
    server failed to bind and every child ran plain)."""
    import hashlib
    import pathlib
    import tempfile

    here = pathlib.Path(__file__).resolve().parent
    h = hashlib.sha256()
    for part in (os.path.realpath(_python()), _python(), str(here)):
        h.update(part.encode() + b"\0")
    for k in sorted(env):
        if k.startswith("JAX_") or k == "TF_CPP_MIN_LOG_LEVEL":
            h.update(f"{k}={env[k]}\0".encode())
    h.update(f"PYTHONPATH={_python_path(env)}\0".encode())
    for f in sorted(here.rglob("*.py")):
        h.update(f"{f}:{f.stat().st_mtime_ns}\0".encode())
    folder = os.path.join(tempfile.gettempdir(), f"hloshard-xla-{os.getuid()}")
    if len(os.path.join(folder, "0" * 20 + ".sock").encode()) > _SOCKET_PATH_MAX:
        folder = os.path.join("/tmp", f"hloshard-xla-{os.getuid()}")   # a long TMPDIR: the server could not bind
    os.makedirs(folder, mode=0o700, exist_ok=True)
    return os.path.join(folder, h.hexdigest()[:20] + ".sock")


def _python_path(env: dict) -> str:
    """``env``'s PYTHONPATH without empty entries (the current folder, which is also ``sys.path[0]`` of every
    ``python -c`` / ``-m`` child) and repeats (a later one finds nothing the first did not)."""
    seen: list[str] = []
    for part in env.get("PYTHONPATH", "").split(os.pathsep):
        if part and part not in seen:
            seen.append(part)
    return os.pathsep.join(seen)


_FORKSERVER_STARTED: dict = {}
#: the servers this process started (held, so that their Popen is not collected while they run)
_FORKSERVER_PROCS: dict = {}


def _forkserver_alive(path: str) -> bool:
    """Whether a fork server holds ``path``'s lock (it holds it for its whole life)."""
    import fcntl

    try:
        fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return True   # cannot tell: the proxy falls back by itself
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)   # releases the lock when it was taken
    return False


def child_argv(args: list[str], env: dict | None = None) -> list[str]:
    """The argv of a child running ``python ARGS`` (``["-m", module, ...]``, ``["-c", code, ...]`` or
    ``[script, ...]``) in the
    environment ``env`` (None: this process's): that, or when :func:`forkserver_on` (``HLOSHARD_XLA_FORKSERVER=1``
    in ``env``, or unset there with :func:`set_forkserver_default` on) the fork server's proxy for it (the server
    started first when none is alive; the child is then the plain one until it listens; a server started by
    the default ends with this process).  Its output, exit status and signals are those of ``python ARGS``.
    Raises nothing."""
    env = os.environ if env is None else env
    if not forkserver_on(env):
        return [_python(), *args]
    owner = 0 if env.get(FORKSERVER_ENV) == "1" else os.getpid()
    try:
        path = _forkserver_path(env)
        now = time.monotonic()
        if not _forkserver_alive(path) and now - _FORKSERVER_STARTED.get(path, -1e9) > 10.0:
            _FORKSERVER_STARTED[path] = now   # (one start per 10 s: a server that cannot start is not retried at once)
            server_env = {k: v for k, v in env.items() if k not in ("XLA_FLAGS", FORKSERVER_ENV, "PYTHONPATH")}
            if _python_path(env):
                server_env["PYTHONPATH"] = _python_path(env)
            server = subprocess.Popen([_python(), "-c", _SERVER_START, path, __file__, str(owner)],
                                      stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      start_new_session=True, env=server_env, cwd="/")
            _FORKSERVER_PROCS[path] = server
            # until it holds its lock (a Python start, ~0.05 s idle, seconds on a loaded machine), so that this
            # child's proxy waits for it rather than importing jax itself; a server that exits ends the wait
            while server.poll() is None and not _forkserver_alive(path) and time.monotonic() - now < 10.0:
                time.sleep(0.05)
    except OSError:
        return [_python(), *args]
    return [_python(), "-S", "-c", _PROXY, path, *args]


#: the server's command: it takes ``path``'s lock before it imports this package, whose import takes seconds on a
#: loaded machine, so that a proxy started meanwhile finds the lock held and waits for the server's socket; a
#: caller's or proxy's look at the lock holds it for moments (longer where the looker is descheduled), so only a lock
#: held for 2 s on end is another server's, and this one exits 0
_SERVER_START = (
    "import fcntl, os, sys, time\n"
    "lock = os.open(sys.argv[1] + '.lock', os.O_RDWR | os.O_CREAT, 0o600)\n"
    "give_up = time.monotonic() + 2.0\n"
    "while True:\n"
    "    try:\n"
    "        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
    "        break\n"
    "    except OSError:\n"
    "        if time.monotonic() > give_up:\n"
    "            sys.exit(0)\n"
    "        time.sleep(0.02)\n"
    "from hloshard.xla_check import forkserver_main\n"
    "sys.exit(forkserver_main(sys.argv[1], sys.argv[2], owner=int(sys.argv[3]), lock=lock))\n")


def forkserver_main(path: str, expected: str, idle: float = FORKSERVER_IDLE_S,
                    owner: int = 0, lock: int = -1) -> int:  # pragma: no cover - the server
    """The fork server on the Unix socket ``path`` (see the section's comment), started by :data:`_SERVER_START`
    (which exits 0 when another server holds ``path``'s lock): exits 1 when jax cannot be imported or this module's
    file is not ``expected`` (the caller's), else 0 after ``idle`` seconds without a child, or -- ``owner`` the pid
    of the process that started it, its parent -- once that process has ended and no child is running (within 5 s).  ``lock``: the descriptor
    of ``path``'s lock, held (taken by :data:`_SERVER_START` before this package was imported)."""
    import importlib
    import select
    import signal
    import socket
    import struct
    import time

    for name in _WARM_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            return 1   # no jax here: every proxy falls back to the plain child
    if os.path.realpath(__file__) != os.path.realpath(expected):
        return 1       # another hloshard than the caller's (the socket is keyed on the caller's tree)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(64)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    conns: dict = {}   # connection -> worker pid
    pids: dict = {}    # worker pid -> connection
    last = time.monotonic()
    while True:
        ready, _, _ = select.select([srv, wake_r, *conns], [], [], 5.0)
        if wake_r in ready:
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
        if srv in ready:
            conn, _ = srv.accept()
            fds = []
            try:
                head, fds, _, _ = socket.recv_fds(conn, 8, 3)
                size = struct.unpack("!Q", head)[0] if len(head) == 8 and len(fds) == 3 else -1
                buf = b""
                while 0 <= size and len(buf) < size:
                    more = conn.recv(size - len(buf))
                    if not more:
                        break
                    buf += more
                if size < 0 or len(buf) != size:
                    raise OSError("short request")
                request = json.loads(buf)
            except (OSError, ValueError):
                conn.close()
                for fd in fds:
                    os.close(fd)
                continue
            pid = os.fork()
            if pid == 0:
                try:
                    srv.close()
                    for c in conns:
                        c.close()
                    os.close(wake_r)
                    os.close(wake_w)
                    conn.close()
                    _forkserver_worker(request, fds, lock)
                finally:
                    os._exit(70)
            for fd in fds:
                os.close(fd)
            try:
                conn.sendall(f"pid {pid}\n".encode())
            except OSError:
                os.kill(pid, signal.SIGKILL)
            conns[conn] = pid
            pids[pid] = conn
        for conn in [c for c in ready if c in conns]:
            try:
                gone = not conn.recv(64)
            except OSError:
                gone = True
            if gone:   # the proxy ended (killed by its caller): so does its worker
                try:
                    os.kill(conns[conn], signal.SIGKILL)
                except ProcessLookupError:
                    pass
        while pids:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = pids.pop(pid, None)
            if conn is None:
                continue
            del conns[conn]
            code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            try:
                conn.sendall(f"exit {code}\n".encode())
            except OSError:
                pass
            conn.close()
        if pids:
            last = time.monotonic()
        elif time.monotonic() - last > idle or (owner and os.getppid() != owner):
            break
    try:
        os.unlink(path)
    except OSError:
        pass
    return 0


def _forkserver_worker(request: dict, fds: list[int], lock: int) -> None:  # pragma: no cover - a fork
    """One child in a fork of the server: the proxy's stdin / stdout / stderr, environment and folder, then
    ``python ARGS`` run as ``__main__``; exits with its status."""
    import ctypes
    import io
    import runpy
    import signal
    import traceback
    import types
    import warnings

    os.close(lock)
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:   # the worker dies with the server (Linux)
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    for i, fd in enumerate(fds):
        os.dup2(fd, i)
        os.close(fd)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=False)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), line_buffering=True,
                                  errors="backslashreplace")
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    args = request["args"]
    code = 0
    # runpy's warning that the module was imported before it runs as __main__ (the server imported it)
    warnings.filterwarnings("ignore", message=".*found in sys.modules after import of package",
                            category=RuntimeWarning)
    try:
        if args[0] == "-m":
            sys.argv = [args[1], *args[2:]]
            runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        elif args[0] == "-c":
            sys.argv = ["-c", *args[2:]]
            main = types.ModuleType("__main__")
            sys.modules["__main__"] = main
            exec(compile(args[1], "<string>", "exec"), main.__dict__)
        elif not args[0].startswith("-"):   # a script file: its folder first on the path, not the current one
            sys.argv = list(args)
            sys.path[0] = os.path.dirname(os.path.abspath(args[0]))
            runpy.run_path(args[0], run_name="__main__")
        else:
            raise SystemExit(f"fork server: unsupported arguments {args[:1]}")
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        traceback.print_exc()
        code = 130
    except BaseException:  # noqa: BLE001 - as python prints an uncaught exception
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_child_main())
