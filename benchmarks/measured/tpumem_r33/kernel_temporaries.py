"""Round 33 (helper tpumem), a one-off probe (BENCHMARKS.md 'helper tpumem, round 33'); run from the tree's root
with PYTHONPATH=src:. (paths below are relative to it)."""
import sys
from hloshard.hlo import parse_module
from hloshard.hlo.callgraph import reverse_post_order
from hloshard.cost.liveness import computation_peak_bytes, set_fusion_backend
from hloshard.cost.tpu_layout import padded_bytes_per_device, padded_bytes
from hloshard.cost import tpu_fusion as tf
from hloshard.hlo.shape import element_byte_size
for f in sys.argv[1:]:
    m = parse_module(open(f).read(), f)
    set_fusion_backend(m, "tpu")
    entry = m.entry
    def tile(i):
        if i.opcode == "parameter" and i.parent is entry:
            return 0
        try:
            return int(padded_bytes_per_device(i.shape, i.sharding))
        except Exception:
            return sum(padded_bytes(l.element_type, l.dims) for l in (i.shape.leaves() if i.shape.is_tuple else [i.shape]) if l.is_array and element_byte_size(l.element_type) > 0)
    def kern(i):
        if tf.is_fused(i) or tf.absorbed_by(i) is not None:
            return 0
        return tile(i)
    def outs_too(i):   # kernel outputs, entry outputs excluded as well (they are in HBM anyway)
        return 0 if (i.parent is entry and i.is_root) else kern(i)
    tw = sum(computation_peak_bytes(c, size_of=tile) for c in reverse_post_order(m))
    tk = sum(computation_peak_bytes(c, size_of=kern) for c in reverse_post_order(m))
    big = sorted(((kern(i), i.name) for c in reverse_post_order(m) for i in c.instructions), reverse=True)[:5]
    print(f.split("/")[-1], "T_w", tw, "T_kernel", tk, "V/2", 64 * 2**20, "largest kernel outputs", big, flush=True)
