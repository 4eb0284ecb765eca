"""The semantic pass's common ground (:mod:`pyebpf.lang.sema`): bpftrace's
tables (functions, signals, registers, where functions are allowed), the
results (:class:`MapInfo`, :class:`Analysis`), the helpers that name and
merge types as bpftrace does, and the base of the analyser: its state, its
errors, and what its parts need of each other."""
from __future__ import annotations

from . import ast
from .errors import Diagnostic, LangError
from .lexer import read_uint
from .types import Type, int_type, tuple_type

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Sequence

    from .cdefs import CDefinitions
    from .sema import TypeResolver

#: bpftrace's default string size (BPFTRACE_STRLEN), its NUL included
STRLEN = 64
COMM_SIZE = 16
#: bpftrace's number of semantic passes (the last one checks everything)
_PASSES = 10
U64 = int_type(8, False)
I64 = int_type(8, True)
U32 = int_type(4, False)
#: a user symbol: its address and the process's id (bpftrace's 16 bytes)
USYM = Type("usym", 16)

#: how bpftrace names a kind in messages ("integer provided")
_KIND_NAMES = {"int": "integer", "pointer": "pointer", "record": "record"}
_AGG_FUNCS = frozenset({"count", "sum", "min", "max", "avg", "stats", "hist", "lhist"})
_KNOWN_FUNCS = frozenset(
    "avg buf cat cgroupid clear count delete exit hist join kaddr ksym lhist macaddr max min ntop "
    "print printf cgroup_path reg signal sizeof stats str strerror strftime strncmp sum system time "
    "uaddr usym zero kstack ustack bswap uptr kptr pton strcontains unwatch".split())
#: the signals bpftrace 0.17 knows by name (x86_64 numbers)
_SIGNALS = {"SIGABRT": 6, "SIGALRM": 14, "SIGBUS": 7, "SIGCHLD": 17, "SIGCONT": 18,
            "SIGFPE": 8, "SIGHUP": 1, "SIGILL": 4, "SIGINT": 2, "SIGKILL": 9, "SIGPIPE": 13,
            "SIGPOLL": 29, "SIGQUIT": 3, "SIGSEGV": 11, "SIGSTOP": 19, "SIGSYS": 31,
            "SIGTERM": 15, "SIGTRAP": 5, "SIGTSTP": 20, "SIGTTIN": 21, "SIGTTOU": 22,
            "SIGURG": 23, "SIGUSR1": 10, "SIGUSR2": 12, "SIGVTALRM": 26, "SIGWINCH": 28,
            "SIGXCPU": 24, "SIGXFSZ": 25}
_X86_REGS = frozenset("r15 r14 r13 r12 bp bx r11 r10 r9 r8 ax cx dx si di orig_ax ip cs "
                      "flags sp ss".split())
#: functions bpftrace allows only in some probes
_ONLY_IN = {
    "reg": frozenset({"kprobe", "kretprobe", "uprobe", "uretprobe", "usdt", "profile",
                      "interval", "software", "hardware", "watchpoint", "asyncwatchpoint"}),
    "uaddr": frozenset({"uprobe", "uretprobe", "usdt"}),
    "signal": frozenset({"kprobe", "kretprobe", "uprobe", "uretprobe", "usdt", "tracepoint",
                         "profile", "kfunc", "kretfunc", "rawtracepoint"}),
}


class MapInfo:
    """A map's layout: ``name`` (``"@x"``, ``"@"``), ``key`` (None without
    keys; a ``tuple`` Type when it has several) and ``value``."""

    __slots__ = ("name", "key", "value")

    def __init__(self, name: str, key: Type | None, value: Type) -> None:
        self.name = name
        self.key = key
        self.value = value

    def __repr__(self) -> str:
        return f"MapInfo({self.name!r}, key={self.key}, value={self.value})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MapInfo) and (self.name, self.key, self.value) == (
            other.name, other.key, other.value)


class Analysis:
    """What :func:`analyse` found: ``maps`` (name -> :class:`MapInfo`, in
    order of first use), ``variables`` (probe -> ``$name`` -> Type, the
    ``$`` left out of the names), ``params`` (the positional parameters)."""

    __slots__ = ("maps", "variables", "params")

    def __init__(self, maps: dict[str, MapInfo], variables: dict[ast.Probe, dict[str, Type]],
                 params: tuple[str, ...]) -> None:
        self.maps = maps
        self.variables = variables
        self.params = params


def param_int(text: str) -> int | None:
    """A positional parameter's value as a number, None when it is not one.

    bpftrace 0.17's reading (``std::stoll`` with base 0, the whole text
    used): C blanks before it, one sign, then ``0x``/``0X`` hex, ``0``
    octal or decimal, in ASCII digits only, within a signed 64-bit range.
    So ``" 7"`` and ``+3`` are numbers; ``""``, ``"3 "``, ``08``, ``1_000``,
    ``1e3``, a non-ASCII digit and ``0xffffffffffffffff`` are not."""
    body = text.lstrip(" \t\n\v\f\r")
    sign = -1 if body[:1] == "-" else 1
    if body[:1] in "+-":
        body = body[1:]
    if body[:2] in ("0x", "0X") and len(body) > 2:
        digits, base = body[2:], 16
    elif body[:1] == "0":
        digits, base = body, 8
    else:
        digits, base = body, 10
    allowed = "0123456789abcdefABCDEF"[:base + (base == 16) * 6]
    if not digits or any(c not in allowed for c in digits) or len(digits.lstrip("0")) > 24:
        return None                     # (24 digits: beyond any 64-bit value in any base)
    value = sign * int(digits, base)
    return value if -(1 << 63) <= value < (1 << 63) else None


def attach_point_number(text: str) -> int:
    """The number in an attach point (``profile:hz:N``, ``interval:UNIT:N``,
    ``software:EVENT:N``, ``hardware:EVENT:N``) as bpftrace 0.17 reads it
    (:func:`~pyebpf.lang.lexer.read_uint`: ``010`` is 8, ``1e3`` 1000,
    ``1_000``, ``99ul``, a sign allowed), seen as a signed 64-bit value, as
    bpftrace checks it: ``-1`` and ``18446744073709551615`` are both -1.

    Raises :class:`~pyebpf.lang.errors.LangError` with bpftrace's message
    (``stoull`` for no number at all, ``Found trailing non-numeric
    characters``, the scientific literal's complaints)."""
    value = read_uint(text)
    return value - _U64_LIMIT if value >> 63 else value


_U64_LIMIT = 1 << 64


def signal_number(name: str) -> int | None:
    """The number of a signal named as ``signal()`` takes it (bpftrace's
    rule: any case, ``SIG`` optional: ``"KILL"``, ``"sigusr1"``), or None."""
    sig = name.upper()
    if sig and sig[0] != "S":
        sig = "SIG" + sig
    return _SIGNALS.get(sig)


def _kind_name(t: Type | None) -> str:
    if t is None:
        return "none"
    return _KIND_NAMES.get(t.kind, t.kind)


def _tstr(t: Type) -> str:
    """A type as bpftrace prints it in messages (``unsigned int64``)."""
    return t.spelled(in_messages=True)


def _span(a: ast.Pos, b: ast.Pos) -> ast.Pos:
    """From ``a``'s start to ``b``'s end (bpftrace's ``loc + loc``)."""
    bline = b.end_line or b.line
    if bline == a.line:
        return ast.Pos(a.line, a.column, b.end or b.column + 1)
    return ast.Pos(a.line, a.column, a.column + 1, bline)


def _same_kind(a: Type, b: Type) -> bool:
    """Compatible for a map key/value or a variable: same kind; integers of
    any size and sign, strings and buffers of any length."""
    if a.kind != b.kind:
        return False
    if a.kind == "tuple":
        return len(a.elems) == len(b.elems) and all(
            _same_kind(x, y) for x, y in zip(a.elems, b.elems))
    if a.kind in ("record", "array"):       # one struct, one array shape
        return a == b or (a.struct is not None and a.struct is b.struct)
    return True


def _merge(a: Type, b: Type, packed: bool = False) -> Type:
    """The type holding both ``a`` and ``b`` (compatible): the longer
    string; ``packed`` for the keys of a map with several."""
    if a.kind == "buffer" and a.counted != b.counted:   # counted holds either
        return Type("buffer", max(a.size, b.size), counted=True)
    if a.kind in ("string", "buffer") and b.size > a.size:
        return b
    if a.kind == "tuple":
        return tuple_type([_merge(x, y) for x, y in zip(a.elems, b.elems)], packed=packed)
    return a


def _key_shape(keys: list[Type]) -> Type | None:
    if not keys:
        return None
    if len(keys) == 1:
        return keys[0]
    return tuple_type(keys, packed=True)


def _key_str(key: Type | None) -> str:
    """bpftrace's argument list of a key: integers shown unsigned."""
    if key is None:
        return "[]"
    keys = key.elems if key.kind == "tuple" else (key,)
    shown = [f"unsigned int{k.size * 8}" if k.kind == "int" else _tstr(k) for k in keys]
    return "[" + ", ".join(shown) + "]"


class _Probe:
    """Per-probe state: the probe and its scratch variables."""

    def __init__(self, probe: ast.Probe, variables: dict[str, Type]) -> None:
        self.probe = probe
        self.vars = variables     # kept from pass to pass, as bpftrace keeps them

    @property
    def providers(self) -> list[str]:
        return [ap.provider for ap in self.probe.attach_points]

    def single_provider(self) -> str:
        """The probes' provider when they all share one (bpftrace's
        ``single_provider_type``), else ``"invalid"``; BEGIN/END are
        ``"special"``."""
        kinds = {("special" if p in ("BEGIN", "END") else p) for p in self.providers}
        return kinds.pop() if len(kinds) == 1 else "invalid"


class _AnalyserBase:
    """The state of one analysis, its errors; the methods one part of the
    analyser calls in another are declared here."""

    def __init__(self, script: ast.Script, resolver: TypeResolver | None,
                 params: Sequence[str], unsafe: bool = False) -> None:
        self.script = script
        self.resolver = resolver
        self.params = tuple(params)
        self.unsafe = unsafe          # bpftrace's --unsafe: system() allowed
        self._cdefs: CDefinitions | None = None
        if script.c_definitions:      # (parsed now: a bad definition is the first error)
            self._cdefs = self.cdefs
        self.maps: dict[str, MapInfo] = {}
        self.variables: dict[ast.Probe, dict[str, Type]] = {}
        self.errors: list[Diagnostic] = []
        self.final = False
        self.loops = 0
        self.seen_special: set[str] = set()   # BEGIN/END met in this pass
        self.pass_n = 0
        # each map's key, fixed by its first use from the second pass on (bpftrace)
        self.keys: dict[str, Type | None] = {}
        self.calls: list[str] = []       # the calls whose arguments are being typed
        self.str_param = False           # a positional parameter inside str()
        self.p: _Probe | None = None
        #: maps assigned a read of a count/sum/min/max map: name -> its type
        #: (bpftrace names it in its type mismatch messages)
        self.copies: dict[str, Type] = {}

    # -- errors ------------------------------------------------------------

    @property
    def cdefs(self) -> CDefinitions:
        """The script's C definitions (its structs, unions, enums; the kernel's
        behind): parsed on first use (a script without any that reads no
        record pays nothing for the module)."""
        if self._cdefs is None:
            from .cdefs import definitions
            self._cdefs = definitions(self.script)
        return self._cdefs
    def error(self, message: str, pos: ast.Pos, final: bool = False) -> None:
        """Record an error; ``final``: one bpftrace reports on its last pass
        only (type checks that need every map's type)."""
        if self.final or not final:
            self.errors.append(Diagnostic(message, pos, end_line=pos.end_line,
                                          filename=self.script.filename,
                                          source=self.script.source))


    if TYPE_CHECKING:     # the parts' methods the others call
        def map_keys(self, m: ast.Map) -> None: ...
        def key_of(self, m: ast.Map) -> Type | None: ...
        def map_read(self, m: ast.Map) -> Type: ...
        def call(self, c: ast.Call, assigned_to: str | None) -> Type: ...
        def copied(self, t: Type, e: ast.Expr) -> Type: ...
