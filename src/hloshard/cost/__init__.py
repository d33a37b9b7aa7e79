"""The cost model: collective costs (:mod:`.collectives`), per-device memory (:mod:`.memory`), the
resharding planner (:mod:`.reshard`) and reshape sharding inference (:mod:`.reshape`).

Units everywhere: bytes per device, and cost units of the alpha-beta model (alpha per collective,
beta per byte, one pair per mesh axis; see :mod:`hloshard.mesh`).
"""
