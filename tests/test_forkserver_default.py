"""The fork server as a JAX user's default (round 37, issue 24): ``import hloshard.jax`` routes the process's jax
children through one server (``xla_check.set_forkserver_default``) unless ``HLOSHARD_XLA_FORKSERVER`` says otherwise,
and a server started so ends with the process that started it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

from hloshard import xla_check
from hloshard.xla_check import FORKSERVER_ENV, child_argv, forkserver_on
from tests.conftest import require_jax


def test_the_variable_wins_over_the_default(monkeypatch):
    monkeypatch.setattr(xla_check, "_forkserver_alive", lambda path: True)   # never start a server here
    monkeypatch.setattr(xla_check, "_FORKSERVER_DEFAULT", False)
    bare = {k: v for k, v in os.environ.items() if k != FORKSERVER_ENV}
    assert not forkserver_on(bare) and child_argv(["-c", "pass"], bare)[1:] == ["-c", "pass"]
    xla_check.set_forkserver_default(True)
    for env, served in ((bare, True), (dict(bare, **{FORKSERVER_ENV: ""}), True),
                        (dict(bare, **{FORKSERVER_ENV: "0"}), False), (dict(bare, **{FORKSERVER_ENV: "1"}), True)):
        argv = child_argv(["-c", "pass"], env)
        assert forkserver_on(env) is served
        assert (argv[1:3] == ["-S", "-c"] and argv[3] == xla_check._PROXY) is served, env.get(FORKSERVER_ENV)
        assert argv[-2:] == ["-c", "pass"]


# the owner: imports hloshard.jax (which turns the default on), runs one jax child, prints what it saw, exits
OWNER = """
import json, os, subprocess, sys
import hloshard.jax
from hloshard import xla_check
env = xla_check._child_env(2)
argv = xla_check.child_argv(["-c", "import os, jax; print(os.getpid(), len(jax.devices()))"], env)
p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
out, err = p.communicate(timeout=300)
worker, devices = map(int, out.split())
server = xla_check._FORKSERVER_PROCS[xla_check._forkserver_path(env)].pid
print(json.dumps({"on": xla_check.forkserver_on(), "proxied": argv[1] == "-S", "worker": worker, "proxy": p.pid,
                  "devices": devices, "server": server, "rc": p.returncode}))
"""


@pytest.mark.oracle
def test_import_hloshard_jax_serves_the_children_and_the_server_ends_with_its_owner(tmp_path):
    require_jax()
    env = {k: v for k, v in os.environ.items() if k != FORKSERVER_ENV}
    # its own server, not the suite's (the socket lies under TMPDIR); a short folder: under pytest-xdist tmp_path is
    # too long for a Unix socket, and the server would lie under /tmp with the suite's
    short = tempfile.mkdtemp(prefix="fsd", dir="/tmp")
    env["TMPDIR"] = short
    p = subprocess.run([sys.executable, "-c", OWNER], capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    got = json.loads(p.stdout.splitlines()[-1])
    assert got["on"] and got["proxied"] and got["rc"] == 0 and got["devices"] == 2
    server = got["server"]
    # the child was a fork of the server, not the process (the proxy) the owner started
    assert got["worker"] not in (got["proxy"], server)
    end = time.monotonic() + 60
    while os.path.exists(f"/proc/{server}") and open(f"/proc/{server}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
        assert time.monotonic() < end, "the fork server outlived the process that started it by 60 s"
        time.sleep(0.2)
    shutil.rmtree(short, ignore_errors=True)
