"""hloshard for JAX users: ``auto_shard(fn, *example_args, mesh=...)`` picks shardings that ``jax.jit`` uses.

Importing this package imports jax (a JAX user has it anyway); the CLI never imports it.
See :func:`hloshard.jax.api.auto_shard`.
"""

from ..xla_check import set_forkserver_default
from .api import AutoShardResult, auto_shard

# a JAX user's process: its jax children (three per auto_shard call) are forks of one server that imported jax once
# (HLOSHARD_XLA_FORKSERVER=0 runs each as a fresh Python)
set_forkserver_default(True)

__all__ = ["auto_shard", "AutoShardResult"]
