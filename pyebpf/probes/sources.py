"""Probe specs (``uprobe:PATH:sym`` ...) and the *probe sources* behind them.

A probe spec is written as bpftrace writes it:

==========================================  =====================================
``uprobe:PATH:SYMBOL`` (``u:``)              function entry; ``SYMBOL`` may be
                                             ``sym+off``, ``0xADDR`` or a glob
                                             (``work*``: every matching function)
``uretprobe:PATH:SYMBOL`` (``ur:``)          function return (``retval``)
``usdt:PATH:[PROVIDER:]NAME`` (``U:``)       a USDT (sys/sdt.h) probe
``tracepoint:CATEGORY:NAME`` (``t:``)        a kernel tracepoint
==========================================  =====================================

``PATH`` is a path or a name like ``libc`` or ``python3`` (resolved like
bpftrace, see :func:`pyebpf.elf.resolve_library`).

A *probe source* is what a probe spec becomes once resolved: an object that
knows which program type to load (``prog_type``, ``load_options``), how to
read argument *n* in the program (``emit_arg(p, dst, n, ctx)``), and how to
attach a loaded program (``attach(loaded, pid=None) -> Link``).  Every kind
has that same shape -- the USDT one is in :mod:`pyebpf.probes.usdt_source` --
so the tracing layer treats all kinds alike.  Sources of this module add a
few optional capabilities, checked with ``hasattr``: ``emit_retval``
(uretprobes), ``emit_field``/``emit_field_string`` (tracepoint fields by
name), ``functions`` and ``entry``/``ret`` (uprobes).

Everything here except ``attach`` is pure: resolving a source reads ELF files
and tracefs but makes no bpf() call, so a bad probe fails before anything is
loaded.
"""
from __future__ import annotations

from .._record import dataclass
from ..codecs import INT_TYPES
from ..errors import PyebpfError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Protocol, runtime_checkable

    from ..attach import Link, TracepointField, TracepointFormat
    from ..elf import Location
    from ..elf.dwarf import CParam
    from ..loader import LoadedProgram
    from ..program import Program, Reg
    from .usdt_source import UsdtProbeSource
else:   # (typing costs a start ~7 ms; nothing asks isinstance(x, ProbeSource))
    Protocol = object

    def runtime_checkable(cls: type) -> type:
        """(At run time, without typing) the class unchanged."""
        return cls

__all__ = ["ProbeSpec", "ProbeSpecError", "ProbeSource", "parse_probe", "probe_source",
           "UprobeSource", "TracepointSource", "FixedTypeSource", "KINDS"]

#: accepted kind names -> canonical kind
KINDS = {"uprobe": "uprobe", "u": "uprobe", "uretprobe": "uretprobe", "ur": "uretprobe",
         "usdt": "usdt", "U": "usdt", "tracepoint": "tracepoint", "t": "tracepoint"}

_EXAMPLES = ("uprobe:/bin/bash:readline, uretprobe:libc:malloc, "
             "usdt:/usr/bin/python3:python:function__entry, "
             "tracepoint:syscalls:sys_enter_openat")


class ProbeSpecError(PyebpfError, ValueError):
    """A probe spec cannot be parsed, or names nothing (no such function,
    tracepoint or field)."""


@dataclass(frozen=True)
class ProbeSpec:
    """A parsed probe spec.

    ``kind`` is ``uprobe``, ``uretprobe``, ``usdt`` or ``tracepoint``;
    ``target`` the binary (uprobes, USDT) or the tracepoint category;
    ``provider`` the USDT provider (or None); ``name`` the symbol, USDT probe
    name or tracepoint event.
    """

    kind: str
    target: str
    name: str
    provider: str | None = None

    def __str__(self) -> str:
        if self.kind == "usdt" and self.provider:
            return f"usdt:{self.target}:{self.provider}:{self.name}"
        return f"{self.kind}:{self.target}:{self.name}"

    def with_kind(self, kind: str) -> "ProbeSpec":
        """The same spec with another ``kind`` (the entry/return twin of a uprobe)."""
        return ProbeSpec(kind, self.target, self.name, self.provider)


def parse_probe(text: str) -> ProbeSpec:
    """Parse a bpftrace-style probe spec (see the module docs).

    Raises :class:`ProbeSpecError` naming the accepted forms.
    """
    s = text.strip()
    kind_text, sep, rest = s.partition(":")
    kind = KINDS.get(kind_text)
    if not sep or kind is None:
        raise ProbeSpecError(f"{text!r} is not a probe spec: it starts with a probe kind, one "
                             f"of uprobe: uretprobe: usdt: tracepoint: (or u: ur: U: t:); "
                             f"e.g. {_EXAMPLES}")
    parts = rest.split(":")
    if kind == "tracepoint":
        if len(parts) != 2 or not all(parts):
            raise ProbeSpecError(f"{text!r}: a tracepoint is tracepoint:CATEGORY:NAME, e.g. "
                                 "tracepoint:syscalls:sys_enter_openat")
        return ProbeSpec(kind, parts[0], parts[1])
    if kind == "usdt":
        if len(parts) == 2 and all(parts):
            return ProbeSpec(kind, parts[0], parts[1], None)
        if len(parts) == 3 and parts[0] and parts[2]:
            return ProbeSpec(kind, parts[0], parts[2], parts[1] or None)
        raise ProbeSpecError(f"{text!r}: a USDT probe is usdt:PATH:[PROVIDER:]NAME, e.g. "
                             "usdt:/usr/bin/python3:python:function__entry")
    if len(parts) != 2 or not all(parts):
        raise ProbeSpecError(f"{text!r}: a {kind} is {kind}:PATH:SYMBOL (PATH a file or a "
                             f"library name such as libc), e.g. {kind}:/bin/bash:readline")
    return ProbeSpec(kind, parts[0], parts[1])


@runtime_checkable
class ProbeSource(Protocol):
    """What the tracing layer needs from a probe of any kind (see the module
    docs): :class:`UprobeSource`, :class:`TracepointSource` and
    :class:`pyebpf.probes.usdt_source.UsdtProbeSource` all have this shape."""

    @property
    def prog_type(self) -> int:
        """The program type to load (a ``BPF_PROG_TYPE_*`` number)."""
        ...

    @property
    def load_options(self) -> dict[str, int]:
        """Extra keyword arguments for :func:`pyebpf.loader.load`
        (``expected_attach_type``; ``prog_type`` overrides :attr:`prog_type`)."""
        ...

    @property
    def arg_count(self) -> int:
        """How many arguments ``argN`` can read."""
        ...

    def emit_arg(self, p: Program, dst: Reg, n: int, ctx: Reg) -> None:
        """Emit into ``p`` the instructions of ``dst = argument n``; ``ctx``
        holds the program's context.  Clobbers r0-r5."""
        ...

    def attach(self, loaded_program: LoadedProgram, pid: int | None = None) -> Link:
        """Attach a program loaded with :attr:`prog_type` and
        :attr:`load_options` (only for process ``pid`` when given); detach
        with the returned link."""
        ...

    def describe(self) -> str:
        """A one-line description: the kind, the resolved file and what is probed."""
        ...


# ====================================================================== uprobes
class UprobeSource:
    """A uprobe or uretprobe on one or more functions of one binary.

    ``symbol`` is anything :meth:`pyebpf.elf.ElfFile.resolve` takes, or a
    glob (``*``, ``?``, ``[``) matched against the binary's function names;
    with several functions, ``bpf_get_attach_cookie()`` is the index of the
    function in :attr:`functions` (the ``func`` expression reads it).
    ``unsafe=True`` accepts an address not proven to start an instruction
    (see :func:`pyebpf.attach.attach_uprobe`).
    """

    arg_count = 6   # in registers; more are read from the stack (see emit_arg)

    def __init__(self, binary: str, symbol: str, *, retprobe: bool = False,
                 pid: int | None = None, spec: ProbeSpec | None = None,
                 unsafe: bool = False) -> None:
        from .. import elf
        self.retprobe = retprobe
        self.kind = "uretprobe" if retprobe else "uprobe"
        self.binary = binary
        self.symbol = symbol
        try:
            self.path = elf.resolve_library(binary, pid)
        except FileNotFoundError as exc:
            raise ProbeSpecError(f"{self.kind}:{binary}:{symbol}: {exc}") from None
        ef = elf.open_elf(self.path)
        if any(c in symbol for c in "*?["):
            from fnmatch import fnmatchcase
            names = sorted({s.name for s in ef.symbols() if s.is_function and s.address
                            and fnmatchcase(s.name, symbol)})
            if not names:
                raise ProbeSpecError(f"{self.kind}:{binary}:{symbol}: no function of "
                                     f"{self.path} matches {symbol!r}")
            self.locations: list[Location] = [ef.resolve(n) for n in names]
        else:
            try:
                self.locations = [ef.resolve(symbol, check_boundary=not unsafe)]
            except LookupError as exc:
                raise ProbeSpecError(f"{self.kind}:{binary}:{symbol}: {exc}") from None
        if retprobe:
            for loc in self.locations:
                if loc.symbol_offset:
                    raise ProbeSpecError(f"uretprobe:{binary}:{symbol}: a uretprobe goes on a "
                                         "function's entry, not at an offset in it")
        #: function name of each location (index = attach cookie)
        self.functions = [loc.name for loc in self.locations]
        self.spec = spec or ProbeSpec(self.kind, binary, symbol)

    @property
    def prog_type(self) -> int:
        """``BPF_PROG_TYPE_KPROBE`` (uprobes run kprobe programs)."""
        from ..kernel.constants import ProgType
        return int(ProgType.KPROBE)

    @property
    def load_options(self) -> dict[str, int]:
        """The ``expected_attach_type`` this kernel's uprobe attach method needs
        (see :func:`pyebpf.attach.uprobe_load_options`)."""
        from ..attach import uprobe_load_options
        return uprobe_load_options()

    def entry(self) -> "UprobeSource":
        """The entry probe of the same functions."""
        return self if not self.retprobe else self._twin(False)

    def ret(self) -> "UprobeSource":
        """The return probe of the same functions."""
        return self if self.retprobe else self._twin(True)

    def _twin(self, retprobe: bool) -> "UprobeSource":
        twin = object.__new__(UprobeSource)
        twin.__dict__.update(self.__dict__)
        twin.retprobe = retprobe
        twin.kind = "uretprobe" if retprobe else "uprobe"
        twin.spec = self.spec.with_kind(twin.kind)
        return twin

    def emit_arg(self, p: Program, dst: Reg, n: int, ctx: Reg) -> None:
        """``dst = argument n`` (x86-64 SysV: rdi rsi rdx rcx r8 r9, then the
        stack at ``rsp + 8 * (n - 5)`` at function entry).  Clobbers r0-r5."""
        from .. import ptregs
        from ..program import R1, R2, R3, R10
        if n < 0:
            raise ProbeSpecError(f"arg{n}: argument numbers start at 0")
        if n < 6:
            ptregs.load_arg(p, dst, n, ctx=ctx)
            return
        if self.retprobe:
            raise ProbeSpecError(f"arg{n} is on the stack, which is gone at return; read it "
                                 "at the entry (uprobe:)")
        slot = p.stack.alloc(8)
        ptregs.load_sp(p, R3, ctx=ctx)
        p.add(R3, 8 * (n - 5))
        p.stack_pointer(R1, slot)
        p.mov(R2, 8)
        p.call("probe_read_user")
        p.load(dst, R10, slot, 8)

    def params(self) -> list[CParam] | None:
        """The first function's parameters from the binary's DWARF debug
        information (:class:`pyebpf.elf.dwarf.CParam`: name and C type), None
        when it has none for that function."""
        if not hasattr(self, "_params"):
            from ..elf.dwarf import dwarf_types
            try:
                got = dwarf_types(self.path).function_params(self.functions[0])
            except OSError:
                got = None
            self._params: list[CParam] | None = got
        return self._params

    def emit_field(self, p: Program, dst: Reg, name: str, ctx: Reg) -> None:
        """``dst = the parameter called name`` (``args->name``, from DWARF),
        extended from its C size as its type's sign says."""
        params = self.params() or []
        for n, param in enumerate(params):
            if param.name == name:
                self.emit_arg(p, dst, n, ctx)
                size = param.type.size if param.type.kind in ("int", "bool", "enum") else 8
                if size < 8:
                    if param.type.signed:
                        p.movsx(dst, dst, size * 8)
                    elif size == 4:
                        p.mov(dst.w, dst.w)
                    else:
                        p.and_(dst, (1 << size * 8) - 1)
                return
        raise ProbeSpecError(f"{self.kind}:{self.path}:{self.functions[0]} has no parameter "
                             f"{name!r} (its parameters: "
                             f"{', '.join(x.name for x in params) or 'none known'})")

    def emit_retval(self, p: Program, dst: Reg, ctx: Reg) -> None:
        """``dst = return value`` (rax); only at a uretprobe."""
        from .. import ptregs
        if not self.retprobe:
            raise ProbeSpecError("retval is only known at a function's return (uretprobe:)")
        ptregs.load_ret(p, dst, ctx=ctx)

    def attach(self, loaded_program: LoadedProgram, pid: int | None = None) -> Link:
        """Attach ``loaded_program`` to every function of :attr:`functions`
        (one link; the attach cookie is the function's index when there are
        several); ``pid`` restricts it to that process."""
        from ..attach import attach_uprobes
        cookies = list(range(len(self.locations))) if len(self.locations) > 1 else None
        return attach_uprobes(loaded_program, self.path, self.locations, pid=pid,
                              retprobe=self.retprobe, cookies=cookies)

    def describe(self) -> str:
        """``uprobe:/usr/lib/.../libc.so.6:malloc`` (the first four functions
        of a glob, and how many there are)."""
        where = ", ".join(self.functions[:4]) + (f", ... ({len(self.functions)} functions)"
                                                 if len(self.functions) > 4 else "")
        return f"{self.kind}:{self.path}:{where}"


# ================================================================== tracepoints
_CTYPE_SIZES = {"char": 1, "bool": 1, "_Bool": 1, "short": 2, "umode_t": 2, "int": 4,
                "pid_t": 4, "uid_t": 4, "gid_t": 4, "key_serial_t": 4, "qid_t": 4,
                "clockid_t": 4, "timer_t": 4, "mqd_t": 4, "rwf_t": 4, "__kernel_rwf_t": 4}
_CTYPE_SIZES.update((prefix + name, t[0]) for name, t in INT_TYPES.items()      # u32, __u32 ...
                    for prefix in ("", "__"))


def _ctype_signed(ctype: str) -> bool:
    words = ctype.replace("const", " ").split()
    if "unsigned" in words or not words:
        return False
    base = words[-1]
    return not (base.startswith(("u", "__u")) or base in ("bool", "_Bool"))


def _ctype_size(ctype: str) -> int | None:
    """Width of a scalar C type as tracefs writes it (None: unknown or a pointer)."""
    if "*" in ctype:
        return None
    words = [w for w in ctype.replace("const", " ").replace("volatile", " ").split()
             if w not in ("unsigned", "signed")]
    if not words:                       # "unsigned" alone
        return 4
    if words[-1] == "long":
        return 8
    if words == ["short", "int"]:
        return 2
    return _CTYPE_SIZES.get(words[-1])


class FixedTypeSource:
    """Base of the probe sources whose program type is one ``ProgType``
    member (``prog_type_name``) and need no attach type."""

    #: the :class:`pyebpf.kernel.constants.ProgType` member's name
    prog_type_name = ""

    @property
    def prog_type(self) -> int:
        """``BPF_PROG_TYPE_<prog_type_name>``."""
        from ..kernel.constants import ProgType
        return int(ProgType[self.prog_type_name])

    @property
    def load_options(self) -> dict[str, int]:
        """``{"prog_type": prog_type}`` (no attach type needed)."""
        return {"prog_type": self.prog_type}


class TracepointSource(FixedTypeSource):
    """A kernel tracepoint; its record's fields are read by name
    (``args.NAME``), and ``argN`` is the N-th field after the common ones."""

    kind = "tracepoint"
    prog_type_name = "TRACEPOINT"

    def __init__(self, category: str, name: str, spec: ProbeSpec | None = None) -> None:
        from ..attach import tracepoint_format
        from ..errors import AttachError
        try:
            self.format: TracepointFormat = tracepoint_format(f"{category}:{name}")
        except AttachError as exc:
            raise ProbeSpecError(f"tracepoint:{category}:{name}: {exc.strerror or exc}") from None
        self.category = category
        self.name = name
        #: the fields after the common ones (``argN`` is ``fields[N]``)
        self.fields: list[TracepointField] = [f for f in self.format.fields if not f.common]
        self.functions = [f"{category}:{name}"]
        self.spec = spec or ProbeSpec("tracepoint", category, name)

    @property
    def arg_count(self) -> int:
        """The number of fields after the common ones (``arg0`` ... ``argN``)."""
        return len(self.fields)

    def field(self, name: str) -> TracepointField:
        """The field called ``name`` (common ones included); a
        :class:`ProbeSpecError` naming the fields when there is none."""
        try:
            return self.format.field(name)
        except KeyError as exc:
            raise ProbeSpecError(exc.args[0]) from None

    def emit_arg(self, p: Program, dst: Reg, n: int, ctx: Reg) -> None:
        """``dst = arg n``: the ``n``-th field after the common ones (see
        :meth:`emit_field`); a :class:`ProbeSpecError` naming the fields when
        there are fewer."""
        if not 0 <= n < len(self.fields):
            raise ProbeSpecError(
                f"tracepoint:{self.category}:{self.name} has {len(self.fields)} fields, so "
                f"arg0..arg{len(self.fields) - 1}; arg{n} does not exist (fields: "
                f"{', '.join(f.name for f in self.fields)}; use args.NAME)")
        self.emit_field(p, dst, self.fields[n].name, ctx)

    def field_signed(self, name: str) -> bool:
        """Whether field ``name`` is read as a signed integer (a signed C
        type, not a string or an array)."""
        f = self._narrowed(self.field(name))
        return f.signed and not f.data_loc and f.array_len is None

    def emit_field(self, p: Program, dst: Reg, name: str, ctx: Reg) -> None:
        """``dst = args.name`` (sign-extended when the field is signed).

        A field wider than its C type (syscall tracepoints store an ``int``
        argument in 8 bytes) is read with the type's width, as bpftrace does:
        ``args.dfd`` of openat is -100, not 4294967196."""
        f = self.field(name)
        if f.array_len is not None or f.data_loc:
            raise ProbeSpecError(f"args.{name} is {'a __data_loc string' if f.data_loc else 'an array'}"
                                 f" ({f.type}); read it with str(args.{name})")
        f = self._narrowed(f)
        f.load(p, dst, ctx)

    @staticmethod
    def _narrowed(f: TracepointField) -> TracepointField:
        width = _ctype_size(f.type)
        if width is not None and width < f.size:
            return f._replace(size=width, signed=_ctype_signed(f.type))
        return f

    def emit_field_string(self, p: Program, name: str, offset: int, size: int, ctx: Reg) -> None:
        """Copy the string of field ``name`` into ``size`` bytes of stack at
        ``offset`` (zeroed first): a ``char *`` (user memory for syscalls,
        kernel memory otherwise), a ``__data_loc char[]`` or a ``char[N]``."""
        from ..program import R1, R2, R3, R10
        f = self.field(name)
        p.stack_zero(size, offset)
        if f.data_loc:
            f2 = f._replace(signed=False, data_loc=False)
            f2.load(p, R3, ctx)
            p.and_(R3, 0xFFFF)
            p.add(R3, ctx)
            p.stack_pointer(R1, offset)
            p.mov(R2, size)
            p.call("probe_read_kernel_str")
        elif f.array_len is not None:
            p.mov(R3, ctx)
            p.add(R3, f.offset)
            p.stack_pointer(R1, offset)
            p.mov(R2, min(size, f.size))
            p.call("probe_read_kernel")
            p.stb(R10, offset + size - 1, 0)
        elif "char" in f.type and "*" in f.type and f.size == 8:
            f.load(p, R3, ctx)
            p.stack_pointer(R1, offset)
            p.mov(R2, size)
            p.call("probe_read_user_str" if self.category == "syscalls"
                   else "probe_read_kernel_str")
        else:
            raise ProbeSpecError(f"args.{name} ({f.type}) is not a string field")

    def attach(self, loaded_program: LoadedProgram, pid: int | None = None) -> Link:
        """Attach ``loaded_program`` to the tracepoint (system-wide: ``pid``
        is ignored, the programs filter on it)."""
        from ..attach import attach_tracepoint
        return attach_tracepoint(loaded_program, f"{self.category}:{self.name}")

    def describe(self) -> str:
        """``tracepoint:CATEGORY:NAME (fields: ...)``."""
        return (f"tracepoint:{self.category}:{self.name} (fields: "
                f"{', '.join(f.name for f in self.fields)})")


# ====================================================================== USDT
def usdt_source(target: str, provider: str | None, name: str,
                pid: int | None = None) -> UsdtProbeSource:
    """The USDT probe source of :mod:`pyebpf.probes.usdt_source` (imported
    lazily: it brings the USDT package)."""
    from .usdt_source import usdt_probe_source
    return usdt_probe_source(target, provider, name, pid=pid)


def probe_source(spec: "ProbeSpec | str", pid: int | None = None, *,
                 unsafe: bool = False) -> UprobeSource | TracepointSource | UsdtProbeSource:
    """Resolve a probe spec into its probe source (see the module docs).

    ``unsafe=True`` lets a uprobe go where no instruction start is proven
    (``--unsafe`` on the command line).
    """
    if isinstance(spec, str):
        spec = parse_probe(spec)
    if spec.kind in ("uprobe", "uretprobe"):
        return UprobeSource(spec.target, spec.name, retprobe=spec.kind == "uretprobe",
                            pid=pid, spec=spec, unsafe=unsafe)
    if spec.kind == "tracepoint":
        return TracepointSource(spec.target, spec.name, spec)
    if spec.kind == "usdt":
        return usdt_source(spec.target, spec.provider, spec.name, pid)
    raise ProbeSpecError(f"unknown probe kind {spec.kind!r}")  # pragma: no cover


if TYPE_CHECKING:
    #: a resolved probe (what :func:`probe_source` returns)
    Source = UprobeSource | TracepointSource | UsdtProbeSource
