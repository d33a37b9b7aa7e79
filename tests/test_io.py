"""Atomic output files: permissions, symlinks, directories, no partial files."""

from __future__ import annotations

import os
import stat

import pytest

from hloshard.errors import UsageError
from hloshard.io import read_text, write_text_atomic


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_new_file_gets_umask_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        write_text_atomic(str(tmp_path / "out.hlo"), "x")
    finally:
        os.umask(old)
    assert mode(tmp_path / "out.hlo") == 0o644
    assert (tmp_path / "out.hlo").read_text() == "x"


def test_replaced_file_keeps_its_permissions(tmp_path):
    p = tmp_path / "out.hlo"
    p.write_text("old")
    os.chmod(p, 0o664)
    write_text_atomic(str(p), "new")
    assert mode(p) == 0o664 and p.read_text() == "new"


def test_symlink_is_followed_and_kept(tmp_path):
    target = tmp_path / "target.hlo"
    target.write_text("old")
    link = tmp_path / "link.hlo"
    link.symlink_to(target)
    write_text_atomic(str(link), "new")
    assert link.is_symlink() and target.read_text() == "new"


def test_directory_as_output_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="is a directory"):
        write_text_atomic(str(tmp_path), "x")
    assert [p.name for p in tmp_path.iterdir()] == []     # no temp file left behind


def test_missing_directory_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="cannot write"):
        write_text_atomic(str(tmp_path / "nope" / "out.hlo"), "x")


def test_read_text_errors(tmp_path):
    with pytest.raises(UsageError, match="cannot read"):
        read_text(str(tmp_path / "missing.hlo"))
    bad = tmp_path / "bad.hlo"
    bad.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(UsageError, match="not UTF-8"):
        read_text(str(bad))
