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
    ``none`` (the default).  Per-CPU values are added up.
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
import struct
from typing import Any

from ..errors import PyebpfError

__all__ = ["AsmFileError", "AsmFile", "MapDecl", "OutputDecl", "ProgramDecl", "Param",
           "parse_asm_file", "read_asm_file", "AsmSession"]

_MAP_TYPES = ("hash", "array", "percpu_hash", "percpu_array", "lru_hash", "perf_event_array",
              "ringbuf", "stack_trace")
_INTS = {"u8": "B", "u16": "H", "u32": "I", "u64": "Q", "s8": "b", "s16": "h", "s32": "i",
         "s64": "q"}
_PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_.]*)\}")
#: bytes at the bottom of the stack (r10 - 512 ...) that '.arg' may use as scratch
ARG_SCRATCH = 64
_ARG_DIRECTIVE = re.compile(r"^\s*\.arg\s+(r\d+)\s*,\s*(\d+)\s*,\s*(r\d+)\s*(?:(?:#|//).*)?$")


class AsmFileError(PyebpfError, ValueError):
    """The header of an asm file is wrong (names ``file:line``)."""

    def __init__(self, message: str, filename: str = "<string>", line: int = 0) -> None:
        self.reason = message
        self.filename = filename
        self.line = line
        super().__init__(f"{filename}:{line}: {message}" if line else f"{filename}: {message}")


@dataclasses.dataclass
class Param:
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
        return self.code.endswith("s")

    def decode(self, raw: Any) -> Any:
        if self.is_string:
            return raw.split(b"\0", 1)[0].decode(errors="replace")
        return raw


def parse_type(text: str) -> TypeSpec:
    t = text.strip().lower()
    if t in _INTS:
        return TypeSpec(t, struct.calcsize("<" + _INTS[t]), _INTS[t])
    m = re.fullmatch(r"char\[(\d+)\]", t)
    if m and 0 < int(m.group(1)) <= 4096:
        n = int(m.group(1))
        return TypeSpec(t, n, f"{n}s")
    raise ValueError(f"unknown type {text!r}: use u8..u64, s8..s64 or char[N]")


@dataclasses.dataclass
class MapDecl:
    name: str
    type: str
    key: TypeSpec | None
    value: TypeSpec | None
    entries: int
    show: str = "none"
    line: int = 0

    @property
    def linear(self) -> tuple[int, int, int] | None:
        if self.show.startswith("lhist:"):
            lo, hi, step = (int(x, 0) for x in self.show.split(":")[1:])
            return lo, hi, step
        return None


@dataclasses.dataclass
class OutputDecl:
    map: str
    fields: list[tuple[str, TypeSpec]]
    format: str | None = None
    line: int = 0

    def struct_format(self) -> str:
        """Little-endian struct format with C alignment (and tail padding)."""
        fmt, pos, align = "<", 0, 1
        for _, t in self.fields:
            a = 1 if t.is_string else t.size
            align = max(align, a)
            pad = (-pos) % a
            if pad:
                fmt += f"{pad}x"
                pos += pad
            fmt += t.code
            pos += t.size
        pad = (-pos) % align
        return fmt + (f"{pad}x" if pad else "")


@dataclasses.dataclass
class ProgramDecl:
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
    out = {}
    for a in args:
        k, eq, v = a.partition("=")
        if not eq or k not in allowed:
            raise AsmFileError(f"unexpected {a!r} (expected {', '.join(sorted(k + '=' for k in allowed))})",
                               fn, line)
        out[k] = v
    return out


def parse_asm_file(text: str, filename: str = "<string>") -> AsmFile:
    """Parse the header and split the bodies (no substitution, no assembling)."""
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
            kv = _kv(args[2:], {"key", "value", "entries", "show"}, filename, lineno)
            try:
                key = parse_type(kv["key"]) if "key" in kv else None
                value = parse_type(kv["value"]) if "value" in kv else None
                entries = int(kv.get("entries", "1024"), 0)
            except ValueError as exc:
                raise AsmFileError(str(exc), filename, lineno) from None
            show = kv.get("show", "none")
            if not (show in ("none", "count", "hist") or re.fullmatch(r"lhist:-?\d+:-?\d+:\d+", show)):
                raise AsmFileError(f"show={show}: one of none, count, hist, lhist:LO:HI:STEP",
                                   filename, lineno)
            af.maps[name] = MapDecl(name, mtype, key, value, entries, show, lineno)
        elif d == "output":
            if not args:
                raise AsmFileError("output needs the MAP", filename, lineno)
            kv = _kv(args[1:], {"fields", "format"}, filename, lineno)
            fields = []
            try:
                for f in kv.get("fields", "").split(","):
                    fname, colon, ftype = f.partition(":")
                    if not colon:
                        raise ValueError(f"field {f!r} is NAME:TYPE")
                    fields.append((fname.strip(), parse_type(ftype)))
            except ValueError as exc:
                raise AsmFileError(str(exc), filename, lineno) from None
            af.outputs.append(OutputDecl(args[0], fields, kv.get("format"), lineno))
        elif d == "program":
            if not args:
                raise AsmFileError("program needs NAME attach=PROBE", filename, lineno)
            kv = _kv(args[1:], {"attach", "type"}, filename, lineno)
            if "attach" not in kv:
                raise AsmFileError("program needs attach=PROBE", filename, lineno)
            current = ProgramDecl(args[0], kv["attach"], kv.get("type"), lineno)
            af.programs.append(current)
        else:
            raise AsmFileError(f"unknown directive {d!r} (description, param, map, output, "
                               "program)", filename, lineno)
    if not af.programs:
        raise AsmFileError("no '# pyebpf: program NAME attach=PROBE' line: nothing to load",
                           filename)
    for o in af.outputs:
        md = af.maps.get(o.map)
        if md is None or md.type not in ("perf_event_array", "ringbuf"):
            raise AsmFileError(f"output {o.map}: declare it as a perf_event_array or ringbuf map",
                               filename, o.line)
    return af


def read_asm_file(path: str) -> AsmFile:
    with open(path, encoding="utf-8") as f:
        return parse_asm_file(f.read(), path)


def substitute(text: str, values: dict[str, str], filename: str, line: int,
               extra: Any = None) -> str:
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


class AsmSession:
    """An asm file loaded and attached: its maps, programs, links and reader.

    Args:
        af: the parsed file.
        values: parameter values (defaults filled in; missing required ones
            raise :class:`AsmFileError`).
        pid: the traced process (``${PID}``, and the uprobes'/USDT pid).
    """

    def __init__(self, af: AsmFile, values: dict[str, str] | None = None,
                 pid: int | None = None) -> None:
        self.af = af
        self.maps: dict[str, Any] = {}
        self.loaded: list[Any] = []
        self.links: list[Any] = []
        self.reader: Any = None
        self.output: OutputDecl | None = None
        self.lost = 0
        self._closed = False
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
        try:
            self._make_maps()
            self._load_all(pid)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------ setup
    def _make_maps(self) -> None:
        from .. import maps as M
        for d in self.af.maps.values():
            key = d.key.text if d.key and not d.key.is_string else (
                M.Bytes(d.key.size) if d.key else None)
            value = d.value.text if d.value and not d.value.is_string else (
                M.Bytes(d.value.size) if d.value else None)
            t = d.type
            if t == "perf_event_array":
                m = M.PerfEventArray(name=d.name)
            elif t == "ringbuf":
                m = M.RingBuf(d.entries if d.entries >= 4096 else 256 * 1024, name=d.name)
            elif t == "stack_trace":
                m = M.StackTraceMap(d.entries, name=d.name)
            else:
                cls = {"hash": M.HashMap, "array": M.ArrayMap, "percpu_hash": M.PerCpuHashMap,
                       "percpu_array": M.PerCpuArrayMap, "lru_hash": M.LruHashMap}[t]
                if t in ("array", "percpu_array"):
                    m = cls(value or "u64", d.entries, name=d.name)
                else:
                    m = cls(key or "u64", value or "u64", d.entries, name=d.name)
            self.maps[d.name] = m
        for o in self.af.outputs:
            from ..events import PerfBuffer, RingBufferReader
            if self.reader is not None:
                raise AsmFileError("pyebpf run reads one output map", self.af.filename, o.line)
            fmt = o.struct_format()
            m = self.maps[o.map]
            self.output = o
            if self.af.maps[o.map].type == "ringbuf":
                self.reader = RingBufferReader(m, decode=fmt, on_lost=self._on_lost)
            else:
                self.reader = PerfBuffer(m, decode=fmt, on_lost=self._on_lost)

    def _on_lost(self, cpu: int, n: int) -> None:
        self.lost += n

    def _source(self, pd: ProgramDecl, attach: str, pid: int | None) -> Any:
        from .probes import probe_source
        try:
            return probe_source(attach, pid)
        except PyebpfError as exc:
            raise AsmFileError(f"program {pd.name}: {exc}", self.af.filename, pd.line) from None

    def _load_all(self, pid: int | None) -> None:
        from ..loader import load
        from ..text import assemble
        af = self.af
        nlines = len(af.text.splitlines())
        built = []
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
        # return probes first, so an entry always finds its return attached
        order = sorted(range(len(built)), key=lambda i: built[i][1].spec.kind != "uretprobe"
                       if hasattr(built[i][1], "spec") else True)
        for i in order:
            pd, src, _ = built[i]
            kind = getattr(src, "kind", "usdt")
            self.links.append(src.attach(self.loaded[i], pid=pid if kind != "tracepoint" else None))

    @staticmethod
    def _expand_arg(src: Any, m: "re.Match[str]", fn: str, line: int) -> str:
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
    def read_events(self, timeout: float | None = 0) -> list[Any]:
        if self.reader is None:
            return []
        o = self.output
        assert o is not None
        out = []
        for rec in self.reader.read_batch(timeout):
            values = [t.decode(v) for (_, t), v in zip(o.fields, rec)]
            out.append(_AsmEvent(o, values))
        return out

    def results(self) -> dict[str, Any]:
        """The contents of the maps declared with ``show=``, by name (see :meth:`map_data`)."""
        return {d.name: self.map_data(d) for d in self.aggregates}

    def format_text(self, results: dict[str, Any] | None = None) -> str:
        """The maps declared with ``show=`` (or those of ``results``) in
        bpftrace's format, by name."""
        from .render import format_count, format_hist
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

    def map_data(self, d: MapDecl) -> Any:
        m = self.maps[d.name]
        percpu = d.type.startswith("percpu")
        out = {}
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

    def json_objects(self, results: dict[str, Any] | None = None) -> list[dict]:
        """The maps declared with ``show=`` (or those of ``results``) as JSON objects."""
        from .aggregate import log2_bucket_range
        from .render import hist_json
        res = self.results() if results is None else results
        objs = []
        for name in sorted(res):
            d = self.af.maps[name]
            data = res[name]
            if d.show == "count":
                objs.append({"type": "map", "data": {"@" + name: {str(k): v for k, v in data.items()}}})
            else:
                lin = d.linear
                if lin is None:
                    rng = log2_bucket_range
                else:
                    lo, hi, step = lin
                    nb = (hi - lo + step - 1) // step + 2

                    def rng(b: int, lo=lo, hi=hi, step=step, nb=nb) -> tuple:
                        if b == 0:
                            return None, lo
                        if b == nb - 1:
                            return hi, None
                        s = lo + (b - 1) * step
                        return s, min(s + step, hi)
                objs.append({"type": "hist", "data": {"@" + name: hist_json(data, rng)}})
        return objs

    @property
    def aggregates(self) -> list:
        return [d for d in self.af.maps.values() if d.show != "none"]

    # ------------------------------------------------------------ lifetime
    def detach(self) -> None:
        for link in self.links:
            link.detach()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for x in self.links + self.loaded:
            try:
                x.close()
            except Exception:
                pass
        if self.reader is not None:
            try:
                self.lost = max(self.lost, self.reader.lost)
            except Exception:
                pass
            self.reader.close()
        for m in self.maps.values():
            try:
                m.close()
            except Exception:
                pass

    def __enter__(self) -> "AsmSession":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class _AsmEvent:
    """An event of an asm program's output (the shape :func:`live.run_loop` prints)."""

    def __init__(self, o: OutputDecl, values: list[Any]) -> None:
        from .render import format_printf, unescape
        self.fields = {name: v for (name, _), v in zip(o.fields, values)}
        if o.format is not None:
            fmt = unescape(o.format)
            self.line = format_printf(fmt if fmt.endswith("\n") else fmt + "\n", values)
        else:
            self.line = " ".join(str(v) for v in values) + "\n"
        self.map = o.map

    def to_json(self) -> dict:
        return {"type": "event", "output": self.map, "fields": self.fields}
