"""Names a module lends from its submodules, imported on first use (PEP 562).

A package facade (``pyebpf.kernel``, ``pyebpf.elf``...) keeps ``import``
cheap by importing each submodule only when one of its names is first read::

    _LAZY = {"Btf": "reader", "BtfError": "errors"}    # name -> submodule
    __getattr__ = lazy_getattr(globals(), _LAZY)
    __dir__ = lazy_dir(globals(), _LAZY)

The submodule is relative to the module's package (a sibling for a plain
module such as ``pyebpf.kernel.syscall``), and the name is stored in the
module's globals, so the next read is an ordinary attribute lookup.
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping


def lazy_getattr(namespace: dict[str, Any], homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for the module whose globals are ``namespace``:
    each name of ``homes`` is imported from the submodule it maps to."""
    module = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        """Import the submodule that defines ``name`` and keep the name here."""
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        # (__import__, not importlib: importing importlib costs more than the submodule)
        value = getattr(__import__(home, namespace, None, (name,), 1), name)
        namespace[name] = value
        return value

    return __getattr__


def lazy_dir(namespace: dict[str, Any], homes: Mapping[str, str]) -> Callable[[], list[str]]:
    """A module ``__dir__``: the module's names, the ones loaded on first use included."""
    def __dir__() -> list[str]:
        """The module's names, the ones loaded on first use included."""
        return sorted({*namespace, *homes})

    return __dir__


__all__ = ["lazy_getattr", "lazy_dir"]
