"""The bpftrace language, compiled in pure Python.

Passes over one tree (:mod:`~pyebpf.lang.ast`): the lexer and parser build
it, the semantic pass types it, code generation turns each probe into eBPF
through the DSL, and the runtime loads, attaches and prints as bpftrace does.

The API (imported on first use, so ``import pyebpf.lang`` stays cheap):
:func:`compile` -> :class:`BtProgram`, whose ``start()`` gives a running
:class:`BtRun` (see :mod:`pyebpf.lang.api`).
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .api import BtProgram, compile
    from .runtime import BtEvent, BtRun

__all__ = ["compile", "BtProgram", "BtRun", "BtEvent"]

_LAZY = {"compile": "api", "BtProgram": "api", "BtRun": "runtime", "BtEvent": "runtime"}


def __getattr__(name: str) -> Any:
    """The API's names, imported when first used."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pyebpf.lang' has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
