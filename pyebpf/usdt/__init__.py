"""USDT (sys/sdt.h) probes: find them in ELF files and decode their arguments.

Pure Python, no kernel: this package reads ``.note.stapsdt`` notes and the
argument specs compilers write in them.  Attaching lives elsewhere.

Quick tour::

    from pyebpf.usdt import UsdtFile, parse_arg

    f = UsdtFile("/usr/bin/python3.11")
    for probe in f.probes():                      # UsdtProbe: all sites of provider:name
        for site in probe.locations:              # UsdtNote: one site
            site.offset, site.semaphore_offset    # uprobe offset, ref_ctr_offset
            for a in site.arguments:              # ArgSpec or UndecodableArg
                print(a.describe() if a.decodable else a.error)

    parse_arg("-8@80(%rsp,%rax,8)")               # ArgSpec(kind=SIB, size=8, signed=True, ...)
    parse_arg("8@[x0, 16]", "aarch64")

Modules: :mod:`~pyebpf.usdt.notes` (notes, offsets, probes),
:mod:`~pyebpf.usdt.spec` (argument specs), :mod:`~pyebpf.usdt.targets`
(library names, process modules).  Errors: :class:`~pyebpf.errors.UsdtNoteError`,
:class:`~pyebpf.errors.UsdtSpecError`, :class:`~pyebpf.errors.UsdtTargetError`
(all :class:`~pyebpf.errors.UsdtError`, a ``ValueError``).
"""
from __future__ import annotations

from .._lazy import lazy_dir, lazy_getattr
from ..errors import UsdtError, UsdtNoteError, UsdtSpecError, UsdtTargetError
from .notes import (NT_STAPSDT, ElfInfo, LoadSegment, UsdtFile, UsdtNote, UsdtProbe,
                    group_probes, host_arch, iter_notes, read_notes, read_probes)
from .spec import (SUPPORTED_ARCHES, ArgKind, ArgSpec, UndecodableArg, canonical_arch,
                   expected_forms, parse_arg, parse_args, split_args)
from .targets import ProcessModule, library_dirs, process_modules, resolve_target

__all__ = [
    "UsdtError", "UsdtNoteError", "UsdtSpecError", "UsdtTargetError",
    "NT_STAPSDT", "ElfInfo", "LoadSegment", "UsdtFile", "UsdtNote", "UsdtProbe",
    "group_probes", "host_arch", "iter_notes", "read_notes", "read_probes",
    "SUPPORTED_ARCHES", "ArgKind", "ArgSpec", "UndecodableArg", "canonical_arch",
    "expected_forms", "parse_arg", "parse_args", "split_args",
    "ProcessModule", "library_dirs", "process_modules", "resolve_target",
]

# -- tracing: argument reads in BPF programs, attaching, Python-defined probes.
# Imported lazily (PEP 562), so that ``import pyebpf.usdt`` stays pure and
# fast for the parser and ``pyebpf list``:
#   ArgReader (pyebpf.usdt.args), usdt / find_usdt / attach_usdt / Usdt /
#   UsdtCounter / UsdtTrace / usdt_files (pyebpf.usdt.attach), Provider /
#   ProviderProbe (pyebpf.usdt.provider).  The probe sources' USDT probe
#   source lives there (pyebpf.probes.usdt_source, which imports this package,
#   never the reverse).
from ..errors import UsdtProbeLookupError

TYPE_CHECKING = False
if TYPE_CHECKING:       # what __getattr__ imports on first use, as type checkers see it
    # ("X as X": an explicit re-export, as mypy --strict wants it)
    from .args import ArgReader as ArgReader
    from .attach import (Usdt as Usdt, UsdtCounter as UsdtCounter, UsdtTrace as UsdtTrace,
                         attach_usdt as attach_usdt, find_usdt as find_usdt, usdt as usdt,
                         usdt_files as usdt_files)
    from .provider import Provider as Provider, ProviderProbe as ProviderProbe

_LAZY = {
    "ArgReader": "args",
    "Usdt": "attach", "UsdtCounter": "attach", "UsdtTrace": "attach", "attach_usdt": "attach",
    "find_usdt": "attach", "usdt": "attach", "usdt_files": "attach",
    "Provider": "provider", "ProviderProbe": "provider",
}

__all__ += ["UsdtProbeLookupError", *_LAZY]


__getattr__ = lazy_getattr(globals(), _LAZY)
__dir__ = lazy_dir(globals(), _LAZY)
