"""The VM's one error: a run stopped at an instruction."""
from __future__ import annotations

from ..errors import PyebpfError


class VmError(PyebpfError, RuntimeError):
    """The VM stopped a program: an out-of-bounds, misaligned or null memory
    access, an invalid instruction, a jump out of the program, a helper it does
    not emulate, too many instructions...

    ``index`` is the instruction's slot (as the kernel's verifier counts),
    ``text`` the instruction as assembly and ``origin`` the Python or ``.s``
    line that wrote it, when known; ``reason`` is the message alone.
    """

    def __init__(self, message: str, index: int | None = None, text: str | None = None,
                 origin: str | None = None) -> None:
        self.reason = message
        self.index = index
        self.text = text
        self.origin = origin
        where = ""
        if index is not None:
            where = f"insn {index}" + (f" ({text})" if text else "")
        if origin:
            where = f"{origin}: {where}" if where else origin
        super().__init__(f"{where}: {message}" if where else message)
