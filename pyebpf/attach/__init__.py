"""Attach loaded programs to uprobes, tracepoints, raw tracepoints, perf events, kprobes.

Every ``attach_*`` function takes a loaded program (a
:class:`~pyebpf.loader.LoadedProgram`, an ``Fd`` or an fd number) or a
source it loads (a DSL ``Program``, assembly text, instruction bytes), and
returns a :class:`Link`: a context manager that
owns the kernel objects of the attachment (BPF link fds, perf event fds, and
the program when it loaded it itself).  ``detach()`` is idempotent, closes
everything in one go, and also runs when the link is garbage collected::

    from pyebpf.attach import attach_uprobe, load_uprobe_program
    prog = load_uprobe_program(p)                    # p: a DSL Program
    with attach_uprobe(prog, "libc", "malloc", pid=1234) as link:
        ...                                          # counting
    # detached here: no link, no probe, no fd left

Tracepoints need tracefs for the event id; it is mounted at
/sys/kernel/tracing when absent (root only).  Raw tracepoints, perf events
and uprobes never need it.

One module per concern; the names below are all importable from here:

========================  ===================================================
``link``                  :class:`Link` (an attachment's fds and their
                          lifetime), :func:`link_ids`, the attach mechanisms
``uprobe``                uprobe/uretprobe locations and attaching, the
                          uprobe_multi vs perf-event choice (its docstring
                          says how locations are written and checked)
``tracefs``               finding or mounting tracefs
``tracepoint``            tracepoints, their record formats; raw tracepoints
``perf_event``            sampling perf events; kprobes (kprobe PMU)
``_programs``             the program an attach call takes or loads
========================  ===================================================

``link`` and ``uprobe`` load with this package (the uprobe start-up path);
``tracefs``, ``tracepoint`` and ``perf_event`` on first use of one of their
names.
"""
from __future__ import annotations

from .._lazy import lazy_dir, lazy_getattr
from ._programs import is_loaded
from .link import PERF_IOCTL, PERF_LINK, UPROBE_MULTI, Link, close_groups, link_ids
from .uprobe import (attach_uprobe, attach_uprobes, attach_uretprobe, load_uprobe_program,
                     resolve_uprobe, resolve_uprobes, uprobe_load_options, uprobe_method)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .perf_event import PERF_EVENTS as PERF_EVENTS
    from .perf_event import attach_kprobe as attach_kprobe
    from .perf_event import attach_kretprobe as attach_kretprobe
    from .perf_event import attach_perf_event as attach_perf_event
    from .perf_event import attach_breakpoint as attach_breakpoint
    from .tracefs import tracefs_dir as tracefs_dir
    from .tracepoint import TracepointField as TracepointField
    from .tracepoint import TracepointFormat as TracepointFormat
    from .tracepoint import attach_raw_tracepoint as attach_raw_tracepoint
    from .tracepoint import attach_tracepoint as attach_tracepoint
    from .tracepoint import list_raw_tracepoints as list_raw_tracepoints
    from .tracepoint import list_tracepoints as list_tracepoints
    from .tracepoint import parse_tracepoint_format as parse_tracepoint_format
    from .tracepoint import tracepoint_format as tracepoint_format
    from .tracepoint import tracepoint_id as tracepoint_id

__all__ = [
    "Link", "UPROBE_MULTI", "PERF_LINK", "PERF_IOCTL",
    "uprobe_method", "uprobe_load_options", "load_uprobe_program",
    "resolve_uprobe", "resolve_uprobes",
    "attach_uprobe", "attach_uretprobe", "attach_uprobes",
    "tracefs_dir", "list_tracepoints", "tracepoint_id", "tracepoint_format",
    "parse_tracepoint_format",
    "TracepointField", "TracepointFormat", "attach_tracepoint",
    "list_raw_tracepoints", "attach_raw_tracepoint",
    "attach_perf_event", "PERF_EVENTS", "attach_breakpoint",
    "attach_kprobe", "attach_kretprobe",
    "link_ids",
]

# Names of the single module this package was, still used from outside it:
# pyebpf.usdt.attach tells a loaded program from a source to load, and
# benchmarks/bench_attach.py times the sequential close against the concurrent one.
_is_loaded = is_loaded
_close_groups = close_groups

# name -> submodule, for the names loaded on first use (not on the uprobe path)
_LAZY = {
    "tracefs_dir": "tracefs",
    **dict.fromkeys(("list_tracepoints", "tracepoint_id", "tracepoint_format",
                     "parse_tracepoint_format", "TracepointField", "TracepointFormat",
                     "attach_tracepoint", "list_raw_tracepoints", "attach_raw_tracepoint"),
                    "tracepoint"),
    **dict.fromkeys(("PERF_EVENTS", "attach_perf_event", "attach_kprobe", "attach_kretprobe",
                     "attach_breakpoint"),
                    "perf_event"),
}


__getattr__ = lazy_getattr(globals(), _LAZY)
__dir__ = lazy_dir(globals(), _LAZY)
