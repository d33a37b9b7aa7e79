"""Probe: a local slice of a replicated value (the partitioner's offset table + dynamic-slice at partition-id)."""
import sys, re
sys.path.insert(0, "/work/wt/tpurows/src")
from hloshard.xla_cost import _compile_tpu, _analysis
def mod(sh, n=1024):
    return f"""HloModule p, num_partitions=8
ENTRY e {{
  x = f32[{n},{n}] parameter(0), sharding={{replicated}}
  ROOT y = f32[{n},{n}] exponential(x), sharding={sh}
}}"""
for n in (1024, 2048):
  for sh in ("{replicated}", "{devices=[8,1]<=[8]}", "{devices=[1,8]<=[8]}", "{devices=[2,4]<=[8]}"):
    exe = _compile_tpu(mod(sh, n), 8, sys.argv[1] if len(sys.argv) > 1 else "v5e:2x4")
    a = _analysis(exe, tpu=True)
    txt = exe.hlo_modules()[0].to_string(); ent = txt[txt.index("ENTRY"):]
    ops = [m.group(2) + ":" + m.group(1)[:24] for m in re.finditer(r"= (\S+) ([a-z-]+)\(", ent)]
    print(n, f"{sh:24} bytes {a['bytes_accessed']:.0f} opt {a['optimal_seconds']*1e6:.4f}us", " ".join(o for o in ops if not o.startswith(("parameter", "get-tuple", "bitcast", "constant"))), flush=True)
