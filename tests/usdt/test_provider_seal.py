"""The Provider's image is read-only for good: mode 0o555 and sealed
(F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL).

Another process opened ``/proc/PID/fd/N`` read-write, overwrote a probe stub
and the provider died with SIGILL (issue 11, item 2).  Here another process
tries every way of changing the file: as the same unprivileged user (mode
bits refuse the open; after a chmod the seals refuse the write) and as root
(whom mode bits do not stop: the seals refuse every change).  Tracers still
read and attach to it."""
from __future__ import annotations

import ctypes
import fcntl
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from pyebpf.usdt import Provider, UsdtFile, usdt
from pyebpf.usdt.provider import SEALS

from usdt_tracelib import wait_events

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
UD2 = b"\x0f\x0b"                      # what the attacker writes: SIGILL when run
NOBODY = ("--reuid=65534", "--regid=65534", "--clear-groups")

#: tries to change the file at argv[1] (writing argv[3] over the stub at offset
#: argv[2]); prints
#: what each attempt did: "ok" or the errno's name
ATTACK = textwrap.dedent("""
    import errno, json, mmap, os, sys
    path, offset, bad = sys.argv[1], int(sys.argv[2]), bytes.fromhex(sys.argv[3])
    out = {}

    def attempt(name, fn):
        try:
            r = fn()
            out[name] = "ok" if r is None or isinstance(r, int) else r.hex()
        except OSError as exc:
            out[name] = errno.errorcode.get(exc.errno, str(exc.errno))

    def tamper(prefix):
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError as exc:
            out[prefix + "open_rdwr"] = errno.errorcode[exc.errno]
            return
        out[prefix + "open_rdwr"] = "ok"
        attempt(prefix + "pwrite", lambda: os.pwrite(fd, bad, offset))
        attempt(prefix + "write", lambda: os.write(fd, bad))
        attempt(prefix + "shrink", lambda: os.ftruncate(fd, offset))
        attempt(prefix + "grow", lambda: os.ftruncate(fd, 1 << 20))
        attempt(prefix + "mmap_shared_write", lambda: mmap.mmap(
            fd, 0, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE).close())
        os.close(fd)

    attempt("open_wronly", lambda: os.close(os.open(path, os.O_WRONLY)))
    tamper("")
    attempt("chmod_777", lambda: os.chmod(path, 0o777))
    tamper("after_chmod_")
    fd = os.open(path, os.O_RDONLY)                   # what a tracer does
    attempt("read_stub", lambda: os.pread(fd, 2, offset))
    os.close(fd)
    print(json.dumps(out), flush=True)
""")

#: a provider as its own process: prints its path and stub offset, then for
#: each input line fires (it would die of SIGILL on a tampered stub) and
#: prints the stub's first two bytes as mapped
PROVIDER = textwrap.dedent("""
    import ctypes, sys
    sys.path.insert(0, {root!r})
    from pyebpf.usdt import Provider, UsdtFile
    app = Provider("sealed")
    evt = app.probe("evt", int)
    app.load()
    (note,) = UsdtFile.from_bytes(app.image, "img").notes()
    print(app.path, note.offset, flush=True)
    for line in sys.stdin:
        evt.fire(int(line))
        print(ctypes.string_at(app.base + note.offset, 2).hex(), flush=True)
""")


def _stub_offset(app: Provider) -> int:
    (note,) = UsdtFile.from_bytes(app.image, "img").notes()
    return note.offset


def _attack(path: str, offset: int, *prefix: str) -> dict:
    proc = subprocess.run([*prefix, sys.executable, "-c", ATTACK, path, str(offset), UD2.hex()],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.kernel
def test_the_image_is_sealed_and_read_only(no_fd_leak):
    app = Provider("sealed")
    app.probe("evt", int)
    with app:
        fd = int(app.path.rsplit("/", 1)[1])
        assert fcntl.fcntl(fd, fcntl.F_GET_SEALS) & SEALS == SEALS
        assert os.stat(app.path).st_mode & 0o777 == 0o555
        with pytest.raises(PermissionError):           # even the owner, as root
            os.pwrite(fd, UD2, _stub_offset(app))


@pytest.mark.kernel
def test_root_in_another_process_cannot_change_the_stub(no_fd_leak):
    """Root opens /proc/PID/fd/N read-write (mode bits do not stop root), but
    every write, resize and shared writable mapping fails; the provider still
    fires, and pyebpf still traces it."""
    if os.geteuid() != 0:
        pytest.skip("needs root")
    app = Provider("sealed")
    evt = app.probe("evt", int)
    with app:
        offset = _stub_offset(app)
        fd = int(app.path.rsplit("/", 1)[1])
        got = _attack(app.path, offset)
        assert got["open_rdwr"] == "ok"                # the kernel allows the open...
        for what in ("pwrite", "write", "shrink", "grow", "mmap_shared_write"):
            assert got[what] == "EPERM", got           # ...and the seals refuse the change
            assert got["after_chmod_" + what] == "EPERM", got
        assert got["read_stub"] == "90c3"              # nop; ret: unchanged
        assert ctypes.string_at(app.base + offset, 2) == b"\x90\xc3"
        assert os.pread(fd, 2, offset) == b"\x90\xc3"
        assert os.fstat(fd).st_size == len(app.image)
        with usdt(app.path, "sealed:evt").trace() as t:
            evt.fire(7)
            assert wait_events(t, 1) == [(7,)]


@pytest.mark.kernel
def test_same_user_in_another_process_cannot_open_it_for_writing():
    """Provider and attacker run as the same unprivileged user, the attacker
    not a descendant of the provider: opening for writing is refused (mode
    0o555); once the attacker chmods the file back to 0o777 (it owns it), the
    seals still refuse every write.  The provider keeps firing."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv(1) to run two processes as another user")
    setpriv = ["setpriv", *NOBODY]
    provider = subprocess.Popen([*setpriv, sys.executable, "-c", PROVIDER.format(root=ROOT)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    try:
        line = provider.stdout.readline().split()
        assert len(line) == 2, provider.communicate(timeout=30)
        path, offset = line[0], int(line[1])
        got = _attack(path, offset, *setpriv)
        assert got["open_wronly"] == "EACCES", got
        assert got["open_rdwr"] == "EACCES", got
        assert got["chmod_777"] == "ok", got            # the owner may change the mode...
        assert got["after_chmod_open_rdwr"] == "ok", got
        for what in ("pwrite", "write", "shrink", "grow", "mmap_shared_write"):
            assert got["after_chmod_" + what] == "EPERM", got   # ...not the contents
        assert got["read_stub"] == "90c3"
        provider.stdin.write("1\n")
        provider.stdin.flush()
        assert provider.stdout.readline().strip() == "90c3"     # fired, did not die
    finally:
        provider.kill()
        out, err = provider.communicate(timeout=30)
    assert provider.returncode == -9, err               # killed by us, not by SIGILL
