"""hloshard for JAX users: ``auto_shard(fn, *example_args, mesh=...)`` picks shardings that ``jax.jit`` uses.

Importing this package imports jax (a JAX user has it anyway); the CLI never imports it.
See :func:`hloshard.jax.api.auto_shard`.
"""

from .api import AutoShardResult, auto_shard

__all__ = ["auto_shard", "AutoShardResult"]
