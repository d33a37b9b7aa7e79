"""Huge tile assignments and replica groups are checked from their numbers, never expanded."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from hloshard.lint.geometry import DimSplit

_CHILD = textwrap.dedent("""
    import json, resource, sys
    from hloshard.lint.context import LintOptions
    from hloshard.lint.engine import lint_paths
    result = lint_paths([sys.argv[1]], LintOptions())
    def peak_mb():
        # VmHWM: this process image's own peak (ru_maxrss can carry a big forking parent's RSS over exec,
        # e.g. a pytest-xdist worker's)
        try:
            for line in open("/proc/self/status"):
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"maxrss_mb": peak_mb(),
                      "findings": [[f.code, f.message] for f in result.findings]}))
""")


def _lint_in_child(tmp_path, text: str) -> dict:
    path = tmp_path / "big.hlo"
    path.write_text(text)
    try:   # hang guard: expanding 10^7 devices would take minutes and gigabytes; the checks take < 1 s
        proc = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True,
                              timeout=300, check=True)
    except subprocess.TimeoutExpired:
        pytest.fail("lint hung on a huge tile assignment (it must be judged from its numbers)")
    return json.loads(proc.stdout)


@pytest.mark.parametrize("header", ["HloModule m, num_partitions=8", "HloModule m"])
def test_ten_million_device_iota_is_fast_and_small(tmp_path, header):
    out = _lint_in_child(tmp_path, f"{header}\n\nENTRY e {{\n"
                         "  ROOT p = f32[16] parameter(0), sharding={devices=[10000000]<=[10000000]}\n}\n")
    assert out["maxrss_mb"] < 300, out   # memory, not time: expanding the list would need gigabytes
    codes = [c for c, _ in out["findings"]]
    assert "HS001" in codes   # where the parser points inside the sharding: after the findings at its sharding=
    if "num_partitions" in header:
        assert "HS101" in codes and "HS104" in codes
        hs104 = dict(out["findings"])["HS104"]
        assert "8, 9, 10, 11, 12, 13, 14, 15, ... (9999992 in all)" in hs104
    else:
        hs201 = dict(out["findings"])["HS201"]
        assert "9999984 shards are empty" in hs201 and "and 9999976 more" in hs201
        assert len(hs201) < 400


def test_million_device_empty_shards_message_is_capped(tmp_path):
    out = _lint_in_child(tmp_path, "HloModule m\n\nENTRY e {\n"
                         "  ROOT p = f32[16] parameter(0), sharding={devices=[1000000]<=[1000000]}\n}\n")
    assert out["maxrss_mb"] < 300, out
    [(code, msg)] = out["findings"]
    assert code == "HS201"
    assert "(1 per shard: 1 x16, 0 x999984) 999984 shards are empty: shard 16 (devices 16);" in msg
    assert msg.endswith("shard 23 (devices 23); and 999976 more")


@pytest.mark.parametrize("size,ways", [(3, 4), (5, 4), (10, 4), (7, 3), (1, 2), (17, 16), (16, 17),
                                       (100, 33), (33, 100), (1000, 999)])
def test_dim_split_closed_form_matches_walking_the_tiles(size, ways):
    arr = np.arange(ways * 2).reshape(ways, 2)
    split = DimSplit(0, 0, size, ways, -(-size // ways), arr)
    c = split.per_shard
    sizes = [min((i + 1) * c, size) - min(i * c, size) for i in range(ways)]
    assert [split.size_of(i) for i in range(ways)] == sizes
    assert list(split.empty) == [i for i, s in enumerate(sizes) if s == 0]
    assert split.num_empty == sizes.count(0)
    assert split.short == [(i, c - s) for i, s in enumerate(sizes) if 0 < s < c]
    assert split.padding == sum(c - s for s in sizes)
    assert split.devices_of(ways - 1) == (2 * ways - 2, 2 * ways - 1)
    if ways <= 16:
        assert split.held_text() == ",".join(map(str, sizes))
    else:  # run-length: expand it back
        expanded = [int(v) for run in split.held_text().split(", ") for v, n in [run.split(" x")]
                    for _ in range(int(n))]
        assert expanded == sizes


_RG_MODULE = """HloModule m, num_partitions=8

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY e {
  p = f32[16] parameter(0), sharding={devices=[8]<=[8]}
  ROOT r = f32[16] all-reduce(p), replica_groups=GROUPS, to_apply=add, channel_id=1, use_global_device_ids=true
}
"""


@pytest.mark.parametrize("groups,expected", [
    ("[1,1000000]<=[1000000]", ("HS304", "ids 8, 9, 10, 11, 12, 13, 14, 15, ... (999992 in all) outside [0, 8) "
                                          "(flattened device ids")),
    ("[2,8]<=[16]", ("HS304", "ids 8, 9, 10, 11, 12, 13, 14, 15 outside [0, 8)")),
    ("[4,2]<=[2,4]T(1,0)", None),
    ("[1,10000000]<=[10000000]", ("HS001", "too many devices")),
])
def test_out_of_range_iota_replica_groups_found_from_the_numbers(tmp_path, groups, expected):
    out = _lint_in_child(tmp_path, _RG_MODULE.replace("GROUPS", groups))
    assert out["maxrss_mb"] < 300, out
    if expected is None:
        assert out["findings"] == []
    else:
        [(code, msg)] = out["findings"]
        assert code == expected[0] and expected[1] in msg, msg
