"""``hloshard lint``: static checks of sharding annotations in HLO text.

Library use::

    from hloshard.lint import LintOptions, lint_paths, lint_text

    findings = lint_text(open("model.hlo").read(), "model.hlo", LintOptions(num_partitions=8))
    for f in findings:
        print(f.path, f.line, f.column, f.code, f.severity, f.message)

Layout: :mod:`.engine` (run rules over files, suppression, selection), :mod:`.registry` (rule
discovery, ``--select`` / ``--ignore`` semantics), :mod:`.rules` (one rule per module,
``hsNNN_kebab_name.py``), :mod:`.source` (lenient text scan of ``sharding=`` sites and suppression
comments), :mod:`.context` (what a rule sees), :mod:`.validity` / :mod:`.geometry` /
:mod:`.collectives` (checks shared by several rules), :mod:`.reporters` (text, json, sarif, github),
:mod:`.config` (``[tool.hloshard.lint]`` in pyproject.toml).
"""

from .context import LintOptions
from .engine import LintResult, lint_paths, lint_text
from .registry import all_rules, get_rule, select_rules
from .rule import Finding, Rule

__all__ = ["LintOptions", "LintResult", "lint_paths", "lint_text", "all_rules", "get_rule", "select_rules",
           "Finding", "Rule"]
