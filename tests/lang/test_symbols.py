"""``usym``, ``ksym``, ``func``, ``uaddr`` and ``kaddr`` compared with
bpftrace 0.17 on tests/lang/btworkload.c: names where bpftrace prints names
(printf of a traced process's address, every kernel symbol), addresses where
it prints addresses (a user address in a map printed after the process
exited; ASLR moves them, so they are masked)."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from .harness import ROOT, bt_workload, normalize, run_bpftrace, run_pyebpf_bt

pytestmark = pytest.mark.kernel

#: the last iteration naps 320 ms (after 20 and 80): every event is read while the process
#: is alive, by bpftrace and by pyebpf, on a loaded machine too (bpftrace prints the
#: address of an event read once the process is gone)
RUN = "17 20000"


@pytest.fixture(scope="module")
def w() -> str:
    return bt_workload()


def _masked(text: str) -> str:
    return normalize(re.sub(r"0x[0-9a-f]{9,}", "0xADDR", text))


def _same(program: str, command: str) -> str:
    theirs = _masked(run_bpftrace(program, command=command))
    ours = _masked(run_pyebpf_bt(program, command=command))
    assert ours == theirs, f"--- bpftrace\n{theirs}\n--- pyebpf\n{ours}"
    return ours


def test_usym_and_func_in_a_uprobe(w):
    out = _same(f'uprobe:{w}:compute /arg0 < 2/ {{ printf("%s|%s|%s\\n", '
                f'usym(reg("ip") + 5), usym(0), func); @s = usym(reg("ip")); @f = func; '
                f'@t[func, 1] = count(); }}', f"{w} {RUN}")
    assert "compute|0|compute\n" in out and "@t[0xADDR, 1]: 4" in out


def test_func_in_a_uretprobe_is_the_caller(w):
    out = _same(f'uretprobe:{w}:compute /retval < 3000/ {{ printf("%s\\n", func); '
                f'@[func] = count(); }}', f"{w} {RUN}")
    assert out.startswith("main\n")


def test_usym_in_a_library(w):
    out = _same('uretprobe:libc:pthread_mutex_trylock /pid == cpid/ { '
                'printf("%s %s\\n", func, usym(reg("ip"))); }', f"{w} {RUN}")
    assert "try_take try_take\n" in out and "lock_b_inner lock_b_inner\n" in out


def test_ksym_and_kaddr():
    out = _same('BEGIN { printf("%s|%s|\\n", ksym(kaddr("vfs_read") + 5), ksym(1234)); '
                '@k[ksym(kaddr("vfs_read"))] = count(); @s = ksym(kaddr("vfs_read")); '
                'print(ksym(kaddr("vfs_write"))); exit(); }', None)
    assert out.startswith("vfs_read|0x4d2|\nvfs_write\n")


def test_uaddr_of_a_data_symbol(w):
    # bpftrace 0.17 gives the ELF address (not relocated in a PIE)
    out = _same(f'uprobe:{w}:compute /arg0 < 2/ {{ printf("%p %s|\\n", '
                f'uaddr("btw_delta_semaphore"), usym(uaddr("btw_delta_semaphore"))); '
                f'@a[usym(uaddr("HOSTS"))] = count(); @v = uaddr("HOSTS"); }}', f"{w} {RUN}")
    assert re.search(r"^0x[0-9a-f]+ 0x[0-9a-f]+\|$", out, re.M), out


def test_uaddr_of_a_function_is_refused_as_bpftrace_refuses_it(w):
    program = f'uprobe:{w}:compute {{ printf("%p\\n", uaddr("compute")); }}'
    theirs = subprocess.run(["bpftrace", "-e", program], capture_output=True, text=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    ours = subprocess.run([sys.executable, "-m", "pyebpf", "bt", "-e", program],
                          capture_output=True, text=True, cwd=str(ROOT), env=env)
    assert theirs.returncode != 0 and ours.returncode != 0
    error = [ln for ln in theirs.stderr.splitlines() if "RLIMIT" not in ln]
    assert error[0].startswith("stdin:1:")
    assert ours.stderr.splitlines()[-3:] == ["pyebpf bt: " + error[0], *error[1:3]]
    assert "Traceback" not in ours.stderr
