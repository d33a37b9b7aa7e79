"""Output that says exactly what it means (issue 28, item 5): the user's mesh beside the internal
refinement, the progress line in report units, one instruction count, strategies in words, tables whole
when piped, the per-layer chart grouped by the layer named in ``op_name``."""

from __future__ import annotations

import json
import re

from click.testing import CliRunner

from hloshard.cli import main
from tests.conftest import SAMPLES

ATTN = SAMPLES / "attention_6heads.pre.hlo"      # --mesh 2x4 is refined internally to 2x2x2
MLP = SAMPLES / "mlp_train_step.pre.hlo"
MLP_PROP = SAMPLES / "mlp_train_step.propagated.hlo"
INTERNAL_LABEL = re.compile(r"\bS\d+@\d|\|allreduce|\bfollow\d")


def _run(*args):
    r = CliRunner().invoke(main, [str(a) for a in args])
    assert r.exit_code == 0, r.output
    return r


def test_progress_line_in_cost_units():
    """The solver's integer objective (units of cost_scale) is shown as the summary prints it."""
    from hloshard.commands.progress import SolverProgress

    p = SolverProgress(False, 60.0)
    p({"phase": "building"})
    p({"phase": "greedy", "objective": 284_395_386_220, "cost_scale": 0.001})
    p({"phase": "bound", "bound": 284_000_000_000, "cost_scale": 0.001})
    text = p.text()
    assert "objective 284,395,386.22" in text and "bound 284,000,000.00" in text
    assert "284,395,386,220" not in text
    # an IOPDDL problem (no cost_scale): its integers as they are
    q = SolverProgress(False, None)
    q({"phase": "greedy", "objective": 1234567})
    assert "objective 1,234,567" in q.text() and " / " not in q.text()


def test_solve_summary_and_html_show_the_users_mesh_and_the_refinement(tmp_path):
    out, html = tmp_path / "attn.hlo", tmp_path / "attn.html"
    r = _run("solve", ATTN, "--mesh", "2x4", "--time-limit", "1", "--deterministic", "-o", out, "--html", html)
    mesh_line = next(line for line in r.stderr.splitlines() if line.startswith("mesh "))
    assert "2x4 from --mesh; refined internally to 2x2x2" in mesh_line
    assert "note: mesh 2x4 refined internally to 2x2x2" in r.stderr
    page = html.read_text()
    assert "2x4 from --mesh; refined internally to 2x2x2" in page
    assert re.search(r"<td>note</td><td>mesh 2x4 refined internally to 2x2x2[^<]*so that", page)


def test_one_instruction_count_everywhere(tmp_path):
    out = tmp_path / "mlp.hlo"
    solve = _run("solve", MLP, "--mesh", "2x4", "--time-limit", "1", "--deterministic", "-o", out).stderr
    cost = _run("cost", MLP, "--mesh", "2x4").stdout
    n_changed = re.search(r"changed\s+[\d,]+ of ([\d,]+) instructions", solve).group(1)
    n_input = re.search(r"carries shardings on [\d,]+ of ([\d,]+) instructions", solve).group(1)
    n_cost = re.search(r"[\d,]+ of ([\d,]+) instructions carried no sharding", cost).group(1)
    assert n_changed == n_input == n_cost
    rep = json.loads(_run("cost", MLP, "--mesh", "2x4", "--format", "json").stdout)
    assert str(rep["instructions_counted"]) == n_cost.replace(",", "")


def test_explain_describes_the_strategy_in_words(tmp_path):
    html = tmp_path / "e.html"
    r = _run("explain", ATTN, "--instruction", "dot_general.8", "--mesh", "2x4", "--alternatives", "1",
             "--html", html)
    data = json.loads(_run("explain", ATTN, "--instruction", "dot_general.8", "--mesh", "2x4",
                           "--alternatives", "1", "--format", "json").stdout)
    desc = data["nodes"][0]["strategy_description"]
    assert desc in r.stdout and "strategy: " + desc in r.stdout
    assert not INTERNAL_LABEL.search(r.stdout), r.stdout
    assert not INTERNAL_LABEL.search(desc)
    assert re.search(r"(rows|columns|dim \d) over|replicated", desc)
    page = html.read_text()
    assert f"Strategy: {desc}" in page and not INTERNAL_LABEL.search(page)


def test_describe_strategy_of_a_dot_with_a_reduction():
    """A dot split on its contracting dim: 'rows over data, all-reduce over model' and the like."""
    from hloshard.autoshard import build_graph
    from hloshard.mesh_setup import mesh_from_options
    from hloshard.explain_instruction import describe_strategy
    from hloshard.load import load_module

    m = load_module(str(MLP))
    mesh = mesh_from_options(m, "2x4", None, None, None)
    g = build_graph(m, mesh, keep="none")
    dots = [n for n in g.nodes if n.instr.opcode == "dot"]
    words = {st.name: describe_strategy(st, mesh) for st in dots[0].strategies}   # dot_general of the 1st layer
    # on the unnamed 2x4 mesh: rows over mesh axis 0, the contracting dim split over axis 1 and summed
    assert words["S0@0|allreduce"] == "rows over axis 0, all-reduce over axis 1"
    assert words["R"] == "replicated"
    assert words["S0@0,S1@1"] == "rows over axis 0, columns over axis 1"
    assert words["S0@0,S1@1|allreduce+slice"] == ("rows over axis 0, columns over axis 1, all-reduce over axis 1, "
                                                  "then each device keeps its slice of the sum")


def test_tables_are_whole_when_piped():
    """Not a terminal (CliRunner, a pipe): no cell is cut to '...'; every sharding appears whole."""
    text = _run("diff", MLP, MLP_PROP, "--mesh", "2x4", "--top", "50").stdout
    rep = json.loads(_run("diff", MLP, MLP_PROP, "--mesh", "2x4", "--format", "json").stdout)
    assert "…" not in text
    for d in rep["differences"][:50]:
        line = next(x for x in text.splitlines() if x.startswith(f"│ {d['instruction']} "))
        assert d["sharding_a"] in line and d["sharding_b"] in line
    expl = _run("explain", MLP_PROP, "--instruction", "dot_general.9", "--mesh", "2x4").stdout
    assert "…" not in expl


def test_solve_summary_whole_when_piped(tmp_path):
    out, report = tmp_path / "attn.hlo", tmp_path / "r.json"
    r = _run("solve", ATTN, "--mesh", "2x4", "--time-limit", "1", "--deterministic", "-o", out, "--report", report)
    rep = json.loads(report.read_text())
    assert "…" not in r.stderr
    for e in rep["top_edges"]:
        if e["src_sharding"]:
            assert e["src_sharding"] in r.stderr


LAYERS = """HloModule layers, num_partitions=8

ENTRY %main {
  %x = f32[64,128] parameter(0)
  %w0 = f32[128,256] parameter(1)
  %w1 = f32[256,128] parameter(2)
  %d0 = f32[64,256] dot(%x, %w0), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(step)/jvp(decoder)/layer_0/mlp/dot_general"}
  %t0 = f32[64,256] tanh(%d0), metadata={op_name="jit(step)/jvp(decoder)/layer_0/mlp/tanh"}
  %d1 = f32[64,128] dot(%t0, %w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(step)/jvp(decoder)/layer_1/mlp/dot_general"}
  %t1 = f32[64,128] tanh(%d1), metadata={op_name="jit(step)/transpose(jvp(decoder))/layer_1/mlp/tanh"}
  ROOT %r = f32[64,128] add(%t1, %x), metadata={op_name="jit(step)/jvp(decoder)/residual/add"}
}
"""


def test_html_chart_groups_by_the_layer_named_in_op_name(tmp_path):
    src, out, html = tmp_path / "layers.hlo", tmp_path / "out.hlo", tmp_path / "layers.html"
    src.write_text(LAYERS)
    _run("solve", src, "--mesh", "2x4", "--time-limit", "1", "--deterministic", "--quiet", "-o", out,
         "--html", html)
    page = html.read_text()
    assert "Cost by kind, per layer" in page
    labels = re.findall(r'text-anchor="end" font-size="12">([^<]*)</text>', page)
    assert "decoder/layer_0" in labels and "decoder/layer_1" in labels
    assert "main" not in labels


def test_layer_of():
    from hloshard.report_html import layer_of

    assert layer_of("jit(step)/jvp(decoder)/layer_0/attn/dot_general") == "decoder/layer_0"
    assert layer_of("jit(step)/transpose(jvp(decoder))/layer_11/mlp/dot_general") == "decoder/layer_11"
    assert layer_of("jit(train_step)/jvp(loss_fn)/blocks.3/add") == "loss_fn/blocks.3"
    assert layer_of("jit(step)/jvp(decoder)/embed/gather") == "decoder"
    assert layer_of("jit(f)/dot_general") is None and layer_of(None) is None


def test_root_tuple_row_is_abbreviated_not_thousands_wide():
    """A root tuple in the peak-tensors table (new-user trial: a 2,466-character line): the first
    elements, then the count; a single sharding or a short tuple is unchanged."""
    from hloshard.textout import abbreviate_tuple, tuple_elements

    shape = "(" + ", ".join(f"f32[{i},64]{{1,0}}" for i in range(1, 40)) + ")"
    short = abbreviate_tuple(shape)
    assert len(short) <= 100 and short.startswith("(f32[1,64]{1,0}, ") and short.endswith("... 39 elements)")
    sharding = "{" + ", ".join(["{devices=[2,1,4]<=[8] last_tile_dim_replicate}"] * 20) + "}"
    assert abbreviate_tuple(sharding).endswith("... 20 elements, 0 replicated}")
    # three replicated first elements do not read as "every output replicated" (new user 30 F13)
    mixed = "{" + ", ".join(["{replicated}"] * 3 + ["{devices=[2,1,4]<=[8] last_tile_dim_replicate}"] * 17) + "}"
    assert abbreviate_tuple(mixed).startswith("{{replicated}, {replicated}")
    assert abbreviate_tuple(mixed).endswith("... 20 elements, 3 replicated}")
    assert tuple_elements(sharding) == ["{devices=[2,1,4]<=[8] last_tile_dim_replicate}"] * 20
    single = "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"
    assert tuple_elements(single) is None and abbreviate_tuple(single, 10) == single
    assert abbreviate_tuple("(f32[2], s32[])") == "(f32[2], s32[])"
