"""``pyebpf conformance [--vm] DIR``: run a bpf_conformance directory in the
kernel, or in pyebpf's VM (no kernel, no privilege)."""
from __future__ import annotations

import argparse
import sys

from .parser import Subparsers   # (at run time too, for documentation tools)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterator

    from ..conformance import Outcome


def register(sub: Subparsers) -> None:
    """Add the ``conformance`` sub-command to ``subparsers``."""
    p = sub.add_parser(
        "conformance",
        help="run bpf_conformance tests in the kernel (XDP + BPF_PROG_TEST_RUN) or the VM",
        description="Run every *.data test of a bpf_conformance directory in the running "
                    "kernel: each test is assembled (mnemonic dialect), loaded as an XDP "
                    "program whose r0 is stored in an array map, run with "
                    "BPF_PROG_TEST_RUN, and compared with the expected result. Prints one "
                    "line per test and a closing 'N passed, M failed' line; kernel "
                    "rejections are counted apart. Needs root. With --vm the tests run in "
                    "pyebpf's pure-Python VM instead (r1 = the memory, r2 = its length, as "
                    "uBPF): no kernel and no privilege needed.",
    )
    p.add_argument("directory", help="directory holding the *.data files (or the suite's root)")
    p.add_argument("--vm", action="store_true",
                   help="run in pyebpf's VM instead of the kernel (no privilege needed)")
    p.add_argument("-q", "--quiet", action="store_true", help="print only failures and the summary")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the directory's tests, print a line each and a summary; the exit status."""
    from ..conformance import run_directory

    outcomes = _vm_outcomes(args.directory) if args.vm else run_directory(args.directory)
    counts = {"pass": 0, "fail": 0, "rejected": 0, "error": 0, "skip": 0}
    for outcome in outcomes:
        counts[outcome.status] += 1
        if not args.quiet or outcome.status in ("fail", "error"):
            print(outcome.line(), flush=False)
    sys.stdout.flush()
    extras = ", ".join(f"{counts[k]} {label}" for k, label in
                       (("rejected", "rejected by the kernel"), ("error", "errors"),
                        ("skip", "skipped")) if counts[k])
    if extras:
        print(f"not counted: {extras}")
    print(f"{counts['pass']} passed, {counts['fail']} failed")
    return 1 if counts["fail"] or counts["error"] else 0


def _vm_outcomes(directory: str) -> Iterator[Outcome]:
    """The outcomes of the directory's tests run in the VM."""
    from ..conformance import Outcome, run_each
    from ..vm.conformance import run_test

    return run_each(directory, lambda test: Outcome(*run_test(test)))
