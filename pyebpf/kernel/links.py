"""Links: BPF_LINK_CREATE (perf events, uprobe_multi), raw tracepoints, detaching,
and BPF_TASK_FD_QUERY.

The conventions are those of :mod:`.core`.
"""
from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Sequence

from ..errors import OptionError
from .constants import AttachType, Cmd, enum_name
from .core import (Fd, addr, as_fd, attr_size, bpf, decode_cstr, kernel_error, new_attr,
                   try_bpf)
from .ffi import ffi
from .._record import Record, record

__all__ = ["link_create", "perf_event_link", "uprobe_multi_link", "raw_tracepoint_open",
           "link_detach", "task_fd_query", "TaskFdQuery"]

_SZ_RAW_TP = attr_size("raw_tracepoint", "prog_fd")
_SZ_RAW_TP_COOKIE = attr_size("raw_tracepoint", "cookie")
_SZ_TASK_FD_QUERY = attr_size("task_fd_query", "probe_addr")
_SZ_LINK_DETACH = attr_size("link_detach", "link_fd")


def link_create(prog_fd: "int | Fd", target_fd: "int | Fd", attach_type: int, *,
                flags: int = 0, bpf_cookie: int = 0, path: str | None = None,
                offsets: Sequence[int] = (), ref_ctr_offsets: Sequence[int] | None = None,
                cookies: Sequence[int] | None = None, pid: int = 0,
                uprobe_multi_flags: int = 0) -> Fd:
    """BPF_LINK_CREATE.

    * ``attach_type=AttachType.PERF_EVENT`` (41): ``target_fd`` is a perf event
      fd; ``bpf_cookie`` is what ``bpf_get_attach_cookie()`` returns.
    * ``attach_type=AttachType.TRACE_UPROBE_MULTI`` (48): ``target_fd`` is 0;
      ``path`` of the binary, file ``offsets``, optional ``ref_ctr_offsets``
      (semaphores) and ``cookies`` (one per offset), ``pid`` (0 = all) and
      ``uprobe_multi_flags`` (BPF_F_UPROBE_MULTI_RETURN for uretprobes).  The
      program must be loaded as KPROBE with ``expected_attach_type=48``.
    * other attach types: ``target_fd`` and ``flags`` only.
    """
    attr = new_attr()
    lc = attr.link_create
    lc.prog_fd = as_fd(prog_fd)
    lc.target_fd = as_fd(target_fd)
    lc.attach_type = attach_type
    lc.flags = flags
    keep: list[Any] = []
    size = attr_size("link_create", "flags")
    detail = f"prog fd {lc.prog_fd}, attach type {enum_name(AttachType, attach_type)}"
    if attach_type == AttachType.PERF_EVENT:
        lc.perf_event.bpf_cookie = bpf_cookie
        size = attr_size("link_create", "perf_event", "bpf_cookie")
        detail += f", perf event fd {lc.target_fd}"
    elif attach_type == AttachType.TRACE_UPROBE_MULTI:
        if path is None or not offsets:
            raise OptionError("uprobe_multi needs a path and at least one offset")
        n = len(offsets)
        for name, seq in (("ref_ctr_offsets", ref_ctr_offsets), ("cookies", cookies)):
            if seq is not None and len(seq) != n:
                raise OptionError(f"{name} must have one entry per offset ({n}), got {len(seq)}")
        pb = ffi.from_buffer(os.fsencode(path) + b"\0")
        ob = ffi.new("uint64_t[]", list(offsets))
        keep += [pb, ob]
        um = lc.uprobe_multi
        um.path = addr(pb)
        um.offsets = addr(ob)
        if ref_ctr_offsets is not None:
            rb = ffi.new("uint64_t[]", list(ref_ctr_offsets))
            keep.append(rb)
            um.ref_ctr_offsets = addr(rb)
        if cookies is not None:
            cb = ffi.new("uint64_t[]", list(cookies))
            keep.append(cb)
            um.cookies = addr(cb)
        um.cnt = n
        um.flags = uprobe_multi_flags
        um.pid = pid
        size = attr_size("link_create", "uprobe_multi", "pid")
        detail += f", {path} at {n} offset(s)" + (f", pid {pid}" if pid else "")
    ret = try_bpf(Cmd.LINK_CREATE, attr, size)
    del keep
    if ret < 0:
        raise kernel_error("BPF_LINK_CREATE", -ret, detail, pid=pid, path=path)
    return Fd(ret)


def perf_event_link(prog_fd: "int | Fd", perf_fd: "int | Fd", cookie: int = 0) -> Fd:
    """Attach a program to a perf event fd with a BPF link (Linux 5.15+)."""
    return link_create(prog_fd, perf_fd, AttachType.PERF_EVENT, bpf_cookie=cookie)


def uprobe_multi_link(prog_fd: "int | Fd", path: str, offsets: Sequence[int], *,
                      ref_ctr_offsets: Sequence[int] | None = None,
                      cookies: Sequence[int] | None = None, pid: int = 0,
                      retprobe: bool = False) -> Fd:
    """Attach a program to many uprobes of one binary at once (Linux 6.6+)."""
    return link_create(prog_fd, 0, AttachType.TRACE_UPROBE_MULTI, path=path,
                       offsets=offsets, ref_ctr_offsets=ref_ctr_offsets, cookies=cookies,
                       pid=pid, uprobe_multi_flags=1 if retprobe else 0)


def raw_tracepoint_open(name: str | None, prog_fd: "int | Fd", cookie: int = 0) -> Fd:
    """BPF_RAW_TRACEPOINT_OPEN: attach a RAW_TRACEPOINT program to tracepoint ``name``."""
    nb = ffi.from_buffer(name.encode() + b"\0") if name else None
    attr = new_attr()
    rt = attr.raw_tracepoint
    rt.name = addr(nb) if nb is not None else 0
    rt.prog_fd = as_fd(prog_fd)
    rt.cookie = cookie
    ret = try_bpf(Cmd.RAW_TRACEPOINT_OPEN, attr, _SZ_RAW_TP_COOKIE if cookie else _SZ_RAW_TP)
    if ret < 0:
        raise kernel_error("BPF_RAW_TRACEPOINT_OPEN", -ret, f"tracepoint {name!r}", name=name)
    return Fd(ret)


def link_detach(link_fd: "int | Fd") -> None:
    """BPF_LINK_DETACH: detach the link's program, keeping the link fd open."""
    attr = new_attr()
    attr.link_detach.link_fd = as_fd(link_fd)
    bpf(Cmd.LINK_DETACH, attr, _SZ_LINK_DETACH, f"link fd {as_fd(link_fd)}")


@record
class TaskFdQuery(Record):
    """What BPF_TASK_FD_QUERY reports about a perf event / raw tracepoint fd."""

    prog_id: int
    fd_type: int
    name: str
    probe_offset: int
    probe_addr: int


def task_fd_query(pid: int, fd: int, flags: int = 0) -> TaskFdQuery:
    """BPF_TASK_FD_QUERY: which program is attached to ``fd`` of process ``pid``."""
    buf = bytearray(4096)
    bcd = ffi.from_buffer(buf)
    attr = new_attr()
    q = attr.task_fd_query
    q.pid = pid
    q.fd = fd
    q.flags = flags
    q.buf_len = len(buf)
    q.buf = addr(bcd)
    bpf(Cmd.TASK_FD_QUERY, attr, _SZ_TASK_FD_QUERY, f"pid {pid} fd {fd}")
    return TaskFdQuery(q.prog_id, q.fd_type, decode_cstr(buf), q.probe_offset, q.probe_addr)
