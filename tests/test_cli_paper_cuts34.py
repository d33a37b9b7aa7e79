"""Issue 24's paper cuts in the CLI and its reports (round 34, helper cli): new user 33's F11, F14, F15, F20, F21,
F6, F7 and the fresh-clone check 33's items 3 and 4.  Each test reads a message or a figure the command gives and
fails on the round-33 main."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from hloshard import autoshard
from hloshard.commands import cost as _cost, explain as _explain, solve as _solve  # noqa: F401  (bound before a patch)
from hloshard.cli import main
from tests.conftest import ROOT
from tests.patching import setattr_everywhere

SAMPLES = ROOT / "samples"
MLP_PRE = SAMPLES / "mlp_train_step.pre.hlo"


def run(args, **kw):
    return CliRunner().invoke(main, [str(a) for a in args], **kw)


# --------------------------------------------------------------------------- F11: options checked before any work

@pytest.mark.parametrize("command", ["solve", "cost"])
@pytest.mark.parametrize("tie, message", [
    ("1=5", "a tie needs the same shape and type"),
    ("0=999", "the entry computation has no parameter 999"),
    ("7=0", "index {7} does not exist"),
])
def test_a_bad_tie_is_refused_before_any_work(command, tie, message, monkeypatch, tmp_path):
    """New user 33 F11: ``--tie 1=5`` (different shapes) was found only after the cost graph's build (85-119 s on
    NeoX), or never when the build ran out of time (exit 3).  Checked on the parsed module: the build is never
    reached."""
    def reached(*a, **k):
        raise AssertionError("the cost graph was built before the --tie was checked")

    for name in ("solve_module", "evaluate_module", "evaluate_as_written", "build_graph"):
        if hasattr(autoshard, name):
            setattr_everywhere(monkeypatch, autoshard, name, reached)
    r = run([command, MLP_PRE, "--mesh", "2x4", "--tie", tie, "-o", tmp_path / "o.hlo"])
    assert r.exit_code == 2, r.output
    assert message in r.stderr and "Traceback" not in r.output, r.stderr
    assert not (tmp_path / "o.hlo").exists()


# --------------------------------------------------------------------------- F15: our own output lints clean

REMAT = """HloModule remat

ENTRY main {
  p0 = f32[16,64] parameter(0)
  p1 = f32[64] parameter(1)
  t = (f32[16,64], f32[64]) tuple(p0, p1)
  ob = (f32[16,64], f32[64]) opt-barrier(t)
  g0 = f32[16,64] get-tuple-element(ob), index=0
  g1 = f32[64] get-tuple-element(ob), index=1
  r1 = f32[1,64] reshape(g1)
  r2 = f32[64] reshape(r1)
  b = f32[16,64] broadcast(r2), dimensions={1}
  ROOT a = f32[16,64] add(g0, b)
}
"""


def test_solve_output_with_a_folded_reshape_lints_clean(tmp_path):
    """New user 33 F15: ``lint`` flagged 36 HS501 on solve's own output of a ``jax.checkpoint`` model -- the reshapes
    that fold back onto an opt-barrier's element, which solve leaves unannotated on purpose (a sharding there lands
    on the whole tuple in XLA: strategy.reshape.folds_onto_tuple).  The rule was wrong: it now knows them."""
    src, out = tmp_path / "remat.hlo", tmp_path / "remat.solved.hlo"
    src.write_text(REMAT)
    r = run(["solve", src, "--mesh", "8", "--quiet", "--deterministic", "-o", out])
    assert r.exit_code == 0, r.output
    text = out.read_text()
    assert "r2 = f32[64]{0} reshape(r1)\n" in text or "r2 = f32[64] reshape(r1)\n" in text   # left open by solve
    r = run(["lint", out])
    assert r.exit_code == 0 and "HS501" not in r.output, r.output
    assert "All checks passed" in r.output


# --------------------------------------------------------------------------- F14: the plan row names the replacement

def test_the_plan_row_names_what_replaced_the_search_answer():
    """New user 33 F14: the summary said the plan was "put in its place after it (the notes and warnings say which)"
    while only ``report["memory_guard"]["pareto"]["note"]`` named it.  The row now names it from the report, and
    never promises a note that does not exist."""
    from hloshard.autoshard.solve import REPLACED_SOURCE
    from hloshard.summary import plan_words

    assert "notes and warnings" not in REPLACED_SOURCE
    note = "Pareto step: peak 59.3 MiB -> 49.6 MiB per device (predicted) at cost 22,838,760"
    report = {"plan_source": REPLACED_SOURCE,
              "memory_guard": {"pareto": {"applied": True, "note": note}, "cheapest": {"taken": False}}}
    assert plan_words(report) == f"{REPLACED_SOURCE}: the memory guard's {note}"
    report["memory_guard"]["fallback"] = "data-parallel"   # an earlier rule; the Pareto step ran last
    assert plan_words(report).endswith(note)
    report["memory_guard"]["your_layout"] = {"taken": "your layout"}
    assert "your layout, returned by the memory guard" in plan_words(report)
    assert plan_words({"plan_source": REPLACED_SOURCE}) == REPLACED_SOURCE   # nothing names it: nothing promised


# --------------------------------------------------------------------------- F20 / F21: what a budget's limit is made of

def test_a_tpu_refusal_names_the_heap_allowance_not_the_xla_margin():
    """New user 33 F21: ``--device tpu-v5e --memory-budget 40MiB`` was refused as "0 bytes: the budget less 100.0%
    kept for the model's largest measured under-estimate of XLA's peak"; the limit is the budget less libtpu's heap
    allowance for the module (and the VMEM where its temporaries may not fit it), which is what is said now."""
    from hloshard.autoshard.report import limit_words
    from hloshard.cost.memory import heap_allowance, model_limit
    from hloshard.cost.tpu_heap import TpuMemoryDevice
    from hloshard.units import format_bytes

    device = TpuMemoryDevice("tpu-v5e", 4460, False)   # the Mixer's 3,000-instruction module: a large heap bound
    budget = 40 << 20
    assert model_limit(budget, device) == 0
    words = limit_words(budget, 0, device)
    assert "under-estimate" not in words and "100.0%" not in words
    assert f"libtpu's heap allowance for this module, {format_bytes(heap_allowance(device))}" in words
    assert "4,460 slots" in words and "and the VMEM" in words and "that leaves nothing of this budget" in words
    fits = TpuMemoryDevice("tpu-v5e", 100, True)
    words = limit_words(budget, model_limit(budget, fits), fits)
    assert "VMEM" not in words and "leaves nothing" not in words and "100 slots" in words


def test_a_cpu_refusal_says_both_margins():
    """New user 33 F20: a NeoX budget of 36 MiB refused though hloshard's own plan runs at 34.74 MB under XLA -- the
    model over-estimates that model by 12% and the under-estimate margin is taken off the budget on top.  The
    refusal says what its limit is made of (the budget / XLA_CPU_UNDERESTIMATE) and the lowest peak XLA may run the
    nearest plan at (XLA_CPU_OVERESTIMATE)."""
    from hloshard.autoshard.report import limit_words, over_words
    from hloshard.cost.memory import XLA_CPU_UNDERESTIMATE, model_limit, xla_lower_bound
    from hloshard.units import format_bytes

    budget, need = 36 << 20, 37_537_956
    words = limit_words(budget, model_limit(budget), None)
    assert f"the budget / XLA_CPU_UNDERESTIMATE = {XLA_CPU_UNDERESTIMATE}" in words
    low = over_words(need, None)
    assert f"at as little as {format_bytes(xla_lower_bound(need))}" in low and "the two margins add" in low
    assert over_words(need, "tpu-v5e") == ""


# --------------------------------------------------------------------------- fresh-clone check 33, item 3

TINY = """HloModule tiny

ENTRY main {
  a = f32[2] parameter(0)
  b = f32[2] parameter(1)
  ROOT c = f32[2] add(a, b)
}
"""


def test_a_cost_0_plan_proven_optimal_is_not_told_it_may_improve(tmp_path):
    """fresh33 item 3: ``solve tiny.hlo --mesh 8`` reported "proven optimal" and cost 0.00, then a note that the
    refinement 2x4 "may find a cheaper plan" and a warning ending "or a larger --time-limit (the search may have
    ended at its start)"."""
    src = tmp_path / "tiny.hlo"
    src.write_text(TINY)
    r = run(["solve", src, "--mesh", "8", "-o", tmp_path / "o.hlo"])
    assert r.exit_code == 0, r.output
    assert "proven optimal" in r.stderr
    flat = " ".join(r.stderr.split())
    assert "may find a cheaper plan" not in flat and "larger --time-limit" not in flat, flat
    assert "the plan replicates the whole step" in flat   # the warning itself stays: it says what the plan is


def test_a_json_run_warning_points_at_the_report_not_above():
    """fresh33 item 3: with ``--format json`` no summary is printed, yet the warning said "(the estimated step time
    above, ...)"."""
    from hloshard.summary import user_warning

    report = {"solver_objective": 100.0, "objective": 98.0, "estimated_step_time_s": 1.5e-5,
              "step_time": {"seconds_per_unit": 1e-7}, "mesh": {"shape": [2, 4]}}
    w = "the solver's choice costs 100.00 but the written module 98.00"
    assert "the estimated step time above" in user_warning(w, report)
    said = user_warning(w, report, summary=False)
    assert "above" not in said and "the estimated step time in the report" in said, said


def test_the_written_vs_solver_warning_gives_the_reason_that_fits_the_direction():
    """fresh35 item 5: a written module dearer than the solver's choice was explained by "the written module is
    priced with the cheapest choice it allows", which can only make it cheaper; and the solver's objective was set
    beside the step time above (a roofline), two different quantities."""
    from hloshard.summary import user_warning

    base = {"mesh": {"shape": [2, 4]}, "written_mesh": "2x4", "step_time": {"seconds_per_unit": 1e-12}}
    w = "the solver's choice costs 2,195,276.75 but the written shardings 2,675,293.00"
    dearer = user_warning(w, dict(base, solver_objective=2_195_276.75, objective=2_675_293.0))
    assert "2.20 us of objective" in dearer and "2.68 us" in dearer, dearer
    assert "some of the solver's choices are not among them" in dearer
    assert "priced with the cheapest choice it allows" not in dearer
    assert "roofline of the written module, not its objective" in dearer
    cheaper = user_warning(w, dict(base, solver_objective=2_675_293.0, objective=2_195_276.75))
    assert "priced with the cheapest choice it allows" in cheaper and "not among them" not in cheaper, cheaper


def test_a_non_integer_seed_is_called_what_it_is():
    """fresh33 item 3: click said ``'abc' is not a valid integer range``."""
    r = run(["solve", MLP_PRE, "--mesh", "2x4", "--seed", "abc"])
    assert r.exit_code == 2
    assert "'abc' is not a valid integer." in r.stderr and "integer range" not in r.stderr, r.stderr


def test_diff_of_two_unrelated_modules_names_both(tmp_path):
    """fresh33 item 3: the refusal named only B (the last file read)."""
    other = SAMPLES / "transformer_block.pre.hlo"
    r = run(["diff", MLP_PRE, other, "--mesh", "2x4"])
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith(f"hloshard: error: {MLP_PRE} and {other}: the two modules share only "), r.stderr


def test_explain_names_the_objective_apart_from_cost_step_time():
    """fresh33 item 3: ``explain --device`` said ``module cost ... resharding 0.00 us`` where ``cost --device`` says
    ``estimated step time ... resharding 30.47 us``: one word, two figures.  explain's figure is the objective."""
    r = run(["explain", SAMPLES / "mlp_train_step.propagated.hlo", "--mesh", "2x4", "--device", "tpu-v5e",
             "--instruction", "gt.1"])
    assert r.exit_code == 0, r.output
    flat = " ".join(r.output.split())
    assert "module objective " in flat and "(the objective's compute " in flat and "module cost" not in flat


# --------------------------------------------------------------------------- fresh-clone check 33, item 4

def test_a_budget_of_another_device_is_warned(tmp_path):
    """``--device h100-sxm --memory-budget tpu-v5e`` held an H100 plan to 16.0 GiB, silently; and the share of an
    80 GiB budget read "0% of it"."""
    r = run(["solve", MLP_PRE, "--mesh", "2x4", "--device", "h100-sxm", "--memory-budget", "tpu-v5e",
             "--time-limit", "10", "-o", tmp_path / "o.hlo"])
    assert r.exit_code == 0, r.output
    flat = " ".join(r.stderr.split())
    assert "warning: --memory-budget tpu-v5e is that device's HBM (16.0 GiB), but the plan is priced for h100-sxm" \
        in flat, flat
    assert " 0% of it" not in flat and "the predicted peak is 0.01% of it" in flat, flat
    r = run(["solve", MLP_PRE, "--mesh", "2x4", "--device", "h100", "--memory-budget", "h100-80gb",
             "--time-limit", "10", "-o", tmp_path / "o.hlo"])   # aliases of the same device: nothing to say
    assert r.exit_code == 0 and "is that device's HBM" not in r.stderr, r.stderr


def test_the_mesh_line_gives_alpha_and_beta_units_with_a_device(tmp_path):
    """fresh33 item 4: ``alpha 7.72656e+06,5.79492e+06, beta 19.3164,2.14627`` had no unit under ``--device``: said
    as the latency and bandwidth they stand for (h100-sxm: InfiniBand 8 us / 50 GB/s, NVLink 6 us / 450 GB/s)."""
    r = run(["solve", MLP_PRE, "--mesh", "data=2:dcn,model=4", "--device", "h100-sxm", "--time-limit", "10",
             "-o", tmp_path / "o.hlo"])
    assert r.exit_code == 0, r.output
    flat = " ".join(r.stderr.split())
    assert "per axis latency 8 us,6 us and bandwidth 50 GB/s,450 GB/s (alpha, beta)" in flat, flat


def test_lint_and_solve_point_at_the_same_column(tmp_path):
    """fresh33 item 4: a misspelt sharding attribute was at 41:40 for lint (the ``sharding=``) and 41:71 for solve
    (the word): one validity rule, one position -- the parser's."""
    text = MLP_PRE.read_text().splitlines()
    row = next(i for i, line in enumerate(text) if "parameter(" in line and "sharding={" not in line)
    text[row] += ", sharding={devices=[2,1,4]<=[8] last_tile_dim_replicat}"
    bad = tmp_path / "bad.hlo"
    bad.write_text("\n".join(text) + "\n")
    col = text[row].index("last_tile_dim_replicat") + 1
    solved = run(["solve", bad, "--mesh", "2x4", "-o", tmp_path / "o.hlo"])
    linted = run(["lint", bad])
    assert solved.exit_code == 2 and linted.exit_code == 1, (solved.output, linted.output)
    assert f"bad.hlo:{row + 1}:{col}: error: sharding: unknown sharding attribute" in solved.stderr, solved.stderr
    assert f"bad.hlo:{row + 1}:{col}: HS001 sharding: unknown sharding attribute" in linted.stdout, linted.stdout
    # and no advice to price a file that does not load (fresh33: lint's note on an unparsable file)
    assert "--complete xla" not in linted.stderr, linted.stderr


def test_lint_gives_no_propagation_advice_for_xla_compiled_text(tmp_path):
    """New user 33 F15: XLA's compiled per-device text (``compiled.as_text()``, ``is_scheduled=true``) was told that
    ``cost --complete xla --xla`` prices what XLA's propagation adds: a partitioned program has nothing left to
    propagate.  A pre-partitioning export with a few shardings still gets the note."""
    body = ["  p{0} = f32[8]{{0}} parameter({0}){1}".format(i, ", sharding={replicated}" if i == 0 else "")
            for i in range(4)]
    module = "\n".join(["ENTRY main {"] + body + ["  ROOT t = (f32[8]{0}, f32[8]{0}) tuple(p0, p1)", "}", ""])
    compiled, export = tmp_path / "compiled.hlo", tmp_path / "export.hlo"
    compiled.write_text("HloModule jit_step, is_scheduled=true, num_partitions=8\n\n" + module)
    export.write_text("HloModule jit_step, num_partitions=8\n\n" + module)
    r = run(["lint", compiled, export])
    assert "export.hlo: 1 of" in r.stderr and "compiled.hlo" not in r.stderr, r.stderr


# --------------------------------------------------------------------------- F6: which partitioner --complete xla is

@pytest.mark.oracle
def test_complete_xla_of_a_shardy_export_names_gspmd_and_what_jax_jit_runs():
    """New user 33 F6: ``cost --complete xla --xla`` of a Shardy-mode export said "XLA's propagation (GSPMD ..., as
    jax.jit runs it)" and "XLA 11.8 MiB" -- GSPMD's figure, while jax.jit (Shardy by default) moved 28.6 MB.  The
    completion line and the headline now say GSPMD and that jax.jit's default for the module is Shardy."""
    from tests.conftest import require_jax

    require_jax()
    r = run(["cost", SAMPLES / "mlp_train_step.shardy.pre.hlo", "--mesh", "2x4", "--complete", "xla", "--xla"])
    assert r.exit_code == 0, r.output
    flat = " ".join(r.output.split())
    assert "as jax.jit runs it" not in flat, flat
    assert "what jax.jit runs with jax_use_shardy_partitioner=False; this is a Shardy-mode export" in flat, flat
    assert "by GSPMD (jax.jit's default for this Shardy-mode export, Shardy, is not measured here" in flat, flat


# --------------------------------------------------------------------------- F7: a replicated-parameter plan's memory

def test_every_parameter_replicated_is_said_with_its_memory_cost():
    """New user 33 F7: ``--mesh data=2:dcn,model=4 --device h100-sxm`` replicated all 84 parameters of a NeoX step
    (76.7 MiB per device against 37.2 MiB) for 4.6% less modelled time; the summary did not say so.  A plan that moves
    data with every parameter replicated is now said, with the parameters' bytes, their share of the peak, what they
    would hold split, and that memory is free to the objective below the budget (the device's HBM by default)."""
    from hloshard.autoshard.report import replicated_parameters_note
    from hloshard.hlo import parse_module
    from hloshard.hlo.sharding import HloSharding

    module = parse_module(MLP_PRE.read_text(), str(MLP_PRE))
    params = [p for p in module.entry.parameters if p.shape.is_array and p.shape.rank >= 1]
    for p in module.entry.parameters:
        p.sharding = HloSharding.replicated()
    held = sum(p.shape.byte_size for p in params)
    report = {"predicted_collective_bytes_per_device": 1024, "peak_memory_per_device": 2 * held,
              "memory_budget": 80 << 30}
    note = replicated_parameters_note(report, module, 8, "h100-sxm")
    assert note is not None and note.startswith(f"all {len(params)} entry parameters (the batch among them) enter "
                                                f"replicated"), note
    assert "50% of the" in note and "80.0 GiB, h100-sxm's HBM" in note and "trades step time for memory" in note
    assert replicated_parameters_note(dict(report, predicted_collective_bytes_per_device=0), module, 8) is None
    params[0].sharding = None   # a parameter not replicated (left open): nothing to say
    assert replicated_parameters_note(report, module, 8, "h100-sxm") is None


# --------------------------------------------------------------------------- F13: where a short limit went

def test_a_build_that_passes_its_deadline_says_what_went_before_it(monkeypatch, tmp_path):
    """New user 33 F13: ``--mesh 3x3 --time-limit 5`` at load 20 exited 3 with "building the cost graph passed its
    deadline after 0.0 s": the interpreter's start had used the limit, and the message read as the graph's fault.
    The message now says what the limit went to before the build.  (Round 38, new user 37's F16: with no graph
    built, a plan known without a search is written, exit 0, and the warning carries the same words;
    tests/test_solve_known_without_graph.py.)"""
    from hloshard.autoshard.build import BuildStopped

    def stopped(*a, **k):
        raise BuildStopped("strategies", 1, 1891, 0.0)

    setattr_everywhere(monkeypatch, autoshard, "solve_module", stopped)
    r = run(["solve", MLP_PRE, "--mesh", "2x4", "--time-limit", "5", "-o", tmp_path / "o.hlo"])
    assert r.exit_code == 0, r.output
    flat = " ".join(r.stderr.split())
    assert "nothing was searched: " in flat, flat
    assert "passed its deadline after 0.0 s (strategies: 1 of 1891 done); of the --time-limit 5 s, " in flat, flat
    assert "went before the build (the interpreter's start and hloshard's imports " in flat


def test_a_named_refinement_is_printed_not_eaten_as_markup():
    """New user 33's NeoX summaries read "refined internally to 2x2x2  (see the note)": the axis labels of a named
    mesh's refinement, ``[data, model:(1)2, model:(2)2]``, were taken by rich for a markup tag and dropped."""
    from hloshard.summary import render_summary

    report = {"mesh": {"shape": [2, 2, 2], "user_shape": [2, 4], "axis_names": ["data", "model"]},
              "mesh_description": "2x4 (data=2, model=4) from --mesh, refined internally to 2x2x2 "
                                  "[data, model:(1)2, model:(2)2]",
              "breakdown": {"compute": 1.0, "communication": 0.0, "resharding": 0.0}, "objective": 1.0,
              "peak_memory_per_device": 1024, "status": "optimal", "warnings": []}
    text = render_summary(report, files=False, width=400)
    assert "refined internally to 2x2x2 [data, model:(1)2, model:(2)2] (see the note)" in text, text


def test_the_inputs_row_does_not_call_every_leading_dim_a_batch():
    """fresh33 item 3: a time-major ``lax.scan`` step's xs ``[6, 32, 256]`` (T, B, H) was told "a split spec keeps
    the batch split" -- its leading dim is the scan's time axis."""
    from hloshard.summary import replicated_inputs_row

    row = replicated_inputs_row({"replicated_inputs": [{"input": "xs", "shape": [6, 32, 256], "axes": ["data"]}]})
    assert "keeps the batch split" not in row and "if that dim is the batch (not, e.g., a scan's time axis)" in row
