"""HLO opcode names as they appear in text (``shared/reference/hlo_syntax.md`` §7), exactly the ones
jaxlib 0.10.2's parser knows ("atan", "collective-reduce" and "shuffle" are not HLO opcodes: XLA says
"expects opcode"), and the attributes XLA's parser accepts on each."""

from __future__ import annotations

ELEMENTWISE_UNARY = frozenset({
    "abs", "acos", "acosh", "asin", "asinh", "atanh", "cbrt", "ceil", "copy", "cosine", "cosh",
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
    "collective-permute-start", "collective-permute-done", "compare", "concatenate",
    "conditional", "constant", "convert", "convolution", "copy-start", "copy-done", "custom-call",
    "domain", "dot", "dynamic-reshape", "dynamic-slice", "dynamic-update-slice", "fft", "fusion",
    "gather", "get-dimension-size", "get-tuple-element", "infeed", "iota", "map", "opt-barrier",
    "outfeed", "pad", "parameter", "partition-id", "ragged-all-to-all", "ragged-dot", "recv",
    "recv-done", "reduce", "reduce-precision", "reduce-scatter", "reduce-window", "replica-id",
    "reshape", "reverse", "rng", "rng-bit-generator", "rng-get-and-update-state", "scaled-dot",
    "scan", "scatter", "select-and-scatter", "send", "send-done", "set-dimension-size",
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

#: attributes every instruction may carry (jaxlib 0.10.2's parser lists them for every opcode)
COMMON_ATTRIBUTES = frozenset({"backend_config", "control-predecessors", "frontend_attributes", "metadata", "origin", "parameter_replication", "sharding", "statistics"})

#: the attributes XLA's parser accepts per opcode beyond COMMON_ATTRIBUTES, as jaxlib 0.10.2 lists them in
#: its 'unexpected attribute "x". Allowed attributes: ...' error (collected by giving every opcode an
#: unknown attribute; conditional's true_computation/false_computation form added, which it parses
#: separately). Opcodes not listed (hloshard-only names) are not checked.
OPCODE_ATTRIBUTES: dict[str, frozenset[str]] = {
    "abs": frozenset(),
    "acos": frozenset({"result_accuracy"}),
    "acosh": frozenset({"result_accuracy"}),
    "add": frozenset(),
    "add-dependency": frozenset(),
    "after-all": frozenset(),
    "all-gather": frozenset({"channel_id", "constrain_layout", "dimensions", "replica_groups", "use_global_device_ids"}),
    "all-gather-done": frozenset(),
    "all-gather-start": frozenset({"channel_id", "constrain_layout", "dimensions", "replica_groups", "use_global_device_ids"}),
    "all-reduce": frozenset({"channel_id", "constrain_layout", "mode", "replica_groups", "to_apply", "use_global_device_ids"}),
    "all-reduce-done": frozenset(),
    "all-reduce-start": frozenset({"channel_id", "constrain_layout", "mode", "replica_groups", "to_apply", "use_global_device_ids"}),
    "all-to-all": frozenset({"channel_id", "constrain_layout", "dimensions", "replica_groups"}),
    "and": frozenset(),
    "asin": frozenset({"result_accuracy"}),
    "asinh": frozenset({"result_accuracy"}),
    "async-done": frozenset({"async_execution_thread", "calls"}),
    "async-start": frozenset({"async_execution_thread", "calls", "output_to_operand_aliasing"}),
    "async-update": frozenset({"async_execution_thread", "calls"}),
    "atan2": frozenset(),
    "atanh": frozenset({"result_accuracy"}),
    "batch-norm-grad": frozenset({"epsilon", "feature_index"}),
    "batch-norm-inference": frozenset({"epsilon", "feature_index"}),
    "batch-norm-training": frozenset({"epsilon", "feature_index"}),
    "bitcast": frozenset(),
    "bitcast-convert": frozenset(),
    "broadcast": frozenset({"dimensions"}),
    "call": frozenset({"is_composite", "to_apply"}),
    "cbrt": frozenset({"result_accuracy"}),
    "ceil": frozenset(),
    "cholesky": frozenset({"lower"}),
    "clamp": frozenset(),
    "collective-broadcast": frozenset({"channel_id", "replica_groups"}),
    "collective-permute": frozenset({"channel_id", "slice_sizes", "source_target_pairs"}),
    "collective-permute-done": frozenset(),
    "collective-permute-start": frozenset({"channel_id", "slice_sizes", "source_target_pairs"}),
    "compare": frozenset({"direction", "type"}),
    "complex": frozenset(),
    "concatenate": frozenset({"dimensions"}),
    "conditional": frozenset({"branch_computations", "false_computation", "true_computation"}),
    "constant": frozenset(),
    "convert": frozenset(),
    "convolution": frozenset({"batch_group_count", "convolution_kind", "dim_labels", "feature_group_count", "operand_precision", "sparsity_config", "window"}),
    "copy": frozenset(),
    "copy-done": frozenset(),
    "copy-start": frozenset({"cross_program_prefetch_index"}),
    "cosh": frozenset({"result_accuracy"}),
    "cosine": frozenset({"result_accuracy"}),
    "count-leading-zeros": frozenset(),
    "custom-call": frozenset({"api_version", "batch_group_count", "called_computations", "custom_call_has_side_effect", "custom_call_target", "dim_labels", "feature_group_count", "literal", "operand_layout_constraints", "operand_precision", "output_to_operand_aliasing", "padding_type", "schedule", "to_apply", "window"}),
    "divide": frozenset(),
    "domain": frozenset({"domain"}),
    "dot": frozenset({"algorithm", "lhs_batch_dims", "lhs_contracting_dims", "operand_precision", "rhs_batch_dims", "rhs_contracting_dims"}),
    "dynamic-reshape": frozenset(),
    "dynamic-slice": frozenset({"dynamic_slice_sizes"}),
    "dynamic-update-slice": frozenset(),
    "erf": frozenset({"result_accuracy"}),
    "exponential": frozenset({"result_accuracy"}),
    "exponential-minus-one": frozenset({"result_accuracy"}),
    "fft": frozenset({"fft_length", "fft_type"}),
    "floor": frozenset(),
    "fusion": frozenset({"calls", "kind", "output_to_operand_aliasing"}),
    "gather": frozenset({"collapsed_slice_dims", "index_vector_dim", "indices_are_sorted", "offset_dims", "operand_batching_dims", "slice_sizes", "start_index_map", "start_indices_batching_dims"}),
    "get-dimension-size": frozenset({"dimensions"}),
    "get-tuple-element": frozenset({"index"}),
    "imag": frozenset(),
    "infeed": frozenset({"infeed_config"}),
    "iota": frozenset({"iota_dimension"}),
    "is-finite": frozenset(),
    "log": frozenset({"result_accuracy"}),
    "log-plus-one": frozenset({"result_accuracy"}),
    "logistic": frozenset({"result_accuracy"}),
    "map": frozenset({"dimensions", "to_apply"}),
    "maximum": frozenset(),
    "minimum": frozenset(),
    "mulhi": frozenset(),
    "multiply": frozenset(),
    "negate": frozenset(),
    "not": frozenset(),
    "opt-barrier": frozenset(),
    "or": frozenset(),
    "outfeed": frozenset({"outfeed_config", "outfeed_shape"}),
    "pad": frozenset({"padding"}),
    "parameter": frozenset(),
    "partition-id": frozenset(),
    "popcnt": frozenset(),
    "power": frozenset(),
    "ragged-all-to-all": frozenset({"channel_id", "dimensions", "replica_groups"}),
    "ragged-dot": frozenset({"lhs_batch_dims", "lhs_contracting_dims", "lhs_ragged_dims", "operand_precision", "rhs_batch_dims", "rhs_contracting_dims", "rhs_group_dims"}),
    "real": frozenset(),
    "recv": frozenset({"channel_id", "is_host_transfer"}),
    "recv-done": frozenset({"channel_id", "is_host_transfer"}),
    "reduce": frozenset({"dimensions", "to_apply"}),
    "reduce-precision": frozenset({"exponent_bits", "mantissa_bits"}),
    "reduce-scatter": frozenset({"channel_id", "constrain_layout", "dimensions", "mode", "replica_groups", "to_apply", "use_global_device_ids"}),
    "reduce-window": frozenset({"to_apply", "window"}),
    "remainder": frozenset(),
    "replica-id": frozenset(),
    "reshape": frozenset({"inferred_dimension"}),
    "reverse": frozenset({"dimensions"}),
    "rng": frozenset({"distribution"}),
    "rng-bit-generator": frozenset({"algorithm"}),
    "rng-get-and-update-state": frozenset({"delta"}),
    "round-nearest-afz": frozenset(),
    "round-nearest-even": frozenset(),
    "rsqrt": frozenset({"result_accuracy"}),
    "scaled-dot": frozenset({"algorithm", "lhs_batch_dims", "lhs_contracting_dims", "operand_precision", "rhs_batch_dims", "rhs_contracting_dims"}),
    "scan": frozenset({"dimensions", "is_associative", "is_reverse", "num_carries", "to_apply"}),
    "scatter": frozenset({"index_vector_dim", "indices_are_sorted", "input_batching_dims", "inserted_window_dims", "scatter_dims_to_operand_dims", "scatter_indices_batching_dims", "to_apply", "unique_indices", "update_window_dims"}),
    "select": frozenset(),
    "select-and-scatter": frozenset({"scatter", "select", "window"}),
    "send": frozenset({"channel_id", "is_host_transfer"}),
    "send-done": frozenset({"channel_id", "is_host_transfer"}),
    "set-dimension-size": frozenset({"dimensions"}),
    "shift-left": frozenset(),
    "shift-right-arithmetic": frozenset(),
    "shift-right-logical": frozenset(),
    "sign": frozenset(),
    "sine": frozenset({"result_accuracy"}),
    "sinh": frozenset({"result_accuracy"}),
    "slice": frozenset({"slice"}),
    "sort": frozenset({"dimensions", "is_stable", "to_apply"}),
    "sqrt": frozenset({"result_accuracy"}),
    "stochastic-convert": frozenset(),
    "subtract": frozenset(),
    "tan": frozenset({"result_accuracy"}),
    "tanh": frozenset({"result_accuracy"}),
    "topk": frozenset({"k", "largest"}),
    "transpose": frozenset({"dimensions"}),
    "triangular-solve": frozenset({"left_side", "lower", "transpose_a", "unit_diagonal"}),
    "tuple": frozenset(),
    "while": frozenset({"body", "condition"}),
    "xor": frozenset(),
}


def allowed_attributes(opcode: str) -> frozenset[str] | None:
    """Attribute names XLA accepts on ``opcode`` (async sugar ``<op>-start/-update/-done``: the wrapped
    op's plus async-start's); None when hloshard has no table for it (then nothing is checked)."""
    extra = OPCODE_ATTRIBUTES.get(opcode)
    if extra is None:
        wrapped = async_wrapped_opcode(opcode)
        if wrapped is None or wrapped not in OPCODE_ATTRIBUTES:
            return None
        extra = OPCODE_ATTRIBUTES[wrapped] | OPCODE_ATTRIBUTES["async-start"]
    return _ALLOWED_CACHE.setdefault(opcode, COMMON_ATTRIBUTES | extra)


_ALLOWED_CACHE: dict[str, frozenset[str]] = {}
