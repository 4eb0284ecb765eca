"""Errors of the object loader (all :class:`~pyebpf.errors.PyebpfError`)."""
from __future__ import annotations

from ..errors import PyebpfError

__all__ = ["ObjectError", "ObjectFileError"]


class ObjectError(PyebpfError, ValueError):
    """An object cannot be loaded as asked: an unknown program or global, a
    value that does not fit a global, a map definition pyebpf cannot create,
    an extern nothing defines."""


class ObjectFileError(ObjectError):
    """The file is not a BPF ELF object, or is damaged."""
