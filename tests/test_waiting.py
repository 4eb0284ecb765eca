"""tests/waiting.py: bounded waits fail with what was awaited, quickly."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from waiting import WaitTimeout, poll_until, read_line, read_until, wait_until


def test_wait_until_returns_the_value_once_true():
    calls = []

    def ready():
        calls.append(1)
        return len(calls) >= 3 and "yes"

    assert wait_until(ready, "three calls", 5) == "yes"
    assert len(calls) == 3


def test_wait_until_fails_with_what_and_detail():
    t0 = time.monotonic()
    with pytest.raises(WaitTimeout, match=r"timed out after 0.2 s waiting for the moon: 42"):
        wait_until(lambda: False, "the moon", 0.2, detail=lambda: 42)
    assert 0.2 <= time.monotonic() - t0 < 2


def test_poll_until_returns_false_on_timeout():
    assert poll_until(lambda: 0, 0.05) == 0


def _child(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


def test_read_line_and_read_until():
    p = _child("print('a'); print('b Attached'); print('c', flush=True); import time; "
               "time.sleep(60)")
    try:
        assert read_until(p.stdout, "Attached", "the line", 10) == ["a\n", "b Attached\n"]
        assert read_line(p.stdout, "c", 10) == "c\n"          # buffered already: found
        t0 = time.monotonic()
        with pytest.raises(WaitTimeout, match="waiting for a silent child"):
            read_line(p.stdout, "a silent child", 0.3)
        assert time.monotonic() - t0 < 2
    finally:
        p.kill()
        p.communicate()


def test_read_until_at_end_of_file_says_so():
    p = _child("print('only this')")
    try:
        with pytest.raises(WaitTimeout, match=r"end of the output before the ready line; "
                                              r"read: \['only this\\n', ''\]"):
            read_until(p.stdout, "ready", "the ready line", 10)
    finally:
        p.kill()
        p.communicate()
