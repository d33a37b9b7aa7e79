"""The jax children's fork server (``hloshard.xla_check.child_argv`` with ``HLOSHARD_XLA_FORKSERVER=1``): a child
run through it is the plain ``python ARGS`` as its caller sees it -- output, exit status, a signal's death, SIGINT,
its folder and environment, each fork's own device count, a proxy killed ending its worker -- and XLA's figures
through it are the plain child's.  conftest.py turns it on for the whole suite; these tests compare both paths."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from hloshard import xla_check
from hloshard.xla_check import FORKSERVER_ENV, child_argv
from tests.conftest import require_jax

# a jax child: its pid, folder, arguments, environment variable and device count, then a line on stderr and exit 3
PROBE = ("import os, sys, jax; print(json.dumps([os.getpid(), os.getcwd(), sys.argv[1:], os.environ.get('PROBE'), "
         "len(jax.devices())])); print('to stderr', file=sys.stderr); sys.exit(3)")

MODULE = """HloModule m
ENTRY e {
  p = f32[64,64]{1,0} parameter(0), sharding={devices=[4,1]0,1,2,3}
  ROOT d = f32[64,64]{1,0} dot(p, p), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={replicated}
}
"""


def _env(on: bool, **extra) -> dict:
    return dict(os.environ, **{FORKSERVER_ENV: "1" if on else "0"}, **extra)


@pytest.fixture(scope="module")
def served():
    """The environment of a fork server that is up (started by child_argv, waited for here)."""
    require_jax()
    env = _env(True, JAX_PLATFORMS="cpu")
    child_argv(["-c", "pass"], env)
    path = xla_check._forkserver_path(env)
    end = time.monotonic() + 120
    while not (os.path.exists(path) and xla_check._forkserver_alive(path)):
        assert time.monotonic() < end, "the fork server did not start in 120 s"
        time.sleep(0.2)
    return env


def _run(env: dict, args: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.Popen(child_argv(args, env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, **kw)


@pytest.mark.oracle
@pytest.mark.parametrize("form", ["-c", "script"])
def test_a_forked_child_is_the_plain_child(served, tmp_path, form):
    code = "import json, sys\nprint(sys.path[0])\n" + PROBE
    script = tmp_path / "probe.py"
    script.write_text(code)
    run_in = tmp_path / "cwd"
    run_in.mkdir()
    outs = {}
    for on in (False, True):
        env = dict(served, **{FORKSERVER_ENV: "1" if on else "0"}, PROBE="x y",
                   XLA_FLAGS="--xla_force_host_platform_device_count=4")
        p = _run(env, (["-c", code] if form == "-c" else [str(script)]) + ["a", "b c"], cwd=run_in)
        out, err = p.communicate(timeout=300)
        first, probe = out.splitlines()
        pid, cwd, argv, probe, devices = json.loads(probe)
        assert (pid == p.pid) is (not on)   # a fork of the server, not the process the caller started
        outs[on] = (p.returncode, first, cwd, argv, probe, devices, err.strip().splitlines()[-1])
    path0 = "" if form == "-c" else str(tmp_path)
    assert outs[True] == outs[False] == (3, path0, str(run_in), ["a", "b c"], "x y", 4, "to stderr")


@pytest.mark.oracle
def test_each_fork_sees_its_own_device_count(served):
    counts = []
    for n in (2, 8, 3):
        p = _run(dict(served, XLA_FLAGS=f"--xla_force_host_platform_device_count={n}"),
                 ["-c", "import jax; print(len(jax.devices()))"])
        counts.append(int(p.communicate(timeout=300)[0]))
    assert counts == [2, 8, 3]


@pytest.mark.oracle
def test_signals_reach_and_end_a_forked_child(served):
    aborted = _run(served, ["-c", "import os; os.abort()"])
    aborted.communicate(timeout=300)
    assert aborted.returncode == -signal.SIGABRT
    # 'up' is printed inside the try: SIGINT may arrive while print is still returning
    sleeper = ("import time\ntry:\n    print('up', flush=True)\n    time.sleep(60)\n"
               "except KeyboardInterrupt:\n    print('interrupted')\n    raise SystemExit(5)\n")
    p = _run(served, ["-c", sleeper])
    assert p.stdout.readline() == "up\n"
    p.send_signal(signal.SIGINT)
    assert p.communicate(timeout=60)[0] == "interrupted\n" and p.returncode == 5
    p = _run(served, ["-c", "import os, time\nprint(os.getpid(), flush=True)\ntime.sleep(60)"])
    worker = int(p.stdout.readline())
    assert worker != p.pid
    p.kill()
    p.communicate(timeout=60)
    end = time.monotonic() + 30
    while os.path.exists(f"/proc/{worker}") and open(f"/proc/{worker}/stat").read().split()[2] != "Z":
        assert time.monotonic() < end, "the worker outlived its killed proxy"
        time.sleep(0.1)


def test_without_a_server_the_proxy_runs_the_plain_child(tmp_path):
    argv = child_argv(["-c", "import os, sys; print(os.getpid(), sys.argv[1])", "z"], _env(False))
    assert argv[1:] == ["-c", "import os, sys; print(os.getpid(), sys.argv[1])", "z"]
    proxy = [argv[0], "-S", "-c", xla_check._PROXY, str(tmp_path / "no.sock"), *argv[1:]]
    p = subprocess.run(proxy, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.split()[1] == "z" and int(p.stdout.split()[0]) > 0


@pytest.mark.oracle
def test_xla_figures_through_the_server_are_the_plain_childs(served, monkeypatch):
    from hloshard.xla_check import spmd_collectives
    from hloshard.xla_memory import xla_memory

    got = {}
    for on in ("0", "1"):
        monkeypatch.setenv(FORKSERVER_ENV, on)
        mem = xla_memory([MODULE], 4)[0]
        coll = spmd_collectives([MODULE], 4)[0]
        got[on] = (mem.argument, mem.output, mem.temp, mem.alias, mem.flops,
                   [(c.kind, c.shape, c.replica_groups) for c in coll.collectives])
    assert got["0"] == got["1"]
    assert got["1"][5] and got["1"][0] == 64 * 64 * 4 // 4
