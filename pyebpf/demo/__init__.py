"""The README's main job: trace a Python workload through its own USDT probes.

``python -m pyebpf demo`` starts :mod:`pyebpf.demo.workload` -- a small
"request server" that declares USDT probes from Python at run time
(:class:`pyebpf.usdt.Provider`: pyebpf writes the ELF notes and stubs itself)
and fires ``request_start(id, size)`` / ``request_done(id, status)`` around
each request.  The demo then, with nothing but pyebpf:

1. attaches one eBPF program to each probe (uprobe_multi, semaphores through
   the kernel's ref_ctr -- the workload sees ``probe.enabled`` turn true);
2. measures each request's latency *in the kernel* (start timestamp in a
   hash map keyed by request id, delta at ``request_done``) into a log2
   histogram, and streams one event per request through a BPF ring buffer
   (one ring for all CPUs, so events arrive in order; failed outputs are
   counted in a per-CPU map and reported);
3. prints the events live, then the histogram the way bpftrace does, and
   exits when the workload does.
"""
from __future__ import annotations

import subprocess
import sys
import time
from typing import TextIO

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..events import RingBufferReader
    from ..lang.aggregations import Histogram
    from ..maps import HashMap
    from ..program import Program
    from ..usdt.attach import Usdt

PROVIDER = "pyebpfdemo"


def _programs(start_probe: Usdt, done_probe: Usdt, starts: HashMap[int, int], hist: Histogram,
              events: RingBufferReader) -> tuple[Program, Program]:
    """The two eBPF programs, built with the DSL; each step carries a comment
    (``--show-programs`` prints them beside the instructions it became)."""
    from ..program import R0, R1, R2, R6, R7, R8, R9, Program

    # request_start(id, size): starts[id] = now
    p = Program("demo_start")
    p.comment("r6 = the probe's context (r1), kept across calls").mov(R6, R1)
    p.comment("r7 = request id (USDT argument 0, read as its note says)")
    start_probe.read_arg(p, R7, 0, ctx=R6)
    p.comment("the key, on the stack")
    key = p.stack_store(R7, 8)
    p.comment("now").call("ktime_get_ns")
    val = p.stack_store(R0, 8)
    p.comment("starts[id] = now")
    p.map_update(starts, key, val)
    p.ret(0)

    # request_done(id, status): latency = now - starts[id]; hist + event
    q = Program("demo_done")
    q.comment("r6 = the probe's context (r1), kept across calls").mov(R6, R1)
    q.comment("r7 = request id (USDT argument 0)")
    done_probe.read_arg(q, R7, 0, ctx=R6)
    q.comment("r9 = status (USDT argument 1)")
    done_probe.read_arg(q, R9, 1, ctx=R6)
    key = q.stack_store(R7, 8)
    q.comment("r0 = &starts[id]; no start seen: out")
    q.map_lookup(starts, key, "out")
    q.ldxdw(R8, R0, 0)
    q.comment("r8 = latency in microseconds = (now - start) / 1000").call("ktime_get_ns")
    q.sub(R0, R8)
    q.div(R0, 1000)
    q.mov(R8, R0)
    q.comment("delete starts[id]")
    q.ld_map(R1, starts).stack_pointer(R2, key)
    q.call("map_delete_elem")
    q.comment("@latency_us = hist(latency): the log2 bucket, then +1")
    hist.emit(q, R8)
    q.comment("an event (id, latency, status) into the ring buffer; a failed output is counted")
    q.output_record(events.ringbuf, [(R7, 8), (R8, 8), (R9, 8)], drops=events.drops)
    q.label("out")
    q.ret(0)
    return p, q


def program_listing(programs: list[tuple[Program, Usdt]], maps: list[str]) -> str:
    """The programs as ``pyebpf bt --show-program`` prints a script's: per
    program its probe, where it attaches and its size, then the instructions
    with the comment of each step; then the maps."""
    from ..text import disassemble
    parts = []
    for prog, probe in programs:
        stack = max((-off for off, _, _ in prog.stack.slots), default=0)
        parts.append(f"; program {prog.name}\n; attached at {probe.describe()}\n"
                     f"; {len(prog)} instructions, {stack} bytes of stack\n"
                     + disassemble(prog).rstrip("\n"))
    return "\n\n".join(parts + ["\n".join(["; maps"] + [f";   {m}" for m in maps])]) + "\n"


def run(requests: int = 60, out: TextIO = sys.stdout, show_programs: bool = False) -> int:
    """Run the demo; returns an exit status."""
    from ..draw.render import format_hist
    from ..events import RingBufferReader
    from ..lang.aggregations import Histogram
    from ..maps import HashMap
    from ..usdt import usdt

    t0 = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "pyebpf.demo.workload", str(requests)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdin is not None     # (both PIPE)
    try:
        path = child.stdout.readline().strip()      # the provider's ELF, e.g. /proc/PID/fd/N
        if not path:
            print("the workload did not start", file=sys.stderr)
            return 1
        start_probe = usdt(path, f"{PROVIDER}:request_start", pid=child.pid)
        done_probe = usdt(path, f"{PROVIDER}:request_done", pid=child.pid)
        print(f"workload pid {child.pid}; probes: {start_probe.describe()}, {done_probe.describe()}",
              file=out)
        with HashMap(key="u64", value="u64", max_entries=4096, name="starts") as starts, \
                Histogram("latency_us") as hist, \
                RingBufferReader(size=1 << 16, drops=True, decode="<QQq") as events:
            p, q = _programs(start_probe, done_probe, starts, hist, events)
            if show_programs:
                roles = [(starts, "request id -> its start time (ns)"),
                         (hist.map, "the histogram's log2 buckets (bpftrace's hist())"),
                         (events.ringbuf, "one (id, latency, status) event per request"),
                         (events.drops, "the outputs that failed (ring buffer full)")]
                print("\n" + program_listing(
                    [(p, start_probe), (q, done_probe)],
                    [f"{m.name}: {type(m).__name__}, {m.key_size}-byte keys, {m.value_size}-byte "
                     f"values, {m.max_entries} entries: {role}" for m, role in roles
                     if m is not None]),
                    file=out)
            with start_probe.load(p) as lp, done_probe.load(q) as lq, \
                    start_probe.attach(lp), done_probe.attach(lq):
                print(f"attached in {1000 * (time.perf_counter() - t0):.0f} ms "
                      f"(including starting the workload)\n", file=out)
                child.stdin.write("go\n")
                child.stdin.flush()
                shown = 0
                while True:
                    done = child.poll() is not None
                    for rid, us, status in events.read_batch(timeout=0.1):
                        shown += 1
                        print(f"  request {rid:4d}  {us:7d} us  status {status}", file=out)
                    if done:
                        for rid, us, status in events.drain():
                            shown += 1
                            print(f"  request {rid:4d}  {us:7d} us  status {status}", file=out)
                        break
                out.flush()
                print(f"\n{shown} requests traced, {events.lost} events lost\n", file=out)
                print(format_hist("latency_us", hist.read()), file=out)
        tail = child.stdout.read().strip()
        if tail:
            print(tail, file=out)
        return 0 if child.wait() == 0 and shown == requests else 1
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
