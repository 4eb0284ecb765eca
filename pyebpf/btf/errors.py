"""The error of :mod:`pyebpf.btf`."""
from __future__ import annotations

from ..errors import PyebpfError

__all__ = ["BtfError"]


class BtfError(PyebpfError, ValueError):
    """BTF data is damaged or a type query cannot be answered.

    ``offset`` is the byte offset in the blob (from its header's start) where
    the damage was found, when the error is about the data; ``type_id`` the
    type being read or asked about, when known.
    """

    def __init__(self, message: str, offset: int | None = None,
                 type_id: int | None = None) -> None:
        self.reason = message
        self.offset = offset
        self.type_id = type_id
        where = []
        if type_id is not None:
            where.append(f"type [{type_id}]")
        if offset is not None:
            where.append(f"offset {offset:#x}")
        super().__init__(f"BTF {', '.join(where)}: {message}" if where else f"BTF: {message}")
