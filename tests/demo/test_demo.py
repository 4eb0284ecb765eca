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


def test_show_programs_comments_the_code_as_bt_does():
    """--show-programs prints each program as ``bt --show-program`` prints a
    script's: its probe, where it attaches, its size, each step's comment
    beside its first instruction, then the maps (it printed bare code)."""
    out = subprocess.run([sys.executable, "-m", "pyebpf", "demo", "-n", "3", "--show-programs"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr + out.stdout
    for name, probe in (("demo_start", "request_start"), ("demo_done", "request_done")):
        m = re.search(rf"^; program {name}\n; attached at usdt:\S+:pyebpfdemo:{probe} .*\n"
                      rf"; (\d+) instructions, \d+ bytes of stack\n", out.stdout, re.M)
        assert m, out.stdout
    assert re.search(r"^    r1 = starts ll  # starts\[id\] = now$", out.stdout, re.M), out.stdout
    assert re.search(r"^    r3 = 0  # @latency_us = hist\(latency\)", out.stdout, re.M), out.stdout
    maps = out.stdout.split("\n; maps\n", 1)[1]
    assert re.search(r"^;   starts: HashMap, 8-byte keys, 8-byte values", maps, re.M), maps
    assert "3 requests traced, 0 events lost" in out.stdout
