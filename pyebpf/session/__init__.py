"""Running programs: a :class:`Session` holds loaded programs, their links
and the event reader (:mod:`.base`); :mod:`.live` is the loop the command
line runs (a child command started stopped, the interval printing, stop
signals); :mod:`.asmfile` runs the ``asm/`` files (assembly with a header of
maps, probes and outputs) as an :class:`AsmSession`.  Names are imported on
first use.
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:       # (what __getattr__ imports on first use, as type checkers see it)
    from .base import (Session as Session, Event as Event, FieldValue as FieldValue)
    from .live import (Child as Child, RunResult as RunResult, run_loop as run_loop,
                       print_final as print_final, sigterm_as_interrupt as sigterm_as_interrupt)
    from .asmfile import (AsmFileError as AsmFileError, AsmFile as AsmFile, MapDecl as MapDecl,
                          OutputDecl as OutputDecl, ProgramDecl as ProgramDecl, Param as Param,
                          parse_asm_file as parse_asm_file, read_asm_file as read_asm_file,
                          AsmSession as AsmSession, AsmEvent as AsmEvent)
else:
    from .._lazy import lazy_dir, lazy_getattr
    _LAZY = {"Session": "base", "Event": "base", "FieldValue": "base", "Child": "live",
             "RunResult": "live", "run_loop": "live", "print_final": "live",
             "sigterm_as_interrupt": "live", "AsmFileError": "asmfile", "AsmFile": "asmfile",
             "MapDecl": "asmfile", "OutputDecl": "asmfile", "ProgramDecl": "asmfile",
             "Param": "asmfile", "parse_asm_file": "asmfile", "read_asm_file": "asmfile",
             "AsmSession": "asmfile", "AsmEvent": "asmfile"}
    __getattr__ = lazy_getattr(globals(), _LAZY)
    __dir__ = lazy_dir(globals(), _LAZY)

__all__ = ["Session", "Event", "FieldValue", "Child", "RunResult", "run_loop", "print_final",
           "sigterm_as_interrupt", "AsmFileError", "AsmFile", "MapDecl", "OutputDecl",
           "ProgramDecl", "Param", "parse_asm_file", "read_asm_file", "AsmSession", "AsmEvent"]
