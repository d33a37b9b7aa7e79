"""Real XLA (jaxlib, in a subprocess) as the oracle for the HLO front end.

For every sample and every hand-written test module: XLA's parser accepts our printed text, XLA
re-prints our text exactly as it re-prints the original (nothing was lost or changed), and every
sharding we print is equal, by XLA's own ``HloSharding`` comparison, to the one in the source.
"""

from __future__ import annotations

import re

import pytest

from hloshard.hlo import parse_file, print_module
from hloshard.hlo.attributes import _blob_end
from tests.conftest import ROOT, SAMPLES, require_jax

FILES = sorted((ROOT / "tests" / "data" / "hlo").glob("*.hlo")) + sorted(SAMPLES.glob("*.hlo"))


@pytest.fixture(scope="module")
def xla_results():
    require_jax()
    from tests import xla_oracle

    from tests.test_printer import build_module

    originals = [p.read_text() for p in FILES]
    ours = [print_module(parse_file(str(p))) for p in FILES]
    built = print_module(build_module())
    res_orig = xla_oracle.parse_many(originals)
    res_ours = xla_oracle.parse_many(ours + [built])
    out = dict(zip([p.name for p in FILES], zip(res_orig, res_ours, ours)))
    out["<built in Python>"] = (None, res_ours[-1], built)
    return out


@pytest.mark.oracle
@pytest.mark.parametrize("name", [p.name for p in FILES])
def test_xla_accepts_our_text_and_sees_the_same_module(xla_results, name):
    (ok_orig, xla_orig), (ok_ours, xla_ours), ours = xla_results[name]
    assert ok_orig, f"XLA rejects the original {name}: {xla_orig[:300]}"
    assert ok_ours, f"XLA rejects our print of {name}: {xla_ours[:300]}"
    if name == "inline.hlo":
        # XLA names an inline body '_'; hloshard gives it a unique name
        xla_ours = xla_ours.replace("%e.to_apply", "%_")
    assert xla_ours == xla_orig


@pytest.mark.oracle
def test_xla_accepts_a_module_built_in_python(xla_results):
    _, (ok, msg), _ = xla_results["<built in Python>"]
    assert ok, msg


def _source_shardings(text: str) -> list[str]:
    out = []
    for m in re.finditer(r"[\s,]sharding=\{", text):
        start = m.end() - 1
        out.append(text[start:_blob_end(text, start)])
    return out


@pytest.mark.oracle
def test_every_printed_sharding_equals_xla_reading_of_the_source():
    require_jax()
    from tests import xla_oracle

    ours, originals = [], []
    for p in FILES:
        m = parse_file(str(p))
        printed = [str(i.sharding) for i in m.all_instructions() if i.sharding is not None]
        source = _source_shardings(p.read_text())
        assert len(printed) == len(source), p.name
        ours += printed
        originals += source
    assert len(ours) > 500
    # deduplicate pairs: one child process, a few hundred comparisons
    pairs = sorted(set(zip(ours, originals)))
    res = xla_oracle.shardings_from_strings([a for a, _ in pairs], others=[b for _, b in pairs])
    bad = [(a, b, r) for (a, b), r in zip(pairs, res) if "error" in r or not r.get("equal")]
    assert bad == []
