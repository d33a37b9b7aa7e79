"""Patching a function of hloshard wherever it is bound, for tests.

A module that imports a name at module level (``from ..autoshard import solve_module``) holds its own
binding: ``monkeypatch.setattr(hloshard.autoshard, "solve_module", stub)`` no longer reaches it.  (Before
round 32 many of hloshard's imports sat inside functions, where such a patch was seen at call time; the
project's rule is now none inside functions, ``tests/test_import_contracts.py``.)  :func:`setattr_everywhere`
patches the attribute on its module and on every loaded ``hloshard`` module that binds the same object
under the same name, through ``monkeypatch`` (undone at the test's end).
"""

from __future__ import annotations

import importlib
import sys

_MISSING = object()


def setattr_everywhere(monkeypatch, target, name, value=_MISSING) -> None:
    """``monkeypatch.setattr(target, name, value)``, and the same on every loaded ``hloshard.*`` module whose
    global ``name`` is the object ``target.name`` was.  ``target`` a module, or (as monkeypatch takes it) a
    dotted string ``"pkg.module.name"`` with ``name`` then the value.  Raises AttributeError when the
    attribute does not exist (as monkeypatch does)."""
    if isinstance(target, str) and value is _MISSING:
        path, value = target, name
        modname, name = path.rsplit(".", 1)
        target = importlib.import_module(modname)
    original = getattr(target, name)
    monkeypatch.setattr(target, name, value)
    for modname, mod in list(sys.modules.items()):
        if mod is None or mod is target or not (modname == "hloshard" or modname.startswith("hloshard.")):
            continue
        if getattr(mod, name, _MISSING) is original:
            monkeypatch.setattr(mod, name, value)
