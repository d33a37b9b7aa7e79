"""Shared pytest configuration.

Oracle tests (marked ``oracle``) run real XLA (jaxlib) in a subprocess. When jax cannot be imported
they skip locally but FAIL under ``CI=true``: a CI run must never pass by skipping the oracle.

Reference data (IOPDDL instances, the SARIF schema, seeds) lives in the project's ``shared`` directory,
which is not part of this repository. It is located once, in :mod:`tests.shared_dir` (the benchmarks use
it too): the ``HLOSHARD_SHARED`` environment variable if set, else ``<repo>/../shared`` (where CI checks it
out beside the clone). Tests reach it only through :func:`require_shared` (or the ``shared_dir`` fixture), which skips locally with the reason when
the directory or file is missing and fails under ``CI=true``.
"""

from __future__ import annotations

import os
import pathlib

import pytest

from hloshard.xla_check import FORKSERVER_ENV, child_argv
from tests.shared_dir import ROOT, SHARED

SAMPLES = ROOT / "samples"

# jax children through the fork server (hloshard.xla_check.child_argv): jax imported once per run, not once per
# child -- inherited by every child the tests start; HLOSHARD_XLA_FORKSERVER=0 runs them plain
os.environ.setdefault(FORKSERVER_ENV, "1")


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def require_shared(*parts: str) -> pathlib.Path:
    """Return ``SHARED / parts`` if it exists; else skip locally, or fail under ``CI=true``.

    Call it inside the test (or a fixture), never at import time, so a missing shared directory
    skips only the tests that need it.
    """
    path = SHARED.joinpath(*parts)
    if path.exists():
        return path
    reason = (
        f"shared reference data not found: {path} (set HLOSHARD_SHARED to the shared directory, "
        f"default <repo>/../shared)"
    )
    if _in_ci():
        pytest.fail(reason + "; CI=true: tests must not skip for missing shared data")
    pytest.skip(reason)


@pytest.fixture
def shared_dir() -> pathlib.Path:
    """The shared reference directory (see :func:`require_shared`)."""
    return require_shared()


def jax_available() -> bool:
    try:
        import jax  # noqa: F401
        import jaxlib  # noqa: F401
    except Exception:
        return False
    return True


def run_python_child(script: str, timeout: float = 300, in_checkout: bool = False) -> str:
    """Run ``script`` with ``python -c`` in a child process that imports this checkout's ``src`` (a jax
    program whose XLA flags must be set before jax loads); assert it exits 0 and return its stdout.
    ``in_checkout``: the child also imports the checkout's root (``tests.*``, ``benchmarks.*``) and runs in it."""
    import subprocess

    paths = [str(ROOT / "src")] + ([str(ROOT)] if in_checkout else []) + [os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths))
    proc = subprocess.run(child_argv(["-c", script], env), capture_output=True, text=True, env=env, timeout=timeout,
                          cwd=ROOT if in_checkout else None)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def run_json_child(script: str, timeout: float = 900) -> dict:
    """:func:`run_python_child` in the checkout (``in_checkout``) after :func:`require_jax`; the JSON object
    its stdout's last line holds."""
    import json

    require_jax()
    return json.loads(run_python_child(script, timeout, in_checkout=True).strip().splitlines()[-1])


def require_jax() -> None:
    """Call at the top of an oracle test: skip without jax locally, fail under CI=true."""
    if jax_available():
        return
    if _in_ci():
        pytest.fail("jax/jaxlib cannot be imported, and CI=true: oracle tests must not skip")
    pytest.skip("jax/jaxlib not installed (install the 'xla' extra)")


@pytest.fixture
def oracle():
    """Fixture form of :func:`require_jax`; returns the tests.xla_oracle module."""
    require_jax()
    from tests import xla_oracle

    return xla_oracle


def predicted_beside_xla(head: str, cases: dict, devices: str = "8") -> dict:
    """``{case: hloshard.xla_compare.Comparison}``: each module ``head + body + "}"`` of ``cases`` (name -> the
    entry computation's body) priced by hloshard (:func:`hloshard.autoshard.evaluate_module` on the mesh
    ``devices``) beside XLA's collectives of the same module, XLA run once for all (one child process).  An
    oracle helper: fails (CI) or skips without jax (:func:`require_jax`)."""
    require_jax()
    from hloshard.autoshard import evaluate_module
    from hloshard.hlo import parse_module
    from hloshard.mesh import DeviceMesh
    from hloshard.xla_compare import compare_module, run_xla, tag_module_text

    modules = {k: parse_module(head + body + "}\n", f"<{k}>") for k, body in cases.items()}
    tagged = {k: tag_module_text(m) for k, m in modules.items()}
    results = dict(zip(tagged, run_xla([t for t, _ in tagged.values()], int(devices))))
    out = {}
    for k, m in modules.items():
        mesh = DeviceMesh.for_module(m, devices)
        out[k] = compare_module(m, mesh, evaluate_module(m, mesh), xla=(results[k], tagged[k][1]))
    return out
