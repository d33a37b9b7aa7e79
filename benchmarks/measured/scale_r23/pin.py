import os, sys
cores = {int(c) for c in sys.argv[1].split(",")}
os.sched_setaffinity(0, cores)
os.execvp(sys.executable, [sys.executable] + sys.argv[2:])
