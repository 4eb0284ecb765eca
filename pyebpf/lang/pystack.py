"""``pystack``: the Python frames of the thread a probe fires in.

``@[pystack] = count()`` in a ``profile``, ``interval``-free probe of a
CPython process (``-p PID``, ``-c CMD``, or a uprobe/usdt probe in a CPython
binary) counts the Python call stacks it samples; ``print(pystack)`` and
maps keyed by it print one frame a line, innermost first, as bpftrace
prints a ``ustack``: ``qualname (file:line)``.  ``--flamegraph`` draws them.

**The value** (its representation in a map key or an event) is an 8-byte
id: a 64-bit FNV-1a hash of the process id, the walk's status, the number
of frames and each frame's ``(code object, instruction)`` pair.  The frames
themselves go to the hash map ``bt_pystacks`` (id -> the record below,
first writer kept), so that a key stays 8 bytes and equal stacks are one
key.  Two different stacks share an id only by a 64-bit hash collision
(about ``n**2 / 2**65`` for ``n`` distinct stacks); 0 means "no Python
frames" (the process is not a CPython the program was told about).  The
record: process id, thread id, number of frames, status (the walk's, see
:data:`pyebpf.lang.pywalk.PY_STATUS`), 8 scratch bytes, then
:data:`FRAMES` ``(code object, instruction | marker << 56)`` pairs.

**The walk** is the profiler's (:mod:`pyebpf.lang.pywalk`), emitted
once per program as a BPF subprogram (its registers and 512-byte stack
its own); it also fills the code-object cache (``bt_pycode``: names, file
names and line tables read at sample time), so a stack printed after its
process exited keeps its names.

**Which processes**: the layout of each CPython goes in ``bt_pyconf``
(process id -> layout) when the run starts: the ``-p`` process, the
``-c`` command once it has exec'd, and otherwise every process running
the probed CPython binary at that moment.  :func:`check_targets` refuses
a program whose ``pystack`` has no such process to read (not a CPython,
or a version pyebpf does not know), at its position in the script.
"""
from __future__ import annotations

import os
import struct

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Sequence

    from ..symbols.python import PythonProcess

__all__ = ["FRAMES", "RECORD", "emit_pystack", "pystack_specs", "check_targets",
           "PyStackNames", "uses_pystack", "binary_python", "merge_printed"]

#: Python frames kept per stack (deeper stacks keep their innermost ones)
FRAMES = 64
#: the head of a ``bt_pystacks`` record: pid, tid, frames, status, scratch
RECORD = struct.Struct("<IIIIQ")
_RECORD_SIZE = RECORD.size + 16 * FRAMES
_FNV_BASIS, _FNV_PRIME = 0xCBF29CE484222325, 0x100000001B3
_SUBPROGRAM = "pystack"


def pystack_specs() -> dict[str, Any]:
    """The maps a program using ``pystack`` needs, described, by role:
    ``conf`` (pid -> layout), ``stacks`` (id -> record), ``record`` (the
    per-CPU record being built), ``code`` and ``scratch`` (the code-object
    cache and its per-CPU buffer)."""
    from ..maps import Bytes, HashMap, MapSpec, PerCpuArrayMap
    from ..symbols.python import CONFIG_FIELDS
    from .pywalk import code_cache_specs
    code, scratch = code_cache_specs(4096, "bt")
    return {"conf": MapSpec(HashMap, Bytes(4), Bytes(8 * len(CONFIG_FIELDS)), 1024,
                            name="bt_pyconf"),
            "stacks": MapSpec(HashMap, "u64", Bytes(_RECORD_SIZE), 4096, name="bt_pystacks"),
            "record": MapSpec(PerCpuArrayMap, Bytes(_RECORD_SIZE), 1, name="bt_pyrec"),
            "code": code, "scratch": scratch}


def emit_pystack(p: Any, dst: Any, maps: dict[str, Any]) -> None:
    """``dst = pystack`` (see the module docs): a call of the walk's
    subprogram (emitted into ``p`` on first use); clobbers r0-r5."""
    from ..program import R0
    if _SUBPROGRAM not in p.subprograms:
        _emit_subprogram(p.subprogram(_SUBPROGRAM), maps)
    p.call_local(_SUBPROGRAM)
    p.mov(dst, R0)


def _emit_subprogram(p: Any, maps: dict[str, Any]) -> None:
    """The body: find the layout, walk into the per-CPU record, fill the
    code cache, hash the frames, keep the record under the hash, return it."""
    from .pywalk import emit_code_cache, emit_python_walk
    from ..program import R0, R1, R2, R3, R4, R6, R7, R8, R9, R10
    key = p.stack.alloc(8)
    none = p.fresh_label("pystack_none")
    p.call("get_current_pid_tgid")
    p.mov(R6, R0)
    p.rsh(R0, 32)
    p.store(R10, key, R0, 8)
    p.ld_map(R1, maps["conf"])
    p.stack_pointer(R2, key)
    p.call("map_lookup_elem")
    p.jeq(R0, 0, none)
    p.mov(R9, R0)
    p.store(R10, key, 0, 8)
    p.ld_map(R1, maps["record"])
    p.stack_pointer(R2, key)
    p.call("map_lookup_elem")
    p.jeq(R0, 0, none)
    p.mov(R8, R0)
    p.mov(R1, R6)
    p.rsh(R1, 32)
    p.store(R8, 0, R1, 4)
    p.store(R8, 4, R6, 4)                     # (the low half: the thread id)
    p.store(R8, 8, 0, 8)                      # no frames, status 0
    cache = p.fresh_label("pystack_cache")
    hashed = p.fresh_label("pystack_hash")
    emit_python_walk(p, rec=R8, conf=R9, off_tid=4, off_npy=8, off_status=12,
                     off_scratch=16, off_frames=RECORD.size, max_frames=FRAMES, done=cache)
    p.label(cache)
    emit_code_cache(p, rec=R8, conf=R9, off_pid=0, off_npy=8, off_frames=RECORD.size,
                    max_frames=FRAMES, cache=maps["code"], scratch=maps["scratch"],
                    done=hashed)
    p.label(hashed)
    p.lddw(R6, _FNV_BASIS)
    p.lddw(R7, _FNV_PRIME)

    def mix(off: int, size: int) -> None:
        p.load(R1, R8, off, size)
        p.xor(R6, R1)
        p.mul(R6, R7)

    mix(0, 4)                                 # the process
    mix(8, 8)                                 # frames and status
    end = p.fresh_label("pystack_end")
    for i in range(FRAMES):
        p.load(R1, R8, 8, 4)
        p.jle(R1, i, end)
        mix(RECORD.size + 16 * i, 8)
        mix(RECORD.size + 16 * i + 8, 8)
    p.label(end)
    nonzero = p.fresh_label("pystack_nonzero")
    p.jne(R6, 0, nonzero)
    p.mov(R6, 1)
    p.label(nonzero)
    p.store(R10, key, R6, 8)
    p.ld_map(R1, maps["stacks"])
    p.stack_pointer(R2, key)
    p.mov(R3, R8)
    p.mov(R4, 1)                              # BPF_NOEXIST: the first record kept
    p.call("map_update_elem")
    p.mov(R0, R6)
    p.exit()
    p.label(none)
    p.ret(0)


def uses_pystack(script: Any) -> Any:
    """The first ``pystack`` node of ``script`` (None when it has none)."""
    from . import ast as A
    for node in _walk(list(script.probes)):
        if isinstance(node, A.Builtin) and node.name == "pystack":
            return node
    return None


def _walk(node: Any) -> Any:
    """Every tree node under ``node`` (lists of nodes followed; positions
    and types not)."""
    from . import ast as A
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, (list, tuple)):
            stack.extend(reversed(n))
        elif isinstance(n, A.Node):
            yield n
            stack.extend(reversed([v for k, v in vars(n).items() if k not in ("type", "pos")]))


def binary_python(path: str) -> str | None:
    """Why the executable or library ``path`` is not a CPython pyebpf
    walks (None when it is: it defines ``_PyRuntime`` or needs a
    ``libpython3.X``, and 3.X is a version pyebpf knows)."""
    import re

    from .. import elf
    from ..symbols.python import LAYOUTS
    from ..symbols.stacks import _needed
    real = os.path.realpath(path)
    names = [os.path.basename(real)]
    try:
        defines = any(s.address for s in elf.open_elf(real).find_symbols("_PyRuntime"))
        needed = [n for n in _needed(real) if "libpython" in n]
    except Exception as exc:
        return f"{path} cannot be read as an ELF file ({exc})"
    if not defines and not needed:
        return f"{path} is not a CPython (it neither defines _PyRuntime nor needs libpython)"
    m = None
    for n in needed + names:
        m = re.search(r"python(\d)\.(\d+)", n)
        if m:
            break
    if m is None:
        return None                          # (told by the process at run time)
    version = (int(m.group(1)), int(m.group(2)))
    if version not in LAYOUTS and version != (3, 13):
        return f"{path} is CPython {version[0]}.{version[1]}: pystack knows 3.10 to 3.13"
    return None


def check_targets(script: Any, pid: int | None, command: Sequence[str] | None,
                  probe_paths: Sequence[str], later: bool = False) -> bool:
    """Refuse (a script error at the first ``pystack``) a program whose
    ``pystack`` has no CPython to read: ``-p``'s process must run one pyebpf
    knows, ``-c``'s executable must be one, else a probed binary (uprobe,
    usdt) must be one.  ``later``: no process is named yet, a command may
    come (:meth:`pyebpf.lang.api.BtProgram.start`): True instead of the
    error when that is all that is missing."""
    node = uses_pystack(script)
    if node is None:
        return False
    why: str | None
    if pid is not None:
        from ..symbols.python import PythonProcess, find_python
        got = find_python(pid)
        why = None if isinstance(got, PythonProcess) else \
            got if isinstance(got, str) else f"pid {pid} runs no CPython"
    elif command:
        import shutil
        exe = shutil.which(command[0])
        why = binary_python(exe) if exe else f"{command[0]}: command not found"
    else:
        found = [binary_python(p) for p in probe_paths]
        why = None if any(w is None for w in found) else (
            found[0] if found else "needs a CPython process: -p PID, -c CMD, or a "
            "uprobe or usdt probe in a CPython binary")
        if why is not None and later and not found:
            return True
    if why is not None:
        from .positions import script_error
        raise script_error(script, node.pos, f"pystack: {why}", None)
    return False


class PyStackNames:
    """Names the ``pystack`` ids of one run from its live maps: configures
    the CPython processes (:meth:`configure`), then turns an id into frames
    (:meth:`frames`)."""

    def __init__(self, live: dict[str, Any]) -> None:
        self.live = live
        #: pid -> its CPython (the layout, and the names read so far)
        self.processes: dict[int, PythonProcess] = {}
        self._cache: dict[int, list[tuple[int, str, str | None]]] = {}

    def configure(self, pid: int, wait: float = 0.0) -> str | None:
        """Tell the program ``pid``'s layout (waiting up to ``wait`` seconds
        for a process just exec'd to map its interpreter: until the loader
        has mapped it whole, its ``_PyRuntime`` may not read as one yet);
        why not, when it cannot be walked."""
        import time

        from ..symbols.python import PythonProcess, config_values, find_python
        deadline = time.monotonic() + wait
        while True:
            got = find_python(pid)
            if (isinstance(got, PythonProcess) and got.layout is not None) or \
                    time.monotonic() >= deadline:
                break
            time.sleep(0.002)
        if not isinstance(got, PythonProcess) or got.layout is None:
            return got if isinstance(got, str) else f"pid {pid} runs no CPython"
        self.processes[pid] = got
        vals = config_values(got.layout, got.runtime)
        self.live["bt_pyconf"][struct.pack("<I", pid)] = struct.pack(f"<{len(vals)}Q", *vals)
        return None

    def configure_binaries(self, paths: Sequence[str]) -> None:
        """:meth:`configure` every process running one of ``paths`` now."""
        wanted = {os.path.realpath(p) for p in paths}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/maps") as f:
                    files = {line.split(None, 5)[5].strip() for line in f
                             if line.count(" ") >= 5 and "/" in line}
            except (OSError, IndexError):
                continue
            if files & wanted:
                self.configure(int(entry))

    def frames(self, value: int) -> list[tuple[int, str, str | None]]:
        """``(0, frame, None)`` per Python frame of the stack ``value``,
        innermost first (the walk's status last when it did not end well)."""
        got = self._cache.get(value)
        if got is None:
            got = self._cache[value] = self._read(value)
        return got

    def _read(self, value: int) -> list[tuple[int, str, str | None]]:
        from ..symbols.python import CODE_KEY, python_runs
        from .pywalk import PY_OK, PY_STATUS
        if not value:
            return []
        try:
            rec = bytes(self.live["bt_pystacks"][value])
        except (KeyError, OSError):
            return [(0, "[python stack lost]", None)]
        pid, _tid, n, status, _ = RECORD.unpack_from(rec, 0)
        proc = self.processes.get(pid)
        if proc is None or proc.layout is None:
            return [(0, f"[python stack of pid {pid}: not configured]", None)]
        raw = [struct.unpack_from("<QQ", rec, RECORD.size + 16 * i) for i in range(min(n, FRAMES))]
        out: list[tuple[int, str, str | None]] = []
        for run in python_runs(raw, proc.layout.version):
            for code, instr in run:
                cached = None
                if not proc.has_code(code):
                    try:
                        cached = bytes(self.live["bt_pycode"][CODE_KEY.pack(pid, 0, code)])
                    except (KeyError, OSError):
                        pass
                out.append((0, proc.frame_name(code, instr, cached), None))
        if status != PY_OK:
            out.append((0, f"[python stack: {PY_STATUS.get(status, status)}]", None))
        return out


def merge_printed(plan: Any, entries: dict[Any, Any], names: PyStackNames) -> dict[Any, Any]:
    """``entries`` of a map keyed by ``pystack`` (alone or in a tuple) with
    the keys that print alike merged (two ids whose frames differ only in
    the instruction within one line): the first id stands for them, the
    values add up (counts, sums, an average's count and total, histogram
    buckets; min and max keep theirs)."""
    key = plan.key
    if key is None:
        return entries
    elems = tuple(key.elems) if key.kind == "tuple" else (key,)
    if not any(t.kind == "pystack" for t in elems):
        return entries
    seen: dict[tuple[Any, ...], Any] = {}
    out: dict[Any, Any] = {}
    for k, v in entries.items():
        parts = k if key.kind == "tuple" else (k,)
        shown = tuple(tuple(f for _, f, _ in names.frames(int(x))) if t.kind == "pystack" else x
                      for t, x in zip(elems, parts))
        first = seen.setdefault(shown, k)
        out[first] = v if first not in out else _combined(plan.kind, out[first], v)
    return out


def _combined(kind: str, a: Any, b: Any) -> Any:
    """Two values of one map kind as one."""
    if kind == "min":
        return min(a, b)
    if kind == "max":
        return max(a, b)
    if isinstance(a, dict):
        return {k: a.get(k, 0) + b.get(k, 0) for k in {**a, **b}}
    if isinstance(a, tuple):
        return tuple(x + y for x, y in zip(a, b))
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    return b                                     # (a plain value: the last one set)
