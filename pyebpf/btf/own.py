"""BTF for pyebpf's own maps and programs (no compiler involved).

* :func:`map_btf` -- the types of a map's key and value, from their codecs
  (:mod:`pyebpf.codecs`): integers of each size and sign, ``bool``, floats,
  ``Bytes(n)`` and ``Ns`` strings as ``char[n]``, multi-field :mod:`struct`
  formats as a struct of ``f0, f1, ...``, ctypes structures/unions (their field
  names, nested records, arrays and bitfields) and arrays.  The kernel keeps
  them with the map, so ``bpftool map dump`` shows the keys and values
  structured.
* :func:`program_btf` -- a ``FUNC`` per function (the main body and each
  bpf-to-bpf subprogram) with its ``func_info``, and a ``line_info`` record
  wherever the source of the instructions changes: each instruction's
  ``origin``, the Python (or ``.s``) ``file:line`` that emitted it, becomes the
  file name, line number and the text of that line.  ``bpftool prog dump
  xlated ... linum`` then prints the Python source, and the verifier's log
  its ``; line @ file:line`` lines.

Both return plain bytes; loading them is :func:`pyebpf.kernel.btf.btf_load`
(the maps and the loader do it, and go on without BTF when the kernel refuses
it).  This module is on every map creation and program load, so it writes
its few kinds (INT, FLOAT, ARRAY, STRUCT/UNION, FUNC_PROTO, FUNC) itself
with :mod:`struct` rather than through :class:`~.writer.BtfBuilder`, whose
imports (the reader and the type model) would cost about a millisecond on
that path; tests/btf/test_btf_own.py checks that the bytes equal what
BtfBuilder writes for the same types.
"""
from __future__ import annotations

import struct
import sys

from ..codecs import BytesCodec, Codec, CtypesCodec, StructCodec, format_fields

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable, Sequence

    from ..isa import Insn

__all__ = ["map_btf", "program_btf", "codec_type", "OwnBtf", "ProgramBtf", "parse_origin",
           "SourceLines"]

_MAGIC = 0xEB9F
#: magic, version, flags, hdr_len, type off/len, string off/len
_HEADER = struct.Struct("<HBBIIIII")
_INT, _ARRAY, _STRUCT, _UNION, _FUNC, _FUNC_PROTO, _FLOAT = 1, 3, 4, 5, 12, 13, 16
_SIGNED, _CHAR, _BOOL = 1, 2, 4
_LINKAGE_STATIC, _LINKAGE_GLOBAL = 0, 1
#: the longest source line kept in line_info (longer ones are cut)
LINE_TEXT_MAX = 1024
_LINE_MAX = (1 << 22) - 1                  # line_col: 22 bits of line, 10 of column
_COL_MAX = (1 << 10) - 1
_FUNC_INFO = struct.Struct("<II")          # insn_off, type_id
_LINE_INFO = struct.Struct("<IIII")        # insn_off, file_name_off, line_off, line_col

# struct format character -> (signed, float, char, bool)
_CODE_KIND = {"b": "s", "B": "u", "h": "s", "H": "u", "i": "s", "I": "u", "l": "s", "L": "u",
              "q": "s", "Q": "u", "n": "s", "N": "u", "P": "u", "?": "bool", "c": "char",
              "e": "float", "f": "float", "d": "float", "g": "float"}
_FLOAT_NAMES = {2: "half", 4: "float", 8: "double", 16: "long double"}


class OwnBtf:
    """A BTF blob under construction: types appended as u32 words, strings
    deduplicated, identical types given once (ids from 1)."""

    def __init__(self) -> None:
        self.words: list[int] = []
        self.count = 0
        self._strs = bytearray(b"\0")
        self._str_at: dict[str, int] = {"": 0}
        self._memo: dict[Any, int] = {}

    def string(self, text: str) -> int:
        """The offset of ``text`` in the string table (added once; NULs dropped)."""
        at = self._str_at.get(text)
        if at is None:
            at = self._str_at[text] = len(self._strs)
            self._strs += text.replace("\0", "").encode("utf-8", "replace") + b"\0"
        return at

    def _add(self, key: Any, words: Sequence[int]) -> int:
        tid = self._memo.get(key) if key is not None else None
        if tid is None:
            self.words.extend(words)
            self.count += 1
            tid = self.count
            if key is not None:
                self._memo[key] = tid
        return tid

    # -- kinds
    def int_(self, name: str, size: int, encoding: int = 0) -> int:
        """An INT of ``size`` bytes (``encoding``: signed 1, char 2, bool 4)."""
        return self._add(("int", name, size, encoding),
                         (self.string(name), _INT << 24, size, (encoding << 24) | (8 * size)))

    def float_(self, size: int) -> int:
        """A FLOAT of ``size`` bytes (2, 4, 8 or 16)."""
        return self._add(("float", size), (self.string(_FLOAT_NAMES[size]), _FLOAT << 24, size))

    def integer(self, size: int, signed: bool) -> int:
        """``u8``..``u64`` / ``s8``..``s64`` (the names of :data:`~pyebpf.codecs.INT_TYPES`)."""
        return self.int_(f"{'s' if signed else 'u'}{8 * size}", size, _SIGNED if signed else 0)

    def char(self) -> int:
        """``char`` (an INT with the char encoding: bpftool prints arrays of it as text)."""
        return self.int_("char", 1, _CHAR)

    def array(self, elem: int, nelems: int) -> int:
        """``elem[nelems]`` (indexed by ``u32``)."""
        index = self.integer(4, False)
        return self._add(("array", elem, nelems), (0, _ARRAY << 24, 0, elem, index, nelems))

    def struct_(self, name: str, size: int, members: Iterable[tuple[str, int, int, int]],
                union: bool = False) -> int:
        """A STRUCT (UNION) of ``(name, type, bit offset, bitfield size)`` members."""
        ms = list(members)
        kflag = any(m[3] for m in ms)
        kind = _UNION if union else _STRUCT
        words = [self.string(name), (kind << 24) | (kflag << 31) | len(ms), size]
        for mname, mtype, bit_off, bits in ms:
            words += (self.string(mname), mtype, (bits << 24) | bit_off if kflag else bit_off)
        return self._add(None, words)

    def func_proto(self, ret: int, params: Iterable[tuple[str, int]] = ()) -> int:
        """A FUNC_PROTO returning ``ret`` with ``(name, type)`` parameters."""
        ps = tuple(params)
        words = [0, (_FUNC_PROTO << 24) | len(ps), ret]
        for pname, ptype in ps:
            words += (self.string(pname), ptype)
        return self._add(("proto", ret, ps), words)

    def func(self, name: str, proto: int, linkage: int) -> int:
        """A FUNC named ``name`` of prototype ``proto``."""
        return self._add(None, (self.string(name), (_FUNC << 24) | linkage, proto))

    def build(self) -> bytes:
        """The blob: header, types, strings."""
        body = struct.pack(f"<{len(self.words)}I", *self.words)
        strs = bytes(self._strs)
        return _HEADER.pack(_MAGIC, 1, 0, _HEADER.size, 0, len(body), len(body), len(strs)) + \
            body + strs


# ---------------------------------------------------------------------------
# codecs -> types

def _identifier(name: str) -> bool:
    """A C identifier the kernel takes as a type or member name."""
    return name.isascii() and (name.isidentifier())


def _scalar(b: OwnBtf, code: str, size: int) -> int | None:
    kind = _CODE_KIND.get(code)
    if kind is None:
        return None
    if kind == "float":
        return b.float_(size) if size in _FLOAT_NAMES else None
    if kind == "char":
        return b.char()
    if kind == "bool":
        return b.int_("bool", size, _BOOL)
    if size not in (1, 2, 4, 8, 16):
        return None
    return b.integer(size, kind == "s")


def _struct_codec(b: OwnBtf, c: StructCodec) -> int | None:
    order, fields, size = format_fields(c.format)
    if order == ">" and sys.byteorder == "little" or order == "<" and sys.byteorder == "big":
        if any(code not in "sc?bB" for code, _, _, _ in fields):
            return None                       # multi-byte numbers in the other byte order
    members: list[tuple[str, int, int, int]] = []
    for code, count, off, isz in fields:
        tid = b.array(b.char(), count) if code == "s" else _scalar(b, code, isz)
        if tid is None:
            return None
        members.append((f"f{len(members)}", tid, 8 * off, 0))
    if len(members) == 1 and members[0][2] == 0 and fields[0][3] == size:
        return members[0][1]                 # a scalar (or one string): the type itself
    return b.struct_("", size, members)


def _ctype(b: OwnBtf, t: Any, ctypes: Any) -> int | None:
    """The type of a ctypes type (structures, unions, arrays, scalars,
    pointers as u64); None for what BTF cannot say faithfully."""
    key = ("ctype", t)
    if key in b._memo:
        return b._memo[key]
    size = ctypes.sizeof(t)
    tid: int | None
    if issubclass(t, (ctypes.Structure, ctypes.Union)):
        tid = _ctypes_record(b, t, ctypes, size)
    elif issubclass(t, ctypes.Array):
        elem = _ctype(b, t._type_, ctypes)
        tid = None if elem is None else b.array(elem, t._length_)
    elif issubclass(t, ctypes._Pointer) or getattr(t, "_type_", None) in ("P", "z", "Z"):
        tid = b.integer(size, False)
    elif issubclass(t, ctypes._SimpleCData) and isinstance(t._type_, str):
        if t.__name__.endswith("_be" if sys.byteorder == "little" else "_le") and size > 1:
            return None                       # a swapped-byte-order scalar of an endian struct
        tid = _scalar(b, t._type_, size)
    else:
        tid = None
    if tid is not None:
        b._memo[key] = tid
    return tid


def _ctypes_record(b: OwnBtf, t: Any, ctypes: Any, size: int) -> int | None:
    other = ctypes.BigEndianStructure if sys.byteorder == "little" else ctypes.LittleEndianStructure
    if issubclass(t, other):
        return None
    members: list[tuple[str, int, int, int]] = []
    for spec in getattr(t, "_fields_", ()):
        name, ftype = spec[0], spec[1]
        if not _identifier(name):
            return None
        field = getattr(t, name)
        tid = _ctype(b, ftype, ctypes)
        if tid is None:
            return None
        if len(spec) > 2:                     # a bitfield: size = bits << 16 | bit offset
            bits, bit_off = field.size >> 16, field.size & 0xFFFF
            members.append((name, tid, 8 * field.offset + bit_off, bits))
        else:
            members.append((name, tid, 8 * field.offset, 0))
    name = t.__name__ if _identifier(t.__name__) else ""
    return b.struct_(name, size, members, union=issubclass(t, ctypes.Union))


def codec_type(b: OwnBtf, c: Codec) -> int:
    """The type id describing the values of codec ``c`` (``u8[size]`` when
    nothing more precise can be said)."""
    tid: int | None = None
    elem = getattr(c, "elem", None)            # a per-CPU codec: the kernel types one CPU's value
    if isinstance(elem, Codec) and hasattr(c, "ncpus"):
        c = elem
    if isinstance(c, StructCodec):
        try:
            tid = _struct_codec(b, c)
        except Exception:                      # noqa: BLE001 - an odd format: bytes then
            tid = None
    elif isinstance(c, BytesCodec):
        tid = b.array(b.char(), c.size)
    elif isinstance(c, CtypesCodec):
        import ctypes                          # (the user's program imported it already)
        tid = _ctype(b, c.ctype, ctypes)
    return tid if tid is not None else b.array(b.integer(1, False), c.size)


def _signature(c: Codec | None) -> Any:
    """What decides a codec's BTF (None: not cacheable)."""
    if c is None:
        return 0
    elem = getattr(c, "elem", None)
    if isinstance(elem, Codec) and hasattr(c, "ncpus"):
        c = elem
    if isinstance(c, StructCodec):
        return ("struct", c.format)
    if isinstance(c, BytesCodec):
        return ("bytes", c.size)
    if isinstance(c, CtypesCodec):
        return ("ctypes", c.ctype)
    return None


_MAP_CACHE: dict[Any, tuple[bytes, int, int]] = {}


def map_btf(key: Codec | None, value: Codec) -> tuple[bytes, int, int]:
    """``(blob, key type id, value type id)`` for a map of these codecs
    (key id 0 when the map has no key).  Blobs are cached by the codecs' layout."""
    sig = (_signature(key), _signature(value))
    cacheable = None not in sig
    if cacheable:
        hit = _MAP_CACHE.get(sig)
        if hit is not None:
            return hit
    b = OwnBtf()
    kid = codec_type(b, key) if key is not None else 0
    vid = codec_type(b, value)
    out = (b.build(), kid, vid)
    if cacheable:
        if len(_MAP_CACHE) > 256:
            _MAP_CACHE.clear()
        _MAP_CACHE[sig] = out
    return out


# ---------------------------------------------------------------------------
# programs: func_info and line_info

def parse_origin(origin: Any) -> tuple[str, int, str]:
    """``(file, line, text)`` of an instruction's origin: ``"file.py:12"`` or
    ``("file.py", 12)`` give the file and line (text ``""``); anything else
    (``"<probe: @x = count()>"``) is kept whole as the text, line 0."""
    if isinstance(origin, tuple):
        return str(origin[0]), int(origin[1]), ""
    head, sep, tail = origin.rpartition(":")
    if sep and head and tail.isdigit():
        return head, int(tail), ""
    return "", 0, origin


class SourceLines:
    """The lines of source files, each file read once (``None`` for a file
    that cannot be read: ``<stdin>``, a deleted file)."""

    def __init__(self) -> None:
        self._files: dict[str, list[str] | None] = {}

    def add(self, path: str, text: str) -> None:
        """Take ``text`` as the contents of ``path`` (source held in memory:
        assembly text given as a string)."""
        self._files[path] = text.splitlines()

    def line(self, path: str, lineno: int) -> str | None:
        """Line ``lineno`` (from 1) of ``path`` without its newline, or None."""
        lines = self._files.get(path, 0)
        if lines == 0:
            try:
                with open(path, encoding="utf-8", errors="replace") as fh:
                    lines = fh.read().splitlines()
            except (OSError, ValueError):
                lines = None
            self._files[path] = lines
        if lines is None or not 0 < lineno <= len(lines):   # type: ignore[arg-type]
            return None
        return lines[lineno - 1]                             # type: ignore[index]


class ProgramBtf:
    """What a program load carries: the BTF ``blob`` and its packed
    ``func_info`` (8-byte) and ``line_info`` (16-byte) records; ``funcs``
    are ``(slot, name)`` of each function, ``lines`` ``(slot, file, line,
    text)`` of each line_info record."""

    __slots__ = ("blob", "func_info", "line_info", "funcs", "lines")

    def __init__(self, blob: bytes, func_info: bytes, line_info: bytes,
                 funcs: list[tuple[int, str]], lines: list[tuple[int, str, int, str]]) -> None:
        self.blob = blob
        self.func_info = func_info
        self.line_info = line_info
        self.funcs = funcs
        self.lines = lines


def _c_name(name: str, fallback: str) -> str:
    """``name`` made a C identifier (other characters become ``_``)."""
    out = "".join(ch if ch.isascii() and (ch.isalnum() or ch == "_") else "_" for ch in name)
    if not out:
        return fallback
    return "_" + out if out[0].isdigit() else out


def _function_starts(insns: Sequence[Insn]) -> tuple[list[int], list[int]] | None:
    """The slot of each instruction, and the sorted slots where functions
    start (0, and every bpf-to-bpf call or ``ld_imm64`` function target, as
    the kernel finds them); None when a target is not an instruction."""
    slots: list[int] = []
    starts = {0}
    pos = 0
    for insn in insns:
        slots.append(pos)
        code = insn.code
        if code == 0x85 and insn.src == 1:                    # call, CALL_LOCAL
            starts.add(pos + 1 + insn.imm)
        elif code == 0x18:                                    # ld_imm64
            if insn.src == 4:                                 # PSEUDO_FUNC
                starts.add(pos + 1 + insn.imm)
            pos += 1
        pos += 1
    at = set(slots)
    if not starts <= at:
        return None
    return slots, sorted(starts)


def _function_names(program: Any, slots: list[int], starts: list[int], main: str) -> list[str]:
    names: dict[int, str] = {}
    if program is not None:
        try:
            _, labels = program.layout()
        except Exception:                      # noqa: BLE001 - names are a nicety
            labels = {}
        for lname, idx in labels.items():
            if idx < len(slots) and "." not in lname:
                names.setdefault(slots[idx], lname)
        for sname in getattr(program, "subprograms", {}):
            idx = labels.get(sname)
            if idx is not None and idx < len(slots):
                names[slots[idx]] = sname
    out = []
    for s in starts:
        fallback = f"func_{s}"
        out.append(_c_name(main, "prog") if s == 0 else _c_name(names.get(s, fallback), fallback))
    return out


def _line_text(src: SourceLines, file: str, line: int) -> tuple[str, int]:
    """The text of a source line and its column (the indentation + 1); the
    ``file:line`` itself when the file cannot be read."""
    raw = src.line(file, line)
    if raw is None:
        return f"{file}:{line}", 0
    stripped = raw.lstrip()
    return raw.rstrip(), (min(len(raw) - len(stripped) + 1, _COL_MAX) if stripped else 0)


def _line_records(b: OwnBtf, insns: Sequence[Insn], slots: list[int], starts: set[int],
                  src: SourceLines) -> tuple[bytes, list[tuple[int, str, int, str]]]:
    """A line_info record wherever the origin changes and at each function's
    start (never on the second half of an ``ld_imm64``, the kernel's rule)."""
    line_info = bytearray()
    lines: list[tuple[int, str, int, str]] = []
    last: Any = None
    texts: dict[tuple[str, int], tuple[str, int]] = {}
    for slot, insn in zip(slots, insns):
        origin = insn._origin
        if origin is None:
            origin = last
        if (origin == last and slot not in starts) or insn.code == 0:
            continue
        last = origin
        file, line, text = parse_origin(origin) if origin is not None else ("", 0, "")
        col = 0
        if line:
            hit = texts.get((file, line))
            if hit is None:
                hit = texts[(file, line)] = _line_text(src, file, line)
            text, col = hit
        text = text[:LINE_TEXT_MAX]
        line_info += _LINE_INFO.pack(slot, b.string(file), b.string(text),
                                     (min(line, _LINE_MAX) << 10) | col)
        lines.append((slot, file, line, text))
    return bytes(line_info), lines


def program_btf(insns: Sequence[Insn], name: str = "", program: Any = None,
                source: SourceLines | None = None) -> ProgramBtf | None:
    """func_info and line_info of finalized instructions (with their BTF),
    or None when no instruction has an origin or the function layout is not
    one the kernel would accept (the load then goes without BTF).

    ``program`` (a :class:`~pyebpf.program.Program`) names the subprograms;
    ``source`` reads the lines' text (default: a fresh :class:`SourceLines`).
    """
    if not insns or all(i._origin is None for i in insns):
        return None
    layout = _function_starts(insns)
    if layout is None:
        return None
    slots, starts = layout
    code_at = {s: i.code for s, i in zip(slots, insns)}
    if any(code_at[s] == 0 for s in starts):
        return None
    src = source if source is not None else SourceLines()
    b = OwnBtf()
    # ``int f()``: no parameters, since a ``void *ctx`` makes the verifier
    # log "arg#0 reference type('UNKNOWN ') size cannot be determined"; the
    # subprograms are static, so the verifier checks them in their callers'
    # context as it does without BTF (a global one would be checked alone)
    proto = b.func_proto(b.int_("int", 4, _SIGNED))
    names = _function_names(program, slots, starts, name)
    funcs = list(zip(starts, names))
    func_info = bytearray()
    for s, fname in funcs:
        tid = b.func(fname, proto, _LINKAGE_GLOBAL if s == 0 else _LINKAGE_STATIC)
        func_info += _FUNC_INFO.pack(s, tid)
    line_info, lines = _line_records(b, insns, slots, set(starts), src)
    return ProgramBtf(b.build(), bytes(func_info), line_info, funcs, lines)
