"""The rule registry: every :class:`~hloshard.lint.rule.Rule` subclass defined in a module of
``hloshard.lint.rules`` (one rule per file, ``hsNNN_kebab_name.py``), sorted by code."""

from __future__ import annotations

import importlib
import pkgutil
import re
from functools import lru_cache

from ..errors import UsageError
from .rule import SEVERITIES, Rule
from . import rules as package

_CODE = re.compile(r"^HS\d{3}$")
_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


@lru_cache(maxsize=1)
def all_rules() -> tuple[type[Rule], ...]:
    """Every registered rule class, sorted by code.

    Raises RuntimeError (a programming error, not user input) when two rules share a code or name,
    or when a rule's metadata is malformed.
    """

    found: list[type[Rule]] = []
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, Rule) and obj is not Rule and obj.__module__ == module.__name__:
                found.append(obj)
    codes: dict[str, type[Rule]] = {}
    names: dict[str, type[Rule]] = {}
    for rule in found:
        if not _CODE.match(rule.code) or not _NAME.match(rule.name) or rule.severity not in SEVERITIES:
            raise RuntimeError(f"malformed rule metadata on {rule.__name__}: {rule.code!r} {rule.name!r} {rule.severity!r}")
        if rule.code in codes or rule.name in names:
            raise RuntimeError(f"duplicate rule code or name: {rule.code} {rule.name}")
        codes[rule.code] = rule
        names[rule.name] = rule
    return tuple(sorted(found, key=lambda r: r.code))


def get_rule(code_or_name: str) -> type[Rule]:
    """The rule with this code (case-insensitive) or kebab-case name. Raises UsageError."""
    key = code_or_name.strip()
    for rule in all_rules():
        if rule.code == key.upper() or rule.name == key.lower():
            return rule
    raise UsageError(f"unknown rule {code_or_name!r} (see hloshard lint --list-rules)")


def _matches(selector: str, rule: type[Rule]) -> int:
    """Specificity of `selector` for `rule` (length of the matched code prefix; names count as a
    full code), 0 when it does not match."""
    sel = selector.strip()
    if sel.upper() in ("ALL", "*"):
        return 1
    if sel.lower() == rule.name:
        return len(rule.code) + 1
    if rule.code.startswith(sel.upper()) and sel.upper().startswith("HS"):
        return len(sel)
    return 0


def select_rules(select=("HS",), ignore=()) -> list[type[Rule]]:
    """The rules enabled by ``select`` minus ``ignore`` (codes, code prefixes such as ``HS1``, rule
    names, or ``ALL``). When a rule matches both, the more specific selector wins (``--ignore HS1
    --select HS101`` keeps HS101).

    Raises UsageError for a selector that matches no rule (a typo would otherwise silently disable
    or keep everything).
    """
    rules = all_rules()
    for sel in list(select) + list(ignore):
        if not any(_matches(sel, r) for r in rules):
            raise UsageError(f"unknown rule code, prefix or name {sel!r} (see hloshard lint --list-rules)")
    out = []
    for rule in rules:
        s = max((_matches(sel, rule) for sel in select), default=0)
        i = max((_matches(sel, rule) for sel in ignore), default=0)
        if s and s > i:
            out.append(rule)
    return out
