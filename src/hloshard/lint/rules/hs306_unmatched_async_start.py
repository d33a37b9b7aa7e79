from __future__ import annotations

from ..rule import Rule


def _kind(opcode: str):
    """('start'|'update'|'done', family) for async opcodes, else None."""
    if not opcode.endswith(("-start", "-update", "-done")):
        return None
    for suffix in ("-start", "-update", "-done"):
        if opcode.endswith(suffix):
            family = opcode[: -len(suffix)]
            # send-done / recv-done complete send / recv, which have no -start
            return None if family in ("send", "recv") else (suffix[1:], family)
    return None


def _dones(start):
    """-done instructions completing `start` (through async-update chains)."""
    out = []
    stack = [start]
    seen = set()
    while stack:
        cur = stack.pop()
        for u in cur.users:
            k = _kind(u.opcode)
            if k is None or id(u) in seen:
                continue
            seen.add(id(u))
            if k[0] == "done":
                out.append(u)
            elif k[0] == "update":
                stack.append(u)
    return out


class UnmatchedAsyncStart(Rule):
    """An asynchronous ``-start`` does not have exactly one matching ``-done``.

    An async collective (``all-gather-start``, ``all-reduce-start``, ``collective-permute-start``,
    the ``reduce-scatter-start`` / ``all-to-all-start`` sugar, ``async-start``) starts a transfer
    that exactly one ``-done`` of the same kind completes: without it the result is never
    awaited (and its buffers never released), with two the transfer would be awaited twice. A
    ``-done`` whose operand is a different kind of start is equally wrong.

    **Bad**::

        ENTRY e {
          a = f32[4] parameter(0)
          ags = (f32[4], f32[8]) all-gather-start(a), channel_id=1, replica_groups={{0,1}}, dimensions={0}, use_global_device_ids=true
          ROOT r = f32[4] negate(a)
        }

    **Good**::

        ENTRY e {
          a = f32[4] parameter(0)
          ags = (f32[4], f32[8]) all-gather-start(a), channel_id=1, replica_groups={{0,1}}, dimensions={0}, use_global_device_ids=true
          ROOT agd = f32[8] all-gather-done(ags)
        }
    """

    code = "HS306"
    name = "unmatched-async-start"
    severity = "error"
    groups = ("collectives",)

    def evaluate(self, context):
        for instr in context.instructions():
            k = _kind(instr.opcode)
            if k is None:
                continue
            phase, family = k
            if phase == "start":
                dones = _dones(instr)
                matching = [u for u in dones if _kind(u.opcode)[1] == family]
                if len(matching) != 1:
                    names = ", ".join(f"%{u.name}" for u in matching)
                    msg = (f"%{instr.name} ({instr.opcode}) has no {family}-done" if not matching else
                           f"%{instr.name} ({instr.opcode}) has {len(matching)} {family}-done users ({names}); "
                           f"exactly one must complete it")
                    yield self.finding(context, instr, msg)
            elif phase == "done":
                if len(instr.operands) != 1:
                    continue
                op = instr.operands[0]
                ok = _kind(op.opcode)
                if ok is None or ok[1] != family or ok[0] == "done":
                    yield self.finding(context, instr,
                                       f"%{instr.name} ({instr.opcode}) completes %{op.name} ({op.opcode}), "
                                       f"which is not a {family}-start")
