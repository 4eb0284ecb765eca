"""A clang-built BPF object: opened (:func:`open_object`), set up (globals),
loaded (:meth:`BpfObject.load`), attached, closed.

Loading does what libbpf does, in this order: the object's BTF fixed up and
loaded; maps created (global data filled in from the file and from
``obj.globals``, ``.rodata`` and ``.kconfig`` frozen, ``LIBBPF_PIN_BY_NAME``
maps reused from or pinned to ``/sys/fs/bpf``); CO-RE relocations resolved
against the kernel's BTF (an unresolvable one poisons its instruction);
then each program linked (called functions appended), its map, data and
extern references patched, and loaded with its func_info and line_info.
"""
from __future__ import annotations

import os
import struct

from ..btf import Btf, BtfExt, Kind
from ..kernel.constants import MapType, ProgType
from ..kernel.lifetime import Owner, close_all
from .elfobj import ObjElf
from .errors import ObjectError
from .link import OP_CALL, Func, decode_slots, functions
from .maps import MapDef, btf_maps, data_sections, is_data_section, legacy_maps
from .sections import SectionDef, section_match

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterator

__all__ = ["BpfObject", "ObjectProgram", "Globals", "open_object", "load_object",
           "PIN_ROOT"]

PIN_ROOT = "/sys/fs/bpf"


class ObjectProgram:
    """One program of an object.

    ``name``, ``section``, ``kind`` (``tracepoint``, ``uprobe``...),
    ``prog_type``, ``attach_type``; after :meth:`BpfObject.load`, ``status``
    is ``"loaded"``, ``"rejected"`` or ``"skipped"``, ``reason`` says why,
    ``error`` is the exception of a rejection, and ``loaded`` the
    :class:`~pyebpf.loader.LoadedProgram` (attach functions take this
    object or ``loaded`` alike: it has ``fileno()`` and ``prog_type``).
    """

    def __init__(self, obj: BpfObject, func: Func, section: str, sdef: SectionDef | None,
                 lenient: bool = False):
        self._obj = obj
        self.func = func
        self.name = func.name
        self.section = section
        self.sdef = sdef
        self.kind = sdef.kind if sdef else "unknown"
        self.prog_type = int(sdef.prog_type) if sdef else 0
        self.attach_type = int(sdef.attach_type) if sdef else 0
        self.expected_attach_type = self.attach_type
        #: the section name is libbpf 0.x's form (``xdp/NAME``, ``perf_event/...``,
        #: ``classifier/...``), which libbpf 1.x refuses
        self.lenient_section = lenient
        self.status = "not loaded"
        self.reason = ""
        self.error: Exception | None = None
        #: (fd, instructions, maps, log, the fd's place in the object's owned list)
        #: of a program loaded, until ``loaded`` wraps them (kept as ``_loaded``)
        self._kept: tuple[Any, Any, Any, str, int] | None = None
        #: the instruction slots as loaded (after linking and relocation)
        self.insn_count = func.end - func.start

    @property
    def loaded(self) -> Any:
        """The :class:`~pyebpf.loader.LoadedProgram` once loaded (else None),
        made on first use: loading keeps each program's fd alone (owned by the
        object), and a process that loads and closes never imports the loader."""
        lp = self.__dict__.get("_loaded")
        kept = self._kept
        if lp is None and kept is not None:
            from ..loader import LoadedProgram
            fd, insns, maps, log, at = kept
            made = LoadedProgram(fd, self.prog_type, None, insns, maps, log, self.name,
                                 self.expected_attach_type)
            # (setdefault is atomic: of two threads asking at once, one wrapper owns the fd)
            lp = self.__dict__.setdefault("_loaded", made)
            if lp is not made:
                made._disown()
                return lp
            self._kept = None
            owned = self._obj._owned
            if not (at < len(owned) and owned[at] is fd):
                at = next((i for i, thing in enumerate(owned) if thing is fd), -1)
            if at >= 0:
                owned[at] = lp                     # the object closes the wrapper now
            else:                                  # the object closed it already
                lp.close()
        return lp

    @loaded.setter
    def loaded(self, value: Any) -> None:
        self._kept = None
        if value is None:
            self.__dict__.pop("_loaded", None)
        else:
            self.__dict__["_loaded"] = value

    def _loaded_as(self, fd: Any, insns: bytes, maps: Any, log: str) -> None:
        """Loaded as ``fd`` (the object owns it until :attr:`loaded` wraps it)."""
        self.loaded = None
        owned = self._obj._owned
        self._kept = (fd, insns, maps, log, len(owned))
        owned.append(fd)

    @property
    def type_name(self) -> str:
        """The program type, lower case (``tracepoint``, ``tracing``...)."""
        try:
            return ProgType(self.prog_type).name.lower()
        except ValueError:
            return "unknown"

    # the attach functions accept a program with fileno()/fd/prog_type
    def fileno(self) -> int:
        """The loaded program's fd (raises if it is not loaded)."""
        kept = self._kept              # (its fd alone: the loader is not needed for it)
        fd: int = kept[0].fileno() if kept is not None else self._require().fileno()
        return fd

    @property
    def fd(self) -> Any:
        """The loaded program's :class:`~pyebpf.kernel.Fd`."""
        return self._require().fd

    def _require(self) -> Any:
        if self.loaded is None:
            raise ObjectError(f"program {self.name!r} is {self.status}"
                              + (f" ({self.reason})" if self.reason else "")
                              + "; call load() first" * (self.status == "not loaded"))
        return self.loaded

    def test_run(self, *args: Any, **kw: Any) -> Any:
        """:meth:`~pyebpf.loader.LoadedProgram.test_run` of the loaded program."""
        return self._require().test_run(*args, **kw)

    def attach(self, *args: Any, **kw: Any) -> Any:
        """Attach by the section name (see :func:`pyebpf.objects.attach.attach_program`);
        the link is owned by the object too."""
        from .attach import attach_program
        link = attach_program(self, *args, **kw)
        self._obj._links.append(link)
        return link

    def attach_usdt(self, binary: str | None, provider: str | None, name: str, *,
                    pid: int | None = None, cookie: int = 0, method: str = "auto") -> Any:
        """Attach to USDT probe ``provider:name`` of ``binary`` through libbpf's
        ``usdt.bpf.h`` protocol, as ``bpf_program__attach_usdt`` does (see
        :func:`pyebpf.objects.usdt.attach_usdt`); the link is owned by the object too."""
        from .usdt import attach_usdt
        link = attach_usdt(self, binary, provider, name, pid=pid, cookie=cookie, method=method)
        self._obj._links.append(link)
        return link

    def __repr__(self) -> str:
        return f"<ObjectProgram {self.name!r} {self.section!r} {self.kind} ({self.status})>"


class Globals:
    """The global variables of ``.data``, ``.rodata``, ``.bss`` (and their
    ``.NAME`` variants), by name, typed from the BTF DATASEC/VAR records.

    Before load, setting one changes the initial value loaded into its map;
    after load, reading one reads the map (``.rodata`` stays as loaded).
    Integers (and enums, bools, pointers) take ints, checked against the
    size; char arrays take ``str``/``bytes``; anything else takes bytes of
    its exact size.
    """

    def __init__(self, obj: BpfObject) -> None:
        self._obj = obj
        #: name -> (section, offset, size, type id)
        self.layout: dict[str, tuple[str, int, int, int]] = {}
        btf = obj.btf
        if btf is None:
            return
        for tid in btf.find_prefixed("."):
            t = btf[tid]
            if t.kind != Kind.DATASEC or t.name not in obj.map_defs:
                continue
            for v in t.secinfo:
                var = btf[v.type]
                if var.kind != Kind.VAR:
                    continue
                off = obj._symbol_offset(t.name, var.name)
                self.layout[var.name] = (t.name, v.offset if off is None else off,
                                         btf.size_of(var.ref), var.ref)

    def __contains__(self, name: object) -> bool:
        return name in self.layout

    def __iter__(self) -> Iterator[str]:
        return iter(self.layout)

    def __len__(self) -> int:
        return len(self.layout)

    def keys(self) -> list[str]:
        """The names."""
        return list(self.layout)

    def _where(self, name: str) -> tuple[str, int, int, int]:
        try:
            return self.layout[name]
        except KeyError:
            from ..errors import close_matches
            close = close_matches(name, self.layout)
            raise ObjectError(f"no global variable {name!r} in {self._obj.path}"
                              + (f"; did you mean {', '.join(close)}?" if close else
                                 f" (globals: {', '.join(self.layout) or 'none'})")) from None

    def __getitem__(self, name: str) -> Any:
        sec, off, size, tid = self._where(name)
        mdef = self._obj.map_defs[sec]
        raw = bytes(mdef.data[off:off + size]) if mdef.data is not None else b""
        m = self._obj.maps.get(sec) if self._obj.loaded else None
        if m is not None:
            from ..kernel import syscall as _sys
            value = _sys.map_lookup(m.fileno(), b"\0\0\0\0", mdef.value_size)
            if value is not None:
                raw = value[off:off + size]
        return self._decode(tid, raw)

    def __setitem__(self, name: str, value: Any) -> None:
        sec, off, size, tid = self._where(name)
        if self._obj.loaded:
            raise ObjectError(f"global {name!r}: set globals before load() (the object is "
                              "loaded; write the map obj.maps[...] instead)")
        data = self._obj.map_defs[sec].data
        assert data is not None
        data[off:off + size] = self._encode(name, tid, size, value)

    def _int_info(self, tid: int) -> tuple[bool, bool] | None:
        """(is an integer-like, signed) for a type."""
        btf = self._obj.btf
        assert btf is not None       # (globals exist only with BTF)
        t = btf[btf.resolve(tid)]
        if t.kind == Kind.INT:
            return True, bool(t.encoding & 1)
        if t.kind in (Kind.ENUM, Kind.ENUM64):
            return True, bool(t.kind_flag)
        if t.kind == Kind.PTR:
            return True, False
        return None

    def _decode(self, tid: int, raw: bytes) -> Any:
        info = self._int_info(tid)
        if info is not None and len(raw) in (1, 2, 4, 8):
            return int.from_bytes(raw, "little", signed=info[1])
        return raw

    def _encode(self, name: str, tid: int, size: int, value: Any) -> bytes:
        info = self._int_info(tid)
        if info is not None and isinstance(value, (int, bool)):
            try:
                return int(value).to_bytes(size, "little", signed=info[1] and value < 0)
            except OverflowError:
                kind = "signed" if info[1] else "unsigned"
                raise ObjectError(f"global {name!r}: {value} does not fit its {size}-byte "
                                  f"{kind} type") from None
        if isinstance(value, str):
            value = value.encode()
        if isinstance(value, (bytes, bytearray, memoryview)):
            data = bytes(value)
            if len(data) > size or (info is not None and len(data) != size):
                raise ObjectError(f"global {name!r} is {size} bytes; got {len(data)}")
            return data + b"\0" * (size - len(data))
        raise ObjectError(f"global {name!r}: cannot store {type(value).__name__} "
                          f"{value!r} (give an int, str or bytes)")


class BpfObject(Owner):
    """An object file's programs, maps and globals (see the module docstring).

    Attributes: ``path``, ``name``, ``license``, ``programs`` (name ->
    :class:`ObjectProgram`), ``map_defs`` (name -> :class:`MapDef`),
    ``maps`` (name -> pyebpf map, after load), ``globals``
    (:class:`Globals`), ``externs`` (name -> ``"kconfig"``/``"ksym"``/``"kfunc"``),
    ``btf``/``btf_ext`` (None without ``-g``).
    """

    def __init__(self, path: str, data: bytes | None = None, *,
                 strict_sections: bool = False) -> None:
        self.path = path
        #: section names matched as libbpf 1.x does (see :mod:`.sections`)
        self.strict_sections = strict_sections
        self.elf = ObjElf.read(path, data)
        base = os.path.basename(path)
        self.name = base.split(".")[0] or "obj"
        self.btf: Btf | None = None
        self.btf_ext: BtfExt | None = None
        self._read_btf()
        lic = self.elf.section("license")
        self.license = lic.data.split(b"\0")[0].decode("ascii", "replace") if lic else ""
        ver = self.elf.section("version")
        self.kern_version = struct.unpack_from("<I", ver.data)[0] if ver and ver.size >= 4 else 0
        self.map_defs: dict[str, MapDef] = {}
        self.map_defs.update(legacy_maps(self.elf))
        self.map_defs.update(btf_maps(self.elf, self.btf))
        self.map_defs.update(data_sections(self.elf))
        self.externs: dict[str, str] = {}
        self._kconfig: dict[str, tuple[int, int, int]] = {}
        self._read_externs()
        self._funcs: dict[int, list[Func]] = {}
        self.programs: dict[str, ObjectProgram] = {}
        for sec in self.elf.sections:
            if not sec.is_code:
                continue
            self._funcs[sec.index] = functions(self.elf, sec.index)
            if sec.name == ".text":
                continue
            sdef, lenient = section_match(sec.name)
            for f in self._funcs[sec.index]:
                self.programs[f.name] = ObjectProgram(self, f, sec.name, sdef, lenient)
        self._check_init_slots()
        self.globals = Globals(self)
        #: the maps by name (see :attr:`maps`); a map the object created is a
        #: loading.CreatedMap until first use
        self._maps: dict[str, Any] = {}
        self._unwrapped = False
        self.loaded = False
        self._btf_fd: Any = None
        self._vmlinux: Btf | None = None
        self._links: list[Any] = []
        #: the spec ids of libbpf's USDT protocol (pyebpf.objects.usdt), on first use
        self._usdt_specs: Any = None
        #: why the kernel refused the object's BTF (the load went on without it;
        #: its ``.log`` is the kernel's BTF log)
        self.btf_error: Exception | None = None
        #: fix the BTF up for what the kernel lacks, as its BTF-kind probes say
        #: (pyebpf.objects.btfprep.KernelBtf); False loads it as clang left it
        #: after the loader's own fill-ins
        self.sanitize_btf = True
        #: after load: why each prog-array slot its initializer names is empty
        #: (``map 'calls': slot [2]: prog 'tail_b' is rejected: ...``)
        self.empty_slots: list[str] = []
        #: (section, relocation, result) of every CO-RE relocation, after load
        self.core_results: list[Any] = []
        self._owned: list[Any] = []
        self._own(close_all, self._owned)

    # ----------------------------------------------------------- reading
    def _read_btf(self) -> None:
        sec = self.elf.section(".BTF")
        if sec is None:
            return
        self.btf = Btf(sec.data)
        ext = self.elf.section(".BTF.ext")
        if ext is not None:
            self.btf_ext = BtfExt(ext.data, self.btf)

    def _check_init_slots(self) -> None:
        """Each slot of a ``.values`` initializer names a program of this
        object (prog array) or one of its maps (map-in-map)."""
        for name, d in self.map_defs.items():
            progs = d.type == MapType.PROG_ARRAY
            known: Any = self.programs if progs else self.map_defs
            for slot, target in sorted(d.init_slots.items()):
                if target not in known:
                    what = "prog" if progs else "map"
                    raise ObjectError(
                        f"{self.path}: map {name!r}: slot [{slot}]: {target!r} is not a "
                        f"{'program' if progs else 'map'} of this object ({what}s: "
                        f"{', '.join(known) or 'none'})")

    def _symbol_offset(self, section: str, name: str) -> int | None:
        sec = self.elf.section(section)
        if sec is None:
            return None
        for s in self.elf.symbols:
            if s.shndx == sec.index and s.name == name:
                return s.value
        return None

    def _section_size(self, name: str) -> int | None:
        sec = self.elf.section(name)
        return sec.size if sec is not None else None

    def _read_externs(self) -> None:
        btf = self.btf
        if btf is None:
            return
        kinds: dict[str, str] = {}
        for tid in btf.find_prefixed("."):
            t = btf[tid]
            if t.kind == Kind.DATASEC and t.name in (".kconfig", ".ksyms"):
                for v in t.secinfo:
                    var = btf[v.type]
                    if t.name == ".kconfig":
                        kinds[var.name] = "kconfig"
                    else:
                        kinds[var.name] = "kfunc" if var.kind == Kind.FUNC else "ksym"
        offset = 0
        for s in self.elf.symbols:
            if s.shndx != 0 or not s.name or s.index == 0:
                continue
            kind = kinds.get(s.name)
            if kind is None:
                raise ObjectError(f"{self.path}: extern {s.name!r} is neither __kconfig nor "
                                  "__ksym; pyebpf cannot resolve it")
            self.externs[s.name] = kind
            if kind == "kconfig":
                tid = next(i for i in btf.find(s.name, Kind.VAR))
                ref = btf[tid].ref
                size = btf.size_of(ref)
                align = btf.align_of(ref) or 1
                offset = (offset + align - 1) // align * align
                self._kconfig[s.name] = (offset, size, ref)
                offset += size
        if self._kconfig:
            d = MapDef(".kconfig", ".kconfig")
            d.type = int(MapType.ARRAY)
            d.key_size, d.value_size, d.max_entries = 4, max(offset, 1), 1
            d.data = bytearray(d.value_size)
            d.frozen = True
            d.flags = 1 << 7
            self.map_defs[".kconfig"] = d

    def needs(self) -> dict[str, dict[str, int]]:
        """What each program section needs: ``{section: {"map relocations": n,
        "global data": n, "bpf-to-bpf calls": n, "CO-RE": n, "externs": n}}``."""
        out: dict[str, dict[str, int]] = {}
        elf = self.elf
        core = self.btf_ext.core_relos if self.btf_ext is not None else {}
        for sec in elf.sections:
            if not sec.is_code or not sec.data:     # (clang's empty .text holds no program)
                continue
            c = {"map relocations": 0, "global data": 0, "bpf-to-bpf calls": 0, "CO-RE": 0,
                 "externs": 0}
            slots = decode_slots(sec.data)
            for off, symi in sec.relocs.items():
                sym = elf.symbols[symi]
                if sym.shndx == 0:
                    c["externs"] += 1
                    continue
                if sym.shndx >= len(elf.sections):
                    continue
                tsec = elf.sections[sym.shndx]
                if tsec.name in (".maps", "maps"):
                    c["map relocations"] += 1
                elif is_data_section(tsec.name):
                    c["global data"] += 1
                elif tsec.is_code:
                    c["bpf-to-bpf calls"] += 1
            c["bpf-to-bpf calls"] += sum(1 for k, s in enumerate(slots)
                                         if s.code == OP_CALL and s.src == 1
                                         and k * 8 not in sec.relocs)
            c["CO-RE"] = len(core.get(sec.name, ()))
            out[sec.name] = c
        return out

    # ----------------------------------------------------------- loading
    @property
    def maps(self) -> dict[str, Any]:
        """The maps by name, once loaded: pyebpf maps (``HashMap``,
        ``RingBuf``, ``ArrayMap`` for global data...; a ``RawObjectMap`` for
        a type pyebpf has no class for).  The kernel's maps exist from
        :meth:`load` on; their Python objects are made on first use."""
        if self._unwrapped:
            from .loading import wrap_maps
            wrap_maps(self)
        return self._maps

    def vmlinux(self) -> Btf:
        """The running kernel's BTF (opened once, on first need)."""
        if self._vmlinux is None:
            try:
                self._vmlinux = Btf.vmlinux()
            except OSError as exc:
                raise ObjectError(f"this object needs the kernel's BTF "
                                  f"(/sys/kernel/btf/vmlinux): {exc}") from None
        return self._vmlinux

    def load(self, *, strict: bool = True, log_level: int = 0) -> BpfObject:
        """Create the maps and load every program (see the module docstring).

        Programs this kernel cannot load at all (a feature probe says so:
        fentry/fexit and LSM where the kernel refuses them) are ``skipped``.
        With ``strict`` (the default) a rejected program closes everything and
        raises its error (a :class:`~pyebpf.errors.VerifierError` naming the C
        source line); with ``strict=False`` each program records its
        ``status`` and the others load.  Returns the object.

        When the kernel refuses the object's BTF, the load goes on without it
        (as libbpf's does); a :class:`~pyebpf.errors.BtfWarning` says so once,
        with the kernel's reason (kept in :attr:`btf_error`), and a rejection
        the missing BTF causes (a callback's "missing btf func_info", a map
        that needs its types) ends with that reason too.
        """
        if self.loaded:
            raise ObjectError(f"{self.path} is loaded already")
        if self.closed:
            raise ObjectError(f"{self.path} is closed")
        from .loading import load_object_into_kernel
        try:
            load_object_into_kernel(self, log_level)
        except BaseException:
            self.close()
            raise
        self.loaded = True
        if strict:
            first = next((p for p in self.programs.values() if p.status == "rejected"), None)
            if first is not None and first.error is not None:
                self.close()
                raise first.error
        return self

    def attach_all(self) -> list[Any]:
        """Attach every loaded program whose section names its target (the
        links are owned by the object); returns the links.  A bare
        ``SEC("usdt")``, ``SEC("uprobe")`` or ``SEC("uretprobe")`` names
        none: it is left for an explicit attach, as libbpf's skeletons do."""
        out = []
        for p in self.programs.values():
            if p.status == "loaded" and p.section not in ("usdt", "uprobe", "uretprobe"):
                out.append(p.attach())
        return out

    def _close_resources(self) -> None:
        for link in reversed(self._links):
            try:
                link.close()
            except Exception:   # noqa: BLE001 - keep closing the rest
                pass
        self._links.clear()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "loaded" if self.loaded else "opened"
        return (f"<BpfObject {self.path!r} {len(self.programs)} programs, "
                f"{len(self.map_defs)} maps ({state})>")


def open_object(path: str, *, strict_sections: bool = False) -> BpfObject:
    """Open a clang-built BPF object (``clang -O2 -g -target bpf``): its
    programs, maps and globals, nothing in the kernel yet.

    Section names are matched leniently, as libbpf 0.x matched them
    (``xdp/NAME``, ``classifier/...``, ``perf_event/...`` are taken; such a
    program's ``lenient_section`` is True); with ``strict_sections``, as
    libbpf 1.x: such a program is rejected at load, naming the rule."""
    return BpfObject(os.fspath(path), strict_sections=strict_sections)


def load_object(path: str, *, strict_sections: bool = False, **load_kw: Any) -> BpfObject:
    """:func:`open_object` then :meth:`BpfObject.load`."""
    obj = open_object(path, strict_sections=strict_sections)
    return obj.load(**load_kw)
