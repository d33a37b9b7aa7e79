"""Issue 24 / 25, round 36 (helper guard's top finding): the memory guard's baselines -- your layout, the
data-parallel and FSDP plans, as XLA's propagation lays them out -- price the loop bodies in the layouts XLA's
propagation gives them, as ``cost --complete xla`` does (:func:`hloshard.partition_specs.complete_with_xla`).  They
read the entry's layouts only, and the ``while`` bodies were completed by the evaluation's own choice: new user 35's
RWKV-7 (four ``fori_loop`` bodies of 64 trips) with its user layout kept was priced at 180.4 MB where ``cost
--complete xla`` predicts 46.9 MB and XLA runs it at 47.1 MB, so the guard never bound.  No XLA child here: the
propagation's answer is a stand-in read as the pending one is read."""

from pathlib import Path

from hloshard.hlo.inline import inline_calls
from hloshard.hlo.parser import parse_file
from hloshard.hlo.sharding import HloSharding
from hloshard.jax import guard
from hloshard.mesh import DeviceMesh
from hloshard.partition_specs import called_instructions

SAMPLE = Path(__file__).resolve().parents[1] / "samples" / "scan_mlp_train_step.pre.hlo"


class _Answered:
    def __init__(self, found):
        self.found = found

    def done(self):
        return True

    def result(self, timeout):
        return dict(self.found)


def _split(shape, n: int = 8):
    """Dim 0 split ``n`` ways when it divides, else replicated."""
    dims = shape.dims
    if dims and dims[0] % n == 0:
        return HloSharding.parse("{devices=[" + ",".join([str(n)] + ["1"] * (len(dims) - 1)) + "]<=[" + str(n) + "]}")
    return HloSharding.replicated()


def test_the_baseline_prices_the_loop_bodies_in_the_propagated_layouts():
    module = parse_file(SAMPLE)
    inline_calls(module)   # as auto_shard's traced module is (every pricing inlines them)
    mesh = DeviceMesh.parse("8")
    body = [i for i in called_instructions(module) if not i.shape.is_tuple]
    assert body, "the sample's scan bodies"
    before = {i.name: i.sharding for i in body}
    entry = {i.name: HloSharding.replicated() for i in module.entry.instructions if not i.shape.is_tuple}
    replicated = dict(entry, **{i.name: HloSharding.replicated() for i in body})
    split = dict(entry, **{i.name: _split(i.shape) for i in body})
    a = guard.baseline_peak(module, mesh, pending=_Answered(replicated), entry={})
    b = guard.baseline_peak(module, mesh, pending=_Answered(split), entry={})
    # the bodies' layouts are priced: split bodies hold less and move data the replicated ones do not
    assert (b["peak_bytes"], b["collective_cost"]) != (a["peak_bytes"], a["collective_cost"]), (a, b)
    assert all(b["found"][i.name] == split[i.name] for i in body)
    # and the module is left as it was
    assert {i.name: i.sharding for i in body} == before
    assert not getattr(module, "xla_loop_states", None)
