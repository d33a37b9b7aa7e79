"""HS109 against XLA's SPMD partitioner: one module per kind of side-effecting instruction, left
unsharded (and a sharded variant), compiled for 8 partitions. The rule must fire exactly where the
partitioner refuses the instruction for its sharding.

XLA's verdicts (jaxlib 0.10.2, GSPMD unless noted), which this test re-checks every run:

* ``infeed`` / ``outfeed`` / a generic ``custom_call_has_side_effect=true`` custom-call without a
  sharding: "Side-effect HLO must have sharding" (spmd_partitioner.cc RET_CHECK);
* that custom-call with ``{replicated}``: "side-effect HLO cannot have a replicated sharding";
  with ``{maximal device=0}``: partitioned fine (it then fails only in CPU codegen, "No registered
  implementation for ... custom call", i.e. after the partitioner);
* ``rng-get-and-update-state`` and ``annotate_device_placement`` without a sharding: compile;
* a side-effecting custom-call without a sharding inside a manual (``shard_map``) region: partitioned;
* ``xla.sdy.FuncResultSharding`` without a GSPMD sharding in a Shardy-mode module, compiled with the
  Shardy partitioner (the mode such dumps are compiled in): compiles.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from hloshard.lint.context import LintOptions
from hloshard.lint.engine import lint_text
from tests.conftest import require_jax

H = "HloModule m, num_partitions=8\n"
PARAM = "  a = f32[8,4] parameter(0), sharding={devices=[8,1]<=[8]}\n"


def _module(body: str) -> str:
    return H + "ENTRY e {\n" + PARAM + body + "\n}\n"


CC = '  n = f32[8,4] negate(a)\n  ROOT c = f32[8,4] custom-call(n), custom_call_target="{t}", custom_call_has_side_effect=true{x}'
GSPMD_CASES = {
    # name: (module, line of the instruction lint must flag or None)
    "generic_custom_call": (_module(CC.format(t="my_effect", x="")), 5),
    "generic_custom_call_replicated": (_module(CC.format(t="my_effect", x=", sharding={replicated}")), 5),
    "generic_custom_call_maximal": (_module(CC.format(t="my_effect", x=", sharding={maximal device=0}")), None),
    "annotate_device_placement": (_module(CC.format(
        t="annotate_device_placement", x=', frontend_attributes={_xla_buffer_placement="pinned_host"}')), None),
    "rng_get_and_update_state": (_module("  s = u64[2] rng-get-and-update-state(), delta=4\n"
                                         "  ROOT t = (f32[8,4], u64[2]) tuple(a, s)"), None),
    "infeed": (_module("  tk = token[] after-all()\n  i = ((f32[3]), token[]) infeed(tk)\n"
                       "  ROOT t = (f32[8,4], ((f32[3]), token[])) tuple(a, i)"), 5),
    "outfeed_replicated": (_module("  tk = token[] after-all()\n  ROOT o = token[] outfeed(a, tk), "
                                   "outfeed_shape=f32[8,4], sharding={replicated}"), None),
    "manual_region_custom_call": (_module(
        '  m = f32[8,4] custom-call(a), custom_call_target="Sharding", sharding={devices=[8,1]<=[8]}\n'
        '  s = f32[1,4] custom-call(m), custom_call_target="SPMDFullToShardShape", sharding={manual}\n'
        '  c = f32[1,4] custom-call(s), custom_call_target="my_effect", custom_call_has_side_effect=true\n'
        '  f = f32[1,4] custom-call(c), custom_call_target="Sharding", sharding={manual}\n'
        '  ROOT r = f32[8,4] custom-call(f), custom_call_target="SPMDShardToFullShape", '
        'sharding={devices=[8,1]<=[8]}'), None),
}

_PID = ("  p = u32[] partition-id(){sh}\n  c = f32[] convert(p)\n  b = f32[8,4] broadcast(c), dimensions={{}}\n"
        "  ROOT r = f32[8,4] add(a, b)")
_PID_MANUAL = (
    '  m = f32[8,4] custom-call(a), custom_call_target="Sharding", sharding={devices=[8,1]<=[8]}\n'
    '  s = f32[1,4] custom-call(m), custom_call_target="SPMDFullToShardShape", sharding={manual}\n'
    '  p = u32[] partition-id()\n  c = f32[] convert(p)\n  b = f32[1,4] broadcast(c), dimensions={}\n'
    '  x = f32[1,4] add(s, b), sharding={manual}\n'
    '  ROOT r = f32[8,4] custom-call(x), custom_call_target="SPMDShardToFullShape", sharding={devices=[8,1]<=[8]}')
PID_CASES = {   # HS110: XLA refuses a partition-id outside a manual region
    "partition_id": (_module(_PID.format(sh="")), 4),
    "partition_id_replicated": (_module(_PID.format(sh=", sharding={replicated}")), 4),
    "partition_id_in_manual_region": (_module(_PID_MANUAL), None),
}

SDY = ('HloModule m, num_partitions=8, frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<["x"=8]>}}\n'
       'ENTRY e {\n'
       '  a = f32[8,4] parameter(0), frontend_attributes={xla.sdy.sharding="#sdy.sharding<@mesh, [{\\"x\\"}, {}]>"}\n'
       '  n = f32[8,4] negate(a)\n'
       '  ROOT c = f32[8,4] custom-call(n), custom_call_target="xla.sdy.FuncResultSharding", '
       'custom_call_has_side_effect=true, '
       'frontend_attributes={xla.sdy.sharding="#sdy.sharding_per_value<[<@mesh, [{}, {\\"x\\"}]>]>"}\n'
       '}\n')

_SHARDY_CHILD = r'''
import json, sys
import numpy as np, jax, jax.extend
from jax._src.lib import xla_client as xc
text = sys.stdin.read()
try:
    mod = xc.hlo.hlo_module_from_text(text)
    mlir = jax.extend.mlir.hlo_to_stablehlo(mod.as_serialized_hlo_module_proto())
    backend = jax.extend.backend.get_backend("cpu")
    opts = jax.extend.backend.get_compile_options(num_replicas=1, num_partitions=8,
        device_assignment=np.arange(8).reshape(1, 8), backend=backend)
    opts.executable_build_options.use_shardy_partitioner = True
    backend.compile_and_load(mlir, xc.DeviceList(tuple(backend.devices()[:8])), opts)
    print(json.dumps([True, ""]))
except Exception as e:
    print(json.dumps([False, str(e)]))
'''


def _partitioner_accepts(ok: bool, msg: str) -> bool:
    """Compiled, or failed only after partitioning (the CPU backend has no such custom-call)."""
    return ok or "No registered implementation" in msg


def _hs109_lines(text: str) -> list[int]:
    return [f.line for f in lint_text(text, "t.hlo", LintOptions(select=("HS109",)))]


@pytest.mark.oracle
def test_hs109_fires_exactly_where_xlas_partitioner_refuses_the_sharding():
    require_jax()
    from tests import xla_oracle

    names = list(GSPMD_CASES)
    results = xla_oracle.compile_many([GSPMD_CASES[n][0] for n in names])
    for name, (ok, msg) in zip(names, results):
        text, line = GSPMD_CASES[name]
        accepted = _partitioner_accepts(ok, msg)
        if line is None:
            assert accepted, (name, msg[:300])
            assert _hs109_lines(text) == [], name
        else:
            assert not accepted and "ide-effect" in msg, (name, msg[:300])
            assert _hs109_lines(text) == [line], name


@pytest.mark.oracle
def test_xla_sdy_custom_call_compiles_with_shardy_and_hs109_is_quiet():
    require_jax()
    from tests import xla_oracle

    proc = subprocess.run([sys.executable, "-c", _SHARDY_CHILD], input=SDY, capture_output=True, text=True,
                          env=xla_oracle._env(), timeout=300)
    ok, msg = json.loads(proc.stdout.strip().splitlines()[-1])
    assert ok, msg
    assert _hs109_lines(SDY) == []


def test_already_partitioned_module_is_not_checked():
    # XLA's partitioner names the entry it produced `<name>_spmd`; its instructions are per-device
    text = ("HloModule m, num_partitions=8\nENTRY main.1_spmd {\n  a = f32[1,4] parameter(0), sharding={devices=[8,1]<=[8]}\n"
            '  ROOT c = f32[1,4] custom-call(a), custom_call_target="my_effect", custom_call_has_side_effect=true\n}\n')
    assert _hs109_lines(text) == []
    assert _hs109_lines(text.replace("main.1_spmd", "main.1")) == [4]


@pytest.mark.oracle
def test_hs110_fires_exactly_where_xla_refuses_partition_id():
    require_jax()
    from tests import xla_oracle

    names = list(PID_CASES)
    results = xla_oracle.compile_many([PID_CASES[n][0] for n in names])
    for name, (ok, msg) in zip(names, results):
        text, line = PID_CASES[name]
        found = [f.line for f in lint_text(text, "t.hlo", LintOptions(select=("HS110",)))]
        if line is None:
            assert ok, (name, msg[:300])
            assert found == [], name
        else:
            assert not ok and "PartitionId instruction is not supported for SPMD partitioning" in msg, (name, msg[:300])
            assert found == [line], name
