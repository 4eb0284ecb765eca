"""Symbolization: user stacks captured by build id, named after the process
is gone (:mod:`.stacks`: :class:`Symbolizer`, demangling, perf maps), and
kernel addresses named from ``/proc/kallsyms`` (:mod:`.kallsyms`), and
CPython processes' frames: the interpreter found, its layout, code objects
named (:mod:`.python`).  Shared by the language (``ustack``, ``kstack``,
``pystack``, ``usym()``) and the profiler.  Names are imported on first use.
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:       # (what __getattr__ imports on first use, as type checkers see it)
    from .stacks import (Symbolizer as Symbolizer, demangle as demangle, STACK_IP as STACK_IP,
                         STACK_VALID as STACK_VALID, make_stack_map as make_stack_map,
                         read_perf_map as read_perf_map)
    from .kallsyms import (KernelSymbols as KernelSymbols, read_kallsyms as read_kallsyms)
else:
    from .._lazy import lazy_dir, lazy_getattr
    _LAZY = {"Symbolizer": "stacks", "demangle": "stacks", "STACK_IP": "stacks",
             "STACK_VALID": "stacks", "make_stack_map": "stacks", "read_perf_map": "stacks",
             "KernelSymbols": "kallsyms", "read_kallsyms": "kallsyms"}
    __getattr__ = lazy_getattr(globals(), _LAZY)
    __dir__ = lazy_dir(globals(), _LAZY)

__all__ = ["Symbolizer", "demangle", "STACK_IP", "STACK_VALID", "make_stack_map", "read_perf_map",
           "KernelSymbols", "read_kallsyms"]
