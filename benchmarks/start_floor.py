"""The floor under ``pyebpf bt``'s start-up (``bench_lang``'s case 1): what a
Python process pays to make the same system calls with nothing else to do.

The parent compiles the start script of :mod:`benchmarks.bench_lang` with
pyebpf and writes what the kernel is given -- each map's shape, each
program's instructions (map references left to patch), the uprobes' file
and offsets -- to a file (``marshal``: the child reads it without importing
anything).  The child, a fresh interpreter, imports only pyebpf's cffi
declaration (:mod:`pyebpf.kernel.ffi`) and then: creates the maps, loads
the programs (no BTF, no verifier log), runs BEGIN (``BPF_PROG_TEST_RUN``),
attaches the two uprobes (``uprobe_multi`` links), prints ``go`` (BEGIN's
record is in the ring buffer: bpftrace too prints BEGIN's output once every
probe is attached) and waits for SIGINT.  No parsing, no
analysis, no code generation, no ELF reading, no formatting -- and no
overlap: the calls come one after the other, the first uprobe's wait in the
kernel (an RCU grace period, ~10-15 ms) in full, where ``pyebpf bt`` primes
it in a thread at its start (:func:`pyebpf.kernel.bare.prime_uprobes`): its
wall time may come in under this floor.

Measured as ``bench_lang`` measures (wall time to the ``go`` line, the
process's whole CPU time), also with ``runpy`` imported first (what
``python -m pyebpf`` costs before any of pyebpf runs), alternately with
``python -c pass`` (the
interpreter's own start) and ``pyebpf bt`` (its compiled-program cache
emptied, then warm: see :mod:`benchmarks.bench_lang`).

Run: ``python -m benchmarks.start_floor [ROUNDS]``.  A measuring helper,
not a test (and not one of ``python -m benchmarks``'s cases).
"""
from __future__ import annotations

import marshal
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_lang import PYCACHE, ROOT, SCRIPTS, _stop, _wait_line, start_once

#: the child: the system calls of a start with the work before them done already
CHILD = r'''
import marshal, mmap, os, sys, _signal
from pyebpf.kernel.ffi import NR_BPF, ffi, sys_bpf
spec = marshal.loads(open(sys.argv[1], "rb").read())
SIZE = ffi.sizeof("union bpf_attr")
keep = []
def bpf(cmd, attr):
    r = sys_bpf(NR_BPF, cmd, attr, SIZE)
    if r < 0:
        raise OSError(ffi.errno, f"bpf({cmd})")
    return r
def ptr(data):
    c = ffi.from_buffer(data)
    keep.append((data, c))
    return int(ffi.cast("uintptr_t", c))
fds = []
for mtype, ksize, vsize, entries, flags in spec["maps"]:
    a = ffi.new("union bpf_attr *")
    m = a.map_create
    m.map_type, m.key_size, m.value_size, m.max_entries, m.map_flags = mtype, ksize, vsize, entries, flags
    fds.append(bpf(0, a))                                   # BPF_MAP_CREATE
gpl = ffi.new("char[]", b"GPL")
progs = []
for ptype, expected, code, relocs, kind, path, offsets in spec["progs"]:
    code = bytearray(code)
    for at, mi in relocs:
        code[at + 4:at + 8] = fds[mi].to_bytes(4, "little")
    a = ffi.new("union bpf_attr *")
    p = a.prog_load
    p.prog_type, p.insn_cnt, p.insns = ptype, len(code) // 8, ptr(code)
    p.license, p.expected_attach_type = int(ffi.cast("uintptr_t", gpl)), expected
    progs.append((bpf(5, a), kind, path, offsets))          # BPF_PROG_LOAD
for fd, kind, _, _ in progs:
    if kind == "BEGIN":
        a = ffi.new("union bpf_attr *")
        a.test.prog_fd = fd
        bpf(10, a)                                          # BPF_PROG_TEST_RUN
rb = fds[spec["ringbuf"]]
page = mmap.PAGESIZE
producer = mmap.mmap(rb, page, mmap.MAP_SHARED, mmap.PROT_READ, offset=page)
links = []
try:                                                        # (SIGINT may come before the attaching ends)
    for fd, kind, path, offsets in progs:
        if path:
            a = ffi.new("union bpf_attr *")
            lc = a.link_create
            lc.prog_fd, lc.attach_type = fd, 48             # BPF_TRACE_UPROBE_MULTI
            u = lc.uprobe_multi
            u.path = ptr(bytearray(path.encode() + b"\0"))
            u.offsets = ptr(bytearray(b"".join(o.to_bytes(8, "little") for o in offsets)))
            u.cnt = len(offsets)
            links.append(bpf(28, a))                        # BPF_LINK_CREATE
    if int.from_bytes(producer[:8], "little") > 0:          # attached; BEGIN's record is there
        sys.stdout.write("go\n")
        sys.stdout.flush()
    _signal.pause()
except KeyboardInterrupt:
    pass
for fd in links + [p[0] for p in progs] + fds:
    os.close(fd)
'''


def write_spec(loop: str, path: Path) -> None:
    """What the kernel is given for the start script, as the child reads it."""
    from pyebpf import lang
    from pyebpf.isa import opcodes as op
    unit = lang.compile(SCRIPTS["start"].format(loop=loop)).generate()
    specs = unit.all_map_specs()
    names = list(specs)
    maps = [(int(s.map_type), s.key_size, s.value_size, s.max_entries, s.flags)
            for s in specs.values()]
    progs = []
    for plan in unit.probes:
        ptype, opts = plan.load_args()
        code = bytearray()
        relocs = []
        for insn in plan.program.finalize():
            if insn.map_ref is not None:
                relocs.append((len(code), names.index(insn.map_ref)))
                insn = insn.copy()
                insn.src = op.PSEUDO_MAP_FD
            code += insn.encode()
        source = plan.source
        file = getattr(source, "path", None) or ""
        offsets = [loc.file_offset for loc in getattr(source, "locations", ())] if file else []
        progs.append((ptype, opts.get("expected_attach_type", 0), bytes(code), relocs,
                      plan.kind, file, offsets))
    path.write_bytes(marshal.dumps({"maps": maps, "progs": progs,
                                    "ringbuf": names.index(unit.ringbuf.name)}))


def _env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONPYCACHEPREFIX=str(PYCACHE))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def floor_once(spec: Path, runpy: bool = False) -> dict[str, float]:
    """The child's wall time to ``go`` and its whole CPU time; ``runpy``:
    the child imports what ``python -m`` imports first (``runpy``: ~4 ms
    of CPU that ``pyebpf bt``, run as ``python -m pyebpf``, pays too)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    code = "import runpy\n" + CHILD if runpy else CHILD
    proc = subprocess.Popen([sys.executable, "-c", code, str(spec)], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=_env())
    try:
        t1 = _wait_line(proc, "go")
    finally:
        _stop(proc)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"first_event_s": t1 - t0, "process_cpu_s": (after.ru_utime - before.ru_utime)
            + (after.ru_stime - before.ru_stime)}


def interpreter_once() -> dict[str, float]:
    """``python -c pass``: the interpreter's start and exit alone."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True, env=_env())
    t1 = time.perf_counter()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"first_event_s": t1 - t0, "process_cpu_s": (after.ru_utime - before.ru_utime)
            + (after.ru_stime - before.ru_stime)}


def run(rounds: int = 9) -> dict[str, Any]:
    """Medians (ms) of the floor, the interpreter alone, pyebpf bt and bpftrace."""
    from benchmarks.targets import build_loop
    loop = build_loop()
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "start.marshal"
        write_spec(loop, spec)
        floor_once(spec)                       # (warm-up: the bytecode cache)
        cases: dict[str, Any] = {"floor": lambda: floor_once(spec),
                                 "floor + runpy": lambda: floor_once(spec, runpy=True),
                                 "python -c pass": interpreter_once,
                                 "pyebpf bt cold": lambda: start_once("pyebpf", loop),
                                 "pyebpf bt warm": lambda: start_once("pyebpf-warm", loop),
                                 "bpftrace": lambda: start_once("bpftrace", loop)}
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in cases}
        for _ in range(rounds):
            for name, once in cases.items():
                runs[name].append(once())
    return {name: {key: round(statistics.median(r[key] for r in rs) * 1e3, 1)
                   for key in ("first_event_s", "process_cpu_s")} for name, rs in runs.items()}


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 9
    for name, med in run(rounds).items():
        print(f"{name:16} wall {med['first_event_s']:6.1f} ms  cpu {med['process_cpu_s']:6.1f} ms")


if __name__ == "__main__":
    main()
