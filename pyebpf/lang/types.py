"""The types of the bpftrace language, as the semantic pass gives them to
expressions, map keys and map values, and as code generation and printing
read them.

One class, :class:`Type`: a ``kind`` and what that kind needs (a size, a
signedness, element types, an aggregation's parameters). Integers are 1, 2,
4 or 8 bytes, signed or not; bpftrace's builtins and arguments are 64-bit
(``uint64`` for ``pid``, ``nsecs``; ``int64`` for ``arg0`` and ``retval``;
a USDT argument has the type of its spec: ``-4@%r8d`` is ``int32``).
"""
from __future__ import annotations

from .._record import dataclass
from ..errors import OptionError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .records import Record

__all__ = ["Type", "KINDS", "AGGREGATIONS", "NONE", "int_type", "string_type", "array_type",
           "record_type",
           "INT_NAMES", "tuple_type", "alignment"]

#: every kind of value the language has
KINDS = frozenset({
    "none",        # no value (a statement call such as printf)
    "int",         # size 1/2/4/8, signed or not
    "string",      # NUL-terminated, ``size`` bytes at most (bpftrace's strlen, 64 by default)
    "buffer",      # buf(): ``size`` bytes of data printed as \\x escapes (``counted``:
                   # a length byte first, the bytes printed; buf() with a run-time length)
    "tuple",       # ``elems``: the element types, laid out C-like
    "ustack", "kstack",   # a stack id (``stack_mode``, ``stack_limit``)
    "pystack",     # a Python stack's id (pyebpf.lang.pystack)
    "usym", "ksym",       # an address printed as a symbol
    "inet",        # ntop(): an IPv4/IPv6 address
    "macaddr",     # macaddr(): the 6 bytes of a MAC address
    "timestamp",   # strftime(): a time printed with a format
    "username",    # username: a uid printed as a name
    "strerror",    # strerror(): an errno printed as its message
    "cgroup_path", # cgroup_path(): a cgroup id printed as its paths (``fmt``: the filter)
    "probe",       # the probe builtin: an index into the probes' names
    "pointer",     # ``elem``: what it points to (casts, args fields)
    "record",      # ``args`` of a tracepoint: ``fields`` name -> (offset, Type);
                   # a C struct or union (script, BTF or DWARF): ``struct``, a
                   # :class:`~pyebpf.lang.records.Record`
    "array",       # a C array: ``size // elem.size`` elements of type ``elem``
    # aggregations: only as map values
    "count", "sum", "min", "max", "avg", "stats", "hist", "lhist",
})
#: the kinds a map value may have only through an aggregation call
AGGREGATIONS = frozenset({"count", "sum", "min", "max", "avg", "stats", "hist", "lhist"})

#: bpftrace's integer type names -> (size, signed)
INT_NAMES = {"int8": (1, True), "uint8": (1, False), "int16": (2, True),
             "uint16": (2, False), "int32": (4, True), "uint32": (4, False),
             "int64": (8, True), "uint64": (8, False)}


@dataclass(frozen=True)
class Type:
    """A value's type. ``size`` is its size in bytes as stored (in a map key,
    an event record, the stack); ``signed`` matters for integers (and for
    sum/min/max/avg/stats, which are signed when their argument is).

    ``elems`` (tuple), ``elem`` (pointer), ``fields`` (record: name ->
    (offset, Type)), ``stack_mode``/``stack_limit`` (ustack/kstack: bpftrace,
    perf or raw; frames kept), ``lhist`` ``(min, max, step)``, ``counted``
    (a buffer of ``size`` bytes at most that carries its length: a length
    byte, then the bytes -- as bpftrace keeps ``buf(p, n)`` of a run-time
    ``n``), ``struct`` (a record that is a C struct or union: its
    :class:`~pyebpf.lang.records.Record`, from the script's definitions, the
    probed program's DWARF or the kernel's BTF), ``fmt`` (a timestamp: its
    strftime format; a cgroup_path: its hierarchy filter)."""
    kind: str
    size: int = 0
    signed: bool = False
    elems: tuple[Type, ...] = ()
    elem: Type | None = None
    fields: tuple[tuple[str, int, Type], ...] = ()
    stack_mode: str = "bpftrace"
    stack_limit: int = 127
    lhist: tuple[int, int, int] | None = None
    counted: bool = False
    struct: Record | None = None
    fmt: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise OptionError(f"unknown type kind {self.kind!r}; the kinds: "
                              f"{', '.join(sorted(KINDS))}")

    @property
    def is_int(self) -> bool:
        """An integer (of any size and signedness)."""
        return self.kind == "int"

    @property
    def is_aggregation(self) -> bool:
        """count/sum/min/max/avg/stats/hist/lhist."""
        return self.kind in AGGREGATIONS

    def __str__(self) -> str:
        return self.spelled()

    def spelled(self, in_messages: bool = False) -> str:
        """The type's name (``uint64``, ``(int64, string[8])``, ``int32 *``);
        ``in_messages``: as bpftrace's error messages spell it (``unsigned
        int64``, ``(int64,string[8])``)."""
        if self.kind == "int":
            unsigned = "unsigned " if in_messages else "u"
            return f"{'' if self.signed else unsigned}int{self.size * 8}"
        if self.kind in ("string", "buffer"):
            return f"{self.kind}[{self.size}]"
        if self.kind == "tuple":
            sep = "," if in_messages else ", "
            return "(" + sep.join(e.spelled(in_messages) for e in self.elems) + ")"
        if self.kind == "pointer":
            return f"{self.elem.spelled(in_messages) if self.elem else 'void'} *"
        if self.kind == "record" and self.struct is not None:
            return self.struct.name
        if self.kind == "array" and self.elem is not None:
            return f"{self.elem.spelled(in_messages)}[{self.count}]"
        return self.kind

    @property
    def count(self) -> int:
        """An array's number of elements."""
        return self.size // self.elem.size if self.elem is not None and self.elem.size else 0


#: the type of an expression with no value
NONE = Type("none")


def int_type(size: int = 8, signed: bool = False) -> Type:
    """An integer type of ``size`` bytes."""
    return Type("int", size, signed)


def array_type(elem: Type, count: int) -> Type:
    """A C array of ``count`` elements of type ``elem``."""
    return Type("array", elem.size * count, elem=elem)


def record_type(rec: Record) -> Type:
    """The type of a value of the C struct or union ``rec``."""
    return Type("record", rec.size, struct=rec)


def string_type(size: int = 64) -> Type:
    """A string of at most ``size`` bytes, its NUL included."""
    return Type("string", size)


def alignment(t: Type) -> int:
    """How a value of ``t`` is aligned in a tuple (bpftrace's rule, LLVM's
    layout): strings 1, tuples their largest member's, 1- and 2-byte values
    their size, byte arrays and values up to 4 bytes 4, the rest 8."""
    if t.kind == "string":
        return 1
    if t.kind == "tuple":
        return max((alignment(e) for e in t.elems), default=1)
    if t.kind == "record" and t.struct is not None:
        return t.struct.align
    if t.kind == "array" and t.elem is not None:
        return alignment(t.elem)
    if t.kind == "macaddr":
        return 1
    if t.size <= 2:
        return max(t.size, 1)
    if t.kind in ("buffer", "inet") or t.size <= 4:
        return 4
    return 8


def tuple_type(elems: tuple[Type, ...] | list[Type], *, packed: bool = False) -> Type:
    """A tuple of ``elems``: each placed at its offset (``fields`` holds
    ``(str(index), offset, type)``), padded C-like as bpftrace lays out a
    tuple value, or ``packed`` one after the other as bpftrace lays out the
    keys of a map with several keys."""
    fields = []
    offset = 0
    align = 1
    for i, e in enumerate(elems):
        a = 1 if packed else alignment(e)
        align = max(align, a)
        offset += (a - offset % a) % a
        fields.append((str(i), offset, e))
        offset += e.size + e.counted
    size = offset + (align - offset % align) % align
    return Type("tuple", size, elems=tuple(elems), fields=tuple(fields))
