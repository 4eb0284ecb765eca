"""The bpftrace language, compiled in pure Python.

Passes over one tree (:mod:`~pyebpf.lang.ast`): the lexer and parser build
it, the semantic pass types it, code generation turns each probe into eBPF
through the DSL, and the runtime loads, attaches and prints as bpftrace does.

The API (imported on first use, so ``import pyebpf.lang`` stays cheap):
:func:`compile` -> :class:`BtProgram`, whose ``start()`` gives a running
:class:`BtRun` (see :mod:`pyebpf.lang.api`).
"""
from __future__ import annotations

from .._lazy import lazy_getattr

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .api import BtProgram, compile
    from .runtime import BtEvent, BtRun

__all__ = ["compile", "BtProgram", "BtRun", "BtEvent"]

_LAZY = {"compile": "api", "BtProgram": "api", "BtRun": "runtime", "BtEvent": "runtime"}


__getattr__ = lazy_getattr(globals(), _LAZY)
