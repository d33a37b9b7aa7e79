"""Round 35 (issue 24: the memory guard's CPU on keras-hub's 4-layer Gemma): :func:`hloshard.jax.guard.entry_floor` --
the entry parameters' and the outputs' bytes per device at a baseline's entry shardings -- is a lower bound of the
peak the memory model prices for any plan with that entry (parameters and outputs are live over the whole run), so
a data-parallel or FSDP baseline whose floor is above a baseline already priced is not priced
(:func:`hloshard.jax.guard._other_baselines`): ``choose_baseline`` could not take it."""

from pathlib import Path

import pytest

from hloshard.autoshard.evaluate import evaluate_module
from hloshard.commands.options import apply_ties
from hloshard.hlo.parser import parse_file
from hloshard.mesh import DeviceMesh

SAMPLES = Path(__file__).resolve().parents[1] / "samples"


@pytest.mark.parametrize("name", ["mlp_train_step", "fused_qkv_train_step"])
def test_the_entry_floor_is_below_every_priced_peak_of_that_entry(name):
    from hloshard.jax import guard

    module = parse_file(str(SAMPLES / f"{name}.pre.hlo"))
    apply_ties(module, ["matching"])
    mesh = DeviceMesh((2, 4))
    entries = {"data_parallel": guard.data_parallel_entry(module, mesh), "fsdp": guard.fsdp_entry(module, mesh)}
    assert any(e is not None for e in entries.values()), name
    ties = module.ties
    for key, entry in entries.items():
        if entry is None:
            continue
        floor = guard.entry_floor(module, entry)
        saved = [(i, i.sharding) for i in module.entry.instructions]
        try:
            for ins in list(module.entry.parameters) + [module.entry.root]:
                if ins.name in entry:
                    ins.sharding = entry[ins.name]
            module.ties = []
            peak = int(evaluate_module(module, mesh).evaluation.peak_memory)   # the rest completed by hloshard
        finally:
            for ins, sh in saved:
                ins.sharding = sh
            module.ties = ties
        assert 0 < floor <= peak, (name, key, floor, peak)
        # and not a trivial bound: the parameters alone are part of it
        params = sum(p.shape.byte_size for p in module.entry.parameters)
        assert floor >= params // mesh.num_devices, (name, key, floor, params)


def test_a_baseline_whose_floor_is_above_one_priced_is_not_priced(monkeypatch):
    """The lower floor is priced first; the other, whose floor is above that peak, is neither priced nor left running
    (its propagation cancelled), and the note says why.  Below it, both are priced."""
    from hloshard.jax import guard

    module = parse_file(str(SAMPLES / "mlp_train_step.pre.hlo"))
    apply_ties(module, ["matching"])
    mesh = DeviceMesh((2, 4))
    floors = {k: guard.entry_floor(module, make(module, mesh)) for k, make in guard.ENTRY_BASELINES}
    low, high = sorted(floors, key=floors.get)
    priced, cancelled = [], []

    class Pending:
        def __init__(self, key):
            self.key = key

        def cancel(self):
            cancelled.append(self.key)

    def pricer(key, peak):
        def price(module_, dmesh, **kw):
            priced.append(key)
            return {"plan": key, "peak_bytes": peak}
        return price

    monkeypatch.setattr(guard, "data_parallel_baseline", pricer("data_parallel", floors["data_parallel"] + 10))
    monkeypatch.setattr(guard, "fsdp_baseline", pricer("fsdp", floors[low] + 1))
    if floors[high] > floors[low] + 1:
        early = {k: Pending(k) for k in floors}
        others, notes = guard._other_baselines(module, mesh, None, 0.0, True, early)
        assert priced == [low] and cancelled == [high], (priced, cancelled, floors)
        assert [k for k, _ in others] == [low] and "is not priced" in notes[high], notes
    priced.clear()
    # a higher peak priced first leaves the other to be priced
    monkeypatch.setattr(guard, "fsdp_baseline", pricer("fsdp", floors[high] + 10**9))
    monkeypatch.setattr(guard, "data_parallel_baseline", pricer("data_parallel", floors[high] + 10**9))
    others, notes = guard._other_baselines(module, mesh, None, 0.0, True, {})
    assert sorted(priced) == ["data_parallel", "fsdp"] and not notes, (priced, notes)
    assert [k for k, _ in others] == ["data_parallel", "fsdp"]   # reported in the guard's order
