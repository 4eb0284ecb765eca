"""The helpers the VM emulates, by id.

Each is ``fn(vm, insn, r1, r2, r3, r4, r5) -> r0`` (``insn`` is the calling
instruction's slot, for errors); a negative result is an errno, as the
kernel's.  Add your own with ``Vm(..., helpers={id: fn})``.

=====================================  ==============================================
map_lookup_elem / update / delete      the :class:`~pyebpf.vm.maps.VmMap` store
tail_call                              a program of a program array (``VmMap.programs``)
ringbuf_output / reserve / submit /    records in the map's ring (``RingBufferReader(map)``
discard                                reads them; ``VmMap.records`` shows them)
perf_event_output                      the perf ring of the CPU (``PerfBuffer(map)``), or
                                       ``(cpu, bytes)`` in ``VmMap.records`` without a reader
ktime_get_ns                           ``vm.ktime()`` (default: the monotonic clock)
get_prandom_u32                        ``vm.random`` (a ``random.Random``; seeded 0)
get_smp_processor_id                   ``vm.cpu``
get_current_pid_tgid / uid_gid / comm  ``vm.pid``, ``vm.tgid``, ``vm.uid``, ``vm.gid``, ``vm.comm``
trace_printk                           the formatted line appended to ``vm.printk``
probe_read{,_user,_kernel}{,_str}      VM memory, or ``vm.user_memory`` (address -> bytes)
=====================================  ==============================================
"""
from __future__ import annotations

from .machine import MAX_TAIL_CALLS
from .maps import VmMap

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, NoReturn

    from .machine import Vm

EFAULT, EINVAL, E2BIG = 14, 22, 7
_PERF_EVENT_ARRAY, _RINGBUF = 4, 27          # MapType numbers


def unknown(vm: Vm, n: int, insn: int) -> NoReturn:
    """Stop: helper ``n`` is not emulated."""
    from ..isa.helpers import HELPERS
    name = HELPERS[n].c_name if 0 <= n < len(HELPERS) else f"#{n} (no such helper)"
    known = ", ".join(HELPERS[i].name if i < len(HELPERS) else str(i) for i in sorted(vm.helpers))
    vm._fault(insn, f"helper {name} (id {n}) is not emulated by the VM; emulated: {known}; "
              "add one with Vm(..., helpers={id: fn})")


def _key(vm: Vm, m: VmMap, addr: int, insn: int) -> bytes:
    return vm.memory.read(addr, m.key_size, insn, f"the key of map {m.name!r}")


def map_lookup_elem(vm: Vm, insn: int, r1: int, r2: int, *_: int) -> int:
    """bpf_map_lookup_elem(map, key): a pointer to the live value, or 0."""
    m = vm.map_at(r1, insn)
    buf = m.lookup(_key(vm, m, r2, insn), vm.cpu)
    return 0 if buf is None else vm.pointer(buf, f"a value of map {m.name}")


def map_update_elem(vm: Vm, insn: int, r1: int, r2: int, r3: int, r4: int, *_: int) -> int:
    """bpf_map_update_elem(map, key, value, flags): 0 or a negative errno."""
    m = vm.map_at(r1, insn)
    key = _key(vm, m, r2, insn)
    value = vm.memory.read(r3, m.value_size, insn, f"the value for map {m.name!r}")
    return m.update(key, value, r4, vm.cpu if m.ncpus > 1 else None)


def map_delete_elem(vm: Vm, insn: int, r1: int, r2: int, *_: int) -> int:
    """bpf_map_delete_elem(map, key): 0 or -ENOENT."""
    m = vm.map_at(r1, insn)
    return m.delete(_key(vm, m, r2, insn))


def tail_call(vm: Vm, insn: int, r1: int, r2: int, r3: int, *_: int) -> int:
    """bpf_tail_call(ctx, prog_array, index): jump to the program there; go on if none."""
    m = vm.map_at(r2, insn)
    program = m.programs.get(r3 & 0xFFFFFFFF)
    if program is None or vm._tail_calls >= MAX_TAIL_CALLS:
        return vm.R[0]                   # a failed tail call goes on, r0 untouched
    vm.tail_call(program, insn)
    return 0  # pragma: no cover - tail_call raises


def _event_map(vm: Vm, addr: int, insn: int, kind: int, helper: str) -> VmMap:
    m = vm.map_at(addr, insn)
    if m.map_type != kind:
        from ..kernel.constants import MapType, enum_name
        vm._fault(insn, f"{helper} needs a {enum_name(MapType, kind)} map; "
                  f"{m.name!r} is a {enum_name(MapType, m.map_type)}")
    return m


def ringbuf_output(vm: Vm, insn: int, r1: int, r2: int, r3: int, r4: int, *_: int) -> int:
    """bpf_ringbuf_output(map, data, size, flags): a copy of the data becomes a
    record of the ring; 0, -EAGAIN (full) or -EINVAL (flags)."""
    m = _event_map(vm, r1, insn, _RINGBUF, "ringbuf_output")
    data = vm.memory.read(r2, r3, insn, "ringbuf_output's data")
    return m.ring.output(data, r4)  # type: ignore[union-attr]


def ringbuf_reserve(vm: Vm, insn: int, r1: int, r2: int, r3: int, *_: int) -> int:
    """bpf_ringbuf_reserve(map, size, flags): a new writable record (room in the
    ring is taken now, the record marked busy), or 0."""
    m = _event_map(vm, r1, insn, _RINGBUF, "ringbuf_reserve")
    if r3:
        return 0
    pos = m.ring.reserve(r2)  # type: ignore[union-attr]
    if pos is None:
        return 0
    buf = bytearray(r2)
    addr = vm.memory.add(buf, f"a reservation in ring buffer {m.name}")
    vm._reserved[addr] = (m, buf, pos)
    return addr


def _release(vm: Vm, addr: int, insn: int, flags: int, discard: bool) -> int:
    got = vm._reserved.pop(addr, None)
    if got is None:
        vm._fault(insn, f"0x{addr:x} is not a live ring buffer reservation "
                  "(submitted twice, or not from ringbuf_reserve)")
    m, buf, pos = got
    vm.memory.regions[addr >> 32] = None       # the record is no longer the program's
    m.ring.commit(pos, buf, discard, flags)  # type: ignore[union-attr]
    return 0


def ringbuf_submit(vm: Vm, insn: int, r1: int, r2: int, *_: int) -> int:
    """bpf_ringbuf_submit(record, flags): the record is committed for the reader."""
    return _release(vm, r1, insn, r2, False)


def ringbuf_discard(vm: Vm, insn: int, r1: int, r2: int, *_: int) -> int:
    """bpf_ringbuf_discard(record, flags): the record is dropped (the reader skips it)."""
    return _release(vm, r1, insn, r2, True)


def perf_event_output(vm: Vm, insn: int, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """bpf_perf_event_output(ctx, map, flags, data, size): the data goes to the
    perf ring of the CPU (:meth:`VmMap.perf_output`)."""
    m = _event_map(vm, r2, insn, _PERF_EVENT_ARRAY, "perf_event_output")
    return m.perf_output(r3, vm.memory.read(r4, r5, insn, "perf_event_output's data"), vm.cpu)


def ktime_get_ns(vm: Vm, insn: int, *_: int) -> int:
    """bpf_ktime_get_ns(): ``vm.ktime()``, or the monotonic clock."""
    if vm.ktime is None:
        import time
        return time.monotonic_ns()
    return int(vm.ktime())


def get_prandom_u32(vm: Vm, insn: int, *_: int) -> int:
    """bpf_get_prandom_u32(): 32 random bits from ``vm.random``."""
    if vm.random is None:
        import random
        vm.random = random.Random(0)
    return int(vm.random.getrandbits(32))


def get_smp_processor_id(vm: Vm, insn: int, *_: int) -> int:
    """bpf_get_smp_processor_id(): ``vm.cpu``."""
    return vm.cpu


def get_current_pid_tgid(vm: Vm, insn: int, *_: int) -> int:
    """bpf_get_current_pid_tgid(): ``vm.tgid << 32 | vm.pid``."""
    return (vm.tgid << 32) | (vm.pid & 0xFFFFFFFF)


def get_current_uid_gid(vm: Vm, insn: int, *_: int) -> int:
    """bpf_get_current_uid_gid(): ``vm.gid << 32 | vm.uid``."""
    return (vm.gid << 32) | (vm.uid & 0xFFFFFFFF)


def get_current_comm(vm: Vm, insn: int, r1: int, r2: int, *_: int) -> int:
    """bpf_get_current_comm(buf, size): ``vm.comm``, NUL-terminated and padded."""
    if not r2:
        return -EINVAL
    _writable(vm, r1, r2, insn, "get_current_comm's buffer")
    comm = vm.comm[:min(r2, 16) - 1]
    vm.memory.write(r1, comm + bytes(r2 - len(comm)), insn, "get_current_comm's buffer")
    return 0


def _source(vm: Vm, addr: int, size: int) -> bytes | None:
    """``size`` bytes at ``addr`` from VM memory or ``vm.user_memory``; None if unreadable."""
    got = vm.memory.region(addr, size)
    if got is not None:
        buf, off = got
        return bytes(buf[off:off + size])
    for base, data in vm.user_memory.items():
        if base <= addr and addr + size <= base + len(data):
            return bytes(data[addr - base:addr - base + size])
    return None


def _writable(vm: Vm, addr: int, size: int, insn: int, what: str) -> None:
    """Stop unless ``size`` bytes at ``addr`` are VM memory (before allocating anything)."""
    if vm.memory.region(addr, size) is None:
        vm._fault(insn, f"{what} of {size} bytes at {vm.memory.where(addr)} is out of bounds")


def _probe_read(vm: Vm, insn: int, r1: int, r2: int, r3: int, *_: int) -> int:
    _writable(vm, r1, r2, insn, "probe_read's buffer")
    data = _source(vm, r3, r2)
    if data is None:
        vm.memory.write(r1, bytes(r2), insn, "probe_read's buffer")
        return -EFAULT
    vm.memory.write(r1, data, insn, "probe_read's buffer")
    return 0


def _probe_read_str(vm: Vm, insn: int, r1: int, r2: int, r3: int, *_: int) -> int:
    if not r2:
        return 0
    _writable(vm, r1, r2, insn, "probe_read_str's buffer")
    out = bytearray()
    for i in range(r2 - 1):
        b = _source(vm, r3 + i, 1)
        if b is None:
            if not out and i == 0:
                vm.memory.write(r1, bytes(r2), insn, "probe_read_str's buffer")
                return -EFAULT
            break
        if b == b"\0":
            break
        out += b
    out.append(0)
    vm.memory.write(r1, bytes(out), insn, "probe_read_str's buffer")
    return len(out)


_PRINTF_SPECS = "diuxXpsc"


def _format(vm: Vm, fmt: bytes, args: tuple[int, ...], insn: int) -> str:
    """``fmt`` with the kernel's printf subset (``%d %i %u %x %X %p %s %c``
    with ``l``/``ll`` lengths and ``%%``), taking arguments from ``args``."""
    out = []
    text = fmt.split(b"\0", 1)[0].decode("utf-8", "replace")
    i = n = 0
    while i < len(text):
        ch = text[i]
        if ch != "%":
            out.append(ch)
            i += 1
            continue
        j = i + 1
        while j < len(text) and text[j] in "-0123456789":
            j += 1
        flags = text[i + 1:j]
        longs = 0
        while j < len(text) and text[j] in "lh":
            longs += text[j] == "l"
            j += 1
        if j >= len(text):
            break
        spec = text[j]
        i = j + 1
        if spec == "%":
            out.append("%")
            continue
        if spec not in _PRINTF_SPECS or n >= len(args):
            vm._fault(insn, f"trace_printk: format {text!r} has an unsupported or extra "
                      f"conversion %{flags}{spec}")
        value = args[n]
        n += 1
        bits = 64 if longs else 32
        value &= (1 << bits) - 1
        if spec in "di":
            value -= (value >> (bits - 1)) << bits
            out.append(f"%{flags}d" % value)
        elif spec == "u":
            out.append(f"%{flags}d" % value)
        elif spec in "xX":
            out.append(f"%{flags}{spec}" % value)
        elif spec == "p":
            out.append(f"0x{args[n - 1]:x}")
        elif spec == "c":
            out.append(chr(value & 0xFF))
        else:                                            # %s: a string in VM memory
            chars = bytearray()
            for k in range(4096):
                b = _source(vm, args[n - 1] + k, 1)
                if b is None or b == b"\0":
                    break
                chars += b
            out.append(chars.decode("utf-8", "replace"))
    return "".join(out)


def trace_printk(vm: Vm, insn: int, r1: int, r2: int, r3: int, r4: int, r5: int) -> int:
    """bpf_trace_printk(fmt, size, a, b, c): the formatted line joins ``vm.printk``."""
    fmt = vm.memory.read(r1, r2, insn, "trace_printk's format")
    line = _format(vm, fmt, (r3, r4, r5), insn)
    vm.printk.append(line)
    return len(line) + 1


EMULATED: dict[int, Callable[..., int]] = {
    1: map_lookup_elem, 2: map_update_elem, 3: map_delete_elem,
    4: _probe_read, 5: ktime_get_ns, 6: trace_printk, 7: get_prandom_u32,
    8: get_smp_processor_id, 12: tail_call, 14: get_current_pid_tgid,
    15: get_current_uid_gid, 16: get_current_comm, 25: perf_event_output,
    45: _probe_read_str, 112: _probe_read, 113: _probe_read, 114: _probe_read_str,
    115: _probe_read_str, 130: ringbuf_output, 131: ringbuf_reserve, 132: ringbuf_submit,
    133: ringbuf_discard,
}
