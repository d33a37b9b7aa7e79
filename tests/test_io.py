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
    # file:line:col of the first byte that does not decode, as lint's HS001 gives it (round 30's fresh-clone check:
    # "byte 12" alone)
    bad.write_bytes(b"HloModule m\n  caf\xc3\xa9 \xff")   # the invalid byte after "  caf\u00e9 " on line 2
    with pytest.raises(UsageError, match=r"bad\.hlo:2:8: not UTF-8 text \(byte 20: invalid start byte\)"):
        read_text(str(bad))


def test_input_larger_than_the_limit_is_a_usage_error(tmp_path, monkeypatch):
    p = tmp_path / "big.hlo"
    p.write_text("x" * 1000)
    monkeypatch.setenv("HLOSHARD_MAX_INPUT_BYTES", "999")
    with pytest.raises(UsageError, match="larger than 999 bytes"):
        read_text(str(p))
    monkeypatch.setenv("HLOSHARD_MAX_INPUT_BYTES", "1000")
    assert read_text(str(p)) == "x" * 1000


def test_endless_input_is_refused_not_read_forever(monkeypatch):
    """/dev/zero never ends: reading stops one byte past the limit."""
    monkeypatch.setenv("HLOSHARD_MAX_INPUT_BYTES", str(2**20))
    with pytest.raises(UsageError, match="larger than"):
        read_text("/dev/zero")


def test_read_text_normalises_line_endings(tmp_path):
    p = tmp_path / "crlf.hlo"
    p.write_bytes(b"a\r\nb\rc\n")
    assert read_text(str(p)) == "a\nb\nc\n"


def test_check_output_path_gives_the_system_reason(tmp_path):
    from hloshard.io import check_output_path

    check_output_path(None)
    check_output_path("-")
    check_output_path(str(tmp_path / "new.hlo"))             # creatable: passes, leaves nothing
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(UsageError, match="is a directory"):
        check_output_path(str(tmp_path))
    with pytest.raises(UsageError, match="No such file or directory"):
        check_output_path(str(tmp_path / "missing" / "x.hlo"))
    check_output_path("/dev/null")                          # non-regular targets need only be writable
    with pytest.raises(UsageError, match="a /proc file"):      # new user 23: solved, then failed to write
        check_output_path("/proc/version")


def test_non_regular_target_is_written_in_place(tmp_path):
    """A FIFO is written directly (a rename onto it would replace the FIFO with a file)."""
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo).read()))
    reader.start()
    write_text_atomic(str(fifo), "through the pipe")
    reader.join(10)
    assert got == ["through the pipe"]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    write_text_atomic("/dev/null", "discarded")
