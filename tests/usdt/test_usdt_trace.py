"""USDT tracing against the real kernel: every argument form of real
compiler output and of hand-written specs, multi-location probes whose specs
differ, globals without a PID, CPython's probes, semaphores through ref_ctr,
errors, and the trace-source contract."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from systools import LIBJVM, LIBPYTHON_NAME

from pyebpf.errors import UsdtProbeLookupError, UsdtSpecError, UsdtTargetError
from pyebpf.maps import HashMap
from pyebpf.probes.usdt_source import usdt_probe_source
from pyebpf.program import R0, R1, R6, R7, Program
from pyebpf.usdt import ArgReader, UsdtFile, attach_usdt, find_usdt, read_probes, usdt

from usdt_testlib import FORMS_MAIN_C, VARIANTS, build_forms, expected_table
from usdt_tracelib import (DUP_C, HAND_C, HAND_VARIANTS, PYTHON, Waiting, as_int, compile_c,
                           need, parse_lines, read_u16, runtime_address, wait_events)

# (each test that needs the kernel is marked `kernel`; the others run under every Python)

FORM_PROBES = ["consts", "params", "globals", "arrays", "index", "struct_ptr", "pointers",
               "many", "sema"]


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("usdt_trace")


def forms_build(variant: str, build_dir) -> tuple[str, str]:
    """(program to run, file holding the probes) for a usdt_forms variant."""
    cc, _flags, shared = VARIANTS[variant]
    need(cc)
    out = build_dir / (f"libusdt_forms-{variant}.so" if shared else f"usdt_forms-{variant}")
    if not out.exists():
        build_forms(variant, build_dir)
    if not shared:
        return str(out), str(out)
    driver = compile_c(build_dir / f"usdt_forms_main-{variant}", [FORMS_MAIN_C], "gcc",
                       libs=[f"-L{build_dir}", f"-l:{out.name}", f"-Wl,-rpath,{build_dir}"])
    return str(driver), str(out)


def hand_build(variant: str, build_dir) -> str:
    cc, flags = HAND_VARIANTS[variant]
    return str(compile_c(build_dir / f"usdt_hand-{variant}", [HAND_C], cc, flags))


def _close_all(objs) -> None:
    for o in objs:
        o.close()


# ---------------------------------------------------------------------------
# argument forms: compiler output

@pytest.mark.kernel
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_every_form_reads_the_value_passed(variant, build_dir):
    """usdt_forms in every build (gcc -O0/-O2, -no-pie, -fPIC -shared, clang):
    each integer argument of each probe equals what the program printed
    (signed/unsigned, 1/2/4/8 bytes, globals, arrays, struct fields,
    pointers, 11 arguments, the semaphore probe)."""
    exe, traced = forms_build(variant, build_dir)
    table = expected_table()
    traces = {}
    try:
        for probe in FORM_PROBES:
            ints = [i for i, (_size, _signed, is_float) in enumerate(table[probe])
                    if not is_float]
            traces[probe] = (ints, usdt(traced, f"forms:{probe}").trace(ints, size=16384))
        out = subprocess.run([exe, "2"], capture_output=True, text=True, check=True,
                             timeout=30).stdout
        printed = parse_lines(out)
        for probe, (ints, t) in traces.items():
            rows = printed[probe]
            if probe == "sema":
                assert all(r[0] == "1" for r in rows), "the semaphore was not enabled"
                rows = [r[1:] for r in rows]
            expected = [tuple(as_int(r[i]) for i in ints) for r in rows]
            got = wait_events(t, len(expected))
            specs = UsdtFile(traced).probes("forms", probe)[0].locations[0].args
            # (per-CPU perf rings: a process that changed CPUs has its events CPU by CPU)
            assert sorted(got) == sorted(expected), f"{variant} forms:{probe} ({specs})"
    finally:
        _close_all(t for _i, t in traces.values())


def test_globals_use_every_symbol_form(build_dir):
    """The builds really exercise sym(%rip), sym+off(%rip), off+sym(%rip),
    sym(%reg), sym(,%idx,s) and sym@GOTPCREL(%rip) (so the test above covers them)."""
    kinds = set()
    for variant in ("gcc-O2", "gcc-O2-nopie", "gcc-O2-shared"):
        _exe, traced = forms_build(variant, build_dir)
        for pr in UsdtFile(traced).probes("forms"):
            for n in pr.locations:
                for a in n.arguments:
                    if a.decodable and a.symbol:
                        kinds.add((a.kind.value, a.offset != 0, a.index is not None))
    assert ("rip", False, False) in kinds and ("rip", True, False) in kinds
    assert ("sym_reg", False, False) in kinds and ("sym_index", False, True) in kinds
    assert ("gotpcrel", False, False) in kinds


# ---------------------------------------------------------------------------
# hand-written specs and multi-location probes

@pytest.mark.kernel
@pytest.mark.parametrize("variant", list(HAND_VARIANTS))
def test_hand_written_forms_and_multi_location(variant, build_dir):
    """%ah-style high bytes, every sub-register width, SIB without a base,
    $sym and $sym+off, sym+off/off+sym rip-relative, GOTPCREL (no GOT slot
    here: computed from the symbol), numeric off(%rip); and hand:multi, 7
    locations with 5 different specs (inlined copies), globals at two of
    them: every location reads its own spec."""
    exe = hand_build(variant, build_dir)
    probes = {n: usdt(exe, f"hand:{n}") for n in ("regs", "mem", "multi")}
    multi = probes["multi"]
    assert len(multi.locations) == 7
    if variant.startswith("gcc-O2"):   # -O0 and clang spill arguments to (shared) stack slots
        assert len(multi.reader.groups) == 5        # m1 and m5 share a spec
        assert multi.reader.uses_cookie and multi.reader.dispatches(0)
    traces = [(n, pr.trace(size=16384)) for n, pr in probes.items()]
    try:
        out = subprocess.run([exe, "3"], capture_output=True, text=True, check=True).stdout
        printed = parse_lines(out)
        for n, t in traces:
            expected = [tuple(int(x) for x in row) for row in printed[n]]
            got = sorted(wait_events(t, len(expected)))       # (per-CPU perf rings)
            assert got == sorted(expected), f"hand:{n} ({variant})"
    finally:
        _close_all(t for _n, t in traces)


@pytest.mark.kernel
def test_multi_location_cookies_and_dispatch():
    """The dispatch code reads the cookie only where specs differ; cookies
    carry the spec group in their low 16 bits and the location's address above."""
    from pyebpf.usdt.args import cookie_address, cookie_group
    path = LIBJVM
    if not os.path.exists(path):
        pytest.skip("no libjvm.so")
    # a libjvm probe with many locations and differing specs
    best = max(read_probes(path, "hotspot"), key=lambda pr: len({n.args for n in pr.locations}))
    r = ArgReader(best)
    assert len(r.groups) > 1 and r.uses_cookie
    for n, c in zip(r.locations, r.cookies):
        assert cookie_address(c) == n.address
        assert r.groups[cookie_group(c)][1] == n.arguments
    p = Program("jvm")
    p.mov(R6, R1)
    for i in range(r.arg_count):
        try:
            r.check(i)
        except UsdtSpecError:
            continue
        r.emit(p, R7, i, R6)
    p.ret(0)
    from pyebpf.attach import load_uprobe_program
    with load_uprobe_program(p):        # the verifier accepts the dispatch
        pass


@pytest.mark.kernel
def test_ambiguous_static_needs_a_choice(build_dir):
    """Two static variables named s_dup: reading -4@s_dup(%rip) names both
    (libbpf/usdt#13); symbols={...} picks one and reads it without a PID."""
    exe = str(compile_c(build_dir / "usdt_dup", list(DUP_C), "gcc", ["-O2"]))
    u = usdt(exe, "dup:read")
    assert u.locations[0].args == "-4@s_dup(%rip)"
    p = Program("dup")
    p.mov(R6, R1)
    with pytest.raises(UsdtSpecError, match=r"s_dup.*ambiguous.*0x[0-9a-f]+.*0x[0-9a-f]+"):
        u.read_arg(p, R7, 0, R6)
    # the s_dup that follows usdt_dup.c's FILE symbol is the probe's
    syms = subprocess.run(["readelf", "-sW", exe], capture_output=True, text=True).stdout
    mine, cur = None, None
    for line in syms.splitlines():
        f = line.split()
        if len(f) >= 8 and f[3] == "FILE":
            cur = f[7]
        elif len(f) >= 8 and f[7] == "s_dup" and cur == "usdt_dup.c":
            mine = int(f[1], 16)
    assert mine is not None
    u = usdt(exe, "dup:read", symbols={"s_dup": mine})
    with u.trace() as t:
        out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
        assert wait_events(t, 1) == [(int(out.split()[1]),)]


# ---------------------------------------------------------------------------
# CPython's probes, without a PID

def _python() -> str:
    if not os.path.exists(PYTHON):
        pytest.skip(f"{PYTHON} is not installed")
    return PYTHON


@pytest.mark.kernel
def test_python_gc_start_counted_exactly_without_pid():
    """python:gc__start (semaphore-guarded) counted in the kernel, no PID:
    N gc.collect() calls give exactly N generation-2 hits from the child
    (os._exit skips the collections of interpreter shutdown)."""
    py = _python()
    n = 37
    u = usdt(py, "python:gc__start")
    assert u.has_semaphore and u.pid is None
    with HashMap("u32", "u64", 256, name="gc_by_pid") as counts:
        p = Program("gc_count")
        p.mov(R6, R1)
        u.read_arg(p, R7, 0, R6)               # generation: -4@112(%rsp)
        p.jne(R7, 2, "out")
        p.call("get_current_pid_tgid")
        p.rsh(R0, 32)
        key = p.stack_store(R0, 4)
        p.map_increment(counts, key)
        p.label("out")
        p.ret(0)
        with u.attach(p) as link:
            assert link.kind == "usdt"
            child = subprocess.run([py, "-c", "import gc, os; print(os.getpid(), flush=True); "
                                    f"[gc.collect() for _ in range({n})]; os._exit(0)"],
                                   capture_output=True, text=True, check=True)
            pid = int(child.stdout)
        assert counts[pid] == n


@pytest.mark.kernel
def test_python_function_entry_strings(tmp_path):
    """function__entry with its filename and function name read as strings
    (probe_read_user_str) and its line number.  CPython 3.11 fires it only
    while python:line is enabled and only for frames entered from C
    (cpython#98894), so python:line is attached too and the script calls
    through map().  Attached to the child's pid only: with python:line
    enabled every python3.11 on the machine would slow down."""
    py = _python()
    script = tmp_path / "traced_script.py"
    script.write_text("import sys\nsys.stdin.readline()\n\n\ndef traced_fn(x):\n"
                      "    return x\n\n\nlist(map(traced_fn, range(3)))\n")
    child = subprocess.Popen([py, str(script)], stdin=subprocess.PIPE, text=True)
    try:
        fe = usdt(py, "python:function__entry", pid=child.pid)
        line = usdt(py, "python:line", pid=child.pid)
        with fe.trace(strings={0: 128, 1: 64}, size=1 << 20) as t, line.count():
            child.communicate("go\n", timeout=30)
            events = []
            while True:
                batch = t.read(0.3)
                if not batch:
                    break
                events += batch
        assert t.lost == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    hits = [e for e in events if e[1] == "traced_fn"]
    assert hits == [(str(script), "traced_fn", 5)] * 3
    assert all(e[0] != str(script) or e[1] in ("traced_fn", "<module>") for e in events)


@pytest.mark.kernel
def test_library_name_and_pid_targets(build_dir):
    """A library name resolves like bpftrace (libpython3.11), and with a pid
    alone every module of the process that has the probe is found."""
    try:
        u = usdt(LIBPYTHON_NAME, "python:gc__start")
    except UsdtTargetError:
        pytest.skip(f"no {LIBPYTHON_NAME}")
    assert LIBPYTHON_NAME in u.paths[0]
    exe, traced = forms_build("gcc-O2-shared", build_dir)
    w = Waiting([exe, "1"], env={**os.environ, "USDT_FORMS_WAIT": "1"})
    try:
        u = usdt(None, "forms:params", pid=w.pid)
        assert len(u.probes) == 1 and os.path.samefile(u.paths[0], traced)
        with u.trace(size=16384) as t:
            out = w.finish()
            row = parse_lines(out)["params"][0]
            assert wait_events(t, 1) == [tuple(int(x) for x in row)]
    finally:
        w.kill()


# ---------------------------------------------------------------------------
# semaphores

def _sema_case(exe: str, traced: str, probe: str, argv_tail: list[str], env: dict | None):
    u = usdt(traced, probe)
    (note,) = u.locations
    procs = []
    try:
        procs.append(Waiting([exe, *argv_tail], env=env))
        before = procs[0]
        addr_a = runtime_address(before.pid, traced, note.semaphore_address)
        assert read_u16(before.pid, addr_a) == 0
        with u.count():
            assert read_u16(before.pid, addr_a) == 1           # started before the attach
            procs.append(Waiting([exe, *argv_tail], env=env))
            after = procs[1]
            addr_b = runtime_address(after.pid, traced, note.semaphore_address)
            assert read_u16(after.pid, addr_b) == 1            # started after the attach
        assert read_u16(before.pid, addr_a) == 0               # detached: restored
        assert read_u16(after.pid, addr_b) == 0
    finally:
        for w in procs:
            w.kill()


@pytest.mark.kernel
@pytest.mark.parametrize("variant", ["gcc-O2", "gcc-O0-nopie", "gcc-O2-shared"])
def test_semaphore_through_ref_ctr(variant, build_dir):
    """forms:sema's semaphore: 0 before, 1 while attached in a process
    started before the attach and in one started after, 0 after detach --
    no PID given, nothing written to /proc/PID/mem (only read, here)."""
    exe, traced = forms_build(variant, build_dir)
    _sema_case(exe, traced, "forms:sema", ["1"], {**os.environ, "USDT_FORMS_WAIT": "1"})


@pytest.mark.kernel
def test_python_semaphore_through_ref_ctr(tmp_path):
    """The same for python:gc__start, on a private copy of python3.11 (so
    that tracers of the system's python elsewhere cannot change the count)."""
    py = shutil.copy(_python(), tmp_path / os.path.basename(_python()))
    _sema_case(py, py, "python:gc__start",
               ["-c", "import sys; print('ready', flush=True); sys.stdin.readline()"], None)


@pytest.mark.kernel
def test_semaphore_hits_fire_only_while_attached(build_dir):
    exe, traced = forms_build("gcc-O2", build_dir)
    u = usdt(traced, "forms:sema")
    with u.count() as c:
        out = subprocess.run([exe, "3"], capture_output=True, text=True).stdout
        assert [r[0] for r in parse_lines(out)["sema"]] == ["1", "1", "1"]
        assert c.value == 3          # counted in the child, before it went on: nothing to wait for
    out = subprocess.run([exe, "1"], capture_output=True, text=True).stdout
    assert parse_lines(out)["sema"][0][0] == "0"


# ---------------------------------------------------------------------------
# errors

def test_wrong_probe_name_lists_the_probes(build_dir):
    py = _python()
    with pytest.raises(UsdtProbeLookupError) as ei:
        usdt(py, "python:gc_start")
    msg = str(ei.value)
    assert "python:gc__start" in msg and "python:function__entry" in msg
    # close matches first
    assert ei.value.candidates[0] in ("python:gc__start", "python:gc__done")
    assert set(ei.value.candidates) >= {"python:line", "python:audit"}
    with pytest.raises(UsdtProbeLookupError, match="no USDT probe"):
        find_usdt(py, "nope", "gc__start")
    exe, _ = forms_build("gcc-O2", build_dir)
    with pytest.raises(UsdtProbeLookupError, match="forms:consts"):
        usdt(exe, "const")
    with pytest.raises(UsdtTargetError, match="cannot find"):
        usdt("libdoesnotexist42", "x:y")


def test_ambiguous_bare_name_lists_providers():
    from pyebpf.usdt import Provider
    a, b = Provider("prova"), Provider("provb")
    try:
        a.probe("same", int)
        a.load()
        # one file, one provider: the bare name is fine
        assert usdt(a.path, "same").provider == "prova"
    finally:
        a.close()
        b.close()
    # several providers with one name, in one file: forms has none, build a note file
    from usdt_testlib import ElfSpec, build_elf, note_bytes
    import tempfile
    notes = note_bytes("p1", "dup", "8@%rdi", loc=0x1000) + note_bytes("p2", "dup", "", loc=0x1010)
    with tempfile.NamedTemporaryFile(suffix=".so") as f:
        f.write(build_elf(ElfSpec(notes=notes)))
        f.flush()
        with pytest.raises(UsdtProbeLookupError, match="ambiguous.*p1:dup.*p2:dup") as ei:
            usdt(f.name, "dup")
        assert ei.value.candidates == ["p1:dup", "p2:dup"]
        assert usdt(f.name, "p2:dup").arg_count == 0


def test_float_argument_raises_only_when_read(build_dir):
    exe, traced = forms_build("gcc-O2", build_dir)
    u = usdt(traced, "forms:floats")          # 8f@%rdx 4f@%eax 8f@g_double(%rip) ...
    p = Program("f")
    p.mov(R6, R1)
    with pytest.raises(UsdtSpecError, match="float") as ei:
        u.read_arg(p, R7, 0, R6)
    assert ei.value.probe == "forms:floats" and ei.value.index == 0
    assert len(p.insns) == 1                    # nothing emitted by the failed read
    u.read_arg(p, R7, 0, R6, float_bits=True)   # the raw bits can be asked for
    many = usdt(traced, "forms:many")           # ... 8f@%rax last
    with pytest.raises(UsdtSpecError, match="argument 11 is a f64 float"):
        many.read_arg(p, R7, 11, R6)
    for i in range(11):
        many.read_arg(p, R7, i, R6)
    with pytest.raises(UsdtSpecError, match="no argument 12"):
        many.read_arg(p, R7, 12, R6)
    xmm = ArgReader([n for n in _synthetic_notes("8f@%xmm1 -4@%edi")])
    with pytest.raises(UsdtSpecError, match="SSE register"):
        xmm.emit(p, R7, 0, R6, float_bits=True)
    xmm.emit(p, R7, 1, R6)


def _synthetic_notes(args: str):
    from usdt_testlib import ElfSpec, build_elf, note_bytes
    from pyebpf.usdt import UsdtFile
    data = build_elf(ElfSpec(notes=note_bytes("syn", "p", args, loc=0x1000)))
    return UsdtFile.from_bytes(data, "/nonexistent/syn.so").notes()


def test_undecodable_argument_raises_only_when_read():
    r = ArgReader(_synthetic_notes("8@%rdi 4@%bogus -2@%si"))
    p = Program("u")
    p.mov(R6, R1)
    r.emit(p, R7, 0, R6)
    r.emit(p, R7, 2, R6)
    with pytest.raises(UsdtSpecError, match="bogus") as ei:
        r.emit(p, R7, 1, R6)
    assert ei.value.index == 1
    with pytest.raises(UsdtSpecError, match="r6-r9"):
        r.emit(p, R7, 0, R1)


def test_tls_and_unknown_symbol_raise_when_read():
    r = ArgReader(_synthetic_notes("8@%fs:16 -4@g_nowhere(%rip)"))
    p = Program("t")
    p.mov(R6, R1)
    with pytest.raises(UsdtSpecError, match="thread-local"):
        r.emit(p, R7, 0, R6)
    with pytest.raises(UsdtSpecError, match="g_nowhere"):
        r.emit(p, R7, 1, R6)


# ---------------------------------------------------------------------------
# lifetime

@pytest.mark.kernel
def test_no_fd_leak_and_semaphore_restored(no_fd_leak, build_dir):
    exe, traced = forms_build("gcc-O2", build_dir)
    w = Waiting([exe, "1"], env={**os.environ, "USDT_FORMS_WAIT": "1"})
    try:
        u = usdt(traced, "forms:sema")
        addr = runtime_address(w.pid, traced, u.locations[0].semaphore_address)
        for _ in range(2):
            with u.trace(size=8192) as t:
                assert read_u16(w.pid, addr) == 1
            assert t.link.closed
            c = u.count()
            c.close()
            loaded = u.load(_noop())
            link = attach_usdt(loaded, traced, "forms", "sema")
            assert read_u16(w.pid, addr) == 1
            link.detach()
            loaded.close()
            assert read_u16(w.pid, addr) == 0
    finally:
        w.kill()


def _noop() -> Program:
    p = Program("noop")
    p.ret(0)
    return p


# ---------------------------------------------------------------------------
# the trace-source contract

@pytest.mark.kernel
def test_usdt_probe_source_contract():
    from pyebpf.loader import load
    py = _python()
    src = usdt_probe_source(py, None, "gc__start")
    assert isinstance(src.prog_type, int) and src.arg_count == 1
    assert set(src.load_options) == {"expected_attach_type"}
    assert src.describe() == f"usdt:{py}:python:gc__start (1 location, semaphore)"
    assert src.arg_signed(0) and src.arg_size(0) == 4       # -4@112(%rsp)
    with HashMap("u32", "u64", 16, name="gen_count") as m:
        p = Program("src")
        p.mov(R6, R1)
        src.emit_arg(p, R7, 0, R6)
        key = p.stack_store(R7, 4)
        p.map_increment(m, key)
        p.ret(0)
        prog = load(p, src.prog_type, **src.load_options)
        try:
            child = subprocess.Popen([py, "-c", "import sys, gc; sys.stdin.readline(); "
                                      "[gc.collect() for _ in range(5)]; import os; os._exit(0)"],
                                     stdin=subprocess.PIPE, text=True)
            with src.attach(prog, pid=child.pid) as link:
                assert link.pid == child.pid
                child.communicate("go\n", timeout=10)
            assert m[2] == 5                    # only the child's full collections
        finally:
            prog.close()
    with pytest.raises(UsdtProbeLookupError):
        usdt_probe_source(py, "python", "nope")
    with pytest.raises(UsdtSpecError):
        usdt_probe_source(py, "python", "line").emit_arg(Program(), R7, 3, R6)
