"""The Pareto step asks no limit that the plan's written module already keeps (issue 24, round 37): the memory guard
judges a plan by its written module's peak (every communication buffer and pin priced), the step by the graph's
figure; where the written peak is at or below the step's highest limit (the graph peak read at the model's measured
over-estimate, ``xla_lower_bound``), a plan the step took there would be no evidence of a lower peak in the figure
the plan is judged by (keras-hub's 4-layer Gemma: written 135.8 MB, graph 165.9 MB, the step asked 143.0 MB, spent
11.3 s of the guard's 28.3 s at load 17, and its plan was not taken).  ``mlp_train_step`` at data=2,model=4
(deterministic, no jax, no clock): the step's answer with the written peak at and just above its highest limit."""

from pathlib import Path

from hloshard.autoshard import solve_module
from hloshard.autoshard.solve import pareto_step
from hloshard.cost.memory import xla_lower_bound
from hloshard.hlo import parse_module
from hloshard.autoshard.aliases import Tie
from hloshard.mesh import DeviceMesh

ROOT = Path(__file__).resolve().parent.parent


def _first():
    module = parse_module((ROOT / "samples" / "mlp_train_step.pre.hlo").read_text(), "<mlp>")
    for p in module.entry.parameters:   # nothing sharded, as a user hands it over
        p.sharding = None
    module.ties = [Tie((q + 1,), q) for q in (0, 1, 2, 3)]   # the weights; 4 and 5 are the batch
    return solve_module(module, DeviceMesh.parse("data=2,model=4"), keep="io", time_limit=1, deterministic=True,
                        apply=False)


def test_a_written_peak_within_the_steps_highest_limit_skips_the_step():
    first = _first()
    hi = xla_lower_bound(int(first.evaluation.peak_memory))
    same, info = pareto_step(first, 1.0, deterministic=True, written_peak=hi)
    assert same is first and info["skipped"] and not info["tried"] and not info["applied"]
    assert info["written_peak_bytes"] == hi and "written module" in info["note"]
    # one byte above the highest limit: the step runs as without the written figure (it asks that limit first)
    ran, rinfo = pareto_step(first, 1.0, deterministic=True, written_peak=hi + 1)
    base, binfo = pareto_step(first, 1.0, deterministic=True)
    assert not rinfo.get("skipped") and rinfo["tried"] and rinfo["tried"][0]["limit_bytes"] == hi
    assert [t.get("limit_bytes") for t in rinfo["tried"]] == [t.get("limit_bytes") for t in binfo["tried"]]
    assert list(ran.choice) == list(base.choice)
