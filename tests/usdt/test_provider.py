"""USDT probes defined from Python (pyebpf.usdt.Provider): the ELF pyebpf
writes, firing, semaphores, tracing by pyebpf and by bpftrace, lifetime."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from pyebpf.errors import StateError, UsdtError
from pyebpf.usdt import Provider, UsdtFile, usdt
from pyebpf.usdt.provider import build_provider_elf, _arg_type

from usdt_tracelib import wait_events
from waiting import read_line, wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# ---------------------------------------------------------------------------
# the ELF (pure)

def _types(*ts):
    return [_arg_type(t) for t in ts]


def test_elf_notes_decode(tmp_path):
    lay = build_provider_elf("myapp", [("request", _types(int, "u32", str)),
                                       ("many", _types(*["s16"] * 8)),
                                       ("none", [])])
    f = UsdtFile.from_bytes(lay.image, "mem.so")
    assert f.elf.elf_type == "ET_DYN" and f.elf.arch == "x86_64" and f.elf.traceable
    notes = {n.name: n for n in f.notes()}
    assert notes["request"].args == "-8@%rdi 4@%esi 8@%rdx"
    assert notes["many"].args == ("-2@%di -2@%si -2@%dx -2@%cx -2@%r8w -2@%r9w "
                                  "-2@8(%rsp) -2@16(%rsp)")
    assert notes["none"].args == ""
    for name, n in notes.items():
        assert n.offset == lay.stubs[name]                     # the nop
        assert lay.image[n.offset] == 0x90 and lay.image[n.offset + 1] == 0xC3
        assert n.semaphore_offset == lay.semaphores[name]
        assert n.base == f.elf.stapsdt_base
        assert all(a.decodable for a in n.arguments)


def test_elf_is_well_formed_for_binutils(tmp_path):
    if shutil.which("readelf") is None:
        pytest.skip("readelf is not installed")
    lay = build_provider_elf("myapp", [("request", _types(int, str)), ("done", [])])
    path = tmp_path / "p.so"
    path.write_bytes(lay.image)
    r = subprocess.run(["readelf", "-W", "-a", "-n", str(path)], capture_output=True,
                       text=True, env={**os.environ, "LC_ALL": "C"})
    assert r.returncode == 0 and "Warning" not in r.stderr and "Error" not in r.stderr, r.stderr
    out = r.stdout
    for want in ("DYN (Shared object file)", "Advanced Micro Devices X86-64",
                 ".note.stapsdt", ".stapsdt.base", ".probes", "GNU_STACK",
                 "Provider: myapp", "Name: request", "Arguments: -8@%rdi 8@%rsi",
                 "myapp_request_semaphore", "myapp_done", "(SONAME)"):
        assert want in out, want


def test_pyebpf_list_shows_it(tmp_path):
    app = Provider("listed")
    app.probe("evt", "s32", str)
    with app:
        r = subprocess.run([sys.executable, "-m", "pyebpf", "list", app.path], capture_output=True,
                           text=True, env={**os.environ, "PYTHONPATH": ROOT})
    assert r.returncode == 0, r.stderr
    assert "listed:evt" in r.stdout and "-4@%edi" in r.stdout and "semaphore" in r.stdout


def test_argument_types():
    assert _arg_type(int).spec(0) == "-8@%rdi"
    assert _arg_type("u8").spec(5) == "1@%r9b"
    assert _arg_type("int32").spec(6) == "-4@8(%rsp)"
    import ctypes
    assert _arg_type(ctypes.c_uint16).spec(1) == "2@%si"
    assert _arg_type(bytes).string and _arg_type("char *").string
    for bad in (float, "double", ctypes.c_double, "wat", object):
        with pytest.raises(UsdtError):
            _arg_type(bad)
    app = Provider("bad")
    with pytest.raises(UsdtError, match="12"):
        app.probe("x", *[int] * 13)
    with pytest.raises(UsdtError, match="identifier"):
        app.probe("no-dash", int)
    with pytest.raises(UsdtError, match="identifier"):
        Provider("1bad")
    app.probe("x", int)
    with pytest.raises(UsdtError, match="already has"):
        app.probe("x", int)
    with pytest.raises(UsdtError, match="no probes"):
        Provider("empty").load()


# ---------------------------------------------------------------------------
# loaded, fired, traced

@pytest.mark.kernel
def test_fire_is_traced_by_pyebpf_with_every_type(no_fd_leak):
    app = Provider("pytrace")
    all_types = app.probe("all", int, "u64", "s32", "u32", "s16", "u16", "s8", "u8", "ptr", str,
                          "s64", "u32")
    values = (-5_000_000_000, 2**64 - 2, -70000, 4_000_000_000, -300, 65535, -128, 255,
              0xDEADBEEF, "héllo", -(2**63), 7)
    with app:
        u = usdt(app.path, "pytrace:all")
        assert u.arg_count == 12
        with u.trace(strings={9: 32}, size=16384) as t:
            all_types.fire(*values)
            all_types.fire(*values[:9], b"bytes too", *values[10:])
            got = wait_events(t, 2)
        assert got == [values, values[:9] + ("bytes too",) + values[10:]]


@pytest.mark.kernel
def test_enabled_follows_the_semaphore(no_fd_leak):
    app = Provider("sema")
    a = app.probe("a", int)
    b = app.probe("b", int)
    assert not a.enabled and a.semaphore == 0          # not loaded yet
    with app:
        ua = a.usdt()
        assert ua.has_semaphore
        assert (a.semaphore, b.semaphore) == (0, 0)
        with ua.count() as c1:
            assert a.enabled and a.semaphore == 1 and not b.enabled
            with ua.count() as c2:
                # one uprobe (inode, offset) shared by two tracers: the kernel
                # counts the breakpoint, not its consumers
                assert a.semaphore == 1
                a.fire(1)
            assert a.enabled                           # c1 still attached
            a.fire(2)
            assert (c1.value, c2.value) == (2, 1)   # counted in fire(): nothing to wait for
        assert not a.enabled and a.semaphore == 0


@pytest.mark.kernel
def test_lazy_load_and_close(no_fd_leak):
    app = Provider("lazy")
    p = app.probe("go", int)
    assert app.path is None and not app.loaded
    p.fire(1)                                          # loads on first fire
    assert app.loaded and app.path.startswith(f"/proc/{os.getpid()}/fd/")
    fd = int(app.path.rsplit("/", 1)[1])
    assert os.readlink(f"/proc/self/fd/{fd}").startswith("/memfd:pyebpf-usdt-lazy")
    with pytest.raises(UsdtError, match="already loaded"):
        app.probe("late", int)
    app.close()
    app.close()                                        # idempotent
    assert not os.path.exists(f"/proc/self/fd/{fd}") or \
        not os.readlink(f"/proc/self/fd/{fd}").startswith("/memfd:pyebpf-usdt-lazy")
    assert "memfd:pyebpf-usdt-lazy" not in open("/proc/self/maps").read()
    with pytest.raises(UsdtError, match="closed"):
        p.fire(2)
    assert not p.enabled


def test_path_is_none_before_load_and_refused_after_close(tmp_path, no_fd_leak):
    """Provider.path: None until loaded, the object's path while loaded, and a
    StateError once closed (the path it named is gone: no stale path for a tracer)."""
    for directory in (None, tmp_path):
        app = Provider("pathy", directory=directory)
        app.probe("go", int)
        assert app.path is None
        app.load()
        path = app.path
        assert path is not None and os.path.exists(path)
        app.close()
        assert not os.path.exists(path) or not os.readlink(path).startswith("/memfd:pyebpf")
        with pytest.raises(StateError, match="provider 'pathy' is closed.*gone"):
            app.path
        assert "closed" in repr(app)
    never = Provider("never")
    never.close()
    with pytest.raises(StateError, match="never loaded"):
        never.path


@pytest.mark.kernel
def test_directory_mode(tmp_path):
    app = Provider("ondisk", directory=tmp_path)
    p = app.probe("evt", "s32")
    with app:
        assert os.path.dirname(app.path) == str(tmp_path) and os.path.isfile(app.path)
        with app.usdt("evt").trace() as t:
            p.fire(-3)
            assert wait_events(t, 1) == [(-3,)]
        path = app.path
    assert not os.path.exists(path)


@pytest.mark.kernel
def test_found_through_the_pid_alone():
    app = Provider("bypid")
    p = app.probe("evt", "u16")
    with app:
        u = usdt(None, "bypid:evt", pid=os.getpid())
        assert len(u.probes) == 1
        with u.trace() as t:
            p.fire(4242)
            assert wait_events(t, 1) == [(4242,)]


CHILD = textwrap.dedent("""
    import sys
    sys.path.insert(0, {root!r})
    from pyebpf.usdt import Provider
    app = Provider("child")
    evt = app.probe("evt", int, str)
    app.load()
    print(app.path, flush=True)
    for line in sys.stdin:
        evt.fire(int(line), "n=" + line.strip())
        print(int(evt.enabled), flush=True)
""")


@pytest.mark.kernel
def test_traced_from_another_process():
    """The path a provider prints (/proc/PID/fd/N) works from elsewhere."""
    child = subprocess.Popen([sys.executable, "-c", CHILD.format(root=ROOT)], text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        path = read_line(child.stdout, "the child to load its provider").strip()
        with usdt(path, "child:evt").trace(strings=[1]) as t:
            child.stdin.write("17\n")
            child.stdin.flush()
            assert read_line(child.stdout, "the child to fire").strip() == "1"  # enabled there
            assert wait_events(t, 1) == [(17, "n=17")]
        child.stdin.write("18\n")
        child.stdin.flush()
        assert read_line(child.stdout, "the child to fire").strip() == "0"
    finally:
        child.kill()
        child.wait()
        child.stdin.close()
        child.stdout.close()


# ---------------------------------------------------------------------------
# bpftrace

@pytest.mark.kernel
def test_bpftrace_traces_a_provider():
    bpftrace = shutil.which("bpftrace")
    if bpftrace is None:
        pytest.skip("bpftrace is not installed")
    app = Provider("myapp")
    req = app.probe("request", int, "u32", str, "s8", "u16", "s32")
    with app:
        script = (f'usdt:{app.path}:myapp:request {{ printf("%d %u %s %d %u %d\\n", arg0, arg1, '
                  'str(arg2), arg3, arg4, arg5); if (++@n == 2) { exit(); } }')
        proc = subprocess.Popen([bpftrace, "-e", script], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            # bpftrace holds the semaphore once attached
            wait_until(lambda: req.enabled or proc.poll() is not None, "bpftrace to attach", 60)
            if not req.enabled:
                pytest.fail(f"bpftrace did not attach: {proc.communicate(timeout=30)}")
            req.fire(-5, 4_000_000_000, "GET /", -3, 65535, -70000)
            req.fire(6, 1, "POST /x", 127, 0, 2**31 - 1)
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        lines = [ln for ln in out.splitlines() if ln and not ln.startswith(("Attaching", "@n"))]
        assert lines == ["-5 4000000000 GET / -3 65535 -70000",
                         "6 1 POST /x 127 0 2147483647"], (out, err)
        assert not req.enabled                     # bpftrace gone: semaphore back to 0


@pytest.mark.kernel
def test_one_probe_in_two_files_of_a_process(no_fd_leak):
    """Two loaded objects with the same provider:probe but different argument
    types: found through the pid, attached as one link, each file's hits
    read with its own spec (cookie dispatch across files)."""
    a, b = Provider("dual"), Provider("dual")
    ea = a.probe("evt", "s8", "u64")
    eb = b.probe("evt", "u32", "s16")
    with a, b:
        u = usdt(None, "dual:evt", pid=os.getpid())
        assert sorted(os.stat(p).st_ino for p in u.paths) == \
            sorted(os.stat(p).st_ino for p in (a.path, b.path))
        assert len(u.reader.groups) == 2 and u.reader.dispatches(0)
        assert "2 files" in u.describe()
        with u.trace() as t:
            assert len(t.link.link_ids) == 2 and t.link.kind == "usdt"
            ea.fire(-1, 2**64 - 1)
            eb.fire(4_000_000_000, -2)
            got = wait_events(t, 2)
        # arg signedness for decoding is per probe (any location signed -> signed)
        assert got == [(-1, -1), (4_000_000_000, -2)]
        assert t.link.closed


def test_a_provider_collected_unclosed_does_not_shadow_a_later_one(no_fd_leak):
    """A provider collected without close() leaves its object loaded (its code
    may still be called through a kept ``fire``); a later provider whose memfd
    gets the same number still loads its own object, not that one."""
    import gc
    old = Provider("shadowed")
    old.probe("first", "u32")
    old.load()
    number = old._res.fd
    del old
    gc.collect()
    new = Provider("shadowing")
    fire = new.probe("second", "u64")
    with new:
        assert new._res.fd == number          # the same /proc/self/fd/N
        fire.fire(7)
        assert new.usdt("second").name == "second"
