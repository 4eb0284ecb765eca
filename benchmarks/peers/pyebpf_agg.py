"""pyebpf: in-kernel aggregation at a USDT probe (per-CPU maps).

usage: pyebpf_agg.py BINARY PID count|hist

``count``: counts the hits of ``loop:hit``; ``hist``: a log2 histogram of
its first argument.  Prints ``ready`` once attached, waits for SIGINT, then
prints the result the way bpftrace does and ``total N``.
"""
import signal
import sys

import pyebpf_usdt
from pyebpf.program import R1, R6, R7, Program
from pyebpf.lang.aggregations import Count, Histogram
from pyebpf.draw.render import format_count, format_hist


def main() -> int:
    binary, pid, kind = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})   # taken by sigwait below
    source = pyebpf_usdt.probe_source(binary, "loop", "hit", pid=pid)
    with (Count("calls") if kind == "count" else Histogram("hist")) as agg:
        p = Program(kind)
        if kind == "count":
            agg.emit(p)
        else:
            p.mov(R6, R1)
            source.emit_arg(p, R7, 0, R6)
            agg.emit(p, R7)
        p.ret(0)
        with pyebpf_usdt.load(source, p) as prog, source.attach(prog, pid=pid):
            print("ready", flush=True)
            signal.sigwait({signal.SIGINT})
        result = agg.read()
        if kind == "count":
            print(format_count("calls", result))
            total = result
        else:
            print(format_hist("hist", result))
            total = sum(result.values())
    print(f"total {total} via {pyebpf_usdt.METHOD}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
