"""How values of the language are laid out as bytes -- on the BPF stack, in
map keys and values, in event records -- and how those bytes read back as
Python values.

Code generation writes by this layout and the runtime reads by it, so the
two halves live together here:

- an integer takes its type's size (1, 2, 4 or 8 bytes, little-endian),
  aligned to it; map values and event fields hold integers as 8 bytes;
- a string or buffer takes its type's size, alignment 1, NUL-padded (a
  counted buffer: one length byte more, first);
- a tuple is a C struct of its elements (each aligned as above, the whole
  rounded up to its largest alignment);
- a C struct or union (``record`` with a ``struct``) takes its C size and
  alignment, a C array its elements' (laid out one after the other);
- a user symbol (``usym()``, ``func`` in a uprobe) is two 8-byte integers,
  the address and the process id, as bpftrace 0.17 stores one: it is named
  in that process, whichever process it was;
- every other kind (stack ids, kernel symbols, the probe index,
  addresses...) is one 8-byte integer.

:func:`decode` gives ints (signed as the type says; a user symbol's is a
:class:`UserAddress`, an int with its ``pid``), ``str`` for strings (up to
the first NUL, undecodable bytes replaced), ``bytes`` for buffers, tuples
for tuples, a :class:`StructValue` (a tuple of the field values that
knows their names) for a C struct or union and a tuple for a C array.
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .types import Type

__all__ = ["size_align", "tuple_layout", "stored_size", "decode", "decode_int", "decode_record",
           "UserAddress", "StructValue"]

#: the bytes of a user symbol: its address, then the process id
USYM_SIZE = 16


class UserAddress(int):
    """A user-space address read back with the process it belongs to
    (``pid``, 0 when unknown): a ``usym()`` or uprobe ``func`` value."""

    pid: int

    def __new__(cls, addr: int, pid: int = 0) -> UserAddress:
        self = super().__new__(cls, addr)
        self.pid = pid
        return self


def size_align(t: Type) -> tuple[int, int]:
    """``(size, alignment)`` of a value of type ``t`` as laid out in bytes."""
    kind = t.kind
    if kind == "int":
        size = t.size if t.size in (1, 2, 4, 8) else 8
        return size, size
    if kind in ("string", "buffer"):
        return max(t.size + t.counted, 1), 1
    if kind == "tuple":
        _, size, align = tuple_layout(t.elems)
        return size, align
    if kind == "usym":
        return USYM_SIZE, 8
    if kind == "record" and t.struct is not None:
        return t.struct.size, t.struct.align
    if kind == "macaddr":
        return 6, 1
    if kind == "array" and t.elem is not None:
        return t.size, size_align(t.elem)[1]
    if kind == "inet" and t.size == 16:       # ntop() of 16 bytes: they are kept
        return 16, 1
    return 8, 8


def tuple_layout(elems: tuple[Type, ...] | list[Type]) -> tuple[list[int], int, int]:
    """``(offsets, size, alignment)`` of a C struct of ``elems``."""
    offsets: list[int] = []
    pos = 0
    top = 1
    for e in elems:
        size, align = size_align(e)
        pos = (pos + align - 1) // align * align
        offsets.append(pos)
        pos += size
        top = max(top, align)
    size = (pos + top - 1) // top * top
    return offsets, max(size, 1), top


def stored_size(t: Type) -> int:
    """The bytes a value of ``t`` takes, rounded up to 8 (map keys, values)."""
    size, _ = size_align(t)
    return (size + 7) // 8 * 8


def decode_int(raw: bytes | memoryview, size: int, signed: bool) -> int:
    """A little-endian integer of ``size`` bytes."""
    return int.from_bytes(bytes(raw[:size]), "little", signed=signed)


def decode(t: Type, raw: bytes | memoryview, *, whole: bool = False) -> object:
    """The Python value of the bytes ``raw`` laid out as ``t`` (see the module
    docs); a counted buffer gives its bytes up to its length, or every byte
    with ``whole`` (how bpftrace 0.17 prints one in a map key)."""
    kind = t.kind
    if kind == "int":
        size, _ = size_align(t)
        return decode_int(raw, size, t.signed)
    if kind == "string":
        data = bytes(raw[:t.size])
        end = data.find(b"\0")
        return (data if end < 0 else data[:end]).decode("utf-8", "replace")
    if kind == "buffer" and t.counted:
        n = t.size if whole or not len(raw) else min(raw[0], t.size)
        return bytes(raw[1:1 + n])
    if kind in ("buffer", "macaddr") or (kind == "inet" and t.size == 16):
        return bytes(raw[:t.size])
    if kind == "tuple":
        offsets, _, _ = tuple_layout(t.elems)
        return tuple(decode(e, raw[o:], whole=whole) for e, o in zip(t.elems, offsets))
    if kind in ("sum", "min", "max", "avg", "stats"):
        return decode_int(raw, 8, t.signed)
    if kind == "usym":
        return UserAddress(decode_int(raw, 8, False), decode_int(raw[8:], 8, False))
    if kind == "record" and t.struct is not None:
        return decode_record(t, raw)
    if kind == "array" and t.elem is not None:
        n = t.elem.size
        return tuple(decode(t.elem, raw[i * n:]) for i in range(t.count))
    return decode_int(raw, 8, False)


class StructValue(tuple):  # type: ignore[type-arg]
    """A C struct or union read back: its field values in order (a tuple:
    hashable, so it can be a map's key), ``names`` the fields' names."""

    names: tuple[str, ...]

    def __new__(cls, values: dict[str, object]) -> StructValue:
        self = super().__new__(cls, values.values())
        self.names = tuple(values)
        return self

    def asdict(self) -> dict[str, object]:
        """The fields, name -> value."""
        return dict(zip(self.names, self))

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{n}={v!r}" for n, v in zip(self.names, self)) + "}"


def decode_record(t: Type, raw: bytes | memoryview) -> StructValue:
    """A C struct or union's fields, bit fields extracted; an anonymous
    member's fields in its place."""
    assert t.struct is not None
    out: dict[str, object] = {}
    for f in t.struct.fields:
        if f.bitfield is not None:
            word = decode_int(raw[f.offset:], f.type.size, False)
            # (zero-extended, as the language reads a bit field: bpftrace 0.17's rule)
            out[f.name] = (word >> f.bitfield.shift) & ((1 << f.bitfield.width) - 1)
            continue
        v = decode(f.type, raw[f.offset:f.offset + max(f.type.size, 1)])
        if not f.name and isinstance(v, StructValue):
            out.update(v.asdict())
        else:
            out[f.name] = v
    return StructValue(out)
