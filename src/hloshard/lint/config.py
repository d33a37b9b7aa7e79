"""``[tool.hloshard.lint]`` in the nearest ``pyproject.toml`` (searched upward from the current
directory; the first ``pyproject.toml`` found is used, whether or not it has the section).

Keys (all optional; command-line options override them)::

    [tool.hloshard.lint]
    select = ["HS1", "HS3"]          # codes, prefixes or rule names ("ALL" for everything)
    ignore = ["HS501"]
    fail-on = "warning"              # error | warning | info
    reshard-threshold = "32MiB"      # bytes per device (int or size string)
    num-partitions = 8
    mesh = "2x4"
"""

from __future__ import annotations

import pathlib

from ..errors import UsageError
from ..io import cannot_read
from ..hlo.attributes import MAX_DEVICES
from ..units import parse_bytes
from .rule import SEVERITIES
from ..mesh import DeviceMesh

KEYS = ("select", "ignore", "fail-on", "reshard-threshold", "num-partitions", "mesh")


def find_pyproject(start: str | pathlib.Path | None = None) -> pathlib.Path | None:
    """The nearest ``pyproject.toml`` in ``start`` (default: the current directory) or above."""
    here = pathlib.Path(start or pathlib.Path.cwd()).resolve()
    for directory in (here, *here.parents):
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def _codes(value, key: str, path) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"{path}: [tool.hloshard.lint] {key} must be a list of rule codes")
    out = []
    for v in value:
        out.extend(p.strip() for p in v.split(",") if p.strip())
    return tuple(out)


def _checked(parse, value: str, key: str, file):
    """``parse(value)``; its UsageError re-raised naming the file and the key (the parsers' own
    messages name the command-line option)."""
    try:
        return parse(value)
    except UsageError as exc:
        reason = str(exc).split(": ", 1)[-1]
        raise UsageError(f"{file}: [tool.hloshard.lint] {key} = {value!r} is invalid: {reason}") from None


def load_config(start: str | pathlib.Path | None = None, path: str | pathlib.Path | None = None) -> dict:
    """Read and validate ``[tool.hloshard.lint]``; returns a dict with keys ``select``, ``ignore``
    (tuples), ``fail_on`` (str), ``reshard_threshold`` (int bytes), ``num_partitions`` (int),
    ``mesh`` (str) -- only those present -- plus ``_path`` (the file, or None).

    ``path`` names the file explicitly (``--config``); otherwise :func:`find_pyproject`.
    Raises UsageError for an unreadable file, invalid TOML, an unknown key or a bad value.
    """
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError:
            raise UsageError("reading pyproject.toml needs Python 3.11+ (tomllib) or the tomli package; "
                             "pass --no-config to skip it") from None
    file = pathlib.Path(path) if path is not None else find_pyproject(start)
    if file is None:
        return {"_path": None}
    try:
        with open(file, "rb") as fh:
            data = tomllib.load(fh)
    except OSError as exc:
        raise UsageError(cannot_read(str(file), exc)) from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{file}: invalid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{file}: not UTF-8 text (byte {exc.start}: {exc.reason}); TOML files are UTF-8 "
                         f"(pass --no-config to skip it)") from None
    section = data.get("tool", {}).get("hloshard", {}).get("lint", {})
    if not isinstance(section, dict):
        raise UsageError(f"{file}: [tool.hloshard.lint] must be a table")
    out: dict = {"_path": str(file)}
    for key, value in section.items():
        if key not in KEYS:
            raise UsageError(f"{file}: unknown key {key!r} in [tool.hloshard.lint] (known: {', '.join(KEYS)})")
        if key in ("select", "ignore"):
            out[key] = _codes(value, key, file)
        elif key == "fail-on":
            if value not in SEVERITIES:
                raise UsageError(f"{file}: [tool.hloshard.lint] fail-on must be one of {', '.join(SEVERITIES)}")
            out["fail_on"] = value
        elif key == "reshard-threshold":
            if isinstance(value, bool) or not isinstance(value, (int, str)) or (isinstance(value, int) and value < 0):
                raise UsageError(f"{file}: [tool.hloshard.lint] reshard-threshold must be a byte size "
                                 f"(an integer or a string like \"64MiB\")")
            out["reshard_threshold"] = value if isinstance(value, int) else _checked(parse_bytes, value, key, file)
        elif key == "num-partitions":
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_DEVICES:
                raise UsageError(f"{file}: [tool.hloshard.lint] num-partitions must be an integer "
                                 f"from 1 to {MAX_DEVICES:,}")
            out["num_partitions"] = value
        elif key == "mesh":
            if not isinstance(value, str):
                raise UsageError(f"{file}: [tool.hloshard.lint] mesh must be a string like \"2x4\"")

            _checked(DeviceMesh.parse, value, key, file)
            out["mesh"] = value
    return out
