"""The steps of :meth:`~.obj.BpfObject.load` (see :mod:`.obj`): BTF, maps,
externs, CO-RE, then each program linked, patched and loaded."""
from __future__ import annotations

import errno as E
import os
import struct
from _weakref import ref as _weak    # (not weakref: its import costs ~1 ms)

from ..btf import Kind
from ..errors import KernelError, VerifierError
from ..kernel.constants import MapType, ProgType
from .elfobj import STT_FUNC
from .errors import ObjectError
from .link import OP_CALL, OP_LD_IMM64, CodeIndex, Linked, SectionCode, link_program
from .infos import BtfInfos, btf_infos, lines_of
from .maps import PIN_BY_NAME, MapDef

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .btfprep import PreparedBtf
    from .obj import BpfObject, ObjectProgram

PSEUDO_MAP_FD = 1
PSEUDO_MAP_VALUE = 2
PSEUDO_BTF_ID = 3
PSEUDO_KFUNC_CALL = 2
POISON_HELPER = 0xBAD2310
PIN_ROOT = "/sys/fs/bpf"
_BTF_TARGET = (ProgType.TRACING, ProgType.LSM, ProgType.EXT)
#: map types created without BTF for their keys and values, as libbpf creates
#: them (the kernel refuses it for most; a refused BTF would cost a failed call)
_NO_BTF_MAPS = frozenset((MapType.PERF_EVENT_ARRAY, MapType.CGROUP_ARRAY, MapType.STACK_TRACE,
                          MapType.ARRAY_OF_MAPS, MapType.HASH_OF_MAPS, MapType.DEVMAP,
                          MapType.DEVMAP_HASH, MapType.CPUMAP, MapType.XSKMAP,
                          MapType.SOCKMAP, MapType.SOCKHASH, MapType.QUEUE, MapType.STACK,
                          MapType.ARENA, MapType.PROG_ARRAY))
_REFUSED = (E.EPERM, E.EOPNOTSUPP, 524)      # 524: ENOTSUPP


def load_object_into_kernel(obj: BpfObject, log_level: int) -> None:
    """Everything :meth:`BpfObject.load` does, in order (with the cyclic
    garbage collector paused: what loading makes lives on, and a large
    object's load would otherwise pay for dozens of collections)."""
    import gc
    paused = gc.isenabled()
    gc.disable()
    try:
        _load_all(obj, log_level)
    finally:
        if paused:
            gc.enable()


def _load_all(obj: BpfObject, log_level: int) -> None:
    prepared = _load_btf(obj)
    _fill_kconfig(obj)
    _create_maps(obj)
    code = {idx: SectionCode(obj.elf.sections[idx].data) for idx in obj._funcs}
    _apply_core(obj, code)
    ksyms = _resolve_ksyms(obj)
    infos = BtfInfos(obj, prepared)
    index = CodeIndex(obj.elf, code, obj._funcs)
    targets: dict[tuple[str, int], int] = {}
    for prog in obj.programs.values():
        _load_program(obj, prog, index, infos, ksyms, targets, log_level)
    _init_prog_arrays(obj)


# ------------------------------------------------------------------ BTF
def _load_btf(obj: BpfObject) -> PreparedBtf | None:
    if obj.btf is None:
        return None
    from ..kernel.btf import btf_load
    from .btfprep import kernel_btf, prepare_btf
    offsets = {name: v[0] for name, v in obj._kconfig.items()}
    size = obj.map_defs[".kconfig"].value_size if ".kconfig" in obj.map_defs else 0
    prepared = prepare_btf(obj.btf, obj._section_size, obj._symbol_offset, offsets, size,
                           _hidden_subprograms(obj),
                           kernel_btf(obj.btf) if obj.sanitize_btf else None)
    try:
        obj._btf_fd = btf_load(prepared.blob)
    except KernelError as exc:
        # libbpf goes on without BTF; so does pyebpf (no func/line info, no typed
        # maps), and says so once, with the kernel's reason
        obj.btf_error = exc
        obj._btf_fd = None
        import warnings
        from ..errors import BtfWarning
        warnings.warn(BtfWarning(
            f"{obj.path}: the kernel refused the object's BTF ({btf_refusal(obj)}); loading "
            "without it: maps get no key/value types (task storage and the like fail), "
            "verifier messages no C source lines, global functions are verified as static, "
            "callbacks (bpf_loop, timers) are refused"),
            stacklevel=5)
        return None
    obj._owned.append(obj._btf_fd)
    return prepared


def btf_refusal(obj: BpfObject) -> str:
    """Why the kernel refused ``obj``'s BTF: the last line of its BTF log
    (``[311] FUNC bpf_task_acquire type_id=8 Invalid arg#1``), else the
    error; empty when it was not refused."""
    exc = obj.btf_error
    if exc is None:
        return ""
    lines = [ln.strip() for ln in (getattr(exc, "log", "") or "").splitlines() if ln.strip()]
    return lines[-1] if lines else (str(exc).splitlines() or [type(exc).__name__])[0]


#: words of a rejection (verifier or map creation) that BTF can be the cause of
_BTF_WORDS = ("btf", "func_info", "line_info")


def _btf_note(obj: BpfObject, text: str) -> str:
    """`` (the object's BTF was refused by the kernel: REASON)`` when it was
    and ``text`` (a rejection) is one its missing BTF can cause; else ``""``."""
    if obj.btf_error is None or not any(w in text.lower() for w in _BTF_WORDS):
        return ""
    return f" (the object's BTF was refused by the kernel: {btf_refusal(obj)})"


def _poison_note(obj: BpfObject, linked: Any, text: str) -> str:
    """``; ... CO-RE relocation ...`` naming the unresolved CO-RE relocations
    placed in this program when ``text`` (a rejection) is the verifier
    meeting the invalid call that stands for one (as libbpf poisons them);
    else ``""``."""
    if f"unknown#{POISON_HELPER}" not in text:
        return ""
    found = []
    for sec_name, relo, res in obj.core_results:
        k = relo.insn_off // 8
        for func, base in linked.funcs if res.poison else ():
            if obj.elf.sections[func.section].name == sec_name and func.start <= k < func.end:
                found.append(f"{res.local.describe()} ({relo.kind_name}) at instruction "
                             f"{base + k - func.start}")
    if not found:
        return ""
    return (f"; the loader wrote that call ({POISON_HELPER:#x}, as libbpf does) in place of "
            "an instruction whose CO-RE relocation has no match in the kernel's BTF: "
            + ", ".join(found))


def _with_btf_note(obj: BpfObject, exc: KernelError) -> KernelError:
    """``exc`` (a map creation refused) saying that the map was created
    without the types the object's refused BTF would have given it."""
    detail = (f"{exc.detail}; created without its BTF key/value types: the object's BTF "
              f"was refused by the kernel: {btf_refusal(obj)}")
    try:
        return type(exc)(exc.errno or 0, exc.operation, detail, exc.hint)
    except TypeError:                 # (a subclass built otherwise)
        return KernelError(exc.errno or 0, exc.operation, detail, exc.hint)


def _hidden_subprograms(obj: BpfObject) -> frozenset[str]:
    """The ``.text`` functions that are global but hidden (``__hidden``):
    libbpf loads them as static subprograms."""
    text = obj.elf.section(".text")
    if text is None:
        return frozenset()
    return frozenset(s.name for s in obj.elf.symbols
                     if s.shndx == text.index and s.type == STT_FUNC and s.is_hidden_global)


# ------------------------------------------------------------------ externs
def kernel_config() -> dict[str, str]:
    """``CONFIG_*`` of the running kernel: /proc/config.gz, else
    /boot/config-$(uname -r); empty when neither is readable."""
    import zlib
    try:
        with open("/proc/config.gz", "rb") as fh:
            text = zlib.decompress(fh.read(), 16 + zlib.MAX_WBITS).decode("utf-8", "replace")
    except (OSError, zlib.error):
        try:
            with open(f"/boot/config-{os.uname().release}") as fh:
                text = fh.read()
        except OSError:
            return {}
    out = {}
    for line in text.splitlines():
        if line.startswith("CONFIG_") and "=" in line:
            k, v = line.split("=", 1)
            out[k] = v
    return out


def _kconfig_value(obj: BpfObject, name: str, size: int, tid: int,
                   config: dict[str, str]) -> bytes | None:
    from ..kernel.version import kernel_version_code
    if name == "LINUX_KERNEL_VERSION":
        value: Any = kernel_version_code()
    elif name in ("LINUX_HAS_BPF_COOKIE", "LINUX_HAS_SYSCALL_WRAPPER"):
        value = 1
    elif name in config:
        raw = config[name]
        btf = obj.btf
        assert btf is not None       # (kconfig externs exist only with BTF)
        t = btf[btf.resolve(tid)]
        if raw in ("y", "n", "m"):
            if t.kind == Kind.INT and t.encoding & 2:       # char: the letter itself
                value = ord(raw)
            else:
                value = {"y": 1, "n": 0, "m": 2}[raw]
        elif raw.startswith('"'):
            data = raw.strip('"').encode()[:size - 1]
            return data + b"\0" * (size - len(data))
        else:
            value = int(raw, 0)
    else:
        return None
    return int(value).to_bytes(size, "little", signed=value < 0)


def _fill_kconfig(obj: BpfObject) -> None:
    if not obj._kconfig:
        return
    config = kernel_config()
    data = obj.map_defs[".kconfig"].data
    assert data is not None
    for name, (off, size, tid) in obj._kconfig.items():
        value = _kconfig_value(obj, name, size, tid, config)
        if value is None:
            if not _is_weak(obj, name):
                raise ObjectError(f"extern {name!r} (__kconfig): the kernel's config has no "
                                  f"{name} (declare it __weak to take 0)")
            value = b"\0" * size
        data[off:off + size] = value


def _is_weak(obj: BpfObject, name: str) -> bool:
    return any(s.name == name and s.shndx == 0 and s.bind == 2 for s in obj.elf.symbols)


def _resolve_ksyms(obj: BpfObject) -> dict[str, tuple[str, int]]:
    """name -> ("addr", address) | ("btf", vmlinux id) | ("missing", 0)."""
    want = {n: k for n, k in obj.externs.items() if k in ("ksym", "kfunc")}
    if not want:
        return {}
    out: dict[str, tuple[str, int]] = {}
    btf = obj.btf
    assert btf is not None
    typeless = []
    for name, kind in want.items():
        tid = btf.find(name, Kind.FUNC if kind == "kfunc" else Kind.VAR)
        is_typeless = kind == "ksym" and (not tid or btf.resolve(btf[tid[0]].ref) == 0)
        if is_typeless:
            typeless.append(name)
            continue
        ids = obj.vmlinux().find(name, Kind.FUNC if kind == "kfunc" else Kind.VAR)
        out[name] = ("btf", ids[0]) if ids else ("missing", 0)
    if typeless:
        found = _kallsyms(set(typeless))
        for name in typeless:
            out[name] = ("addr", found[name]) if name in found else ("missing", 0)
    for name, (how, _) in out.items():
        if how == "missing" and not _is_weak(obj, name):
            raise ObjectError(f"extern {name!r} (__ksym): the kernel has no such symbol "
                              "(declare it __weak to take 0)")
    return out


def _kallsyms(names: set[str]) -> dict[str, int]:
    """The address of each of ``names`` (its first line) in /proc/kallsyms,
    read only as far as the last one found (the kernel writes the ~5 MB file
    line by line: reading it all costs tens of ms)."""
    out: dict[str, int] = {}
    try:
        with open("/proc/kallsyms") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) >= 3 and parts[2] in names and parts[2] not in out:
                    out[parts[2]] = int(parts[0], 16)
                    if len(out) == len(names):
                        break
    except OSError:
        pass
    return out


# ------------------------------------------------------------------ maps
def _create_maps(obj: BpfObject) -> None:
    from ..kernel.mapops import map_update
    for name, d in obj.map_defs.items():
        obj._maps[name] = _create_map(obj, d)
    for name, d in obj.map_defs.items():
        if d.type == MapType.PROG_ARRAY:
            continue                      # (filled once the programs are loaded)
        for slot, inner_name in d.init_slots.items():
            inner = obj._maps.get(inner_name)
            if inner is None:             # (open_object checked the names)
                raise ObjectError(f"map {name!r}: slot [{slot}]: {inner_name!r} is not a "
                                  "map of this object")
            map_update(obj._maps[name].fileno(), struct.pack("<I", slot),
                       struct.pack("<I", inner.fileno()))


def _init_prog_arrays(obj: BpfObject) -> None:
    """Write the programs a prog array's initializer names into its slots,
    once every program has had its turn (libbpf's init_prog_arrays); the
    slot of a program that did not load stays empty, and says so in
    :attr:`~.obj.BpfObject.empty_slots`."""
    from ..kernel.mapops import map_update
    for name, d in obj.map_defs.items():
        if d.type != MapType.PROG_ARRAY or not d.init_slots:
            continue
        fd = obj._maps[name].fileno()
        for slot, prog_name in sorted(d.init_slots.items()):
            prog = obj.programs[prog_name]
            if prog.status != "loaded":         # (asked without wrapping its fd)
                why = f": {prog.reason}" if prog.reason else ""
                obj.empty_slots.append(f"map {name!r}: slot [{slot}]: prog {prog_name!r} is "
                                       f"{prog.status}{why}; the slot is left empty")
                continue
            try:
                map_update(fd, struct.pack("<I", slot), struct.pack("<I", prog.fileno()))
            except KernelError as exc:
                raise ObjectError(f"map {name!r}: slot [{slot}]: prog {prog_name!r}: the "
                                  f"kernel refused it ({exc})") from None


def _map_name(obj: BpfObject, d: MapDef) -> str:
    if d.section == d.name and d.name.startswith("."):
        room = max(15 - len(d.name), 0)
        return obj.name[:min(room, 8)] + d.name
    return d.name


def _adopt(fd: Any, created: tuple[int, int, int, int, int, str] | None = None) -> Any:
    """A pyebpf map around ``fd`` (a :class:`RawObjectMap` for a type pyebpf
    has no class for); ``created``: the (type, key_size, value_size,
    max_entries, flags, name) it was just created with, else the kernel is
    asked (a pinned map reused)."""
    from ..maps.base import Map
    try:
        if created is not None:
            return Map._from_created_fd(fd, *created)
        return Map._from_owned_fd(fd, None, None)
    except KernelError:
        return RawObjectMap(fd, created[5] if created is not None else None)


def _create_map(obj: BpfObject, d: MapDef) -> Any:
    # (the wrappers' own module, not the kernel.syscall facade: one module less to import)
    from ..kernel.mapops import map_create, map_freeze, map_update
    path = os.path.join(PIN_ROOT, d.name) if d.pinning == PIN_BY_NAME else None
    if path is not None and os.path.exists(path):
        from ..kernel.fs import obj_get
        m = _adopt(obj_get(path))
        obj._owned.append(m)
        return m
    inner = None
    if d.inner is not None:
        inner = _create_map(obj, d.inner)
    max_entries = d.max_entries
    if d.type == MapType.PERF_EVENT_ARRAY and not max_entries:
        from ..kernel.cpus import possible_cpus
        max_entries = len(possible_cpus())
    btf_fd = obj._btf_fd.fileno() if obj._btf_fd is not None and d.key_type_id | \
        d.value_type_id and d.type not in _NO_BTF_MAPS else 0
    key_id = d.key_type_id if btf_fd else 0
    value_id = d.value_type_id if btf_fd else 0
    if d.data is not None and obj._btf_fd is not None and obj.btf is not None:
        ids = obj.btf.find(d.section, Kind.DATASEC)
        if ids:
            btf_fd, key_id, value_id = obj._btf_fd.fileno(), 0, ids[0]
    name = _map_name(obj, d)
    kw: dict[str, Any] = dict(flags=d.flags, name=name,
                              inner_map_fd=inner.fileno() if inner is not None else 0,
                              map_extra=d.map_extra, numa_node=d.numa_node or None)
    try:
        fd = map_create(d.type, d.key_size, d.value_size, max_entries, btf_fd=btf_fd,
                        btf_key_type_id=key_id, btf_value_type_id=value_id, **kw)
    except KernelError as exc:
        if not btf_fd:
            if obj.btf_error is not None and d.key_type_id | d.value_type_id and \
                    d.type not in _NO_BTF_MAPS:
                raise _with_btf_note(obj, exc) from None
            raise
        fd = map_create(d.type, d.key_size, d.value_size, max_entries, **kw)
    flags = d.flags | (4 if d.numa_node else 0)          # (map_create's BPF_F_NUMA_NODE)
    m = CreatedMap(fd, (d.type, d.key_size, d.value_size, max_entries, flags, name))
    obj._owned.append(m)
    obj._unwrapped = True
    if inner is not None:
        inner.close()
    if d.data is not None:
        map_update(m.fileno(), b"\0\0\0\0", bytes(d.data))
        if d.frozen:
            map_freeze(m.fileno())
            m.frozen = True
    if path is not None:
        from ..kernel.fs import obj_pin
        obj_pin(path, m.fileno())
    return m


class CreatedMap:
    """A map the object created, until :attr:`~.obj.BpfObject.maps` wraps it
    on first use (:func:`wrap_maps`): its fd, how it was created and whether
    it was frozen -- loading needs no more, and a process that only loads
    (and attaches) an object imports no map class.  (A map first asked for
    after the object was closed stays this, closed: there is nothing left
    to wrap.)"""

    __slots__ = ("fd", "created", "frozen")

    def __init__(self, fd: Any, created: tuple[int, int, int, int, int, str]) -> None:
        self.fd = fd
        self.created = created
        self.frozen = False

    def fileno(self) -> int:
        """The fd number."""
        fd: int = self.fd.fileno()
        return fd

    @property
    def name(self) -> str:
        """The kernel's name of the map."""
        from ..kernel.core import obj_name
        return obj_name(self.created[5]).decode()

    @property
    def closed(self) -> bool:
        """True once closed."""
        closed: bool = self.fd.closed
        return closed

    def close(self) -> None:
        """Close the fd (the map, unless a program or pin holds it)."""
        self.fd.close()


def wrap_maps(obj: BpfObject) -> None:
    """Replace every :class:`CreatedMap` of ``obj`` -- among its maps and
    what it owns -- by its pyebpf map (a :class:`RawObjectMap` for a type
    pyebpf has no class for)."""
    obj._unwrapped = False
    made: dict[int, Any] = {}
    for name, m in list(obj._maps.items()):
        if isinstance(m, CreatedMap):
            if m.fd.closed:
                continue                    # (the object was closed first: nothing to wrap)
            new = _adopt(m.fd, m.created)
            if m.frozen and hasattr(new, "_frozen"):
                new._frozen = True
            made[id(m)] = obj._maps[name] = new
    obj._owned[:] = [made.get(id(x), x) for x in obj._owned]


def _maps_of(obj: BpfObject) -> Any:
    """What a loaded program of ``obj`` gives as its maps, asked on first use:
    the object's maps (none once the object is gone; it does not keep the
    object alive)."""
    ref = _weak(obj)

    def maps() -> dict[str, Any]:
        o = ref()
        return o.maps if o is not None else {}
    return maps


class RawObjectMap:
    """A map pyebpf has no class for (map-in-map, prog arrays...): its fd,
    ``name`` and ``info()``; the kernel.syscall map_* functions work on
    ``fileno()``.  ``name``: the name it was created with (else the kernel's
    is asked for)."""

    def __init__(self, fd: Any, name: str | None = None) -> None:
        self._fd = fd
        self._info: Any = None
        if name is None:
            self.name = self.info().name
        else:
            from ..kernel.core import obj_name
            self.name = obj_name(name).decode()

    def fileno(self) -> int:
        """The fd number."""
        fd: int = self._fd.fileno()
        return fd

    @property
    def fd(self) -> Any:
        """The :class:`~pyebpf.kernel.Fd`."""
        return self._fd

    def info(self) -> Any:
        """The kernel's map info (asked for once)."""
        if self._info is None:
            from ..kernel import syscall as _sys
            self._info = _sys.map_info(self._fd)
        return self._info

    def close(self) -> None:
        """Close the fd."""
        self._fd.close()


# ------------------------------------------------------------------ CO-RE
def _apply_core(obj: BpfObject, code: dict[int, SectionCode]) -> None:
    if obj.btf is None or obj.btf_ext is None or not obj.btf_ext.core_relos:
        return
    from ..btf.core import CoreResolver
    resolver = CoreResolver(obj.vmlinux())
    # the same (type, access string, kind) resolves alike wherever it is (a
    # helper inlined into 150 programs repeats its reads 150 times)
    done: dict[tuple[int, str, int], Any] = {}
    for sec_name, relos in obj.btf_ext.core_relos.items():
        sec = obj.elf.section(sec_name)
        if sec is None or sec.index not in code:
            continue
        slots = code[sec.index]
        for relo in relos:
            k = relo.insn_off // 8
            if k >= len(slots):
                raise ObjectError(f"{sec_name}: CO-RE relocation at {relo.insn_off} past the "
                                  "end of the section")
            key = (relo.type_id, relo.access, relo.kind)
            res = done.get(key)
            if res is None:
                res = done[key] = resolver.resolve(obj.btf, relo)
            obj.core_results.append((sec_name, relo, res))
            _patch_core(slots, k, res, sec_name)


_SIZES = {1: 0x10, 2: 0x08, 4: 0x00, 8: 0x18}


def _patch_core(slots: SectionCode, k: int, res: Any, where: str) -> None:
    s = slots[k]
    cls = s.code & 7
    if res.poison:
        s.code, s.dst, s.src, s.off, s.imm = OP_CALL, 0, 0, 0, POISON_HELPER
        if cls == 0 and k + 1 < len(slots):           # ld_imm64: both halves
            n = slots[k + 1]
            n.code, n.dst, n.src, n.off, n.imm = OP_CALL, 0, 0, 0, POISON_HELPER
        return
    new = res.new
    if cls in (4, 7):                                   # ALU/ALU64 with an immediate
        if s.code & 0x08:
            raise ObjectError(f"{where}+{k * 8}: CO-RE relocation on a register ALU op")
        s.imm = new
    elif cls in (1, 2, 3):                              # LDX, ST, STX: the offset
        if not -32768 <= new <= 32767:
            raise ObjectError(f"{where}+{k * 8}: CO-RE offset {new} does not fit")
        s.off = new
        if res.new_size and res.orig_size and res.new_size != res.orig_size:
            if res.new_size not in _SIZES:
                raise ObjectError(f"{where}+{k * 8}: CO-RE field size {res.new_size}")
            s.code = (s.code & ~0x18) | _SIZES[res.new_size]
    elif s.code == OP_LD_IMM64 and k + 1 < len(slots):
        s.imm = new & 0xFFFFFFFF
        slots[k + 1].imm = (new >> 32) & 0xFFFFFFFF
    else:
        raise ObjectError(f"{where}+{k * 8}: CO-RE relocation on instruction {s.code:#04x}")


# ------------------------------------------------------------------ programs
def _patch_refs(obj: BpfObject, linked: Linked, ksyms: dict[str, tuple[str, int]]) -> None:
    """Patch the references to maps, global data and externs (calls and
    callbacks were linked already)."""
    elf = obj.elf
    for pos, shndx, k in linked.refs:
        sec = elf.sections[shndx]
        sym = elf.symbols[sec.relocs[k * 8]]
        s = linked.slot(pos)
        tsec = elf.sections[sym.shndx] if 0 < sym.shndx < len(elf.sections) else None
        if sym.shndx == 0:
            _patch_extern(obj, linked, pos, sym.name, ksyms)
            continue
        if tsec is None or s.code != OP_LD_IMM64 or pos + 1 >= len(linked):
            raise ObjectError(f"{sec.name}+{k * 8}: a relocation to {sym.name!r} on an "
                              "instruction that is not a 64-bit load")
        if tsec.name in (".maps", "maps"):
            m = obj._maps.get(sym.name)
            if m is None:
                raise ObjectError(f"{sec.name}+{k * 8}: map {sym.name!r} is not defined")
            s.src, s.imm = PSEUDO_MAP_FD, m.fileno()
        elif tsec.name in obj._maps:
            off = (0 if sym.type == 3 else sym.value) + s.imm
            s.src, s.imm = PSEUDO_MAP_VALUE, obj._maps[tsec.name].fileno()
            linked.slot(pos + 1).imm = off
        else:
            raise ObjectError(f"{sec.name}+{k * 8}: a reference to {sym.name!r} in section "
                              f"{tsec.name!r}, which is not a map or global data")


def _patch_extern(obj: BpfObject, linked: Linked, pos: int, name: str,
                  ksyms: dict[str, tuple[str, int]]) -> None:
    s = linked.slot(pos)
    kind = obj.externs.get(name)
    if kind == "kconfig":
        off = obj._kconfig[name][0]
        s.src, s.imm = PSEUDO_MAP_VALUE, obj._maps[".kconfig"].fileno()
        linked.slot(pos + 1).imm = off + s.imm * 0
        return
    how, value = ksyms.get(name, ("missing", 0))
    if s.code == OP_CALL:
        if how == "missing" and _is_weak(obj, name):
            # a __weak kfunc this kernel lacks: its address is 0 (bpf_ksym_exists()
            # is false) and a call to it is poisoned, as libbpf does; the
            # verifier never reaches it behind that test
            s.src, s.imm = 0, POISON_HELPER
            return
        if how != "btf":
            raise ObjectError(f"kfunc {name!r} is not in the kernel's BTF")
        s.src, s.imm = PSEUDO_KFUNC_CALL, value
        return
    if how == "btf":
        s.src, s.imm = PSEUDO_BTF_ID, value
        linked.slot(pos + 1).imm = 0
    else:
        s.src, s.imm = 0, value & 0xFFFFFFFF
        linked.slot(pos + 1).imm = (value >> 32) & 0xFFFFFFFF


def _attach_btf_id(obj: BpfObject, prog: ObjectProgram,
                   targets: dict[tuple[str, int], int]) -> int:
    """The kernel BTF id of ``prog``'s attach target (0: it has none);
    ``targets`` keeps those found (programs share targets)."""
    sdef = prog.sdef
    if sdef is None or sdef.btf_prefix is None:
        return 0
    target = prog.section.split("/", 1)[1] if "/" in prog.section else ""
    if not target:
        raise ObjectError(f"program {prog.name!r}: section {prog.section!r} names no target")
    vm = obj.vmlinux()
    want = sdef.btf_prefix + target
    kind = Kind.TYPEDEF if sdef.btf_prefix == "btf_trace_" else Kind.FUNC
    found = targets.get((want, kind))
    if found is not None:
        return found
    ids = vm.find(want, kind)
    if not ids:
        raise ObjectError(f"program {prog.name!r}: the kernel's BTF has no {want!r} "
                          f"(section {prog.section!r})")
    targets[(want, kind)] = ids[0]
    return ids[0]


def _load_program(obj: BpfObject, prog: ObjectProgram, index: CodeIndex,
                  infos: BtfInfos, ksyms: dict[str, tuple[str, int]],
                  targets: dict[tuple[str, int], int], log_level: int) -> None:
    from ..kernel.prog import prog_load
    if prog.sdef is None:
        prog.status, prog.reason = "skipped", f"unknown section {prog.section!r}"
        return
    if prog.lenient_section and obj.strict_sections:
        exc = ObjectError(f"program {prog.name!r}: section {prog.section!r} is libbpf 0.x's "
                          f"form of {prog.sdef.prefix!r}, which libbpf 1.x refuses (it takes "
                          f"SEC({prog.sdef.prefix!r}) alone; strict_sections)")
        prog.status, prog.reason, prog.error = "rejected", str(exc), exc
        return
    try:
        linked = link_program(obj.elf, prog.func, index)
        _patch_refs(obj, linked, ksyms)
        func_info, line_info = btf_infos(infos, linked)
        btf_id = _attach_btf_id(obj, prog, targets)
    except ObjectError as exc:
        prog.status, prog.reason, prog.error = "rejected", str(exc), exc
        return
    insns = linked.encode()
    prog.insn_count = len(linked)
    if prog.kind == "usdt":
        from .usdt import usdt_attach_type
        prog.expected_attach_type = usdt_attach_type(prog.attach_type)
    flags = 1 << 4 if prog.sdef.sleepable else 0         # BPF_F_SLEEPABLE
    try:
        fd, log = prog_load(prog.prog_type, insns, obj.license or "GPL", name=prog.name,
                            btf_fd=obj._btf_fd.fileno() if obj._btf_fd is not None else 0,
                            func_info=func_info, line_info=line_info,
                            expected_attach_type=prog.expected_attach_type,
                            attach_btf_id=btf_id, kern_version=obj.kern_version,
                            prog_flags=flags, log_level=log_level)
    except VerifierError as exc:
        prog.status, prog.error = "rejected", _explain(exc, insns, lines_of(infos, linked),
                                                       _btf_note(obj, exc.message)
                                                       + _poison_note(obj, linked, exc.message))
        prog.reason = prog.error.summary.splitlines()[0]
        return
    except KernelError as exc:
        refused = _probe_refuses(prog, btf_id) if exc.errno in _REFUSED else None
        if refused is not None:
            prog.status, prog.reason = "skipped", refused
        else:
            prog.status, prog.error = "rejected", exc
            prog.reason = str(exc).splitlines()[0]
        return
    prog._loaded_as(fd, insns, _maps_of(obj), log)
    prog.status, prog.reason = "loaded", ""


def _explain(exc: VerifierError, insns: bytes, lines: list[Any], note: str = ""
             ) -> VerifierError:
    """The error with the failing instruction and its C source line (and
    ``note`` after the verifier's words: why the object's BTF is missing)."""
    from ..loader import failing_instruction
    index, text = failing_instruction(exc.log, exc.message)
    origin = None
    if index is not None:
        best = None
        for at, rec in lines:
            if at <= index:
                best = rec
            else:
                break
        if best is not None:
            origin = f"{os.path.basename(best.file_name)}:{best.line}"
            src = best.line_text.strip()
            if src:
                text = f"{text}; {src}" if text else src
    return VerifierError(exc.errno or 0, exc.log, exc.message + note, index=index,
                         origin=origin, instruction=text, hint=exc.hint)


_PROBES: dict[tuple[int, int, int], str | None] = {}


def _probe_refuses(prog: ObjectProgram, btf_id: int) -> str | None:
    """Why this kernel refuses every program of this type and attach target
    (a minimal ``r0 = 0; exit`` probe load, asked once per type, attach type
    and target), or None when it loads.  The words name the target, for
    another target of the same kind may load (one iterator refused, the
    next loaded)."""
    from ..kernel.features import RETURN_ZERO
    from ..kernel.prog import prog_load
    key = (prog.prog_type, prog.attach_type, btf_id)
    if key not in _PROBES:
        try:
            fd, _ = prog_load(prog.prog_type, RETURN_ZERO, "GPL",
                              expected_attach_type=prog.attach_type, attach_btf_id=btf_id)
        except KernelError as exc:
            name = os.strerror(exc.errno) if exc.errno else str(exc)
            target = prog.section.split("/", 1)[1] if btf_id and "/" in prog.section else ""
            on = f" on {target!r}" if target else ""
            _PROBES[key] = (f"this kernel refuses {prog.kind} programs{on} "
                            f"({E.errorcode.get(exc.errno or 0, exc.errno)}: {name}, "
                            "from a probe load)")
        else:
            fd.close()
            _PROBES[key] = None
    return _PROBES[key]
