"""Round 33 (helper tpumem), a one-off probe (BENCHMARKS.md 'helper tpumem, round 33'); run from the tree's root
with PYTHONPATH=src:. (paths below are relative to it)."""
import sys
from hloshard.hlo import parse_module
from hloshard.hlo.callgraph import reverse_post_order
from hloshard.cost.tpu_heap import heap_slot_bound, compiled_instruction_sum, temporaries_fit_vmem
from hloshard.cost.liveness import set_fusion_backend, computation_peak_bytes
from hloshard.cost.tpu_layout import padded_bytes
from hloshard.hlo.shape import element_byte_size
from hloshard.cost import tpu_fusion as tf
for f in sys.argv[1:]:
    m = parse_module(open(f).read(), f)
    set_fusion_backend(m, "tpu")
    fused = lambda i: tf.is_fused(i) or tf.absorbed_by(i) is not None
    kern = compiled_instruction_sum(m, lambda i: 0 if fused(i) else 1)
    params = sum(1 for i in m.entry.instructions if i.opcode == "parameter")
    def whole(i):
        s = i.shape
        return sum(padded_bytes(l.element_type, l.dims) for l in (s.leaves() if s.is_tuple else [s]) if l.is_array and element_byte_size(l.element_type) > 0)
    tw = sum(computation_peak_bytes(c, size_of=whole) for c in reverse_post_order(m))
    tk = sum(computation_peak_bytes(c, size_of=lambda i: 0 if fused(i) else whole(i)) for c in reverse_post_order(m))
    print(f.split("/")[-1], "plain", heap_slot_bound(m), "kernels", kern, "params", params, "unsharded T", tw, "unsharded T_kernel", tk, flush=True)
