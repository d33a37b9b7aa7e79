"""A truncated file gets its error where the text ends, on the line XLA's parser names (jaxlib
0.10.2, asked every run), not at an earlier valid multi-line attribute."""

from __future__ import annotations

import re

import pytest

from hloshard.errors import HloSyntaxError
from hloshard.hlo import parse_module
from tests.conftest import require_jax, require_shared

MULTILINE = '''HloModule m
ENTRY e {
  a = f32[8] parameter(0)
  b = f32[8] custom-call(a), custom_call_target="k", frontend_attributes={kernel_metadata={
    "name"="kern",
    "args"={1,2}
  }}
  c = f32[8] negate(b)
  ROOT d = f32[8] add(c, c), metadata={op_name="x"}
}
'''


def _ours(text):
    try:
        parse_module(text, "t.hlo")
    except HloSyntaxError as exc:
        return exc.line, exc.column
    return None


def _xla_where(msg):
    m = re.search(r"was parsing (\d+):(\d+)", msg)
    assert m, msg[:300]
    return int(m.group(1)), int(m.group(2))


def test_cut_after_a_multiline_attribute_is_reported_at_the_end():
    assert _ours(MULTILINE) is None
    cut = MULTILINE[:MULTILINE.index("  ROOT d")]
    # hand-derived: the text ends at the start of line 9 (the cut ROOT line), where '}' is missing
    assert _ours(cut) == (9, 1)


@pytest.mark.oracle
def test_truncated_modules_fail_on_xlas_line():
    require_jax()
    from tests import xla_oracle

    full = require_shared("corpus", "xla_benchmarks", "nv_maxtext_1n1g_jit_train_step_before_optimization.hlo").read_text()
    newlines = [m.start() for m in re.finditer(r"\n", full)]
    at_lines = [newlines[len(newlines) * k // 5] + 1 for k in range(1, 5)]          # between instructions
    mid = [int(len(full) * f) for f in (0.1, 0.33, 0.61, 0.9)]                          # inside an instruction
    texts = [MULTILINE[:MULTILINE.index("  ROOT d")]] + [full[:c] for c in at_lines + mid]
    results = xla_oracle.parse_many(texts)
    for k, (text, (ok, msg)) in enumerate(zip(texts, results)):
        assert not ok
        xla = _xla_where(msg)
        ours = _ours(text)
        assert ours is not None and ours[0] == xla[0], (k, ours, xla, msg[:200])
        if k <= len(at_lines):    # cut at a line boundary: the very end of the text, as XLA says
            assert ours == xla, (k, ours, xla)
