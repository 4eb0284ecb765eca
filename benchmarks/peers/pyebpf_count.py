"""pyebpf: count the calls of a function in a program it starts (cold start).

usage: pyebpf_count.py BINARY SYMBOL -- CMD...

Loads a counting uprobe program (a per-CPU counter), attaches it to
BINARY:SYMBOL, runs CMD, prints ``@count: N`` like bpftrace does as soon as
CMD has exited, then detaches.  It
imports only what it needs: the "embedded in your program" use.  The time
spent in each phase goes to stderr (``phases imports=... load=...``, in ms
from the interpreter's first line) so the harness can say where it went.
"""
import time

_T0 = time.perf_counter()

import os  # noqa: E402
import sys  # noqa: E402

from pyebpf.attach import attach_uprobe, load_uprobe_program  # noqa: E402
from pyebpf.program import Program  # noqa: E402
from pyebpf.lang.aggregations import Count  # noqa: E402


def main() -> int:
    binary, symbol, sep, *cmd = sys.argv[1:]
    assert sep == "--" and cmd, __doc__
    marks = [("imports", time.perf_counter())]
    with Count("count") as count:
        p = Program("count")
        count.emit(p)
        p.ret(0)
        with load_uprobe_program(p) as prog:
            marks.append(("load", time.perf_counter()))
            with attach_uprobe(prog, binary, symbol):
                marks.append(("attach", time.perf_counter()))
                pid = os.posix_spawn(cmd[0], cmd, os.environ)
                _, status = os.waitpid(pid, 0)
                marks.append(("run", time.perf_counter()))
                # the program has exited: the count is final, print it, then detach
                print(f"@count: {count.read()}", flush=True)
                marks.append(("print", time.perf_counter()))
            marks.append(("detach", time.perf_counter()))
    marks.append(("close", time.perf_counter()))
    prev, out = _T0, []
    for name, t in marks:
        out.append(f"{name}={(t - prev) * 1e3:.1f}")
        prev = t
    print("phases " + " ".join(out), file=sys.stderr)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main())
