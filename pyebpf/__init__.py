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
if TYPE_CHECKING:
    from typing import Any

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
