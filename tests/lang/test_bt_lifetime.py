"""``pyebpf bt``'s run order and what it counts, as bpftrace 0.17's: the
probes a ``Attaching N probes...`` line counts (a USDT probe once per
location), a missing tracepoint among several attach points (a warning)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from .harness import ROOT, build_c

pytestmark = pytest.mark.kernel

# one USDT probe written twice (two locations), one written once
TWO_SITES_C = r"""
#include <sys/sdt.h>
#include <unistd.h>
__attribute__((noinline)) static void site(int n) { DTRACE_PROBE1(lt, twice, n); }
int main(int argc, char **argv) {
    (void)argv;
    DTRACE_PROBE1(lt, twice, argc);
    DTRACE_PROBE1(lt, once, argc);
    site(argc);
    return 0;
}
"""


@pytest.fixture(scope="module")
def two_sites() -> str:
    return build_c("two_sites", TWO_SITES_C, "-O2")


def _bt(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "pyebpf", "bt", *args], capture_output=True,
                          text=True, timeout=60, env=env, cwd=str(ROOT))


def _attaching(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, proc.stderr
    return next(ln for ln in proc.stdout.splitlines() if ln.startswith("Attaching"))


@pytest.mark.parametrize("point", ["lt:twice", "lt:*"])
def test_usdt_probes_are_counted_per_location(two_sites: str, point: str) -> None:
    program = f"usdt:{two_sites}:{point} {{ @[probe] = count(); }} END {{ }}"
    mine = _attaching(_bt("-e", program, "-c", two_sites))
    assert mine == {"lt:twice": "Attaching 3 probes...", "lt:*": "Attaching 4 probes..."}[point]
    if shutil.which("bpftrace") is not None:
        theirs = subprocess.run(["bpftrace", "-e", program, "-c", two_sites],
                                capture_output=True, text=True, timeout=60)
        assert mine in theirs.stdout


def test_a_missing_tracepoint_among_others_is_a_warning() -> None:
    program = ("t:syscalls:sys_enter_getppid,t:syscalls:nonsense { @ = count(); } "
               "BEGIN { exit(); }")
    proc = _bt("-e", program)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ("stdin:1:30-49: WARNING: tracepoint not found: syscalls:nonsense\n"
                           f"{program}\n" + " " * 29 + "~" * 19 + "\n")
    alone = _bt("-e", "t:syscalls:nonsense { }")
    assert alone.returncode == 1 and "WARNING" not in alone.stderr


def test_wildcard_files_are_every_file_they_match(two_sites: str) -> None:
    # (the module's build dir holds two_sites and, from the harness, btworkload)
    from .harness import bt_workload
    w = bt_workload()
    d = os.path.dirname(two_sites)
    for program in (f"usdt:{d}/two_s*::* {{ @[probe] = count(); }}",
                    f"uprobe:{d}/btwork*:compute {{ @[probe] = count(); }}"):
        proc = _bt("-e", program, "-c", w + " 3 1" if "compute" in program else two_sites)
        assert proc.returncode == 0, proc.stderr
        if "compute" in program:
            assert f"@[uprobe:{w}:compute]: 3" in proc.stdout
        else:
            assert _attaching(proc) == "Attaching 3 probes..."
            assert f"@[usdt:{two_sites}:lt:twice]: 2" in proc.stdout
