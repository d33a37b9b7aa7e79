"""HLO opcode names as they appear in text (``shared/reference/hlo_syntax.md`` §7)."""

from __future__ import annotations

ELEMENTWISE_UNARY = frozenset({
    "abs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "cbrt", "ceil", "copy", "cosine", "cosh",
    "count-leading-zeros", "erf", "exponential", "exponential-minus-one", "floor", "imag", "is-finite",
    "log", "log-plus-one", "logistic", "negate", "not", "popcnt", "real", "round-nearest-afz",
    "round-nearest-even", "rsqrt", "sign", "sine", "sinh", "sqrt", "tan", "tanh",
})
ELEMENTWISE_BINARY = frozenset({
    "add", "and", "atan2", "complex", "divide", "maximum", "minimum", "multiply", "or", "power",
    "remainder", "shift-left", "shift-right-arithmetic", "shift-right-logical", "subtract", "xor", "mulhi",
})
ELEMENTWISE_TERNARY = frozenset({"clamp", "select"})

OPCODES = frozenset(ELEMENTWISE_UNARY | ELEMENTWISE_BINARY | ELEMENTWISE_TERNARY | {
    "add-dependency", "after-all", "all-gather", "all-gather-start", "all-gather-done", "all-reduce",
    "all-reduce-start", "all-reduce-done", "all-to-all", "async-start", "async-update", "async-done",
    "batch-norm-grad", "batch-norm-inference", "batch-norm-training", "bitcast", "bitcast-convert",
    "broadcast", "call", "cholesky", "collective-broadcast", "collective-permute",
    "collective-permute-start", "collective-permute-done", "collective-reduce", "compare", "concatenate",
    "conditional", "constant", "convert", "convolution", "copy-start", "copy-done", "custom-call",
    "domain", "dot", "dynamic-reshape", "dynamic-slice", "dynamic-update-slice", "fft", "fusion",
    "gather", "get-dimension-size", "get-tuple-element", "infeed", "iota", "map", "opt-barrier",
    "outfeed", "pad", "parameter", "partition-id", "ragged-all-to-all", "ragged-dot", "recv",
    "recv-done", "reduce", "reduce-precision", "reduce-scatter", "reduce-window", "replica-id",
    "reshape", "reverse", "rng", "rng-bit-generator", "rng-get-and-update-state", "scaled-dot",
    "scan", "scatter", "select-and-scatter", "send", "send-done", "set-dimension-size", "shuffle",
    "slice", "sort", "stochastic-convert", "topk", "transpose", "triangular-solve", "tuple", "while",
})

ASYNC_SUFFIXES = ("-start", "-update", "-done")


def is_known_opcode(text: str) -> bool:
    """True for a real opcode, or the async sugar ``<opcode>-start/-update/-done`` of one.
    A real opcode wins over the sugar (``all-gather-start`` is real)."""
    if text in OPCODES:
        return True
    for suffix in ASYNC_SUFFIXES:
        if text.endswith(suffix) and text[: -len(suffix)] in OPCODES:
            return True
    return False


def async_wrapped_opcode(text: str) -> str | None:
    """The wrapped opcode of an async-sugar opcode (``custom-call-start`` -> ``custom-call``), else None."""
    if text in OPCODES:
        return None
    for suffix in ASYNC_SUFFIXES:
        if text.endswith(suffix) and text[: -len(suffix)] in OPCODES:
            return text[: -len(suffix)]
    return None
