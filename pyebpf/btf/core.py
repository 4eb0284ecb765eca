"""CO-RE relocations resolved as libbpf resolves them, in pure Python.

A relocation (from ``.BTF.ext``, see :class:`~.ext.CoreRelo`) says: the
instruction at ``insn_off`` uses ``access`` (``"0:1:2"``: an array index into
the root type, then member/element indices) of local type ``type_id``, and
wants a value of ``kind`` (a field's byte offset or size, whether it exists,
a type's id or size, an enumerator's value...).  :class:`CoreResolver`
computes the value for the local types (``orig``, what the compiler wrote)
and for the target (the running kernel's BTF, ``new``):

* candidates: target types of the same kind (ENUM and ENUM64 mix) whose name
  equals the local type's with any ``___flavor`` suffix stripped from both;
  the kernel's vmlinux first, module BTF only when vmlinux has none;
* field access strings are matched member by member *by name* (anonymous
  structs/unions in the target are searched through), array indices by
  position; field types must be compatible as libbpf defines it (composites
  with composites, ints with ints, pointers with pointers, enums/fwds by
  flavor-less name, arrays by element);
* several matching candidates must agree, else :class:`BtfError`
  ("ambiguous"); none at all: the result is ``poison`` (the loader turns the
  instruction into a call that fails verification if reached), except for the
  ``*_exists`` / ``type_matches`` kinds, whose answer is then 0.

Nothing here reads the whole target BTF: candidates are found by name.
"""
from __future__ import annotations

from .errors import BtfError
from .ext import CORE_KINDS, CoreRelo
from .types import Kind, _Plain

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Sequence

    from .reader import Btf
    from .types import Type

__all__ = ["CoreResolver", "CoreResult", "Spec", "Accessor", "essential_name",
           "parse_spec", "FIELD_BYTE_OFFSET", "FIELD_BYTE_SIZE", "FIELD_EXISTS",
           "FIELD_SIGNED", "FIELD_LSHIFT_U64", "FIELD_RSHIFT_U64", "TYPE_ID_LOCAL",
           "TYPE_ID_TARGET", "TYPE_EXISTS", "TYPE_SIZE", "ENUMVAL_EXISTS", "ENUMVAL_VALUE",
           "TYPE_MATCHES", "POISON_HELPER"]

(FIELD_BYTE_OFFSET, FIELD_BYTE_SIZE, FIELD_EXISTS, FIELD_SIGNED, FIELD_LSHIFT_U64,
 FIELD_RSHIFT_U64, TYPE_ID_LOCAL, TYPE_ID_TARGET, TYPE_EXISTS, TYPE_SIZE, ENUMVAL_EXISTS,
 ENUMVAL_VALUE, TYPE_MATCHES) = range(13)
_FIELD_KINDS = frozenset(range(FIELD_BYTE_OFFSET, FIELD_RSHIFT_U64 + 1))
_TYPE_KINDS = frozenset({TYPE_ID_LOCAL, TYPE_ID_TARGET, TYPE_EXISTS, TYPE_SIZE, TYPE_MATCHES})
_ENUM_KINDS = frozenset({ENUMVAL_EXISTS, ENUMVAL_VALUE})
#: the helper id libbpf calls in a poisoned instruction (0xbad2310: "bad relo")
POISON_HELPER = 0xBAD2310
#: libbpf's bound on access-string length and on type recursion
MAX_SPEC_LEN = 64
_MAX_DEPTH = 32


class _Poison(Exception):
    """Internal: the relocation cannot be computed for this spec (poison it)."""


def essential_name(name: str) -> str:
    """``name`` without its last ``___flavor`` suffix (``task_struct___old`` ->
    ``task_struct``); a suffix needs a non-``_`` before and after the ``___``."""
    for i in range(len(name) - 5, -1, -1):
        if (name[i] != "_" and name[i + 1:i + 4] == "___" and name[i + 4] != "_"):
            return name[:i + 1]
    return name


class Accessor(_Plain):
    """One step of a spec: ``type_id`` holds member/element ``idx``; ``name``
    is the member's name ("" for an array index)."""

    __slots__ = ("type_id", "idx", "name")

    def __init__(self, type_id: int, idx: int, name: str):
        self.type_id = type_id
        self.idx = idx
        self.name = name


class Spec:
    """A parsed access string against one BTF: its accessors (named members
    and array indices only), the raw indices, and the bit offset reached."""

    __slots__ = ("btf", "root_type_id", "kind", "accessors", "raw", "bit_offset")

    def __init__(self, btf: Btf, root_type_id: int, kind: int) -> None:
        self.btf = btf
        self.root_type_id = root_type_id
        self.kind = kind
        self.accessors: list[Accessor] = []
        self.raw: list[int] = []
        self.bit_offset = 0

    def copy(self) -> Spec:
        """A copy whose lists can grow and shrink independently."""
        s = Spec(self.btf, self.root_type_id, self.kind)
        s.accessors = list(self.accessors)
        s.raw = list(self.raw)
        s.bit_offset = self.bit_offset
        return s

    @property
    def access(self) -> str:
        """The raw access string (``"0:1:2"``)."""
        return ":".join(map(str, self.raw))

    def describe(self) -> str:
        """``struct task_struct.pid``-like text (libbpf's debug output style)."""
        btf = self.btf
        head = btf.format(self.root_type_id)
        if self.kind in _ENUM_KINDS and self.accessors:
            return f"{head}::{self.accessors[0].name}"
        parts = [head]
        for a in self.accessors[1:]:
            parts.append(f".{a.name}" if a.name else f"[{a.idx}]")
        if self.accessors and self.accessors[0].idx:
            parts.insert(1, f"[{self.accessors[0].idx}]")
        return "".join(parts)

    def __repr__(self) -> str:
        return f"<Spec {self.describe()} ({self.access}) bit {self.bit_offset}>"


class CoreResult(_Plain):
    """What a relocation resolves to.

    ``orig`` is the value for the local (object) types -- what clang put in
    the instruction -- and ``new`` the value for the target; ``poison`` means
    no target matches (the instruction must be poisoned); ``validate`` says
    whether the instruction's current value must equal ``orig`` before
    patching (libbpf's check).  ``orig_size``/``new_size`` are the field sizes
    of a byte-offset relocation (a load of a different size must be resized).
    ``target`` is the matching target spec (None when poisoned or for
    ``type_id_local``).
    """

    __slots__ = ("kind", "orig", "new", "poison", "validate", "local", "target", "orig_size",
                 "new_size", "orig_type_id", "new_type_id")
    _defaults = (0, 0, 0, 0)
    kind: int
    orig: int
    new: int
    poison: bool
    validate: bool
    local: Spec
    target: Spec | None
    orig_size: int
    new_size: int
    orig_type_id: int
    new_type_id: int

    if TYPE_CHECKING:
        def __init__(self, kind: int, orig: int, new: int, poison: bool, validate: bool,
                     local: Spec, target: Spec | None, orig_size: int = 0, new_size: int = 0,
                     orig_type_id: int = 0, new_type_id: int = 0) -> None: ...

    @property
    def kind_name(self) -> str:
        """``field_byte_offset``..."""
        return CORE_KINDS[self.kind]


# --------------------------------------------------------------------- specs
def _is_flex_array(btf: Btf, acc: Accessor | None, nelems: int) -> bool:
    """An array of 0 elements that is the last member of its struct."""
    if acc is None or not acc.name or nelems > 0:
        return False
    return acc.idx == len(btf[acc.type_id].members) - 1


def parse_spec(btf: Btf, type_id: int, access: str, kind: int) -> Spec:
    """The spec of ``access`` on local type ``type_id`` (libbpf's
    ``bpf_core_parse_spec``); :class:`BtfError` if it does not fit the type."""
    try:
        raw = [int(p) for p in access.split(":")]
    except ValueError:
        raise BtfError(f"bad CO-RE access string {access!r}", type_id=type_id) from None
    if not raw or len(raw) > MAX_SPEC_LEN or min(raw) < 0:
        raise BtfError(f"bad CO-RE access string {access!r}", type_id=type_id)
    if type_id == 0 or type_id >= len(btf):
        raise BtfError(f"CO-RE relocation on type [{type_id}]: no such type", type_id=type_id)
    spec = Spec(btf, type_id, kind)
    spec.raw = raw
    if kind in _TYPE_KINDS:
        if raw != [0]:
            raise BtfError(f"type relocation with access {access!r} (must be \"0\")",
                           type_id=type_id)
        return spec
    tid = btf.resolve(type_id)
    t = btf[tid]
    if kind in _ENUM_KINDS:
        if not t.is_enum or len(raw) != 1 or raw[0] >= len(t.values):
            raise BtfError(f"enum value relocation {access!r} on {btf.format(type_id)}",
                           type_id=type_id)
        spec.accessors.append(Accessor(tid, raw[0], t.values[raw[0]].name))
        return spec
    if kind not in _FIELD_KINDS:
        raise BtfError(f"unknown CO-RE relocation kind {kind}", type_id=type_id)
    spec.accessors.append(Accessor(tid, raw[0], ""))
    spec.bit_offset = raw[0] * _size(btf, tid) * 8
    for idx in raw[1:]:
        tid = btf.resolve(tid)
        t = btf[tid]
        if t.is_composite:
            if idx >= len(t.members):
                raise BtfError(f"access {access!r}: member {idx} of {btf.format(tid)}, which "
                               f"has {len(t.members)}", type_id=type_id)
            m = t.members[idx]
            spec.bit_offset += m.bit_offset
            if m.name:
                spec.accessors.append(Accessor(tid, idx, m.name))
            tid = m.type
        elif t.kind == Kind.ARRAY:
            elem = btf.resolve(t.elem)
            if not _is_flex_array(btf, spec.accessors[-1], t.nelems) and idx >= t.nelems:
                raise BtfError(f"access {access!r}: index {idx} of an array of {t.nelems}",
                               type_id=type_id)
            spec.accessors.append(Accessor(elem, idx, ""))
            spec.bit_offset += idx * _size(btf, elem) * 8
            tid = elem
        else:
            raise BtfError(f"access {access!r} indexes into {btf.format(tid)}", type_id=type_id)
    return spec


def _size(btf: Btf, tid: int) -> int:
    return btf.size_of(tid)


# ------------------------------------------------------------ compatibility
def _kinds_compat(a: Type, b: Type) -> bool:
    return a.kind == b.kind or (a.is_enum and b.is_enum)


def _names_match(a: str, b: str) -> bool:
    """Empty names match; else equal after stripping ``___flavor``."""
    if not b:
        return not a
    return essential_name(a) == essential_name(b)


def fields_compat(lbtf: Btf, lid: int, tbtf: Btf, tid: int) -> bool:
    """libbpf's ``bpf_core_fields_are_compat``."""
    for _ in range(_MAX_DEPTH):
        lid, tid = lbtf.resolve(lid), tbtf.resolve(tid)
        lt, tt = lbtf[lid], tbtf[tid]
        if lt.is_composite and tt.is_composite:
            return True
        if not _kinds_compat(lt, tt):
            return False
        k = lt.kind
        if k in (Kind.PTR, Kind.FLOAT):
            return True
        if k in (Kind.FWD, Kind.ENUM, Kind.ENUM64):
            ln, tn = essential_name(lt.name), essential_name(tt.name)
            return not ln or not tn or ln == tn
        if k == Kind.INT:
            return lt.bit_offset == 0 and tt.bit_offset == 0
        if k == Kind.ARRAY:
            lid, tid = lt.elem, tt.elem
            continue
        return False
    raise BtfError("field types nested too deeply", type_id=lid)


def types_compat(lbtf: Btf, lid: int, tbtf: Btf, tid: int, level: int = _MAX_DEPTH) -> bool:
    """libbpf's ``bpf_core_types_are_compat`` (type_exists, type_size...)."""
    if not _kinds_compat(lbtf[lid], tbtf[tid]):
        return False
    while True:
        level -= 1
        if level < 0:
            raise BtfError("types nested too deeply", type_id=lid)
        lid, tid = lbtf.resolve(lid), tbtf.resolve(tid)
        lt, tt = lbtf[lid], tbtf[tid]
        if not _kinds_compat(lt, tt):
            return False
        k = lt.kind
        if k in (Kind.UNKN, Kind.STRUCT, Kind.UNION, Kind.ENUM, Kind.ENUM64, Kind.FWD):
            return True
        if k == Kind.INT:
            return lt.bit_offset == 0 and tt.bit_offset == 0
        if k == Kind.PTR:
            lid, tid = lt.ref, tt.ref
        elif k == Kind.ARRAY:
            lid, tid = lt.elem, tt.elem
        elif k == Kind.FUNC_PROTO:
            if len(lt.params) != len(tt.params):
                return False
            for lp, tp in zip(lt.params, tt.params):
                if not types_compat(lbtf, lbtf.resolve(lp.type), tbtf, tbtf.resolve(tp.type),
                                    level - 1):
                    return False
            lid, tid = lt.ref, tt.ref
        else:
            return False


def types_match(lbtf: Btf, lid: int, tbtf: Btf, tid: int, behind_ptr: bool = False,
                level: int = _MAX_DEPTH) -> bool:
    """libbpf's ``bpf_core_types_match`` (type_matches): a stricter, recursive
    comparison (names, sizes, signedness, members by name, enumerators)."""
    while True:
        if level <= 0:
            raise BtfError("types nested too deeply", type_id=lid)
        lid, tid = lbtf.resolve(lid), tbtf.resolve(tid)
        lt, tt = lbtf[lid], tbtf[tid]
        if not _names_match(lt.name, tt.name):
            return False
        lk, tk = lt.kind, tt.kind
        if lk == Kind.UNKN:
            return lk == tk
        if lk == Kind.FWD:
            if behind_ptr:
                if lk == tk:
                    return lt.kind_flag == tt.kind_flag
                return (tk == Kind.STRUCT and not lt.kind_flag) or \
                    (tk == Kind.UNION and lt.kind_flag)
            return lk == tk and lt.kind_flag == tt.kind_flag
        if lk in (Kind.ENUM, Kind.ENUM64):
            return tt.is_enum and _enums_match(lt, tt)
        if lk in (Kind.STRUCT, Kind.UNION):
            if behind_ptr:
                if lk == tk:
                    return True
                return tk == Kind.FWD and (lk == Kind.UNION) == tt.kind_flag
            return lk == tk and _composites_match(lbtf, lt, tbtf, tt, behind_ptr, level)
        if lk == Kind.INT:
            return (lk == tk and lt.size == tt.size
                    and (lt.encoding & 1) == (tt.encoding & 1))
        if lk == Kind.PTR:
            if lk != tk:
                return False
            behind_ptr = True
            lid, tid = lt.ref, tt.ref
        elif lk == Kind.ARRAY:
            if lk != tk or lt.nelems != tt.nelems:
                return False
            lid, tid = lt.elem, tt.elem
        elif lk == Kind.FUNC_PROTO:
            if lk != tk or len(lt.params) != len(tt.params):
                return False
            for lp, tp in zip(lt.params, tt.params):
                if not types_match(lbtf, lp.type, tbtf, tp.type, behind_ptr, level - 1):
                    return False
            lid, tid = lt.ref, tt.ref
        else:
            return False
        level -= 1


def _enums_match(lt: Type, tt: Type) -> bool:
    if lt.size != tt.size or len(lt.values) > len(tt.values):
        return False
    targ = [v.name for v in tt.values]
    return all(any(_names_match(v.name, n) for n in targ) for v in lt.values)


def _composites_match(lbtf: Btf, lt: Type, tbtf: Btf, tt: Type, behind_ptr: bool,
                      level: int) -> bool:
    if len(lt.members) > len(tt.members):
        return False
    for lm in lt.members:
        if not any(_names_match(lm.name, tm.name)
                   and types_match(lbtf, lm.type, tbtf, tm.type, behind_ptr, level - 1)
                   for tm in tt.members):
            return False
    return True


# ---------------------------------------------------------------- matching
def _match_member(lbtf: Btf, lacc: Accessor, tbtf: Btf, tid: int, spec: Spec,
                  depth: int = 0) -> int | None:
    """Find local accessor ``lacc``'s member by name in target type ``tid``
    (through anonymous members); on success extend ``spec`` and return the
    member's type id, else leave ``spec`` as it was and return None."""
    lmember = lbtf[lacc.type_id].members[lacc.idx]
    tid = tbtf.resolve(tid)
    tt = tbtf[tid]
    if not tt.is_composite or depth > _MAX_DEPTH:
        return None
    for i, m in enumerate(tt.members):
        if len(spec.raw) >= MAX_SPEC_LEN:
            raise BtfError("CO-RE access nested too deeply", type_id=tid)
        spec.bit_offset += m.bit_offset
        spec.raw.append(i)
        if not m.name:
            found = _match_member(lbtf, lacc, tbtf, m.type, spec, depth + 1)
            if found is not None:
                return found
        elif m.name == lmember.name:
            if fields_compat(lbtf, lmember.type, tbtf, m.type):
                spec.accessors.append(Accessor(tid, i, m.name))
                return m.type
            spec.bit_offset -= m.bit_offset
            spec.raw.pop()
            return None
        spec.bit_offset -= m.bit_offset
        spec.raw.pop()
    return None


def match_spec(local: Spec, tbtf: Btf, tid: int) -> Spec | None:
    """The target spec of candidate ``tid`` for ``local``, or None if it does
    not match (libbpf's ``bpf_core_spec_match``)."""
    lbtf = local.btf
    spec = Spec(tbtf, tid, local.kind)
    kind = local.kind
    if kind in _TYPE_KINDS:
        ok = (types_match(lbtf, local.root_type_id, tbtf, tid) if kind == TYPE_MATCHES
              else types_compat(lbtf, local.root_type_id, tbtf, tid))
        spec.raw = [0]
        return spec if ok else None
    if kind in _ENUM_KINDS:
        lacc = local.accessors[0]
        ename = essential_name(lacc.name)
        rid = tbtf.resolve(tid)
        tt = tbtf[rid]
        if not tt.is_enum:
            return None
        for i, v in enumerate(tt.values):
            if essential_name(v.name) == ename:
                spec.accessors.append(Accessor(rid, i, v.name))
                spec.raw = [i]
                return spec
        return None
    for i, lacc in enumerate(local.accessors):
        if i > 0 and lacc.name:
            found = _match_member(lbtf, lacc, tbtf, tid, spec)
            if found is None:
                return None
            tid = found
            continue
        if i > 0:
            rid = tbtf.resolve(tid)
            tt = tbtf[rid]
            if tt.kind != Kind.ARRAY:
                return None
            prev = spec.accessors[-1] if spec.accessors else None
            if not _is_flex_array(tbtf, prev, tt.nelems) and lacc.idx >= tt.nelems:
                return None
            tid = tbtf.resolve(tt.elem)
        spec.accessors.append(Accessor(tid, lacc.idx, ""))
        spec.raw.append(lacc.idx)
        spec.bit_offset += lacc.idx * _size(tbtf, tid) * 8
    return spec


# ------------------------------------------------------------- calculation
def _field_value(kind: int, spec: Spec | None) -> tuple[int, int, int, bool]:
    """(value, field size, field type id, validate) of a field relocation."""
    if kind == FIELD_EXISTS:
        return (1 if spec is not None else 0), 0, 0, True
    if spec is None:
        raise _Poison
    btf = spec.btf
    acc = spec.accessors[-1]
    if not acc.name:
        size = _size(btf, acc.type_id)
        if kind == FIELD_BYTE_OFFSET:
            return spec.bit_offset // 8, size, acc.type_id, True
        if kind == FIELD_BYTE_SIZE:
            return size, 0, 0, True
        raise BtfError(f"{CORE_KINDS[kind]} relocation of an array element",
                       type_id=spec.root_type_id)
    holder = btf[acc.type_id]
    member = holder.members[acc.idx]
    field_id = btf.resolve(member.type)
    ft = btf[field_id]
    bit_off = spec.bit_offset
    bit_sz = member.bitfield_size
    bitfield = bit_sz > 0
    if bitfield:
        byte_sz = ft.size
        byte_off = bit_off // 8 // byte_sz * byte_sz
        while bit_off + bit_sz - byte_off * 8 > byte_sz * 8:
            if byte_sz >= 8:
                raise BtfError("a bitfield that cannot be read with a 64-bit load",
                               type_id=spec.root_type_id)
            byte_sz *= 2
            byte_off = bit_off // 8 // byte_sz * byte_sz
    else:
        byte_sz = _size(btf, field_id)
        byte_off = bit_off // 8
        bit_sz = byte_sz * 8
    validate = not bitfield
    if kind == FIELD_BYTE_OFFSET:
        return byte_off, (0 if bitfield else byte_sz), (0 if bitfield else field_id), validate
    if kind == FIELD_BYTE_SIZE:
        return byte_sz, 0, 0, validate
    if kind == FIELD_SIGNED:
        signed = (ft.is_enum and ft.kind_flag) or (ft.kind == Kind.INT and bool(ft.encoding & 1))
        return int(signed), 0, 0, validate
    if kind == FIELD_LSHIFT_U64:
        return 64 - (bit_off + bit_sz - byte_off * 8), 0, 0, validate
    if kind == FIELD_RSHIFT_U64:
        return 64 - bit_sz, 0, 0, True
    raise BtfError(f"unknown field relocation kind {kind}")


def _type_value(kind: int, spec: Spec | None) -> tuple[int, bool]:
    if spec is None:
        return 0, True
    if kind == TYPE_ID_TARGET:
        return spec.root_type_id, False
    if kind in (TYPE_EXISTS, TYPE_MATCHES):
        return 1, True
    if kind == TYPE_SIZE:
        return _size(spec.btf, spec.root_type_id), True
    raise BtfError(f"unknown type relocation kind {kind}")


def _enum_value(kind: int, spec: Spec | None) -> int:
    if kind == ENUMVAL_EXISTS:
        return 1 if spec is not None else 0
    if spec is None:
        raise _Poison
    acc = spec.accessors[0]
    return spec.btf[acc.type_id].values[acc.idx].value


def _calc(kind: int, local: Spec, target: Spec | None) -> CoreResult:
    """The result for ``local`` and one ``target`` spec (None: no match)."""
    try:
        if kind in _FIELD_KINDS:
            orig, osz, otid, validate = _field_value(kind, local)
            new, nsz, ntid, _ = _field_value(kind, target)
            return CoreResult(kind, orig, new, False, validate, local, target, osz, nsz,
                              otid, ntid)
        if kind in _TYPE_KINDS:
            orig, validate = _type_value(kind, local)
            new, _ = _type_value(kind, target)
            return CoreResult(kind, orig, new, False, validate, local, target)
        orig = _enum_value(kind, local)
        new = _enum_value(kind, target)
        return CoreResult(kind, orig, new, False, True, local, target)
    except _Poison:
        orig_val = _calc_orig(kind, local)
        return CoreResult(kind, orig_val, 0, True, True, local, None)


def _calc_orig(kind: int, local: Spec) -> int:
    if kind in _FIELD_KINDS:
        return _field_value(kind, local)[0]
    if kind in _ENUM_KINDS:
        return _enum_value(kind, local)
    return _type_value(kind, local)[0]


class CoreResolver:
    """Resolves CO-RE relocations against a target: the kernel's vmlinux BTF
    and, optionally, module BTFs (searched only when vmlinux has no candidate).

    Candidates are cached per (local BTF, local type id), as libbpf does.
    """

    def __init__(self, target: Btf, modules: Sequence[Btf] = ()) -> None:
        self.target = target
        self.modules = tuple(modules)
        self._cands: dict[tuple[int, int], list[tuple[Btf, int]]] = {}

    def candidates(self, local: Btf, type_id: int) -> list[tuple[Btf, int]]:
        """The target types a local type may be: same kind, same name without
        ``___flavor``."""
        key = (id(local), type_id)
        found = self._cands.get(key)
        if found is None:
            found = self._cands[key] = self._find_candidates(local, type_id)
        return found

    def _find_candidates(self, local: Btf, type_id: int) -> list[tuple[Btf, int]]:
        lt = local[type_id]
        name = essential_name(lt.name)
        if not name:
            raise BtfError("CO-RE relocation on an anonymous type", type_id=type_id)
        for btf in (self.target, *self.modules):
            ids = [i for i in btf.find(name) if i >= btf.first_id]
            ids += [i for i in btf.find_prefixed(name + "___")
                    if i >= btf.first_id and essential_name(btf[i].name) == name]
            out = [(btf, i) for i in sorted(set(ids)) if _kinds_compat(lt, btf[i])]
            if out:
                return out
        return []

    def resolve(self, local: Btf, relo: CoreRelo | tuple[int, str, int]) -> CoreResult:
        """Resolve one relocation (a :class:`~.ext.CoreRelo` or ``(type_id,
        access, kind)``) of an object whose BTF is ``local``."""
        if isinstance(relo, CoreRelo):
            type_id, access, kind = relo.type_id, relo.access, relo.kind
        else:
            type_id, access, kind = relo
        if not 0 <= kind < len(CORE_KINDS):
            raise BtfError(f"unknown CO-RE relocation kind {kind}", type_id=type_id)
        spec = parse_spec(local, type_id, access, kind)
        if kind == TYPE_ID_LOCAL:
            return CoreResult(kind, type_id, type_id, False, False, spec, None)
        best: CoreResult | None = None
        for btf, cand in self.candidates(local, type_id):
            target = match_spec(spec, btf, cand)
            if target is None:
                continue
            res = _calc(kind, spec, target)
            if best is None:
                best = res
            elif best.target is not None and target.bit_offset != best.target.bit_offset:
                raise BtfError(f"CO-RE {CORE_KINDS[kind]} of {spec.describe()}: field offset "
                               f"ambiguity ({best.target.describe()} and "
                               f"{target.describe()})", type_id=type_id)
            elif res.poison != best.poison or res.new != best.new:
                raise BtfError(f"CO-RE {CORE_KINDS[kind]} of {spec.describe()}: candidates "
                               f"disagree ({best.new} for {best.target!r}, {res.new} for "
                               f"{target!r})", type_id=type_id)
        if best is None:
            best = _calc(kind, spec, None)
        return best
