"""The VM's checked memory: a tagged address space of separate regions.

A pointer is ``tag << 32 | offset``: the tag (the high 32 bits) names a
region -- the context, the packet, one 512-byte stack per frame, each map
value, each ring-buffer reservation -- and the offset is checked against
that region's size on every access.  An access that falls outside its
region, through a null or forged pointer, or (on the stack, and for every
atomic) at a misaligned address, stops the run with a
:class:`~pyebpf.vm.errors.VmError` naming the instruction.

Regions live in one list indexed by tag, so an access is one list index,
one ``struct`` call and no dict lookup (see :meth:`Memory.accessors`).
"""
from __future__ import annotations

import struct

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

TAG_SHIFT = 32
OFF_MASK = 0xFFFFFFFF
M64 = 0xFFFFFFFFFFFFFFFF

#: fixed tags
NULL, CTX, PACKET = 0, 1, 2
STACK0 = 3                 #: frame N's stack is tag STACK0 + N
MAX_FRAMES = 8             #: the kernel's MAX_CALL_FRAMES
CODE = STACK0 + MAX_FRAMES  #: ``CODE << 32 | slot``: the address of an instruction
MAPS = CODE + 1            #: ``MAPS << 32 | n``: the n-th map given to the VM
FIRST_DYNAMIC = MAPS + 1   #: map values and reservations get tags from here
STACK_SIZE = 512

_FMT = {1: "<B", 2: "<H", 4: "<I", 8: "<Q"}


def address(tag: int, offset: int = 0) -> int:
    """The VM address of ``offset`` in region ``tag``."""
    return (tag << TAG_SHIFT) + offset


class Memory:
    """The regions of one VM: ``regions[tag]`` is a ``bytearray`` (or None),
    ``names[tag]`` what it is, for error messages."""

    def __init__(self, fault: Callable[[int, str], None]) -> None:
        self.regions: list[bytearray | None] = [None] * FIRST_DYNAMIC
        self.names: list[str] = ["null"] * FIRST_DYNAMIC
        for n in range(MAX_FRAMES):
            self.names[STACK0 + n] = f"the stack of frame {n}"
        self.names[CTX] = "the context"
        self.names[PACKET] = "the packet"
        self.names[CODE] = "code (an instruction address)"
        self.names[MAPS] = "a map (pass it to a map helper, do not dereference it)"
        self._fault = fault
        self.writes: list[tuple[int, int, int]] | None = None  # (address, size, value) when tracing
        self._deep: list[int] = []     # the tags of frames MAX_FRAMES, MAX_FRAMES + 1, ...

    def stack_tag(self, depth: int) -> int:
        """The tag of frame ``depth``'s stack: ``STACK0 + depth`` for the first
        :data:`MAX_FRAMES`; deeper frames (a program's subprogram tail-calls a
        program that calls subprograms...) get tags on first use, kept."""
        if depth < MAX_FRAMES:
            return STACK0 + depth
        while len(self._deep) <= depth - MAX_FRAMES:
            self._deep.append(self.add(None, f"the stack of frame {MAX_FRAMES + len(self._deep)}")
                              >> TAG_SHIFT)
        return self._deep[depth - MAX_FRAMES]

    def deep_stacks(self) -> list[int]:
        """The tags of the frames beyond :data:`MAX_FRAMES` made so far."""
        return self._deep

    # ------------------------------------------------------------ regions
    def add(self, data: bytearray | None, name: str) -> int:
        """Give ``data`` a new tag; returns its address."""
        self.regions.append(data)
        self.names.append(name)
        return (len(self.regions) - 1) << TAG_SHIFT

    def where(self, addr: int) -> str:
        """``addr`` in words: the region and offset."""
        tag, off = addr >> TAG_SHIFT, addr & OFF_MASK
        if 0 <= tag < len(self.regions) and (self.regions[tag] is not None or tag in (CODE, MAPS)):
            buf = self.regions[tag]
            size = f" of {len(buf)} bytes" if buf is not None else ""
            return f"0x{addr:x} (offset {off} in {self.names[tag]}{size})"
        if tag == 0:
            return f"0x{addr:x} (a null or scalar pointer: no region)"
        if STACK0 <= tag < STACK0 + MAX_FRAMES:
            return (f"0x{addr:x} (offset {off} in the stack of frame {tag - STACK0}, which is "
                    "gone: its call returned)")
        if FIRST_DYNAMIC <= tag < len(self.regions):
            return f"0x{addr:x} (offset {off} in {self.names[tag]}, which is gone)"
        return f"0x{addr:x} (no region: not a pointer the VM made)"

    def short(self, addr: int) -> str:
        """``addr`` briefly: ``stack0[504]``, ``ctx[4]``, ``mem#14[0]``."""
        tag, off = addr >> TAG_SHIFT, addr & OFF_MASK
        if STACK0 <= tag < STACK0 + MAX_FRAMES:
            return f"stack{tag - STACK0}[{off}]"
        name = {CTX: "ctx", PACKET: "packet"}.get(tag, f"mem#{tag}")
        return f"{name}[{off}]"

    def pointer(self, addr: int) -> str | None:
        """``addr`` as :meth:`short` says it when it points into (or just past)
        a region the VM made -- ``stack0[512]`` for r10, ``code[7]``,
        ``map#0`` -- else None (a number)."""
        tag, off = addr >> TAG_SHIFT, addr & OFF_MASK
        if tag == CODE:
            return f"code[{off}]"
        if tag == MAPS:
            return f"map#{off}"
        if not 0 < tag < len(self.regions):
            return None
        buf = self.regions[tag]
        if buf is None or off > len(buf):
            return None
        return self.short(addr)

    def region(self, addr: int, size: int) -> tuple[bytearray, int] | None:
        """The buffer and offset of ``size`` bytes at ``addr``, or None if
        they are not all inside one region."""
        tag = addr >> TAG_SHIFT
        if not 0 < tag < len(self.regions):
            return None
        buf = self.regions[tag]
        off = addr & OFF_MASK
        if buf is None or size < 0 or off + size > len(buf):
            return None
        return buf, off

    # ------------------------------------------------------------ bulk access (helpers)
    def read(self, addr: int, size: int, insn: int, what: str = "read") -> bytes:
        """``size`` bytes at ``addr`` (a helper's memory argument)."""
        got = self.region(addr, size)
        if got is None:
            self._fault(insn, f"{what} of {size} bytes at {self.where(addr)} is out of bounds")
        buf, off = got  # type: ignore[misc]
        return bytes(buf[off:off + size])

    def write(self, addr: int, data: bytes, insn: int, what: str = "write") -> None:
        """Store ``data`` at ``addr`` (a helper's output argument)."""
        got = self.region(addr, len(data))
        if got is None:
            self._fault(insn, f"{what} of {len(data)} bytes at {self.where(addr)} is out of bounds")
        buf, off = got  # type: ignore[misc]
        buf[off:off + len(data)] = data
        if self.writes is not None:
            self.writes.append((addr, len(data), int.from_bytes(data[:8], "little")))

    # ------------------------------------------------------------ the translated code's accessors
    def bad(self, addr: int, size: int, insn: int, what: str) -> None:
        """Raise the fault of an access that failed (bounds, alignment, pointer)."""
        got = self.region(addr, size)
        if got is not None and addr % size:
            self._fault(insn, f"misaligned {what} of {size} bytes at {self.where(addr)}")
        self._fault(insn, f"{what} of {size} bytes at {self.where(addr)} is out of bounds")

    def accessors(self, strict: bool = False) -> dict[str, Callable[..., Any]]:
        """The load/store functions the translated code calls: ``LD1..LD8(addr, insn)``,
        ``ST1..ST8(addr, value, insn)``, ``LDA``/``STA``/``ATOMIC``/``CMPXCHG``
        (always aligned).  Stack accesses must be aligned as the verifier
        demands; ``strict`` demands it of every region."""
        out: dict[str, Callable[..., Any]] = {}
        for size, fmt in _FMT.items():
            out[f"LD{size}"] = self._load(size, fmt, strict)
            out[f"ST{size}"] = self._store(size, fmt, strict)
        bad = self.bad

        def aligned(addr: int, size: int, insn: int, what: str) -> tuple[bytearray, int]:
            got = self.region(addr, size)
            if got is None or addr % size:
                bad(addr, size, insn, what)
            return got  # type: ignore[return-value]

        def lda(addr: int, size: int, insn: int) -> int:
            buf, off = aligned(addr, size, insn, "load-acquire")
            return int.from_bytes(buf[off:off + size], "little")

        def sta(addr: int, size: int, value: int, insn: int) -> None:
            buf, off = aligned(addr, size, insn, "store-release")
            buf[off:off + size] = (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
            self._log(addr, size, value)

        def atomic(addr: int, size: int, fn: Callable[[int, int], int], value: int, insn: int) -> int:
            buf, off = aligned(addr, size, insn, "atomic access")
            mask = (1 << (8 * size)) - 1
            old = int.from_bytes(buf[off:off + size], "little")
            new = fn(old, value & mask) & mask
            buf[off:off + size] = new.to_bytes(size, "little")
            self._log(addr, size, new)
            return old

        def cmpxchg(addr: int, size: int, expect: int, value: int, insn: int) -> int:
            buf, off = aligned(addr, size, insn, "atomic access")
            mask = (1 << (8 * size)) - 1
            old = int.from_bytes(buf[off:off + size], "little")
            if old == expect & mask:
                buf[off:off + size] = (value & mask).to_bytes(size, "little")
                self._log(addr, size, value & mask)
            return old

        out.update(LDA=lda, STA=sta, ATOMIC=atomic, CMPXCHG=cmpxchg)
        return out

    def _log(self, addr: int, size: int, value: int) -> None:
        if self.writes is not None:
            self.writes.append((addr, size, value))

    def _load(self, size: int, fmt: str, strict: bool) -> Callable[[int, int], int]:
        unpack = struct.Struct(fmt).unpack_from
        regions = self.regions
        bad = self.bad
        lo, hi = STACK0, STACK0 + MAX_FRAMES
        amask = size - 1
        if size == 1:
            def ld1(addr: int, insn: int) -> int:
                try:
                    return regions[addr >> 32][addr & 0xFFFFFFFF]  # type: ignore[index]
                except (IndexError, TypeError):
                    bad(addr, 1, insn, "load")
                    raise  # pragma: no cover - bad() raises
            return ld1

        def ld(addr: int, insn: int) -> int:
            if addr & amask and (strict or lo <= addr >> 32 < hi):
                bad(addr, size, insn, "load")
            try:
                value: int = unpack(regions[addr >> 32], addr & 0xFFFFFFFF)[0]  # type: ignore[arg-type]
                return value
            except (IndexError, TypeError, struct.error):
                bad(addr, size, insn, "load")
                raise  # pragma: no cover - bad() raises
        return ld

    def _store(self, size: int, fmt: str, strict: bool) -> Callable[[int, int, int], None]:
        pack = struct.Struct(fmt).pack_into
        regions = self.regions
        bad = self.bad
        lo, hi = STACK0, STACK0 + MAX_FRAMES
        amask = size - 1
        mem = self

        def st(addr: int, value: int, insn: int) -> None:
            if addr & amask and (strict or lo <= addr >> 32 < hi):
                bad(addr, size, insn, "store")
            try:
                pack(regions[addr >> 32], addr & 0xFFFFFFFF, value)  # type: ignore[arg-type]
            except (IndexError, TypeError, struct.error):
                bad(addr, size, insn, "store")
            if mem.writes is not None:
                mem.writes.append((addr, size, value))
        return st
