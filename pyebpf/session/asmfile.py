"""Programs written as text assembly with a small header: the ``asm/`` files.

The header is a set of comment lines ``# pyebpf: DIRECTIVE ARGS`` (arguments
split like a shell does, so ``"a b"`` is one argument).  See
``asm/README.md`` for the full description; in short:

``# pyebpf: description TEXT``
    what the program does (``pyebpf run FILE --info`` shows it).
``# pyebpf: param NAME[=DEFAULT] [HELP...]``
    a placeholder: ``${NAME}`` anywhere in the file is replaced by its value
    (``pyebpf run FILE -D NAME=VALUE``).  ``${PID}`` is always defined: the
    process given with ``-p``/``-c``, or 0.
``# pyebpf: map NAME TYPE [key=T] [value=T] [entries=N] [show=HOW]``
    a map the programs refer to as ``NAME ll``.  ``TYPE``: hash, array,
    percpu_hash, percpu_array, lru_hash, perf_event_array, ringbuf,
    stack_trace.  ``T``: u8..u64, s8..s64, ``char[N]`` (a string).
    ``HOW`` -- how ``pyebpf run`` prints it at the end: ``count`` (each
    key: value, bpftrace's ``@name[key]: value``), ``hist`` (an array
    indexed by log2 bucket), ``lhist:LO:HI:STEP`` (by linear bucket), or
    ``none`` (the default).  Per-CPU values are added up.  ``entries``
    defaults to 1024 (a ``ringbuf``: 262144 bytes, a power of two and a
    multiple of the page size, at most 2 GiB); ``lhist`` has at most 1000
    buckets between LO and HI.  Every field is checked when the file is read
    (an error names ``file:line``), so a run never fails on its header.
``# pyebpf: output MAP fields=NAME:T,... [format=FMT]``
    the events a program sends to a ``perf_event_array`` or ``ringbuf``
    map: a C struct of those fields (natural alignment), printed with the
    printf-style ``FMT`` (default: the fields separated by spaces) or as
    JSON objects.
``# pyebpf: program NAME attach=PROBE [type=TYPE]``
    starts a program: the lines after it, up to the next ``program``, are its
    instructions (llvm dialect).  ``PROBE`` is a probe spec as ``pyebpf
    trace`` takes it (``uprobe:PATH:SYM``, ``uretprobe:``, ``usdt:``,
    ``tracepoint:``); ``TYPE`` defaults to what the probe needs.

In a program's body, two conveniences are expanded before assembling:

* ``.arg rD, N, rC`` -- ``rD`` = argument ``N`` of the probe, ``rC`` being
  the register that holds the context: the instructions of the probe source
  (pt_regs for uprobes, the USDT argument's location, a tracepoint's N-th
  field).  Clobbers r0-r5 and, for arguments in memory, the 64 bytes at the
  bottom of the stack (``r10 - 512`` to ``r10 - 449``).
* ``${args.NAME}`` -- the offset of field ``NAME`` in a tracepoint's record.

Line numbers are kept: a verifier complaint points at the ``.s`` line.
"""
from __future__ import annotations

import dataclasses
import re
import shlex
import time
from typing import Any, Callable, cast

from ..codecs import INT_TYPES, layout_format
from ..errors import PyebpfError, StateError
from .base import Session

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..maps import HashMap, Map, MapSpec, PerfEventArray, RingBuf
    from ..probes.sources import Source
    from ..program import Program
    from .base import AttachStep

__all__ = ["AsmFileError", "AsmFile", "MapDecl", "OutputDecl", "ProgramDecl", "Param",
           "parse_asm_file", "read_asm_file", "AsmSession", "AsmEvent"]

_MAP_TYPES = ("hash", "array", "percpu_hash", "percpu_array", "lru_hash", "perf_event_array",
              "ringbuf", "stack_trace")
_PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_.]*)\}")
#: bytes at the bottom of the stack (r10 - 512 ...) that '.arg' may use as scratch
ARG_SCRATCH = 64
_ARG_DIRECTIVE = re.compile(r"^\s*\.arg\s+(r\d{1,2})\s*,\s*(\d{1,3})\s*,\s*(r\d{1,2})\s*(?:(?:#|//).*)?$")


class AsmFileError(PyebpfError, ValueError):
    """The header of an asm file is wrong (names ``file:line``)."""

    def __init__(self, message: str, filename: str = "<string>", line: int = 0) -> None:
        self.reason = message
        self.filename = filename
        self.line = line
        super().__init__(f"{filename}:{line}: {message}" if line else f"{filename}: {message}")


@dataclasses.dataclass
class Param:
    """A ``param NAME[=DEFAULT] [HELP...]`` line: a ``${NAME}`` placeholder
    (``default`` None: the value must be given)."""

    name: str
    default: str | None
    help: str = ""


@dataclasses.dataclass
class TypeSpec:
    """``u32``, ``s64``, ``char[16]``."""

    text: str
    size: int
    code: str          # struct code: B H I Q b h i q, or "Ns" for strings

    @property
    def is_string(self) -> bool:
        """Whether this is ``char[N]`` (read as a NUL-terminated string)."""
        return self.code.endswith("s")

    def decode(self, raw: int | bytes) -> int | str:
        """A value read with :attr:`code` as shown: an int, or the text of a
        ``char[N]`` up to its first NUL (undecodable bytes replaced)."""
        if isinstance(raw, bytes):                 # (a char[N]: only those read as bytes)
            return raw.split(b"\0", 1)[0].decode(errors="replace")
        return raw


def parse_type(text: str) -> TypeSpec:
    """The :class:`TypeSpec` of ``u8``..``u64``, ``s8``..``s64`` or ``char[N]``
    (N 1..4096; case ignored); an :class:`AsmFileError` for anything else."""
    t = text.strip().lower()
    if t in INT_TYPES:
        size, _, code = INT_TYPES[t]
        return TypeSpec(t, size, code)
    m = re.fullmatch(r"char\[(\d+)\]", t)
    if m and 0 < int(m.group(1)) <= 4096:
        n = int(m.group(1))
        return TypeSpec(t, n, f"{n}s")
    raise AsmFileError(f"unknown type {text!r}: use u8..u64, s8..s64 or char[N] (N 1..4096)")


@dataclasses.dataclass
class MapDecl:
    """A ``map NAME TYPE [key=T] [value=T] [entries=N] [show=HOW]`` line
    (``line``: where it is; ``linear``: the ``(lo, hi, step)`` of
    ``show=lhist:LO:HI:STEP``)."""

    name: str
    type: str
    key: TypeSpec | None
    value: TypeSpec | None
    entries: int
    show: str = "none"
    line: int = 0
    linear: tuple[int, int, int] | None = None     # show=lhist:LO:HI:STEP

    def spec(self) -> MapSpec:
        """The :class:`~pyebpf.maps.MapSpec` of this map: every check a map
        makes before it is created (sizes, the kernel's limits), no kernel."""
        from .. import maps as M
        t = self.type
        if t in ("perf_event_array", "ringbuf", "stack_trace") and (self.key or self.value):
            raise AsmFileError(f"a {t} map takes no key= or value=")
        if t == "perf_event_array":
            return M.MapSpec(M.PerfEventArray, name=self.name)
        if t == "ringbuf":
            return M.MapSpec(M.RingBuf, self.entries, name=self.name)
        if t == "stack_trace":
            return M.MapSpec(M.StackTraceMap, self.entries, name=self.name)
        key = self.key.text if self.key and not self.key.is_string else (
            M.Bytes(self.key.size) if self.key else None)
        value = self.value.text if self.value and not self.value.is_string else (
            M.Bytes(self.value.size) if self.value else None)
        cls = {"hash": M.HashMap, "array": M.ArrayMap, "percpu_hash": M.PerCpuHashMap,
               "percpu_array": M.PerCpuArrayMap, "lru_hash": M.LruHashMap}[t]
        if t in ("array", "percpu_array"):
            if self.key is not None and self.key.size != 4:
                raise AsmFileError(f"an {t} map's key is its u32 index (key=u32), not {self.key.text}")
            return M.MapSpec(cls, value or "u64", self.entries, name=self.name)
        return M.MapSpec(cls, key or "u64", value or "u64", self.entries, name=self.name)


@dataclasses.dataclass
class OutputDecl:
    """An ``output MAP fields=NAME:T,... [format=FMT]`` line: the record the
    programs send to ``map`` and how to print it (``format`` None: the fields
    separated by spaces)."""

    map: str
    fields: list[tuple[str, TypeSpec]]
    format: str | None = None
    line: int = 0

    def struct_format(self) -> str:
        """Little-endian struct format with C alignment (and tail padding)."""
        return layout_format([(t.code, t.size, 1 if t.is_string else t.size)
                              for _, t in self.fields])[0]


@dataclasses.dataclass
class ProgramDecl:
    """A ``program NAME attach=PROBE [type=TYPE]`` line and the body after it
    (``(line, text)`` pairs, llvm-dialect assembly)."""

    name: str
    attach: str
    type: str | None
    line: int                                  # the line of the "program" directive
    body: list[tuple[int, str]] = dataclasses.field(default_factory=list)  # (line, text)


@dataclasses.dataclass
class AsmFile:
    """A parsed asm file (placeholders not yet substituted)."""

    filename: str
    text: str
    description: str = ""
    params: dict[str, Param] = dataclasses.field(default_factory=dict)
    maps: dict[str, MapDecl] = dataclasses.field(default_factory=dict)
    outputs: list[OutputDecl] = dataclasses.field(default_factory=list)
    programs: list[ProgramDecl] = dataclasses.field(default_factory=list)

    def info(self) -> str:
        """A human description: what it does, its parameters, maps and programs."""
        lines = [f"{self.filename}: {self.description or '(no description)'}"]
        if self.params:
            lines.append("parameters (-D NAME=VALUE):")
            for p in self.params.values():
                d = "required" if p.default is None else f"default {p.default!r}"
                lines.append(f"  {p.name:<12} {p.help} ({d})")
        for pr in self.programs:
            lines.append(f"program {pr.name}: attach {pr.attach}")
        for m in self.maps.values():
            lines.append(f"map {m.name}: {m.type}, {m.entries} entries, shown as {m.show}")
        return "\n".join(lines)


def _kv(args: list[str], allowed: set[str], fn: str, line: int) -> dict[str, str]:
    out: dict[str, str] = {}
    for a in args:
        k, eq, v = a.partition("=")
        if not eq or k not in allowed:
            raise AsmFileError(f"unexpected {a!r} (expected {', '.join(sorted(k + '=' for k in allowed))})",
                               fn, line)
        out[k] = v
    return out


def parse_asm_file(text: str, filename: str = "<string>", *, need_program: bool = True) -> AsmFile:
    """Parse the header and split the bodies (no substitution, no assembling).
    ``need_program=False``: a header of maps alone is accepted (``pyebpf
    explain FILE --type xdp`` loads the whole file as one program)."""
    af = AsmFile(filename, text)
    current: ProgramDecl | None = None
    for lineno, line in enumerate(text.splitlines(), 1):
        m = re.match(r"^\s*#\s*pyebpf:\s*(.*)$", line)
        if not m:
            if current is not None:
                current.body.append((lineno, line))
            continue
        raw = m.group(1).strip()
        head, _, rest = raw.partition(" ")
        if head == "description":
            af.description = (af.description + " " + rest.strip()).strip()
            continue
        if head == "param":
            name_def, _, help_text = rest.strip().partition(" ")
            name, eq, default = name_def.partition("=")
            if not name.isidentifier():
                raise AsmFileError(f"bad parameter name {name!r}", filename, lineno)
            af.params[name] = Param(name, default if eq else None, help_text.strip())
            continue
        try:
            words = shlex.split(raw)
        except ValueError as exc:
            raise AsmFileError(f"cannot split the directive: {exc}", filename, lineno) from None
        if not words:
            continue
        d, args = words[0], words[1:]
        if d == "description":
            af.description = (af.description + " " + " ".join(args)).strip()
        elif d == "param":
            if not args:
                raise AsmFileError("param needs NAME[=DEFAULT]", filename, lineno)
            name, eq, default = args[0].partition("=")
            if not name.isidentifier():
                raise AsmFileError(f"bad parameter name {name!r}", filename, lineno)
            af.params[name] = Param(name, default if eq else None, " ".join(args[1:]))
        elif d == "map":
            if len(args) < 2:
                raise AsmFileError("map needs NAME TYPE", filename, lineno)
            name, mtype = args[0], args[1].lower()
            if mtype not in _MAP_TYPES:
                raise AsmFileError(f"unknown map type {mtype!r}; one of {', '.join(_MAP_TYPES)}",
                                   filename, lineno)
            af.maps[name] = _map_decl(af, name, mtype, args[2:], filename, lineno)
        elif d == "output":
            if not args:
                raise AsmFileError("output needs the MAP", filename, lineno)
            if af.outputs:
                raise AsmFileError(f"a second output (the first is at line {af.outputs[0].line}): "
                                   "pyebpf run reads one output map", filename, lineno)
            kv = _kv(args[1:], {"fields", "format"}, filename, lineno)
            af.outputs.append(OutputDecl(args[0], _fields(kv, filename, lineno), kv.get("format"),
                                         lineno))
        elif d == "program":
            if not args:
                raise AsmFileError("program needs NAME attach=PROBE", filename, lineno)
            kv = _kv(args[1:], {"attach", "type"}, filename, lineno)
            if "attach" not in kv:
                raise AsmFileError("program needs attach=PROBE", filename, lineno)
            if not kv["attach"]:
                raise AsmFileError("program needs attach=PROBE (it is empty)", filename, lineno)
            if any(p.name == args[0] for p in af.programs):
                raise AsmFileError(f"a second program named {args[0]!r}", filename, lineno)
            if "type" in kv:
                from ..loader import prog_type_of
                try:
                    prog_type_of(kv["type"])
                except ValueError as exc:
                    raise AsmFileError(f"type={kv['type']}: {exc}", filename, lineno) from None
            current = ProgramDecl(args[0], kv["attach"], kv.get("type"), lineno)
            af.programs.append(current)
        else:
            raise AsmFileError(f"unknown directive {d!r} (description, param, map, output, "
                               "program)", filename, lineno)
    if not af.programs and need_program:
        raise AsmFileError("no '# pyebpf: program NAME attach=PROBE' line: nothing to load",
                           filename)
    for o in af.outputs:
        md = af.maps.get(o.map)
        if md is None or md.type not in ("perf_event_array", "ringbuf"):
            raise AsmFileError(f"output {o.map}: declare it as a perf_event_array or ringbuf map",
                               filename, o.line)
    return af


_MAP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,14}")
_LHIST = re.compile(r"lhist:(-?\d+):(-?\d+):(\d+)")


def _map_decl(af: AsmFile, name: str, mtype: str, args: list[str], fn: str,
              line: int) -> MapDecl:
    """A ``map`` line's declaration, every field checked (errors name ``fn:line``)."""
    if not _MAP_NAME.fullmatch(name):
        raise AsmFileError(f"map name {name!r}: 1-15 letters, digits and _ (not starting with a "
                           "digit)", fn, line)
    if name in af.maps:
        raise AsmFileError(f"a second map named {name!r} (the first is at line "
                           f"{af.maps[name].line})", fn, line)
    kv = _kv(args, {"key", "value", "entries", "show"}, fn, line)
    try:
        key = parse_type(kv["key"]) if "key" in kv else None
        value = parse_type(kv["value"]) if "value" in kv else None
    except AsmFileError as exc:
        raise AsmFileError(exc.reason, fn, line) from None
    text = kv.get("entries")
    if text is None:
        entries = 256 * 1024 if mtype == "ringbuf" else 1024
    else:
        entries = _integer(text, f"entries={text}", fn, line)
        if mtype == "perf_event_array":
            raise AsmFileError("a perf_event_array has one slot per CPU: drop entries=", fn, line)
    show = kv.get("show", "none")
    linear = None
    m = _LHIST.fullmatch(show)
    if m:
        from ..draw.buckets import linear_buckets
        linear = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
        try:
            linear_buckets(*linear)
        except PyebpfError as exc:
            raise AsmFileError(f"show={show}: {exc}", fn, line) from None
    elif show not in ("none", "count", "hist"):
        raise AsmFileError(f"show={show}: one of none, count, hist, lhist:LO:HI:STEP", fn, line)
    if show != "none" and mtype not in ("hash", "array", "percpu_hash", "percpu_array",
                                        "lru_hash"):
        raise AsmFileError(f"show={show}: a {mtype} map holds no values to show", fn, line)
    decl = MapDecl(name, mtype, key, value, entries, show, line, linear)
    try:
        decl.spec()
    except PyebpfError as exc:
        raise AsmFileError(f"map {name}: {getattr(exc, 'reason', None) or exc}", fn,
                           line) from None
    return decl


def _integer(text: str, what: str, fn: str, line: int) -> int:
    if len(text) > 24:
        raise AsmFileError(f"{what[:40]}...: the number is too long", fn, line)
    try:
        return int(text, 0)
    except ValueError:
        raise AsmFileError(f"{what}: not an integer (decimal without a leading 0, or 0x...)",
                           fn, line) from None


def _fields(kv: dict[str, str], fn: str, line: int) -> list[tuple[str, TypeSpec]]:
    """The ``fields=NAME:T,...`` of an ``output`` line, checked."""
    if not kv.get("fields"):
        raise AsmFileError("output needs fields=NAME:TYPE,...", fn, line)
    fields: list[tuple[str, TypeSpec]] = []
    for f in kv["fields"].split(","):
        fname, colon, ftype = f.partition(":")
        fname = fname.strip()
        if not colon or not fname.isidentifier():
            raise AsmFileError(f"field {f!r} is NAME:TYPE (NAME an identifier)", fn, line)
        if any(n == fname for n, _ in fields):
            raise AsmFileError(f"field {fname!r} appears twice", fn, line)
        try:
            fields.append((fname, parse_type(ftype)))
        except AsmFileError as exc:
            raise AsmFileError(f"field {fname}: {exc.reason}", fn, line) from None
    fmt = kv.get("format")
    if fmt is not None:
        from ..draw.render import printf_specs, unescape
        n = len(printf_specs(unescape(fmt)))
        if n != len(fields):
            raise AsmFileError(f"format={fmt!r} has {n} conversion(s) but there are "
                               f"{len(fields)} field(s)", fn, line)
    return fields


def read_asm_file(path: str) -> AsmFile:
    """Read and parse an asm file (every header field checked, errors name
    ``file:line``)."""
    with open(path, encoding="utf-8") as f:
        try:
            text = f.read()
        except UnicodeDecodeError as exc:
            raise AsmFileError(f"not UTF-8 text (byte {exc.start})", path) from None
    return parse_asm_file(text, path)


def substitute(text: str, values: dict[str, str], filename: str, line: int,
               extra: Callable[[str], object] | None = None) -> str:
    """Replace ``${NAME}`` (and ``${args.X}`` through ``extra(name)``)."""
    def rep(m: "re.Match[str]") -> str:
        name = m.group(1)
        if name in values:
            return values[name]
        if extra is not None and name.startswith("args."):
            return str(extra(name[5:]))
        raise AsmFileError(f"${{{name}}} is not defined (parameters: "
                           f"{', '.join(sorted(values)) or 'none'})", filename, line)
    return _PLACEHOLDER.sub(rep, text)


class AsmSession(Session):
    """An asm file loaded and attached: its maps, programs, links and reader
    (a :class:`~pyebpf.session.base.Session`).

    Args:
        af: the parsed file.
        values: parameter values (defaults filled in; missing required ones
            raise :class:`AsmFileError`).
        pid: the traced process (``${PID}``, and the uprobes'/USDT pid).
        unsafe: let uprobes go on addresses not proven to start an instruction.
        attach: False to load only (then :meth:`attach`).
    """

    def __init__(self, af: AsmFile, values: dict[str, str] | None = None,
                 pid: int | None = None, unsafe: bool = False, *, attach: bool = True) -> None:
        super().__init__()
        self.af = af
        self.unsafe = unsafe
        self.maps: dict[str, Map] = {}
        self.output: OutputDecl | None = None
        self._steps: list[tuple[Source, bool, int | None]] = []   # (source, is entry, pid)
        vals = {}
        for p in af.params.values():
            if p.default is not None:
                vals[p.name] = p.default
        vals.update(values or {})
        unknown = set(values or {}) - set(af.params) - {"PID"}
        if unknown:
            raise AsmFileError(f"unknown parameter(s) {', '.join(sorted(unknown))}; this file "
                               f"has: {', '.join(af.params) or 'none'}", af.filename)
        missing = [p for p in af.params if p not in vals]
        if missing:
            raise AsmFileError(f"parameter(s) {', '.join(missing)} have no default: give "
                               f"-D {missing[0]}=VALUE", af.filename)
        vals.setdefault("PID", str(pid or 0))
        self.values = vals
        t0 = time.perf_counter()
        try:
            self._make_maps()
            self._load_all(pid)
        except BaseException:
            self.close()
            raise
        self.attach_seconds = time.perf_counter() - t0
        if attach:
            self.attach()

    # ------------------------------------------------------------ setup
    def _make_maps(self) -> None:
        for d in self.af.maps.values():
            self.maps[d.name] = d.spec().create()
        for o in self.af.outputs:
            from ..events import PerfBuffer, RingBufferReader
            fmt = o.struct_format()
            m = self.maps[o.map]
            self.output = o
            if self.af.maps[o.map].type == "ringbuf":
                self.reader = RingBufferReader(cast("RingBuf", m), decode=fmt,
                                               on_lost=self._on_lost)
            else:
                self.reader = PerfBuffer(cast("PerfEventArray", m), decode=fmt,
                                         on_lost=self._on_lost)

    def _source(self, pd: ProgramDecl, attach: str, pid: int | None) -> Source:
        from ..probes.sources import probe_source
        try:
            return probe_source(attach, pid, unsafe=self.unsafe)
        except PyebpfError as exc:
            raise AsmFileError(f"program {pd.name}: {exc}", self.af.filename, pd.line) from None

    def _load_all(self, pid: int | None) -> None:
        from ..loader import load
        from ..text import assemble
        af = self.af
        nlines = len(af.text.splitlines())
        built: list[tuple[ProgramDecl, Source, Program]] = []
        for pd in af.programs:
            attach = substitute(pd.attach, self.values, af.filename, pd.line)
            src = self._source(pd, attach, pid)
            extra = getattr(src, "field", None)
            lines = [""] * nlines
            for lineno, text in pd.body:
                text = substitute(text, self.values, af.filename, lineno,
                                  (lambda n: extra(n).offset) if extra else None)
                m = _ARG_DIRECTIVE.match(text)
                if m:
                    text = self._expand_arg(src, m, af.filename, lineno)
                lines[lineno - 1] = text
            prog = assemble("\n".join(lines), "llvm", af.filename)
            prog.name = pd.name[:15]
            built.append((pd, src, prog))
        for pd, src, prog in built:
            opts = dict(src.load_options)
            ptype = opts.pop("prog_type", src.prog_type)
            if pd.type:
                from ..loader import prog_type_of
                ptype = prog_type_of(pd.type)
            self.loaded.append(load(prog, ptype, maps=self.maps, **opts))
            spec = getattr(src, "spec", None)
            kind = getattr(src, "kind", "usdt")
            self._steps.append((src, spec is None or spec.kind != "uretprobe",
                                pid if kind != "tracepoint" else None))

    def _attach_steps(self) -> list[AttachStep]:
        # return probes first, so an entry always finds its return attached
        order = sorted(range(len(self._steps)), key=lambda i: self._steps[i][1])
        return [(self._steps[i][0], self.loaded[i], self._steps[i][2]) for i in order]

    @staticmethod
    def _expand_arg(src: Source, m: "re.Match[str]", fn: str, line: int) -> str:
        from ..program import Program, Reg
        from ..text import format_insn
        dst, n, ctx = int(m.group(1)[1:]), int(m.group(2)), int(m.group(3)[1:])
        if not (0 <= dst <= 9 and 0 <= ctx <= 9):
            raise AsmFileError(".arg takes registers r0-r9", fn, line)
        p = Program("arg")
        p.stack.alloc(512 - ARG_SCRATCH)      # scratch only at the bottom of the frame
        try:
            src.emit_arg(p, Reg(dst), n, Reg(ctx))
        except PyebpfError as exc:
            raise AsmFileError(f".arg: {exc}", fn, line) from None
        return "; ".join(format_insn(i, "llvm") for i in p.finalize())

    # ------------------------------------------------------------ output
    def read_events(self, timeout: float | None = 0) -> list[AsmEvent]:
        """Wait up to ``timeout`` seconds (0: not at all; None: until some
        come) and return the decoded events of the ``output`` map (none
        without one)."""
        if self.reader is None:
            return []
        o = self.output
        assert o is not None
        out = []
        for rec in self.reader.read_batch(timeout):
            values = [t.decode(v) for (_, t), v in zip(o.fields, rec)]
            out.append(AsmEvent(o, values))
        return out

    def aggregation_names(self) -> list[str]:
        """The names of the maps declared with ``show=``."""
        return [d.name for d in self.aggregates]

    def results(self, *, clear: bool = False) -> dict[str, Any]:
        """The contents of the maps declared with ``show=``, by name (see
        :meth:`map_data`).  ``clear=True`` is refused (a
        :class:`~pyebpf.errors.StateError`): an asm file's maps are its own."""
        if clear:
            raise StateError("the maps of an asm file cannot be cleared by pyebpf")
        return {d.name: self.map_data(d) for d in self.aggregates}

    def raw_results(self) -> dict[str, Any]:
        """Each shown map's contents as read, undecoded (see :meth:`Session.raw_results`)."""
        out: dict[str, Any] = {}
        for d in self.aggregates:
            try:
                out[d.name] = dict(cast("HashMap[Any, Any]", self.maps[d.name]).items())
            except Exception as exc:       # nothing left to print for this one
                out[d.name] = f"<unreadable: {type(exc).__name__}: {exc}>"
        return out

    def format_text(self, results: dict[str, Any] | None = None) -> str:
        """The maps declared with ``show=`` (or those of ``results``) in
        bpftrace's format, by name."""
        from ..draw.render import format_count, format_hist
        res = self.results() if results is None else results
        chunks = []
        for name in sorted(res):
            d = self.af.maps[name]
            data = res[name]
            if d.show == "count":
                text = format_count(name, data)
                chunks.append(text + "\n" if text else "")
            else:
                chunks.append(format_hist(name, data, linear=d.linear))
        return "".join(chunks)

    def map_data(self, d: MapDecl) -> dict[int | str, int]:
        """What map ``d`` holds, as printed: ``{key: value}`` with per-CPU
        values added up, ``char[N]`` keys as text, zero values left out."""
        m = cast("HashMap[Any, Any]", self.maps[d.name])
        percpu = d.type.startswith("percpu")
        out: dict[int | str, int] = {}
        for k, v in m.items():
            if percpu:
                v = sum(v)
            if d.key is not None and d.key.is_string:
                k = d.key.decode(k)
            if d.show != "count" and not v:
                continue
            out[k] = v
        if d.show == "count":
            out = {k: v for k, v in out.items() if v}
        return out

    def json_objects(self, results: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """The maps declared with ``show=`` (or those of ``results``) as
        bpftrace's JSON objects (``{"type": "map"|"hist", "data": {"@name": ...}}``),
        by name."""
        from ..draw.buckets import linear_bucket_range, log2_bucket_range
        from ..draw.render import hist_json
        res = self.results() if results is None else results
        objs: list[dict[str, Any]] = []
        for name in sorted(res):
            d = self.af.maps[name]
            data = res[name]
            if d.show == "count":
                objs.append({"type": "map", "data": {"@" + name: {str(k): v for k, v in data.items()}}})
            else:
                lin = d.linear
                rng: Callable[[int], tuple[int | None, int | None]]
                if lin is None:
                    rng = log2_bucket_range
                else:
                    def rng(b: int, lin: tuple[int, int, int] = lin
                            ) -> tuple[int | None, int | None]:
                        return linear_bucket_range(b, *lin)
                buckets = cast("dict[int, int]", data)     # a histogram's keys are buckets
                objs.append({"type": "hist", "data": {"@" + name: hist_json(buckets, rng)}})
        return objs

    @property
    def aggregates(self) -> list[MapDecl]:
        """The maps declared with ``show=`` (what is printed at the end)."""
        return [d for d in self.af.maps.values() if d.show != "none"]

    # ------------------------------------------------------------ lifetime
    def _close_maps(self) -> None:
        for m in self.maps.values():
            try:
                m.close()
            except Exception:
                pass


class AsmEvent:
    """An event of an asm program's output (the shape :func:`live.run_loop` prints):
    ``fields`` by name, the printed ``line``, the output ``map``'s name."""

    def __init__(self, o: OutputDecl, values: list[int | str]) -> None:
        from ..draw.render import format_printf, unescape
        self.fields = {name: v for (name, _), v in zip(o.fields, values)}
        if o.format is not None:
            fmt = unescape(o.format)
            self.line = format_printf(fmt if fmt.endswith("\n") else fmt + "\n", values)
        else:
            self.line = " ".join(str(v) for v in values) + "\n"
        self.map = o.map

    def to_json(self) -> dict[str, Any]:
        """The event as a JSON object: ``{"type": "event", "output": MAP, "fields": {...}}``."""
        return {"type": "event", "output": self.map, "fields": self.fields}
