"""Reading BTF: the header, a lazy index of the type records, types on demand.

Opening a blob checks its header and walks the type section once, keeping
only the word offset of each record in a packed array (the record lengths are
looked up by their info word, so the walk is a few bytecodes per record).
A type is decoded when it is asked for and then cached; a name is found by
searching the string table for it and the records' name offsets for the
offsets found (both at C speed), so no string is decoded and no dictionary
built that nobody asked for.

The kernel's BTF (``/sys/kernel/btf/*``, several MB) is mapped, not read,
and its index -- the record offsets and the named types sorted by name, so
a name is found by binary search -- is kept in an on-disk cache
(:mod:`.indexcache`) keyed by the file's identity: a new process opens the
kernel's BTF without walking its ~130,000 records.

Split BTF (a kernel module's, on top of vmlinux) is opened with ``base=``:
its ids continue after the base's, and string offsets past the base's
string table refer to its own.
"""
from __future__ import annotations

import os
import struct
import sys

from .errors import BtfError
from .types import EnumValue, Kind, Member, Param, Type, VarSecinfo, kind_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from mmap import mmap
    from typing import Any, BinaryIO, Callable, Iterator, Sequence

__all__ = ["Btf", "MAGIC", "HEADER", "VMLINUX"]

MAGIC = 0xEB9F
#: ``struct btf_header``: magic, version, flags, hdr_len, type_off, type_len, str_off, str_len
HEADER = struct.Struct("<HBBIIIII")
VMLINUX = "/sys/kernel/btf/vmlinux"
MAX_VLEN = 0xFFFF
#: kind -> (fixed extra 32-bit words after the 12-byte common part, words per vlen entry)
_EXTRA = {Kind.INT: (1, 0), Kind.PTR: (0, 0), Kind.ARRAY: (3, 0), Kind.STRUCT: (0, 3),
          Kind.UNION: (0, 3), Kind.ENUM: (0, 2), Kind.FWD: (0, 0), Kind.TYPEDEF: (0, 0),
          Kind.VOLATILE: (0, 0), Kind.CONST: (0, 0), Kind.RESTRICT: (0, 0), Kind.FUNC: (0, 0),
          Kind.FUNC_PROTO: (0, 2), Kind.VAR: (1, 0), Kind.DATASEC: (0, 3), Kind.FLOAT: (0, 0),
          Kind.DECL_TAG: (1, 0), Kind.TYPE_TAG: (0, 0), Kind.ENUM64: (0, 3)}
#: kind number -> (words of the fixed part, words per vlen entry); None: no such kind
_STEP = tuple((3 + _EXTRA[k][0], _EXTRA[k][1]) if k in _EXTRA else None
              for k in range(32))
_VOID = Type(Kind.UNKN, "void")
#: where the kernel's BTF files are (mapped rather than read; their index cached)
KERNEL_BTF_DIR = "/sys/kernel/btf/"


def _words(data: memoryview) -> Sequence[int]:
    """``data`` as little-endian unsigned 32-bit words (a view: no copy, on
    a little-endian host)."""
    if sys.byteorder == "little":
        return data.cast("I")
    from array import array
    out = array("I")
    out.frombytes(data)
    out.byteswap()
    return out


def u32s(values: Sequence[int]) -> memoryview:
    """``values`` packed as native unsigned 32-bit words, viewed as a read-only
    sequence of ints (what an ``array("I")`` holds, without importing
    :mod:`array`: it imports :mod:`collections`, ~2 ms of a cold start)."""
    return memoryview(struct.pack(f"={len(values)}I", *values)).cast("I")


def _map(f: BinaryIO) -> mmap | None:
    """A read-only mapping of an open file, or None where it cannot be mapped
    (the kernel maps ``/sys/kernel/btf/*`` since 6.16)."""
    import mmap
    try:
        return mmap.mmap(f.fileno(), 0, mmap.MAP_PRIVATE, mmap.PROT_READ)
    except (OSError, ValueError):
        return None


def _record_offsets(words: Sequence[int], first_id: int, types_at: int) -> Sequence[int]:
    """The word offset of each type record: one walk, each record's length
    (in words) looked up by its info word (kind and vlen) in a table filled
    on first sight, so a record costs one dictionary lookup."""
    lengths: dict[int, int] = {}
    offsets: list[int] = []
    add = offsets.append
    n = len(words)
    i = 0
    while True:
        try:
            while True:
                add(i)
                i += lengths[words[i + 1]]
        except KeyError:                    # an info word not seen yet
            offsets.pop()
            info = words[i + 1]
            step = _STEP[info >> 24 & 0x1F]
            if step is None:
                raise BtfError(f"unknown kind {info >> 24 & 0x1F}", types_at + 4 * i + 4,
                               first_id + len(offsets)) from None
            lengths[info] = step[0] + step[1] * (info & 0xFFFF)
        except IndexError:                  # past the last record (or into it)
            offsets.pop()
            break
    if i == n:
        return u32s(offsets)
    if i < n:
        raise BtfError("truncated type record", types_at + 4 * i, first_id + len(offsets))
    raise BtfError("last type record runs past the type section",
                   types_at + 4 * offsets[-1], first_id + len(offsets) - 1)


def search_sorted(seq: Sequence[Any], want: Any, lo: int = 0,
                  key: Callable[[Any], Any] | None = None, after: bool = False) -> int:
    """Where ``want`` goes in ``seq`` (sorted by ``key``) from ``lo`` on: before
    the equal items, or after them (``after``): ``bisect_left`` and
    ``bisect_right``, without loading :mod:`bisect`'s shared library (a
    cold object load's search is a few dozen steps)."""
    hi = len(seq)
    while lo < hi:
        mid = (lo + hi) // 2
        k = seq[mid] if key is None else key(seq[mid])
        if k < want or (after and k == want):
            lo = mid + 1
        else:
            hi = mid
    return lo


class Btf:
    """A parsed BTF blob (``.BTF`` of an object, ``/sys/kernel/btf/*``).

    ``btf[type_id]`` is a :class:`~.types.Type` (id 0 is ``void``);
    ``len(btf)`` the number of ids (void included, base included for split
    BTF).  Damaged data raises :class:`BtfError` naming the offset.
    """

    strings_size: int
    flags: int
    hdr_len: int
    _words: Sequence[int]
    _offsets: Sequence[int]

    def __init__(self, data: bytes | bytearray | memoryview | mmap, base: Btf | None = None,
                 name: str = "", *, index: tuple[Sequence[int], Sequence[int]] | None = None
                 ) -> None:
        self.name = name
        self.base = base
        #: the blob (bytes; for the kernel's BTF a read-only mapping of it)
        self.data: bytes | mmap = (bytes(data) if isinstance(data, (bytes, bytearray, memoryview))
                                   else data)
        self._parse_header()
        self._first_id = len(base) if base is not None else 1
        self._str_base = base.strings_size if base is not None else 0
        self._name_offs: Sequence[int] | None = None
        self._name_bytes = b""
        #: ids of the named types sorted by name (then id), when an index gave them
        self._by_name: Sequence[int] | None = None
        if index is None or not self._adopt(*index):
            self._index()
        self._cache: dict[int, Type] = {}

    # ------------------------------------------------------------- construction
    @classmethod
    def load(cls, path: str, base: Btf | None = None, *, cache: bool = True) -> Btf:
        """The BTF in a raw file (``/sys/kernel/btf/NAME``) or in the ``.BTF``
        section of an ELF object.  The kernel's files are mapped, and their
        index comes from (and goes to) the on-disk cache unless ``cache`` is
        False."""
        kernel = path.startswith(KERNEL_BTF_DIR)
        try:
            with open(path, "rb") as f:
                head = f.read(4)
                if head == b"\x7fELF":
                    return cls.from_elf(path, base)
                mapped = _map(f) if kernel else None
                data: bytes | mmap = head + f.read() if mapped is None else mapped
                st = os.fstat(f.fileno())
        except OSError as exc:
            raise BtfError(f"cannot read {path}: {exc.strerror or exc}") from None
        if not (kernel and cache):
            return cls(data, base, name=path)
        from . import indexcache
        if indexcache.cache_dir() is None:
            return cls(data, base, name=path)
        key = indexcache.identity(st, data)
        index = indexcache.load(path, key)
        btf = cls(data, base, name=path, index=index)
        if index is None or btf._by_name is None:
            btf._sort_names()
            assert btf._by_name is not None
            indexcache.store(path, key, btf._offsets, btf._by_name)
        return btf

    @classmethod
    def from_elf(cls, path: str, base: Btf | None = None) -> Btf:
        """The ``.BTF`` section of the ELF file at ``path``."""
        data = elf_section(path, ".BTF")
        if data is None:
            raise BtfError(f"{path} has no .BTF section (compile with clang -g)")
        return cls(data, base, name=f"{path}:.BTF")

    @classmethod
    def vmlinux(cls) -> Btf:
        """The running kernel's BTF (``/sys/kernel/btf/vmlinux``)."""
        return cls.load(VMLINUX)

    @classmethod
    def kernel_module(cls, module: str, base: Btf | None = None) -> Btf:
        """A loaded module's split BTF on top of vmlinux (``base``, default: read it)."""
        return cls.load(f"/sys/kernel/btf/{module}", base if base is not None else cls.vmlinux())

    # -------------------------------------------------------------- the header
    def _parse_header(self) -> None:
        d = self.data
        if len(d) < HEADER.size:
            raise BtfError(f"{len(d)} bytes is too short for a BTF header ({HEADER.size})", 0)
        magic, version, flags, hdr_len, type_off, type_len, str_off, str_len = \
            HEADER.unpack_from(d, 0)
        if magic != MAGIC:
            if magic == 0x9FEB:
                raise BtfError("big-endian BTF is not supported", 0)
            raise BtfError(f"bad magic {magic:#06x} (BTF starts with 0xeb9f)", 0)
        if version != 1:
            raise BtfError(f"unsupported BTF version {version}", 2)
        if hdr_len < HEADER.size or hdr_len > len(d):
            raise BtfError(f"header length {hdr_len} outside {HEADER.size}..{len(d)}", 4)
        if any(d[HEADER.size:hdr_len]):
            raise BtfError("unknown non-zero header fields", HEADER.size)
        for what, off, length, at in (("type", type_off, type_len, 8), ("string", str_off, str_len, 16)):
            if hdr_len + off + length > len(d):
                raise BtfError(f"{what} section ({off}+{length} after the header) runs past "
                               f"the end of the {len(d)}-byte blob", at)
        if type_off % 4 or type_len % 4:
            raise BtfError(f"type section at {type_off}, {type_len} bytes: not 4-byte aligned", 8)
        if type_off < str_off + str_len and str_off < type_off + type_len:
            raise BtfError("type and string sections overlap", 8)
        self.flags = flags
        self.hdr_len = hdr_len
        self._types_at = hdr_len + type_off
        self._types_len = type_len
        self._strs_at = hdr_len + str_off
        self.strings_size = str_len + (self.base.strings_size if self.base is not None else 0)
        #: the string table is data[_strs_at:_strs_end] (searched in place, not copied)
        self._strs_end = self._strs_at + str_len
        if str_len and d[self._strs_end - 1] != 0:
            raise BtfError("string section does not end with a NUL", self._strs_end - 1)
        if self.base is None and str_len and d[self._strs_at] != 0:
            raise BtfError("string section does not start with the empty string", self._strs_at)

    def _type_words(self) -> Sequence[int]:
        return _words(memoryview(self.data)[self._types_at:self._types_at + self._types_len])

    def _index(self) -> None:
        """One walk over the type records: their word offsets."""
        self._words = self._type_words()
        self._offsets = _record_offsets(self._words, self._first_id, self._types_at)

    def _adopt(self, offsets: Sequence[int], by_name: Sequence[int]) -> bool:
        """Take an index computed before (the on-disk cache's) if it fits
        this blob: its records, spot-checked, have the lengths their info
        words give and the last one ends the type section."""
        words = self._type_words()
        n = len(offsets)
        if not n or offsets[0] != 0:
            return False
        for k in {*range(0, n - 1, max(n // 64, 1)), n - 1}:
            i = offsets[k]
            end = offsets[k + 1] if k + 1 < n else len(words)
            if i + 1 >= len(words):
                return False
            info = words[i + 1]
            step = _STEP[info >> 24 & 0x1F]
            if step is None or i + step[0] + step[1] * (info & 0xFFFF) != end:
                return False
        if by_name and not self._first_id <= max(by_name[0], by_name[-1]) < self._first_id + n:
            return False
        self._words = words
        self._offsets = offsets
        self._by_name = by_name
        return True

    # ----------------------------------------------------------------- strings
    def string(self, offset: int) -> str:
        """The string at ``offset`` of the string table (split BTF: base's first)."""
        if offset < self._str_base:
            assert self.base is not None
            return self.base.string(offset)
        at = self._strs_at + offset - self._str_base
        if at >= self._strs_end:
            raise BtfError(f"string offset {offset} outside the {self.strings_size}-byte "
                           "string table", self._strs_at)
        d = self.data
        try:
            return d[at:d.find(b"\0", at, self._strs_end)].decode()
        except UnicodeDecodeError:
            raise BtfError(f"string at offset {offset} is not UTF-8",
                           at) from None

    def strings(self) -> bytes:
        """This blob's own string table (split BTF: without the base's)."""
        return bytes(self.data[self._strs_at:self._strs_end])

    # ------------------------------------------------------------------ types
    def __len__(self) -> int:
        return self._first_id + len(self._offsets)

    @property
    def first_id(self) -> int:
        """The id of this blob's first own type (1, or the base's length for split BTF)."""
        return self._first_id

    def __iter__(self) -> Iterator[Type]:
        """Every type of this blob and its base, from id 0 (void)."""
        for i in range(len(self)):
            yield self[i]

    def ids(self) -> range:
        """The ids of this blob's own types."""
        return range(self._first_id, len(self))

    def __getitem__(self, type_id: int) -> Type:
        if type_id < self._first_id:
            if self.base is not None:
                return self.base[type_id]
            if type_id == 0:
                return _VOID
        t = self._cache.get(type_id)
        if t is None:
            if not self._first_id <= type_id < len(self):
                raise BtfError(f"no such type (ids go up to {len(self) - 1})", type_id=type_id)
            t = self._cache[type_id] = self._decode(type_id)
        return t

    def record_at(self, type_id: int) -> int:
        """The byte offset of an own type's record in :attr:`data` (for
        patching a copy of the blob in place)."""
        if not self._first_id <= type_id < len(self):
            raise BtfError(f"no such type (own ids are {self._first_id}..{len(self) - 1})",
                           type_id=type_id)
        at: int = self._types_at + 4 * self._offsets[type_id - self._first_id]
        return at

    def sections(self) -> tuple[int, int, int, int]:
        """(start, length) of the type section, then of the string section, as
        byte offsets in :attr:`data`."""
        return (self._types_at, self._types_len, self._strs_at,
                self._strs_end - self._strs_at)

    def kind(self, type_id: int) -> int:
        """The kind of a type, without decoding the rest of it."""
        if type_id < self._first_id:
            return self.base.kind(type_id) if self.base is not None else Kind.UNKN
        if type_id >= len(self):
            raise BtfError(f"no such type (ids go up to {len(self) - 1})", type_id=type_id)
        return (self._words[self._offsets[type_id - self._first_id] + 1] >> 24) & 0x1F

    def _decode(self, type_id: int) -> Type:
        w = self._words
        i = self._offsets[type_id - self._first_id]
        at = self._types_at + 4 * i
        try:
            return self._decode_at(w, i, type_id)
        except BtfError as exc:
            if exc.offset is None:
                raise BtfError(exc.reason, at, type_id) from None
            raise

    def _check_ref(self, ref: int, what: str) -> int:
        if ref >= len(self):
            raise BtfError(f"{what} refers to type [{ref}], past the last id {len(self) - 1}")
        return ref

    def _decode_at(self, w: Sequence[int], i: int, type_id: int) -> Type:
        info = w[i + 1]
        kind = (info >> 24) & 0x1F
        vlen = info & 0xFFFF
        kflag = bool(info >> 31)
        name = self.string(w[i])
        st = w[i + 2]
        s = self.string
        ref = self._check_ref
        if kind == Kind.INT:
            v = w[i + 3]
            return Type(kind, name, kind_flag=kflag, size=st, encoding=(v >> 24) & 0xF,
                        bit_offset=(v >> 16) & 0xFF, bits=v & 0xFF)
        if kind == Kind.ARRAY:
            return Type(kind, name, kind_flag=kflag, elem=ref(w[i + 3], "array element"),
                        index=ref(w[i + 4], "array index"), nelems=w[i + 5])
        if kind in (Kind.STRUCT, Kind.UNION):
            return Type(kind, name, kind_flag=kflag, size=st,
                        members=self._members(w, i + 3, vlen, kflag))
        if kind == Kind.ENUM:
            signed = kflag
            vals = []
            for j in range(i + 3, i + 3 + 2 * vlen, 2):
                v = w[j + 1]
                vals.append(EnumValue(s(w[j]), v - (1 << 32) if signed and v >> 31 else v))
            return Type(kind, name, kind_flag=kflag, size=st, values=tuple(vals))
        if kind == Kind.ENUM64:
            vals = []
            for j in range(i + 3, i + 3 + 3 * vlen, 3):
                v = w[j + 1] | (w[j + 2] << 32)
                vals.append(EnumValue(s(w[j]), v - (1 << 64) if kflag and v >> 63 else v))
            return Type(kind, name, kind_flag=kflag, size=st, values=tuple(vals))
        if kind == Kind.FUNC_PROTO:
            params = tuple(Param(s(w[j]), ref(w[j + 1], "parameter"))
                           for j in range(i + 3, i + 3 + 2 * vlen, 2))
            return Type(kind, name, kind_flag=kflag, ref=ref(st, "return type"), params=params)
        if kind == Kind.DATASEC:
            sec = tuple(VarSecinfo(ref(w[j], "datasec entry"), w[j + 1], w[j + 2])
                        for j in range(i + 3, i + 3 + 3 * vlen, 3))
            return Type(kind, name, kind_flag=kflag, size=st, secinfo=sec)
        if kind == Kind.VAR:
            return Type(kind, name, kind_flag=kflag, ref=ref(st, "variable"), linkage=w[i + 3])
        if kind == Kind.DECL_TAG:
            idx = w[i + 3]
            return Type(kind, name, kind_flag=kflag, ref=ref(st, "tag"),
                        component_idx=idx - (1 << 32) if idx >> 31 else idx)
        if kind == Kind.FUNC:
            return Type(kind, name, kind_flag=kflag, ref=ref(st, "function"), linkage=vlen)
        if kind in (Kind.FWD, Kind.FLOAT):
            return Type(kind, name, kind_flag=kflag, size=st if kind == Kind.FLOAT else 0)
        return Type(kind, name, kind_flag=kflag, ref=ref(st, kind_name(kind).lower()))

    def _members(self, w: Sequence[int], at: int, vlen: int, kflag: bool) -> tuple[Member, ...]:
        """The ``vlen`` members of a STRUCT/UNION from word ``at`` (the hot loop
        of decoding the kernel's big structs: the bounds taken once)."""
        limit = len(self)
        d, base, end = self.data, self._str_base, self._strs_end
        strs = self._strs_at - base
        members = []
        for j in range(at, at + 3 * vlen, 3):
            t = w[j + 1]
            if t >= limit:
                self._check_ref(t, "member")
            # the name as string() reads it (its errors, and split BTF's base, through it)
            no = w[j]
            if no >= base and (k := strs + no) < end:
                try:
                    name = d[k:d.find(b"\0", k, end)].decode()
                except UnicodeDecodeError:
                    name = self.string(no)
            else:
                name = self.string(no)
            off = w[j + 2]
            if kflag:
                members.append(Member(name, t, off & 0xFFFFFF, off >> 24))
            else:
                members.append(Member(name, t, off, 0))
        return tuple(members)

    # ------------------------------------------------------------------ names
    def _name_offsets_of_types(self) -> Sequence[int]:
        """The name offset of every own type record (made on first need)."""
        if self._name_offs is None:
            offs = u32s(list(map(self._words.__getitem__, self._offsets)))
            self._name_bytes = offs.tobytes()
            self._name_offs = offs
        return self._name_offs

    def _ids_named_at(self, offset: int) -> Iterator[int]:
        """The ids of this blob's own types whose name is at string ``offset``
        (a byte search of the name-offset array: no index to build)."""
        self._name_offsets_of_types()
        raw = self._name_bytes
        needle = struct.pack("=I", offset)
        first = self._first_id
        at = raw.find(needle)
        while at >= 0:
            if at % 4 == 0:
                yield first + at // 4
            at = raw.find(needle, at + 1)

    def _name_offsets(self, name: str, prefix: bool = False) -> Iterator[int]:
        """Offsets in the string table where a string equal to ``name`` (or
        starting with it: ``prefix``) starts (suffix-shared strings included)."""
        needle = name.encode()
        if not prefix:
            needle += b"\0"
        d, start, end = self.data, self._strs_at, self._strs_end
        base = self._str_base - start
        at = d.find(needle, start, end)
        while at >= 0:
            yield base + at
            at = d.find(needle, at + 1, end)

    def _raw_name(self, type_id: int) -> bytes:
        """The name of an own type as bytes (for sorting and binary search)."""
        off = self._words[self._offsets[type_id - self._first_id]]
        if off < self._str_base:
            assert self.base is not None
            return self.base.string(off).encode()
        d = self.data
        at = self._strs_at + off - self._str_base
        if at >= self._strs_end:
            raise BtfError(f"name offset {off} outside the {self.strings_size}-byte string "
                           "table", type_id=type_id)
        return d[at:d.find(b"\0", at, self._strs_end)]

    def _sort_names(self) -> None:
        """Make the by-name index: the ids of the named types, sorted by name
        (ties by id), for binary searches instead of string-table scans."""
        names = self._name_offsets_of_types()
        first = self._first_id
        named = [first + k for k, off in enumerate(names) if off]
        self._by_name = u32s(sorted(named, key=self._raw_name))

    def _named(self, name: str, prefix: bool) -> list[int]:
        """Own ids whose name is ``name`` (or starts with it), in id order."""
        by_name = self._by_name
        if by_name is None:
            offsets = set(self._name_offsets(name, prefix))
            if len(offsets) <= 8:
                return sorted({i for off in offsets for i in self._ids_named_at(off)})
            first = self._first_id          # many: one pass over the name offsets
            return [first + k for k, off in enumerate(self._name_offsets_of_types())
                    if off in offsets]
        key = self._raw_name
        want = name.encode()
        try:
            lo = search_sorted(by_name, want, 0, key)
            hi = search_sorted(by_name, want + b"\xff" if prefix else want, lo, key,
                               after=not prefix)
        except (IndexError, BtfError):      # an index naming ids this blob has not
            self._by_name = None
            return self._named(name, prefix)
        return sorted(by_name[lo:hi])

    def find(self, name: str, kind: int | None = None) -> list[int]:
        """The ids of this blob's own types called ``name`` (of ``kind``), in id
        order; split BTF: the base's first."""
        out = self.base.find(name, kind) if self.base is not None else []
        if not name:
            return out
        mine = self._named(name, prefix=False)
        if kind is not None:
            mine = [i for i in mine if self.kind(i) == kind]
        return out + mine

    def find_prefixed(self, prefix: str) -> list[int]:
        """The ids of types whose name starts with ``prefix`` (base's too)."""
        out = self.base.find_prefixed(prefix) if self.base is not None else []
        return out + self._named(prefix, prefix=True)

    def type_id(self, name: str, kind: int | None = None) -> int:
        """The one type called ``name`` (of ``kind``; a STRUCT, UNION, ENUM,
        TYPEDEF... ``"struct task_struct"`` also works).  Raises :class:`BtfError`
        if there is none; the first if there are several."""
        name, kind = _split_tagged(name, kind)
        ids = self.find(name, kind)
        if not ids:
            from ..errors import close_matches
            what = f"{kind_name(kind).lower()} " if kind is not None else ""
            hint = ""
            if len(self) < 50000:
                near = close_matches(name, {t.name for t in self if t.name})
                hint = f" (did you mean {', '.join(near)}?)" if near else ""
            raise BtfError(f"no type {what}{name!r} in {self.name or 'this BTF'}{hint}")
        return ids[0]

    # ---------------------------------------------------------------- queries
    def resolve(self, type_id: int) -> int:
        """Follow typedefs and qualifiers (const, volatile, restrict, type tags)."""
        from .types import MODIFIERS
        seen = 0
        while self.kind(type_id) in MODIFIERS:
            type_id = self[type_id].ref
            seen += 1
            if seen > 64:
                raise BtfError("typedef/qualifier chain longer than 64 (a loop?)",
                               type_id=type_id)
        return type_id

    def size_of(self, type_id: int) -> int:
        """The size in bytes of a type (pointers: 8); VAR: its variable's."""
        depth = 0
        mult = 1
        while True:
            t = self[type_id]
            k = t.kind
            if k in (Kind.INT, Kind.STRUCT, Kind.UNION, Kind.ENUM, Kind.ENUM64, Kind.DATASEC,
                     Kind.FLOAT):
                return mult * t.size
            if k == Kind.PTR:
                return mult * 8
            if k == Kind.ARRAY:
                mult *= t.nelems
                type_id = t.elem
            elif k in (Kind.TYPEDEF, Kind.VOLATILE, Kind.CONST, Kind.RESTRICT, Kind.TYPE_TAG,
                       Kind.VAR):
                type_id = t.ref
            else:
                raise BtfError(f"a {kind_name(k)} has no size", type_id=type_id)
            depth += 1
            if depth > 64:
                raise BtfError("type chain longer than 64 (a loop?)", type_id=type_id)

    def align_of(self, type_id: int, _depth: int = 0) -> int:
        """The C alignment of a type (what clang would use on x86-64/BPF)."""
        if _depth > 32:
            raise BtfError("types nested deeper than 32 (a loop?)", type_id=type_id)
        tid = self.resolve(type_id)
        t = self[tid]
        if t.kind in (Kind.INT, Kind.ENUM, Kind.ENUM64, Kind.FLOAT):
            return min(max(t.size, 1), 8)
        if t.kind == Kind.PTR:
            return 8
        if t.kind == Kind.ARRAY:
            return self.align_of(t.elem, _depth + 1)
        if t.is_composite:
            best = 1
            for m in t.members:
                align = self.align_of(m.type, _depth + 1)
                best = max(best, align)
                if m.bitfield_size == 0 and m.bit_offset % (8 * align):
                    return 1        # packed
            return best
        raise BtfError(f"a {kind_name(t.kind)} has no alignment", type_id=tid)

    def member_path(self, type_id: int, path: str) -> list[tuple[int, Member]]:
        """The members named by a dotted ``path`` (``"se.vruntime"``), each with
        the composite id that holds it; anonymous struct/union members are
        searched through as C does."""
        out: list[tuple[int, Member]] = []
        tid = type_id
        for part in path.split("."):
            tid = self.resolve(tid)
            t = self[tid]
            if not t.is_composite:
                raise BtfError(f"{self.format(tid)!r} has no members (looking for {part!r})",
                               type_id=tid)
            chain = self._find_member(tid, part)
            if chain is None:
                raise BtfError(f"{self.format(tid)} has no member {part!r}", type_id=tid)
            out.extend(chain)
            tid = chain[-1][1].type
        return out

    def _find_member(self, tid: int, name: str, depth: int = 0) -> list[tuple[int, Member]] | None:
        if depth > 32:
            return None
        for m in self[tid].members:
            if m.name == name:
                return [(tid, m)]
            if not m.name:
                inner = self.resolve(m.type)
                if self[inner].is_composite:
                    rest = self._find_member(inner, name, depth + 1)
                    if rest is not None:
                        return [(tid, m), *rest]
        return None

    def member_offset(self, type_id: int | str, path: str) -> int:
        """The bit offset of ``path`` (dotted member names) from the start of the type."""
        tid = self.type_id(type_id) if isinstance(type_id, str) else type_id
        return sum(m.bit_offset for _, m in self.member_path(tid, path))

    def format(self, type_id: int, name: str = "") -> str:
        """A type as C writes it (``struct task_struct *``); with ``name``, the
        declaration of that name (``char comm[16]``)."""
        from .cformat import declaration
        return declaration(self, type_id, name)

    def dump_c(self, type_id: int | str) -> str:
        """The C definition of a type, as ``bpftool btf dump ... format c`` writes it."""
        from .cformat import definition
        tid = self.type_id(type_id) if isinstance(type_id, str) else type_id
        return definition(self, tid)


def _split_tagged(name: str, kind: int | None) -> tuple[str, int | None]:
    for tag, k in (("struct ", Kind.STRUCT), ("union ", Kind.UNION), ("enum ", Kind.ENUM)):
        if name.startswith(tag):
            return name[len(tag):].strip(), k if kind is None else kind
    return name, kind


def elf_section(path: str, section: str) -> bytes | None:
    """The bytes of an ELF file's section, or None when it has none."""
    from ..elf.headers import ElfHeaders
    from ..elf.errors import ElfError
    try:
        hdr = ElfHeaders(path)
        sec = hdr.section(section)
        return None if sec is None else hdr.section_data(sec)
    except ElfError as exc:
        raise BtfError(f"{path}: {exc}") from None
