"""bpftrace 0.17's runtime test suite as a yardstick (issue 25): the tests
that pass under bpftrace 0.17 here are run under ``python -m pyebpf bt``
(this interpreter and this checkout), and at least FLOOR of them must pass.

The suite is outside material ($PYEBPF_SHARED/bpftrace-runtime-0.17,
tests/outside.py): bpftrace's files are measured against, never copied.
On failure the runner's table of causes is printed.  FLOOR only rises: raise
it when the pass count has risen for good.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest
from outside import shared

from .harness import ROOT

pytestmark = pytest.mark.kernel

#: the fewest yardstick tests that must pass under pyebpf bt
FLOOR = 415
_LAST = re.compile(r"^bpftrace 0\.17 runtime suite: (\d+)/(\d+) pass under pyebpf bt$")


@pytest.mark.timeout(900)
def test_runtime_suite_pass_count_does_not_fall(tmp_path):
    suite = shared("bpftrace-runtime-0.17")
    # the runner gives each test a bare environment: the path to this checkout
    # goes in the command (env(1) execs python, so comm stays python's)
    pythonpath = str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")
    tool = f"env PYTHONPATH={shlex.quote(pythonpath)} {shlex.quote(sys.executable)} -m pyebpf bt"
    proc = subprocess.run(
        [sys.executable, str(suite / "run_runtime.py"),
         "--yardstick", str(suite / "yardstick.json"), "--work", str(tmp_path / "work"),
         "--pyebpf", tool],
        capture_output=True, text=True, timeout=870, errors="replace")
    lines = proc.stdout.rstrip("\n").splitlines()
    m = _LAST.match(lines[-1]) if lines else None
    assert m is not None, (f"the runner did not finish with its summary line "
                           f"(exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    passed, total = int(m.group(1)), int(m.group(2))
    print(lines[-1], f"(FLOOR {FLOOR})")
    if passed < FLOOR:
        start = next((i for i, ln in enumerate(lines) if ln.startswith("failure causes")), 0)
        causes = "\n".join(lines[start:])
        pytest.fail(f"{passed}/{total} yardstick tests pass under pyebpf bt, fewer than "
                    f"FLOOR={FLOOR}\n{causes}", pytrace=False)
