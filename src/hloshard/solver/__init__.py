"""Strategy selection for IOPDDL cost graphs: presolve, heuristics, CP-SAT (:func:`.api.solve_problem`).

Import from the modules (``from hloshard.solver.api import solve_problem``): this ``__init__`` imports
none of them, so that a light command passing through ``hloshard.solver.followers`` (the follower merge
the cost graph uses) never loads OR-Tools, which only the modules that solve import.
"""
