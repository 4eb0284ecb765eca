"""``pyebpf demo``: the README's main job -- a real trace of a bundled workload."""
from __future__ import annotations

import argparse

from . import positive_int

from .parser import Subparsers   # (at run time too, for documentation tools)


def register(sub: Subparsers) -> None:
    """Add the ``demo`` sub-command to ``subparsers``."""
    p = sub.add_parser(
        "demo", help="trace a bundled Python workload through its own USDT probes",
        description="Start a small Python 'request server' that declares USDT probes at run "
                    "time (pyebpf.usdt.Provider), attach eBPF programs to them, print every "
                    "request as a live event, then the request latencies as a log2 histogram "
                    "measured in the kernel. Exits when the workload does. Needs root.")
    p.add_argument("-n", "--requests", type=positive_int, default=60,
                   help="requests to serve (default 60)")
    p.add_argument("--show-programs", action="store_true",
                   help="print the generated eBPF programs first (for learning)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the demo; the exit status."""
    from ..demo import run as demo
    return demo(args.requests, show_programs=args.show_programs)
