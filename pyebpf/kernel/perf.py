"""Building ``struct perf_event_attr`` for the events pyebpf opens.

Only attr construction and PMU discovery live here; opening is
:func:`pyebpf.kernel.syscall.perf_event_open`, reading rings is a later layer.
"""
from __future__ import annotations

import functools
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

from ..errors import NotSupportedError
from .constants import (PERF_ATTR_FLAG_WATERMARK, PERF_ATTR_FLAG_WRITE_BACKWARD,
                        PERF_ATTR_SIZE_VER1, PERF_COUNT_SW_BPF_OUTPUT,
                        PERF_SAMPLE_RAW, PERF_TYPE_SOFTWARE, PERF_TYPE_TRACEPOINT)
from .ffi import ffi
from .syscall import Fd, perf_event_open

__all__ = ["PerfAttr", "bpf_output_attr", "open_bpf_output", "uprobe_attr",
           "tracepoint_attr", "pmu_type", "pmu_format_field", "uprobe_pmu_type",
           "kprobe_pmu_type", "EVENT_SOURCE_DIR"]

EVENT_SOURCE_DIR = "/sys/bus/event_source/devices"


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


def bpf_output_attr(*, wakeup_events: int = 1, wakeup_watermark: int | None = None,
                    write_backward: bool = False) -> PerfAttr:
    """The software BPF_OUTPUT event that ``bpf_perf_event_output`` writes to.

    Wake the reader every ``wakeup_events`` samples, or, with
    ``wakeup_watermark``, once that many bytes are in the ring (cheaper for
    the traced program at high rates).
    """
    a = PerfAttr()
    p = a.ptr
    p.type = PERF_TYPE_SOFTWARE
    p.config = PERF_COUNT_SW_BPF_OUTPUT
    p.sample_period = 1
    p.sample_type = PERF_SAMPLE_RAW
    flags = 0
    if wakeup_watermark is not None:
        flags |= PERF_ATTR_FLAG_WATERMARK
        p.wakeup_watermark = max(1, wakeup_watermark)
    else:
        p.wakeup_events = max(1, wakeup_events)
    if write_backward:
        flags |= PERF_ATTR_FLAG_WRITE_BACKWARD
    p.flags = flags
    return a


def open_bpf_output(cpu: int, **kw: Any) -> Fd:
    """Open one BPF_OUTPUT event on ``cpu`` (all processes); see :func:`bpf_output_attr`."""
    return bpf_output_attr(**kw).open(pid=-1, cpu=cpu)


def tracepoint_attr(tracepoint_id: int) -> PerfAttr:
    """A tracepoint event (id from ``<tracefs>/events/<group>/<name>/id``)."""
    a = PerfAttr()
    p = a.ptr
    p.type = PERF_TYPE_TRACEPOINT
    p.config = tracepoint_id
    p.sample_period = 1
    p.sample_type = PERF_SAMPLE_RAW
    p.wakeup_events = 1
    return a


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
    if retprobe:
        fmt = pmu_format_field("uprobe", "retprobe") or ("config", 0, 0)
        config |= 1 << fmt[1]
    if ref_ctr_offset:
        ref_fmt = pmu_format_field("uprobe", "ref_ctr_offset")
        if ref_fmt is None:
            raise NotSupportedError(95, "perf_event_open", "the uprobe PMU has no "
                                    "ref_ctr_offset format", "needs Linux 4.20+")
        config |= ref_ctr_offset << ref_fmt[1]
    a = PerfAttr()
    p = a.ptr
    p.type = ptype
    p.size = max(PERF_ATTR_SIZE_VER1, p.size)
    p.config = config
    pb = a.keep(ffi.new("char[]", os.fsencode(path)))
    p.config1 = int(ffi.cast("uintptr_t", pb))
    p.config2 = offset
    p.sample_period = 1
    p.wakeup_events = 1
    return a
