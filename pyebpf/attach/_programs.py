"""The program an ``attach_*`` call attaches: its fd, its type, loading it when given a source.

Every ``attach_*`` function takes either a loaded program (a ``LoadedProgram``,
an ``Fd``, an fd number) or something :func:`pyebpf.loader.load` loads (a DSL
``Program``, assembly text, instruction bytes); in that case the link owns the
program it loaded.
"""
from __future__ import annotations

import errno as E

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterable

    from typing_extensions import TypeIs

    from ..isa import Insn
    from ..loader import LoadedProgram
    from ..program import Program

    #: a source :func:`pyebpf.loader.load` loads (a DSL program, assembly text,
    #: instruction bytes or instructions)
    ProgramSource = Program | str | bytes | Iterable[Insn]
    #: what an ``attach_*`` call takes: a loaded program (a ``LoadedProgram``, an
    #: ``Fd``, an fd number), attached as it is, or a source it loads (the link
    #: then owns the program)
    AttachableProgram = LoadedProgram | Fd | int | ProgramSource

from ..errors import AttachError
from ..kernel.constants import ProgType
from ..kernel.syscall import Fd


def prog_fd(prog: LoadedProgram | Fd | int) -> int:
    """The fd number of a loaded program (a ``LoadedProgram``, an ``Fd`` or an int)."""
    if isinstance(prog, int):
        return prog
    return prog.fileno()


def is_loaded(prog: object) -> TypeIs[LoadedProgram | Fd | int]:
    """True for a loaded program (an fd), False for a source to load."""
    return isinstance(prog, (int, Fd)) or (hasattr(prog, "fileno") and hasattr(prog, "fd"))


def check_type(prog: object, want: int, what: str) -> None:
    """Refuse a loaded program whose known type is not ``want`` (an AttachError
    saying how to load it)."""
    ptype = getattr(prog, "prog_type", None)
    if ptype is not None and int(ptype) != int(want):
        raise AttachError(E.EINVAL, what, f"the program is of type {ProgType(ptype).name}",
                          f"{what} needs a program loaded as {ProgType(want).name} "
                          f"(load(p, {ProgType(want).name.lower()!r}))")


def load(source: ProgramSource, prog_type: int, expected_attach_type: int = 0
         ) -> LoadedProgram:
    """Load ``source`` as a program of ``prog_type`` (:func:`pyebpf.loader.load`, imported here)."""
    from ..loader import load as _load
    return _load(source, prog_type, expected_attach_type=expected_attach_type)


def prepare(prog: AttachableProgram, prog_type: int, what: str, eat: int = 0
            ) -> tuple[LoadedProgram | Fd | int, LoadedProgram | None]:
    """(loaded program, the same if loaded here else None) from a loaded
    program or a source to load."""
    if is_loaded(prog):
        check_type(prog, prog_type, what)
        return prog, None
    loaded = load(prog, prog_type, eat)
    return loaded, loaded
