"""Strategy engine: per-instruction sharding candidates on a device mesh.

``base`` holds the data model (Strategy, StrategyGroup, TupleGroup, MeshInfo), ``registry`` the
opcode -> handler table and the build context; one module per op family registers its handlers.
"""

from .base import COMPUTE_COST_PER_FLOP, LeafRef, MeshInfo, Strategy, StrategyGroup, TupleGroup
from .registry import BuildContext, build_group

__all__ = ["COMPUTE_COST_PER_FLOP", "LeafRef", "MeshInfo", "Strategy", "StrategyGroup", "TupleGroup",
           "BuildContext", "build_group"]
