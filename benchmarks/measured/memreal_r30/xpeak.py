"""xpeak.py N K DUMPDIR FILE...: XLA's memory_analysis and its top-K buffers at its peak."""
import sys
from hloshard.xla_memory import xla_memory
n, k, dump = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
files = sys.argv[4:]
for f, got in zip(files, xla_memory([open(f).read() for f in files], n, k=k, keep_dump=dump)):
    print(f, got.error or f"arg {got.argument} out {got.output} temp {got.temp} alias {got.alias} total {got.total}")
    for b in got.peak_buffers:
        print(f"  {b['bytes']:>12,} {b['kind']:<9} {b['name']} {b['shape']}")
    print(flush=True)
