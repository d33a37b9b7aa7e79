"""A coarse mesh never merges axes on different links (new user 35 F2): ``--mesh data=2:dcn,model=4`` refined to
2x2x2 was solved first on a coarse 4x2 whose axis of 4 was the slow ``data`` axis and half of the fast ``model``
one (:func:`hloshard.autoshard.coarse.link_cuts`, :func:`hloshard.autoshard.coarse.coarse_mesh`).  The fine build's
extra orders (``hloshard.mesh.coarse_cuts``) are not changed by the rule: the fine space stays the same."""

from pathlib import Path

import pytest

from hloshard.autoshard.coarse import _cuts, coarse_mesh, link_cuts, linked_coarse_cuts, rung_mesh
from hloshard.devices import get_profile
from hloshard.load import load_module
from hloshard.mesh import DeviceMesh, coarse_cuts, refine_for_module
from hloshard.mesh_setup import priced_mesh

SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "mlp_train_step.pre.hlo"


@pytest.fixture(scope="module")
def module():
    return load_module(str(SAMPLE))


def _spans(fine: DeviceMesh, coarse: DeviceMesh) -> list[set]:
    """Per coarse axis, the betas of the fine axes (size > 1) it spans (by the strides of the flat device order)."""
    out, hi = [], coarse.num_devices
    for n in coarse.shape:
        lo = hi // int(n)
        acc, betas = fine.num_devices, set()
        for k, m in enumerate(fine.shape):
            a, b = acc, acc // int(m)
            if int(m) > 1 and b >= lo and a <= hi:
                betas.add(float(fine.beta[k]))
            acc = b
        out.append(betas)
        hi = lo
    return out


def test_link_cuts_are_the_boundaries_between_axes_of_different_beta():
    assert link_cuts(DeviceMesh.parse("2x2x2")) == set()
    assert link_cuts(DeviceMesh.parse("2x2x2", beta="5,1,1")) == {4}
    assert link_cuts(DeviceMesh.parse("2x2x2", beta="1,1,5")) == {2}
    assert link_cuts(DeviceMesh.parse("2x1x4", beta="5,3,1")) == {4}   # a size-1 axis is no boundary


@pytest.mark.parametrize("spec,beta", [("4x2", "5,1"), ("2x2x2", "1,1,5"), ("2x2x2", "5,1,1"), ("2x4", "5,1")])
def test_no_coarse_axis_spans_two_links(module, spec, beta):
    """mlp_train_step's reshapes refine the 1-D mesh of 8 at the cut 4 only (coarse mesh 2x4 of two sub-axes of
    the 1-D mesh): on 4x2 with a slow first axis (refined to 2x2x2, betas 5,5,1) that coarse axis of 4 would
    hold the slow axis' devices and the fast one's (main: coarse 2x4 at beta 5,5); now the user's 4x2 unrefined
    is the coarse mesh; on 2x2x2 with the minor axis slow there is no coarser mesh that keeps the links apart."""
    fine = DeviceMesh.for_module(module, spec, beta=beta)
    coarse = coarse_mesh(fine, module)
    if coarse is not None:
        assert _cuts(coarse.shape) <= _cuts(fine.shape)
        spans = _spans(fine, coarse)
        assert all(len(b) == 1 for b in spans), (coarse.shape, spans)
        # each coarse axis priced at its own link, not every axis at the slowest
        assert [float(x) for x in coarse.beta] == [next(iter(b)) for b in spans]
    cuts = linked_coarse_cuts(fine, module)
    assert cuts is None or link_cuts(fine) <= cuts
    assert rung_mesh(fine, module) is None or len(set(map(float, fine.beta))) == 1


def test_the_measured_cases(module):
    """The figures the link rule gives mlp_train_step (main: coarse 2x4 at betas (5, 5) in all three)."""
    four = DeviceMesh.for_module(module, "4x2", beta="5,1")
    assert four.shape == (2, 2, 2)
    c = coarse_mesh(four, module)
    assert c.shape == (4, 2) and not c.is_refined and [float(x) for x in c.beta] == [5.0, 1.0]
    assert coarse_mesh(DeviceMesh.for_module(module, "2x2x2", beta="1,1,5"), module) is None
    c = coarse_mesh(DeviceMesh.for_module(module, "2x2x2", beta="5,1,1"), module)
    assert c.shape == (2, 4) and [float(x) for x in c.beta] == [5.0, 1.0]


def test_one_link_keeps_the_coarse_mesh(module):
    """Every axis on one link (the unit model's default): the coarse mesh is the one before the rule (its shape,
    cuts and prices), so deterministic outputs do not move."""
    fine = DeviceMesh.for_module(module, "2x2x2")
    c = coarse_mesh(fine, module)
    assert c.shape == (2, 4) and c.user_shape == (8,) and len(set(map(float, c.beta))) == 1
    assert coarse_cuts(fine, module) == linked_coarse_cuts(fine, module) == {1, 4, 8}


def test_the_fine_space_keeps_its_coarse_orders(module):
    """The link rule changes the coarse mesh, not the fine build's enumeration (mesh.coarse_cuts): with a slow
    first axis the cuts the fine build adds its swapped orders at are those of the module's 1-D refinement."""
    fine = DeviceMesh.for_module(module, "4x2", beta="5,1")
    assert coarse_cuts(fine, module) == {1, 4, 8}
    assert linked_coarse_cuts(fine, module) is None and coarse_mesh(fine, module).shape == (4, 2)


def test_a_device_mesh_with_a_dcn_axis(module):
    """On a device (h100-sxm, ``data=2:dcn``) the coarse mesh of 4x2 keeps the InfiniBand axis apart."""
    fine, _ = priced_mesh(module, "4x2", get_profile("h100-sxm"), marks=["dcn", None])
    fine = fine if fine.is_refined else refine_for_module(fine, module)
    assert len(set(map(float, fine.beta))) == 2
    c = coarse_mesh(fine, module)
    assert c is None or all(len(b) == 1 for b in _spans(fine, c))
