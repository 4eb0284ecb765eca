"""libbpf's USDT protocol (``bpf/usdt.bpf.h``) for the programs of an object.

A C program written against libbpf's USDT support reads its arguments with
``BPF_USDT(...)``, ``bpf_usdt_arg()``, ``bpf_usdt_arg_cnt()`` and
``bpf_usdt_cookie()``.  Those functions look up a *spec* -- where each
argument lives (a constant, a register, memory at a register plus an
offset...), its size and sign, and the user's cookie -- in the object's
``__bpf_usdt_specs`` array map, at the index the uprobe's BPF cookie
gives (the kernel has ``bpf_get_attach_cookie``, so the ``.kconfig``
``LINUX_HAS_BPF_COOKIE`` is 1 and the ``__bpf_usdt_ip_to_spec_id`` map
stays empty).  Attaching is therefore the user-space half of the protocol::

    obj.programs["on_entry"].attach_usdt("/usr/bin/python3.11", "python",
                                         "function__entry", pid=1234, cookie=7)

:func:`attach_usdt` resolves the probe with :func:`pyebpf.usdt.find_usdt`
(a missing probe lists the ones that exist), translates each location's
decoded arguments (:class:`pyebpf.usdt.ArgSpec`) into the spec struct,
stores each distinct spec once (:class:`UsdtSpecs`: ids are shared by
equal specs and recycled when no attachment uses them), and attaches every
location with cookie = its spec id through :meth:`pyebpf.usdt.Usdt.attach`
-- so semaphores go in the kernel's uprobe ``ref_ctr`` exactly as pyebpf's
own USDT probes do, and are restored on detach.  ``SEC("usdt")`` programs
are loaded for uprobe_multi links where the kernel has them (as libbpf 1.3+
loads them: :func:`usdt_attach_type`), so all the locations of a file are
one link.

The struct's layout is read from the object's BTF, not assumed: libbpf 1.1's
header (Debian 12's ``libbpf-dev``: ``arg_type`` a 4-byte enum) and later
ones (an 8-bit ``arg_type`` with the ``idx_reg_off``/``scale_bitshift``
bitfields of ``BPF_USDT_ARG_SIB``) both work.

Argument forms (x86-64 ``struct pt_regs`` offsets from :mod:`pyebpf.ptregs`):
``$imm`` -> CONST; ``%reg`` and its sub-registers -> REG; ``off(%reg)`` and
numeric ``off(%rip)`` -> REG_DEREF; ``off(%base,%index,scale)`` -> SIB where
the header has it.  Beyond libbpf, forms naming a symbol are placed from
the probe address (at a USDT probe ``pt_regs->ip`` is the probe's runtime
address): ``sym+off(%rip)`` and ``sym@GOTPCREL(%rip)`` become REG_DEREF of
``ip`` with the offset from the probe to the symbol (or its GOT slot), in
PIEs and shared libraries too; ``$sym`` and ``sym(%reg)`` in non-PIE
executables become CONST and REG_DEREF; ``sym(,%index,scale)`` an
ip-based SIB.  Anything else (a float, ``%ah``, a ``%fs:`` operand, SIB on
a header without it...) cannot be read through this protocol: attaching
raises :class:`~pyebpf.errors.UsdtSpecError` naming the probe, the
argument, its spec and location, as libbpf refuses it.
"""
from __future__ import annotations

import struct
import threading
from typing import NamedTuple

from .. import ptregs
from ..errors import UsdtSpecError
from .errors import ObjectError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Sequence

    from ..btf import Btf
    from ..usdt import ArgSpec, UsdtNote
    from .obj import BpfObject, ObjectProgram

__all__ = ["SPECS_MAP", "IP_MAP", "SpecLayout", "ArgRecord", "UsdtSpecs", "SpecLease",
           "arg_record", "encode_spec", "usdt_specs", "usdt_attach_type", "attach_usdt",
           "attach_usdt_section"]

#: The spec array map and the IP -> spec id hash of ``usdt.bpf.h``.
SPECS_MAP = "__bpf_usdt_specs"
IP_MAP = "__bpf_usdt_ip_to_spec_id"

_U64 = (1 << 64) - 1
#: ``enum __bpf_usdt_arg_type`` of headers whose BTF has no enum to read
_DEFAULT_TYPES = {"CONST": 0, "REG": 1, "REG_DEREF": 2}


# ---------------------------------------------------------------------------
# the struct, from the object's BTF

class _Field(NamedTuple):
    bit_offset: int
    bits: int


def _put(buf: bytearray, field: _Field, base: int, value: int) -> None:
    """Store ``value`` (truncated to the field's width) at ``base`` bytes +
    the field's bit offset, little-endian, bitfields included."""
    bit = base * 8 + field.bit_offset
    start, end = bit // 8, (bit + field.bits + 7) // 8
    shift = bit - start * 8
    width = (1 << field.bits) - 1
    cur = int.from_bytes(buf[start:end], "little")
    cur = (cur & ~(width << shift)) | ((value & width) << shift)
    buf[start:end] = cur.to_bytes(end - start, "little")


def _members(btf: Btf, tid: int, what: str) -> dict[str, _Field]:
    from ..btf import Kind
    t = btf[btf.resolve(tid)]
    if t.kind != Kind.STRUCT:
        raise ObjectError(f"{what} is not a struct in this object's BTF")
    return {m.name: _Field(m.bit_offset, m.bitfield_size or 8 * btf.size_of(m.type))
            for m in t.members}


def _need(fields: dict[str, _Field], names: Sequence[str], what: str) -> None:
    missing = [n for n in names if n not in fields]
    if missing:
        raise ObjectError(f"{what} has no member {', '.join(missing)}: not the "
                          "bpf/usdt.bpf.h protocol pyebpf knows")


class SpecLayout:
    """Where ``struct __bpf_usdt_spec`` keeps each field, and the values of
    ``enum __bpf_usdt_arg_type`` (``types``: ``CONST``, ``REG``,
    ``REG_DEREF``, and ``SIB`` when the header has it), read from the
    object's BTF by :meth:`from_btf`.

    ``size``: the struct's size; ``max_args``: the length of ``args``;
    ``has_sib``: the header can read base + index * scale + offset.
    """

    def __init__(self, size: int, args_offset: int, arg_size: int, max_args: int,
                 arg_fields: dict[str, _Field], spec_fields: dict[str, _Field],
                 types: dict[str, int]) -> None:
        self.size = size
        self.args_offset = args_offset
        self.arg_size = arg_size
        self.max_args = max_args
        self.arg_fields = arg_fields
        self.spec_fields = spec_fields
        self.types = types
        self.has_sib = "SIB" in types and "idx_reg_off" in arg_fields and \
            "scale_bitshift" in arg_fields

    @classmethod
    def from_btf(cls, btf: Btf, value_type_id: int) -> SpecLayout:
        """The layout of the map's value type (``struct __bpf_usdt_spec``)."""
        from ..btf import Kind
        what = "the value of map __bpf_usdt_specs"
        spec_fields = _members(btf, value_type_id, what)
        _need(spec_fields, ("args", "usdt_cookie", "arg_cnt"), what)
        spec_t = btf[btf.resolve(value_type_id)]
        args_m = next(m for m in spec_t.members if m.name == "args")
        arr = btf[btf.resolve(args_m.type)]
        if arr.kind != Kind.ARRAY or args_m.bit_offset % 8:
            raise ObjectError(f"{what}: its member args is not an array")
        arg_fields = _members(btf, arr.elem, "struct __bpf_usdt_arg_spec")
        _need(arg_fields, ("val_off", "arg_type", "reg_off", "arg_signed", "arg_bitshift"),
              "struct __bpf_usdt_arg_spec")
        types = dict(_DEFAULT_TYPES)
        at = next(m for m in btf[btf.resolve(arr.elem)].members if m.name == "arg_type")
        et = btf[btf.resolve(at.type)]
        if et.kind in (Kind.ENUM, Kind.ENUM64):
            types = {v.name.removeprefix("BPF_USDT_ARG_"): v.value for v in et.values}
        return cls(spec_t.size, args_m.bit_offset // 8, btf.size_of(arr.elem), arr.nelems,
                   arg_fields, spec_fields, types)

    def encode(self, records: Sequence[ArgRecord], cookie: int) -> bytes:
        """The bytes of one spec: ``records`` (at most :attr:`max_args`) and
        the user's ``cookie``."""
        if len(records) > self.max_args:
            raise UsdtSpecError(f"{len(records)} arguments; usdt.bpf.h reads at most "
                                f"{self.max_args}")
        buf = bytearray(self.size)
        for i, r in enumerate(records):
            base = self.args_offset + i * self.arg_size
            f = self.arg_fields
            _put(buf, f["val_off"], base, r.val_off)
            _put(buf, f["arg_type"], base, self.types[r.kind])
            _put(buf, f["reg_off"], base, r.reg_off)
            _put(buf, f["arg_signed"], base, int(r.signed))
            _put(buf, f["arg_bitshift"], base, r.bitshift)
            if r.kind == "SIB":
                _put(buf, f["idx_reg_off"], base, r.idx_reg_off)
                _put(buf, f["scale_bitshift"], base, r.scale_bitshift)
        _put(buf, self.spec_fields["usdt_cookie"], 0, cookie)
        _put(buf, self.spec_fields["arg_cnt"], 0, len(records))
        return bytes(buf)


# ---------------------------------------------------------------------------
# ArgSpec -> the protocol's argument record

class ArgRecord(NamedTuple):
    """One argument as ``usdt.bpf.h`` reads it: ``kind`` (``CONST``, ``REG``,
    ``REG_DEREF``, ``SIB``), ``val_off`` (the constant, or the offset added
    to the address), ``reg_off`` (the register's offset in pt_regs),
    ``signed``, ``bitshift`` (64 - 8 * size), and for SIB the index
    register's offset and log2 of the scale."""

    kind: str
    val_off: int
    reg_off: int
    signed: bool
    bitshift: int
    idx_reg_off: int = 0
    scale_bitshift: int = 0


def _where(note: UsdtNote) -> str:
    return f"{note.elf.path}@{note.address:#x}"


class _Arg:
    """One argument on its way to an :class:`ArgRecord`: its spec, note
    (location), index and the layout it is written for."""

    def __init__(self, spec: ArgSpec, note: UsdtNote, index: int, layout: SpecLayout) -> None:
        self.spec, self.note, self.index, self.layout = spec, note, index, layout

    def refuse(self, reason: str) -> UsdtSpecError:
        """The error naming the probe, the argument, its spec and location."""
        s = self.spec
        return UsdtSpecError(f"{reason} (at {_where(self.note)})", spec=s.text or s.format(),
                             arch=s.arch, probe=self.note.probe, index=self.index)

    def slot(self, reg: str | None) -> int:
        """The pt_regs offset of ``reg``."""
        if reg is None or reg not in ptregs.REGISTERS:
            raise self.refuse(f"register {reg} is not in struct pt_regs")
        return ptregs.slot(reg)

    def rec(self, kind: str, val_off: int, reg: str | None = None) -> ArgRecord:
        """A record of this argument's size and sign."""
        s = self.spec
        return ArgRecord(kind, val_off & _U64, self.slot(reg) if reg else 0, s.signed,
                         64 - 8 * s.size)

    def sib(self, base: str | None, idx: str | None, scale: int, val_off: int) -> ArgRecord:
        """base + idx * scale + val_off, where the header can read it."""
        if not self.layout.has_sib:
            raise self.refuse("base + index * scale: this object's usdt.bpf.h has no "
                              "BPF_USDT_ARG_SIB (libbpf 1.7 added it)")
        return self.rec("SIB", val_off, base)._replace(idx_reg_off=self.slot(idx),
                                                       scale_bitshift=scale.bit_length() - 1)

    def check(self) -> None:
        """Refuse what no form of the protocol can read."""
        s = self.spec
        if s.arch != ptregs.ARCH:
            raise self.refuse(f"pyebpf knows the pt_regs offsets of {ptregs.ARCH} only")
        if s.is_float:
            raise self.refuse(f"a {s.ctype} floating-point argument: usdt.bpf.h reads "
                              "integers only")
        if s.segment:
            raise self.refuse(f"a %{s.segment}-relative (thread-local) operand: the "
                              f"{s.segment} base is not in pt_regs")
        if s.reloc not in (None, "GOTPCREL"):
            raise self.refuse(f"a @{s.reloc} relocation")
        if s.size not in (1, 2, 4, 8):
            raise self.refuse(f"argument size {s.size} (only 1, 2, 4, 8)")

    def plain(self) -> ArgRecord | None:
        """The forms without a symbol (None for the others)."""
        from ..usdt.spec import ArgKind
        s, k = self.spec, self.spec.kind
        if k is ArgKind.CONST:
            return self.rec("CONST", s.imm or 0)
        if k is ArgKind.REG:
            if s.reg_shift:
                raise self.refuse(f"bits {s.reg_shift} and up of {s.reg}: usdt.bpf.h reads "
                                  "a register from its lowest byte")
            return self.rec("REG", 0, s.reg)
        if k is ArgKind.DEREF:
            return self.rec("REG_DEREF", s.offset, s.reg)
        if k is ArgKind.SIB:
            if s.reg is None:
                raise self.refuse("memory at index * scale + offset (no base register) "
                                  "cannot be read through usdt.bpf.h")
            return self.sib(s.reg, s.index, s.scale, s.offset)
        if k is ArgKind.RIP and s.symbol is None:       # relative to the probe, as libbpf
            return self.rec("REG_DEREF", s.offset, ptregs.IP)
        return None

    def placed(self) -> ArgRecord:
        """The forms that name a symbol (or an absolute address), placed
        from the probe: at the probe, ``ip + st_value + offset - address``
        is where the symbol is, in a PIE as in a non-PIE executable."""
        from ..usdt.spec import ArgKind
        s, k, note = self.spec, self.spec.kind, self.note
        exe = note.elf.elf_type == "ET_EXEC"
        value = self.symbol() if s.symbol is not None else 0
        from_ip = value + s.offset - note.address
        if k is ArgKind.RIP or k is ArgKind.ABSOLUTE and (s.symbol is not None or exe):
            return self.rec("REG_DEREF", from_ip, ptregs.IP)
        if k is ArgKind.GOTPCREL:
            got = self.got_slot(value)
            if got is not None:
                return self.rec("REG_DEREF", got + s.offset - note.address, ptregs.IP)
            if exe:
                return self.rec("CONST", value + s.offset)
            raise self.refuse(f"{note.elf.path} has no GOT slot for {s.symbol!r}, and its "
                              "address is not a constant")
        if k is ArgKind.ADDRESS and exe:
            return self.rec("CONST", value + s.offset)
        if k is ArgKind.SYM_REG:                        # &sym + offset + reg
            if exe:
                return self.rec("REG_DEREF", value + s.offset, s.reg)
            return self.sib(ptregs.IP, s.reg, 1, from_ip)
        if k is ArgKind.SYM_INDEX:                      # &sym + offset + [base] + index*scale
            if s.reg is None:
                return self.sib(ptregs.IP, s.index, s.scale, from_ip)
            if exe:
                return self.sib(s.reg, s.index, s.scale, value + s.offset)
        where = "a non-PIE executable" if exe else "a PIE or shared object"
        raise self.refuse(f"a {k.value} operand in {where} cannot be read through "
                          "usdt.bpf.h")

    def symbol(self) -> int:
        """st_value of the spec's symbol."""
        from ..usdt.args import _resolve_symbol
        try:
            return _resolve_symbol(self.note.elf.path, str(self.spec.symbol), {})
        except (LookupError, ValueError, OSError) as exc:
            raise self.refuse(f"cannot place symbol {self.spec.symbol!r}: {exc}") from None

    def got_slot(self, value: int) -> int | None:
        """The address of the symbol's GOT slot (None if it has none)."""
        from ..usdt.args import _got_slot
        path = self.note.elf.path
        try:
            return _got_slot(path, str(self.spec.symbol), value)
        except (ValueError, OSError) as exc:
            raise self.refuse(f"cannot read the GOT of {path}: {exc}") from None


def arg_record(spec: Any, note: UsdtNote, index: int, layout: SpecLayout) -> ArgRecord:
    """Argument ``index`` of ``note`` (an :class:`~pyebpf.usdt.ArgSpec`, or
    an :class:`~pyebpf.usdt.UndecodableArg` that raises its error) as the
    protocol's record; raises :class:`~pyebpf.errors.UsdtSpecError` for a
    form it cannot express (see the module docstring)."""
    if not spec.decodable:
        err = spec.error
        raise UsdtSpecError(f"{err.reason} (at {_where(note)})", err.spec, err.arch,
                            err.expected, note.probe, index)
    arg = _Arg(spec, note, index, layout)
    arg.check()
    return arg.plain() or arg.placed()


def encode_spec(note: UsdtNote, layout: SpecLayout, cookie: int = 0) -> bytes:
    """The ``struct __bpf_usdt_spec`` of one location (raises
    :class:`~pyebpf.errors.UsdtSpecError` for an argument it cannot express)."""
    args = note.arguments
    if len(args) > layout.max_args:
        raise UsdtSpecError(f"{len(args)} arguments at {_where(note)}; usdt.bpf.h reads at "
                            f"most {layout.max_args}", probe=note.probe)
    return layout.encode([arg_record(a, note, i, layout) for i, a in enumerate(args)], cookie)


# ---------------------------------------------------------------------------
# spec ids

class UsdtSpecs:
    """An object's ``__bpf_usdt_specs`` map and the spec ids handed out.

    Equal specs (the same bytes: arguments and cookie) share one id, across
    locations and attachments; an id returns to the pool when the last
    attachment using it is detached, and ids never exceed the map's
    ``max_entries`` (``BPF_USDT_MAX_SPEC_CNT``, 256 by default).
    """

    def __init__(self, spec_map: Any, layout: SpecLayout, max_entries: int) -> None:
        self.map = spec_map
        self.layout = layout
        self.max_entries = max_entries
        #: spec bytes -> [id, attachments using it]
        self._ids: dict[bytes, list[int]] = {}
        self._free: list[int] = []
        self._next = 0
        # (a link collected by the garbage collector releases from any thread)
        self._lock = threading.Lock()

    @property
    def in_use(self) -> int:
        """How many distinct specs attachments use now."""
        return len(self._ids)

    def acquire(self, value: bytes) -> int:
        """The id of spec ``value`` (stored in the map when it is new)."""
        with self._lock:
            return self._acquire(value)

    def _acquire(self, value: bytes) -> int:
        entry = self._ids.get(value)
        if entry is not None:
            entry[1] += 1
            return entry[0]
        if self._free:
            sid = self._free.pop()
        elif self._next < self.max_entries:
            sid = self._next
            self._next += 1
        else:
            raise ObjectError(f"map {SPECS_MAP} is full: {self.max_entries} distinct USDT "
                              "argument specs are in use (define BPF_USDT_MAX_SPEC_CNT "
                              "larger before including usdt.bpf.h)")
        from ..kernel import syscall as _sys
        try:
            _sys.map_update(self.map.fileno(), struct.pack("<I", sid), value)
        except BaseException:
            self._free.append(sid)
            raise
        self._ids[value] = [sid, 1]
        return sid

    def release(self, value: bytes) -> None:
        """One attachment less uses spec ``value``."""
        with self._lock:
            entry = self._ids.get(value)
            if entry is None:
                return
            entry[1] -= 1
            if entry[1] <= 0:
                del self._ids[value]
                self._free.append(entry[0])

    def lease(self, values: Sequence[bytes]) -> SpecLease:
        """Acquire every spec of ``values``; :meth:`SpecLease.close` releases them."""
        got: list[bytes] = []
        ids = []
        try:
            for v in values:
                ids.append(self.acquire(v))
                got.append(v)
        except BaseException:
            for v in got:
                self.release(v)
            raise
        return SpecLease(self, got, ids)


class SpecLease:
    """The specs one attachment uses: ``ids`` (one per location, the BPF
    cookies); ``close()`` gives them back once (the link does it on detach)."""

    def __init__(self, specs: UsdtSpecs, values: list[bytes], ids: list[int]) -> None:
        self._specs: UsdtSpecs | None = specs
        self._values = values
        self.ids = ids

    def close(self) -> None:
        """Release the specs (idempotent)."""
        specs, self._specs = self._specs, None
        if specs is not None:
            for v in self._values:
                specs.release(v)


def usdt_specs(obj: BpfObject) -> UsdtSpecs | None:
    """The object's :class:`UsdtSpecs` (made on first use), or None when it
    was not built with ``usdt.bpf.h`` (no ``__bpf_usdt_specs`` map)."""
    if obj._usdt_specs is not None:
        specs: UsdtSpecs = obj._usdt_specs
        return specs
    d = obj.map_defs.get(SPECS_MAP)
    m = obj.maps.get(SPECS_MAP)
    if d is None or m is None:
        return None
    if obj.btf is None or not d.value_type_id:
        raise ObjectError(f"map {SPECS_MAP} has no BTF value type: build the object with "
                          "-g so that pyebpf can read struct __bpf_usdt_spec")
    layout = SpecLayout.from_btf(obj.btf, d.value_type_id)
    if layout.size != d.value_size:
        raise ObjectError(f"map {SPECS_MAP}: values of {d.value_size} bytes, but struct "
                          f"__bpf_usdt_spec has {layout.size}")
    made = obj._usdt_specs = UsdtSpecs(m, layout, d.max_entries)
    return made


# ---------------------------------------------------------------------------
# attaching

def usdt_attach_type(attach_type: int) -> int:
    """The expected attach type a ``SEC("usdt")`` program is loaded with:
    ``BPF_TRACE_UPROBE_MULTI`` where the kernel has uprobe_multi links (one
    link for every location, detached in one ~30 ms close, where each
    perf-event uprobe takes ~100 ms), as libbpf 1.3+ loads them; else
    ``attach_type`` (perf-event uprobes)."""
    from ..attach import UPROBE_MULTI, uprobe_method
    from ..kernel.constants import AttachType
    if attach_type or uprobe_method() != UPROBE_MULTI:
        return attach_type
    return int(AttachType.TRACE_UPROBE_MULTI)


def attach_usdt(prog: ObjectProgram, binary: str | None, provider: str | None, name: str, *,
                pid: int | None = None, cookie: int = 0, method: str = "auto") -> Any:
    """Attach an object's program to USDT probe ``provider:name`` of
    ``binary``, as libbpf's ``bpf_program__attach_usdt`` does.

    ``binary``: a path, or a library or program name (``libpython3.11``,
    ``python3.11``), or None with ``pid`` for every module of that process;
    ``provider`` None means the only provider with a probe ``name``.
    ``pid``: only that process fires it (None: every process).
    ``cookie``: what ``bpf_usdt_cookie()`` returns (a u64).  Returns the
    :class:`pyebpf.attach.Link` (kind ``"usdt"``): detaching it restores the
    semaphores and frees the specs.  Raises
    :class:`~pyebpf.errors.UsdtProbeLookupError` (listing the probes that
    exist) for a missing probe, :class:`~pyebpf.errors.UsdtSpecError` for
    an argument usdt.bpf.h cannot read.
    """
    from ..usdt.attach import find_usdt
    loaded = prog._require()
    if isinstance(cookie, bool) or not isinstance(cookie, int) or not 0 <= cookie <= _U64:
        raise ObjectError(f"the USDT cookie is a u64 (an int from 0 to 2**64 - 1), "
                          f"not {cookie!r}")
    probe = find_usdt(binary, provider, name, pid=pid)
    specs = usdt_specs(prog._obj)
    if specs is None:
        if cookie:
            raise ObjectError(f"program {prog.name!r}: the object has no map {SPECS_MAP} "
                              "(bpf/usdt.bpf.h not included), so nothing can read the cookie")
        return probe.attach(loaded, pid=pid, method=method)
    lease = specs.lease([encode_spec(n, specs.layout, cookie) for n in probe.locations])
    try:
        link = probe.attach(loaded, pid=pid, method=method, cookies=lease.ids)
    except BaseException:
        lease.close()
        raise
    link.own(lease)
    return link


def attach_usdt_section(prog: ObjectProgram, **kw: Any) -> Any:
    """Attach a ``SEC("usdt/BINARY:PROVIDER:NAME")`` program where its
    section says (keywords: ``pid``, ``cookie``, ``method``)."""
    target = prog.section.split("/", 1)[1] if "/" in prog.section else ""
    parts = target.split(":")
    if len(parts) != 3 or not all(parts):
        how = (f"section {prog.section!r} is not usdt/BINARY:PROVIDER:NAME" if target else
               f"section {prog.section!r} names no probe")
        raise ObjectError(f"program {prog.name!r}: {how}; attach it with "
                          f"obj.programs[{prog.name!r}].attach_usdt(binary, provider, name)")
    return attach_usdt(prog, parts[0], parts[1], parts[2], **kw)
