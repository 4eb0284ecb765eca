"""pyebpf: a pure-Python eBPF toolkit.

Assemble eBPF programs from Python or text, load them into the kernel, attach
them, and read their maps and events -- with no LLVM, BCC or libbpf.
"""
from __future__ import annotations

__version__ = "0.1.0"

from .errors import (AssemblyError, EncodingError, KernelError, ProgramError, PyebpfError,
                     VerifierError)
from .isa import Insn, decode

__all__ = [
    "__version__", "Insn", "decode", "AssemblyError", "EncodingError", "KernelError",
    "ProgramError", "PyebpfError", "VerifierError",
]
