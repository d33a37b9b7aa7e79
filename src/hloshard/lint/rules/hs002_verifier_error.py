from __future__ import annotations

from ..rule import Rule
from ...hlo.verify import verify_problems


class VerifierError(Rule):
    """The module parses but XLA's verifier (or its compiler) would refuse it.

    These are the checks ``hloshard solve`` and ``cost`` run before anything else
    (:func:`hloshard.hlo.verify.verify_module`, the one verifier; each rule was checked against
    jaxlib 0.10.2 compiling for 8 partitions): operand counts and shapes of elementwise ops, dot /
    transpose / broadcast / slice / reshape / concatenate / pad / dynamic-slice / reduce dimensions,
    tuple and get-tuple-element shapes, while and call signatures, convolution feature sizes,
    async ``-done`` shapes against their start, ``xla.sdy.sharding`` naming a mesh the header's
    ``xla.sdy.meshes`` does not define, parameter numbering. Problems of collectives are reported
    by HS301-HS305 (the same validator). The finding is at the instruction the verifier names and
    the message is the one ``solve`` / ``cost`` exit with.

    **Bad**::

        ENTRY e {
          a = f32[2] parameter(0)
          ROOT b = f32[3] broadcast(a), dimensions={0}
        }

    **Good**::

        ENTRY e {
          a = f32[1] parameter(0)
          ROOT b = f32[3] broadcast(a), dimensions={0}
        }
    """

    code = "HS002"
    name = "verifier-error"
    severity = "error"
    groups = ("syntax",)

    def evaluate(self, context):
        if context.module is None:
            return

        for instr, code, message in verify_problems(context.module, context.num_partitions):
            if code == self.code:
                yield self.finding(context, instr, message)
