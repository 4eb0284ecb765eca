"""ELF symbols and addresses for probes and stack symbolization (pure: no kernel).

What it answers
---------------
* **name → file offset**, which is what the kernel's uprobes want::

      elf = open_elf("/lib/x86_64-linux-gnu/libc.so.6")
      loc = elf.resolve("malloc")              # or "malloc@@GLIBC_2.2.5", "malloc+4", "0x9a0c0"
      loc.file_offset, loc.address, loc.symbol

  Names are looked up in ``.dynsym`` and ``.symtab``.  Versioned names work
  like the dynamic linker's: ``name@@VER`` is the default version,
  ``name@VER`` any version called VER, and a plain ``name`` matches an
  unversioned or default-versioned symbol.  ``symbol+offset`` must land on an
  instruction boundary of that function (checked by disassembling it from its
  start with capstone, x86-64/i386; fixed-width ISAs are checked by
  alignment).  A string holding only a number (``"0x401136"``) is an ELF
  virtual address, as ``nm``/``objdump`` print it.
* **instruction starts without symbols**: an address or file offset that no
  function symbol covers (a stripped binary, the PLT, code between symbols)
  is checked by disassembling from the nearest instruction start known
  without symbols -- a function start in ``.eh_frame`` (which ``strip``
  keeps; :func:`parse_eh_frame`), the entry point, an executable section's
  start -- and refused with :class:`InstructionBoundaryError` unless it
  starts one of the instructions decoded (see
  :meth:`ElfFile.check_instruction_address`).  ``check_boundary=False``
  (``unsafe=True`` in :mod:`pyebpf.attach`) skips every such check.
* **virtual address ↔ file offset** through the PT_LOAD segment that holds the
  address (correct for PIE and non-PIE files and for layouts where a
  segment's ``p_vaddr`` differs from its ``p_offset``).
* **address → symbol** (``elf.symbolize(vaddr)``): a sorted table and bisect.
* **library names like bpftrace**: :func:`resolve_library` turns ``"libc"``,
  ``"libc.so.6"`` or ``"c"`` into the path the dynamic linker would load
  (``/etc/ld.so.cache``, else a scan of the standard directories); names of
  programs are looked up on ``$PATH``; a path with a ``/`` is used as is.
* **a process's modules** (:func:`process_modules`) from ``/proc/PID/maps``,
  with paths reachable from here (``/proc/PID/root/...`` when the process
  lives in another mount namespace, i.e. a container).

* **relocations** (:func:`relocations`): the SHT_RELA/SHT_REL entries with
  their symbol names, e.g. to find a symbol's GOT slot.

* **an ELF writer** (:class:`ElfWriter`): sections, segments, symbols,
  dynamic entries and notes, laid out and packed from the same structure
  declarations the readers use; :class:`pyebpf.usdt.Provider` builds its
  shared object with it.

Files are parsed once and cached per path, inode, size and mtime
(:func:`open_elf`); nothing keeps a file descriptor open between calls.
Headers of well-formed files of the common machines (32/64-bit, either byte
order) are read with :mod:`struct`, so the common path never imports
pyelftools (~30 ms); unusual layouts go through pyelftools, imported only
then.  The symbol tables themselves are always unpacked with :mod:`struct`
(about 100x faster than per-symbol pyelftools objects, which matters for
binaries with 100k symbols).

Modules, one concern each (lower ones never import higher ones):

=====================  ========================================================
:mod:`.layouts`        the ELF structures (fields and types) and numbers, once
:mod:`.errors`         :class:`ElfError` and its subclasses
:mod:`.headers`        sections, segments, notes; **the** vaddr <-> offset rule
                       (which of ``p_filesz``/``p_memsz`` for what: read there)
:mod:`.symbols`        symbol tables, versions, address -> symbol
:mod:`.boundaries`     instruction-start checks for uprobes
:mod:`.ehframe`        the ``.eh_frame`` parser (function starts without symbols)
:mod:`.file`           :class:`ElfFile` (the layers above) and :func:`open_elf`
:mod:`.libs`           library and program names, ``/etc/ld.so.cache``
:mod:`.procmaps`       ``/proc/PID/maps`` and the files a process maps
:mod:`.relocs`         relocation tables (SHT_RELA/SHT_REL), as ``readelf -r``
:mod:`.writer`         :class:`ElfWriter`
=====================  ========================================================

The first seven load with ``import pyebpf.elf``; the names of the last four
(and :func:`parse_eh_frame`) are imported on first use.
"""
from __future__ import annotations

from .._lazy import lazy_dir, lazy_getattr
from .errors import (AmbiguousSymbolError, ElfError, InstructionBoundaryError,
                     LibraryNotFoundError, NoteError, SymbolNotFoundError)
from .file import ElfFile, open_elf
from .headers import Section, Segment
from .layouts import (STB_GLOBAL, STB_LOCAL, STB_WEAK, STT_FUNC, STT_GNU_IFUNC, STT_NOTYPE,
                      STT_OBJECT)
from .symbols import Location, Symbol, parse_location

TYPE_CHECKING = False
if TYPE_CHECKING:       # what __getattr__ imports on first use, as type checkers see it
    # ("X as X": an explicit re-export, as mypy --strict wants it)
    from .ehframe import parse_eh_frame as parse_eh_frame
    from .libs import (ld_so_cache as ld_so_cache, library_search_dirs as library_search_dirs,
                       resolve_library as resolve_library, expand_path as expand_path,
                       path_for_pid as path_for_pid)
    from .procmaps import (MapEntry as MapEntry, Module as Module, process_maps as process_maps,
                           process_modules as process_modules)
    from .relocs import Relocation as Relocation, relocations as relocations
    from .writer import ElfWriter as ElfWriter

_LAZY = {
    "parse_eh_frame": "ehframe",
    "resolve_library": "libs", "ld_so_cache": "libs", "library_search_dirs": "libs",
    "expand_path": "libs", "path_for_pid": "libs",
    "MapEntry": "procmaps", "Module": "procmaps", "process_maps": "procmaps",
    "process_modules": "procmaps",
    "Relocation": "relocs", "relocations": "relocs",
    "ElfWriter": "writer",
}

__all__ = [
    "ElfError", "SymbolNotFoundError", "AmbiguousSymbolError", "InstructionBoundaryError",
    "LibraryNotFoundError", "NoteError", "Symbol", "Segment", "Section", "Location", "ElfFile",
    "open_elf", "parse_location",
    "STT_NOTYPE", "STT_OBJECT", "STT_FUNC", "STT_GNU_IFUNC",
    "STB_LOCAL", "STB_GLOBAL", "STB_WEAK", *_LAZY,
]


__getattr__ = lazy_getattr(globals(), _LAZY)
__dir__ = lazy_dir(globals(), _LAZY)
