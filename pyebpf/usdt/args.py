"""USDT arguments in BPF programs: each :class:`~pyebpf.usdt.spec.ArgSpec`
becomes instructions.

:class:`ArgReader` takes every location of a probe (one or several files)
and emits, for ``emit(p, dst, n, ctx)``, the code that leaves argument ``n``
in ``dst`` as a 64-bit value, sign- or zero-extended as its spec says::

    reader = ArgReader(read_probes("/usr/bin/python3.11", "python", "line"))
    p = Program("line")
    p.mov(R6, R1)                      # ctx in a callee-saved register
    reader.emit(p, R7, 2, R6)          # r7 = the line number (s32, sign-extended)

How each form is read (x86-64, offsets of ``struct pt_regs`` from
:mod:`pyebpf.ptregs`):

* ``$imm``: a constant (``mov`` or ``lddw``), as the C type holds it.
* ``%reg``: a load of exactly the sub-register's bytes from pt_regs
  (``%edi`` 4 bytes at rdi's slot, ``%ah`` 1 byte at rax's slot + 1), then
  ``lsh``/``arsh`` for signed types (no cpu-v4 instruction needed).
* memory (``off(%reg)``, ``(%reg)``, SIB with or without base): the address
  is computed from pt_regs, ``bpf_probe_read_user`` copies **exactly** the
  argument's size into a stack slot, which is loaded (zero-extended) and
  sign-extended when signed.  A failed read gives 0.
* globals (``sym(%rip)``, ``off+sym(%rip)``, ``sym+off(%rip)``,
  ``sym(%reg)``, ``sym(,%idx,s)``, ``$sym``): no PID is needed.  At the probe,
  ``pt_regs->ip`` is the probe's runtime address, so the load bias is
  ``ip - note.address`` (ELF virtual addresses) and the symbol lives at
  ``bias + st_value + addend``.  In an ET_EXEC file the bias is 0 and the
  address a constant.  Symbol values come from ``.symtab`` or ``.dynsym``;
  a name that several local symbols share (two ``static`` variables of
  different files) is ambiguous and raises, naming them -- pass
  ``symbols={"name": st_value}`` to choose.
* ``sym@GOTPCREL(%rip)``: the operand is the GOT slot of ``sym`` (its
  ``R_X86_64_GLOB_DAT``/``RELATIVE`` relocation gives the slot's address),
  so the value is the 8 bytes read there -- the runtime address of ``sym``,
  as the dynamic linker resolved it.  When the file has no GOT slot for it,
  the value is computed as ``bias + st_value`` (the same, barring symbol
  interposition).
* numeric ``off(%rip)`` (no symbol) reads at ``ip + off``, as libbpf does.

Locations whose specs differ
----------------------------
Locations with the same argument specs share a *group*.  When a probe has
more than one group (inlined copies, libjvm), every location is attached
with a BPF cookie and the generated code dispatches on
``bpf_get_attach_cookie(ctx)`` (a binary search over the group numbers, one
branch per distinct spec of the argument read; identical specs are merged).
The cookie of a location is ``group | note.address << 16``: the low 16 bits
select the spec, the high bits carry the location's ELF address, from which
globals get their load bias when a file has several locations.  Where every
location shares one spec (and no global needs the per-location address) the
cookie is 0 and nothing is dispatched.

Errors are raised when an argument is *read*, never earlier:
a float (``8f@...``), an undecodable spec, a TLS operand (``%fs:``), a
register that is not in pt_regs, an absent argument or a symbol that
cannot be resolved raise :class:`~pyebpf.errors.UsdtSpecError` naming the
probe, the argument, the spec and the location.
"""
from __future__ import annotations

import functools
import os
import weakref
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from .. import ptregs
from ..errors import OptionError, UsdtSpecError
from ..program import R0, R1, R2, R3, R4, R5, R10, Program, Reg
from .notes import UsdtNote, UsdtProbe
from .spec import ArgKind, ArgSpec, UndecodableArg

__all__ = ["ArgReader", "COOKIE_SPEC_BITS", "MAX_GROUPS", "cookie_group", "cookie_address"]

#: Bits of a location's cookie that hold its spec group.
COOKIE_SPEC_BITS = 16
#: The most distinct argument-spec groups one reader can dispatch between.
MAX_GROUPS = 1 << COOKIE_SPEC_BITS
_GROUP_MASK = MAX_GROUPS - 1
_MAX_ADDRESS = 1 << (64 - COOKIE_SPEC_BITS)

_IP_SLOT = ptregs.register(ptregs.IP).slot
_S32_MIN, _S32_MAX = -(1 << 31), (1 << 31) - 1

# _MISSING marks "this location has no argument n"
_MISSING = None


def cookie_group(cookie: int) -> int:
    """The spec group a location's cookie selects."""
    return cookie & _GROUP_MASK


def cookie_address(cookie: int) -> int:
    """The ELF virtual address of the location a cookie was given to."""
    return cookie >> COOKIE_SPEC_BITS


# ---------------------------------------------------------------------------
# symbols

@functools.lru_cache(maxsize=64)
def _got_slots(path: str, key: tuple[int, ...]) -> dict[str | int, int]:
    """GOT slots of ``path``: symbol name -> slot vaddr (GLOB_DAT/64 relocs)
    and, under int keys, addend -> slot vaddr (RELATIVE relocs).  x86-64 only
    (empty for other machines); raises :class:`~pyebpf.elf.ElfError`."""
    from ..elf import open_elf
    from ..elf.layouts import R_X86_64_64, R_X86_64_GLOB_DAT, R_X86_64_RELATIVE
    from ..elf.relocs import relocations
    ef = open_elf(path)
    out: dict[Any, int] = {}
    if ef.machine != "EM_X86_64":
        return out
    for rel in relocations(ef, ("SHT_RELA",)):
        if rel.type in (R_X86_64_GLOB_DAT, R_X86_64_64) and rel.symbol_name:
            out.setdefault(rel.symbol_name, rel.offset)
        elif rel.type == R_X86_64_RELATIVE:
            out.setdefault(rel.addend, rel.offset)
    return out


def _file_key(path: str) -> tuple[int, ...]:
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _resolve_symbol(path: str, name: str, overrides: Mapping[str, int]) -> int:
    """st_value of ``name`` in ``path`` for a USDT operand.

    A local static shadows globals inside its own file, so among candidates
    at different addresses any LOCAL one makes the name ambiguous (libbpf/usdt#13).
    Raises LookupError / ValueError with a message for the caller to wrap.
    """
    if name in overrides:
        return int(overrides[name])
    from .. import elf as _elf
    ef = _elf.open_elf(path)
    cands = ef.find_symbols(name)
    if not cands:
        raise ef._not_found(name)
    by_addr: dict[int, Any] = {}
    for s in cands:
        by_addr.setdefault(s.address, s)
    if len(by_addr) == 1:
        only: int = next(iter(by_addr))
        return only
    locals_ = [s for s in by_addr.values() if s.bind == _elf.STB_LOCAL]
    if not locals_:
        # only global/weak definitions at several addresses: the global wins
        globals_ = [s for s in by_addr.values() if s.bind != _elf.STB_WEAK]
        if len(globals_) == 1:
            address: int = globals_[0].address
            return address
    found = sorted(by_addr.values(), key=lambda s: s.address)
    listing = "; ".join(f"{s.name} at {s.address:#x} ({s.bind_name} {s.type_name}, {s.table})"
                        for s in found)
    raise _elf.AmbiguousSymbolError(
        f"symbol {name!r} is ambiguous in {path}: {len(by_addr)} definitions ({listing}); a "
        f"static variable of the same name in several source files cannot be told apart from "
        f"the note alone -- pass symbols={{{name!r}: <st_value>}} to choose one", found)


def _got_slot(path: str, name: str, sym_value: int | None) -> int | None:
    slots = _got_slots(path, _file_key(path))
    slot = slots.get(name)
    if slot is None and sym_value is not None:
        slot = slots.get(sym_value)
    return slot


# ---------------------------------------------------------------------------
# one spec -> instructions

@dataclass(frozen=True)
class _Where:
    """Where a spec is read: what the generated code needs to know about
    its location(s) to place globals."""

    path: str
    probe: str
    index: int
    # bias mode for symbols: "exec" (absolute), "const" (one location:
    # ip - address), "cookie" (ip - cookie >> 16)
    mode: str
    address: int = 0          # the note address, for "const"
    locations: str = ""       # for messages
    symbols: Mapping[str, int] | None = None


def _fail(spec: Any, where: _Where, reason: str) -> UsdtSpecError:
    text = getattr(spec, "text", None) or (spec.format() if isinstance(spec, ArgSpec) else None)
    return UsdtSpecError(f"{reason} (at {where.locations})" if where.locations else reason,
                         spec=text, arch="x86_64", probe=where.probe, index=where.index)


def _check(spec: ArgSpec | UndecodableArg | None, where: _Where, float_bits: bool) -> ArgSpec:
    """The spec if this module can read it; raise UsdtSpecError otherwise."""
    if spec is _MISSING:
        raise UsdtSpecError(f"the probe has no argument {where.index} at {where.locations}",
                            probe=where.probe, index=where.index)
    if isinstance(spec, UndecodableArg):
        err = spec.error
        raise UsdtSpecError(err.reason + (f" (at {where.locations})" if where.locations else ""),
                            err.spec, err.arch, err.expected, where.probe, where.index)
    if spec.arch not in ("x86_64",):
        raise _fail(spec, where, f"reading {spec.arch} arguments is not supported "
                                 "(this code generator knows x86-64 pt_regs only)")
    if spec.is_float and not float_bits:
        place = "an SSE register, which struct pt_regs does not hold" if \
            (spec.reg or "").startswith(("xmm", "ymm", "zmm")) else \
            "a floating-point value (its bits are in a general register or memory)"
        raise _fail(spec, where, f"argument {where.index} is a {spec.ctype} float in {place}: "
                                 "BPF programs cannot read floating-point USDT arguments as "
                                 "numbers; skip this argument"
                    + ("" if "SSE" in place else
                       " or read its raw IEEE-754 bits with float_bits=True"))
    if spec.is_float and (spec.reg or "").startswith(("xmm", "ymm", "zmm")) and \
            spec.kind is ArgKind.REG:
        raise _fail(spec, where, f"{spec.reg} is an SSE register: struct pt_regs holds only "
                                 "the general-purpose registers, so this float cannot be read")
    if spec.segment:
        raise _fail(spec, where, f"a %{spec.segment}-relative (thread-local) operand: the "
                                 f"{spec.segment} base is not in pt_regs")
    if spec.reloc not in (None, "GOTPCREL"):
        raise _fail(spec, where, f"a @{spec.reloc} relocation cannot be resolved from the note")
    if spec.size not in (1, 2, 4, 8):
        raise _fail(spec, where, f"argument size {spec.size} (only 1, 2, 4, 8)")
    for r in (spec.reg, spec.index):
        if r is not None and r not in ptregs.REGISTERS:
            raise _fail(spec, where, f"register {r} is not in struct pt_regs")
    return spec


def _extend(p: Program, dst: Reg, nbytes: int, signed: bool) -> None:
    """dst holds ``nbytes`` zero-extended bytes: sign-extend them if signed."""
    if signed and nbytes < 8:
        shift = 64 - 8 * nbytes
        p.lsh(dst, shift)
        p.arsh(dst, shift)


def _add_const(p: Program, reg: Reg, value: int, tmp: Reg) -> None:
    value = ((value + (1 << 63)) % (1 << 64)) - (1 << 63)     # as s64
    if value == 0:
        return
    if _S32_MIN <= value <= _S32_MAX:
        p.add(reg, value)
    else:
        p.lddw(tmp, value)
        p.add(reg, tmp)


def _load_reg(p: Program, dst: Reg, ctx: Reg, name: str, width: int | None,
              shift: int = 0) -> int:
    """dst = the bytes of register ``name`` (its ``width`` low bytes from bit
    ``shift``), zero-extended; returns how many bytes were loaded."""
    reg = ptregs.register(name)
    w = min(width or 8, 8)
    p.load(dst, ctx, reg.slot + shift // 8, w)
    return w


def _symbol_value(spec: ArgSpec, where: _Where) -> int:
    """st_value of the spec's symbol (raises UsdtSpecError)."""
    try:
        return _resolve_symbol(where.path, str(spec.symbol), where.symbols or {})
    except (LookupError, ValueError, OSError) as exc:
        raise _fail(spec, where, f"cannot place symbol {spec.symbol!r}: {exc}") from None


def _as_address(spec: ArgSpec) -> ArgSpec:
    """A GOTPCREL spec as the ADDRESS of its symbol (when no GOT slot exists)."""
    import dataclasses
    return dataclasses.replace(spec, kind=ArgKind.ADDRESS, reloc=None, reg=None, reg_width=None)


def _resolved(spec: ArgSpec, where: _Where) -> tuple[ArgSpec, int | None]:
    """(spec to emit, address of its symbol or GOT slot, None without symbol)."""
    if spec.symbol is None:
        return spec, None
    value = _symbol_value(spec, where)
    if spec.kind is ArgKind.GOTPCREL:
        try:
            slot = _got_slot(where.path, spec.symbol, value)
        except (ValueError, OSError) as exc:      # ElfError: a damaged relocation table
            raise _fail(spec, where, f"cannot read the GOT of {where.path}: {exc}") from None
        if slot is None:
            return _as_address(spec), value
        return spec, slot
    return spec, value


def _emit_address(p: Program, spec: ArgSpec, sym: int | None, ctx: Reg, where: _Where,
                  cookie: Reg, out: Reg = R3) -> None:
    """out = the address a memory operand (or an ADDRESS) designates.

    ``sym`` is the ELF address of its symbol (or GOT slot).  Uses R2, R4 as
    scratch; ``cookie`` holds the attach cookie in "cookie" mode."""
    k = spec.kind
    tmp, tmp2 = R2, R4
    disp = spec.offset
    have = False

    def add_reg(r: Reg) -> None:
        nonlocal have
        if have:
            p.add(out, r)
        else:
            p.mov(out, r)
            have = True

    if spec.reg is not None and k not in (ArgKind.RIP, ArgKind.GOTPCREL):
        _load_reg(p, out, ctx, spec.reg, spec.reg_width)
        have = True
    if spec.index is not None:
        _load_reg(p, tmp, ctx, spec.index, spec.index_width)
        if spec.scale != 1:
            p.lsh(tmp, spec.scale.bit_length() - 1)
        add_reg(tmp)
    if sym is not None:
        disp += sym
        if where.mode == "const":            # bias = ip - address (one location)
            disp -= where.address
            p.load(tmp, ctx, _IP_SLOT, 8)
            add_reg(tmp)
        elif where.mode == "cookie":         # bias = ip - (cookie >> 16)
            p.load(tmp, ctx, _IP_SLOT, 8)
            p.mov(tmp2, cookie)
            p.rsh(tmp2, COOKIE_SPEC_BITS)
            p.sub(tmp, tmp2)
            add_reg(tmp)
        # "exec": the address is the constant itself
    elif k is ArgKind.RIP:                   # numeric off(%rip): relative to the probe
        p.load(tmp, ctx, _IP_SLOT, 8)
        add_reg(tmp)
    if not have:
        disp = ((disp + (1 << 63)) % (1 << 64)) - (1 << 63)
        if _S32_MIN <= disp <= _S32_MAX:
            p.mov(out, disp)
        else:
            p.lddw(out, disp)
        return
    _add_const(p, out, disp, tmp)


_scratch: "weakref.WeakKeyDictionary[Program, int]" = weakref.WeakKeyDictionary()


def _scratch_slot(p: Program) -> int:
    """An 8-byte stack slot for probe_read_user, one per program."""
    off = _scratch.get(p)
    if off is None:
        off = p.stack.alloc(8, 8)
        _scratch[p] = off
    return off


def _truncate(p: Program, dst: Reg, size: int, signed: bool) -> None:
    shift = 64 - 8 * size
    p.lsh(dst, shift)
    if signed:
        p.arsh(dst, shift)
    else:
        p.rsh(dst, shift)


def emit_spec(p: Program, dst: Reg, spec: ArgSpec, ctx: Reg, where: _Where,
              cookie: Reg = R0, *, float_bits: bool = False) -> None:
    """Emit ``dst = value of spec`` (64-bit, extended).

    The spec is checked first (raising :class:`~pyebpf.errors.UsdtSpecError`).
    Clobbers r0-r5; in ``where.mode == "cookie"`` the ``cookie`` register
    (r0) must hold the attach cookie.  dst is written last.
    """
    spec = _check(spec, where, float_bits)
    spec, sym = _resolved(spec, where)
    k = spec.kind
    signed = spec.signed and not spec.is_float
    if k is ArgKind.CONST:
        v = spec.value if spec.value is not None else 0
        if _S32_MIN <= v <= _S32_MAX:
            p.mov(dst, v)
        else:
            p.lddw(dst, v & ((1 << 64) - 1))
        return
    if k is ArgKind.REG:
        w = min(spec.size, spec.reg_width or 8)
        _load_reg(p, dst, ctx, str(spec.reg), w, spec.reg_shift)
        _extend(p, dst, w, signed)
        return
    if k is ArgKind.ADDRESS:
        _emit_address(p, spec, sym, ctx, where, cookie, R3)
        p.mov(dst, R3)
        if spec.size < 8:
            _truncate(p, dst, spec.size, signed)
        return
    # a memory operand: address -> r3, copy exactly spec.size bytes, load, extend
    _emit_address(p, spec, sym, ctx, where, cookie, R3)
    slot = _scratch_slot(p)
    p.mov(R1, R10)
    p.add(R1, slot)
    p.mov(R2, spec.size)
    p.call("probe_read_user")
    p.load(dst, R10, slot, spec.size)
    _extend(p, dst, spec.size, signed)


# ---------------------------------------------------------------------------
# a probe's locations -> groups -> dispatch

def _needs_placement(spec: Any) -> bool:
    return isinstance(spec, ArgSpec) and spec.symbol is not None


def _loc_text(notes: Sequence[UsdtNote], limit: int = 4) -> str:
    parts = [f"{n.elf.path}@{n.address:#x}" for n in notes[:limit]]
    if len(notes) > limit:
        parts.append(f"... ({len(notes)} locations)")
    return ", ".join(parts)


class ArgReader:
    """Reads the arguments of one probe at all its locations.

    Args:
        probes: the probe in each file (:class:`~pyebpf.usdt.notes.UsdtProbe`,
            or a sequence of :class:`~pyebpf.usdt.notes.UsdtNote`).
        symbols: ``name -> st_value`` overrides for symbols that the
            operands name (to settle an ambiguous static variable).

    Attributes:
        locations: every :class:`UsdtNote`, in attach order (file by file).
        groups: the distinct argument-spec tuples (per file when they name
            symbols); ``location_groups[i]`` is location *i*'s group.
        uses_cookie: the locations must be attached with :attr:`cookies`.
    """

    def __init__(self, probes: Iterable[UsdtProbe | UsdtNote] | UsdtProbe,
                 *, symbols: Mapping[str, int] | None = None) -> None:
        if isinstance(probes, UsdtProbe):
            probes = [probes]
        notes: list[UsdtNote] = []
        for item in probes:
            if isinstance(item, UsdtProbe):
                notes.extend(item.locations)
            else:
                notes.append(item)
        if not notes:
            raise OptionError("ArgReader needs at least one probe location")
        self.locations: tuple[UsdtNote, ...] = tuple(notes)
        self.symbols = dict(symbols or {})
        first = notes[0]
        self.probe = first.probe
        keys: dict[tuple[Any, ...], int] = {}
        groups: list[tuple[Any, ...]] = []
        members: list[list[UsdtNote]] = []
        loc_groups = []
        for n in notes:
            args = n.arguments
            key = (n.elf.path if any(_needs_placement(a) for a in args) else None, args)
            g = keys.get(key)
            if g is None:
                g = keys[key] = len(groups)
                groups.append(key)
                members.append([])
            members[g].append(n)
            loc_groups.append(g)
        if len(groups) > MAX_GROUPS:
            raise UsdtSpecError(f"{len(groups)} distinct argument-spec groups; at most "
                                f"{MAX_GROUPS} can be dispatched", probe=self.probe)
        self.groups: tuple[tuple[Any, ...], ...] = tuple(groups)
        self._members = members
        self.location_groups: tuple[int, ...] = tuple(loc_groups)
        # does any location need its own address (globals in a PIE/shared
        # object with several locations)?
        placed_dyn = any(key[0] is not None and members[g][0].elf.elf_type != "ET_EXEC"
                         and len(members[g]) > 1
                         for g, key in enumerate(groups))
        self.uses_cookie: bool = len(groups) > 1 or placed_dyn
        if self.uses_cookie:
            for n in notes:
                if n.address >= _MAX_ADDRESS:
                    raise UsdtSpecError(f"location {n.address:#x} does not fit the "
                                        f"{64 - COOKIE_SPEC_BITS}-bit address part of the "
                                        "cookie", probe=self.probe)

    # -- facts
    @property
    def arg_count(self) -> int:
        """The largest argument count over the locations."""
        return max(len(key[1]) for key in self.groups)

    @property
    def cookies(self) -> list[int]:
        """The BPF cookie of each location (all 0 when none is needed)."""
        if not self.uses_cookie:
            return [0] * len(self.locations)
        return [g | (n.address << COOKIE_SPEC_BITS)
                for n, g in zip(self.locations, self.location_groups)]

    def specs(self, n: int) -> list[ArgSpec | UndecodableArg | None]:
        """Argument ``n`` of each group (None where a group lacks it)."""
        return [key[1][n] if n < len(key[1]) else None for key in self.groups]

    def dispatches(self, n: int) -> bool:
        """Whether reading argument ``n`` dispatches on the cookie."""
        return len(self._variants(n)) > 1

    # -- code generation
    def _variants(self, n: int) -> list[tuple[Any, list[int]]]:
        """[(variant key, [group...])] for argument n; key = (path or None, spec)."""
        out: dict[Any, list[int]] = {}
        for g, key in enumerate(self.groups):
            args = key[1]
            spec = args[n] if n < len(args) else _MISSING
            vkey = (key[0] if _needs_placement(spec) else None, spec)
            out.setdefault(vkey, []).append(g)
        return list(out.items())

    def _where(self, vkey: Any, groups: list[int], n: int) -> _Where:
        notes = [m for g in groups for m in self._members[g]]
        spec = vkey[1]
        path = vkey[0] or notes[0].elf.path
        mode = "none"
        address = 0
        if _needs_placement(spec):
            if notes[0].elf.elf_type == "ET_EXEC":
                mode = "exec"                 # loaded at its link addresses
            elif len(notes) == 1:
                mode, address = "const", notes[0].address
            else:
                mode = "cookie"
        return _Where(path, self.probe, n, mode, address, _loc_text(notes), self.symbols)

    def check(self, n: int, *, float_bits: bool = False) -> None:
        """Raise the :class:`~pyebpf.errors.UsdtSpecError` that reading
        argument ``n`` would raise (does nothing when it is readable)."""
        if not isinstance(n, int) or n < 0:
            raise UsdtSpecError(f"argument number must be an int >= 0, not {n!r}",
                                probe=self.probe)
        if n >= self.arg_count:
            raise UsdtSpecError(f"the probe has {self.arg_count} argument(s) "
                                f"(arg0..arg{self.arg_count - 1}), no argument {n}"
                                if self.arg_count else
                                f"the probe has no arguments, so no argument {n}",
                                probe=self.probe, index=n)
        for vkey, groups in self._variants(n):
            where = self._where(vkey, groups, n)
            _resolved(_check(vkey[1], where, float_bits), where)

    def emit(self, p: Program, dst: Reg, n: int, ctx: Reg, *,
             float_bits: bool = False) -> None:
        """Emit ``dst = argument n`` (64-bit, sign- or zero-extended per its
        spec) at whichever location fired.

        ``ctx`` is the register holding the context pointer (saved from r1 at
        entry into r6-r9).  Clobbers r0-r5; dst is written last, so it may be
        any register but r10.  ``float_bits`` reads a float argument held in
        a general register or memory as its raw IEEE-754 bits instead of
        raising.  Raises :class:`~pyebpf.errors.UsdtSpecError` (before
        emitting anything) when the argument cannot be read.
        """
        if not isinstance(dst, Reg) or dst.index == 10:
            raise UsdtSpecError(f"dst must be a register r0-r9, not {dst!r}", probe=self.probe)
        if not isinstance(ctx, Reg) or not 6 <= ctx.index <= 9:
            raise UsdtSpecError(f"ctx must be the callee-saved register (r6-r9) holding the "
                                f"context pointer, not {ctx!r}: save r1 there at entry "
                                "(p.mov(R6, R1)), since helper calls clobber r1-r5",
                                probe=self.probe)
        dst, ctx = dst.r, ctx.r
        self.check(n, float_bits=float_bits)
        variants = self._variants(n)
        wheres = [self._where(vkey, groups, n) for vkey, groups in variants]
        need_cookie = len(variants) > 1 or any(w.mode == "cookie" for w in wheres)
        if not need_cookie:
            emit_spec(p, dst, variants[0][0][1], ctx, wheres[0], float_bits=float_bits)
            return
        p.mov(R1, ctx)
        p.call("get_attach_cookie")                  # r0 = cookie
        if len(variants) == 1:
            emit_spec(p, dst, variants[0][0][1], ctx, wheres[0], R0, float_bits=float_bits)
            return
        done = p.fresh_label("usdt_arg_done")
        labels = [p.fresh_label(f"usdt_arg{n}_v{i}") for i in range(len(variants))]
        by_group = [0] * len(self.groups)
        for i, (_vkey, groups) in enumerate(variants):
            for g in groups:
                by_group[g] = i
        p.mov(R5, R0)
        p.and_(R5, _GROUP_MASK)
        _switch(p, R5, by_group, labels)
        for i, ((vkey, _groups), where) in enumerate(zip(variants, wheres)):
            p.label(labels[i])
            emit_spec(p, dst, vkey[1], ctx, where, R0, float_bits=float_bits)
            if i != len(variants) - 1:
                p.ja(done)
        p.label(done)


def _switch(p: Program, reg: Reg, by_group: list[int], labels: list[str]) -> None:
    """Jump to ``labels[by_group[reg]]``: a binary search over runs of groups."""
    runs: list[tuple[int, int]] = []       # (first group, variant)
    for g, v in enumerate(by_group):
        if not runs or runs[-1][1] != v:
            runs.append((g, v))

    def emit(lo: int, hi: int) -> None:    # runs[lo:hi]
        if hi - lo == 1:
            p.ja(labels[runs[lo][1]])
            return
        mid = (lo + hi) // 2
        right = p.fresh_label("usdt_sw")
        p.jge(reg, runs[mid][0], right)
        emit(lo, mid)
        p.label(right)
        emit(mid, hi)

    emit(0, len(runs))
