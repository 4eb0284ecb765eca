"""Idioms that cannot be written wrong: multi-instruction patterns the
verifier accepts by construction (a map lookup with its NULL check, a
``probe_read_user`` into a stack buffer of the right size, an atomic increment
of a map value that creates the entry when missing, a bounded loop).

Each idiom is a method of :class:`~pyebpf.program.Program`; each returns the
program (or the stack offset it allocated, where noted).
"""
from __future__ import annotations

import itertools

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from typing_extensions import Self

from ..errors import ProgramError
from .dsl import R0, R1, R2, R3, R4, R10, InstructionBuilder, Operand, Reg

_counter = itertools.count()


class Idioms(InstructionBuilder):
    """Part of :class:`Program`: verifier-friendly multi-instruction idioms."""

    def fresh_label(self, prefix: str = "L") -> str:
        """A label name not used anywhere else (``.prefix_N``)."""
        return f".{prefix}_{next(_counter)}"

    def stack_store(self, value: Operand, size: int = 8, offset: int | None = None) -> int:
        """Store ``value`` (a register or an int) in a stack slot of ``size``
        bytes (allocated unless ``offset`` is given); return the slot's offset."""
        if offset is None:
            offset = self.stack.alloc(size, min(size, 8))
        self.store(R10, offset, value, size)
        return offset

    def stack_zero(self, size: int, offset: int | None = None) -> int:
        """Zero ``size`` bytes of stack (allocated unless given), 8 bytes at a time."""
        if offset is None:
            offset = self.stack.alloc(size)
        pos = 0
        while pos < size:
            step = 8 if size - pos >= 8 else 4 if size - pos >= 4 else 2 if size - pos >= 2 else 1
            self.store(R10, offset + pos, 0, step)
            pos += step
        return offset

    def stack_pointer(self, dst: Reg, offset: int) -> Self:
        """``dst = r10 + offset``."""
        self.mov(dst, R10)
        return self.add(dst, offset)

    def map_lookup(self, map_: Any, key_offset: int, on_null: str, dst: Reg = R0) -> Self:
        """Look the key at ``r10 + key_offset`` up in ``map_``; jump to
        ``on_null`` when absent; otherwise ``dst`` holds the value pointer
        (already checked for NULL, so it can be dereferenced)."""
        self.ld_map(R1, map_)
        self.stack_pointer(R2, key_offset)
        self.call("map_lookup_elem")
        self.jeq(R0, 0, on_null)
        if dst.index != 0:
            self.mov(dst, R0)
        return self

    def map_update(self, map_: Any, key_offset: int, value_offset: int, flags: int = 0) -> Self:
        """``bpf_map_update_elem(map, r10+key_offset, r10+value_offset, flags)``; r0 = result."""
        self.ld_map(R1, map_)
        self.stack_pointer(R2, key_offset)
        self.stack_pointer(R3, value_offset)
        self.mov(R4, flags)
        return self.call("map_update_elem")

    def map_increment(self, map_: Any, key_offset: int, amount: Operand = 1, value_size: int = 8) -> Self:
        """Atomically add ``amount`` to the value under the key at
        ``r10 + key_offset``, creating the entry (with ``amount``) when absent.

        Clobbers r0-r5.  ``amount`` may be any register: it is stored on the
        stack first, so the helper calls cannot clobber it.
        """
        if value_size not in (4, 8):
            raise ProgramError("map_increment works on 4- or 8-byte values")
        amount_off = self.stack.alloc(8)
        if isinstance(amount, Reg):
            self.store(R10, amount_off, amount.r, 8)
        else:
            self.store(R10, amount_off, amount, 8)
        missing = self.fresh_label("inc_missing")
        done = self.fresh_label("inc_done")
        self.map_lookup(map_, key_offset, missing)
        self.load(R1, R10, amount_off, 8)
        self.atomic_add(R0, 0, R1, size=value_size)
        self.ja(done)
        self.label(missing)
        # BPF_NOEXIST: if another CPU created it meanwhile, retry the add
        self.map_update(map_, key_offset, amount_off, flags=1)
        self.jeq(R0, 0, done)
        self.map_lookup(map_, key_offset, done)
        self.load(R1, R10, amount_off, 8)
        self.atomic_add(R0, 0, R1, size=value_size)
        self.label(done)
        return self

    def probe_read_user(self, src: Reg, size: int, offset: int | None = None,
                        string: bool = False) -> int:
        """Copy ``size`` bytes of user memory at ``src`` into a stack buffer
        (allocated unless ``offset`` is given) with ``bpf_probe_read_user``
        (``string``: ``_str``, which stops at the NUL); return the buffer's
        offset.  r0 holds the helper's result."""
        if size <= 0 or size > 512:
            raise ProgramError(f"probe_read_user size must be 1..512 bytes, not {size}")
        if offset is None:
            offset = self.stack.alloc(size)
        if src.index in (1, 2):
            self.mov(R3, src.r)
            src = R3
        self.stack_pointer(R1, offset)
        self.mov(R2, size)
        if src.index != 3:
            self.mov(R3, src.r)
        self.call("probe_read_user_str" if string else "probe_read_user")
        return offset

    def bounded_loop(self, counter: Reg, count: int) -> "_BoundedLoop":
        """``for counter in range(count): <body>`` as a loop the verifier can
        bound, used as ``with p.bounded_loop(R8, 16) as brk:``; ``brk`` is the
        label of the loop's end (jump there to break)."""
        if count < 0:
            raise ProgramError("loop count must be >= 0")
        return _BoundedLoop(self, counter, count)


class _BoundedLoop:
    """The ``with`` block of :meth:`Idioms.bounded_loop`: the loop's head on
    entry, the increment and the jump back on a normal exit."""

    def __init__(self, p: Idioms, counter: Reg, count: int) -> None:
        self.p, self.counter, self.count = p, counter, count

    def __enter__(self) -> str:
        p = self.p
        self.head = p.fresh_label("loop")
        self.end = p.fresh_label("loop_end")
        p.mov(self.counter, 0)
        p.label(self.head)
        p.jge(self.counter, self.count, self.end)
        return self.end

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if exc_type is None:
            self.p.add(self.counter, 1)
            self.p.ja(self.head)
            self.p.label(self.end)
