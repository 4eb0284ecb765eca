"""BPF_PROG_TEST_RUN: a loaded program run by the kernel on given input.

Apart from :mod:`.prog` (loading), which every load imports: its result is a
named tuple (:mod:`collections`, ~1.5 ms of a cold start that only loads).
"""
from __future__ import annotations

import errno as E

from .._record import Record, record
from .constants import Cmd
from .core import Fd, addr, as_fd, attr_size, buf, kernel_error, new_attr, try_bpf

__all__ = ["prog_test_run", "TestRun"]

_SZ_TEST = attr_size("test", "batch_size")


@record
class TestRun(Record):
    """Result of :func:`prog_test_run` (a tuple: ``retval, data_out, duration_ns, ctx_out``)."""

    retval: int
    data_out: bytes
    duration_ns: int
    ctx_out: bytes | None


TestRun.__test__ = False  # type: ignore[attr-defined]  # not a pytest class


def prog_test_run(fd: "int | Fd", data: bytes = b"", repeat: int = 1,
                  ctx: bytes | None = None, data_size_out: int | None = None, *,
                  flags: int = 0, cpu: int = 0, batch_size: int = 0) -> TestRun:
    """BPF_PROG_TEST_RUN: run the program ``repeat`` times on ``data`` (and ``ctx``).

    ``data_size_out`` is the size of the output buffer (default: ``len(data)``
    plus 4 KiB of room for programs that grow the packet; 0 = no output).
    ``duration_ns`` is the kernel's average per run.  Returns :class:`TestRun`.
    """
    fd = as_fd(fd)
    if data_size_out is None:
        data_size_out = len(data) + 4096 if data else 0
    din = buf(data)
    dout = bytearray(data_size_out) if data_size_out else None
    dout_cd = buf(dout)
    cin = buf(ctx)
    cout = bytearray(len(ctx)) if ctx else None
    cout_cd = buf(cout)
    attr = new_attr()
    t = attr.test
    t.prog_fd = fd
    t.data_size_in = len(data)
    t.data_size_out = data_size_out
    t.data_in = addr(din) if din is not None else 0
    t.data_out = addr(dout_cd) if dout_cd is not None else 0
    # the kernel runs once for repeat 0; raw_tracepoint programs insist on 0
    t.repeat = 0 if repeat == 1 else repeat
    t.ctx_size_in = len(ctx) if ctx else 0
    t.ctx_size_out = len(ctx) if ctx else 0
    t.ctx_in = addr(cin) if cin is not None else 0
    t.ctx_out = addr(cout_cd) if cout_cd is not None else 0
    t.flags = flags
    t.cpu = cpu
    t.batch_size = batch_size
    ret = try_bpf(Cmd.PROG_TEST_RUN, attr, _SZ_TEST)
    if ret == -E.EINVAL and cout is not None:
        # raw_tracepoint (and some other) programs take ctx in but give none back;
        # the kernel checks this before running, so trying again is safe
        t.ctx_size_out = 0
        t.ctx_out = 0
        cout = None
        ret = try_bpf(Cmd.PROG_TEST_RUN, attr, _SZ_TEST)
    if ret < 0:
        raise kernel_error("BPF_PROG_TEST_RUN", -ret, f"program fd {fd}", out=t.data_size_out)
    out = bytes(dout[:min(t.data_size_out, data_size_out)]) if dout is not None else b""
    ctx_out = bytes(cout[:t.ctx_size_out]) if cout is not None else None
    return TestRun(t.retval, out, t.duration, ctx_out)
