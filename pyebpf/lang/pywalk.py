"""The in-kernel CPython frame walk (eBPF emitted here) that the profiler's
program (:mod:`pyebpf.profile.sampler`) and ``pystack`` (:mod:`.pystack`) run.

The layout comes from a per-process config array (the u64 fields of
:data:`pyebpf.symbols.python.CONFIG_FIELDS`, looked up by the process id), so
one program walks every CPython version it is told about.  The walk writes
into a record (the sampler's sample record, ``pystack``'s per-CPU one):
the number of frames, a status and ``(code object, instruction)`` pairs.
Then :func:`emit_code_cache` reads each recorded code object not yet in
the code-object cache map (its name, file name, first line and line table,
see :data:`pyebpf.symbols.python.CODE_HEAD`) through a per-CPU scratch
buffer and adds it.
Loops are unrolled (a bounded thread list, a bounded frame chain): the
verifier sees straight-line code.
"""
from __future__ import annotations

from typing import Any

from ..symbols.python import (CODE_HEAD, CODE_KEY, CODE_VALUE_SIZE, CONFIG_FIELDS, FILE_MAX,
                     KIND_GIL_HOLDER, NAME_MAX, TABLE_MAX)

__all__ = ["emit_python_walk", "emit_code_cache", "code_cache_specs", "MAX_THREADS", "PY_OK",
           "PY_NO_THREAD", "PY_FAULT", "PY_TRUNCATED", "PY_STATUS", "SCRATCH_SIZE"]

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
        _emit_code_tag(p, rec, conf, slot)
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


def _emit_code_tag(p: Any, rec: Any, conf: Any, slot: int) -> None:
    """Tag the code object pointer at ``rec[slot]`` with 16 bits of its
    name's and line table's addresses (in its top 16 bits, above any user
    address): a code object freed and another made at its address is
    another key of the code-object cache.  Unreadable: tag 0."""
    from ..program import R0, R1, R2, R3, R7
    untagged = p.fresh_label("py_untagged")
    p.load(R7, rec, slot, 8)
    for field, dst in (("code_name", slot + 8), ("code_linetable", slot + 8 + 4)):
        p.mov(R1, rec)
        p.add(R1, dst)
        p.mov(R2, 4)                         # (the low halves: they differ)
        p.load(R3, conf, _F[field], 8)
        p.add(R3, R7)
        p.call("probe_read_user")
        p.jne(R0, 0, untagged)
    p.load(R1, rec, slot + 8, 8)
    p.mov(R2, R1)
    p.rsh(R2, 29)
    p.xor(R1, R2)
    p.mov(R2, R1)
    p.rsh(R2, 16)
    p.xor(R1, R2)
    p.mov(R2, R1)
    p.rsh(R2, 32)
    p.xor(R1, R2)
    p.lsh(R1, 48)
    p.or_(R7, R1)
    p.store(rec, slot, R7, 8)
    p.label(untagged)


#: the per-CPU scratch buffer of :func:`emit_code_cache`: a cache key, a cache
#: value, two temporaries
SCRATCH_SIZE = CODE_KEY.size + CODE_VALUE_SIZE + 16


def code_cache_specs(entries: int = 4096, prefix: str = "py") -> tuple[Any, Any]:
    """The code-object cache (``entries`` code objects, all processes) and
    the per-CPU scratch buffer :func:`emit_code_cache` fills it through,
    described (:class:`~pyebpf.maps.MapSpec`: ``create()`` makes them)."""
    from ..maps import Bytes, HashMap, MapSpec, PerCpuArrayMap
    return (MapSpec(HashMap, Bytes(CODE_KEY.size), Bytes(CODE_VALUE_SIZE), entries,
                    name=f"{prefix}_pycode"),
            MapSpec(PerCpuArrayMap, Bytes(SCRATCH_SIZE), 1, name=f"{prefix}_pyscr"))


def emit_code_cache(p: Any, *, rec: Any, conf: Any, off_pid: int, off_npy: int,
                    off_frames: int, max_frames: int, cache: Any, scratch: Any,
                    done: str) -> None:
    """Emit the fill of the code-object cache for the frames the walk
    recorded (``rec``/``conf`` as for :func:`emit_python_walk`, ``off_pid``
    the record's u32 process id); uses r6 and r7; jumps to ``done``.  Each
    code object is read whole or not at all (a failed read leaves it for a
    later sample); its strings and line table are cut to their bounds, the
    header keeping their full sizes."""
    from ..program import R0, R1, R2, R3, R4, R6, R7, R10
    key = p.stack.alloc(8)
    v = CODE_KEY.size                      # the value in the scratch buffer
    tmp = v + CODE_VALUE_SIZE              # a pointer read, then an address to copy from
    name_at = v + CODE_HEAD.size
    file_at = name_at + NAME_MAX
    table_at = file_at + FILE_MAX
    p.store(R10, key, 0, 8)
    p.ld_map(R1, scratch)
    p.stack_pointer(R2, key)
    p.call("map_lookup_elem")
    p.jeq(R0, 0, done)
    p.mov(R7, R0)
    p.load(R1, rec, off_pid, 4)
    p.store(R7, 0, R1, 4)
    p.store(R7, 4, 0, 4)

    def read(dst: int, size: int, base: Any, field: str | None, add: int, fail: str) -> None:
        """``scratch[dst:dst+size] = *(base + conf[field] + add)``."""
        p.mov(R1, R7)
        p.add(R1, dst)
        p.mov(R2, size)
        if field is not None:
            p.load(R3, conf, _F[field], 8)
            p.add(R3, base)
        else:
            p.mov(R3, base)
        if add:
            p.add(R3, add)
        p.call("probe_read_user")
        p.jne(R0, 0, fail)

    def string(field: str, len_at: int, state_at: int, dst: int, cap: int, fail: str) -> None:
        """Copy the ``str`` object ``code->field`` points to (its byte count
        and state word to the header, at most ``cap`` bytes of its text)."""
        read(tmp, 8, R6, field, 0, fail)
        p.load(R6, R7, tmp, 8)                          # (the str object)
        read(v + len_at, 8, R6, None, 16, fail)          # its length
        read(v + state_at, 4, R6, None, 32, fail)        # its state word
        p.load(R1, R7, v + state_at, 4)
        p.load(R2, conf, _F["compact_size"], 8)
        ascii_ = p.fresh_label("py_ascii")
        text = p.fresh_label("py_text")
        p.jset(R1, 64, ascii_)
        p.ja(text)
        p.label(ascii_)
        p.load(R2, conf, _F["ascii_size"], 8)
        p.label(text)
        p.add(R2, R6)
        p.store(R7, tmp, R2, 8)                         # where the text is
        p.rsh(R1, 3)
        p.and_(R1, 3)                                   # kind 1, 2, 4 -> shift 0, 1, 2
        p.load(R2, R7, v + len_at, 8)
        p.lsh(R2, R1)
        p.store(R7, v + len_at, R2, 8)                  # its size in bytes
        copy(dst, cap, fail)

    def copy(dst: int, cap: int, fail: str) -> None:
        """``scratch[dst:]`` = r2 bytes (at most ``cap``) from ``scratch[tmp]``."""
        within = p.fresh_label("py_within")
        p.jle(R2, cap, within)
        p.mov(R2, cap)
        p.label(within)
        p.mov(R1, R7)
        p.add(R1, dst)
        p.load(R3, R7, tmp, 8)
        p.call("probe_read_user")
        p.jne(R0, 0, fail)

    for i in range(max_frames):
        nxt = p.fresh_label("py_code_next")
        p.load(R1, rec, off_npy, 4)
        p.jle(R1, i, done)
        p.load(R6, rec, off_frames + 16 * i, 8)
        p.jeq(R6, 0, nxt)
        p.store(R7, 8, R6, 8)
        p.lsh(R6, 16)                                   # (the tag off: the address)
        p.rsh(R6, 16)
        p.ld_map(R1, cache)
        p.mov(R2, R7)
        p.call("map_lookup_elem")
        p.jne(R0, 0, nxt)
        p.store(R7, v + 4, 0, 4)
        read(v, 4, R6, "code_firstlineno", 0, nxt)
        string("code_name", 8, 32, name_at, NAME_MAX, nxt)
        p.load(R6, R7, 8, 8)
        p.lsh(R6, 16)
        p.rsh(R6, 16)
        string("code_filename", 16, 36, file_at, FILE_MAX, nxt)
        p.load(R6, R7, 8, 8)
        p.lsh(R6, 16)
        p.rsh(R6, 16)
        read(tmp, 8, R6, "code_linetable", 0, nxt)
        p.load(R6, R7, tmp, 8)                          # (the bytes object)
        read(v + 24, 8, R6, None, 16, nxt)               # its size
        p.add(R6, 32)
        p.store(R7, tmp, R6, 8)                         # (its bytes)
        p.load(R2, R7, v + 24, 8)
        copy(table_at, TABLE_MAX, nxt)
        p.store(R7, v + 4, 1, 4)                        # (complete)
        p.ld_map(R1, cache)
        p.mov(R2, R7)
        p.mov(R3, R7)
        p.add(R3, v)
        p.mov(R4, 1)                                    # BPF_NOEXIST
        p.call("map_update_elem")
        p.label(nxt)
    p.ja(done)

