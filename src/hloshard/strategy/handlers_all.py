"""Imports every handler module so that their ``@register`` decorators run."""

from . import (  # noqa: F401
    broadcast, collectives, control_flow, convolution, custom_call, dot, elementwise, fusion, gather_scatter,
    parameter, reduce, reshape, slicing, sort, transpose, tuple_ops, window,
)
