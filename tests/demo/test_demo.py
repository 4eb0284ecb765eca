"""The README's main job runs and traces real data."""
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.kernel


def test_demo_traces_every_request():
    out = subprocess.run([sys.executable, "-m", "pyebpf", "demo", "-n", "25"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr + out.stdout
    events = re.findall(r"^  request +(\d+) +(\d+) us  status (200|500)$", out.stdout, re.M)
    assert [int(e[0]) for e in events] == list(range(25))
    assert all(int(e[1]) >= 50 for e in events)          # every request sleeps >= 50 us
    assert "25 requests traced, 0 events lost" in out.stdout
    hist = re.findall(r"^\[\d+[KM]?, \d+[KM]?\) +(\d+) \|@*\s*\|$", out.stdout, re.M)
    assert sum(int(n) for n in hist) == 25
    assert "probes were enabled (semaphore)" in out.stdout
