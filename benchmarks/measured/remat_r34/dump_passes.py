"""Compile an HLO text file for 8 CPU devices (GSPMD, as hloshard cost --xla does) dumping every pass."""
import os, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
sys.path.insert(0, "/work/wt/remat/src")
from hloshard.xla_check import compile_with_dump
text = open(sys.argv[1]).read()
dump = sys.argv[2]
pass_re = sys.argv[3] if len(sys.argv) > 3 else ".*"
exe = compile_with_dump(text, 8, dump, pass_re)
m = exe.get_compiled_memory_stats()
print("argument", m.argument_size_in_bytes, "output", m.output_size_in_bytes, "temp", m.temp_size_in_bytes,
      "alias", m.alias_size_in_bytes, "peak", m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes - m.alias_size_in_bytes)
