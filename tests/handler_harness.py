"""Compare hloshard's predicted collectives with XLA's, instruction by instruction (test helper).

XLA side: the raw after-``spmd-partitioning`` HLO of a module (GSPMD, ``tests/xla_oracle.py``); each
collective is attributed to the instruction whose ``metadata={op_name=...}`` it carries (hand-written
test modules give every instruction ``op_name`` = its own name) and counted in ring-formula bytes per
device (``tests/xla_bytes.py``: all-gather (n-1)/n x result bytes, reduce-scatter (n-1)/n x operand
bytes, all-reduce 2(n-1)/n x bytes, all-to-all (n-1)/n x bytes, collective-permute the bytes sent).

hloshard side: ``evaluate_module`` of the same module (every instruction annotated, so the choice is
pinned), the chosen strategy's ``Strategy.collectives`` plus the resharding plan steps of its operand
edges (``ReshardPlan.predicted_collectives``), attributed to the consuming instruction.
"""

from __future__ import annotations

import re
from collections import defaultdict

from hloshard.cost.collectives import PredictedCollective
from hloshard.cost.reshard import STEP_KINDS

_OP_NAME = re.compile(r'op_name="([^"]*)"')


def xla_collectives(raw_text: str) -> list[dict]:
    """Collectives of a raw partitioned text: dicts with ``kind``, ``op_name``, ``group_size`` (1 for a
    collective-permute), ``replica_groups`` (sorted groups) and ``ring`` (ring bytes per device, loop
    bodies counted per trip: :func:`tests.xla_bytes.collective_bytes`, the project's one counter)."""
    from tests import xla_oracle
    from tests.xla_bytes import collective_bytes

    op_names = {}
    for line in raw_text.splitlines():
        m = xla_oracle._INSTR_RE.match(line)
        if m:
            op = _OP_NAME.search(line)
            op_names[m.group("name")] = op.group(1) if op else None
    found = xla_oracle.collectives(raw_text)
    groups = {c["name"]: c["replica_groups"] or [] for c in found}
    pairs = {c["name"]: c.get("source_target_pairs") or [] for c in found}
    out = []
    for c in collective_bytes(raw_text):
        out.append({"kind": c["kind"], "op_name": op_names.get(c["name"]),
                    "group_size": 1 if c["kind"] == "collective-permute" else c["n"],
                    "replica_groups": sorted(sorted(g) for g in groups.get(c["name"], [])), "ring": c["bytes"],
                    # a collective-permute's moving (source, target) device pairs, sorted (self pairs left out)
                    "pairs": sorted((int(a), int(b)) for a, b in pairs.get(c["name"], []) if int(a) != int(b))})
    return out


def predicted_collectives(module, mesh) -> dict[str, list[PredictedCollective]]:
    """Instruction name -> the collectives hloshard predicts for the shardings ``module`` carries: the
    chosen strategies' ``Strategy.collectives`` and the steps of the resharding plans on their operand
    edges (``autoshard.reshardings_of``), each repeated per loop trip."""
    from hloshard.autoshard import evaluate_module, reshardings_of
    from hloshard.cost.reshard import ReshardStep

    res = evaluate_module(module, mesh)
    graph, choice = res.graph, res.choice
    out: dict = defaultdict(list)
    for v, g in enumerate(graph.nodes):
        st = g.strategies[int(choice[v])]
        if st.collectives:
            out[g.instr.name].extend(list(st.collectives) * max(int(round(graph.ctx.weight(g.instr))), 1))
    weights = {g.instr.name: max(int(round(graph.ctx.weight(g.instr))), 1) for g in graph.nodes}
    for name, edges in reshardings_of(graph, choice).items():
        for edge in edges:
            for step in edge["steps"]:
                if step.get("kind") not in STEP_KINDS:
                    continue
                col = ReshardStep(**step).predicted()
                if col is not None:
                    out[name].extend([col] * weights.get(name, 1))
    return dict(out)


def total_ring(cols) -> float:
    return float(sum(c["ring"] if isinstance(c, dict) else c.ring_bytes for c in cols))


def by_op(xla_cols: list[dict]) -> dict[str, list[dict]]:
    out: dict = defaultdict(list)
    for c in xla_cols:
        out[c["op_name"]].append(c)
    return dict(out)


def summary(cols) -> list[tuple]:
    """(kind, group size, ring bytes) per collective, sorted: the comparable part of either side."""
    rows = []
    for c in cols:
        if isinstance(c, dict):
            rows.append((c["kind"], c["group_size"], round(c["ring"])))
        else:
            rows.append((c.kind, c.group_size if c.kind != "collective-permute" else 1, round(c.ring_bytes)))
    return sorted(rows)


def case_module(cases) -> str:
    """One HLO module holding many independent cases, each ``(name, [(param shape, param sharding)...],
    body, result sharding, result shape)``: ``body`` is the instruction text after the opcode's shape
    with ``{0}``, ``{1}`` ... for the case's parameters (e.g. ``'slice({0}), slice={{[0:8]}}'``).  Every
    instruction carries ``op_name`` = its name, so XLA's collectives can be told apart per case; the
    root is a tuple of every case's result with their shardings (nothing left for XLA to choose)."""
    # one builder: each case is a one-step chain (chain_module), its ``{k}`` placeholders as ``$k``
    return chain_module([(name, params, [(name, out_shape, body.format(*(f"${j}" for j in range(len(params)))),
                                          out_sharding)])
                         for name, params, body, out_sharding, out_shape in cases])


def compare_cases(cases, mesh_spec: str = "2x4", raw: str | None = None, text: str | None = None) -> dict:
    """Partition the module of ``cases`` (``text``: that module with extra computations, default
    :func:`case_module`) with XLA (one child process, unless its partitioned ``raw`` text is given) and
    predict it with hloshard on ``mesh_spec`` (alpha 0, beta 1).  Returns name -> (XLA summary,
    hloshard summary, XLA raw dicts)."""
    from hloshard.hlo.parser import parse_module
    from hloshard.mesh import DeviceMesh
    from tests import xla_oracle

    if text is None:
        text = case_module(cases)
    if raw is None:
        raw = xla_oracle.spmd_partition(text, 8)
    xla = by_op(xla_collectives(raw))
    pred = predicted_collectives(parse_module(text), DeviceMesh.parse(mesh_spec, alpha="0,0", beta="1,1"))
    return {c[0]: (summary(xla.get(c[0], [])), summary(pred.get(c[0], [])), xla.get(c[0], [])) for c in cases}


def partition_only(text: str, num_partitions: int = 8) -> str:
    """The raw after-spmd-partitioning HLO even when a later CPU pass fails (e.g. a custom-call target
    the CPU backend has no implementation for, such as TransformerEngine's ``te_fused_attn_*``): the
    dump of the partitioner pass is read whether or not the compile finished.  Raises OracleError when
    XLA failed before or in the partitioner."""
    import glob
    import os
    import tempfile

    from tests import xla_oracle

    with tempfile.TemporaryDirectory(prefix="hloshard-oracle-") as dump:
        res = xla_oracle._child({"op": "partition", "text": text, "n": num_partitions, "dump": dump,
                                 "propagate_to_output": False}, timeout=xla_oracle.DEFAULT_TIMEOUT)
        if "error" not in res:
            return res["text"]
        files = sorted(glob.glob(os.path.join(dump, "*after_spmd-partitioning*.txt")))
        if not files:
            raise xla_oracle.OracleError(res["error"])
        with open(files[-1]) as f:
            return f.read()


def case_results(cases, prelude: str = "") -> dict:
    """:func:`compare_cases` for ``cases`` with ``prelude`` (reducers, comparators) before the entry,
    partitioned in one child process (``partition_only``); calls ``require_jax`` first."""
    from tests.conftest import require_jax

    require_jax()
    text = case_module(cases).replace("ENTRY e {", prelude + "ENTRY e {")
    return compare_cases(cases, raw=partition_only(text), text=text)


def replica_groups_compared(cases, results: dict, prelude: str = "", mesh_spec: str = "2x4") -> dict:
    """Per case of ``cases`` (already partitioned by :func:`case_results`, whose ``results`` carry XLA's
    raw collectives) ``(XLA, hloshard)``: the sorted ``(kind, sorted replica groups)`` of every collective
    but the collective-permutes, and ``(kind, sorted moving source-target pairs)`` of these."""
    from hloshard.hlo.parser import parse_module
    from hloshard.mesh import DeviceMesh

    text = case_module(cases).replace("ENTRY e {", prelude + "ENTRY e {")
    pred = predicted_collectives(parse_module(text), DeviceMesh.parse(mesh_spec, alpha="0,0", beta="1,1"))
    cp = "collective-permute"
    out = {}
    for c in cases:
        xla = sorted((r["kind"], r["pairs"] if r["kind"] == cp else r["replica_groups"]) for r in results[c[0]][2])
        mine = sorted((p.kind, sorted((int(a), int(b)) for a, b in p.replica_groups if int(a) != int(b)) if p.kind == cp
                       else sorted(sorted(g) for g in p.replica_groups)) for p in pred.get(c[0], []))
        out[c[0]] = (xla, mine)
    return out


def oracle_cases(cases, prelude: str = ""):
    """The shared part of a ``tests/test_handlers_<family>.py`` file: ``(results, groups, match, groups_match)``
    where ``results()`` is :func:`case_results` of ``cases`` and ``groups()`` :func:`replica_groups_compared`
    of them (both computed once: one XLA child per file), and ``match`` / ``groups_match`` are the two
    tests parametrized over the case names (hloshard's ``(kind, group size, ring bytes)`` equal XLA's;
    the replica groups and collective-permute pairs equal XLA's), to be bound to ``test_*`` names."""
    import functools

    import pytest

    names = [c[0] for c in cases]
    results = functools.lru_cache(maxsize=1)(functools.partial(case_results, cases, prelude))

    @functools.lru_cache(maxsize=1)
    def groups():
        return replica_groups_compared(cases, results(), prelude)

    @pytest.mark.parametrize("name", names)
    def match(name):
        xla, pred, _ = results()[name]
        assert pred == xla

    @pytest.mark.parametrize("name", names)
    def groups_match(name):
        xla, pred = groups()[name]
        assert pred == xla

    return results, groups, match, groups_match


# ---------------------------------------------------------------------------------------------------
# Multi-instruction cases and replica-group-level comparison (tuple ops, reshapes on a refined mesh,
# collectives already in the module): additive to the single-instruction harness above.
# ---------------------------------------------------------------------------------------------------


def chain_module(cases, prelude: str = "") -> str:
    """One HLO module of independent multi-instruction cases, each ``(name, [(param shape, param
    sharding)...], [(instruction name, shape, body, sharding)...])``: ``body`` is the text after the
    opcode's shape, ``{0}``, ``{1}`` ... for the case's parameters, other instructions by their names
    (e.g. ``'get-tuple-element(t_a), index=1'``); ``sharding`` None leaves the instruction unannotated.
    Every instruction carries ``op_name`` = its name; the last instruction of a case is its result and
    goes into the root tuple with its sharding.  ``prelude``: computations placed before the entry."""
    lines = ["HloModule cases, num_partitions=8", "", prelude + "ENTRY e {"]
    outs, shs, shapes = [], [], []
    k = 0
    for _name, params, steps in cases:
        refs = []
        for shape, sharding in params:
            lines.append(f'  p{k} = {shape} parameter({k}), sharding={sharding}, metadata={{op_name="p{k}"}}')
            refs.append(f"p{k}")
            k += 1
        for iname, shape, body, sharding in steps:
            text = re.sub(r"\$(\d+)", lambda m: refs[int(m.group(1))], body)
            lines.append(f'  {iname} = {shape} {text}, sharding={sharding}, metadata={{op_name="{iname}"}}')
        iname, shape, _body, sharding = steps[-1]
        outs.append(iname)
        shs.append(sharding[1:-1] if sharding.startswith("{{") else sharding)
        shapes.append(shape)
    lines.append(f'  ROOT out = ({", ".join(shapes)}) tuple({", ".join(outs)}), sharding={{{", ".join(shs)}}}')
    lines.append("}")
    return "\n".join(lines) + "\n"


def detailed(cols) -> list[tuple]:
    """(kind, participants, ring bytes) per collective, sorted: ``participants`` the sorted replica
    groups (each sorted) of a grouped collective, the sorted (source, target) pairs of a
    collective-permute (pairs that move data only: :func:`xla_collectives`' ``pairs``).  Either side (XLA
    dicts or PredictedCollective)."""
    rows = []
    for c in cols:
        if isinstance(c, dict):
            kind = c["kind"]
            who = (tuple(tuple(p) for p in c["pairs"]) if kind == "collective-permute"
                   else tuple(tuple(g) for g in c["replica_groups"]))
            rows.append((kind, who, round(c["ring"])))
        else:
            groups = c.replica_groups
            if c.kind == "collective-permute":
                who = tuple(sorted(tuple(int(x) for x in p) for p in groups if p[0] != p[1]))
            else:
                who = tuple(sorted(tuple(sorted(int(d) for d in g)) for g in groups))
            rows.append((c.kind, who, round(c.ring_bytes)))
    return sorted(rows)


def module_results(text: str, names, mesh_spec: str = "2x4", refine: bool = True) -> dict:
    """Partition ``text`` with XLA (one child process, ``partition_only``) and predict it with hloshard
    (alpha 0, beta 1) on ``mesh_spec``, refined for the module's shardings as the commands do
    (``DeviceMesh.for_module``) unless ``refine`` is False.  Returns instruction name -> (XLA summary,
    hloshard summary, XLA :func:`detailed`, hloshard :func:`detailed`) for each of ``names``; calls
    ``require_jax`` first."""
    from hloshard.hlo.parser import parse_module
    from hloshard.mesh import DeviceMesh
    from tests.conftest import require_jax

    require_jax()
    raw = partition_only(text)
    xla = by_op(xla_collectives(raw))
    module = parse_module(text)
    mesh = DeviceMesh.for_module(module, mesh_spec, alpha="0,0", beta="1,1", refine=refine)
    pred = predicted_collectives(module, mesh)
    return {n: (summary(xla.get(n, [])), summary(pred.get(n, [])), detailed(xla.get(n, [])),
                detailed(pred.get(n, []))) for n in names}
