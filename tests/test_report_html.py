"""The HTML reports in a real headless Chromium: the page renders, has no script/console errors, needs
no network, and a screenshot is not blank.  Under CI=true a missing chromium is a failure (.ci/run
installs Debian's package); locally the browser tests skip."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import zlib

import numpy as np
import pytest
from click.testing import CliRunner

from hloshard.cli import main
from tests.conftest import ROOT

SAMPLES = ROOT / "samples"


def chromium() -> str:
    path = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
    if path is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("chromium is missing (CI=true): .ci/run installs it with apt-get install chromium")
        pytest.skip("chromium is not installed")
    return path


def browse(page, tmp_path, *mode) -> subprocess.CompletedProcess:
    profile = tmp_path / f"profile-{len(list(tmp_path.iterdir()))}"
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", "--window-size=1200,1400",
           "--virtual-time-budget=3000", *mode, page.as_uri()]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def body_tag(dom: str) -> str:
    """The rendered <body ...> start tag (where the page's script records load and errors)."""
    m = re.search(r"<body[^>]*>", dom)
    assert m, dom[:500]
    return m.group(0)


def console_errors(stderr: str) -> list[str]:
    """Chromium's log lines for the page's console messages that are errors."""
    return [line for line in stderr.splitlines()
            if "CONSOLE" in line and ("Uncaught" in line or "Error" in line or ":ERROR:" in line)]


def png_pixels(path) -> np.ndarray:
    """Decode an 8-bit RGB/RGBA PNG (what Chromium writes) to an array (H, W, C): chunks, zlib, the
    five row filters of the PNG specification."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", None
    while pos < len(data):
        (length,), kind = struct.unpack(">I", data[pos:pos + 4]), data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6), (depth, color)
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8)
    stride = width * channels
    rows = raw.reshape(height, stride + 1)
    out = np.zeros((height, stride), dtype=np.int32)
    prev = np.zeros(stride, dtype=np.int32)
    for y in range(height):
        f, line = rows[y, 0], rows[y, 1:].astype(np.int32)
        if f == 0:
            cur = line
        elif f == 2:
            cur = (line + prev) & 255
        else:  # 1 (sub), 3 (average), 4 (Paeth) depend on the pixel to the left: walk the row
            cur = np.zeros(stride, dtype=np.int32)
            for x in range(stride):
                a = cur[x - channels] if x >= channels else 0
                b = prev[x]
                c = prev[x - channels] if x >= channels else 0
                if f == 1:
                    pred = a
                elif f == 3:
                    pred = (a + b) // 2
                else:
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                cur[x] = (line[x] + pred) & 255
        out[y] = cur
        prev = cur
    return out.reshape(height, width, channels)


@pytest.fixture(scope="module")
def solve_page(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("html")
    page = tmp / "report.html"
    r = CliRunner().invoke(main, ["solve", str(SAMPLES / "mlp_train_step.pre.hlo"), "--mesh", "2x4", "-o",
                                  str(tmp / "out.hlo"), "--html", str(page), "--quiet", "--time-limit", "10"])
    assert r.exit_code == 0, r.output
    return page


def test_page_is_self_contained(solve_page):
    text = solve_page.read_text()
    assert text.startswith("<!DOCTYPE html>") and "<svg" in text
    for needle in ("src=\"http", "href=\"http", "url(http", "@import", "<link"):
        assert needle not in text, needle
    for section in ("Summary", "Cost by kind", "Most expensive collectives", "Parameter shardings"):
        assert section in text
    assert "params_0_.1" in text   # a parameter of the sample in the shardings table


def test_page_renders_without_errors_in_chromium(solve_page, tmp_path):
    res = browse(solve_page, tmp_path, "--dump-dom")
    assert res.returncode == 0, res.stderr[-2000:]
    dom = res.stdout
    assert 'data-rendered="1"' in body_tag(dom)           # the page's own load handler ran
    assert "data-js-errors" not in body_tag(dom)
    assert console_errors(res.stderr) == []
    assert "<rect" in dom and "Parameter shardings" in dom


def test_error_hook_sees_a_script_error(tmp_path):
    """The check above can fail: a page with a script error gets it recorded in the DOM."""
    from hloshard.report_html import page

    bad = tmp_path / "bad.html"
    bad.write_text(page("bad", "<p>x</p><script>undefinedFunction();</script>"))
    res = browse(bad, tmp_path, "--dump-dom")
    assert "data-js-errors" in body_tag(res.stdout) and "undefinedFunction" in body_tag(res.stdout)
    assert any("undefinedFunction" in line for line in console_errors(res.stderr)), res.stderr[-2000:]


def test_screenshot_is_not_blank(solve_page, tmp_path):
    shot = tmp_path / "shot.png"
    res = browse(solve_page, tmp_path, f"--screenshot={shot}")
    assert res.returncode == 0 and shot.exists(), res.stderr[-2000:]
    px = png_pixels(shot)[..., :3].astype(np.float64)
    assert px.shape[0] >= 1000 and px.shape[1] >= 1000
    assert px.std() > 10                                   # not a flat colour
    coloured = np.abs(px - px.mean(axis=2, keepdims=True)).max(axis=2) > 40
    assert coloured.mean() > 0.002                          # the chart's coloured bars are on screen
    assert (px.min(axis=2) < 100).mean() > 0.005            # and dark text


def test_explain_and_diff_pages(tmp_path):
    ex, df = tmp_path / "explain.html", tmp_path / "diff.html"
    r = CliRunner().invoke(main, ["explain", str(SAMPLES / "mlp_train_step.propagated.hlo"), "--instruction",
                                  "dot_general.6", "--mesh", "2x4", "--html", str(ex), "-o", str(tmp_path / "e.txt")])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["diff", str(SAMPLES / "transformer_block.propagated.hlo"),
                                  str(SAMPLES / "transformer_block.propagated.hlo"), "--mesh", "2x4", "--html", str(df),
                                  "-o", str(tmp_path / "d.txt")])
    assert r.exit_code == 0, r.output
    for page in (ex, df):
        res = browse(page, tmp_path, "--dump-dom")
        tag = body_tag(res.stdout)
        assert 'data-rendered="1"' in tag and "data-js-errors" not in tag
        assert console_errors(res.stderr) == []
