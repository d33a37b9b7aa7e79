from hloshard.load import load_module
from hloshard.mesh import DeviceMesh
from hloshard.autoshard.coarse import coarse_mesh
m = load_module("samples/mlp_train_step.pre.hlo")
for spec, beta in (("2x2x2", None), ("2x2x2", "5,1,1"), ("2x2x2", "1,1,5"), ("4x2", None), ("4x2", "5,1"), ("2x4", None), ("2x4", "5,1")):
    f = DeviceMesh.for_module(m, spec, beta=beta)
    c = coarse_mesh(f, m)
    print(spec, beta, f.shape, tuple(f.beta), None if c is None else (c.shape, tuple(c.beta), c.user_shape))
