"""BTF type records: the kinds, and one :class:`Type` per type record.

The layouts follow ``include/uapi/linux/btf.h``.  A :class:`Type` holds the
fields every kind has (``kind``, ``name``, ``kind_flag``, ``size`` or
``ref``) plus the kind's own: ``members`` (STRUCT/UNION), ``values``
(ENUM/ENUM64), ``params`` (FUNC_PROTO), ``secinfo`` (DATASEC), the INT
encoding, the ARRAY triple, a VAR's or FUNC's ``linkage`` and a DECL_TAG's
``component_idx``.  Values are plain; :mod:`.reader` makes them from bytes
and :mod:`.writer` turns them back into bytes.
"""
from __future__ import annotations

from .._record import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["Kind", "kind_name", "Type", "Member", "EnumValue", "Param", "VarSecinfo",
           "INT_SIGNED", "INT_CHAR", "INT_BOOL", "LINKAGE", "SIZED_KINDS", "REF_KINDS",
           "MODIFIERS"]


class Kind:
    """``BTF_KIND_*`` (plain ints: :mod:`enum` costs ~10 ms to import;
    :func:`kind_name` names one)."""

    UNKN = 0
    INT = 1
    PTR = 2
    ARRAY = 3
    STRUCT = 4
    UNION = 5
    ENUM = 6
    FWD = 7
    TYPEDEF = 8
    VOLATILE = 9
    CONST = 10
    RESTRICT = 11
    FUNC = 12
    FUNC_PROTO = 13
    VAR = 14
    DATASEC = 15
    FLOAT = 16
    DECL_TAG = 17
    TYPE_TAG = 18
    ENUM64 = 19


#: kind number -> name
_KIND_NAMES = {v: k for k, v in vars(Kind).items() if k.isupper()}


def kind_name(kind: int) -> str:
    """``"STRUCT"`` for 4; ``"kind 25"`` for a number BTF does not define."""
    return _KIND_NAMES.get(kind, f"kind {kind}")


#: INT encoding bits (``BTF_INT_*``)
INT_SIGNED, INT_CHAR, INT_BOOL = 1, 2, 4
#: VAR/FUNC linkage names (``BTF_VAR_*`` / ``BTF_FUNC_*``)
LINKAGE = {0: "static", 1: "global", 2: "extern"}
#: kinds whose ``size_type`` word is a size (the others: a type id)
SIZED_KINDS = frozenset({Kind.INT, Kind.STRUCT, Kind.UNION, Kind.ENUM, Kind.ENUM64,
                         Kind.DATASEC, Kind.FLOAT})
#: kinds whose ``size_type`` word refers to another type
REF_KINDS = frozenset({Kind.PTR, Kind.TYPEDEF, Kind.VOLATILE, Kind.CONST, Kind.RESTRICT,
                       Kind.FUNC, Kind.FUNC_PROTO, Kind.VAR, Kind.DECL_TAG, Kind.TYPE_TAG})
#: the kinds skipped by "resolve": typedefs and qualifiers
MODIFIERS = frozenset({Kind.TYPEDEF, Kind.VOLATILE, Kind.CONST, Kind.RESTRICT, Kind.TYPE_TAG})


class _Plain:
    """Equality, hashing and repr over ``__slots__`` (small value records).

    A record made a few times a load takes its fields, in ``__slots__``
    order, from this ``__init__`` (the trailing ones it is not given from
    ``_defaults``); one made per type or member of a kernel's BTF writes its
    own, which is faster.
    """

    __slots__: tuple[str, ...] = ()
    #: the values of the last fields when they are not given
    _defaults: tuple[Any, ...] = ()

    def __init__(self, *values: Any) -> None:
        names = self.__slots__
        missing = len(names) - len(values)
        if missing:
            if not 0 < missing <= len(self._defaults):
                from ..errors import ArgumentTypeError
                raise ArgumentTypeError(f"{type(self).__name__} takes {len(names)} fields "
                                        f"({', '.join(names)}), not {len(values)}")
            values += self._defaults[len(self._defaults) - missing:]
        for name, value in zip(names, values):
            setattr(self, name, value)

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, f) for f in self.__slots__)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Plain) and type(other) is type(self) and \
            self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        inner = ", ".join(f"{f}={getattr(self, f)!r}" for f in self.__slots__
                          if getattr(self, f) not in (None, (), 0, "") or f == "name")
        return f"{type(self).__name__}({inner})"


class Member(_Plain):
    """A STRUCT/UNION member: ``bit_offset`` from the start of the composite;
    ``bitfield_size`` 0 unless the member is a bitfield (kind_flag set)."""

    __slots__ = ("name", "type", "bit_offset", "bitfield_size")

    def __init__(self, name: str, type: int, bit_offset: int = 0, bitfield_size: int = 0):
        self.name = name
        self.type = type
        self.bit_offset = bit_offset
        self.bitfield_size = bitfield_size


class EnumValue(_Plain):
    """An enumerator: its name and value (signed when the enum's kind_flag is set)."""

    __slots__ = ("name", "value")

    def __init__(self, name: str, value: int):
        self.name = name
        self.value = value


class Param(_Plain):
    """A FUNC_PROTO parameter (``type`` 0 and no name: the ``...`` of a variadic)."""

    __slots__ = ("name", "type")

    def __init__(self, name: str, type: int):
        self.name = name
        self.type = type


class VarSecinfo(_Plain):
    """A DATASEC entry: a VAR (or FUNC, for ksyms) at ``offset`` of ``size`` bytes."""

    __slots__ = ("type", "offset", "size")

    def __init__(self, type: int, offset: int, size: int):
        self.type = type
        self.offset = offset
        self.size = size


@dataclass
class Type:
    """One BTF type record.

    ``size`` is set for the sized kinds (INT, STRUCT, UNION, ENUM, ENUM64,
    DATASEC, FLOAT), ``ref`` (the referred type id) for the others that refer
    to a type: PTR, TYPEDEF, the qualifiers, FUNC (its FUNC_PROTO),
    FUNC_PROTO (its return type), VAR, DECL_TAG and TYPE_TAG.  Kind-specific:

    * INT: ``encoding`` (``INT_SIGNED | INT_CHAR | INT_BOOL``), ``bits``, ``bit_offset``
    * ARRAY: ``elem``, ``index``, ``nelems``
    * STRUCT/UNION: ``members``; ENUM/ENUM64: ``values``; FUNC_PROTO: ``params``
    * FUNC/VAR: ``linkage`` (0 static, 1 global, 2 extern); DATASEC: ``secinfo``
    * DECL_TAG: ``component_idx`` (-1: the tag is on the type or variable itself)
    """

    kind: int
    name: str = ""
    kind_flag: bool = False
    size: int = 0
    ref: int = 0
    encoding: int = 0
    bits: int = 0
    bit_offset: int = 0
    elem: int = 0
    index: int = 0
    nelems: int = 0
    members: tuple[Member, ...] = ()
    values: tuple[EnumValue, ...] = ()
    params: tuple[Param, ...] = ()
    linkage: int = 0
    secinfo: tuple[VarSecinfo, ...] = ()
    component_idx: int = 0

    # (written out: @dataclass would compile this on the first type decoded,
    # ~0.3 ms of every cold object load)
    def __init__(self, kind: int, name: str = "", kind_flag: bool = False, size: int = 0,
                 ref: int = 0, encoding: int = 0, bits: int = 0, bit_offset: int = 0,
                 elem: int = 0, index: int = 0, nelems: int = 0,
                 members: tuple[Member, ...] = (), values: tuple[EnumValue, ...] = (),
                 params: tuple[Param, ...] = (), linkage: int = 0,
                 secinfo: tuple[VarSecinfo, ...] = (), component_idx: int = 0) -> None:
        self.kind = kind
        self.name = name
        self.kind_flag = kind_flag
        self.size = size
        self.ref = ref
        self.encoding = encoding
        self.bits = bits
        self.bit_offset = bit_offset
        self.elem = elem
        self.index = index
        self.nelems = nelems
        self.members = members
        self.values = values
        self.params = params
        self.linkage = linkage
        self.secinfo = secinfo
        self.component_idx = component_idx

    def __repr__(self) -> str:
        # the fields that are set (a type has few of the seventeen), and the name
        inner = ", ".join(f"{f}={v!r}" for f, v in vars(self).items()
                          if v not in (None, (), 0, "") or f == "name")
        return f"Type({inner})"

    def __hash__(self) -> int:
        return hash(tuple(vars(self).values()))

    @property
    def is_composite(self) -> bool:
        """STRUCT or UNION."""
        return self.kind in (Kind.STRUCT, Kind.UNION)

    @property
    def is_enum(self) -> bool:
        """ENUM or ENUM64."""
        return self.kind in (Kind.ENUM, Kind.ENUM64)

    @property
    def vlen(self) -> int:
        """The number of trailing entries (members, enumerators, params, vars)."""
        return len(self.members or self.values or self.params or self.secinfo)
