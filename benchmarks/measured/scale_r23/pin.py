"""``python pin.py 6,7 PROGRAM ARGS...``: run ``python PROGRAM ARGS...`` with its CPU affinity (and its children's)
set to the listed cores, as round 23's mesh ladder ran on the device machine (BENCHMARKS.md, "Round 23, lead")."""
import os
import sys

cores = {int(c) for c in sys.argv[1].split(",")}
os.sched_setaffinity(0, cores)
os.execvp(sys.executable, [sys.executable] + sys.argv[2:])
