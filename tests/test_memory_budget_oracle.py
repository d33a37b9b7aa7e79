"""A memory budget is a promise, checked through XLA (issue 25).

For three samples (mesh 2x4, 8 fake CPU devices): XLA's ``memory_analysis()`` of GSPMD's own plan
(``NAME.propagated.hlo``) gives the reference peak P; ``hloshard solve --memory-budget B`` runs at
B = 100%, 80%, 60% and 40% of P.  Every plan it accepts (exit 0) must fit under B when XLA compiles the
written module; every refusal (exit 3) that states a lower bound ("need at least X per device") must
state one no larger than the smallest XLA peak among the plans hloshard wrote for that module and
GSPMD's.  (hloshard keeps a budget with the model's measured under-estimate as margin,
``hloshard.cost.memory.XLA_CPU_UNDERESTIMATE``, so the tighter budgets are refused.)
"""

from __future__ import annotations

import pathlib
import re

import pytest
from click.testing import CliRunner

from hloshard.cli import main

SAMPLES = pathlib.Path(__file__).resolve().parent.parent / "samples"
CASES = ["mlp_train_step", "conv_layer", "attention_6heads"]
SHARES = (1.0, 0.8, 0.6, 0.4)


def _bound(message: str) -> int | None:
    """The lower bound a refusal states, in bytes ("need at least 1,234 bytes (...) per device")."""
    m = re.search(r"need at least ([\d,]+) bytes", message)
    return int(m.group(1).replace(",", "")) if m else None


@pytest.mark.oracle
@pytest.mark.parametrize("name", CASES)
def test_budget_is_kept_under_xla(tmp_path, name):
    from tests.conftest import require_jax

    require_jax()
    from hloshard.xla_memory import xla_memory

    pre = SAMPLES / f"{name}.pre.hlo"
    gspmd = xla_memory([(SAMPLES / f"{name}.propagated.hlo").read_text()], 8)[0]
    assert gspmd.error is None, gspmd.error
    peak = gspmd.total
    accepted, refused = [], []
    for share in SHARES:
        budget = int(peak * share)
        out = tmp_path / f"{name}.{int(share * 100)}.hlo"
        r = CliRunner().invoke(main, ["solve", str(pre), "--mesh", "2x4", "--memory-budget", str(budget),
                                      "--deterministic", "--time-limit", "2", "--workers", "1", "-o", str(out)])
        assert r.exit_code in (0, 3), r.output
        if r.exit_code == 0:
            accepted.append((budget, out.read_text()))
        else:
            assert not out.exists(), "a refused budget writes no output"
            refused.append((budget, _bound(r.output)))
    measured = xla_memory([t for _, t in accepted], 8) if accepted else []
    for (budget, _), m in zip(accepted, measured):
        assert m.error is None, m.error
        assert m.total <= budget, (f"{name}: budget {budget} accepted but XLA needs {m.total} "
                                   f"(argument {m.argument}, output {m.output}, temp {m.temp}, alias {m.alias})")
    smallest = min([m.total for m in measured] + [peak])   # GSPMD's plan exists too
    for budget, bound in refused:
        if bound is not None:
            assert bound <= smallest, (f"{name}: budget {budget} refused with a lower bound of {bound} bytes, "
                                       f"above XLA's {smallest} for a plan hloshard wrote")
