"""Printing as bpftrace 0.17 prints: ``printf``, ``print()`` of values,
``time()``, as text and as ``-f json`` lines. Pure: no kernel, no I/O.

Values come in as Python values (:func:`decode` turns the bytes of a map key,
a map value or an event record into one), typed by the language's
:class:`~pyebpf.lang.types.Type`:

================  ==========================================================
``int``           an ``int`` (its sign as the type says)
``string``        a ``str`` (bytes up to the first NUL; bytes that are not
                  UTF-8 kept as surrogates: write with ``surrogateescape``)
``buffer``        ``bytes``
``tuple``         a ``tuple`` of the element values
``ustack`` ...    its frames (see :func:`format_stack`), or what the
                  ``stacks`` callable turns into them (a stack id)
``usym``/``ksym`` an address (``int``), named by the ``syms`` callable
``inet``          ``bytes`` (4 or 16) or an already printed ``str``
``timestamp``     ``(format, nsecs since boot)`` or an already printed ``str``
``username``      a uid (``int``) or a name (``str``)
``probe``         the probe's name (``str``)
count/sum/min/max an ``int``
avg, stats        ``(count, total)``
hist, lhist       ``{bucket: count}``: bucket 0 below the range, then
                  log2 buckets (1: ``[0]``, 2: ``[1]``, 3: ``[2, 4)``...:
                  :func:`pyebpf.draw.buckets.log2_bucket`) or the
                  ``lhist`` steps, the last one ``[max, ...)``
                  (:func:`~pyebpf.lang.output_maps.lhist_bucket`)
================  ==========================================================

Maps are printed by :mod:`pyebpf.lang.output_maps` (with these values).

What bpftrace does, and this module with it:

- a 64-bit integer in a map key prints signed, whatever its type
  (``@k[(uint64)-1]`` is ``@k[-1]``); narrower ones as their type says.
- ``printf`` is C's: without a length modifier ``%d %u %x %X %o`` read 32
  bits (``%hd`` 16, ``%hhd`` 8, ``%ld %lld %zd %jd`` 64), ``%s`` a string,
  ``%c`` a byte, ``%p`` an address (``(nil)`` for 0), ``%r`` a buffer as
  ``\\xNN`` escapes; flags ``-`` and a ``0``-prefixed width, precision.
"""
from __future__ import annotations

import os

from ..errors import PyebpfError
from .types import Type

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence
    from typing import Any

    #: a stack's frames ``(address, symbol+offset | None, module | None)``
    #: from its value (a stack id...) and type
    StackFormatter = Callable[[Any, Type], Sequence[tuple[int, str | None, str | None]]]
    #: an address's symbol from (address, type) (usym/ksym)
    SymFormatter = Callable[[int, Type], str]

__all__ = ["format_printf", "printf_conversions", "decode", "format_value", "format_stack",
           "tuple_offsets", "json_printf", "json_value", "json_time", "format_time",
           "format_strftime", "format_buffer", "attaching_text", "json_attached", "json_join",
           "json_helper_error", "OutputError", "PRINTF_SPEC"]


class OutputError(PyebpfError, ValueError):
    """A value that cannot be printed with its format or type (a printf with
    fewer values than conversions, a value of the wrong shape)."""


#: a printf conversion as bpftrace 0.17 recognises it: ``-``, a width (``0``
#: first: zero padding), a precision, a length modifier, a conversion.
#: (no ``+``, space or ``#`` flag; no ``%i``, no floats.)
PRINTF_SPEC = (r"%(?P<minus>-?)(?P<width>[0-9]*)(?:\.(?P<prec>[0-9]*))?"
               r"(?P<len>hh|h|ll|l|j|z|t)?(?P<conv>[duxXocsp]|r[xh]?)")
_INT_CONVS = frozenset("duxXo")
_MASK64 = (1 << 64) - 1


_LENGTHS = ("hh", "h", "ll", "l", "j", "z", "t")
_CONVS = frozenset("duxXocspr")
_DIGITS = frozenset("0123456789")


class _Spec:
    """One conversion of a printf format: the groups of :data:`PRINTF_SPEC`
    (``prec``/``len`` None when absent)."""

    __slots__ = ("minus", "width", "prec", "len", "conv")

    def __init__(self, minus: str, width: str, prec: str | None, length: str | None,
                 conv: str) -> None:
        self.minus, self.width, self.prec, self.len, self.conv = minus, width, prec, length, conv


def _printf_specs(fmt: str) -> Iterator[tuple[int, int, _Spec | None]]:
    """``(start, end, spec)`` of each conversion of ``fmt`` in order, spec
    None for ``%%``: what ``re.finditer(PRINTF_SPEC + "|%%", fmt)`` finds,
    scanned by hand (``re``, with the ``enum`` it imports, would cost the
    first printed event of every ``pyebpf bt`` run ~4 ms)."""
    n = len(fmt)
    i = fmt.find("%")
    while i >= 0:
        j = i + 1
        minus = "-" if fmt.startswith("-", j) else ""
        j += len(minus)
        k = j
        while k < n and fmt[k] in _DIGITS:
            k += 1
        width, j = fmt[j:k], k
        prec = None
        if fmt.startswith(".", j):
            k = j = j + 1
            while k < n and fmt[k] in _DIGITS:
                k += 1
            prec, j = fmt[j:k], k
        length = next((ln for ln in _LENGTHS if fmt.startswith(ln, j)
                       and j + len(ln) < n and fmt[j + len(ln)] in _CONVS), None)
        j += len(length or "")
        if j < n and fmt[j] in _CONVS:
            conv = fmt[j]
            if conv == "r" and fmt.startswith(("x", "h"), j + 1):    # %rx, %rh: in hex
                conv, j = fmt[j:j + 2], j + 1
            yield i, j + 1, _Spec(minus, width, prec, length, conv)
            i = fmt.find("%", j + 1)
        elif fmt.startswith("%", i + 1):
            yield i, i + 2, None
            i = fmt.find("%", i + 2)
        else:
            i = fmt.find("%", i + 1)


def printf_conversions(fmt: str) -> list[str]:
    """The conversion characters of ``fmt`` that take a value, in order (``%%``
    and what bpftrace does not recognise excluded): what a semantic pass
    checks the arguments against."""
    return [spec.conv for _, _, spec in _printf_specs(fmt) if spec is not None]


# ================================================================ values
def _signed(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def _text(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")


def decode(t: Type, raw: bytes) -> object:
    """The Python value of ``raw``, the bytes of a value of type ``t`` as
    stored in a map key, a map value or an event record (little-endian,
    tuples laid out as C lays out a struct of their elements).

    Integers of every size get their sign; strings stop at their first NUL;
    a buffer stays bytes; a stack id, symbol address, uid or probe index
    stays an int (``stacks``/``syms`` name them when printed); ``inet``
    gives its 4 or 16 address bytes; count/sum/min/max are 8-byte integers
    (sum/min/max signed as ``t.signed``); avg/stats are ``(count, total)``
    from two 8-byte words ``total, count``."""
    k = t.kind
    if k == "int":
        v = int.from_bytes(raw[:t.size], "little", signed=t.signed)
        return v
    if k == "string":
        return _text(raw[:t.size] if t.size else raw)
    if k == "buffer":
        return bytes(raw[:t.size] if t.size else raw)
    if k == "tuple":
        out = []
        for elem, off in zip(t.elems, tuple_offsets(t)):
            out.append(decode(elem, raw[off:off + _size(elem)]))
        return tuple(out)
    if k == "inet":
        family = int.from_bytes(raw[:8], "little") if len(raw) >= 24 else 0
        addr = raw[8:24] if len(raw) >= 24 else raw
        return bytes(addr[:4]) if family == 2 else bytes(addr)
    if k in ("count", "sum", "min", "max"):
        return int.from_bytes(raw[:8], "little", signed=k != "count" and t.signed)
    if k in ("avg", "stats"):
        total = int.from_bytes(raw[:8], "little", signed=True)
        count = int.from_bytes(raw[8:16], "little")
        return (count, total)
    return int.from_bytes(raw[:8], "little")


def _size(t: Type) -> int:
    if t.kind == "tuple":
        offs = tuple_offsets(t)
        if not t.elems:
            return 0
        end = offs[-1] + _size(t.elems[-1])
        align = max(_align(e) for e in t.elems)
        return (end + align - 1) // align * align
    return t.size or 8


def _align(t: Type) -> int:
    if t.kind == "tuple":
        return max((_align(e) for e in t.elems), default=1)
    if t.kind == "int":
        return t.size
    if t.kind in ("string", "buffer"):
        return 1
    return 8


def tuple_offsets(t: Type) -> list[int]:
    """The offset of each element of tuple type ``t`` (C struct layout: each
    element aligned to its own alignment, strings and buffers to 1)."""
    offs, pos = [], 0
    for e in t.elems:
        a = _align(e)
        pos = (pos + a - 1) // a * a
        offs.append(pos)
        pos += _size(e)
    return offs


def format_buffer(data: bytes) -> str:
    """A ``buf()`` as bpftrace prints it: printable ASCII as is, every other
    byte as ``\\xNN``."""
    return "".join(chr(b) if 32 <= b < 127 else f"\\x{b:02x}" for b in data)


def _inet_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    import socket
    raw = bytes(value)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw)
    if len(raw) == 16:
        return socket.inet_ntop(socket.AF_INET6, raw)
    raise OutputError(f"an inet address is 4 or 16 bytes, not {len(raw)}")


def _username(value: Any) -> str:
    if isinstance(value, str):
        return value
    import pwd
    try:
        return pwd.getpwuid(int(value)).pw_name
    except KeyError:
        return str(value)


def cgroup_path_text(cgroup_id: int, pattern: str = "*") -> str:
    """cgroup_path(): ``name:/path`` in each mounted cgroup hierarchy whose
    name matches ``pattern`` (``unified`` for cgroup2, else its
    controllers) and where a cgroup has inode ``cgroup_id``; ``unified``
    first, the others by name, joined by commas (bpftrace 0.17's text)."""
    import fnmatch
    import os
    found = []
    try:
        with open("/proc/self/mountinfo") as f:
            mounts = [line.split() for line in f]
    except OSError:
        mounts = []
    for fields in mounts:
        if "-" not in fields:
            continue
        sep = fields.index("-")
        fstype, opts = fields[sep + 1], fields[sep + 3] if len(fields) > sep + 3 else ""
        if fstype == "cgroup2":
            name = "unified"
        elif fstype == "cgroup":
            name = ",".join(o.removeprefix("name=") for o in opts.split(",")
                            if o not in ("rw", "ro") and "=" not in o or o.startswith("name="))
        else:
            continue
        if not fnmatch.fnmatchcase(name, pattern):
            continue
        root = fields[4]
        for top, dirs, _ in os.walk(root):
            if os.stat(top).st_ino == cgroup_id:
                found.append((name != "unified", name, "/" + os.path.relpath(top, root)
                              .removeprefix(".")))
                break
    return ",".join(f"{name}:{path}" for _, name, path in sorted(found))


def format_stack(frames: Iterable[tuple[int, str | None, str | None]], mode: str = "bpftrace",
                 indent: int = 8, kernel: bool = False) -> str:
    """A stack as bpftrace prints it, from its frames ``(address, symbol+offset
    or None, module path or None)``, innermost first: a newline, then a line
    per frame -- ``indent`` spaces and the symbol (``0x...`` when unknown) in
    bpftrace's mode (8 in printf/print/values, 4 in a map key), or
    ``\\tADDR SYMBOL (MODULE)`` in perf's mode (a ``kernel`` stack: without
    the module, as bpftrace 0.17 prints a kstack)."""
    lines = []
    for addr, sym, module in frames:
        if mode == "perf" and kernel:
            lines.append(f"\t{addr:x} {sym or f'0x{addr:x}'}\n")
        elif mode == "perf":
            lines.append(f"\t{addr:x} {sym or f'0x{addr:x}'} ({module or '[unknown]'})\n")
        else:
            lines.append(" " * indent + (sym or f"0x{addr:x}") + "\n")
    return "\n" + "".join(lines)


def format_value(t: Type, value: Any, *, stacks: StackFormatter | None = None,
                 syms: SymFormatter | None = None, key: bool = False) -> str:
    """``value`` (of type ``t``) as bpftrace prints it in a map key (``key``),
    a map value or ``print()``: integers in decimal, strings as they are,
    tuples ``(1, a, -3)``, buffers with ``\\x`` escapes, symbols through
    ``syms`` (else ``0x...``), stacks from their frames (a list of
    :func:`format_stack` frames, or whatever ``stacks`` turns into one)."""
    k = t.kind
    if k == "int" and key and t.size == 8:
        return str(_signed(int(value), 64))     # bpftrace prints 64-bit keys signed
    if k == "int" or k in ("count", "sum", "min", "max"):
        return str(int(value))
    if k == "string":
        return value if isinstance(value, str) else _text(bytes(value))
    if k == "buffer":
        return value if isinstance(value, str) else format_buffer(bytes(value))
    if k == "tuple":
        return "(" + ", ".join(format_value(e, v, stacks=stacks, syms=syms, key=key)
                               for e, v in zip(t.elems, value)) + ")"
    if k == "array" and t.elem is not None:
        return "[" + ",".join(format_value(t.elem, v, stacks=stacks, syms=syms, key=key)
                              for v in value) + "]"
    if k == "record":
        return _record_text(t, value, key)
    if k in ("ustack", "kstack", "pystack"):
        if isinstance(value, str):
            return value
        if isinstance(value, (list, tuple)):
            frames: Iterable[tuple[int, str | None, str | None]] = value
        elif stacks is None:
            raise OutputError(f"printing a {k} needs the stacks callable")
        else:
            frames = stacks(value, t)
        return format_stack(frames, t.stack_mode, 4 if key else 8, kernel=k == "kstack")
    if k in ("usym", "ksym"):
        if isinstance(value, str):
            return value
        if syms is None:
            return f"0x{int(value) & _MASK64:x}"
        return syms(value, t)
    if k == "inet":
        return _inet_text(value)
    if k == "macaddr":
        return ":".join(f"{b:02X}" for b in bytes(value))
    if k == "timestamp":
        if isinstance(value, str):
            return value
        if isinstance(value, int):          # the nsecs of a stored strftime()
            return format_strftime(t.fmt, value)
        fmt, ns = value
        return format_strftime(fmt, ns)
    if k == "username":
        return _username(value)
    if k == "strerror":             # the C library's message (an int errno)
        return value if isinstance(value, str) else os.strerror(_signed(int(value), 32))
    if k == "cgroup_path":
        return value if isinstance(value, str) else cgroup_path_text(int(value), t.fmt or "*")
    if k == "pointer":      # bpftrace 0.17: in hex in a map key, else in decimal
        return f"0x{int(value) & _MASK64:x}" if key else str(int(value) & _MASK64)
    if k in ("avg", "stats"):
        count, total = value
        avg = _avg(count, total)
        return str(avg) if k == "avg" else f"count {count}, average {avg}, total {total}"
    return str(value)


def _record_fields(t: Type, value: Any) -> list[tuple[str, Type, Any]]:
    """``(name, type, value)`` of each field of a C struct value (an
    anonymous member's fields in its place)."""
    out: list[tuple[str, Type, Any]] = []
    names = getattr(value, "names", None)
    types: dict[str, Type] = {}

    def collect(rec: Any) -> None:
        for f in rec.fields:
            if not f.name and f.type.struct is not None:
                collect(f.type.struct)
            else:
                types[f.name] = f.type

    if t.struct is not None:
        collect(t.struct)
    for n, v in zip(names or types, value):
        out.append((n, types.get(n, t), v))
    return out


def _record_text(t: Type, value: Any, key: bool) -> str:
    """A struct as bpftrace 0.17 prints it: ``{ .a = 1, .b = x }``; in a map
    key ``{.a=1,.b=x}`` (a pointer member in hex there, in decimal else)."""
    parts = []
    for name, ft, v in _record_fields(t, value):
        if ft.kind == "pointer":
            text = f"0x{int(v) & _MASK64:x}" if key else str(int(v))
        else:
            text = format_value(ft, v, key=key)
        parts.append(f".{name}={text}" if key else f".{name} = {text}")
    return "{" + ",".join(parts) + "}" if key else "{ " + ", ".join(parts) + " }"


class _JsonObject(dict):  # type: ignore[type-arg]
    """A struct in ``-f json``: bpftrace writes ``{ "a": 1 }`` (spaces in)."""


class _JsonBare(str):
    """Text bpftrace 0.17 writes into JSON without quotes (a MAC address)."""


def _cdiv(v: int, div: int) -> int:
    q = abs(v) // div                    # C's division: toward zero
    return -q if v < 0 else q


def _avg(count: int, total: int) -> int:
    return _cdiv(total, count) if count else 0


def _json_value(t: Type, value: Any, *, stacks: StackFormatter | None = None,
                syms: SymFormatter | None = None) -> Any:
    k = t.kind
    if k == "int" or k in ("count", "sum", "min", "max"):
        return int(value)
    if k == "pointer":                  # a number, as bpftrace 0.17 writes a pointer value
        return int(value) & _MASK64
    if k == "tuple":
        return tuple(_json_value(e, v, stacks=stacks, syms=syms) for e, v in zip(t.elems, value))
    if k == "array" and t.elem is not None:
        return tuple(_json_value(t.elem, v, stacks=stacks, syms=syms) for v in value)
    if k == "macaddr":
        return _JsonBare(format_value(t, value))
    if k == "record":
        return _JsonObject((n, int(v) if ft.kind == "pointer" else
                            _json_value(ft, v, stacks=stacks, syms=syms))
                           for n, ft, v in _record_fields(t, value))
    return format_value(t, value, stacks=stacks, syms=syms)


_JSON_ESCAPES = {ord('"'): '\\"', ord("\\"): "\\\\", ord("\n"): "\\n", ord("\t"): "\\t",
                 ord("\r"): "\\r"}


def _json_str(text: str) -> str:
    """A JSON string as bpftrace 0.17 writes it: ``\\"`` ``\\\\`` ``\\n``
    ``\\t`` ``\\r``, other control bytes as ``\\u00XX``, and each byte
    of a non-ASCII character as ``\\uffffffXX`` (its sign-extended char)."""
    out = []
    for b in text.encode("utf-8", "surrogateescape"):
        esc = _JSON_ESCAPES.get(b)
        if esc is not None:
            out.append(esc)
        elif b < 0x20:
            out.append(f"\\u{b:04x}")
        elif b >= 0x80:
            out.append(f"\\uffffff{b:02x}")
        else:
            out.append(chr(b))
    return '"' + "".join(out) + '"'


def _dumps(obj: Any) -> str:
    """JSON as bpftrace writes it: ``", "``/``": "`` in objects and in a
    histogram's list, ``,`` in a tuple's array (a Python tuple here), its
    string escapes (:func:`_json_str`)."""
    if isinstance(obj, _JsonObject):
        return "{ " + ", ".join(f"{_json_str(str(k))}: {_dumps(v)}"
                                for k, v in obj.items()) + " }"
    if isinstance(obj, dict):
        return "{" + ", ".join(f"{_json_str(str(k))}: {_dumps(v)}"
                               for k, v in obj.items()) + "}"
    if isinstance(obj, (list, tuple)):
        return "[" + ("," if isinstance(obj, tuple) else ", ").join(_dumps(v) for v in obj) + "]"
    if isinstance(obj, _JsonBare):
        return str(obj)
    if isinstance(obj, str):
        return _json_str(obj)
    if obj is None:
        return "null"
    return str(int(obj))


def json_value(t: Type, value: Any, **kw: Any) -> str:
    """``print(value)`` in ``-f json``: ``{"type": "value", "data": ...}``."""
    return _dumps({"type": "value", "data": _json_value(t, value, **kw)})


# ================================================================ printf
def _int_arg(value: Any, length: str | None, conv: str) -> int:
    v = int(value)
    bits = 64 if length in ("l", "ll", "j", "z", "t") else \
        16 if length == "h" else 8 if length == "hh" else 32
    return _signed(v, bits) if conv == "d" else v & ((1 << bits) - 1)


def _conv_text(m: _Spec, t: Type | None, value: Any, stacks: Any, syms: Any) -> str:
    conv, length = m.conv, m.len
    minus, width, prec = m.minus, m.width, m.prec
    if conv in _INT_CONVS and t is not None and t.kind not in (
            "int", "count", "sum", "min", "max", "pointer", "usym", "ksym", "username"):
        raise OutputError(f"%{conv} takes an integer, not a {t}")
    if conv == "c":
        c = _int_arg(value, length, "u") & 0xFF
        char = chr(c) if c < 0x80 else bytes([c]).decode("utf-8", "surrogateescape")
        return str(("%" + minus + width.lstrip("0") + "s") % char)
    if conv in _INT_CONVS:
        v = _int_arg(value, length, "d" if conv == "d" else "u")
        if prec is not None and width.startswith("0"):
            width = width.lstrip("0")          # C: the 0 flag is ignored with a precision
        if prec is not None and not int(prec or 0) and v == 0:
            return str(("%" + minus + width.lstrip("0") + "s") % "")   # C: no digits for 0
        spec = ("%" + minus + width + (f".{prec or 0}" if prec is not None else "")
                + ("d" if conv == "u" else conv))
        return str(spec % v)
    if conv == "p":
        addr = int(value) & _MASK64
        return str(("%" + minus + width.lstrip("0") + "s") % ("(nil)" if addr == 0
                                                              else f"0x{addr:x}"))
    if conv == "r":
        body = format_buffer(bytes(value)) if not isinstance(value, str) else value
    elif conv == "rx":          # every byte escaped
        body = "".join(f"\\x{b:02x}" for b in bytes(value))
    elif conv == "rh":          # every byte in hex, one space apart
        body = " ".join(f"{b:02x}" for b in bytes(value))
    elif t is not None:
        body = format_value(t, value, stacks=stacks, syms=syms)
    elif isinstance(value, (bytes, bytearray)):
        body = _text(bytes(value))
    else:
        body = str(value)
    spec = "%" + minus + width.lstrip("0") + (f".{prec or 0}" if prec is not None else "") + "s"
    return str(spec % body)


def format_printf(fmt: str, values: Sequence[tuple[Type | None, Any]], *,
                  stacks: StackFormatter | None = None,
                  syms: SymFormatter | None = None) -> str:
    """``printf(fmt, values...)`` as bpftrace 0.17 prints it (see the module
    docs for the specifiers). ``fmt`` has its escapes decoded already;
    ``values`` are ``(type, value)`` pairs (the type may be None for a plain
    int or str). Raises :class:`OutputError` when there are fewer values
    than conversions."""
    it = iter(values)
    out, pos = [], 0
    for start, end, spec in _printf_specs(fmt):
        out.append(fmt[pos:start])
        pos = end
        if spec is None:
            out.append("%")
            continue
        try:
            t, v = next(it)
        except StopIteration:
            raise OutputError(f"printf({fmt!r}): fewer values than conversions") from None
        out.append(_conv_text(spec, t, v, stacks, syms))
    out.append(fmt[pos:])
    return "".join(out)


def attaching_text(n: int) -> str:
    """bpftrace's first line: ``Attaching 1 probe...`` / ``Attaching N probes...``."""
    return f"Attaching {n} probe{'' if n == 1 else 's'}..."


def json_attached(n: int) -> str:
    """The ``-f json`` first line: ``{"type": "attached_probes", "data": {"probes": N}}``."""
    return _dumps({"type": "attached_probes", "data": {"probes": n}})


def json_printf(text: str, kind: str = "printf") -> str:
    """The ``-f json`` line of a printed ``printf`` text (or of ``kind``:
    ``cat``, ``system``)."""
    return _dumps({"type": kind, "data": text})


def json_helper_error(helper: str, retcode: int, line: int, column: int) -> str:
    """The ``-f json`` line of a helper that failed under ``-k``."""
    return _dumps({"type": "helper_error", "helper": helper, "retcode": retcode,
                   "line": line, "col": column})


def json_join(text: str) -> str:
    """The ``-f json`` line of a ``join()``: its own type, the joined text
    without the newline the text output ends it with."""
    return _dumps({"type": "join", "data": text})


# ================================================================== time
_BOOT: list[float] = []


def _boot_time() -> float:
    if not _BOOT:
        import time
        _BOOT.append(time.time() - time.clock_gettime(time.CLOCK_BOOTTIME))
    return _BOOT[0]


def format_time(fmt: str | None = None, when: float | None = None) -> str:
    """``time(fmt)``: the local time (now, or ``when`` seconds since the
    epoch) with C's ``strftime``; bpftrace's default ``"%H:%M:%S\\n"``."""
    import time
    return time.strftime("%H:%M:%S\n" if fmt is None else fmt,
                         time.localtime(time.time() if when is None else when))


def format_strftime(fmt: str, nsecs: int) -> str:
    """``strftime(fmt, nsecs)``: ``nsecs`` (nanoseconds since boot, as the
    ``nsecs`` builtin counts) as local wall-clock time."""
    import time
    return time.strftime(fmt, time.localtime(_boot_time() + nsecs / 1e9))


def json_time(text: str) -> str:
    """The ``-f json`` line of a ``time()`` output."""
    return _dumps({"type": "time", "data": text})
