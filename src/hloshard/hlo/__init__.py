"""HLO text front end: grammar, parser, IR, printer, shapes and shardings.

>>> from hloshard.hlo import parse_module, print_module
>>> m = parse_module("HloModule m\\nENTRY e {\\n  ROOT p = f32[8]{0} parameter(0)\\n}\\n")
>>> m.entry.root.shape.dims
(8,)
"""

from .ir import Computation, Instruction, Module
from .parser import parse_file, parse_module
from .printer import print_module
from .shape import Layout, Shape, element_byte_size, parse_shape

__all__ = ["Computation", "Instruction", "Module", "parse_file", "parse_module", "print_module",
           "Layout", "Shape", "element_byte_size", "parse_shape"]
