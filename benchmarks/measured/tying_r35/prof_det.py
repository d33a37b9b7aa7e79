"""CPU profile of auto_shard's deterministic first solve and local moves on the dumped Gemma module (time_limit 10:
first solve 5 units, moves' pair limit as auto_shard's).  argv[1]: out prefix."""
import sys, time, pickle, cProfile, pstats, io, json
import ortools.sat.python.cp_model  # noqa
sys.setrecursionlimit(100000)
d = pickle.load(open("/work/notes/tying35/gemma.pkl", "rb"))
from hloshard.autoshard.solve import solve_module, improve_applied
from hloshard.autoshard.coarse import work_limit
from hloshard.jax.guard import moves_seconds
m, mesh = d["module"], d["mesh"]
out = {}
def prof(name, fn):
    pr = cProfile.Profile(time.process_time); c0 = time.process_time(); t0 = time.monotonic()
    pr.enable(); r = fn(); pr.disable()
    out[name] = {"cpu": round(time.process_time() - c0, 3), "wall": round(time.monotonic() - t0, 3)}
    s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(60)
    open(sys.argv[1] + "." + name + ".prof.txt", "w").write(s.getvalue())
    s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(40)
    open(sys.argv[1] + "." + name + ".tot.txt", "w").write(s.getvalue())
    return r
r = prof("first", lambda: solve_module(m, mesh, keep=d.get("keep") or "io", time_limit=5.0, deterministic=True,
                                       apply=True, pin_operands=True, solver_share=1.0))
out["objective"] = r.solution.objective; out["bound"] = r.solution.bound; out["written"] = r.written.total_cost
out["source"] = (r.solution.stats or {}).get("source")
st = {}
prof("moves", lambda: improve_applied(r, m, mesh, deadline=None, peak_limit=None,
                                      pair_limit=work_limit(moves_seconds(10.0), mesh), stats=st))
out["moved"] = r.written.total_cost; out["n_moves"] = len(r.local_moves or []); out["move_stats"] = st
print(json.dumps(out, default=str))
