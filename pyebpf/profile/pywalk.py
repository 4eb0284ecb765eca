"""The in-kernel CPython frame walk the sampler's program runs (eBPF emitted here).

The layout comes from a per-process config array (the u64 fields of
:data:`pyebpf.profile.python.CONFIG_FIELDS`, looked up by the process id), so
one program walks every CPython version it is told about.  The walk writes
into the sample record (see :mod:`pyebpf.profile.sampler` for the record):
the number of frames, a status and ``(code object, instruction)`` pairs.
Loops are unrolled (a bounded thread list, a bounded frame chain): the
verifier sees straight-line code.
"""
from __future__ import annotations

from typing import Any

from .python import CONFIG_FIELDS, KIND_GIL_HOLDER

__all__ = ["emit_python_walk", "MAX_THREADS", "PY_OK", "PY_NO_THREAD", "PY_FAULT",
           "PY_TRUNCATED", "PY_STATUS"]

MAX_THREADS = 16          # threads searched for the sampled one
PY_OK, PY_NO_THREAD, PY_FAULT, PY_TRUNCATED = 1, 2, 3, 4
#: what a record's Python status means (0: not a CPython the profiler knows)
PY_STATUS = {0: "not walked", PY_OK: "ok", PY_NO_THREAD: "no thread state for the thread",
             PY_FAULT: "a read failed (Bad address)", PY_TRUNCATED: "deeper than the frame limit"}

_F = {name: 8 * i for i, name in enumerate(CONFIG_FIELDS)}


def emit_python_walk(p: Any, *, rec: Any, conf: Any, off_tid: int, off_npy: int,
                     off_status: int, off_scratch: int, off_frames: int, max_frames: int,
                     done: str) -> None:
    """Emit the walk: ``rec`` holds the record pointer, ``conf`` the config
    value pointer (both callee-saved registers, kept); uses r6 and r7; jumps
    to ``done`` at the end (status set)."""
    from ..program import R0, R1, R2, R3, R6, R7
    status_fault = p.fresh_label("py_fault")
    no_thread = p.fresh_label("py_nothread")
    have_ts = p.fresh_label("py_have_ts")
    frames = p.fresh_label("py_frames")
    ok = p.fresh_label("py_ok")

    def read8(base: Any, field: str | None, dst_off: int = off_scratch, size: int = 8) -> None:
        """``rec[dst_off] = *(u64 *)(base + conf[field])`` (or base itself)."""
        p.mov(R1, rec)
        p.add(R1, dst_off)
        p.mov(R2, size)
        if field is None:
            p.mov(R3, base)
        else:
            p.load(R3, conf, _F[field], 8)
            p.add(R3, base)
        p.call("probe_read_user")
        p.jne(R0, 0, status_fault)

    p.store(rec, off_status, PY_FAULT, 4)
    p.load(R6, conf, _F["address"], 8)
    read8(R6, None)
    p.load(R6, rec, off_scratch, 8)                   # tstate, or the interpreter
    p.load(R1, conf, _F["kind"], 8)
    p.jeq(R1, KIND_GIL_HOLDER, have_ts)
    p.jeq(R6, 0, no_thread)
    read8(R6, "threads_head")
    p.load(R6, rec, off_scratch, 8)
    for _ in range(MAX_THREADS):
        p.jeq(R6, 0, no_thread)
        read8(R6, "ts_tid")
        p.load(R1, rec, off_scratch, 4)
        p.load(R2, rec, off_tid, 4)
        p.jeq(R1, R2, have_ts)
        read8(R6, "ts_next")
        p.load(R6, rec, off_scratch, 8)
    p.label(no_thread)
    p.store(rec, off_status, PY_NO_THREAD, 4)
    p.ja(done)
    p.label(have_ts)
    p.jeq(R6, 0, no_thread)
    read8(R6, "ts_frame")
    p.load(R6, rec, off_scratch, 8)
    p.load(R1, conf, _F["has_cframe"], 8)
    p.jeq(R1, 0, frames)
    p.jeq(R6, 0, ok)
    read8(R6, "cframe_frame")
    p.load(R6, rec, off_scratch, 8)
    p.label(frames)
    for i in range(max_frames):
        slot = off_frames + 16 * i
        p.jeq(R6, 0, ok)
        read8(R6, "f_code", slot)
        read8(R6, "f_instr", slot + 8)
        p.load(R1, rec, slot + 8, 8)
        p.load(R2, conf, _F["instr_mask"], 8)
        p.and_(R1, R2)
        p.store(rec, slot + 8, R1, 8)
        skip = p.fresh_label("py_nomark")
        p.load(R1, conf, _F["has_marker"], 8)
        p.jeq(R1, 0, skip)
        p.store(rec, off_scratch, 0, 8)
        read8(R6, "f_marker", off_scratch, 1)
        p.load(R7, rec, off_scratch, 8)
        p.lsh(R7, 56)
        p.load(R1, rec, slot + 8, 8)
        p.or_(R1, R7)
        p.store(rec, slot + 8, R1, 8)
        p.label(skip)
        p.store(rec, off_npy, i + 1, 4)
        read8(R6, "f_back")
        p.load(R6, rec, off_scratch, 8)
    p.jeq(R6, 0, ok)
    p.store(rec, off_status, PY_TRUNCATED, 4)
    p.ja(done)
    p.label(ok)
    p.store(rec, off_status, PY_OK, 4)
    p.ja(done)
    p.label(status_fault)
    p.store(rec, off_status, PY_FAULT, 4)
    p.ja(done)
