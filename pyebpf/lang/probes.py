"""The attach points of a bpftrace program made concrete: which probes an
attach point names, what each reads as its arguments, and ``bt -l``.

- :func:`resolve` turns one :class:`~pyebpf.lang.ast.AttachPoint` into its
  :class:`ResolvedProbe` list: a wildcard (``uprobe:./work:*e*``,
  ``tracepoint:syscalls:sys_enter_open*``, ``usdt:PATH:*``) expands to one
  probe per match, each named as bpftrace's ``probe`` builtin prints it
  (``uprobe:/full/path:work``: the path as written, a library name such as
  ``libc`` resolved; an address in decimal; the USDT provider filled in).
  Each carries a probe *source* shaped like
  :class:`pyebpf.probes.sources.ProbeSource` (``prog_type``, ``load_options``,
  ``arg_count``, ``emit_arg``, ``attach``, ``describe``).
- :class:`Resolver` gives the semantic pass the types of ``argN``,
  ``args`` and ``retval`` (a USDT argument has its spec's size and sign:
  ``-4@%r8d`` is ``int32``).
- :func:`pyebpf.lang.listing.list_probes` prints what ``bpftrace -l PATTERN`` prints.

Kinds: ``uprobe``/``uretprobe``, ``usdt``, ``tracepoint``,
``rawtracepoint``, ``profile``, ``interval``, ``software``, ``hardware``.
``kprobe``/``kretprobe``/``kfunc``/``kretfunc`` are refused with the
reason the kernel's feature probe gives; ``hardware`` is refused where
there is no CPU PMU. ``BEGIN``/``END`` are the runtime's, not here.
Everything except ``attach`` is pure (ELF files, tracefs), so a bad probe
fails before anything is loaded.
"""
from __future__ import annotations

import os

from ..probes.sources import FixedTypeSource, ProbeSpecError, TracepointSource, UprobeSource
from .types import Type, int_type, string_type

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Sequence

    from ..attach import Link
    from ..program import Program, Reg
    from .ast import AttachPoint

__all__ = ["ResolvedProbe", "resolve", "Resolver", "PerfEventSource",
           "RawTracepointSource", "ProbeSpecError", "ProbeNotFoundError", "SOFTWARE_EVENTS",
           "HARDWARE_EVENTS", "probe_name", "missing_tracepoint", "kernel_probe_refusal"]

# (duplicates: deliberate, the two event tables are data of the same shape)
#: bpftrace's software events: name -> (aliases, perf config, default count)
SOFTWARE_EVENTS: dict[str, tuple[tuple[str, ...], int, int]] = {
    "cpu-clock": (("cpu",), 0, 1000000),
    "task-clock": ((), 1, 1000000),
    "page-faults": (("faults",), 2, 100),
    "context-switches": (("cs",), 3, 1000),
    "cpu-migrations": ((), 4, 1),
    "minor-faults": ((), 5, 100),
    "major-faults": ((), 6, 1),
    "alignment-faults": ((), 7, 1),
    "emulation-faults": ((), 8, 1),
    "dummy": ((), 9, 1),
    "bpf-output": ((), 10, 1),
}
#: bpftrace's hardware events: name -> (aliases, perf config, default count)
HARDWARE_EVENTS: dict[str, tuple[tuple[str, ...], int, int]] = {
    "cpu-cycles": (("cycles",), 0, 1000000),
    "instructions": ((), 1, 1000000),
    "cache-references": ((), 2, 1000000),
    "cache-misses": ((), 3, 1000000),
    "branch-instructions": (("branches",), 4, 100000),
    "branch-misses": ((), 5, 100000),
    "bus-cycles": ((), 6, 100000),
    "frontend-stalls": ((), 7, 1000000),
    "backend-stalls": ((), 8, 1000000),
    "ref-cycles": ((), 9, 1000000),
}
_PERF_TYPE_HARDWARE, _PERF_TYPE_SOFTWARE = 0, 1
_UNITS_NS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000}
_CPU_PMU = "/sys/bus/event_source/devices/cpu"
_SHORT = {"u": "uprobe", "ur": "uretprobe", "U": "usdt", "t": "tracepoint",
          "rt": "rawtracepoint", "p": "profile", "i": "interval", "s": "software",
          "h": "hardware", "k": "kprobe", "kr": "kretprobe", "f": "kfunc", "fr": "kretfunc",
          "w": "watchpoint", "aw": "asyncwatchpoint"}


class ResolvedProbe:
    """One concrete probe: ``name`` (what the ``probe`` builtin prints) and
    ``source`` (the probe source that loads and attaches it)."""

    __slots__ = ("name", "source")

    def __init__(self, name: str, source: Any) -> None:
        self.name = name
        self.source = source

    def __repr__(self) -> str:
        return f"ResolvedProbe({self.name!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ResolvedProbe) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)


def _is_glob(text: str) -> bool:
    return "*" in text


def _match(pattern: str, name: str) -> bool:
    import fnmatch
    return fnmatch.fnmatchcase(name, pattern)


class ProbeNotFoundError(ProbeSpecError):
    """The probe an attach point names does not exist: :attr:`message` is
    bpftrace's message, :attr:`hint` pyebpf's suggestions (``""`` or
    lines), ``str()`` both; the program's compilation points it at the
    attach point."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(f"{message}\n{hint}" if hint else message)
        self.message = message
        self.hint = hint


def _not_found(what: str, wanted: str, candidates: list[str]) -> ProbeSpecError:
    from ..errors import close_matches
    close = close_matches(wanted, candidates, n=5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return ProbeSpecError(f"{what}: nothing matches {wanted!r}{hint}")


# ================================================================ uprobes
def _shown_path(path: str, pid: int | None) -> tuple[str, str]:
    """(file to open, path as the probe's name shows it): a path as written,
    a library or program name resolved."""
    from .. import elf
    try:
        real = elf.resolve_library(path, pid)
    except (FileNotFoundError, ProcessLookupError) as exc:
        raise ProbeSpecError(f"{path}: {exc}") from None
    return real, (path if "/" in path else real)


def _functions(path: str) -> list[str]:
    from .. import elf
    ef = elf.open_elf(path)
    return sorted({s.name for s in ef.symbols() if s.is_function and s.address})


def _uprobes(ap: AttachPoint, pid: int | None, unsafe: bool = False) -> list[ResolvedProbe]:
    kind = ap.provider
    if len(ap.parts) != 2 or not all(ap.parts):
        raise ProbeSpecError(f"{ap.raw}: a {kind} is {kind}:PATH:FUNCTION (PATH a file or a "
                             f"library name such as libc), e.g. {kind}:/bin/bash:readline")
    path, func = ap.parts
    if ap.func_offset is not None and "+" not in func:
        func = f"{func}+{ap.func_offset}"
    if _is_glob(path):                 # every ELF file the wildcard matches
        import copy
        from .. import elf
        out: list[ResolvedProbe] = []
        why = f"{kind}:{path}: no ELF file matches {path!r}"
        for f in elf.expand_path(path, pid):
            one = copy.copy(ap)
            one.parts = [f, ap.parts[1]]
            out += _uprobes(one, pid, unsafe)
            why = one.missing or why
        if not out:
            ap.missing = why
        return out
    real, shown = _shown_path(path, pid)
    ret = kind == "uretprobe"
    if _is_glob(func):
        names = [n for n in _functions(real) if _match(func, n)]
        if not names:
            ap.missing = str(_not_found(f"{kind}:{shown}", func, _functions(real)))
            return []
        return [ResolvedProbe(f"{kind}:{shown}:{n}", UprobeSource(real, n, retprobe=ret, pid=pid))
                for n in names]
    try:
        src = UprobeSource(real, func, retprobe=ret, pid=pid, unsafe=unsafe)
    except ProbeSpecError:
        if func.startswith("0x") or "+" in func:
            raise
        ap.missing = str(_not_found(f"{kind}:{shown}", func, _functions(real)))
        return []
    label = str(int(func, 16)) if func.lower().startswith("0x") else func
    return [ResolvedProbe(f"{kind}:{shown}:{label}", src)]


# =================================================================== USDT
def _usdt_files(path: str, pid: int | None) -> list[tuple[str, str]]:
    """(file, path shown) for a USDT target: a path, a name, or (with
    ``pid``) ``*``/empty for every module of that process. With ``pid``
    bpftrace shows the file through the process's root
    (``/proc/PID/root/usr/bin/x``)."""
    from ..errors import UsdtError
    from ..usdt.attach import usdt_files
    if path in ("", "*") and pid is not None:
        # named as bpftrace names them: through the process's root
        try:
            return [(f, f if f.startswith("/proc/") else f"/proc/{pid}/root{f}")
                    for f in usdt_files(None, pid)]
        except UsdtError as exc:
            raise ProbeSpecError(str(exc)) from None
    if _is_glob(path):                 # every ELF file the wildcard matches
        from .. import elf
        files = elf.expand_path(path, pid)
        if not files:
            raise ProbeSpecError(f"usdt:{path}: no ELF file matches {path!r}")
        return [(f, f) for f in files]
    real, shown = _shown_path(path, pid)
    if pid is not None and not real.startswith("/proc/"):
        shown = f"/proc/{pid}/root{os.path.abspath(real)}"
    return [(real, shown)]


def _usdt(ap: AttachPoint, pid: int | None) -> list[ResolvedProbe]:
    from ..errors import UsdtError
    from ..probes.usdt_source import usdt_probe_source
    from ..usdt.notes import UsdtFile
    parts = ap.parts
    if len(parts) == 2:
        path, provider, name = parts[0], "*", parts[1]
    elif len(parts) == 3:
        path, provider, name = parts[0], parts[1] or "*", parts[2]
    else:
        raise ProbeSpecError(f"{ap.raw}: a USDT probe is usdt:PATH:[PROVIDER:]NAME, e.g. "
                             "usdt:/usr/bin/python3:python:function__entry")
    if not name:
        raise ProbeSpecError(f"{ap.raw}: the USDT probe has no name")
    out, everything = [], []
    for real, shown in _usdt_files(path, pid):
        try:
            probes = UsdtFile(real).probes()
        except (UsdtError, OSError) as exc:
            raise ProbeSpecError(f"{ap.raw}: {exc}") from None
        seen = []
        for pr in probes:
            everything += [f"{pr.provider}:{pr.name}", pr.name]
            if (pr.provider, pr.name) in seen:
                continue
            if _match(provider, pr.provider) and _match(name, pr.name):
                seen.append((pr.provider, pr.name))
        # (in bpftrace's order, "PROVIDER:NAME" strings sorted: tracetest2:b before tracetest:a)
        for prov, nm in sorted(seen, key=lambda pn: f"{pn[0]}:{pn[1]}"):
            try:
                src = usdt_probe_source(real, prov, nm, pid=pid)
            except UsdtError as exc:
                raise ProbeSpecError(f"{ap.raw}: {exc}") from None
            out.append(ResolvedProbe(f"usdt:{shown}:{prov}:{nm}", src))
    if not out:
        wanted = name if provider == "*" else f"{provider}:{name}"
        raise _not_found(f"usdt:{path}", wanted, sorted(set(everything)))
    return out


# ============================================================= tracepoints
def _tracepoints(ap: AttachPoint) -> list[ResolvedProbe]:
    if len(ap.parts) != 2 or not all(ap.parts):
        raise ProbeSpecError(f"{ap.raw}: a tracepoint is tracepoint:CATEGORY:NAME, e.g. "
                             "tracepoint:syscalls:sys_enter_openat")
    cat, name = ap.parts
    if not (_is_glob(cat) or _is_glob(name)):
        try:
            source = TracepointSource(cat, name)
        except ProbeSpecError as exc:
            if f"{cat}:{name}" in _tracepoint_names():
                raise
            raise ProbeNotFoundError(f"tracepoint not found: {cat}:{name}",
                                     str(exc).partition("\n")[2]) from None
        return [ResolvedProbe(f"tracepoint:{cat}:{name}", source)]
    everything = _tracepoint_names()
    hits = [t for t in everything if _match(f"{cat}:{name}", t)]
    if not hits:
        raise _not_found("tracepoint", f"{cat}:{name}", everything)
    return [ResolvedProbe(f"tracepoint:{t}", TracepointSource(c, n))
            for t in hits for c, _, n in [t.partition(":")]]


def _tracepoint_names() -> list[str]:
    """``CATEGORY:NAME`` of every tracepoint, as bpftrace sees them: sorted as
    whole strings (``fib6:`` before ``fib:``), the ftrace category left out
    (its events cannot be attached)."""
    from ..attach import list_tracepoints
    return sorted(f"{t}" for t in list_tracepoints() if not t.startswith("ftrace:"))


class RawTracepointSource(FixedTypeSource):
    """A raw tracepoint: ``argN`` is the tracepoint's N-th raw argument
    (``ctx->args[N]``, 64-bit)."""

    kind = "rawtracepoint"
    arg_count = 12
    prog_type_name = "RAW_TRACEPOINT"

    def __init__(self, name: str) -> None:
        self.name = name

    def emit_arg(self, p: Program, dst: Reg, n: int, ctx: Reg) -> None:
        """``dst = ctx->args[n]``."""
        if not 0 <= n < self.arg_count:
            raise ProbeSpecError(f"rawtracepoint:{self.name}: arg{n} does not exist "
                                 f"(arg0..arg{self.arg_count - 1})")
        p.load(dst, ctx, 8 * n, 8)

    def attach(self, loaded_program: Any, pid: int | None = None) -> Link:
        """Attach to the raw tracepoint (system-wide; ``pid`` is ignored)."""
        from ..attach import attach_raw_tracepoint
        return attach_raw_tracepoint(loaded_program, self.name)

    def describe(self) -> str:
        """``rawtracepoint:NAME``."""
        return f"rawtracepoint:{self.name}"


def _rawtracepoints(ap: AttachPoint) -> list[ResolvedProbe]:
    parts = [p for p in ap.parts if p]
    if not parts or len(parts) > 2:
        raise ProbeSpecError(f"{ap.raw}: a raw tracepoint is rawtracepoint:NAME, e.g. "
                             "rawtracepoint:sched_switch")
    name = parts[-1]
    if not _is_glob(name):
        known = _raw_names()
        if known and name not in known:
            raise _not_found("rawtracepoint", name, sorted(known))
        return [ResolvedProbe(f"rawtracepoint:{name}", RawTracepointSource(name))]
    hits = sorted(n for n in _raw_names() if _match(name, n))
    if not hits:
        raise _not_found("rawtracepoint", name, sorted(_raw_names()))
    return [ResolvedProbe(f"rawtracepoint:{n}", RawTracepointSource(n)) for n in hits]


def _raw_names() -> set[str]:
    from ..attach import list_raw_tracepoints
    return set(list_raw_tracepoints())


# ============================================================ perf events
class PerfEventSource(FixedTypeSource):
    """A perf event sampled by a PERF_EVENT program: ``profile`` (cpu-clock
    on every CPU), ``interval`` (cpu-clock on one CPU), ``software`` and
    ``hardware`` events (every CPU). No arguments."""

    arg_count = 0
    prog_type_name = "PERF_EVENT"

    def __init__(self, kind: str, event: tuple[int, int], *, frequency: int | None = None,
                 period: int | None = None, one_cpu: bool = False, label: str = "") -> None:
        self.kind = kind
        self.event = event
        self.frequency = frequency
        self.period = period
        self.one_cpu = one_cpu
        self.label = label

    def emit_arg(self, p: Program, dst: Reg, n: int, ctx: Reg) -> None:
        """There are none: a :class:`ProbeSpecError`."""
        raise ProbeSpecError(f"{self.label}: {self.kind} probes have no arguments (arg{n})")

    def attach(self, loaded_program: Any, pid: int | None = None) -> Link:
        """Open the event (on CPU 0 for ``interval``, else on every online
        CPU; for process ``pid`` only when given, except ``interval``) and
        attach the program to it."""
        from ..attach import attach_perf_event
        from ..errors import KernelError
        try:
            return attach_perf_event(loaded_program, self.frequency, period=self.period,
                                     event=self.event, cpus=[0] if self.one_cpu else None,
                                     pid=-1 if pid is None or self.one_cpu else pid)
        except KernelError as exc:
            if self.kind == "hardware" and exc.errno in (2, 19, 95):
                raise ProbeSpecError(f"{self.label}: the CPU has no PMU for hardware events "
                                     f"here (perf_event_open: {exc.strerror or exc})") from None
            raise

    def describe(self) -> str:
        """``profile:hz:99 (cpu-clock at 99 Hz on every CPU)``."""
        rate = (f"at {self.frequency} Hz" if self.frequency is not None
                else f"every {self.period} events")
        return f"{self.label} ({self.event} {rate} on {'CPU 0' if self.one_cpu else 'every CPU'})"


def _timed(ap: AttachPoint) -> list[ResolvedProbe]:
    kind = ap.provider
    if len(ap.parts) != 2:
        raise ProbeSpecError(f"{ap.raw}: {kind} probe type requires 2 arguments: "
                             f"{kind}:UNIT:N, UNIT one of hz s ms us, e.g. {kind}:hz:99")
    unit, count = ap.parts
    n = _number(ap, count)
    if n <= 0:
        raise ProbeSpecError(f"{ap.raw}: " + ("profile frequency should be a positive integer"
                                              if kind == "profile" else
                                              "the interval must be positive"))
    name = f"{kind}:{unit}:{n}"       # the number in decimal, as bpftrace's probe builtin
    cpu_clock = (_PERF_TYPE_SOFTWARE, 0)
    one = kind == "interval"
    if unit == "hz":
        return [ResolvedProbe(name, PerfEventSource(kind, cpu_clock, frequency=n, one_cpu=one,
                                                    label=name))]
    if unit not in _UNITS_NS:
        raise ProbeSpecError(f"{ap.raw}: unknown unit {unit!r}; {kind} takes hz, s, ms or us")
    period = n * _UNITS_NS[unit]
    if period >> 64:
        raise ProbeSpecError(f"{ap.raw}: {n} {unit} is too long: the period in nanoseconds "
                             "does not fit in 64 bits")
    return [ResolvedProbe(name, PerfEventSource(kind, cpu_clock, period=period,
                                                one_cpu=one, label=name))]


def _number(ap: AttachPoint, text: str) -> int:
    """The number ``text`` of attach point ``ap``, read as bpftrace reads it
    (:func:`~pyebpf.lang.sema_base.attach_point_number`); a
    :class:`ProbeSpecError` with bpftrace's message when it is not one."""
    from .errors import LangError
    from .sema_base import attach_point_number
    try:
        return attach_point_number(text)
    except LangError as err:
        raise ProbeSpecError(f"{ap.raw}: {text!r} is not a number: {err.message}") from None


def _event_named(table: dict[str, tuple[tuple[str, ...], int, int]], name: str
                 ) -> tuple[str, int, int] | None:
    for full, (aliases, config, default) in table.items():
        if name == full or name in aliases:
            return full, config, default
    return None


def _perf_counted(ap: AttachPoint) -> list[ResolvedProbe]:
    kind = ap.provider
    hw = kind == "hardware"
    table = HARDWARE_EVENTS if hw else SOFTWARE_EVENTS
    if not ap.parts or len(ap.parts) > 2 or not ap.parts[0]:
        raise ProbeSpecError(f"{ap.raw}: a {kind} probe is {kind}:EVENT[:COUNT], e.g. "
                             f"{kind}:{next(iter(table))}:{next(iter(table.values()))[2]}")
    count = _number(ap, ap.parts[1]) if len(ap.parts) == 2 else 0   # (bpftrace's parser first)
    if count < 0:        # bpftrace's words, "frequency" for hardware
        raise ProbeSpecError(f"{ap.raw}: {kind} {'frequency' if hw else 'count'} should be "
                             "a positive integer")
    ev = _event_named(table, ap.parts[0])
    if ev is None:
        raise _not_found(kind, ap.parts[0], [n for n, (a, _c, _d) in table.items()
                                             for n in (n, *a)])
    full, config, default = ev
    if hw and not os.path.isdir(_CPU_PMU):
        raise ProbeSpecError(f"{ap.raw}: hardware events need the CPU's PMU, and this "
                             f"machine has none ({_CPU_PMU} is missing: a virtual machine "
                             "without a virtual PMU)")
    period = count or default                    # 0: the event's default, as bpftrace
    name = f"{kind}:{ap.parts[0]}:{count or ''}"
    ptype = _PERF_TYPE_HARDWARE if hw else _PERF_TYPE_SOFTWARE
    return [ResolvedProbe(name, PerfEventSource(kind, (ptype, config), period=period,
                                                label=name))]


# ============================================================== refusals
#: the kernel functions bpftrace 0.17 refuses a kretprobe on (the return
#: probe of a spin lock's function can deadlock the machine)
BANNED_KRETPROBES = frozenset({"_raw_spin_lock", "_raw_spin_lock_irqsave",
                               "_raw_spin_unlock_irqrestore", "queued_spin_lock_slowpath"})


#: the kinds of kernel-function probe this language does not attach
REFUSED_KINDS = ("kprobe", "kretprobe", "kfunc", "kretfunc")


def kernel_probe_refusal(spec: str) -> ProbeSpecError | None:
    """The error for a probe spec (``kprobe:vfs_read``, ``kr:...``) of a kind
    this language refuses, saying why (as ``bt`` says it), else None: the one
    reason ``pyebpf trace`` gives too."""
    kind = _canonical(spec.strip().partition(":")[0])
    return _refused(spec.strip(), kind) if kind in REFUSED_KINDS else None


def _refused(raw: str, provider: str) -> ProbeSpecError:
    from ..kernel import features
    if provider in ("kprobe", "kretprobe"):
        reason = features.has_kprobe_pmu().reason
        if features.has_kprobe_pmu():
            reason = ("pyebpf's bpftrace language does not attach kprobes yet "
                      f"(the kernel has them: {reason})")
    else:
        from ..kernel.constants import ProgType
        reason = ("they are fentry/fexit programs, and the feature probe says: " +
                  features.has_prog_type(ProgType.TRACING).reason)
    return ProbeSpecError(f"{raw}: {provider} probes are not available: {reason}")


# ================================================================ resolve
def _canonical(provider: str) -> str:
    return _SHORT.get(provider, provider)


def resolve(ap: AttachPoint, *, pid: int | None = None, unsafe: bool = False,
            command: Sequence[str] | None = None) -> list[ResolvedProbe]:
    """The concrete probes attach point ``ap`` names (one per wildcard
    match), each with its name as bpftrace prints it and its probe source.

    Raises :class:`~pyebpf.probes.sources.ProbeSpecError` (a ``ValueError``)
    for a malformed attach point, one that matches nothing (listing close
    matches), or a kind this kernel or pyebpf cannot attach.  ``unsafe``: a
    uprobe may go where no instruction start is proven (``--unsafe``);
    ``command``: the ``-c`` command's argv (a watchpoint on a function's
    argument watches that program)."""
    kind = _canonical(ap.provider)
    if kind != ap.provider:
        import copy
        ap = copy.copy(ap)
        ap.provider = kind
    if kind in ("uprobe", "uretprobe"):
        return _uprobes(ap, pid, unsafe)
    if kind == "usdt":
        return _usdt(ap, pid)
    if kind == "tracepoint":
        return _tracepoints(ap)
    if kind == "rawtracepoint":
        return _rawtracepoints(ap)
    if kind in ("profile", "interval"):
        return _timed(ap)
    if kind in ("software", "hardware"):
        return _perf_counted(ap)
    if kind == "kretprobe" and ap.parts and ap.parts[-1] in BANNED_KRETPROBES:
        raise ProbeSpecError(f"error: kretprobe:{ap.parts[-1]} can't be used as it might "
                             "lock up your system.")
    if kind in ("watchpoint", "asyncwatchpoint"):
        from .watchpoints import resolve_watchpoint
        return resolve_watchpoint(ap, pid, command)
    if kind in REFUSED_KINDS:
        raise _refused(ap.raw, ap.provider)
    if kind in ("BEGIN", "END"):
        raise ProbeSpecError(f"{kind} is not a kernel probe (the runtime runs it)")
    raise ProbeSpecError(f"{ap.raw}: unknown probe type {ap.provider!r}")


def missing_tracepoint(ap: AttachPoint) -> str | None:
    """``CATEGORY:NAME`` when ``ap`` names one tracepoint (no wildcard) that
    does not exist, else None."""
    if _canonical(ap.provider) != "tracepoint" or len(ap.parts) != 2 or \
            any(_is_glob(p) or not p for p in ap.parts):
        return None
    name = ":".join(ap.parts)
    return None if name in _tracepoint_names() else name


def probe_name(ap: AttachPoint, *, pid: int | None = None) -> list[str]:
    """The names of the probes ``ap`` expands to (:func:`resolve`'s names)."""
    return [r.name for r in resolve(ap, pid=pid)]


# =============================================================== resolver
def _field_type(f: Any) -> Type:
    """A tracepoint field's type as bpftrace types ``args.NAME``: a scalar
    read with its C type's width (``int`` stored in 8 bytes: int32)."""
    if not (f.data_loc or f.array_len is not None or "*" in f.type):
        f = TracepointSource._narrowed(f)
    if f.data_loc:
        return string_type(64)
    if f.array_len is not None:
        return string_type(f.size) if "char" in f.type else Type("buffer", f.size)
    if "*" in f.type:
        name = f.type.replace("const ", "").split("*")[0].strip()
        if name.startswith(("struct ", "union ")):
            from .btftypes import struct_type
            rec = struct_type(name)
            if rec is not None:
                return Type("pointer", 8, elem=rec)
        elem = int_type(1, True) if "char" in f.type else int_type(8, False)
        return Type("pointer", 8, elem=elem)
    return int_type(f.size if f.size in (1, 2, 4, 8) else 8, bool(f.signed))


class Resolver:
    """The semantic pass's :class:`~pyebpf.lang.sema.TypeResolver`: the types
    of ``argN``, ``args`` and ``retval`` at an attach point (resolving it
    once, with ``pid`` as ``-p`` gives it)."""

    def __init__(self, pid: int | None = None, unsafe: bool = False,
                 command: Sequence[str] | None = None) -> None:
        self.pid = pid
        self.unsafe = unsafe
        self.command = list(command) if command else None
        self._cache: dict[tuple[str, str, tuple[str, ...], int | None], list[ResolvedProbe]] = {}

    def probes(self, ap: AttachPoint) -> list[ResolvedProbe]:
        """:func:`resolve` of ``ap``, cached."""
        key = (_canonical(ap.provider), ap.raw, tuple(ap.parts), ap.func_offset)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = resolve(ap, pid=self.pid, unsafe=self.unsafe,
                                             command=self.command)
        return hit

    def arg_type(self, ap: AttachPoint, n: int) -> Type:
        """``argN``'s type: a tracepoint's N-th field, else uint64 -- bpftrace
        0.17's type of a uprobe's, raw tracepoint's and USDT argument (a USDT
        argument is read sign- or zero-extended by its spec, so ``-4@%r8d``'s
        -3 prints -3 in a key and with ``%d``, but compares greater than 0 and
        sums as unsigned, as in bpftrace)."""
        kind = _canonical(ap.provider)
        if kind == "tracepoint":
            src = self.probes(ap)[0].source
            if 0 <= n < len(src.fields):
                return _field_type(src.fields[n])
        # an argument of -60 compares greater than 0 and prints 18446744073709551556
        return int_type(8, False)

    def args_record(self, ap: AttachPoint) -> Type | None:
        """A tracepoint's ``args``: a record of its fields (name, offset,
        type), the common ones included; a uprobe's: its function's
        parameters from the program's DWARF
        (:func:`pyebpf.lang.dwarftypes.args_record`); None for other kinds
        (and a uprobe without debug information)."""
        kind = _canonical(ap.provider)
        if kind == "uprobe":
            from .dwarftypes import args_record
            probes = self.probes(ap)
            return args_record(probes[0].source) if probes else None
        if kind != "tracepoint":
            return None
        src = self.probes(ap)[0].source
        fields = tuple((f.name, f.offset, _field_type(f))
                       for f in src.format.fields)
        size = max((f.offset + f.size for f in src.format.fields), default=0)
        return Type("record", size, fields=fields)

    def struct_type(self, ap: AttachPoint, name: str) -> Type | None:
        """``struct NAME`` as the program a uprobe's ``ap`` names defines it
        in its DWARF, else None (then the kernel's BTF is asked)."""
        if _canonical(ap.provider) not in ("uprobe", "uretprobe"):
            return None
        probes = self.probes(ap)
        path = getattr(probes[0].source, "path", None) if probes else None
        if path is None:
            return None
        from .dwarftypes import struct_type
        return struct_type(path, name)

    def retval_type(self, ap: AttachPoint) -> Type:
        """``retval``: uint64 (a uretprobe's rax), as bpftrace 0.17 types it:
        a -1 returned prints 18446744073709551615 and is not ``< 0``."""
        return int_type(8, False)
