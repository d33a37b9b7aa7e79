"""The shared reference directory is located once in tests/conftest.py and never assumed to exist."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from tests import conftest


def test_missing_shared_skips_locally(monkeypatch, tmp_path):
    monkeypatch.setattr(conftest, "SHARED", tmp_path / "nowhere")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="HLOSHARD_SHARED"):
        conftest.require_shared("iopddl", "x.json.gz")


def test_missing_shared_fails_under_ci(monkeypatch, tmp_path):
    monkeypatch.setattr(conftest, "SHARED", tmp_path / "nowhere")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        conftest.require_shared("schemas")


def test_present_file_is_returned(monkeypatch, tmp_path):
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "s.json").write_text("{}")
    monkeypatch.setattr(conftest, "SHARED", tmp_path)
    assert conftest.require_shared("schemas", "s.json") == tmp_path / "schemas" / "s.json"


def test_env_var_overrides_default(tmp_path):
    root = pathlib.Path(conftest.__file__).resolve().parent.parent
    code = "from tests.conftest import SHARED; print(SHARED)"
    env = dict(os.environ, HLOSHARD_SHARED=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(tmp_path.resolve())
    env.pop("HLOSHARD_SHARED")
    out = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str((root.parent / "shared").resolve())
