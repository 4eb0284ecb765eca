"""Decoders: record payloads -> events, a run of equal records at a time.

``decode=`` of a reader (see :mod:`pyebpf.events`) becomes one of these;
struct formats get an explicit layout so that a whole run is unpacked by one
``Struct.iter_unpack``, and numpy dtypes for :meth:`read_array`.
"""
from __future__ import annotations

import struct
import sys
from operator import itemgetter

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

    #: what a decoder reads records from: a memoryview of a ring, or bytes
    _Buf = Any

from ..codecs import BytesCodec, Codec, CtypesCodec, StructCodec, codec, format_fields
from ..errors import SizeError

_first = itemgetter(0)


def _numpy() -> Any:
    try:
        import numpy
    except ImportError:  # pragma: no cover - numpy is optional
        raise ImportError("read_array needs numpy, which is optional for pyebpf: "
                          "`pip install numpy`, or use read_batch()") from None
    return numpy


# =========================================================================
# struct formats: explicit layouts and numpy dtypes

_NP_CODES = {"b": "i1", "B": "u1", "h": "i2", "H": "u2", "i": "i4", "I": "u4", "q": "i8",
             "Q": "u8", "e": "f2", "f": "f4", "d": "f8", "?": "b1"}


def _standard_code(code: str, isz: int) -> str:
    if code in "lLnNP":
        return {4: "i", 8: "q"}[isz].upper() if code in "LNP" else {4: "i", 8: "q"}[isz]
    return code


def _explicit_body(fmt: str) -> tuple[str, str]:
    """(order char, body) of a format with the same layout, explicit padding
    and standard sizes: safe to embed after other fields."""
    order, fields, size = format_fields(fmt)
    parts = []
    pos = 0
    for code, count, off, isz in fields:
        if off > pos:
            parts.append(f"{off - pos}x")
        parts.append(f"{count}s" if code == "s" else _standard_code(code, isz))
        pos = off + (count if code == "s" else isz)
    if size > pos:
        parts.append(f"{size - pos}x")
    return order, "".join(parts)


def _format_dtype(fmt: str) -> Any:
    """The numpy dtype with the layout of struct format ``fmt`` (fields f0, f1 ...)."""
    np = _numpy()
    order, fields, size = format_fields(fmt)
    names, formats, offsets = [], [], []
    for i, (code, count, off, isz) in enumerate(fields):
        if code == "s":
            t = f"S{count}"
        elif code == "c":
            t = "S1"
        else:
            c = _standard_code(code, isz)
            t = order + _NP_CODES[c]
        names.append(f"f{i}")
        formats.append(t)
        offsets.append(off)
    return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": size})


# =========================================================================
# decoders: payloads -> events

class _Decoder:
    """Turns record payloads into events.

    ``hdr`` is the payload's offset inside a record; ``need`` the fewest
    payload bytes a record must carry.  ``run`` decodes ``n`` records of
    ``stride`` bytes starting at ``d[off]`` (payloads of ``plen`` bytes),
    ``one`` a single payload at ``buf[off:off + plen]``; both append to ``out``.
    """

    need = 0

    def __init__(self, hdr: int) -> None:
        self.hdr = hdr

    def run(self, d: _Buf, off: int, n: int, stride: int, plen: int, out: list[Any]) -> None:
        raise NotImplementedError

    def take(self, d: _Buf, off: int, n: int, stride: int, plen: int, out: list[Any]) -> int:
        """``run`` when the payloads carry what this decoder needs: how many
        records were decoded (0: too short, the drain counts them malformed)."""
        if plen < self.need:
            return 0
        self.run(d, off, n, stride, plen, out)
        return n

    def one(self, buf: _Buf, off: int, plen: int, out: list[Any]) -> None:
        raise NotImplementedError


class _RawDecoder(_Decoder):
    """Payloads as ``bytes`` (``size``: exactly that many, else the whole payload)."""

    def __init__(self, hdr: int, size: int | None = None) -> None:
        super().__init__(hdr)
        self.size = size
        self.need = size or 0
        self._structs: dict[tuple[int, int], Any] = {}

    def run(self, d: _Buf, off: int, n: int, stride: int, plen: int, out: list[Any]) -> None:
        take = self.size or plen
        st = self._structs.get((stride, take))
        if st is None:
            st = self._structs[(stride, take)] = struct.Struct(
                f"{self.hdr}x{take}s{stride - self.hdr - take}x")
        out.extend(map(_first, st.iter_unpack(d[off:off + n * stride])))

    def one(self, buf: _Buf, off: int, plen: int, out: list[Any]) -> None:
        out.append(bytes(buf[off:off + (self.size or plen)]))


class _StructDecoder(_Decoder):
    """A :mod:`struct` format: tuples (or scalars for one-field formats)."""

    def __init__(self, hdr: int, sc: StructCodec) -> None:
        super().__init__(hdr)
        self.codec = sc
        self.need = sc.size
        self.scalar = sc.scalar
        self._unpack = sc.struct.unpack_from
        self._body: str | None
        try:
            self._order, self._body = _explicit_body(sc.format)
        except SizeError:                     # decode record by record instead
            self._order, self._body = "", None
        self._structs: dict[int, Any] = {}

    def _struct_for(self, stride: int) -> Any:    # a struct.Struct, or False
        if self._body is None:
            self._structs[stride] = False
            return False
        st: Any = struct.Struct(
            f"{self._order}{self.hdr}x{self._body}{stride - self.hdr - self.need}x")
        # paranoia: the combined layout must decode like the user's format
        probe = bytes((i * 37 + 11) & 0xFF for i in range(stride))
        if repr(st.unpack_from(probe)) != repr(self._unpack(probe, self.hdr)):
            st = False
        self._structs[stride] = st
        return st

    def run(self, d: _Buf, off: int, n: int, stride: int, plen: int, out: list[Any]) -> None:
        st = self._structs.get(stride)
        if st is None:
            st = self._struct_for(stride)
        if st is False:                       # could not re-express: per record
            u = self._unpack
            if self.scalar:
                out.extend([u(d, a)[0] for a in range(off + self.hdr, off + n * stride, stride)])
            else:
                out.extend([u(d, a) for a in range(off + self.hdr, off + n * stride, stride)])
            return
        it = st.iter_unpack(d[off:off + n * stride])
        out.extend(map(_first, it) if self.scalar else it)

    def one(self, buf: _Buf, off: int, plen: int, out: list[Any]) -> None:
        t = self._unpack(buf, off)
        out.append(t[0] if self.scalar else t)


class _UnpackDecoder(_Decoder):
    """Any other codec: ``unpack_from(buffer, offset)`` per record."""

    def __init__(self, hdr: int, c: Codec) -> None:
        super().__init__(hdr)
        self.need = c.size
        self._unpack = c.unpack_from

    def run(self, d: _Buf, off: int, n: int, stride: int, plen: int, out: list[Any]) -> None:
        u = self._unpack
        out.extend([u(d, a) for a in range(off + self.hdr, off + n * stride, stride)])

    def one(self, buf: _Buf, off: int, plen: int, out: list[Any]) -> None:
        out.append(self._unpack(buf, off))


class _CtypesDecoder(_RawDecoder):
    """A ctypes type: instances made by ``from_buffer_copy`` (mapped in C over a run)."""

    def __init__(self, hdr: int, c: CtypesCodec) -> None:
        super().__init__(hdr, c.size)
        self._make: Callable[..., Any] = c.ctype.from_buffer_copy

    def run(self, d: _Buf, off: int, n: int, stride: int, plen: int, out: list[Any]) -> None:
        tmp: list[Any] = []
        super().run(d, off, n, stride, plen, tmp)
        out.extend(map(self._make, tmp))

    def one(self, buf: _Buf, off: int, plen: int, out: list[Any]) -> None:
        out.append(self._make(buf, off))


class _CallDecoder(_Decoder):
    """A user function applied to each payload's ``bytes``."""

    def __init__(self, hdr: int, fn: Callable[[bytes], Any]) -> None:
        super().__init__(hdr)
        self.fn = fn
        self._raw = _RawDecoder(hdr)

    def run(self, d: _Buf, off: int, n: int, stride: int, plen: int, out: list[Any]) -> None:
        tmp: list[Any] = []
        self._raw.run(d, off, n, stride, plen, tmp)
        out.extend(map(self.fn, tmp))

    def one(self, buf: _Buf, off: int, plen: int, out: list[Any]) -> None:
        out.append(self.fn(bytes(buf[off:off + plen])))


class _ArrayDecoder(_Decoder):
    """numpy: runs become array chunks (one strided copy), single records bytes."""

    def __init__(self, hdr: int, np: Any, dtype: Any) -> None:
        super().__init__(hdr)
        self.np = np
        self.dtype = dtype
        self.need = dtype.itemsize
        self._wraps: dict[int, Any] = {}

    def run(self, d: _Buf, off: int, n: int, stride: int, plen: int, out: list[Any]) -> None:
        w = self._wraps.get(stride)
        if w is None:
            w = self._wraps[stride] = self.np.dtype({"names": ["p"], "formats": [self.dtype],
                                                     "offsets": [self.hdr], "itemsize": stride})
        out.append(self.np.frombuffer(d, w, n, off)["p"].copy())

    def one(self, buf: _Buf, off: int, plen: int, out: list[Any]) -> None:
        out.append(bytes(buf[off:off + self.need]))

    def finish(self, chunks: list[Any]) -> Any:
        np = self.np
        parts: list[Any] = []
        raw: list[bytes] = []
        for c in chunks:
            if isinstance(c, bytes):
                raw.append(c)
                continue
            if raw:
                parts.append(np.frombuffer(b"".join(raw), self.dtype).copy())
                raw = []
            parts.append(c)
        if raw:
            parts.append(np.frombuffer(b"".join(raw), self.dtype).copy())
        if not parts:
            return np.empty(0, self.dtype)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _is_ctype(spec: Any) -> bool:
    """Whether ``spec`` is a ctypes type (there is none before ctypes is imported:
    this module does not import it)."""
    ctypes = sys.modules.get("ctypes")
    return ctypes is not None and isinstance(spec, type) and issubclass(
        spec, (ctypes._SimpleCData, ctypes.Structure, ctypes.Union, ctypes.Array))


def make_decoder(spec: Any, hdr: int) -> tuple[_Decoder, Codec | None]:
    """The decoder of ``decode=`` (``spec``) for payloads at offset ``hdr`` of a
    record, and the codec it uses (None: raw bytes or a function)."""
    if spec is None:
        return _RawDecoder(hdr), None
    if isinstance(spec, (Codec, str, int, struct.Struct)) or _is_ctype(spec):
        c = codec(spec, "event")
        if isinstance(c, StructCodec):
            return _StructDecoder(hdr, c), c
        if isinstance(c, BytesCodec):
            return _RawDecoder(hdr, c.size), c
        if isinstance(c, CtypesCodec):
            return _CtypesDecoder(hdr, c), c
        return _UnpackDecoder(hdr, c), c
    if callable(spec):
        return _CallDecoder(hdr, spec), None
    raise SizeError(f"decode={spec!r}: use a codec spec ('u64', '<QQ', a ctypes Structure, "
                    "Bytes(n)) or a function of the payload bytes")
