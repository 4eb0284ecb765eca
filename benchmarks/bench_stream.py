"""Streaming: one million 16-byte events from a traced C loop.

``benchmarks/targets/loop.c`` calls ``hit(i, 2*i)`` N times.  A uprobe on
``hit`` sends both arguments (16 bytes) to user space through a perf buffer
(or a BPF ring buffer); the reader drains concurrently.  Reported:

* events received and lost (received + lost must equal N),
* the drain rate (events received per second of the traced run),
* the traced loop's extra cost per event (traced ns/call - untraced ns/call,
  the uprobe trap included),
* the tracer's CPU time.
"""
from __future__ import annotations

import resource
import statistics
import threading
import time

from benchmarks.targets import Loop, build_loop

def run_loop(binary: str, n: int, before_start=None) -> float:
    """Run the loop (calling ``before_start(pid)`` at its handshake); return ns/call."""
    with Loop(binary, n) as loop:
        if before_start is not None:
            before_start(loop.pid)
        return loop.run()


def stream(binary: str, n: int, sink: str = "perf") -> dict:
    """Trace ``n`` calls; return received, lost, rates and costs."""
    from pyebpf.attach import attach_uprobe, load_uprobe_program
    from pyebpf.events import PerfBuffer, RingBufferReader
    from pyebpf.maps import PerCpuArrayMap, RingBuf

    received = 0
    if sink == "perf":
        reader = PerfBuffer(size=1 << 20, decode="<QQ")
        target = reader.array
        drops = None
    else:
        ring = RingBuf(1 << 22)
        drops = PerCpuArrayMap("u64", 1, name="drops")
        reader = RingBufferReader(ring, decode="<QQ", drops=drops)
        target = ring
    from pyebpf.program import R1, R6, R7, R8, Program
    from pyebpf.ptregs import load_arg
    p = Program("stream")
    p.mov(R6, R1)
    load_arg(p, R7, 0, ctx=R6)
    load_arg(p, R8, 1, ctx=R6)
    if sink == "perf":
        p.output_record(target, [(R7, 8), (R8, 8)], ctx=R6)
    else:
        p.output_record(target, [(R7, 8), (R8, 8)], drops=drops)
    p.ret(0)
    stop = threading.Event()
    first_last = [0.0, 0.0]

    def drain() -> None:
        nonlocal received
        while not stop.is_set() or received + reader.lost < n:
            batch = reader.read_batch(timeout=0.05)
            if batch:
                if not received:
                    first_last[0] = time.perf_counter()
                received += len(batch)
                first_last[1] = time.perf_counter()
            elif stop.is_set():
                batch = reader.drain()
                received += len(batch)
                if not batch:
                    break

    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    with reader, load_uprobe_program(p) as prog:
        link = None

        def attach(pid: int) -> None:
            nonlocal link
            link = attach_uprobe(prog, binary, "hit", pid=pid)

        thread = threading.Thread(target=drain, daemon=True)
        thread.start()
        t0 = time.perf_counter()
        ns = run_loop(binary, n, attach)
        t1 = time.perf_counter()
        stop.set()
        thread.join(timeout=30)
        lost = reader.lost if sink == "perf" else reader.dropped
        if link is not None:
            link.detach()
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    if sink != "perf":
        ring.close()
        drops.close()
    span = max(first_last[1] - first_last[0], 1e-9)
    return {"received": received, "lost": lost, "traced_ns_per_call": ns,
            "drain_events_per_s": received / max(t1 - t0, 1e-9),
            "drain_events_per_s_while_flowing": received / span,
            "tracer_cpu_s": (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)}


def run(quick: bool = False) -> dict:
    n = 200_000 if quick else 1_000_000
    rounds = 1 if quick else 3
    binary = build_loop()
    base = statistics.median(run_loop(binary, n) for _ in range(rounds))
    out: dict = {"events": n, "untraced_ns_per_call": base}
    for sink in ("perf", "ringbuf"):
        results = [stream(binary, n, sink) for _ in range(rounds)]
        med = {k: statistics.median(r[k] for r in results) for k in results[0]}
        out[f"{sink}_received"] = int(med["received"])
        out[f"{sink}_lost"] = int(max(r["lost"] for r in results))
        out[f"{sink}_exact"] = all(r["received"] + r["lost"] == n for r in results)
        out[f"{sink}_drain_events_per_s"] = med["drain_events_per_s"]
        out[f"{sink}_added_us_per_event"] = (med["traced_ns_per_call"] - base) / 1000
        out[f"{sink}_tracer_cpu_s"] = med["tracer_cpu_s"]
    return out


if __name__ == "__main__":
    for k, v in run().items():
        print(f"{k}: {v:,.3f}" if isinstance(v, float) else f"{k}: {v}")
