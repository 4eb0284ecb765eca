"""Python frames in sampled stacks: CPython's structures, found in a running process.

The profiler's program (:mod:`pyebpf.profile.sampler`) and bt's ``pystack``
(:mod:`pyebpf.lang.pystack`) walk the interpreter's frame chain in eBPF at
sample time with ``bpf_probe_read_user`` (the walk: :mod:`pyebpf.lang.pywalk`);
this module finds the interpreter in a process, gives the walk its layout
and turns what it recorded into frame names.

**Finding the interpreter.**  A module mapped by the process that defines
``_PyRuntime`` (the ``python3.X`` executable, or ``libpython3.X.so`` in a
shared build) is CPython; the version comes from the file's name.  CPython
3.13 publishes its structure offsets in ``_PyRuntime`` itself
(``_Py_DebugOffsets``, cookie ``xdebugpy``): they are read from the
process's memory.  3.10, 3.11 and 3.12 have a table per version here
(:data:`LAYOUTS`, checked by the tests against offsets compiled from each
interpreter's own headers).  Any other version (or a free-threaded build)
is reported by :func:`find_python` as unsupported, and its samples keep
their native frames only.

**The thread state of the sampled thread.**  3.11 and later keep each
thread's ``native_thread_id`` (the kernel's thread id) in its
``PyThreadState``: the program walks the main interpreter's thread list
(``_PyRuntime.interpreters.head -> threads.head -> next``) for the thread
the sample interrupted.  3.10 has no such field: the program takes the
thread holding the GIL (``_PyRuntime.gilstate.tstate_current``), which is
the sampled thread whenever it runs Python code (a thread sampled while it
runs C code without the GIL gets the GIL holder's Python frames).

**What is recorded per frame**: the code object's address (tagged, see
:data:`ADDRESS_MASK`) and the
instruction position (3.10: ``f_lasti``; 3.11-3.12: ``prev_instr``; 3.13:
``instr_ptr``), with the frame's ``is_entry`` (3.11) or ``owner`` (3.12+)
byte in the top byte.  Names (``co_qualname``, ``co_filename``) and what the
line needs (``co_firstlineno`` and the line table) are read by the program
too, at sample time, once per code object, into a cache map (key and value:
:data:`CODE_KEY`, :data:`CODE_HEAD`; bounded copies): a process that exits
before its profile is printed keeps its names.  A code object the program
could not read (a page not resident), or whose parts were cut at their
bounds, is read from the process's memory (``/proc/PID/mem``) while it
runs; one neither could read shows as ``[python code 0x...]``.

**Interleaving**: a Python frame runs inside a native
``_PyEval_EvalFrameDefault`` call (3.11+: several frames per call, the
first one marked as an entry).  Each run of Python frames replaces one such
native frame, innermost first; runs left over (the native stack was cut
short: CPython builds without frame pointers) go outermost.
"""
from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PyLayout", "PythonProcess", "LAYOUTS", "find_python", "decode_line",
           "decode_cached_code", "interleave", "EVAL_FUNCTIONS", "CODE_KEY", "CODE_HEAD",
           "CODE_VALUE_SIZE"]

#: native functions whose frames Python frames replace
EVAL_FUNCTIONS = frozenset({"_PyEval_EvalFrameDefault"})

#: the fields of the config array the program reads (u64 each), in order
CONFIG_FIELDS = ("kind", "address", "threads_head", "ts_next", "ts_tid", "ts_frame",
                 "cframe_frame", "has_cframe", "f_back", "f_code", "f_instr",
                 "f_marker", "has_marker", "instr_mask", "code_name", "code_filename",
                 "code_firstlineno", "code_linetable", "ascii_size", "compact_size")
KIND_GIL_HOLDER = 1      # address is &_PyRuntime.gilstate.tstate_current
KIND_THREAD_LIST = 2     # address is &_PyRuntime.interpreters.head

#: the code-object cache the walk fills at sample time
#: (:func:`pyebpf.lang.pywalk.emit_code_cache`): the key is the process id,
#: 4 zero bytes and the code object's address; the value a header
#: (:data:`CODE_HEAD`: first line, a completeness flag, the byte counts of the
#: name, file name and line table as the process holds them, the two strings'
#: ``state`` words) and then the three byte arrays, each cut to its bound
CODE_KEY = struct.Struct("<IIQ")
#: a recorded code object's address without its tag (the top 16 bits: 16
#: bits of its name's and line table's addresses, so that a code object made
#: where a freed one was is not named from the cache as that one)
ADDRESS_MASK = (1 << 48) - 1
CODE_HEAD = struct.Struct("<iIQQQII")
NAME_MAX, FILE_MAX, TABLE_MAX = 128, 256, 1024
CODE_VALUE_SIZE = CODE_HEAD.size + NAME_MAX + FILE_MAX + TABLE_MAX


@dataclass(frozen=True)
class PyLayout:
    """Where CPython keeps what the frame walk reads (byte offsets)."""

    version: tuple[int, int]
    tstate_current: int | None      # in _PyRuntime (3.10: the GIL holder)
    interpreters_head: int          # in _PyRuntime
    threads_head: int               # in PyInterpreterState
    ts_next: int
    ts_native_tid: int | None       # 3.11+
    ts_frame: int                   # PyThreadState.frame / .cframe / .current_frame
    cframe_frame: int | None        # _PyCFrame.current_frame (3.11, 3.12)
    f_back: int
    f_code: int
    f_instr: int
    f_marker: int | None            # 3.11 is_entry, 3.12+ owner
    code_filename: int
    code_name: int
    code_qualname: int | None
    code_firstlineno: int
    code_linetable: int
    code_adaptive: int | None       # co_code_adaptive (3.11+)
    ascii_size: int                 # sizeof(PyASCIIObject)
    compact_size: int               # sizeof(PyCompactUnicodeObject)


#: per-version layouts of CPython 3.10-3.12 on 64-bit Linux (release builds)
LAYOUTS: dict[tuple[int, int], PyLayout] = {
    (3, 10): PyLayout((3, 10), 568, 32, 8, 8, None, 24, None, 24, 32, 96, None,
                      104, 112, None, 40, 120, None, 48, 72),
    (3, 11): PyLayout((3, 11), None, 40, 16, 8, 160, 56, 8, 48, 32, 56, 68,
                      112, 120, 128, 72, 136, 184, 48, 72),
    (3, 12): PyLayout((3, 12), None, 40, 72, 8, 144, 56, 0, 8, 0, 56, 70,
                      112, 120, 128, 68, 136, 192, 40, 56),
}

# _Py_DebugOffsets of 3.13 after the cookie: u64 fields in this order
_DEBUG_FIELDS = (
    "version free_threaded "
    "rt_size rt_finalizing rt_interpreters_head "
    "is_size is_id is_next is_threads_head is_gc is_modules is_sysdict is_builtins is_gil "
    "is_gil_state is_gil_enabled is_gil_locked is_gil_holder "
    "ts_size ts_prev ts_next ts_interp ts_current_frame ts_thread_id ts_native_thread_id "
    "ts_datastack ts_status "
    "f_size f_previous f_executable f_instr_ptr f_localsplus f_owner "
    "co_size co_filename co_name co_qualname co_linetable co_firstlineno co_argcount "
    "co_localsplusnames co_localspluskinds co_code_adaptive "
    "ob_size ob_type tp_size tp_name tp_repr tp_flags "
    "tu_size tu_item tu_ob_size li_size li_item li_ob_size di_size di_keys di_values "
    "fl_size fl_fval lo_size lo_tag lo_digit by_size by_ob_size by_sval "
    "un_size un_state un_length un_ascii_size").split()


def layout_from_debug_offsets(data: bytes) -> PyLayout | str:
    """The layout in a 3.13 ``_Py_DebugOffsets`` (the bytes at ``_PyRuntime``),
    or why it cannot be used."""
    if data[:8] != b"xdebugpy":
        return "no _Py_DebugOffsets cookie in _PyRuntime"
    need = 8 + 8 * len(_DEBUG_FIELDS)
    if len(data) < need:
        return "_Py_DebugOffsets cut short"
    d = dict(zip(_DEBUG_FIELDS, struct.unpack_from(f"<{len(_DEBUG_FIELDS)}Q", data, 8)))
    version = ((d["version"] >> 24) & 0xFF, (d["version"] >> 16) & 0xFF)
    if version != (3, 13):
        return f"CPython {version[0]}.{version[1]}'s _Py_DebugOffsets layout is not known"
    if d["free_threaded"]:
        return "free-threaded CPython builds are not supported"
    return PyLayout(version, None, d["rt_interpreters_head"], d["is_threads_head"], d["ts_next"],
                    d["ts_native_thread_id"], d["ts_current_frame"], None, d["f_previous"],
                    d["f_executable"], d["f_instr_ptr"], d["f_owner"], d["co_filename"],
                    d["co_name"], d["co_qualname"], d["co_firstlineno"], d["co_linetable"],
                    d["co_code_adaptive"], d["un_ascii_size"], d["un_ascii_size"] + 16)


def config_values(layout: PyLayout, runtime: int) -> list[int]:
    """The config array of :data:`CONFIG_FIELDS` for the program."""
    if layout.ts_native_tid is None:
        kind, addr, tid = KIND_GIL_HOLDER, runtime + (layout.tstate_current or 0), 0
    else:
        kind, addr, tid = KIND_THREAD_LIST, runtime + layout.interpreters_head, layout.ts_native_tid
    return [kind, addr, layout.threads_head, layout.ts_next, tid, layout.ts_frame,
            layout.cframe_frame or 0, int(layout.cframe_frame is not None), layout.f_back,
            layout.f_code, layout.f_instr, layout.f_marker or 0,
            int(layout.f_marker is not None),
            0xFFFFFFFF if layout.version < (3, 11) else (1 << 56) - 1,
            layout.code_qualname if layout.code_qualname is not None else layout.code_name,
            layout.code_filename, layout.code_firstlineno, layout.code_linetable,
            layout.ascii_size, layout.compact_size]


_VERSION_RE = re.compile(r"python(\d)\.(\d+)")


def find_python(pid: int) -> PythonProcess | str | None:
    """The CPython of process ``pid`` (see the module docs); a sentence saying
    why its frames cannot be walked (a version or build not supported, the
    process unreadable); None when it runs no CPython, or not yet (the
    dynamic loader is still mapping it: ``_PyRuntime`` lies in a read-only
    mapping then, at a place that will move)."""
    from .. import elf
    try:
        mods = elf.process_modules(pid)
    except (OSError, ProcessLookupError) as exc:
        return f"cannot read pid {pid}'s modules: {exc}"
    for m in mods:
        base = os.path.basename(m.path)
        if "python" not in base:
            continue
        try:
            syms = [s for s in elf.open_elf(m.open_path).find_symbols("_PyRuntime")
                    if s.address]
        except Exception:
            continue
        if not syms:
            continue
        try:
            runtime = _runtime_address(m, syms[0].address)
        except Exception:
            continue
        if any(e.start <= runtime < e.end and "w" not in e.perms for e in m.maps):
            return None              # (being loaded: the loader has not mapped its data yet)
        match = _VERSION_RE.search(base)
        version = (int(match.group(1)), int(match.group(2))) if match else (0, 0)
        proc = PythonProcess(pid, m.path, runtime, None)
        if version >= (3, 13) or version == (0, 0):
            got = layout_from_debug_offsets(proc.read(runtime, 8 + 8 * len(_DEBUG_FIELDS)))
            if isinstance(got, str):
                return f"{m.path}: {got}"
            proc.layout = got
        elif version in LAYOUTS:
            proc.layout = LAYOUTS[version]
        else:
            return f"{m.path}: CPython {version[0]}.{version[1]} is not supported (3.10-3.13 are)"
        return proc
    return None                      # (no module defines _PyRuntime)


def _runtime_address(module: Any, vaddr: int) -> int:
    """Where the ELF address ``vaddr`` of ``module`` is in its process, also
    in the zero-filled (.bss) part no file offset backs (3.9's
    ``_PyRuntime``): the module's load bias from its first mapping."""
    from .. import elf
    try:
        return int(module.runtime_address(vaddr))
    except Exception:
        first = module.maps[0]
        base = elf.open_elf(module.open_path).offset_to_address(first.offset)
        return int(vaddr + first.start - base)


@dataclass
class PythonProcess:
    """A CPython process: where ``_PyRuntime`` is, the layout, and the code
    objects read so far."""

    pid: int
    path: str
    runtime: int
    layout: PyLayout | None
    _code: dict[int, tuple[str, str, bytes, int] | None] = field(default_factory=dict)

    def read(self, addr: int, size: int) -> bytes:
        """``size`` bytes of the process's memory (fewer or none when unmapped)."""
        if not 0 < addr < 1 << 47 or not 0 <= size < 1 << 24:
            return b""                       # (not a user-space address of x86-64)
        try:
            fd = os.open(f"/proc/{self.pid}/mem", os.O_RDONLY)
        except OSError:
            return b""
        try:
            return os.pread(fd, size, addr)
        except OSError:
            return b""
        finally:
            os.close(fd)

    def _u64(self, addr: int) -> int | None:
        b = self.read(addr, 8)
        return struct.unpack("<Q", b)[0] if len(b) == 8 else None

    def string(self, addr: int) -> str | None:
        """A ``str`` object's text (compact strings; None when unreadable)."""
        lay = self.layout
        assert lay is not None
        head = self.read(addr + 16, 24)
        if len(head) < 24:
            return None
        length, _, state = struct.unpack("<QqI", head[:20])
        kind, compact, ascii_ = (state >> 2) & 7, (state >> 5) & 1, (state >> 6) & 1
        if not compact or length > 4096 or kind not in (1, 2, 4):
            return None
        data = self.read(addr + (lay.ascii_size if ascii_ else lay.compact_size), length * kind)
        codec = {1: "latin-1", 2: "utf-16-le", 4: "utf-32-le"}[kind]
        return data.decode(codec, "replace") if len(data) == length * kind else None

    def code(self, addr: int, cached: bytes | None = None) -> tuple[str, str, bytes, int] | None:
        """``(qualified name, file name, line table, first line)`` of the code
        object at ``addr``: from ``cached`` (its entry in the program's
        code-object cache, :data:`CODE_HEAD`) when that holds all of it, else
        read from the process's memory (``/proc/PID/mem``), else what
        ``cached`` holds cut short; None when neither has it.  Kept once found."""
        hit = self._code.get(addr)
        if hit is not None:
            return hit
        got = decode_cached_code(cached) if cached else None
        if got is not None and got[1]:
            hit = got[0]
        else:
            if addr not in self._code:           # (the memory is read once per code object)
                hit = self._read_code(addr & ADDRESS_MASK)
            if hit is None and got is not None:
                hit = got[0]
        self._code[addr] = hit
        return hit

    def has_code(self, addr: int) -> bool:
        """Whether the code object at ``addr`` is named already."""
        return self._code.get(addr) is not None

    def _read_code(self, addr: int) -> tuple[str, str, bytes, int] | None:
        """:meth:`code` read from ``/proc/PID/mem`` (None when unreadable)."""
        lay = self.layout
        assert lay is not None
        name_at = self._u64(addr + (lay.code_qualname if lay.code_qualname is not None
                                    else lay.code_name))
        file_at = self._u64(addr + lay.code_filename)
        table_at = self._u64(addr + lay.code_linetable)
        first = self.read(addr + lay.code_firstlineno, 4)
        if name_at and file_at and table_at and len(first) == 4:
            name, filename = self.string(name_at), self.string(file_at)
            size = self._u64(table_at + 16)
            table = self.read(table_at + 32, size) if size is not None and size < 1 << 20 else b""
            if name is not None and filename is not None:
                return (name, filename, table, struct.unpack("<i", first)[0])
        return None

    def frame_name(self, code: int, instr: int, cached: bytes | None = None) -> str:
        """``qualname (file:line)`` for a recorded frame (``cached``: the code
        object's entry in the program's cache, see :meth:`code`)."""
        lay = self.layout
        assert lay is not None
        got = self.code(code, cached)
        code &= ADDRESS_MASK
        if got is None:
            return f"[python code {code:#x}]"
        name, filename, table, first = got
        if lay.code_adaptive is None:
            offset = instr * 2                     # 3.10: f_lasti counts code units
        else:
            offset = max(0, instr - (code + lay.code_adaptive))
        line = decode_line(table, first, offset, lay.version)
        return f"{name} ({filename}:{line if line is not None else first})"


def _cached_text(data: bytes, nbytes: int, state: int) -> str:
    """A ``str`` object's text from the bytes the program copied (``nbytes``
    of them in the process, cut to ``len(data)``), ``...`` marking a cut."""
    kind = (state >> 2) & 7
    codec = {2: "utf-16-le", 4: "utf-32-le"}.get(kind, "latin-1")
    kept = data[:min(nbytes, len(data)) // max(kind, 1) * max(kind, 1)]
    text = kept.decode(codec, "replace")
    return text + "..." if nbytes > len(data) else text


def decode_cached_code(raw: bytes) -> tuple[tuple[str, str, bytes, int], bool] | None:
    """An entry of the program's code-object cache (:data:`CODE_HEAD`) as
    ``((qualified name, file name, line table, first line), complete)``;
    ``complete`` is False when a part was longer than its bound (then cut);
    None when the entry is not filled."""
    if len(raw) < CODE_VALUE_SIZE:
        return None
    first, flags, nlen, flen, tlen, nstate, fstate = CODE_HEAD.unpack_from(raw, 0)
    if not flags & 1:
        return None
    at = CODE_HEAD.size
    name = _cached_text(raw[at:at + NAME_MAX], nlen, nstate)
    at += NAME_MAX
    filename = _cached_text(raw[at:at + FILE_MAX], flen, fstate)
    at += FILE_MAX
    table = bytes(raw[at:at + min(tlen, TABLE_MAX)])
    return (name, filename, table, first), nlen <= NAME_MAX and flen <= FILE_MAX and \
        tlen <= TABLE_MAX


def _varint(table: bytes, i: int) -> tuple[int, int]:
    if i >= len(table):
        return 0, len(table)                 # (a table cut short)
    b = table[i]
    i += 1
    val, shift = b & 63, 6
    while b & 64 and i < len(table):
        b = table[i]
        i += 1
        val |= (b & 63) << shift
        shift += 6
    return val, i


def decode_line(table: bytes, first: int, offset: int, version: tuple[int, int]) -> int | None:
    """The line of the instruction at byte ``offset`` of a code object, from its
    line table (3.10: ``co_linetable`` pairs; 3.11+: the location table)."""
    line, addr, i = first, 0, 0
    cur: int | None
    if version < (3, 11):
        while i + 1 < len(table):
            sdelta, ldelta = table[i], struct.unpack("b", table[i + 1:i + 2])[0]
            i += 2
            cur = None
            if ldelta != -128:
                line += ldelta
                cur = line
            if addr <= offset < addr + sdelta:
                return cur
            addr += sdelta
        return None
    unit = offset // 2
    while i < len(table):
        b = table[i]
        i += 1
        code, length = (b >> 3) & 15, (b & 7) + 1
        cur = line
        if code == 15:
            cur = None
        elif code in (13, 14):
            delta, i = _varint(table, i)
            line += -(delta >> 1) if delta & 1 else delta >> 1
            cur = line
            if code == 14:
                for _ in range(3):
                    _, i = _varint(table, i)
        elif code >= 10:
            line += code - 10
            cur = line
            i += 2
        else:
            i += 1
        if addr <= unit < addr + length:
            return cur
        addr += length
    return None


def python_runs(frames: list[tuple[int, int]], version: tuple[int, int]) -> list[list[tuple[int, int]]]:
    """Recorded ``(code, instr|marker<<56)`` frames (innermost first) cut
    into the runs one ``_PyEval_EvalFrameDefault`` call executes (innermost
    first); C-stack shim frames (3.12+ owner 3) are dropped."""
    runs: list[list[tuple[int, int]]] = [[]]
    for code, raw in frames:
        marker, instr = raw >> 56, raw & ((1 << 56) - 1)
        if version >= (3, 12) and marker == 3:
            if runs[-1]:
                runs.append([])
            continue
        runs[-1].append((code, instr))
        if version < (3, 11) or (version == (3, 11) and marker):
            runs.append([])
    return [r for r in runs if r]


def interleave(native: list[str], runs: list[list[str]]) -> list[str]:
    """Native frames (innermost first) with each run of Python frames (each
    innermost first, runs innermost first) in place of one eval-loop frame
    (see the module docs)."""
    out: list[str] = []
    k = 0
    for f in native:
        if f in EVAL_FUNCTIONS and k < len(runs):
            out += runs[k]
            k += 1
        elif f in EVAL_FUNCTIONS and runs:
            continue                        # (more eval frames than runs: drop)
        else:
            out.append(f)
    for run in runs[k:]:
        out += run
    return out
