"""BCC: in-kernel aggregation at a USDT probe.

usage: /usr/bin/python3 bcc_agg.py BINARY PID count|hist

``count``: a per-CPU counter of ``loop:hit``; ``hist``: a log2 histogram
(BPF_HISTOGRAM + bpf_log2l, BCC's idiom) of its first argument.  Prints
``ready`` once attached, waits for SIGINT, prints the result and ``total N``.
"""
import signal
import sys

from bcc import BPF, USDT

TEXT = {
    "count": """
BPF_PERCPU_ARRAY(calls, u64, 1);
int probe(struct pt_regs *ctx) {
    int zero = 0;
    u64 *v = calls.lookup(&zero);
    if (v)
        (*v)++;
    return 0;
}
""",
    "hist": """
BPF_HISTOGRAM(hist, int, 65);
int probe(struct pt_regs *ctx) {
    u64 a = 0;
    bpf_usdt_readarg(1, ctx, &a);
    hist.atomic_increment(bpf_log2l(a));
    return 0;
}
""",
}


def main() -> int:
    binary, pid, kind = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    usdt = USDT(path=binary, pid=pid)
    usdt.enable_probe(probe="loop:hit", fn_name="probe")
    b = BPF(text=TEXT[kind], usdt_contexts=[usdt])
    print("ready", flush=True)
    signal.sigwait({signal.SIGINT})
    if kind == "count":
        total = sum(b["calls"][0])
        print(f"@calls: {total}")
    else:
        b["hist"].print_log2_hist("arg0")
        total = sum(v.value for v in b["hist"].values())
    print(f"total {total}", flush=True)
    b.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
