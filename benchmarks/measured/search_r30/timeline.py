# in-process timeline of `hloshard solve` (wrappers log the monotonic offsets from process start)
import sys, time, os, atexit
from hloshard.commands.common import process_started
T0 = process_started()
def log(msg): print(f"[tl {time.monotonic()-T0:7.2f} cpu {time.process_time():6.2f}] {msg}", file=sys.stderr, flush=True)
import hloshard.autoshard.solve as S, hloshard.autoshard.coarse as C, hloshard.autoshard.search as SE
def wrap(mod, name, desc=None):
    f = getattr(mod, name)
    def g(*a, **k):
        extra = {kk: (round(v,2) if isinstance(v,float) else v) for kk, v in k.items() if kk in ('time_limit','share','deadline')}
        if 'deadline' in extra and extra['deadline'] is not None: extra['deadline'] = round(k['deadline']-T0,2)
        pos = [round(x,2) for x in a if isinstance(x,(int,float)) and not isinstance(x,bool)]
        log(f"> {mod.__name__.split('.')[-1]}.{name} {extra} pos={pos}")
        try:
            r = f(*a, **k)
            if isinstance(r, float): log(f"= {name} -> {r:.3f}")
            return r
        finally:
            log(f"< {mod.__name__.split('.')[-1]}.{name}")
    setattr(mod, name, g)
for m, n in [(S,'build_graph'),(C,'build_graph'),(S,'coarse_start'),(S,'solve_graph'),(C,'map_start'),(S,'evaluate_module'),(S,'apply_choice'),(S,'deterministic_first'),(S,'coarse_first'),(S,'reprice_reserve_seconds'),(S,'node_share'),(S,'coarse_share')]:
    wrap(m, n)
atexit.register(lambda: log("atexit"))
from hloshard.cli import main
log("imported")
sys.argv = ["hloshard"] + sys.argv[1:]
main()
