"""The eBPF instruction set: opcode numbers, the :class:`Insn` type, its
classification into :class:`Form`, byte encoding/decoding, and the helper
table.  Pure Python, no kernel."""
from . import opcodes
from .helpers import HELPERS, Helper, helper, helper_name
from .insn import (Form, Insn, SLOT_SIZE, classify, decode, encode, is_jump, iter_decode,
                   jump_offset, s16, s32, set_jump_offset)

__all__ = [
    "opcodes", "HELPERS", "Helper", "helper", "helper_name", "Form", "Insn", "SLOT_SIZE",
    "classify", "decode", "encode", "is_jump", "iter_decode", "jump_offset", "s16", "s32",
    "set_jump_offset",
]
