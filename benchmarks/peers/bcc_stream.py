"""BCC: stream a USDT probe's two u64 arguments to user space.

usage: /usr/bin/python3 bcc_stream.py BINARY PID N

The idiomatic BCC way: BPF_PERF_OUTPUT + perf_submit, bpf_usdt_readarg,
open_perf_buffer (1 MiB per CPU like the others; BCC wakes the reader per
event) with a Python callback that decodes each event, perf_buffer_poll.
Prints ``ready`` once attached; drains until N events are received or lost
(or SIGINT); ends with ``received R lost L last_ns T``.
"""
import signal
import sys
import time

from bcc import BPF, USDT

TEXT = """
struct event { u64 a; u64 b; };
BPF_PERF_OUTPUT(events);
int probe(struct pt_regs *ctx) {
    struct event e = {};
    bpf_usdt_readarg(1, ctx, &e.a);
    bpf_usdt_readarg(2, ctx, &e.b);
    events.perf_submit(ctx, &e, sizeof(e));
    return 0;
}
"""


def main() -> int:
    binary, pid, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    stop = []
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    usdt = USDT(path=binary, pid=pid)
    usdt.enable_probe(probe="loop:hit", fn_name="probe")
    b = BPF(text=TEXT, usdt_contexts=[usdt])
    state = {"received": 0, "lost": 0, "last": 0}
    table = b["events"]

    def on_event(cpu, data, size):
        table.event(data)                      # decode, as a user would
        state["received"] += 1
        state["last"] = time.monotonic_ns()

    def on_lost(count):
        state["lost"] += count

    table.open_perf_buffer(on_event, page_cnt=256, lost_cb=on_lost)
    print("ready", flush=True)
    while state["received"] + state["lost"] < n and not stop:
        b.perf_buffer_poll(timeout=100)
    b.perf_buffer_poll(timeout=0)
    print(f"received {state['received']} lost {state['lost']} last_ns {state['last']}", flush=True)
    b.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
