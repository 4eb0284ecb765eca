"""Codecs: Python values to and from the fixed-size bytes of map keys and
values and of event records -- and the one table of integer type names.

This module is pure (it imports no other part of pyebpf): :mod:`pyebpf.maps`
and :mod:`pyebpf.events` build on it, and the DSL, the asm-file header, the
tracepoint reader and the USDT provider read :data:`INT_TYPES` from it, so
``"u32"`` means the same thing everywhere.

A *codec spec* is turned into a :class:`Codec` by :func:`codec`:

* an integer width ``1, 2, 4, 8`` -- an unsigned little-endian integer
  (``key=4`` is a ``u32``);
* a type name: ``"u8" "u16" "u32" "u64" "s8" ... "s64"`` (also ``"i32"`` ...);
* a ``struct`` format string: ``"<QI"`` gives tuples, ``"<Q"`` a scalar;
  formats without a byte-order character use C alignment (``"@"``);
* a ``ctypes`` type: ``ctypes.c_uint64`` gives ints, a ``ctypes.Structure``
  (or array/union) gives instances of it;
* :class:`Bytes` ``(n)`` -- raw ``bytes`` of exactly ``n`` bytes;
* ``"char[N]"`` -- a string of at most ``N`` bytes (UTF-8, NUL-padded; read
  back up to its first NUL), as a C ``char name[N]`` holds one;
* any :class:`Codec` instance.

Record layouts (C rules: each field at a multiple of its alignment, the
record padded to the largest) are computed by :func:`c_layout` alone;
:func:`layout_format` writes one as a :mod:`struct` format with explicit
padding, and :func:`format_fields` reads one back out of a format.
"""
from __future__ import annotations

import struct
import sys

from .errors import SizeError, WrongTypeError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import ctypes as _ct
    from types import ModuleType
    from typing import Any, Callable, Iterable, Literal, Sequence

    #: a buffer a codec reads from / writes into
    _RBuf = bytes | bytearray | memoryview
    _WBuf = bytearray | memoryview
    #: a struct format character ``memoryview.cast`` takes for one number
    _CastFormat = Literal["b", "B", "h", "H", "i", "I", "l", "L", "q", "Q", "f", "d"]
    from typing import Generic, Protocol, TypeVar, overload

    from typing_extensions import TypeVar as _TypeVarWithDefault

    #: what a codec decodes to (``Any`` for a bare ``Codec``)
    _T = _TypeVarWithDefault("_T", default=Any)
    #: what a typed codec spec decodes to (nothing said of it: an integer spec)
    _S = _TypeVarWithDefault("_S", default=int)
    _R = _TypeVarWithDefault("_R", bound="_ct.Structure | _ct.Union | _ct.Array[Any]",
                             default=Any)
    _R_co = TypeVar("_R_co", covariant=True)

    class _RecordType(Protocol[_R_co]):
        """A ctypes Structure or Union class, seen as what it makes."""

        @property
        def _fields_(self) -> Sequence[Any]: ...

        def __call__(self, *args: Any, **kw: Any) -> _R_co: ...

    #: the integer codec specs (the names of :data:`INT_TYPES`, ``i8``.., widths)
    IntSpec = Literal[1, 2, 4, 8, "u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64",
                      "i8", "i16", "i32", "i64"]
else:
    class Generic:
        """Run-time stand-in for ``typing.Generic`` (typing is not imported):
        ``Codec[int]`` and ``HashMap[int, int]`` are the classes themselves."""

        __slots__ = ()

        def __class_getitem__(cls, params):
            return cls

    _T = _R = None

__all__ = ["INT_TYPES", "INT_ALIASES", "UNSIGNED_BY_SIZE", "int_type", "c_layout",
           "layout_format", "format_fields", "Codec", "StructCodec", "BytesCodec",
           "CtypesCodec", "Bytes", "codec", "default_codec"]


# =========================================================================
# Integer type names: the one table

#: integer type name -> (size in bytes, signed, :mod:`struct` format character)
INT_TYPES: dict[str, tuple[int, bool, str]] = {
    "u8": (1, False, "B"), "u16": (2, False, "H"), "u32": (4, False, "I"), "u64": (8, False, "Q"),
    "s8": (1, True, "b"), "s16": (2, True, "h"), "s32": (4, True, "i"), "s64": (8, True, "q"),
}
#: other spellings of :data:`INT_TYPES` names: ``i8``..``i64`` (taken by map
#: codec specs) and the ``<stdint.h>`` stems ``int8``..``uint64``
INT_ALIASES: dict[str, str] = {
    **{f"i{8 * t[0]}": n for n, t in INT_TYPES.items() if t[1]},
    **{f"{'' if t[1] else 'u'}int{8 * t[0]}": n for n, t in INT_TYPES.items()},
}
#: width in bytes -> the unsigned type name of that width
UNSIGNED_BY_SIZE: dict[int, str] = {t[0]: n for n, t in INT_TYPES.items() if not t[1]}


def int_type(name: str, aliases: Iterable[str] = ()) -> tuple[int, bool, str] | None:
    """``(size, signed, struct char)`` of an integer type name (case and
    surrounding blanks ignored), also of the :data:`INT_ALIASES` listed in
    ``aliases``; None for any other name."""
    key = name.strip().lower()
    if key in aliases:
        key = INT_ALIASES.get(key, key)
    return INT_TYPES.get(key)


# little-endian struct formats of the names map codec specs take (u8.., s8.., i8..)
_NAMED_INTS = {n: "<" + t[2] for n, t in INT_TYPES.items()}
_NAMED_INTS.update((f"i{8 * t[0]}", "<" + t[2]) for t in INT_TYPES.values() if t[1])


# =========================================================================
# Record layouts

def c_layout(fields: Iterable[tuple[int, int]]) -> tuple[list[int], int, int]:
    """The C layout of fields given as ``(size, alignment)``: each field's
    offset (the next multiple of its alignment), the end of the last field,
    and the record's alignment (the largest, at least 1).  The C ``sizeof``
    is the end rounded up to that alignment (``-end % align`` bytes of tail
    padding)."""
    offsets: list[int] = []
    pos = 0
    align = 1
    for size, a in fields:
        pos += -pos % a
        offsets.append(pos)
        pos += size
        if a > align:
            align = a
    return offsets, pos, align


def layout_format(fields: Sequence[tuple[str, int, int]], order: str = "<"
                  ) -> tuple[str, list[int], int]:
    """Lay out ``(struct code, size, alignment)`` fields as a C struct
    (:func:`c_layout`): ``(format, offsets, size)``, the format with
    explicit ``x`` padding (tail included), so ``calcsize(format) == size``
    in any byte order."""
    offsets, end, align = c_layout((size, a) for _, size, a in fields)
    parts = [order]
    pos = 0
    for (code, size, _), off in zip(fields, offsets):
        if off > pos:
            parts.append(f"{off - pos}x")
        parts.append(code)
        pos = off + size
    total = end + -end % align
    if total > pos:
        parts.append(f"{total - pos}x")
    return "".join(parts), offsets, total


_TOKEN_CODES = "xcbB?hHiIlLqQnNefdspP"


def _format_tokens(body: str) -> list[tuple[int, str]]:
    """``(count, code)`` of each item of a struct format body (no order char)."""
    out: list[tuple[int, str]] = []
    i, n = 0, len(body)
    while i < n:
        if body[i].isspace():
            i += 1
            continue
        j = i
        while j < n and body[j].isdigit():
            j += 1
        while j < n and body[j].isspace():
            j += 1
        if j >= n or body[j] not in _TOKEN_CODES:
            raise SizeError(f"cannot lay out struct format body {body!r}")
        out.append((int(body[i:j]) if body[i:j].strip() else 1, body[j]))
        i = j + 1
    return out


def format_fields(fmt: str) -> tuple[str, list[tuple[str, int, int, int]], int]:
    """``fmt`` -> (order, [(code, count, offset, item_size)], size).

    ``order`` is ``"<"``/``">"``/``"="`` (``"@"`` formats are resolved to
    native sizes and explicit offsets by :func:`c_layout`, so they can be
    re-expressed in ``"="`` with ``x`` padding).  Padding (``x``) is
    dropped; a string ``Ns`` is one field of ``count`` N.
    """
    order = fmt[:1] if fmt[:1] in "@=<>!" else "@"
    body = fmt[1:] if fmt[:1] in "@=<>!" else fmt
    native = order == "@"
    # (code, count, item size, alignment) per field; padding and 0-counts align only
    items: list[tuple[str, int, int, int]] = []
    for count, code in _format_tokens(body):
        if code == "p":
            raise SizeError("pascal strings ('p') are not supported in event formats")
        if code in "sx":                                   # bytes: no alignment
            items.append((code, count, count, 1))
            continue
        isz = struct.calcsize(("@" if native else "=") + code)
        align = isz if native else 1
        if count == 0:
            items.append(("x", 0, 0, align))
        items.extend((code, 1, isz, align) for _ in range(count))
    offsets, end, _ = c_layout((isz, align) for _, _, isz, align in items)
    if end != struct.calcsize(fmt):
        raise SizeError(f"cannot lay out struct format {fmt!r}")
    out = [(code, count, off, isz) for (code, count, isz, _), off in zip(items, offsets)
           if code != "x"]
    return ({"@": "=", "!": ">"}.get(order, order)), out, end


# =========================================================================
# Codecs

class Codec(Generic[_T]):
    """Converts Python values to and from the fixed-size bytes of a map key or
    value, or of an event record.

    Subclasses set :attr:`size` and :attr:`label` and provide
    :meth:`pack_into` / :meth:`unpack_from`; the rest derives from them.
    ``pack_into`` raises :class:`SizeError` when the value does not fit.
    To a type checker a codec is generic in what it decodes to:
    ``Bytes(16)`` is a ``Codec[bytes]``, a ctypes record's a ``Codec[Record]``.
    """

    size: int = 0
    label: str = "?"

    def pack_into(self, buf: bytearray | memoryview, offset: int, value: Any) -> None:
        """Write ``value`` at ``buf[offset:offset + size]``."""
        raise NotImplementedError

    def unpack_from(self, buf: bytes | bytearray | memoryview, offset: int = 0) -> _T:
        """Read the value at ``buf[offset:offset + size]``."""
        raise NotImplementedError

    def encode(self, value: Any) -> bytes:
        """``value`` -> exactly :attr:`size` bytes."""
        buf = bytearray(self.size)
        self.pack_into(buf, 0, value)
        return bytes(buf)

    def decode(self, data: bytes | bytearray | memoryview) -> _T:
        """:attr:`size` bytes -> value."""
        if len(data) != self.size:
            raise SizeError(f"{self.label} needs {self.size} bytes, got {len(data)}")
        return self.unpack_from(data, 0)

    def unpack_many(self, buf: bytes | bytearray | memoryview, count: int) -> list[_T]:
        """Decode ``count`` values packed back to back from the start of ``buf``."""
        size = self.size
        unpack = self.unpack_from
        return [unpack(buf, i * size) for i in range(count)]

    def pack_many_into(self, buf: bytearray, values: Sequence[Any]) -> None:
        """Encode ``values`` back to back from the start of ``buf``."""
        size = self.size
        pack = self.pack_into
        for i, v in enumerate(values):
            pack(buf, i * size, v)

    def _copy_in(self, buf: bytearray | memoryview, offset: int,
                 data: bytes | bytearray | memoryview) -> None:
        """Copy ``data``, which must be exactly :attr:`size` bytes, to ``buf[offset:]``."""
        if len(data) != self.size:
            raise SizeError(f"{self.label} wants exactly {self.size} bytes, got {len(data)}")
        buf[offset:offset + self.size] = data

    def zero(self) -> _T:
        """The value whose bytes are all zero."""
        return self.unpack_from(bytes(self.size), 0)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.label} ({self.size} bytes)>"


_NATIVE_LE = sys.byteorder == "little"


class StructCodec(Codec):
    """Values described by a :mod:`struct` format.

    One-item formats give scalars; longer ones give tuples.
    """

    def __init__(self, fmt: str | struct.Struct, label: str | None = None) -> None:
        st = fmt if isinstance(fmt, struct.Struct) else struct.Struct(fmt)
        self.struct = st
        self.format = st.format
        self.size = st.size
        if self.size == 0:
            raise SizeError(f"struct format {self.format!r} has size 0")
        self.label = label or f"struct {self.format!r}"
        n = len(st.unpack(bytes(st.size)))
        self.scalar = n == 1
        self.items = n
        if self.scalar:
            raw_unpack = st.unpack_from

            def unpack_from(buf: _RBuf, offset: int = 0,
                            _u: Callable[[_RBuf, int], tuple[Any, ...]] = raw_unpack) -> Any:
                return _u(buf, offset)[0]
            self.pack_into = st.pack_into             # type: ignore[method-assign, assignment]
            self.unpack_from = unpack_from                        # type: ignore[method-assign]
        else:
            raw_pack = st.pack_into

            def pack_into(buf: _WBuf, offset: int, value: Any,
                          _p: Callable[..., None] = raw_pack) -> None:
                _p(buf, offset, *value)
            self.pack_into = pack_into                            # type: ignore[method-assign]
            self.unpack_from = st.unpack_from         # type: ignore[method-assign, assignment]
        # fast path for unpack_many: memoryview.cast for one native-layout number
        self._cast: _CastFormat | None = None
        f = self.format
        if self.scalar and len(f) == 2 and f[1] in "bBhHiIlLqQfd" and (
                f[0] in "@=" or (f[0] == "<" and _NATIVE_LE) or (f[0] == ">" and not _NATIVE_LE)):
            if struct.calcsize(f[1]) == self.size:
                self._cast = f[1]  # type: ignore[assignment]  # one of bBhHiIlLqQfd, tested above

    def error(self, value: Any, exc: BaseException, role: str = "value") -> SizeError:
        """The SizeError for a value that failed to pack: a
        :class:`~pyebpf.errors.WrongTypeError` for a value of the wrong type."""
        if self.scalar:
            kind = self.format[-1:]
            if kind in "bBhHiIlLqQnN?":
                if not isinstance(value, int):
                    return WrongTypeError(f"{role} {value!r} has the wrong type for "
                                          f"{self.label}: {_a(value)}, not an int")
                bits = self.size * 8
                low, high = (-(1 << bits - 1), (1 << bits - 1) - 1) if kind.islower() \
                    else (0, (1 << bits) - 1)
                unit = "byte" if self.size == 1 else "bytes"
                return SizeError(f"{role} {value} does not fit {self.label} "
                                 f"({self.size} {unit}: {low} to {high})")
            if kind in "efd" and not isinstance(value, (int, float)):
                return WrongTypeError(f"{role} {value!r} has the wrong type for "
                                      f"{self.label}: {_a(value)}, not a number")
            return SizeError(f"{role} {value!r} does not fit {self.label} ({self.size} bytes): {exc}")
        return SizeError(f"{role} {value!r} does not match {self.label} ({self.size} bytes, "
                         f"a tuple of {self.items} items): {exc}")

    def encode(self, value: Any) -> bytes:
        """``value`` -> exactly :attr:`size` bytes (:class:`SizeError` if it does not fit)."""
        buf = bytearray(self.size)
        try:
            self.pack_into(buf, 0, value)
        except (struct.error, TypeError) as exc:
            raise self.error(value, exc) from None
        return bytes(buf)

    def unpack_many(self, buf: _RBuf, count: int) -> list[Any]:
        """Decode ``count`` values packed back to back (one ``memoryview.cast``
        or ``struct.iter_unpack`` pass)."""
        if count == 0:
            return []
        mv = memoryview(buf)[:count * self.size]
        if self._cast is not None:
            return mv.cast(self._cast).tolist()
        if self.scalar:
            return [t[0] for t in self.struct.iter_unpack(mv)]
        return list(self.struct.iter_unpack(mv))

    def pack_many_into(self, buf: bytearray, values: Sequence[Any]) -> None:
        """Encode ``values`` back to back from the start of ``buf``."""
        size = self.size
        p = self.struct.pack_into
        try:
            if self.scalar:
                for i, v in enumerate(values):
                    p(buf, i * size, v)
            else:
                for i, v in enumerate(values):
                    p(buf, i * size, *v)
        except (struct.error, TypeError) as exc:
            raise SizeError(f"a value does not fit {self.label} ({self.size} bytes): {exc}") from None


class BytesCodec(Codec[bytes]):
    """Raw ``bytes`` of exactly :attr:`size` bytes."""

    def __init__(self, size: int) -> None:
        if size <= 0:
            raise SizeError(f"Bytes size must be positive, got {size}")
        self.size = size
        self.label = f"Bytes({size})"

    def pack_into(self, buf: _WBuf, offset: int, value: Any) -> None:
        """Copy ``value`` (bytes-like of exactly :attr:`size` bytes) into ``buf``."""
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise SizeError(f"{self.label} wants bytes of length {self.size}, "
                            f"got {type(value).__name__}")
        self._copy_in(buf, offset, value)

    def unpack_from(self, buf: _RBuf, offset: int = 0) -> bytes:
        """A copy of the :attr:`size` bytes at ``offset``."""
        return bytes(buf[offset:offset + self.size])

    def unpack_many(self, buf: _RBuf, count: int) -> list[bytes]:
        """``count`` copies of consecutive :attr:`size`-byte pieces of ``buf``."""
        s = self.size
        mv = memoryview(buf)
        return [bytes(mv[i * s:(i + 1) * s]) for i in range(count)]


def _a(value: object) -> str:
    """``a str``, ``an int``: the type of ``value`` with its article."""
    name = type(value).__name__
    return f"{'an' if name[:1] in 'aeiou' else 'a'} {name}"


class StringCodec(BytesCodec):
    """``char[N]``: a ``str`` of at most :attr:`size` bytes in UTF-8 (``bytes``
    too), NUL-padded; read back as the ``str`` before the first NUL (bytes
    that are not UTF-8 replaced).  Its BTF is the bytes' (a ``char`` array)."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.label = f"char[{size}]"

    unpack_many = Codec.unpack_many        # (each one a str: not the bytes' fast path)

    def pack_into(self, buf: _WBuf, offset: int, value: Any) -> None:
        """Write ``value`` NUL-padded to :attr:`size` bytes."""
        if isinstance(value, str):
            data = value.encode()
        elif isinstance(value, (bytes, bytearray, memoryview)):
            data = bytes(value)
        else:
            raise WrongTypeError(f"{value!r} has the wrong type for {self.label}: "
                                 f"{_a(value)}, not a str")
        if len(data) > self.size:
            raise SizeError(f"{value!r} does not fit {self.label} ({len(data)} bytes, "
                            f"at most {self.size})")
        buf[offset:offset + self.size] = data + bytes(self.size - len(data))

    def unpack_from(self, buf: _RBuf, offset: int = 0) -> str:  # type: ignore[override]
        """The string at ``offset``, up to its first NUL."""
        raw = bytes(buf[offset:offset + self.size])
        return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def _ctypes() -> ModuleType:
    import ctypes                    # (imported when used: it costs start-up ~2 ms)
    return ctypes


def Bytes(size: int) -> BytesCodec:  # noqa: N802 - reads like a type in specs
    """Codec spec for raw bytes of ``size`` bytes: ``HashMap(Bytes(16), "u64")``."""
    return BytesCodec(size)


class CtypesCodec(Codec[_R]):
    """Instances of a ctypes Structure/Union/Array type (copied in and out)."""

    def __init__(self, ctype: type[_R]) -> None:
        self.ctype = ctype
        self.size = _ctypes().sizeof(ctype)
        if self.size == 0:
            raise SizeError(f"ctypes type {ctype.__name__} has size 0")
        self.label = f"{ctype.__name__}"

    def pack_into(self, buf: _WBuf, offset: int, value: Any) -> None:
        """Copy ``value`` (an instance of :attr:`ctype`, a tuple of its fields,
        or bytes of its size) into ``buf``."""
        data: bytes | bytearray | memoryview
        if isinstance(value, self.ctype):
            data = bytes(value)
        elif isinstance(value, (bytes, bytearray, memoryview)):
            data = value
        elif isinstance(value, (_ctypes().Structure, _ctypes().Union, _ctypes().Array)):
            raise SizeError(f"expected {self.label} ({self.size} bytes), got "
                            f"{type(value).__name__} ({_ctypes().sizeof(value)} bytes)")
        elif isinstance(value, tuple) and issubclass(self.ctype,
                                                     (_ctypes().Structure, _ctypes().Union)):
            data = bytes(self.ctype(*value))
        else:
            raise SizeError(f"expected {self.label} ({self.size} bytes), got "
                            f"{type(value).__name__}")
        self._copy_in(buf, offset, data)

    def unpack_from(self, buf: _RBuf, offset: int = 0) -> _R:
        """A new :attr:`ctype` instance copied from ``buf`` at ``offset``."""
        # (typeshed's from_buffer_copy gives the bound, not the class: _R is the class)
        return self.ctype.from_buffer_copy(buf, offset)  # type: ignore[return-value]


_CTYPES_SCALARS = set("bBhHiIlLqQfd?")


if TYPE_CHECKING:
    #: a codec spec whose Python type is known: an integer spec (``int``), a
    #: ``Codec[T]`` (``T``), a ctypes scalar (its Python type) or a ctypes
    #: Structure/Union class (its instances).  Struct formats and ``"char[N]"``
    #: are plain strings: their type is not known (``Any``).
    TypedSpec = IntSpec | Codec[_S] | type[_ct._SimpleCData[_S]] | _RecordType[_S]

if TYPE_CHECKING:
    @overload
    def codec(spec: TypedSpec[_S], role: str = ...) -> Codec[_S]:
        """A typed spec: its codec decodes to that type (``codec("u32")``: ``Codec[int]``)."""
    @overload
    def codec(spec: Any, role: str = ...) -> Codec:
        """A struct format, ``"char[N]"``...: a codec of values typed ``Any``."""


def codec(spec: Any, role: str = "value") -> Codec:
    """Turn a codec spec (see the module docs) into a :class:`Codec`."""
    if isinstance(spec, Codec):
        return spec
    if isinstance(spec, bool):
        raise SizeError(f"{role}: {spec!r} is not a codec spec")
    if isinstance(spec, int):
        if spec in UNSIGNED_BY_SIZE:
            name = UNSIGNED_BY_SIZE[spec]
            return StructCodec(_NAMED_INTS[name], name)
        raise SizeError(f"{role}: an integer spec means an unsigned integer of 1, 2, 4 or 8 "
                        f"bytes; got {spec}. Use Bytes({spec}) for raw bytes or a struct "
                        "format / ctypes type for a record")
    if isinstance(spec, struct.Struct):
        return StructCodec(spec)
    if isinstance(spec, str):
        name = spec.strip().lower()
        if name in _NAMED_INTS:
            return StructCodec(_NAMED_INTS[name], name)
        if name.startswith("char[") and name.endswith("]") and name[5:-1].isdigit():
            return StringCodec(int(name[5:-1]))
        try:
            return StructCodec(spec)
        except struct.error as exc:
            raise SizeError(f"{role}: {spec!r} is neither a type name (u8..u64, s8..s64) nor "
                            f"a struct format: {exc}") from None
    # a ctypes type can only come from a program that imported ctypes already
    ctypes = sys.modules.get("ctypes")
    if ctypes is None or not isinstance(spec, type):
        pass
    elif issubclass(spec, ctypes._SimpleCData):
        code = getattr(spec, "_type_", None)
        if isinstance(code, str) and code in _CTYPES_SCALARS:
            return StructCodec("@" + code, spec.__name__)
        raise SizeError(f"{role}: ctypes type {spec.__name__} cannot be stored in a map")
    elif issubclass(spec, (ctypes.Structure, ctypes.Union, ctypes.Array)):
        return CtypesCodec(spec)
    raise SizeError(f"{role}: {spec!r} is not a codec spec (use an int width, 'u32', a struct "
                    "format, a ctypes type or Bytes(n))")


def default_codec(size: int) -> Codec:
    """The codec of a ``size``-byte key or value with no spec: the unsigned
    integer of that width (1, 2, 4, 8 bytes), else :class:`Bytes` ``(size)``."""
    return codec(size) if size in UNSIGNED_BY_SIZE else BytesCodec(size)
