"""perf_event_open(2): building ``struct perf_event_attr``, opening, the ioctls.

Attrs for the events pyebpf opens (BPF output, uprobes, kprobes,
tracepoints), PMU discovery, :func:`perf_event_open` and the
``PERF_EVENT_IOC_*`` ioctls, and where the fields of the ring's first page
(``struct perf_event_mmap_page``) live.  Reading rings is a later layer
(:mod:`pyebpf.events`).  The conventions are those of :mod:`.core`.
"""
from __future__ import annotations

import errno as E
import functools
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .ffi import CData

from ..errors import NotSupportedError
from .constants import (PERF_ATTR_FLAG_WATERMARK, PERF_ATTR_FLAG_WRITE_BACKWARD,
                        PERF_ATTR_SIZE_VER1, PERF_COUNT_SW_BPF_OUTPUT, PERF_EVENT_IOC_DISABLE,
                        PERF_EVENT_IOC_ENABLE, PERF_EVENT_IOC_ID, PERF_EVENT_IOC_PAUSE_OUTPUT,
                        PERF_EVENT_IOC_RESET, PERF_EVENT_IOC_SET_BPF, PERF_EVENT_IOC_SET_OUTPUT,
                        PERF_FLAG_FD_CLOEXEC, PERF_SAMPLE_RAW, PERF_TYPE_SOFTWARE,
                        PERF_TYPE_TRACEPOINT)
from .core import RETRIES, Fd, addr, as_fd, kernel_error
from .ffi import NR_PERF_EVENT_OPEN, ffi, sys_ioctl, sys_perf_event_open

__all__ = ["PerfAttr", "bpf_output_attr", "open_bpf_output", "uprobe_attr", "kprobe_attr",
           "tracepoint_attr", "pmu_type", "pmu_format_field", "uprobe_pmu_type",
           "kprobe_pmu_type", "EVENT_SOURCE_DIR",
           "perf_event_open", "perf_event_enable", "perf_event_disable",
           "perf_event_reset", "perf_event_set_bpf", "perf_event_set_output",
           "perf_event_pause_output", "perf_event_id",
           "MMAP_DATA_HEAD", "MMAP_DATA_TAIL", "MMAP_DATA_OFFSET", "MMAP_DATA_SIZE"]

EVENT_SOURCE_DIR = "/sys/bus/event_source/devices"

# where the ring's first page (struct perf_event_mmap_page) keeps its positions
#: ``data_head``: where the kernel will write next (read it, then the data)
MMAP_DATA_HEAD: int = ffi.offsetof("struct perf_event_mmap_page", "data_head")
#: ``data_tail``: how far the reader has consumed (written by the reader)
MMAP_DATA_TAIL: int = ffi.offsetof("struct perf_event_mmap_page", "data_tail")
#: ``data_offset``: where the data area starts in the mapping (0 on old kernels)
MMAP_DATA_OFFSET: int = ffi.offsetof("struct perf_event_mmap_page", "data_offset")
#: ``data_size``: the data area's length (0 on old kernels)
MMAP_DATA_SIZE: int = ffi.offsetof("struct perf_event_mmap_page", "data_size")


class PerfAttr:
    """A ``struct perf_event_attr`` plus the buffers its pointers refer to.

    ``.ptr`` is the cffi pointer to pass to perf_event_open; keep this object
    alive until the call returns (:meth:`open` does).
    """

    __slots__ = ("ptr", "_keep")

    def __init__(self) -> None:
        self.ptr = ffi.new("struct perf_event_attr *")
        self.ptr.size = ffi.sizeof("struct perf_event_attr")
        self._keep: list[Any] = []

    def keep(self, obj: Any) -> Any:
        """Hold ``obj`` (a buffer a field points to) as long as this attr lives."""
        self._keep.append(obj)
        return obj

    def open(self, pid: int = -1, cpu: int = 0, group_fd: int = -1, flags: int = 0) -> Fd:
        """perf_event_open(2) with this attr (close-on-exec)."""
        return perf_event_open(self.ptr, pid, cpu, group_fd, flags)

    def __getattr__(self, name: str) -> Any:      # read fields: attr.config ...
        if name in PerfAttr.__slots__:
            raise AttributeError(name)
        return getattr(self.ptr, name)


def _attr(type_: int, config: int, **fields: int) -> PerfAttr:
    """A :class:`PerfAttr` of event ``type_``/``config`` sampling every event
    (``sample_period`` 1), with the other ``fields`` set."""
    a = PerfAttr()
    p = a.ptr
    p.type = type_
    p.config = config
    p.sample_period = 1
    for name, value in fields.items():
        setattr(p, name, value)
    return a


def _probe_attr(pmu: str, ptype: int, config: int, retprobe: bool, target: bytes,
                offset: int) -> PerfAttr:
    """A kprobe/uprobe PMU event: ``target`` (a function name or a path) and
    ``offset`` in ``config1``/``config2``, the PMU's retprobe bit if asked."""
    if retprobe:
        fmt = pmu_format_field(pmu, "retprobe") or ("config", 0, 0)
        config |= 1 << fmt[1]
    a = _attr(ptype, config, config2=offset, wakeup_events=1)
    a.ptr.config1 = addr(a.keep(ffi.new("char[]", target)))
    return a


def bpf_output_attr(*, wakeup_events: int = 1, wakeup_watermark: int | None = None,
                    write_backward: bool = False) -> PerfAttr:
    """The software BPF_OUTPUT event that ``bpf_perf_event_output`` writes to.

    Wake the reader every ``wakeup_events`` samples, or, with
    ``wakeup_watermark``, once that many bytes are in the ring (cheaper for
    the traced program at high rates).
    """
    flags = PERF_ATTR_FLAG_WRITE_BACKWARD if write_backward else 0
    if wakeup_watermark is not None:
        return _attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_BPF_OUTPUT, sample_type=PERF_SAMPLE_RAW,
                     wakeup_watermark=max(1, wakeup_watermark),
                     flags=flags | PERF_ATTR_FLAG_WATERMARK)
    return _attr(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_BPF_OUTPUT, sample_type=PERF_SAMPLE_RAW,
                 wakeup_events=max(1, wakeup_events), flags=flags)


def open_bpf_output(cpu: int, **kw: Any) -> Fd:
    """Open one BPF_OUTPUT event on ``cpu`` (all processes); see :func:`bpf_output_attr`."""
    return bpf_output_attr(**kw).open(pid=-1, cpu=cpu)


def tracepoint_attr(tracepoint_id: int) -> PerfAttr:
    """A tracepoint event (id from ``<tracefs>/events/<group>/<name>/id``)."""
    return _attr(PERF_TYPE_TRACEPOINT, tracepoint_id, sample_type=PERF_SAMPLE_RAW,
                 wakeup_events=1)


@functools.lru_cache(maxsize=None)
def pmu_type(pmu: str) -> int | None:
    """The dynamic type number of a PMU (``.../devices/<pmu>/type``), None if absent."""
    try:
        with open(os.path.join(EVENT_SOURCE_DIR, pmu, "type")) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


@functools.lru_cache(maxsize=None)
def pmu_format_field(pmu: str, name: str) -> tuple[str, int, int] | None:
    """Parse ``.../devices/<pmu>/format/<name>``: ``"config:32-63"`` -> ``("config", 32, 63)``."""
    try:
        with open(os.path.join(EVENT_SOURCE_DIR, pmu, "format", name)) as f:
            text = f.read().strip()
    except OSError:
        return None
    field, _, bits = text.partition(":")
    lo, _, hi = bits.partition("-")
    try:
        return field, int(lo), int(hi or lo)
    except ValueError:
        return None


def uprobe_pmu_type() -> int | None:
    """Type number of the ``uprobe`` PMU, or None if the kernel has none."""
    return pmu_type("uprobe")


def kprobe_pmu_type() -> int | None:
    """Type number of the ``kprobe`` PMU, or None (e.g. CONFIG_KPROBES off)."""
    return pmu_type("kprobe")


def kprobe_attr(function: str, offset: int = 0, *, retprobe: bool = False) -> PerfAttr:
    """A kprobe (or kretprobe) on the kprobe PMU at kernel ``function`` + ``offset``."""
    ptype = kprobe_pmu_type()
    if ptype is None:
        raise NotSupportedError(E.ENOENT, "perf_event_open", "no kprobe PMU in "
                                f"{EVENT_SOURCE_DIR}/kprobe",
                                "the kernel lacks CONFIG_KPROBES (or CONFIG_KPROBE_EVENTS)")
    return _probe_attr("kprobe", ptype, 0, retprobe, function.encode(), offset)


def uprobe_attr(path: str, offset: int, *, retprobe: bool = False,
                ref_ctr_offset: int = 0) -> PerfAttr:
    """A uprobe (or uretprobe) on the uprobe PMU at file ``offset`` of ``path``.

    ``ref_ctr_offset`` is the file offset of a USDT semaphore the kernel
    increments while the probe is attached.  Open with ``pid=-1, cpu=0`` for
    every process or ``pid=P, cpu=-1`` for one.
    """
    ptype = uprobe_pmu_type()
    if ptype is None:
        raise NotSupportedError(2, "perf_event_open", "no uprobe PMU in "
                                f"{EVENT_SOURCE_DIR}/uprobe",
                                "the kernel lacks CONFIG_UPROBE_EVENTS; use the tracefs "
                                "uprobe_events interface or a newer kernel")
    config = 0
    if ref_ctr_offset:
        ref_fmt = pmu_format_field("uprobe", "ref_ctr_offset")
        if ref_fmt is None:
            raise NotSupportedError(95, "perf_event_open", "the uprobe PMU has no "
                                    "ref_ctr_offset format", "needs Linux 4.20+")
        config |= ref_ctr_offset << ref_fmt[1]
    a = _probe_attr("uprobe", ptype, config, retprobe, os.fsencode(path), offset)
    a.ptr.size = max(PERF_ATTR_SIZE_VER1, a.ptr.size)
    return a


# -------------------------------------------------------------- perf events
def perf_event_open(attr: CData, pid: int = -1, cpu: int = 0, group_fd: int = -1,
                    flags: int = PERF_FLAG_FD_CLOEXEC) -> Fd:
    """perf_event_open(2).  ``attr`` is a ``struct perf_event_attr *`` (see :mod:`.perf`).

    PERF_FLAG_FD_CLOEXEC is always added.  ``attr.size`` defaults to the
    size of the declared struct when left 0.  A :class:`pyebpf.kernel.perf.PerfAttr`
    is accepted too.
    """
    attr = getattr(attr, "ptr", attr)
    if attr.size == 0:
        attr.size = ffi.sizeof("struct perf_event_attr")
    tries = 0
    while True:
        ret = sys_perf_event_open(NR_PERF_EVENT_OPEN, attr, pid, cpu, group_fd,
                                  flags | PERF_FLAG_FD_CLOEXEC)
        if ret >= 0:
            return Fd(ret)
        err = ffi.errno
        if err in (E.EINTR, E.EAGAIN) and tries < RETRIES:
            tries += 1
            continue
        break
    raise kernel_error("perf_event_open", err,
                       f"type {attr.type}, config {attr.config:#x}, pid {pid}, cpu {cpu}",
                       size=attr.size, pid=pid)


def _ioctl(fd: "int | Fd", request: int, arg: int, name: str) -> int:
    fdn = as_fd(fd)
    ret: int = sys_ioctl(fdn, request, arg)
    if ret < 0:
        raise kernel_error(name, ffi.errno, f"fd {fdn}")
    return ret


def perf_event_enable(fd: "int | Fd") -> None:
    """PERF_EVENT_IOC_ENABLE."""
    _ioctl(fd, PERF_EVENT_IOC_ENABLE, 0, "PERF_EVENT_IOC_ENABLE")


def perf_event_disable(fd: "int | Fd") -> None:
    """PERF_EVENT_IOC_DISABLE."""
    _ioctl(fd, PERF_EVENT_IOC_DISABLE, 0, "PERF_EVENT_IOC_DISABLE")


def perf_event_reset(fd: "int | Fd") -> None:
    """PERF_EVENT_IOC_RESET."""
    _ioctl(fd, PERF_EVENT_IOC_RESET, 0, "PERF_EVENT_IOC_RESET")


def perf_event_set_bpf(fd: "int | Fd", prog_fd: "int | Fd") -> None:
    """PERF_EVENT_IOC_SET_BPF: the legacy (pre-link) way to attach a program."""
    _ioctl(fd, PERF_EVENT_IOC_SET_BPF, as_fd(prog_fd), "PERF_EVENT_IOC_SET_BPF")


def perf_event_set_output(fd: "int | Fd", target_fd: "int | Fd | None") -> None:
    """PERF_EVENT_IOC_SET_OUTPUT: send ``fd``'s records to ``target_fd``'s ring (None: stop)."""
    arg = -1 if target_fd is None else as_fd(target_fd)
    _ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, arg & 0xFFFFFFFFFFFFFFFF, "PERF_EVENT_IOC_SET_OUTPUT")


def perf_event_pause_output(fd: "int | Fd", pause: bool = True) -> None:
    """PERF_EVENT_IOC_PAUSE_OUTPUT: stop (or resume) writing to the ring buffer."""
    _ioctl(fd, PERF_EVENT_IOC_PAUSE_OUTPUT, 1 if pause else 0, "PERF_EVENT_IOC_PAUSE_OUTPUT")


def perf_event_id(fd: "int | Fd") -> int:
    """PERF_EVENT_IOC_ID: the event's unique id (as in sample ids)."""
    out = ffi.new("uint64_t *")
    _ioctl(fd, PERF_EVENT_IOC_ID, addr(out), "PERF_EVENT_IOC_ID")
    event_id: int = out[0]
    return event_id

