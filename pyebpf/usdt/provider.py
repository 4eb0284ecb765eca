"""USDT probes from Python: a provider whose probes any USDT tracer can attach to.

::

    from pyebpf.usdt import Provider

    app = Provider("myapp")
    request = app.probe("request", int, "u32", str)    # arg0 s64, arg1 u32, arg2 char *
    app.load()                                         # or lazily, on the first fire
    ...
    if request.enabled:                                # a tracer is attached
        request.fire(42, 7, "GET /")
    print(app.path)         # point tracers here: bpftrace -e 'usdt:PATH:myapp:request {...}'
    app.close()

How it works
------------
:meth:`Provider.load` writes a tiny x86-64 ELF **shared object**, every
byte of it by pyebpf (no compiler, no libstapsdt):

* one stub function per probe, ``<provider>_<probe>``, in ``.text``: a
  ``nop`` (the probe location, where a tracer puts its uprobe) then ``ret``;
* one ``.note.stapsdt`` note per probe (provider, name, location, the
  ``.stapsdt.base`` address and the semaphore) whose argument specs follow
  the System V calling convention: ``8@%rdi -4@%esi 8@%rdx ...``, then
  ``8@8(%rsp)``, ``8@16(%rsp)`` ... for arguments 7 and up (the stub is
  called, so at its first instruction the return address is at ``(%rsp)``);
* one 2-byte semaphore per probe, ``<provider>_<probe>_semaphore``, in a
  file-backed writable section named ``.probes`` (as sys/sdt.h does: BCC,
  hence bpftrace 0.17, locates semaphores through that section, and the
  kernel's uprobe ``ref_ctr_offset`` needs them in a private writable
  *file* mapping, not in .bss);
* ``.dynsym``/``.dynstr``/``.hash``/``.dynamic`` so that the dynamic linker
  can load it and ``nm -D``/``readelf`` show it, and section headers so
  that note readers (pyebpf, BCC, readelf) find ``.note.stapsdt``.

The object is written into a **memfd** (``memfd_create``; nothing on disk,
nothing to clean up), then made read-only for good: mode ``0o555`` and the
seals ``F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL``, so no
process -- not even root, which mode bits do not stop, nor one that opens
``/proc/PID/fd/N`` read-write -- can change the probe stubs under the
running program (``write``, ``ftruncate`` and shared writable ``mmap`` fail
with EPERM).  It is then loaded with ``ctypes.CDLL("/proc/self/fd/N")``
(the dynamic linker maps it privately, which the seals allow).
Tracers address it as :attr:`Provider.path` = ``/proc/<pid>/fd/<N>``: the
kernel resolves that magic link to the memfd's inode, so uprobes (pyebpf,
bpftrace 0.17 ``usdt:/proc/PID/fd/N:myapp:request``) and ``pyebpf list
/proc/PID/fd/N`` work, from this process or any other (as root).  The path
is valid while the provider is loaded: ``path`` is None before, and a
:class:`~pyebpf.errors.StateError` after :meth:`Provider.close`.  ``Provider(name, directory="/tmp")``
writes a regular file there instead (removed by :meth:`close`) for tools
that need a path that exists for everyone; it is mode ``0o555`` (a regular
file cannot be sealed: its owner and root could still change it).

Firing: each :class:`ProviderProbe` caches its ctypes function with its
prototype, so ``probe.fire(...)`` is one ctypes call (plus one ``encode``
per ``str`` argument), after the arguments are checked against the declared
types -- the count, the type, and the range of each integer: a value its
type cannot hold is refused (:class:`~pyebpf.errors.UsdtError`), never
truncated, and a wrong type is an :class:`~pyebpf.errors.ArgumentTypeError`,
both naming the probe and the argument, before anything is loaded.  ``probe.enabled`` reads the semaphore: the kernel
keeps it non-zero while a tracer is attached with ``ref_ctr_offset``
(pyebpf always does; bpftrace does when its libbcc supports it).

Argument types: ``int`` (s64), ``"s64" "u64" "s32" "u32" "s16" "u16" "s8"
"u8"`` (also ``"int64"``, ``"uint32"``..., ctypes integer types), and
``str``/``bytes``/``"str"``/``"char*"`` (passed as a pointer to a
NUL-terminated string; read it with ``probe_read_user_str``, bpftrace's
``str(argN)``), ``"ptr"`` (an address).  Floating-point arguments are
refused: they travel in SSE registers, which uprobes cannot see.  At most
12 arguments (sys/sdt.h's limit).
"""
from __future__ import annotations

import ctypes
import fcntl
import os
import re
import struct
import tempfile
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ..codecs import INT_ALIASES, INT_TYPES
from ..errors import ArgumentTypeError, StateError, UsdtError, UsdtProbeLookupError
from ..kernel.lifetime import Owner, close_fd

if TYPE_CHECKING:
    from .attach import Usdt

__all__ = ["Provider", "ProviderProbe", "ArgType", "build_provider_elf", "MAX_ARGS"]

MAX_ARGS = 12
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

# registers of the System V x86-64 calling convention, by width
_ARG_REGS = {
    8: ("rdi", "rsi", "rdx", "rcx", "r8", "r9"),
    4: ("edi", "esi", "edx", "ecx", "r8d", "r9d"),
    2: ("di", "si", "dx", "cx", "r8w", "r9w"),
    1: ("dil", "sil", "dl", "cl", "r8b", "r9b"),
}


@dataclass(frozen=True)
class ArgType:
    """One probe argument's C type: size in bytes, signedness, ctypes type,
    and whether Python ``str``/``bytes`` are passed as a ``char *``."""

    name: str
    size: int
    signed: bool
    ctype: Any
    string: bool = False

    def spec(self, index: int) -> str:
        """The sys/sdt.h argument spec at a stub's first instruction."""
        sign = "-" if self.signed else ""
        if index < 6:
            return f"{sign}{self.size}@%{_ARG_REGS[self.size][index]}"
        return f"{sign}{self.size}@{8 * (index - 5)}(%rsp)"


#: C spellings of the integer types besides :data:`~pyebpf.codecs.INT_ALIASES`
#: (``int``: a Python int is 64 bits wide)
_ALIASES = {**INT_ALIASES, "int": "s64", "long": "s64", "char": "s8", "short": "s16",
            "bool": "u8", "size_t": "u64", "uintptr_t": "u64", "intptr_t": "s64"}
_STRING_NAMES = {"str", "string", "char*", "char *", "const char*", "const char *", "bytes"}


def _arg_type(t: Any) -> ArgType:
    """An :class:`ArgType` from ``int``, ``str``, ``bytes``, a type name or a ctypes type."""
    if isinstance(t, ArgType):
        return t
    if t is int:
        return ArgType("s64", 8, True, ctypes.c_int64)
    if t is str or t is bytes:
        return ArgType("str", 8, False, ctypes.c_char_p, string=True)
    if t is float:
        raise UsdtError("float arguments cannot be traced: they are passed in SSE registers, "
                        "which uprobes (struct pt_regs) do not hold; pass an int (e.g. the "
                        "value scaled, or its bits)")
    if isinstance(t, str):
        key = t.strip().lower()
        if key in _STRING_NAMES:
            return ArgType("str", 8, False, ctypes.c_char_p, string=True)
        if key in ("ptr", "pointer", "void*", "void *", "address"):
            return ArgType("ptr", 8, False, ctypes.c_uint64)
        key = _ALIASES.get(key, key)
        if key in INT_TYPES:
            size, signed, _ = INT_TYPES[key]
            ct = getattr(ctypes, f"c_{'' if signed else 'u'}int{8 * size}")
            return ArgType(key, size, signed, ct)
        if key in ("float", "double", "f32", "f64"):
            return _arg_type(float)
    if isinstance(t, type) and issubclass(t, ctypes._SimpleCData):
        if t is ctypes.c_char_p:
            return ArgType("str", 8, False, ctypes.c_char_p, string=True)
        if t in (ctypes.c_float, ctypes.c_double, ctypes.c_longdouble):
            return _arg_type(float)
        if t is ctypes.c_void_p:
            return ArgType("ptr", 8, False, ctypes.c_uint64)
        size = ctypes.sizeof(t)
        code = getattr(t, "_type_", "")
        if size in (1, 2, 4, 8) and isinstance(code, str) and code in "bBhHiIlLqQ?":
            signed = code in "bhilq"
            return ArgType(f"{'s' if signed else 'u'}{8 * size}", size, signed, t)
    raise UsdtError(f"unsupported probe argument type {t!r}: use int, str, bytes, a name "
                    f"({', '.join(sorted(INT_TYPES))}, 'str', 'ptr') or a ctypes integer type")


# ---------------------------------------------------------------------------
# the shared object (written with pyebpf.elf.writer)

_STUB_ALIGN = 16
_NOP, _RET, _INT3 = b"\x90", b"\xc3", b"\xcc"
#: where the semaphores may live: a file-backed section (sys/sdt.h's ``.probes``,
#: the default), or ``.bss`` (zero-filled memory right after ``.dynamic``, in
#: the page the file maps: the kernel's ref_ctr still reaches it)
SEMAPHORE_SECTIONS = (".probes", ".bss")


@dataclass(frozen=True)
class _Layout:
    """Where build_provider_elf put things (virtual addresses = file offsets)."""

    image: bytes
    stubs: dict[str, int]          # probe name -> stub (and probe location) address
    semaphores: dict[str, int]     # probe name -> semaphore address
    symbols: dict[str, tuple[str, str]]   # probe name -> (stub symbol, semaphore symbol)


def build_provider_elf(provider: str, probes: Sequence[tuple[str, Sequence[ArgType]]],
                       soname: str | None = None, *,
                       semaphore_section: str = ".probes") -> _Layout:
    """The bytes of a shared object holding one USDT probe per ``(name, arg
    types)`` of ``provider`` (see the module docs for the layout).

    ``semaphore_section`` is ``".probes"`` (file-backed, as sys/sdt.h does)
    or ``".bss"`` (no file bytes; for experiments with readers and tracers).
    """
    from ..elf import layouts as L
    from ..elf.writer import (ElfWriter, StringTable, pack_dynamic, pack_note, pack_symbols,
                              sysv_hash_size, sysv_hash_table)

    if not _NAME_RE.match(provider):
        raise UsdtError(f"provider name {provider!r} must be an identifier ([A-Za-z_][A-Za-z0-9_]*)")
    if semaphore_section not in SEMAPHORE_SECTIONS:
        raise UsdtError(f"semaphore_section must be one of {', '.join(SEMAPHORE_SECTIONS)}, "
                        f"not {semaphore_section!r}")
    names = [n for n, _ in probes]
    if len(set(names)) != len(names):
        raise UsdtError("probe names must be unique")
    for n, types in probes:
        if len(types) > MAX_ARGS:
            raise UsdtError(f"probe {n!r} has {len(types)} arguments; USDT allows {MAX_ARGS}")
    soname = soname or f"libpyebpf-usdt-{provider}.so"
    dynstr = StringTable()
    so_off = dynstr.add(soname)
    sym_names = {n: (f"{provider}_{n}", f"{provider}_{n}_semaphore") for n in names}
    str_offs = [(dynstr.add(fn), dynstr.add(sem)) for fn, sem in sym_names.values()]
    nsyms = 1 + 2 * len(names)
    nbucket = max(1, nsyms // 2 + 1)
    sym_size = L.layout("Sym").size
    dyn = [L.DT_HASH, L.DT_STRTAB, L.DT_SYMTAB, L.DT_STRSZ, L.DT_SYMENT, L.DT_SONAME, L.DT_NULL]
    dyn_size = L.layout("Dyn").size
    alloc, write = L.SHF_ALLOC, L.SHF_WRITE
    w = ElfWriter(type=L.ET_DYN, machine=L.EM_X86_64)
    w.add_section(".hash", L.SHT_HASH, alloc, size=sysv_hash_size(nsyms, nbucket), align=8,
                  link=".dynsym", entsize=4)
    w.add_section(".dynsym", L.SHT_DYNSYM, alloc, size=sym_size * nsyms, align=8,
                  link=".dynstr", info=1, entsize=sym_size)
    w.add_section(".dynstr", L.SHT_STRTAB, alloc, data=bytes(dynstr.data))
    w.add_section(".stapsdt.base", L.SHT_PROGBITS, alloc, data=b"\0")
    w.add_section(".text", L.SHT_PROGBITS, alloc | L.SHF_EXECINSTR,
                  data=(_NOP + _RET).ljust(_STUB_ALIGN, _INT3) * max(1, len(names)),
                  align=_STUB_ALIGN)
    w.add_section(".dynamic", L.SHT_DYNAMIC, alloc | write, size=dyn_size * len(dyn), align=8,
                  link=".dynstr", entsize=dyn_size)
    sema_type = L.SHT_PROGBITS if semaphore_section == ".probes" else L.SHT_NOBITS
    w.add_section(semaphore_section, sema_type, alloc | write, size=max(2, 2 * len(names)),
                  data=b"\0" * max(2, 2 * len(names)) if sema_type == L.SHT_PROGBITS else b"",
                  align=2)
    w.add_section(".note.stapsdt", L.SHT_NOTE, 0, align=4)
    w.layout()
    text, semas_at, base = w.address(".text"), w.address(semaphore_section), \
        w.address(".stapsdt.base")
    stubs = {n: text + i * _STUB_ALIGN for i, n in enumerate(names)}
    semas = {n: semas_at + 2 * i for i, n in enumerate(names)}
    syms = [(0, 0, 0, 0, 0, 0)]
    for (fn_off, sem_off), n in zip(str_offs, names):
        syms.append((fn_off, (L.STB_GLOBAL << 4) | L.STT_FUNC, 0, w.index(".text"), stubs[n], 2))
        syms.append((sem_off, (L.STB_GLOBAL << 4) | L.STT_OBJECT, 0, w.index(semaphore_section),
                     semas[n], 2))
    w.set_data(".dynsym", pack_symbols(syms))
    w.set_data(".hash", sysv_hash_table([dynstr.name_at(s[0]) for s in syms], nbucket))
    w.set_data(".dynamic", pack_dynamic(zip(dyn, [
        w.address(".hash"), w.address(".dynstr"), w.address(".dynsym"), len(dynstr.data),
        sym_size, so_off, 0])))
    notes = b""
    addrs = L.layout("Addr")
    for n, types in probes:
        args = " ".join(t.spec(i) for i, t in enumerate(types))
        desc = addrs.pack(stubs[n]) + addrs.pack(base) + addrs.pack(semas[n]) + \
            provider.encode() + b"\0" + n.encode() + b"\0" + args.encode() + b"\0"
        notes += pack_note(b"stapsdt\0", 3, desc)        # NT_STAPSDT
    w.set_data(".note.stapsdt", notes)
    return _Layout(w.build(), stubs, semas, sym_names)


# ---------------------------------------------------------------------------
# the Python side

_MFD_CLOEXEC, _MFD_ALLOW_SEALING = 1, 2
_F_ADD_SEALS = getattr(fcntl, "F_ADD_SEALS", 1033)
#: F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE: the image can
#: never change again, and no seal can be added or removed
SEALS = (getattr(fcntl, "F_SEAL_SEAL", 1) | getattr(fcntl, "F_SEAL_SHRINK", 2)
         | getattr(fcntl, "F_SEAL_GROW", 4) | getattr(fcntl, "F_SEAL_WRITE", 8))
#: the image's mode: readable and executable by whoever may reach it, writable by none
IMAGE_MODE = 0o555


def _memfd(name: str) -> int:
    """A close-on-exec memfd that can be sealed."""
    flags = _MFD_CLOEXEC | _MFD_ALLOW_SEALING
    fn = getattr(os, "memfd_create", None)
    if fn is not None:
        got: int = fn(name, flags)
        return got
    libc = ctypes.CDLL(None, use_errno=True)   # pragma: no cover - Python < 3.8
    fd: int = libc.memfd_create(name.encode(), flags)
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return fd


def _seal(fd: int) -> None:
    """Make the written image read-only for good (see the module docs).

    Called before anything maps the memfd: F_SEAL_WRITE is refused (EBUSY)
    while a shared writable mapping exists, and there is none (the image
    was written with write(2))."""
    try:
        os.fchmod(fd, IMAGE_MODE)
        fcntl.fcntl(fd, _F_ADD_SEALS, SEALS)
    except OSError as exc:
        raise UsdtError(f"cannot seal the provider's memfd: {exc.strerror} (sealing needs "
                        "Linux 3.17 or later)") from exc


def _dlclose(handle: int) -> None:
    try:
        import _ctypes
        _ctypes.dlclose(handle)
    except Exception:  # noqa: BLE001 - best effort
        pass


#: the names of the objects dlopen'ed here that are still loaded.  dlopen finds
#: a loaded object by its name first, and a provider collected unclosed leaves
#: its object loaded (see :meth:`_Loaded.release`): a later provider whose
#: memfd has the same number would be handed that old object.
_DL_NAMES: set[str] = set()


def _dl_name(path: str) -> str:
    """``path`` spelled so that no object still loaded was opened by that name
    (``/proc/self/fd/./N``, ``/proc/self/fd/././N``... name the same file)."""
    name = path
    while name in _DL_NAMES:
        head, _, tail = name.rpartition("/")
        name = f"{head}/./{tail}"
    _DL_NAMES.add(name)
    return name


class _Loaded:
    """What a loaded provider owns (released by its :class:`Provider`, an
    :class:`~pyebpf.kernel.lifetime.Owner`, or after it by the garbage collector)."""

    def __init__(self) -> None:
        self.fd: int | None = None
        self.file: str | None = None
        self.handle: int | None = None
        self.dl_name: str | None = None

    def release(self, unload: bool = False) -> None:
        """Close the memfd / remove the file; ``unload`` also dlcloses the
        object (only on an explicit close: a finalizer run by the garbage
        collector or at exit leaves the few mapped pages alone rather than
        risk unmapping code another thread may be running)."""
        if self.handle is not None and unload:
            _dlclose(self.handle)
            self.handle = None
        if self.handle is None and self.dl_name is not None:     # (not loaded any more)
            _DL_NAMES.discard(self.dl_name)
            self.dl_name = None
        if self.fd is not None:
            close_fd(self.fd)
            self.fd = None
        if self.file is not None:
            try:
                os.unlink(self.file)
            except OSError:
                pass
            self.file = None


def _bounds(t: ArgType) -> tuple[int, int]:
    """The smallest and largest integer an argument of type ``t`` holds."""
    bits = 8 * t.size
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if t.signed else (0, (1 << bits) - 1)


def _checked(probe: str, index: int, t: ArgType, v: Any) -> Any:
    """Argument ``index`` of ``probe``, ``v``, as its stub takes it (see
    :meth:`ProviderProbe.check`)."""
    where = f"probe {probe}: argument {index} ({t.name})"
    if t.string:
        if isinstance(v, str):
            try:
                return v.encode()
            except UnicodeEncodeError as exc:
                raise UsdtError(f"{where}: {v[:40]!r} cannot be encoded as UTF-8 "
                                f"({exc.reason})") from None
        if v is None or isinstance(v, bytes):
            return bytes(v) if v is not None else None
        raise ArgumentTypeError(f"{where} takes str or bytes (or None: a NULL pointer), not "
                                f"{type(v).__name__}")
    if not isinstance(v, int):
        import operator
        try:
            v = operator.index(v)         # (an int-like: numpy's, IntEnum...)
        except TypeError:
            raise ArgumentTypeError(f"{where} takes an int, not {type(v).__name__}") from None
    lo, hi = _bounds(t)
    if not lo <= v <= hi:
        raise UsdtError(f"{where}: {v} is out of range ({lo} to {hi})")
    return int(v)


def _fast_fire(fn: Any, types: Sequence[ArgType], check: Callable[[Sequence[Any]], list[Any]]
               ) -> Callable[..., None]:
    """``fire`` for the stub ``fn``: the common case -- the right count of
    ints in range and of ``str``/``bytes`` -- tested inline, in one function
    written for these types (as :mod:`dataclasses` writes ``__init__``: a
    loop over the arguments would double the cost of a fire); anything else
    goes through ``check``, which raises or converts (a bool, an IntEnum)."""
    names = [f"a{i}" for i in range(len(types))]
    tests, passed = [], []
    for a, t in zip(names, types):
        if t.string:
            tests.append(f"(type({a}) is str or type({a}) is bytes)")
            passed.append(f"{a}.encode() if type({a}) is str else {a}")
        else:
            lo, hi = _bounds(t)
            tests.append(f"type({a}) is int and {lo} <= {a} <= {hi}")
            passed.append(a)
    unpack = f"    {', '.join(names)}, = args\n" if names else ""
    src = (f"def fire(*args):\n"
           f"    if len(args) == {len(types)}:\n"
           f"    {unpack}"
           f"        if {' and '.join(tests) or 'True'}:\n"
           f"            fn({', '.join(passed)})\n"
           f"            return\n"
           f"    fn(*check(args))\n")
    scope: dict[str, Any] = {"fn": fn, "check": check}
    exec(src, scope)                  # noqa: S102 - text made here from ints and names only
    fire: Callable[..., None] = scope["fire"]
    return fire


def _not_loaded(*_args: Any) -> None:
    raise UsdtError("the provider is closed: its probes cannot fire any more")


class ProviderProbe:
    """One probe of a :class:`Provider`.

    ``fire(*args)`` checks the arguments (:meth:`check`) and calls the
    probe's stub (one ctypes call); ``enabled``
    reads its semaphore (True while a tracer is attached with ref_ctr).
    ``name``, ``types`` (:class:`ArgType` list), ``specs`` (the note's
    argument string), ``provider``, ``address`` (of the stub, once loaded).
    """

    def __init__(self, provider: "Provider", name: str, types: Sequence[ArgType]) -> None:
        self.provider = provider
        self.name = name
        self.types = tuple(types)
        self.specs = " ".join(t.spec(i) for i, t in enumerate(self.types))
        self._sema: Any = None
        #: the address of the probe's stub, its first instruction the probe
        #: location (None until loaded)
        self.address: int | None = None
        #: fire the probe (replaced by the ctypes call at load)
        self.fire: Callable[..., None] = self._fire_lazy

    def _fire_lazy(self, *args: Any) -> None:
        self.check(args)                 # (a bad fire loads nothing)
        self.provider.load()
        self.fire(*args)

    def check(self, args: Sequence[Any]) -> list[Any]:
        """``args`` as the stub takes them (``str`` encoded), checked against
        the declared types first: a wrong count or type is an
        :class:`~pyebpf.errors.ArgumentTypeError`, an integer its type
        cannot hold a :class:`~pyebpf.errors.UsdtError` (never truncated);
        both name the probe and the argument.  (``fire`` calls it.)"""
        if len(args) != len(self.types):
            raise ArgumentTypeError(f"probe {self.probe} takes {len(self.types)} argument(s) "
                                    f"({', '.join(t.name for t in self.types) or 'none'}), "
                                    f"{len(args)} given")
        out = list(args)
        for i, (v, t) in enumerate(zip(args, self.types)):
            out[i] = _checked(self.probe, i, t, v)
        return out

    def _bind(self, lib: Any, layout: _Layout, base: int) -> None:
        fn_name, _sem_name = layout.symbols[self.name]
        fn = getattr(lib, fn_name)
        fn.argtypes = [t.ctype for t in self.types]
        fn.restype = None
        self.fire = _fast_fire(fn, self.types, self.check)
        self.address = ctypes.cast(fn, ctypes.c_void_p).value
        self._sema = ctypes.c_uint16.from_address(base + layout.semaphores[self.name])

    def _unbind(self) -> None:
        self.fire = _not_loaded
        self._sema = None
        self.address = None

    @property
    def enabled(self) -> bool:
        """Whether a tracer holds this probe's semaphore (False before load)."""
        s = self._sema
        return bool(s is not None and s.value)

    @property
    def semaphore(self) -> int:
        """The semaphore's current value (0 before load)."""
        s = self._sema
        return s.value if s is not None else 0

    @property
    def probe(self) -> str:
        """``provider:name``."""
        return f"{self.provider.name}:{self.name}"

    def usdt(self) -> Usdt:
        """This probe as a :class:`~pyebpf.usdt.attach.Usdt` (loads the provider)."""
        from .attach import find_usdt
        return find_usdt(self.provider.load().path, self.provider.name, self.name)

    def __repr__(self) -> str:
        return f"<ProviderProbe {self.probe}({', '.join(t.name for t in self.types)})>"


class Provider(Owner):
    """A USDT provider defined from Python (see the module docs).

    Args:
        name: the provider name (an identifier).
        directory: write the shared object as a regular file in this
            directory (removed on close) instead of a memfd.
    """

    def __init__(self, name: str, *, directory: str | os.PathLike[str] | None = None) -> None:
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise UsdtError(f"provider name {name!r} must be an identifier "
                            "([A-Za-z_][A-Za-z0-9_]*)")
        self.name = name
        self.directory = os.fspath(directory) if directory is not None else None
        self._probes: dict[str, ProviderProbe] = {}
        self._lock = threading.Lock()
        self._res = _Loaded()
        self._own(self._res.release)      # (the garbage collector: unload=False)
        self._lib: Any = None
        self._layout: _Layout | None = None
        self._closed = False
        self._path: str | None = None
        #: the runtime address the object was loaded at
        self.base: int | None = None

    # -- definition
    def probe(self, name: str, *types: Any) -> ProviderProbe:
        """Define probe ``name`` with argument ``types`` (before :meth:`load`)."""
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise UsdtError(f"probe name {name!r} must be an identifier ([A-Za-z_][A-Za-z0-9_]*)")
        if self._layout is not None or self._closed:
            raise UsdtError(f"provider {self.name!r} is already loaded: define every probe "
                            "before load() or the first fire()")
        if name in self._probes:
            raise UsdtError(f"provider {self.name!r} already has a probe {name!r}")
        if len(types) > MAX_ARGS:
            raise UsdtError(f"probe {name!r} has {len(types)} arguments; USDT allows {MAX_ARGS}")
        p = ProviderProbe(self, name, [_arg_type(t) for t in types])
        self._probes[name] = p
        return p

    @property
    def probes(self) -> dict[str, ProviderProbe]:
        """The probes defined so far, by name (a copy)."""
        return dict(self._probes)

    def __getitem__(self, name: str) -> ProviderProbe:
        """The probe called ``name``; an unknown name is a
        :class:`~pyebpf.errors.UsdtProbeLookupError` listing the defined ones."""
        try:
            return self._probes[name]
        except (KeyError, TypeError):
            known = ", ".join(self._probes) or "none yet"
            raise UsdtProbeLookupError(f"provider {self.name!r} has no probe {name!r} "
                                       f"(defined: {known})", probe=str(name), target=self.name,
                                       candidates=[f"{self.name}:{n}" for n in self._probes]
                                       ) from None

    @property
    def path(self) -> str | None:
        """Where tracers find the probes: ``/proc/<pid>/fd/<N>`` (a memfd), or
        the file in :attr:`directory`.  None before :meth:`load` (or the
        first fire); after :meth:`close` the file is gone, and asking raises
        :class:`~pyebpf.errors.StateError`."""
        if self._closed:
            raise StateError(f"provider {self.name!r} is closed: its shared object (which was "
                             f"at {self._path or 'no path: it was never loaded'}) is gone")
        return self._path

    # -- lifetime
    @property
    def loaded(self) -> bool:
        """The shared object is loaded (and not closed): the probes fire."""
        return self._layout is not None and not self._closed

    def load(self) -> "Provider":
        """Write the shared object and load it (idempotent); returns self."""
        if self._layout is not None and not self._closed:
            return self
        with self._lock:
            if self._closed:
                raise UsdtError(f"provider {self.name!r} is closed")
            if self._layout is not None:
                return self
            if not self._probes:
                raise UsdtError(f"provider {self.name!r} has no probes: define them with "
                                ".probe(name, *types) first")
            layout = build_provider_elf(self.name, [(n, p.types) for n, p in
                                                    self._probes.items()])
            res = self._res
            try:
                if self.directory is None:
                    res.fd = _memfd(f"pyebpf-usdt-{self.name}")
                    _write_all(res.fd, layout.image)
                    _seal(res.fd)
                    path = f"/proc/{os.getpid()}/fd/{res.fd}"
                    dl_path = f"/proc/self/fd/{res.fd}"
                else:
                    fd, path = tempfile.mkstemp(prefix=f"pyebpf-usdt-{self.name}-",
                                                suffix=".so", dir=self.directory)
                    res.file = path
                    try:
                        _write_all(fd, layout.image)
                        os.fchmod(fd, IMAGE_MODE)
                    finally:
                        os.close(fd)
                    dl_path = path
                res.dl_name = _dl_name(dl_path)
                lib = ctypes.CDLL(res.dl_name, mode=ctypes.RTLD_LOCAL)
                res.handle = lib._handle
                base = _load_base(lib, layout)
                for p in self._probes.values():
                    p._bind(lib, layout, base)
            except BaseException:
                res.release(unload=True)
                raise
            self._lib = lib
            self.base = base
            self._path = path
            self._layout = layout
        return self

    def close(self) -> None:
        """Unload the object and release its memfd/file (idempotent).  The
        probes then refuse to fire.  Detach tracers first: a uprobe on a
        file nobody maps simply never fires."""
        super().close()

    def _close_resources(self) -> None:
        with self._lock:
            self._closed = True
            for p in self._probes.values():
                p._unbind()
            self._lib = None
            self._res.release(unload=True)

    def __enter__(self) -> "Provider":
        """Load if probes are defined already; else define them in the block
        (the provider then loads on :meth:`load`, the first fire, or
        :meth:`usdt`).  Closes at the end of the block."""
        return self.load() if self._probes else self

    @property
    def image(self) -> bytes:
        """The shared object's bytes (builds them if needed; does not load)."""
        if self._layout is not None:
            return self._layout.image
        return build_provider_elf(self.name, [(n, p.types) for n, p in
                                              self._probes.items()]).image

    def usdt(self, probe: str) -> Usdt:
        """Probe ``probe`` of this provider as a :class:`~pyebpf.usdt.attach.Usdt`
        (for pyebpf programs: ``.count()``, ``.trace()``, ``.read_arg()``)."""
        return self[probe].usdt()

    def __repr__(self) -> str:
        state = f"loaded at {self._path}" if self.loaded else \
            ("closed" if self._closed else "not loaded")
        return f"<Provider {self.name!r}: {len(self._probes)} probe(s), {state}>"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _load_base(lib: Any, layout: _Layout) -> int:
    """The runtime address the object's vaddr 0 is mapped at."""
    name, probe_fn = next(iter(layout.symbols.items()))
    fn = ctypes.cast(getattr(lib, probe_fn[0]), ctypes.c_void_p).value
    if fn is None:
        raise UsdtError(f"the loaded provider has no address for {probe_fn[0]}")
    return fn - layout.stubs[name]
