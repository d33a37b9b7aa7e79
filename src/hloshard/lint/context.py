"""What a rule sees: the source text, its sharding sites, the parsed module (or the syntax error),
the options, and helpers shared by several rules (device counts, mesh, leaf shapes, positions)."""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Iterator

from .shapes import leaf_shapes, sharding_arity  # noqa: F401  (re-exported)
from .source import ShardingSite, SourceScan
from .validity import problems_by_code
from hloshard.errors import HloshardError
from hloshard.mesh import DeviceMesh

if TYPE_CHECKING:  # pragma: no cover
    from hloshard.hlo.ir import Computation, Instruction, Module

#: opcodes whose called computations are control flow (their instructions are partitioned like the
#: entry's); the others (fusion bodies, reducers, comparators, async wrapped computations) are not
#: annotated by users and are skipped by the consistency rules.
CONTROL_FLOW_OPCODES = frozenset({"while", "conditional", "call"})


@dataclass
class LintOptions:
    """Options of one lint run (CLI > pyproject.toml > defaults).

    ``select``/``ignore``: rule codes, code prefixes (``HS1``) or rule names; ``fail_on``: the least
    severe severity that makes the run fail; ``reshard_threshold``: bytes per device above which a
    resharding is reported (HS401); ``num_partitions``: overrides the module header; ``mesh`` (and
    ``device_ids``, ``alpha``, ``beta``): the logical device mesh for the cost rules.
    """

    select: tuple[str, ...] = ("HS",)
    ignore: tuple[str, ...] = ()
    fail_on: str = "error"
    reshard_threshold: int = 64 * 2**20
    num_partitions: int | None = None
    mesh: str | None = None
    device_ids: str | None = None
    alpha: str | None = None
    beta: str | None = None


class LintContext:
    """Everything one file's rules need.

    ``module`` is None when the file does not parse (``syntax_error`` holds the
    :class:`~hloshard.errors.HloSyntaxError`); only ``text_only`` rules run then.
    """

    def __init__(self, path: str, scan: SourceScan, module: "Module | None", syntax_error,
                 options: LintOptions):
        self.path = path
        self.scan = scan
        self.text = scan.text
        self.module = module
        self.syntax_error = syntax_error
        self.options = options
        #: (ShardingSite, HloSyntaxError) for shardings the parser rejected; they were replaced by
        #: {unknown} and the file parsed again (HS001 reports them unless HS102 explains them)
        self.rejected_shardings: list = []
        self._instr_offsets: list[int] = []
        self._instrs: list = []
        self._site_of: dict[int, ShardingSite] = {}
        self._ignores_of: dict[int, set[str]] = {}
        self._ignores_by_line: dict[int, set[str]] = {}
        for ig in scan.ignores:
            self._ignores_by_line.setdefault(ig.line, set()).update(ig.codes)
        if module is not None:
            self._index_module(module)

    # -- indexing ----------------------------------------------------------------------------------
    def _index_module(self, module) -> None:
        pairs = []
        for instr in module.all_instructions():
            line = getattr(instr, "line", 0) or 0
            if line > 0:
                pairs.append((self.scan.offset(line, getattr(instr, "column", 1) or 1), instr))
        pairs.sort(key=lambda p: p[0])
        self._instr_offsets = [p[0] for p in pairs]
        self._instrs = [p[1] for p in pairs]
        for site in self.scan.sites:
            instr = self._instr_at(site.offset)
            if instr is not None and id(instr) not in self._site_of:
                site.instruction = instr
                self._site_of[id(instr)] = site
        for ig in self.scan.ignores:
            instr = self._instr_at(ig.offset)
            if instr is not None:
                self._ignores_of.setdefault(id(instr), set()).update(ig.codes)
        for instr in self._instrs:
            codes = getattr(instr, "ignore_codes", ()) or ()
            if codes:
                self._ignores_of.setdefault(id(instr), set()).update(c.upper() for c in codes)

    def _instr_at(self, offset: int):
        i = bisect.bisect_right(self._instr_offsets, offset) - 1
        return self._instrs[i] if i >= 0 else None

    # -- positions, keys, suppression ------------------------------------------------------------
    def locate(self, where) -> tuple[int, int, str | None, str]:
        """(line, column, instruction name or None, fingerprint key) of an Instruction,
        a ShardingSite or a (line, column) pair."""
        if isinstance(where, ShardingSite):
            instr = where.instruction
            if instr is not None:
                return where.line, where.column, instr.name, f"{self._instr_key(instr)}#sharding"
            return where.line, where.column, None, f"@sharding:{where.text}"
        if isinstance(where, tuple):
            return where[0], where[1], None, f"@{where[0]}:{where[1]}"
        instr = where
        return (getattr(instr, "line", 0) or 0, getattr(instr, "column", 0) or 0, instr.name,
                self._instr_key(instr))

    @staticmethod
    def _instr_key(instr) -> str:
        comp = getattr(instr, "parent", None)
        return f"{comp.name if comp is not None else ''}/{instr.name}"

    def is_suppressed(self, code: str, line: int, where) -> bool:
        """True when a trailing ``/* hloshard: ignore[CODE] */`` (code or prefix) covers the
        finding: on the instruction it is about, or on the line it is reported at."""
        codes = set(self._ignores_by_line.get(line, ()))
        instr = where.instruction if isinstance(where, ShardingSite) else (
            None if isinstance(where, tuple) else where)
        if instr is not None:
            codes |= self._ignores_of.get(id(instr), set())
        return any(code.startswith(c) or c in ("*", "ALL") for c in codes)

    # -- sharding sites ---------------------------------------------------------------------------
    @property
    def sites(self) -> list[ShardingSite]:
        return self.scan.sites

    def site_of(self, instr) -> ShardingSite | None:
        """The ``sharding=`` attribute written on ``instr`` (None when it has none)."""
        return self._site_of.get(id(instr))

    def sharding_is_sound(self, instr) -> bool:
        """True when ``instr``'s sharding can be used by semantic rules: it was written validly
        (buildable tile assignment, distinct in-range device ids, device count as expected, tile
        rank matching the shape). Rules that reason about resharding skip the others."""
        if getattr(instr, "sharding", None) is None:
            return False
        site = self.site_of(instr)
        if site is None:
            return True  # created programmatically
        return id(site) not in self.unsound_sites

    @cached_property
    def unsound_sites(self) -> set[int]:
        return {id(site) for entries in problems_by_code(self).values() for site, _, _ in entries}

    # -- module-level facts -----------------------------------------------------------------------
    @property
    def header_num_partitions(self) -> int | None:
        """num_partitions as written in the HloModule header (None when not written)."""
        return self.scan.num_partitions

    @property
    def num_replicas(self) -> int:
        """replica_count from the header (XLA's default 1 when absent)."""
        return self.scan.replica_count or 1

    @cached_property
    def num_partitions(self) -> int | None:
        """The number of partitions every tiled sharding must cover: ``--num-partitions`` (or
        pyproject), else the module header, else the ``--mesh`` device count; None when unknown."""
        if self.options.num_partitions:
            return self.options.num_partitions
        if self.header_num_partitions:
            return self.header_num_partitions
        if self.options.mesh:
            mesh = self.mesh
            if mesh is not None:
                return mesh.num_devices
        return None

    @cached_property
    def consistent_device_count(self) -> int | None:
        """The device count most tiled shardings in the file use (ties: the first written);
        None when there is no buildable tiled sharding."""
        counts: Counter = Counter()
        first: dict[int, int] = {}
        for i, site in enumerate(self.sites):
            for leaf in site.spec.leaves():
                if leaf.kind == "tiled" and leaf.num_devices is not None:
                    n = leaf.num_devices
                    counts[n] += 1
                    first.setdefault(n, i)
        if not counts:
            return None
        return max(counts, key=lambda n: (counts[n], -first[n]))

    @property
    def device_count(self) -> int | None:
        """num_partitions when known, else the module's consistent device count."""
        return self.num_partitions or self.consistent_device_count

    @cached_property
    def spmd(self) -> bool:
        """The module is SPMD-partitioned: more than one partition, or any sharding written."""
        return bool((self.num_partitions or 0) > 1 or self.sites)

    @cached_property
    def mesh(self):
        """The DeviceMesh for the cost rules: ``--mesh``, else num_partitions (options or header)
        as a 1-D mesh, else the module's consistent device count as a 1-D mesh; None when none
        of these is known or the mesh cannot be built."""

        o = self.options
        spec = o.mesh
        if spec is None:
            n = o.num_partitions or self.header_num_partitions or self.consistent_device_count
            if not n or n < 1:
                return None
            spec = str(n)
        try:
            return DeviceMesh.parse(spec, device_ids=o.device_ids, alpha=o.alpha, beta=o.beta)
        except HloshardError:
            return None

    # -- traversal --------------------------------------------------------------------------------
    @cached_property
    def partitioned_computations(self) -> list["Computation"]:
        """The entry and the computations reached from it through while / conditional / call
        (the ones whose instructions carry user shardings), in module text order."""
        if self.module is None:
            return []
        seen: set[int] = set()
        stack = [self.module.entry]
        while stack:
            comp = stack.pop()
            if id(comp) in seen:
                continue
            seen.add(id(comp))
            for instr in comp.instructions:
                if instr.opcode in CONTROL_FLOW_OPCODES:
                    stack.extend(instr.called_computations)
        return [c for c in self.module.computations if id(c) in seen]

    def instructions_to_partition(self) -> Iterator["Instruction"]:
        """The instructions XLA's SPMD partitioner will place: those of :attr:`partitioned_computations`
        in an SPMD module (:attr:`spmd`) that is not already partitioned (XLA names the entry of its
        output ``<name>_spmd``). Empty otherwise."""
        module = self.module
        if module is None or not self.spmd or module.entry.name.endswith("_spmd"):
            return
        for comp in self.partitioned_computations:
            yield from comp.instructions

    def instructions(self) -> Iterator["Instruction"]:
        """Every instruction of the module, in text order."""
        if self.module is None:
            return iter(())
        return self.module.all_instructions()
