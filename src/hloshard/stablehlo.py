"""StableHLO MLIR text (what ``jax.jit(f).lower(*args).as_text()`` prints) -> HLO text, with jaxlib.

jax is **never** imported in the calling process: :func:`stablehlo_to_hlo` starts
``python -m hloshard.stablehlo`` through :func:`hloshard.xla_check.run_jax_child`, which converts the
text with jaxlib's ``mlir_module_to_xla_computation(text, use_tuple_args=False, return_tuple=False)``
(the conversion jax itself uses for ``lowered.as_text(dialect="hlo")``) and prints the HLO with its
metadata (op names, the stack-frame table: source file and line of each instruction). Shardy
attributes survive the conversion: ``sdy.mesh`` becomes the module frontend attribute
``xla.sdy.meshes`` and each ``sdy.sharding`` the instruction frontend attribute ``xla.sdy.sharding``
beside ``sharding={...}``.

:func:`mlir_signature` reads the JAX argument and result paths of ``@main`` (``jax.arg_info`` /
``jax.result_info`` attributes, or the argument's name location ``loc("params['w1']")`` that
``as_text(debug_info=True)`` prints) straight from the text, without jax.

Errors (exit 2): jax missing -> :class:`~hloshard.errors.InputError` naming the ``xla`` extra; text
that is not StableHLO (MLIR that does not parse, ops XLA cannot export, no ``main``) ->
:class:`~hloshard.errors.HloSyntaxError` at the line and column MLIR reports.
"""

from __future__ import annotations

import json
import re
import sys

from .errors import HloSyntaxError
from .xla_check import run_jax_child

# jax / jaxlib are optional (the ``jax`` extra): the CLI must run without them, so they are imported
# inside the functions that need them, never at module level (tests/test_import_contracts.py).

_DIAG = re.compile(r"^(?:-|<stdin>|\S*):(\d+):(\d+): error: (.*)$")
_TIMEOUT = 300.0


def stablehlo_to_hlo(text: str, filename: str = "<string>") -> str:
    """HLO text of the StableHLO module ``text`` (conversion by jaxlib in a child process).

    Raises InputError when jax/jaxlib are not installed (the ``xla`` extra) or the child dies, and
    HloSyntaxError (``filename:line:col: error: not StableHLO: ...``) when jaxlib rejects the text.
    """

    head = text.lstrip()[:64]
    if not head:
        raise HloSyntaxError("not StableHLO: the file is empty", filename, 1, 1)
    if head.startswith(("HloModule", "ENTRY")):
        raise HloSyntaxError("not StableHLO: this is HLO text; name the file .hlo", filename, 1, 1,
                             text.splitlines()[0] if text else None)
    data = run_jax_child("hloshard.stablehlo", {"text": text}, 1, _TIMEOUT,
                         what="StableHLO conversion", flag=f"reading {filename} (StableHLO)")
    if data.get("hlo") is not None:
        return data["hlo"]
    raise _diagnostic(data.get("error") or "conversion failed", text, filename)


def _diagnostic(error: str, text: str, filename: str) -> HloSyntaxError:
    """The first ``-:L:C: error: MSG`` line of an MLIR diagnostic as an HloSyntaxError."""
    lines = text.splitlines()
    for raw in error.splitlines():
        raw = re.sub(r"^[A-Z_]+: ", "", raw.strip())
        m = _DIAG.match(raw)
        if m:
            line, col = max(1, int(m.group(1))), max(1, int(m.group(2)))   # MLIR says 0:0 for the module
            src = lines[line - 1] if 0 < line <= len(lines) else None
            return HloSyntaxError(f"not StableHLO: {m.group(3)}", filename, line, col, src)
    first = next((ln.strip() for ln in error.splitlines() if ln.strip()), "conversion failed")
    # no location in the diagnostic: the module as a whole, reported at its start
    return HloSyntaxError(f"not StableHLO: {first}", filename, 1, 1, lines[0] if lines else None)


# ------------------------------------------------------------------------------------------------
# @main's signature, read from the text (no jax)

_LOC_ALIAS = re.compile(r'^(#loc\d*)\s*=\s*loc\("((?:[^"\\]|\\.)*)"\)\s*$', re.M)


def _scan(text: str, start: int = 0):
    """``(index, char, depth)`` of every character from ``start`` outside string literals; depth counts
    open (), <>, {}, [] before the character (after it for a closing one)."""
    depth, in_str, esc = 0, False, False
    for i in range(start, len(text)):
        ch = text[i]
        if in_str:
            esc, in_str = (False, True) if esc else (ch == "\\", ch != '"')
            continue
        if ch == '"':
            in_str = True
            continue
        if ch in "(<{[":
            depth += 1
        elif ch in ")>}]":
            depth -= 1
        yield i, ch, depth


def _split_top(text: str) -> list[str]:
    """Split at commas outside brackets and strings."""
    out, last = [], 0
    for i, ch, depth in _scan(text):
        if ch == "," and depth == 0:
            out.append(text[last:i].strip())
            last = i + 1
    if text[last:].strip():
        out.append(text[last:].strip())
    return out


def bracketed(text: str, start: int) -> tuple[str, int]:
    """Contents of the MLIR bracketed group ((), <>, {} or []; strings skipped) opening at ``text[start]``
    and the index after it (the rest of the text when it does not close)."""
    for i, ch, depth in _scan(text, start):
        if depth == 0:
            return text[start + 1:i], i + 1
    return text[start + 1:], len(text)


def _unescape(s: str) -> str:
    return s.replace('\\"', '"').replace("\\\\", "\\")


def mlir_signature(text: str) -> dict[str, list[str | None]]:
    """JAX paths of ``@main``'s arguments and results: ``{"args": [...], "results": [...]}``.

    An argument's path is its ``jax.arg_info`` attribute, else its name location (``loc("x")``,
    also through a ``#locN`` alias); a result's is ``jax.result_info``. None where the text has
    neither; empty lists when there is no ``@main``.
    """
    m = re.search(r"func\.func\s+(?:public\s+)?@main\s*\(", text)
    if not m:
        return {"args": [], "results": []}
    aliases = {a: _unescape(v) for a, v in _LOC_ALIAS.findall(text)}
    args_text, pos = bracketed(text, m.end() - 1)
    args = []
    for a in _split_top(args_text):
        info = re.search(r'jax\.arg_info\s*=\s*"((?:[^"\\]|\\.)*)"', a)
        if info:
            args.append(_unescape(info.group(1)))
            continue
        loc = re.search(r'loc\(\s*(?:"((?:[^"\\]|\\.)*)"|(#loc\d*))\s*\)\s*$', a)
        if loc:
            args.append(_unescape(loc.group(1)) if loc.group(1) is not None else aliases.get(loc.group(2)))
        else:
            args.append(None)
    results: list[str | None] = []
    rest = text[pos:]
    r = re.match(r"\s*->\s*", rest)
    if r:
        body = rest[r.end():]
        if body.startswith("("):
            res_text, _ = bracketed(body, 0)
            items = _split_top(res_text)
        else:  # one result without attributes: ``-> tensor<f32> {``
            items = [""]
        for item in items:
            info = re.search(r'jax\.result_info\s*=\s*"((?:[^"\\]|\\.)*)"', item)
            results.append(_unescape(info.group(1)) if info else None)
    return {"args": args, "results": results}


# ------------------------------------------------------------------------------------------------
# the child process (jax imported only there)

def _child_main() -> int:  # pragma: no cover - runs in the subprocess
    request = json.load(sys.stdin)
    from jax._src.lib import xla_client as xc

    try:
        comp = xc._xla.mlir.mlir_module_to_xla_computation(request["text"], use_tuple_args=False,
                                                            return_tuple=False)
        opts = xc.hlo.HloPrintOptions()
        opts.print_metadata = True
        hlo = comp.get_hlo_module().to_string(opts)
        out = {"hlo": hlo, "error": None}
    except Exception as exc:  # noqa: BLE001 - jaxlib raises its own runtime error type
        out = {"hlo": None, "error": str(exc)}
    json.dump(out, sys.stdout)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_child_main())
