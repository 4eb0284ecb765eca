"""The ELF structures and numbers, declared once, as data.

Each structure is a list of ``(field, type)`` pairs in file order, the way
the ELF specification (and pyelftools) declare them; the types are the
specification's -- ``Half``, ``Word``, ``Sword``, ``Addr``, ``Off``,
``Xword``, ``Sxword``, ``uchar`` -- whose widths depend on the ELF class.
:func:`layout` turns a structure, a class and a byte order into an
:class:`ElfStruct`: a :class:`struct.Struct` that also knows its field names.
Every reader and the writer of :mod:`pyebpf.elf` get their structures here.

The number tables give the names pyelftools gives (``e_type``,
``e_machine``, ``sh_type``), so that both header parsers of
:class:`~pyebpf.elf.ElfFile` agree.
"""
from __future__ import annotations

import struct

from .errors import ElfError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["ElfStruct", "layout", "STRUCTURES", "E_TYPES", "MACHINES", "SH_TYPES",
           "sh_type_names"]

# ------------------------------------------------------------------ numbers
ET_NONE, ET_REL, ET_EXEC, ET_DYN, ET_CORE = range(5)
EM_386, EM_PPC, EM_PPC64, EM_S390, EM_ARM, EM_SPARCV9 = 3, 20, 21, 22, 40, 43
EM_X86_64, EM_AARCH64, EM_RISCV, EM_LOONGARCH = 62, 183, 243, 258
PT_NULL, PT_LOAD, PT_DYNAMIC, PT_INTERP, PT_NOTE = range(5)
PT_GNU_STACK = 0x6474E551
PF_X, PF_W, PF_R = 1, 2, 4
SHT_NULL, SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_RELA, SHT_HASH, SHT_DYNAMIC, SHT_NOTE, \
    SHT_NOBITS, SHT_REL = range(10)
SHT_DYNSYM = 11
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR = 1, 2, 4
SHN_UNDEF, SHN_ABS, SHN_COMMON = 0, 0xFFF1, 0xFFF2
STT_NOTYPE, STT_OBJECT, STT_FUNC, STT_SECTION, STT_FILE, STT_COMMON, STT_TLS = range(7)
STT_GNU_IFUNC = 10
STB_LOCAL, STB_GLOBAL, STB_WEAK = 0, 1, 2
STB_GNU_UNIQUE = 10
DT_NULL, DT_NEEDED, DT_PLTRELSZ, DT_PLTGOT, DT_HASH, DT_STRTAB, DT_SYMTAB = range(7)
DT_STRSZ, DT_SYMENT, DT_SONAME = 10, 11, 14
NT_GNU_BUILD_ID = 3
R_X86_64_64, R_X86_64_GLOB_DAT, R_X86_64_RELATIVE = 1, 6, 8
VERSYM_HIDDEN = 0x8000

#: e_type -> name
E_TYPES = {ET_NONE: "ET_NONE", ET_REL: "ET_REL", ET_EXEC: "ET_EXEC", ET_DYN: "ET_DYN",
           ET_CORE: "ET_CORE", 0xFF00: "ET_LOPROC", 0xFFFF: "ET_HIPROC"}
#: e_machine -> name, for the machines the struct parser reads (others go to pyelftools)
MACHINES = {EM_386: "EM_386", EM_PPC: "EM_PPC", EM_PPC64: "EM_PPC64", EM_S390: "EM_S390",
            EM_ARM: "EM_ARM", EM_SPARCV9: "EM_SPARCV9", EM_X86_64: "EM_X86_64",
            EM_AARCH64: "EM_AARCH64", EM_RISCV: "EM_RISCV", EM_LOONGARCH: "EM_LOONGARCH"}
#: sh_type -> name, every machine
SH_TYPES = {
    0: "SHT_NULL", 1: "SHT_PROGBITS", 2: "SHT_SYMTAB", 3: "SHT_STRTAB", 4: "SHT_RELA",
    5: "SHT_HASH", 6: "SHT_DYNAMIC", 7: "SHT_NOTE", 8: "SHT_NOBITS", 9: "SHT_REL",
    10: "SHT_SHLIB", 11: "SHT_DYNSYM", 14: "SHT_INIT_ARRAY", 15: "SHT_FINI_ARRAY",
    16: "SHT_PREINIT_ARRAY", 17: "SHT_GROUP", 18: "SHT_SYMTAB_SHNDX", 19: "SHT_RELR",
    20: "SHT_NUM", 0x60000000: "SHT_LOOS", 0x6FFFFFF3: "SHT_SUNW_LDYNSYM",
    0x6FFFFFF5: "SHT_GNU_ATTRIBUTES", 0x6FFFFFF6: "SHT_GNU_HASH",
    0x6FFFFFF7: "SHT_GNU_LIBLIST", 0x6FFFFFFC: "SHT_SUNW_syminfo",
    0x6FFFFFFD: "SHT_GNU_verdef", 0x6FFFFFFE: "SHT_GNU_verneed",
    0x6FFFFFFF: "SHT_GNU_versym", 0x80000000: "SHT_LOUSER", 0xFFFFFFFF: "SHT_HIUSER",
}
_SH_TYPES_BY_MACHINE = {
    EM_X86_64: {**SH_TYPES, 0x70000001: "SHT_AMD64_UNWIND"},
    EM_AARCH64: {**SH_TYPES, 0x70000003: "SHT_AARCH64_ATTRIBUTES"},
    EM_RISCV: {**SH_TYPES, 0x70000003: "SHT_RISCV_ATTRIBUTES"},
    EM_ARM: {**SH_TYPES, 0x70000001: "SHT_ARM_EXIDX", 0x70000002: "SHT_ARM_PREEMPTMAP",
             0x70000003: "SHT_ARM_ATTRIBUTES", 0x70000004: "SHT_ARM_DEBUGOVERLAY"},
}


def sh_type_names(machine: int) -> dict[int, str]:
    """sh_type -> name for files of ``machine`` (processor-specific types included)."""
    return _SH_TYPES_BY_MACHINE.get(machine, SH_TYPES)


# --------------------------------------------------------------- structures
#: struct codes of the specification's types, by ELF class
_TYPES = {
    32: {"uchar": "B", "Half": "H", "Word": "I", "Sword": "i", "Addr": "I", "Off": "I",
         "Xword": "I", "Sxword": "i", "Ident": "16s"},
    64: {"uchar": "B", "Half": "H", "Word": "I", "Sword": "i", "Addr": "Q", "Off": "Q",
         "Xword": "Q", "Sxword": "q", "Ident": "16s"},
}

_EHDR = (("e_ident", "Ident"), ("e_type", "Half"), ("e_machine", "Half"),
         ("e_version", "Word"), ("e_entry", "Addr"), ("e_phoff", "Off"), ("e_shoff", "Off"),
         ("e_flags", "Word"), ("e_ehsize", "Half"), ("e_phentsize", "Half"),
         ("e_phnum", "Half"), ("e_shentsize", "Half"), ("e_shnum", "Half"),
         ("e_shstrndx", "Half"))
_SHDR = (("sh_name", "Word"), ("sh_type", "Word"), ("sh_flags", "Xword"), ("sh_addr", "Addr"),
         ("sh_offset", "Off"), ("sh_size", "Xword"), ("sh_link", "Word"), ("sh_info", "Word"),
         ("sh_addralign", "Xword"), ("sh_entsize", "Xword"))

#: structure name -> {ELF class: fields}; the two classes order Phdr and Sym differently
STRUCTURES: dict[str, dict[int, tuple[tuple[str, str], ...]]] = {
    "Ehdr": {32: _EHDR, 64: _EHDR},
    "Phdr": {
        32: (("p_type", "Word"), ("p_offset", "Off"), ("p_vaddr", "Addr"), ("p_paddr", "Addr"),
             ("p_filesz", "Word"), ("p_memsz", "Word"), ("p_flags", "Word"),
             ("p_align", "Word")),
        64: (("p_type", "Word"), ("p_flags", "Word"), ("p_offset", "Off"), ("p_vaddr", "Addr"),
             ("p_paddr", "Addr"), ("p_filesz", "Xword"), ("p_memsz", "Xword"),
             ("p_align", "Xword")),
    },
    "Shdr": {32: _SHDR, 64: _SHDR},
    "Sym": {
        32: (("st_name", "Word"), ("st_value", "Addr"), ("st_size", "Word"),
             ("st_info", "uchar"), ("st_other", "uchar"), ("st_shndx", "Half")),
        64: (("st_name", "Word"), ("st_info", "uchar"), ("st_other", "uchar"),
             ("st_shndx", "Half"), ("st_value", "Addr"), ("st_size", "Xword")),
    },
    "Dyn": {c: (("d_tag", "Sxword"), ("d_val", "Xword")) for c in (32, 64)},
    "Nhdr": {c: (("n_namesz", "Word"), ("n_descsz", "Word"), ("n_type", "Word"))
             for c in (32, 64)},
    "Verdef": {c: (("vd_version", "Half"), ("vd_flags", "Half"), ("vd_ndx", "Half"),
                   ("vd_cnt", "Half"), ("vd_hash", "Word"), ("vd_aux", "Word"),
                   ("vd_next", "Word")) for c in (32, 64)},
    "Verdaux": {c: (("vda_name", "Word"), ("vda_next", "Word")) for c in (32, 64)},
    "Verneed": {c: (("vn_version", "Half"), ("vn_cnt", "Half"), ("vn_file", "Word"),
                    ("vn_aux", "Word"), ("vn_next", "Word")) for c in (32, 64)},
    "Vernaux": {c: (("vna_hash", "Word"), ("vna_flags", "Half"), ("vna_other", "Half"),
                    ("vna_name", "Word"), ("vna_next", "Word")) for c in (32, 64)},
    "Rel": {c: (("r_offset", "Addr"), ("r_info", "Xword")) for c in (32, 64)},
    "Rela": {c: (("r_offset", "Addr"), ("r_info", "Xword"), ("r_addend", "Sxword"))
             for c in (32, 64)},
    "Half": {c: (("value", "Half"),) for c in (32, 64)},
    "Addr": {c: (("value", "Addr"),) for c in (32, 64)},
}


class ElfStruct(struct.Struct):
    """A :class:`struct.Struct` for one ELF structure, with its field names.

    ``unpack``/``iter_unpack`` give tuples in field order (the fast way);
    :meth:`build` packs from field names, :meth:`fields_of` unpacks to a dict.
    """

    __slots__ = ("name", "fields")

    def __init__(self, name: str, fmt: str, fields: tuple[str, ...]) -> None:
        super().__init__(fmt)
        self.name = name
        self.fields = fields

    def build(self, **values: Any) -> bytes:
        """The packed structure; fields not given are 0 (``e_ident`` empty)."""
        unknown = set(values) - set(self.fields)
        if unknown:
            raise ElfError(f"{self.name} has no field {', '.join(sorted(unknown))}")
        return self.pack(*(values.get(f, b"" if f == "e_ident" else 0) for f in self.fields))

    def fields_of(self, data: bytes, offset: int = 0) -> dict[str, Any]:
        """The structure at ``offset`` of ``data`` as ``{field: value}``."""
        return dict(zip(self.fields, self.unpack_from(data, offset)))


_CACHE: dict[tuple[str, int, bool], ElfStruct] = {}


def layout(name: str, elfclass: int = 64, little_endian: bool = True) -> ElfStruct:
    """The :class:`ElfStruct` of structure ``name`` (a key of :data:`STRUCTURES`)
    for an ELF class (32/64) and byte order; built once."""
    key = (name, elfclass, little_endian)
    hit = _CACHE.get(key)
    if hit is None:
        decl = STRUCTURES[name][elfclass]
        types = _TYPES[elfclass]
        fmt = ("<" if little_endian else ">") + "".join(types[t] for _f, t in decl)
        hit = _CACHE[key] = ElfStruct(name, fmt, tuple(f for f, _t in decl))
    return hit
