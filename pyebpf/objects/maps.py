"""Map definitions of an object: BTF-defined ``.maps`` (with inner maps and
pinning), the legacy ``maps`` section, and the global-data sections
(``.data``, ``.rodata``, ``.bss``, ``.data.*``, ``.rodata.*``) and
``.kconfig``, which become one-element array maps."""
from __future__ import annotations

import struct

from ..btf import Btf, Kind
from ..kernel.constants import MapType
from .errors import ObjectError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .elfobj import ObjElf

__all__ = ["MapDef", "btf_maps", "legacy_maps", "data_sections", "is_data_section",
           "PIN_BY_NAME", "BPF_F_RDONLY_PROG", "BPF_F_MMAPABLE"]

PIN_BY_NAME = 1
BPF_F_RDONLY_PROG = 1 << 7
BPF_F_MMAPABLE = 1 << 10
_INT_FIELDS = ("type", "max_entries", "map_flags", "numa_node", "key_size", "value_size",
               "pinning", "map_extra")


class MapDef:
    """A map as the object describes it (before it exists)."""

    __slots__ = ("name", "type", "key_size", "value_size", "max_entries", "flags",
                 "key_type_id", "value_type_id", "pinning", "inner", "numa_node",
                 "map_extra", "section", "data", "frozen", "init_slots")

    def __init__(self, name: str, section: str) -> None:
        self.name = name
        self.section = section
        self.type = 0
        self.key_size = self.value_size = self.max_entries = self.flags = 0
        self.key_type_id = self.value_type_id = 0
        self.pinning = 0
        self.numa_node = 0
        self.map_extra = 0
        self.inner: MapDef | None = None
        #: the initial value of a global-data map (its one element)
        self.data: bytearray | None = None
        #: made read-only after set-up (.rodata, .kconfig)
        self.frozen = False
        #: initial contents written in C (``.values = { [i] = &x }``): slot ->
        #: the name of the map (map-in-map) or program (prog array) to put
        #: there, kept as a name until its target exists
        self.init_slots: dict[int, str] = {}

    @property
    def type_name(self) -> str:
        """``hash``, ``ringbuf``... (lower case)."""
        try:
            return MapType(self.type).name.lower()
        except ValueError:
            return f"type {self.type}"

    def describe(self) -> str:
        """One line: type, sizes, entries, flags, pinning, and what its
        initializer puts in which slot (``slots [0] tail_a, [2] tail_b``)."""
        parts = [self.type_name, f"key {self.key_size}", f"value {self.value_size}",
                 f"max_entries {self.max_entries}"]
        if self.flags:
            parts.append(f"flags {self.flags:#x}")
        if self.pinning:
            parts.append("pinned by name")
        if self.inner is not None:
            parts.append(f"inner {self.inner.type_name}")
        if self.init_slots:
            parts.append("slots " + " ".join(f"[{k}] {v}"
                                             for k, v in sorted(self.init_slots.items())))
        return ", ".join(parts)


def _parse_def(btf: Btf, sid: int, name: str, section: str) -> MapDef:
    st = btf[sid]
    if st.kind != Kind.STRUCT:
        raise ObjectError(f"map {name!r}: its BTF definition is not a struct")
    d = MapDef(name, section)
    for m in st.members:
        mt = btf[btf.resolve(m.type)]
        if m.name in _INT_FIELDS:
            if mt.kind != Kind.PTR:
                raise ObjectError(f"map {name!r}: field {m.name!r} is not __uint(...)")
            arr = btf[btf.resolve(mt.ref)]
            value = arr.nelems if arr.kind == Kind.ARRAY else 0
            setattr(d, "flags" if m.name == "map_flags" else m.name, value)
        elif m.name in ("key", "value"):
            if mt.kind != Kind.PTR:
                raise ObjectError(f"map {name!r}: field {m.name!r} is not __type(...)")
            size = btf.size_of(mt.ref)
            setattr(d, f"{m.name}_size", size)
            setattr(d, f"{m.name}_type_id", mt.ref)
        elif m.name == "values":
            if mt.kind != Kind.ARRAY:
                raise ObjectError(f"map {name!r}: 'values' is not __array(...)")
            elem = btf[btf.resolve(mt.elem)]
            if elem.kind != Kind.PTR:
                raise ObjectError(f"map {name!r}: 'values' is not an array of pointers")
            target = btf.resolve(elem.ref)
            if d.type in (MapType.ARRAY_OF_MAPS, MapType.HASH_OF_MAPS):
                d.inner = _parse_def(btf, target, name + ".inner", section)
            d.value_size = 4
    return d


def btf_maps(elf: ObjElf, btf: Btf | None) -> dict[str, MapDef]:
    """The maps of the ``.maps`` section, by name."""
    sec = elf.section(".maps")
    if sec is None:
        return {}
    if btf is None:
        raise ObjectError(f"{elf.path}: a .maps section needs the object's BTF "
                          "(compile with clang -g)")
    ids = btf.find(".maps", Kind.DATASEC)
    if not ids:
        raise ObjectError(f"{elf.path}: .maps has no BTF DATASEC")
    out: dict[str, MapDef] = {}
    offsets: dict[int, MapDef] = {}
    for vs in btf[ids[0]].secinfo:
        var = btf[vs.type]
        d = _parse_def(btf, btf.resolve(var.ref), var.name, ".maps")
        out[var.name] = d
        sym = next((s for s in elf.symbols if s.shndx == sec.index and s.name == var.name),
                   None)
        if sym is not None:
            offsets[sym.value] = d
    _init_slots(elf, btf, sec.index, offsets)
    return out


def _init_slots(elf: ObjElf, btf: Btf, shndx: int, offsets: dict[int, MapDef]) -> None:
    """``.values = { [i] = &x }`` of a map-in-map (``x`` a map) or a prog
    array (``x`` a program): relocations in ``.maps``, recorded by name."""
    sec = elf.sections[shndx]
    starts = sorted(offsets)
    for r_off, symi in sec.relocs.items():
        owner = max((s for s in starts if s <= r_off), default=None)
        if owner is None:
            continue
        d = offsets[owner]
        sid = _struct_of(btf, d.name)
        vals = next((m for m in btf[sid].members if m.name == "values"), None) if sid else None
        if vals is None:
            continue
        slot = (r_off - owner - vals.bit_offset // 8) // 8
        d.init_slots[slot] = elf.symbols[symi].name


def _struct_of(btf: Btf, name: str) -> int:
    ids = btf.find(".maps", Kind.DATASEC)
    for vs in btf[ids[0]].secinfo:
        if btf[vs.type].name == name:
            return btf.resolve(btf[vs.type].ref)
    return 0


_LEGACY = struct.Struct("<IIIII")


def legacy_maps(elf: ObjElf) -> dict[str, MapDef]:
    """The maps of the legacy ``maps`` section (``struct bpf_map_def``)."""
    sec = elf.section("maps")
    if sec is None:
        return {}
    syms = sorted((s for s in elf.symbols if s.shndx == sec.index and s.name and s.type != 3),
                  key=lambda s: s.value)
    out: dict[str, MapDef] = {}
    for s in syms:
        if s.value + _LEGACY.size > len(sec.data):
            raise ObjectError(f"{elf.path}: legacy map {s.name!r} runs past its section")
        d = MapDef(s.name, "maps")
        d.type, d.key_size, d.value_size, d.max_entries, d.flags = _LEGACY.unpack_from(
            sec.data, s.value)
        out[s.name] = d
    return out


def is_data_section(name: str) -> bool:
    """``.data``, ``.rodata``, ``.bss`` or one of their ``.NAME`` variants."""
    return name in (".data", ".rodata", ".bss") or name.startswith((".data.", ".rodata.",
                                                                    ".bss."))


def data_sections(elf: ObjElf) -> dict[str, MapDef]:
    """One array map per global-data section, holding the section's bytes."""
    out: dict[str, MapDef] = {}
    for sec in elf.sections:
        if not is_data_section(sec.name) or sec.size == 0 or sec.is_code:
            continue
        d = MapDef(sec.name, sec.name)
        d.type = int(MapType.ARRAY)
        d.key_size = 4
        d.value_size = sec.size
        d.max_entries = 1
        d.data = bytearray(sec.data)
        if sec.name.startswith(".rodata"):
            d.flags = BPF_F_RDONLY_PROG
            d.frozen = True
        out[sec.name] = d
    return out
