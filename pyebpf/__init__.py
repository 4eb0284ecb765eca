"""pyebpf: a pure-Python eBPF toolkit.

Assemble eBPF programs from Python or text, load them into the kernel, attach
them, and read their maps and events -- with no LLVM, BCC or libbpf.

The top-level names are imported lazily, so that ``import pyebpf`` (and the
command line) start in milliseconds:

* :func:`assemble`, :func:`disassemble` -- text (``pyebpf.text``)
* :func:`decode` -- raw bytes to instructions (``pyebpf.isa``)
* :class:`Program` and the registers ``R0``..``R10`` -- the DSL (``pyebpf.program``)
* :func:`load` -- load into the kernel (``pyebpf.loader``)
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:       # what __getattr__ imports on first use, as type checkers see it
    from typing import Any

    # ("X as X": an explicit re-export, as mypy --strict wants it)
    from .isa import Insn as Insn, decode as decode, encode as encode
    from .loader import LoadedProgram as LoadedProgram, load as load
    from .program import Program as Program
    from .program import (R0 as R0, R1 as R1, R2 as R2, R3 as R3, R4 as R4, R5 as R5,
                          R6 as R6, R7 as R7, R8 as R8, R9 as R9, R10 as R10)
    from .program import (W0 as W0, W1 as W1, W2 as W2, W3 as W3, W4 as W4, W5 as W5,
                          W6 as W6, W7 as W7, W8 as W8, W9 as W9, W10 as W10)
    from .text import (assemble as assemble, disassemble as disassemble,
                       get_instructions as get_instructions)

__version__ = "0.1.0"

import sys as _sys

if (getattr(_sys, "argv", None) or [""])[0].endswith(("-m", "pyebpf")):
    # maybe the command line starting: it takes Ctrl-C from here (pyebpf.cli.take_sigint)
    from .cli import take_sigint as _take_sigint
    _take_sigint()

from .errors import (AssemblyError, EncodingError, KernelError, ProgramError, PyebpfError,
                     VerifierError)

_LAZY = {
    "assemble": "pyebpf.text", "disassemble": "pyebpf.text", "get_instructions": "pyebpf.text",
    "decode": "pyebpf.isa", "encode": "pyebpf.isa", "Insn": "pyebpf.isa",
    "Program": "pyebpf.program",
    **{f"R{i}": "pyebpf.program" for i in range(11)},
    **{f"W{i}": "pyebpf.program" for i in range(11)},
    "load": "pyebpf.loader", "LoadedProgram": "pyebpf.loader",
    "open_object": "pyebpf.objects", "load_object": "pyebpf.objects",
}

__all__ = ["__version__", "AssemblyError", "EncodingError", "KernelError", "ProgramError",
           "PyebpfError", "VerifierError", *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pyebpf' has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
