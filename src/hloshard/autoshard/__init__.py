"""Module -> cost graph -> CP-SAT -> shardings applied: the machinery behind ``solve`` and ``cost``.

The steps, one file each:

* :mod:`.user_shardings` -- which annotations are kept (``--keep-shardings``), checked against the mesh;
* :mod:`.build` -- module -> cost graph (:class:`Graph`, :func:`build_graph`): strategy groups, node
  costs and usages, resharding edges (:mod:`.resharder`), liveness intervals, integer scaling; alias
  constraints (:mod:`.aliases`) and the follower-merged problem the solver gets (:mod:`.merge`);
* :mod:`.graph` -- the :class:`Graph` data every step passes on (imports no step);
* :mod:`.search` -- :func:`solve_graph`: the graph's problem solved, the choice expanded (below evaluate);
* :mod:`.solve` -- :func:`solve_module`, :class:`SolveResult` (and :func:`solve_graph` re-exported);
* :mod:`.apply` -- the chosen shardings written on the IR (:func:`apply_choice`);
* :mod:`.evaluate` -- cost breakdown of a choice, :func:`evaluate_module` behind ``hloshard cost``;
* :mod:`.report` -- infeasible-budget messages and solver node ids named by instruction;
* :mod:`.tiebreak` -- memory as a tie-breaker in the solver's problem (never in a reported cost).

Every name below is re-exported so that ``from hloshard.autoshard import X`` keeps working.
"""

from ..cost.liveness import computation_order as _post_order  # noqa: F401  (the old private name)
from .aliases import _add_aliases, _add_shard_as_groups, _flat_leaf
from .apply import _same_sharding, apply_choice, instruction_sharding, leaf_spec
from .build import (
    EXHAUSTIVE_LIMIT, Graph, _add_edge, _leaf_shape, _operand_leaves, _to_int, build_graph,
    choose_scale, processed_computations,
)
from .evaluate import (
    CostResult, Evaluation, evaluate_as_written, evaluate_choice, evaluate_module, is_per_device_program, peak_memory,
    per_instruction_costs, replicated_evaluation, reshardings_of, top_edges,
)
from ..solver.followers import merge_followers
from .report import _failed, _name_nodes, infeasible_message, minimum_memory_check
from .resharder import _key, _Resharder, _unique
from .solve import SolveResult, collect_less, solve_graph, solve_module
from .tiebreak import real_part, with_memory_tie_break
from ..strategy.user_shardings import KEEP_MODES, _check_user_sharding, user_shardings

__all__ = [
    "EXHAUSTIVE_LIMIT", "KEEP_MODES", "CostResult", "Evaluation", "Graph", "SolveResult", "apply_choice", "collect_less",
    "build_graph", "choose_scale", "evaluate_as_written", "evaluate_choice", "evaluate_module", "infeasible_message",
    "instruction_sharding", "is_per_device_program", "leaf_spec", "merge_followers", "minimum_memory_check", "peak_memory",
    "per_instruction_costs", "processed_computations", "replicated_evaluation", "reshardings_of", "solve_graph", "solve_module",
    "top_edges", "user_shardings", "with_memory_tie_break", "real_part",
]
