#!/usr/bin/env python3
"""Parser, verifier and lint parity with XLA over every ``.hlo`` under tests/data, samples/ and
../shared/corpus/ (jaxlib 0.10.2 in a child process, tests/xla_oracle.py).

Columns, for each file:

* XLA parse   -- ``hlo_module_from_text`` (ParseAndReturnUnverifiedModule) accepts it;
* XLA compile -- compiled for 8 CPU partitions with GSPMD (XLA's verifier and SPMD partitioner run);
* hs parse    -- :func:`hloshard.hlo.parse_module` accepts it;
* hs verify   -- :func:`hloshard.hlo.verify.verify_module` passes (what ``solve`` / ``cost`` check;
                 num_partitions=8 for a header without one, as XLA is compiled here);
* hs lint     -- ``hloshard lint`` (default options) reports no error-level finding.

A disagreement is a file where hs parse differs from XLA parse, or hs verify / hs lint differ from
XLA compile. Every one is printed with both sides' first message; BENCHMARKS.md ("Parser and lint
parity with XLA") explains them. Usage::

    python benchmarks/xla_parity.py            # markdown table on stdout
    python benchmarks/xla_parity.py --json     # rows as JSON
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))
from tests.shared_dir import SHARED  # noqa: E402  (HLOSHARD_SHARED, else <repo>/../shared)


def files() -> list[pathlib.Path]:
    shared = SHARED / "corpus"
    out = []
    for base in (ROOT / "tests" / "data", ROOT / "samples", shared):
        out += sorted(base.rglob("*.hlo"))
    return out


def hloshard_side(text: str, path: str) -> dict:
    from hloshard.errors import HloshardError
    from hloshard.hlo import parse_module
    from hloshard.hlo.verify import verify_module
    from hloshard.lint.context import LintOptions
    from hloshard.lint.engine import lint_text

    row = {"hs_parse": True, "hs_verify": True, "hs_parse_msg": "", "hs_verify_msg": ""}
    try:
        module = parse_module(text, path)
    except HloshardError as exc:
        row.update(hs_parse=False, hs_verify=False, hs_parse_msg=str(exc).splitlines()[0])
        module = None
    if module is not None:
        try:
            verify_module(module, path, num_partitions=8)
        except HloshardError as exc:
            row.update(hs_verify=False, hs_verify_msg=str(exc).splitlines()[0])
    errors = [f for f in lint_text(text, path, LintOptions()) if f.severity == "error"]
    row["hs_lint"] = not errors
    row["hs_lint_msg"] = f"{errors[0].code} {errors[0].line}:{errors[0].column} {errors[0].message}" if errors else ""
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    from tests import xla_oracle

    paths = files()
    texts = [p.read_text() for p in paths]
    parsed = xla_oracle.parse_many(texts, timeout=900)
    compiled = xla_oracle.compile_many(texts, timeout=1800)
    rows = []
    for p, text, (pok, pmsg), (cok, cmsg) in zip(paths, texts, parsed, compiled):
        rel = str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else "../shared/" + str(p.relative_to(SHARED))
        row = {"file": rel, "xla_parse": pok, "xla_compile": cok,
               "xla_parse_msg": "" if pok else _first(pmsg), "xla_compile_msg": "" if cok else _first(cmsg)}
        row.update(hloshard_side(text, rel))
        row["disagree"] = [c for c, a, b in (("parse", row["hs_parse"], pok), ("verify", row["hs_verify"], cok),
                                             ("lint", row["hs_lint"], cok)) if a != b]
        rows.append(row)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    yn = {True: "yes", False: "**no**"}
    print("| file | XLA parse | XLA compile (8, GSPMD) | hs parse | hs verify | hs lint clean |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| `{r['file']}` | {yn[r['xla_parse']]} | {yn[r['xla_compile']]} | {yn[r['hs_parse']]} | "
              f"{yn[r['hs_verify']]} | {yn[r['hs_lint']]} |")
    print()
    dis = [r for r in rows if r["disagree"]]
    print(f"{len(rows)} files, {len(dis)} with a disagreement")
    for r in dis:
        print(f"\n* `{r['file']}` ({', '.join(r['disagree'])})")
        print(f"  - XLA: {r['xla_parse_msg'] or r['xla_compile_msg'] or 'accepts'}")
        print(f"  - hloshard: {r['hs_parse_msg'] or r['hs_verify_msg'] or r['hs_lint_msg'] or 'accepts'}")
    return 0


def _first(msg: str) -> str:
    for line in msg.splitlines():
        if "error" in line.lower() or "failure" in line.lower() or "Check failed" in line:
            return line.strip()[:300]
    return msg.strip().splitlines()[0][:300] if msg.strip() else msg


if __name__ == "__main__":
    sys.exit(main())
