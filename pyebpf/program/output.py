"""Idioms that send events to user space.

Each is a method of :class:`~pyebpf.program.Program`:

* :meth:`Output.perf_event_output` -- ``bpf_perf_event_output(ctx, map,
  BPF_F_CURRENT_CPU, r10 + offset, size)`` from a stack buffer, read in user
  space by :class:`pyebpf.events.PerfBuffer`;
* :meth:`Output.ringbuf_output` -- ``bpf_ringbuf_output(map, r10 + offset,
  size, flags)``, optionally counting failed outputs in a per-CPU array map
  (the kernel does not tell user space about ring-buffer drops; this counter
  does, and :class:`pyebpf.events.RingBufferReader` reports it);
* :meth:`Output.output_record` -- store registers/constants as a packed C
  struct on the stack, then output it with one of the two above;
* :meth:`Output.count_drop` -- atomically add 1 to one slot of a per-CPU
  array map of ``u64`` (the drop counter).

:func:`record_layout` gives the offsets, size and :mod:`struct` format of
such a record, so the reader can decode exactly what the program sent.
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Sequence

    from typing_extensions import Self

from ..errors import ProgramError
from .dsl import R0, R1, R2, R3, R4, R5, R6, R10, W3, Operand, Reg
from .idioms import Idioms
from .._record import Record, record

__all__ = ["Output", "RecordLayout", "record_layout", "BPF_F_CURRENT_CPU"]

#: ``flags`` value of bpf_perf_event_output meaning "the ring of this CPU".
#: (Deliberately the same number as ``pyebpf.kernel.constants.BPF_F_CURRENT_CPU``,
#: declared here so that importing the DSL loads no kernel tables; a test checks
#: the two agree.  Map types are looked up in those tables when a program is
#: built, by ``_map_type``.)
BPF_F_CURRENT_CPU = 0xFFFFFFFF


@record
class RecordLayout(Record):
    """Where each field of an :meth:`Output.output_record` record lives.

    ``offsets[i]`` is field *i*'s byte offset, ``size`` the record size (C
    rules: every field aligned to its size, the total to the largest), and
    ``format`` a little-endian :mod:`struct` format with explicit padding
    whose ``calcsize`` equals ``size`` (hand it to the reader's ``decode=``).
    """

    offsets: tuple[int, ...]
    sizes: tuple[int, ...]
    size: int
    format: str


def _field_size(size: Any) -> int:
    if isinstance(size, str):
        from ..codecs import INT_TYPES         # (loaded when used: not on the DSL's start-up path)
        t = INT_TYPES.get(size.lower())
        size = t[0] if t else size
    if size not in (1, 2, 4, 8):
        raise ProgramError(f"a record field is 1, 2, 4 or 8 bytes (or u8..u64), not {size!r}")
    return int(size)


def record_layout(sizes: Sequence[Any]) -> RecordLayout:
    """The C-struct layout of fields of the given sizes (1/2/4/8 or ``"u32"``...)."""
    if not sizes:
        raise ProgramError("a record needs at least one field")
    from ..codecs import INT_TYPES, UNSIGNED_BY_SIZE, layout_format
    widths = [_field_size(s) for s in sizes]
    fmt, offs, total = layout_format([(INT_TYPES[UNSIGNED_BY_SIZE[w]][2], w, w) for w in widths])
    return RecordLayout(tuple(offs), tuple(widths), total, fmt)


def _map_type(map_: Any) -> str | None:
    """The name of ``map_``'s type (``"RINGBUF"``); None when it is no map object."""
    t = getattr(map_, "map_type", None)
    if t is None:
        return None
    from ..kernel.constants import MapType, enum_name  # loaded already with any map object
    return enum_name(MapType, int(t))


#: output helper -> (the map type it needs, the other helper, that one's map class)
_OUTPUT_MAPS = {"perf_event_output": ("PERF_EVENT_ARRAY", "ringbuf_output", "RingBuf"),
                "ringbuf_output": ("RINGBUF", "perf_event_output", "PerfEventArray")}


class Output(Idioms):
    """Part of :class:`Program`: idioms that send events to user space."""

    def perf_event_output(self, map_: Any, offset: int, size: int, *, ctx: Reg = R6,
                          cpu: int | None = None) -> Self:
        """``r0 = bpf_perf_event_output(ctx, map_, BPF_F_CURRENT_CPU, r10 + offset, size)``.

        Sends the ``size`` bytes of stack at ``r10 + offset`` to the perf ring
        of the current CPU (``cpu``: of that slot of ``map_`` instead).
        ``ctx`` is the register holding the program's context pointer: r1 at
        entry, which helper calls clobber, so programs usually save it with
        ``p.mov(R6, R1)`` first (the default here).  r0 is 0 or a negative
        errno (-ENOSPC when the ring is full: the kernel then also reports
        the loss to the reader; -ENOENT when the CPU has no ring).

        The flags are loaded with a 32-bit ``mov w3, -1`` (zero-extended to
        0xffffffff); a 64-bit ``mov r3, -1`` would sign-extend to all ones
        and the helper would refuse it.  Clobbers r1-r5.
        """
        if not isinstance(ctx, Reg) or ctx.is32 or ctx.index == 10:
            raise ProgramError(f"ctx must be the 64-bit register holding the context pointer, "
                               f"not {ctx!r}")
        self._check_out("perf_event_output", map_, offset, size)
        if ctx.index != 1:                   # set r1 first: ctx may live in r2..r5
            self.mov(R1, ctx)
        self.ld_map(R2, map_)
        if cpu is None:
            self.mov(W3, -1)                 # BPF_F_CURRENT_CPU, zero-extended
        else:
            if not 0 <= cpu < 0xFFFFFFFF:
                raise ProgramError(f"cpu index {cpu} is out of range")
            self.mov(R3, cpu)
        self.stack_pointer(R4, offset)
        self.mov(R5, size)
        return self.call("perf_event_output")

    def ringbuf_output(self, map_: Any, offset: int, size: int, *, flags: int = 0,
                       drops: Any = None, drop_slot: int = 0) -> Self:
        """``r0 = bpf_ringbuf_output(map_, r10 + offset, size, flags)``.

        ``flags``: 0 (the kernel wakes the reader when it has caught up),
        ``BPF_RB_NO_WAKEUP`` 1 or ``BPF_RB_FORCE_WAKEUP`` 2.

        The kernel does not report ring-buffer drops to user space, only to
        the program (a negative r0, -EAGAIN when full).  With ``drops`` (a
        :class:`~pyebpf.maps.PerCpuArrayMap` of ``u64``), a failed output
        atomically adds 1 to ``drops[drop_slot]`` of the current CPU, and
        :class:`pyebpf.events.RingBufferReader` ``(..., drops=that_map)``
        reports the sum.  Clobbers r1-r5; with ``drops`` r0 is clobbered
        too (it is 0 after a successful output either way).
        """
        self._check_out("ringbuf_output", map_, offset, size)
        if not 0 <= flags <= 0x7FFFFFFF:
            raise ProgramError(f"ringbuf_output flags {flags:#x} are invalid")
        self.ld_map(R1, map_)
        self.stack_pointer(R2, offset)
        self.mov(R3, size)
        self.mov(R4, flags)
        self.call("ringbuf_output")
        if drops is not None:
            done = self.fresh_label("rb_out_ok")
            self.jeq(R0, 0, done)
            self.count_drop(drops, drop_slot)
            self.label(done)
        return self

    def count_drop(self, drops: Any, slot: int = 0) -> Self:
        """Atomically add 1 to ``drops[slot]`` (this CPU's copy) of a per-CPU
        array map of ``u64``.  Clobbers r0-r5 and 4 bytes of stack."""
        t = _map_type(drops)
        if t is not None and t != "PERCPU_ARRAY":
            raise ProgramError(f"the drop counter {getattr(drops, 'name', drops)!r} must be a "
                               f"PerCpuArrayMap (of u64), not map type {t}")
        vs = getattr(drops, "value_size", None)
        if vs is not None and vs != 8:
            raise ProgramError(f"the drop counter's values must be u64 (8 bytes), not {vs} bytes")
        n = getattr(drops, "max_entries", None)
        if not isinstance(slot, int) or slot < 0 or (n is not None and slot >= n):
            raise ProgramError(f"drop slot {slot!r} is out of range for the counter map"
                               + (f" (max_entries {n})" if n is not None else ""))
        skip = self.fresh_label("drop_nomap")
        key = self.stack.alloc(4, 4)
        self.store(R10, key, slot, 4)
        self.map_lookup(drops, key, skip)
        self.mov(R1, 1)
        self.atomic_add(R0, 0, R1, size=8)
        self.label(skip)
        return self

    def output_record(self, map_: Any, fields: Sequence[tuple[Operand, Any]], *,
                      ctx: Reg = R6, kind: str | None = None, flags: int = 0,
                      drops: Any = None, drop_slot: int = 0) -> int:
        """Build a record from registers/constants on the stack and output it.

        ``fields`` is a list of ``(value, size)``: ``value`` a register or an
        int, ``size`` 1/2/4/8 or ``"u32"``-style.  The record is laid out
        like a C struct (see :func:`record_layout`, whose ``format`` decodes
        it); padding is zeroed.  ``kind`` is ``"perf"`` or ``"ringbuf"``,
        taken from the map object when omitted.  ``ctx`` (perf) and
        ``flags``/``drops``/``drop_slot`` (ringbuf) are passed on to
        :meth:`perf_event_output` / :meth:`ringbuf_output`.  Returns the
        stack offset of the record.  Clobbers r0-r5.
        """
        layout = record_layout([s for _, s in fields])
        if kind is None:
            t = _map_type(map_)
            kind = {"PERF_EVENT_ARRAY": "perf", "RINGBUF": "ringbuf"}.get(t or "")
            if kind is None:
                raise ProgramError("output_record cannot tell the map kind: pass a "
                                   "PerfEventArray or RingBuf object, or kind='perf'/'ringbuf'")
        if kind not in ("perf", "ringbuf"):
            raise ProgramError(f"kind must be 'perf' or 'ringbuf', not {kind!r}")
        base = self.stack.alloc((layout.size + 7) // 8 * 8, 8)
        covered = bytearray(layout.size)
        for (value, _), off, w in zip(fields, layout.offsets, layout.sizes):
            if isinstance(value, Reg):
                if value.index == 10:
                    raise ProgramError("r10 (the frame pointer) cannot be a record field")
                self.store(R10, base + off, value.r, w)
            elif isinstance(value, int) and not isinstance(value, bool):
                if not -(1 << 31) <= value < (1 << 32):
                    raise ProgramError(f"constant field {value} does not fit in 32 bits; "
                                       "load it into a register with lddw first")
                if w == 8 and value >= (1 << 31):
                    raise ProgramError(f"a u64 constant field {value:#x} would be sign-extended "
                                       "from 32 bits; load it into a register with lddw first")
                if value >= (1 << 31):
                    value -= 1 << 32       # the same 32 bits, as the signed imm the ISA holds
                self.store(R10, base + off, value, w)
            else:
                raise ProgramError(f"a record field is a register or an int, not {value!r}")
            covered[off:off + w] = b"\1" * w
        self._zero_holes(base, covered)
        if kind == "perf":
            self.perf_event_output(map_, base, layout.size, ctx=ctx)
        else:
            self.ringbuf_output(map_, base, layout.size, flags=flags, drops=drops,
                                drop_slot=drop_slot)
        return base

    # ------------------------------------------------------------ helpers
    def _zero_holes(self, base: int, covered: bytearray) -> None:
        pos = 0
        n = len(covered)
        while pos < n:
            if covered[pos]:
                pos += 1
                continue
            end = pos
            while end < n and not covered[end]:
                end += 1
            while pos < end:     # largest aligned store that fits the hole
                for w in (8, 4, 2, 1):
                    if pos % w == 0 and pos + w <= end:
                        self.store(R10, base + pos, 0, w)
                        pos += w
                        break

    @staticmethod
    def _check_out(helper: str, map_: Any, offset: int, size: int) -> None:
        """Refuse an event that is not on the stack, or a map of the wrong type
        for ``helper`` (the other output helper's, which the message suggests)."""
        if not isinstance(size, int) or not 0 < size <= 512:
            raise ProgramError(f"an event from the stack is 1..512 bytes, not {size!r}")
        if not isinstance(offset, int) or not -512 <= offset < 0 or offset + size > 0:
            raise ProgramError(f"the event buffer r10{offset:+d} (+{size} bytes) is not "
                               "inside the 512-byte stack frame")
        wanted, other, other_map = _OUTPUT_MAPS[helper]
        t = _map_type(map_)
        if t is not None and t != wanted:
            raise ProgramError(f"{helper} needs a {wanted} map, not "
                               f"{getattr(map_, 'name', map_)!r} (type {t}); use "
                               f"{other} for a {other_map}")
