"""Watchpoints (hardware breakpoints through perf's breakpoint PMU) on a
program built here: on an address, on a function's argument (a setup
uprobe stops the process while the watchpoint is placed), asynchronous,
unwatch(), and what happens when the debug registers run out -- compared
with bpftrace 0.17 where it runs them."""
from __future__ import annotations

import os
import subprocess

import pytest

from pyebpf import lang

from .harness import build_c, compare_with_bpftrace

pytestmark = pytest.mark.kernel

# its own program: N heap ints each passed to touch() then written twice more
# (after 200 ms with a second argument);
# "loop": prints a global's address, then writes it every millisecond
PROGRAM_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
volatile int watched;
__attribute__((noinline)) void touch(int unused, int *p) { (void)unused; (*p)++; }
int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "loop") == 0) {
        printf("%p\n", (void *)&watched);
        fflush(stdout);
        for (int i = 0; i < 20000; i++) { watched++; usleep(1000); }
        return 0;
    }
    int n = argc > 1 ? atoi(argv[1]) : 1;
    for (int i = 0; i < n; i++) {
        int *p = malloc(sizeof *p);
        *p = 0;
        touch(0, p);
        if (argc > 2)
            usleep(200000);     /* "slow": time for an asynchronous watchpoint */
        (*p)++;
        (*p)++;
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def prog() -> str:
    if not os.path.isdir("/sys/bus/event_source/devices/breakpoint"):
        pytest.skip("this machine has no breakpoint PMU")
    return build_c("watch_prog", PROGRAM_C, "-O0")


def test_a_function_argument_is_watched_like_bpftrace(prog: str) -> None:
    # each write of the int touch() gets: its own (the process waits while the
    # watchpoint is placed), then main's two
    text = compare_with_bpftrace("watchpoint:touch+arg1:4:w { @[probe] = count(); }",
                                 command=f"{prog} 1", exact=True)
    assert f"@[watchpoint:{prog}:touch:1:4:w]: 3" in text


def test_an_asynchronous_watchpoint_does_not_stop_the_process(prog: str) -> None:
    from .harness import run_pyebpf_bt
    # touch()'s own write comes before the watchpoint is placed; main's two, 200 ms
    # later, are seen
    text = run_pyebpf_bt("asyncwatchpoint:touch+arg1:4:w { @ = count(); }",
                         command=f"{prog} 1 slow")
    assert text.strip() in ("@: 2", "@: 3")


def test_out_of_debug_registers_like_bpftrace(prog: str) -> None:
    # six ints, four debug registers: two are refused, with bpftrace's message
    text = compare_with_bpftrace("watchpoint:touch+arg1:4:w { @ = count(); }",
                                 command=f"{prog} 6", exact=True)
    assert text.count("You are out of watchpoint registers") == 2


def test_unwatch_removes_the_watchpoint(prog: str) -> None:
    from .harness import run_bpftrace, run_pyebpf_bt
    program = ("uprobe:%s:touch { @a = arg1; } watchpoint:touch+arg1:4:w { @n = count(); "
               "unwatch(@a); }" % prog)
    # (unwatch() acts once user space reads it: main writes 200 ms later)
    for run in (run_pyebpf_bt, run_bpftrace):       # (@a, an address, differs)
        assert "@n: 1\n" in run(program, command=f"{prog} 1 slow")


def test_an_address_of_a_process(prog: str) -> None:
    proc = subprocess.Popen([prog, "loop"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        address = int(proc.stdout.readline(), 16)
        compiled = lang.compile(f'watchpoint:{address:#x}:4:w {{ printf("%s\\n", probe); '
                                "exit(); }", pid=proc.pid)
        with compiled.start() as run:
            texts = [e.text for e in run]
        assert texts[0] == f"watchpoint:{address}:4:w\n"
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def test_bad_watchpoints_are_refused() -> None:
    from pyebpf.probes.sources import ProbeSpecError
    for point, why in (("watchpoint:0x1000:3:w", "length must be one of"),
                       ("watchpoint:0x1000:4:q", "mode must be combination of"),
                       ("watchpoint:f+x1:4:w", "Invalid function argument"),
                       ("watchpoint:f+arg1:4:w", "-c CMD or -p PID")):
        with pytest.raises(ProbeSpecError, match=why):
            lang.compile(f"{point} {{ }}")
