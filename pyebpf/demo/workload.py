"""The demo's workload: a tiny "request server" with its own USDT probes.

Run ``python -m pyebpf.demo.workload N``: it declares two probes with
:class:`pyebpf.usdt.Provider`, prints the path tracers should use, waits for a
line on stdin, then serves N requests, firing ``request_start(id, size)`` and
``request_done(id, status)`` around each one.  Request latencies spread over a
few milliseconds so that the histogram has a shape.
"""
from __future__ import annotations

import random
import sys
import time

from ..usdt import Provider


def main(argv: list[str] | None = None) -> int:
    """Serve ``argv[0]`` (default 60) requests once a line arrives on stdin,
    firing the two probes around each; print the provider's path first and a
    summary last.  Returns the exit status (0)."""
    args = sys.argv[1:] if argv is None else argv
    n = int(args[0]) if args else 60
    rng = random.Random(42)
    with Provider("pyebpfdemo") as provider:
        start = provider.probe("request_start", "u64", "u64")
        done = provider.probe("request_done", "u64", "s64")
        provider.load()
        print(provider.path, flush=True)
        sys.stdin.readline()                    # the tracer says go
        enabled = start.enabled
        for rid in range(n):
            size = rng.choice((512, 1024, 4096, 65536))
            start.fire(rid, size)
            # work: 50 us .. ~6 ms, heavier for bigger requests
            time.sleep((size / 65536) * 0.004 + rng.expovariate(1 / 0.0008))
            done.fire(rid, 200 if rng.random() > 0.1 else 500)
        print(f"workload: {n} requests served; probes were "
              f"{'enabled' if enabled else 'NOT enabled'} (semaphore) while traced", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
