"""Shared pytest configuration.

Oracle tests (marked ``oracle``) run real XLA (jaxlib) in a subprocess. When jax cannot be imported
they skip locally but FAIL under ``CI=true``: a CI run must never pass by skipping the oracle.
"""

from __future__ import annotations

import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"
SHARED = ROOT.parent / "shared"


def jax_available() -> bool:
    try:
        import jax  # noqa: F401
        import jaxlib  # noqa: F401
    except Exception:
        return False
    return True


def require_jax() -> None:
    """Call at the top of an oracle test: skip without jax locally, fail under CI=true."""
    if jax_available():
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail("jax/jaxlib cannot be imported, and CI=true: oracle tests must not skip")
    pytest.skip("jax/jaxlib not installed (install the 'xla' extra)")


@pytest.fixture
def oracle():
    """Fixture form of :func:`require_jax`; returns the tests.xla_oracle module."""
    require_jax()
    from tests import xla_oracle

    return xla_oracle
