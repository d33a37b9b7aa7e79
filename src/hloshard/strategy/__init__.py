"""Strategy engine: per-instruction sharding candidates on a device mesh.

``base`` holds the data model (Strategy, StrategyGroup, TupleGroup, MeshInfo), ``registry`` the
opcode -> handler tables and the build context (it imports no handler); one module per op family
registers its handlers into it; ``handlers`` imports every handler module and dispatches
(``build_group``).
"""

from .base import COMPUTE_COST_PER_FLOP, LeafRef, MeshInfo, Strategy, StrategyGroup, TupleGroup
from .handlers import build_group
from .registry import BuildContext

__all__ = ["COMPUTE_COST_PER_FLOP", "LeafRef", "MeshInfo", "Strategy", "StrategyGroup", "TupleGroup",
           "BuildContext", "build_group"]
