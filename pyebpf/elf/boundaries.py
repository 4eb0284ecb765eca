"""Instruction boundaries: may a uprobe go at this address?

A uprobe must sit on the first byte of an instruction, or it corrupts the
traced program.  :class:`InstructionChecks` proves it: inside a function
symbol by disassembling the function from its start (capstone, x86-64 and
i386) or by alignment (fixed-width ISAs); elsewhere -- a stripped binary,
the PLT, code between symbols -- by a linear disassembly from the nearest
instruction start known without symbols: a function start in ``.eh_frame``
(which ``strip`` keeps; :func:`~pyebpf.elf.ehframe.parse_eh_frame`), the
entry point, an executable section's start.
"""
from __future__ import annotations

import bisect

from .errors import ElfError, InstructionBoundaryError
from .headers import Segment
from .layouts import SHF_EXECINSTR
from .symbols import Symbol, SymbolTable

__all__ = ["InstructionChecks", "FIXED_WIDTH", "VARIABLE_WIDTH", "UNSAFE_HINT"]

#: ISAs whose instructions all have one width (or a multiple of it): the
#: alignment proves a boundary
FIXED_WIDTH = {"EM_AARCH64": 4, "EM_PPC64": 4, "EM_MIPS": 4, "EM_S390": 2, "EM_RISCV": 2,
               "EM_ARM": 2, "EM_LOONGARCH": 4}
#: ISAs decoded with capstone to find instruction starts
VARIABLE_WIDTH = ("EM_X86_64", "EM_386")
#: the farthest a linear disassembly goes from a known instruction start
_MAX_SWEEP = 1 << 20
#: the end of every boundary error: how to attach anyway
UNSAFE_HINT = (". To attach there anyway, pass unsafe=True (Python) or --unsafe (command "
               "line)")


class InstructionChecks(SymbolTable):
    """:class:`~pyebpf.elf.symbols.SymbolTable` that can check instruction starts."""

    def __init__(self, path: str, data: bytes | None = None) -> None:
        super().__init__(path, data)
        self._boundaries: dict[int, list[int] | None] = {}
        self._eh_frame: list[tuple[int, int]] | None = None
        self._known: tuple[list[int], dict[int, str]] | None = None
        self._sweeps: dict[tuple[int, int], tuple[list[int], int]] = {}

    def _decode(self, vaddr: int, size: int) -> tuple[list[int], int]:
        """Disassemble (x86) ``size`` bytes from ``vaddr`` in one linear sweep.

        Returns the addresses where instructions start and the address just
        past the last one decoded (capstone stops at bytes that are no
        instruction).  Never reads past the file-backed part of the segment.
        """
        seg = self.segment_for_address(vaddr)
        if seg is None:
            return [], vaddr
        code = self.read(vaddr, max(0, min(size, seg.vaddr + seg.filesz - vaddr)))
        import capstone
        mode = capstone.CS_MODE_64 if self.machine == "EM_X86_64" else capstone.CS_MODE_32
        starts: list[int] = []
        end = vaddr
        for addr, length, _m, _o in capstone.Cs(capstone.CS_ARCH_X86, mode).disasm_lite(code,
                                                                                       vaddr):
            starts.append(addr)
            end = addr + length
        return starts, end

    def instruction_boundaries(self, sym: Symbol, limit: int | None = None) -> list[int] | None:
        """Offsets (from the function start) where instructions begin.

        Disassembles x86-64/i386 code with capstone from the function's first
        byte, up to its size (or ``limit`` when the size is 0).  Returns None
        for architectures where every aligned offset is a boundary (see
        :meth:`check_instruction_boundary`) or that are not supported.
        """
        if self.machine not in VARIABLE_WIDTH:
            return None
        cached = self._boundaries.get(sym.address)
        if cached is not None and (sym.size or (limit is not None and cached
                                                and cached[-1] >= limit)):
            return cached
        size = sym.size or max(limit or 0, 0) + 16
        starts = [a - sym.address for a in self._decode(sym.address, size)[0]]
        if sym.size:
            self._boundaries[sym.address] = starts
        return starts

    def _fixed_width_aligned(self, value: int, what: str) -> bool:
        """False on machines whose instructions vary in width; on fixed-width
        ones True, after checking that ``value`` (an offset or address, ``what``
        in messages) is a multiple of the width (else InstructionBoundaryError)."""
        align = FIXED_WIDTH.get(self.machine)
        if align is None:
            return False
        if value % align:
            raise InstructionBoundaryError(
                f"{what} in {self.path} is not a multiple of {align}, so it is not an "
                f"instruction boundary on {self.machine}{UNSAFE_HINT}")
        return True

    def check_instruction_boundary(self, sym: Symbol, offset: int) -> None:
        """Raise :class:`InstructionBoundaryError` unless ``sym+offset`` starts an
        instruction (x86: by disassembly; arm64/other fixed-width ISAs: by
        alignment)."""
        if offset == 0:
            return
        if sym.size and offset >= sym.size:
            raise InstructionBoundaryError(
                # (bpftrace's words first, then which file and by how much)
                f"Offset outside the function bounds ('{sym.versioned_name}' size is "
                f"{sym.size}): offset {offset:#x} is past the end of {sym.versioned_name} in "
                f"{self.path} (the function is {sym.size:#x} bytes long){UNSAFE_HINT}")
        if self._fixed_width_aligned(offset, f"{sym.versioned_name}+{offset:#x}"):
            return
        starts = self.instruction_boundaries(sym, offset)
        if starts is None or offset in starts:
            return
        covered = starts[-1] if starts else 0
        if not starts or offset > covered + 15:
            raise InstructionBoundaryError(
                f"cannot check {sym.versioned_name}+{offset:#x} in {self.path}: capstone "
                f"stopped decoding at +{covered:#x} (data in code, or a symbol size that is "
                f"wrong); give the offset of a known instruction{UNSAFE_HINT}", starts)
        k = bisect.bisect_left(starts, offset)
        near = starts[max(0, k - 3):k + 3]
        before = starts[k - 1] if k else 0
        raise InstructionBoundaryError(
            f"{sym.versioned_name}+{offset:#x} in {self.path} is in the middle of the "
            f"instruction that starts at +{before:#x}; a uprobe there would corrupt the "
            f"code. Instructions near it start at: {', '.join(f'+{x:#x}' for x in near)}"
            f"{UNSAFE_HINT}", near)

    def eh_frame_functions(self) -> list[tuple[int, int]]:
        """``[(start, size), ...]`` of the functions ``.eh_frame`` describes.

        Every FDE of the unwind table gives a function's first address and
        length; :func:`strip` keeps ``.eh_frame`` (unwinding needs it), so
        this finds function starts that no symbol names.  Sorted; empty when
        the file has no ``.eh_frame``; parsed once.  Raises :class:`ElfError`
        for a malformed section.
        """
        if self._eh_frame is None:
            fdes: list[tuple[int, int]] = []
            sec = self.section(".eh_frame")
            if sec is not None and sec.type != "SHT_NOBITS" and sec.size:
                from .ehframe import parse_eh_frame
                fdes = parse_eh_frame(self.section_data(sec), sec.addr,
                                      address_size=self.elfclass // 8,
                                      little_endian=self.little_endian)
            self._eh_frame = fdes
        return self._eh_frame

    def known_instruction_starts(self) -> dict[int, str]:
        """Addresses known to start an instruction without disassembling,
        each with where that is known from.

        They are: function symbols, function starts in ``.eh_frame``, the
        entry point and the starts of executable sections -- those inside an
        executable segment.  (A malformed ``.eh_frame`` adds nothing.)
        """
        if self._known is None:
            known: dict[int, str] = {}

            def add(addr: int, why: str) -> None:
                seg = self.segment_for_address(addr)
                if addr and seg is not None and seg.executable:
                    known.setdefault(addr, why)

            for sec in self.sections:
                if sec.flags & SHF_EXECINSTR and sec.size and sec.type != "SHT_NOBITS":
                    add(sec.addr, f"the start of section {sec.name or '(unnamed)'}")
            add(self.entry, "the entry point")
            try:
                fdes = self.eh_frame_functions()
            except ElfError:
                fdes = []
            for start, _size in fdes:
                add(start, "a function start in .eh_frame")
            for sym in self.symbols():
                if sym.is_function:
                    add(sym.address, f"function {sym.versioned_name}")
            self._known = (sorted(known), known)
        return self._known[1]

    def _sweep_from(self, start: int, stop: int) -> tuple[list[int], int]:
        """:meth:`_decode` from a known instruction start up to ``stop`` (the
        next one, or the end of the segment), cached per start."""
        hit = self._sweeps.get((start, stop))
        if hit is None:
            hit = self._sweeps[(start, stop)] = self._decode(start, stop - start)
        return hit

    def check_instruction_address(self, vaddr: int) -> None:
        """Raise :class:`InstructionBoundaryError` unless ``vaddr`` provably
        starts an instruction.

        Inside a function symbol with a size this is
        :meth:`check_instruction_boundary`.  Elsewhere (a stripped binary, code
        between symbols, the PLT, a symbol without a size) the proof
        is a linear disassembly from the nearest :meth:`known_instruction_starts`
        at or below ``vaddr``: the address must start one of the instructions
        decoded.  Fixed-width ISAs need the address aligned; others cannot be
        checked and are refused.  The address must also be in an executable
        segment.
        """
        hit = self.function_at(vaddr)
        if hit is not None and (hit[0].size or not hit[1]):
            self.check_instruction_boundary(*hit)
            return
        # no symbol, or one of size 0 whose extent is a guess (``_init`` is
        # taken to run on into the PLT): disassemble from the nearest known start
        seg = self.segment_for_address(vaddr)
        if seg is None or not seg.executable:
            raise InstructionBoundaryError(
                f"Could not resolve address: {self.path}:{vaddr:#x}: it is not in executable "
                f"code ({seg or 'in no loadable segment'}), so it cannot start an instruction; a "
                f"uprobe there would never fire, or would corrupt data{UNSAFE_HINT}")
        if self._fixed_width_aligned(vaddr, f"{vaddr:#x}"):
            return
        if self.machine not in VARIABLE_WIDTH:
            raise InstructionBoundaryError(
                f"cannot check that {vaddr:#x} in {self.path} starts an instruction: no "
                f"symbol covers it and {self.machine} code is not decoded here"
                f"{UNSAFE_HINT}")
        self._check_by_sweep(vaddr, seg)

    def _check_by_sweep(self, vaddr: int, seg: Segment) -> None:
        why = self.known_instruction_starts()
        known = self._known[0]  # type: ignore[index]
        i = bisect.bisect_right(known, vaddr) - 1
        if i >= 0 and known[i] == vaddr:
            return
        seg_end = seg.vaddr + seg.filesz
        after = known[i + 1] if i + 1 < len(known) and known[i + 1] < seg_end else None
        if i < 0 or not seg.has_address(known[i]):
            raise InstructionBoundaryError(
                f"{vaddr:#x} in {self.path} cannot be proven to start an instruction: no "
                "symbol covers it and no known instruction start (function in .eh_frame, "
                "entry point, section start) precedes it in its segment"
                + (f"; the next known one is {after:#x}" if after is not None else "")
                + UNSAFE_HINT, [a for a in (after,) if a is not None])
        start = known[i]
        stop = after if after is not None else seg_end
        if vaddr - start > _MAX_SWEEP:
            raise InstructionBoundaryError(
                f"{vaddr:#x} in {self.path} cannot be proven to start an instruction: no "
                f"symbol covers it and the nearest known instruction start, {start:#x} "
                f"({why[start]}), is {vaddr - start:#x} bytes before it"
                + (f" (the next is {after:#x})" if after is not None else "") + UNSAFE_HINT,
                [a for a in (start, after) if a is not None])
        if stop - start > _MAX_SWEEP:
            starts, end = self._decode(start, vaddr + 16 - start)
        else:
            starts, end = self._sweep_from(start, stop)
        k = bisect.bisect_left(starts, vaddr)
        if k < len(starts) and starts[k] == vaddr:
            return
        if vaddr >= end:
            raise InstructionBoundaryError(
                f"{vaddr:#x} in {self.path} cannot be proven to start an instruction: no "
                f"symbol covers it, and disassembling from {start:#x} ({why[start]}) "
                f"stopped at {end:#x}, before it (data in code?)" + UNSAFE_HINT,
                starts[-3:] + ([after] if after is not None else []))
        near = starts[max(0, k - 3):k + 3]
        nxt = starts[k] if k < len(starts) else end
        raise InstructionBoundaryError(
            f"{vaddr:#x} in {self.path} is in the middle of an instruction: no symbol covers "
            f"it, and disassembling from {start:#x} ({why[start]}) finds instructions "
            f"starting at {starts[k - 1]:#x} and {nxt:#x} around it; a uprobe there would "
            f"corrupt the traced program. Instructions near it start at: "
            f"{', '.join(f'{x:#x}' for x in near)}{UNSAFE_HINT}", near)
