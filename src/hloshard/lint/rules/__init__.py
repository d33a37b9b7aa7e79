"""The lint rules, one per module (``hsNNN_kebab_name.py``); see :mod:`hloshard.lint.registry`."""
