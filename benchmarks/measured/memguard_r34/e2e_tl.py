"""tests/jax_e2e_models.run_model(name) with TIME_LIMIT from $TL (round 34: with the guard's band row): XLA bytes / peak of hloshard's plan and the manual's, and the guard's figures."""
import json, os, sys
import tests.jax_e2e_models as m
m.TIME_LIMIT = float(os.environ.get("TL", m.TIME_LIMIT))
r = m.run_model(sys.argv[1])
g = r["guard"]
print(json.dumps({"tl": m.TIME_LIMIT, "xla_bytes": r["hloshard"]["comm_bytes"], "xla_peak": r["hloshard"]["peak_bytes"],
                  "manual_bytes": r["manual"]["comm_bytes"], "pred_peak": r["predicted_peak"],
                  "baseline": g.get("baseline_peak_bytes"), "nearest": g.get("nearest_peak_bytes"),
                  "nearest_cost": g.get("nearest_cost"), "limit": g.get("limit_bytes"), "held": g.get("held"),
                  "cost": (g.get("cheapest") or {}).get("cost"), "band": g.get("band"), "exact": g.get("exact_step"), "resolves": g.get("resolves")}))
