"""A trace's results are data: when an aggregation cannot be formatted, the
final printing (``pyebpf trace`` / ``pyebpf run``) prints that one raw -- with
a one-line warning naming the error -- and every other one as usual, and the
command exits 1.

The sessions are real (programs loaded and attached to a tracepoint, hit by
this process); the formatting failure is planted by replacing a formatter.
"""
from __future__ import annotations

import io
import json
import os

import pytest

from pyebpf.draw import formatting, render
from pyebpf.session.asmfile import AsmSession, parse_asm_file
from pyebpf.session.live import print_final
from pyebpf.trace import Trace, log2_bucket

pytestmark = pytest.mark.kernel
TP = "tracepoint:syscalls:sys_enter_getpid"
CALLS = 5

TWO_MAPS = """\
# pyebpf: description counts getpid calls, and puts each in bucket 3 of a histogram
# pyebpf: map calls array key=u32 value=u64 entries=1 show=count
# pyebpf: map buckets array key=u32 value=u64 entries=12 show=lhist:0:10:1
# pyebpf: program p attach=tracepoint:syscalls:sys_enter_getpid
    *(u32 *)(r10 - 4) = 0
    r1 = calls ll
    r2 = r10
    r2 += -4
    call bpf_map_lookup_elem
    if r0 == 0 goto out
    r1 = 1
    lock *(u64 *)(r0 + 0) += r1
    *(u32 *)(r10 - 4) = 3
    r1 = buckets ll
    r2 = r10
    r2 += -4
    call bpf_map_lookup_elem
    if r0 == 0 goto out
    r1 = 1
    lock *(u64 *)(r0 + 0) += r1
out:
    r0 = 0
    exit
"""


def planted_bug(*args, **kwargs):
    raise ZeroDivisionError("a planted formatting bug")


WARNING = ("pyebpf {cmd}: warning: could not format {name} (ZeroDivisionError: a planted "
           "formatting bug); printing the raw contents instead\n")


def final(session, json_mode: bool, command: str = "trace") -> tuple[bool, str, str]:
    out, err = io.StringIO(), io.StringIO()
    ok = print_final(session, out, err, json_mode, command=command)
    return ok, out.getvalue(), err.getvalue()


@pytest.fixture
def trace_session():
    me = os.getpid()
    t = Trace(TP, pid=me).count(by="pid").hist("pid")
    with t.start(me) as session:
        for _ in range(CALLS):
            os.getpid()                # (a system call each time: glibc caches no pid)
        session.detach()
        yield session


def test_trace_prints_a_map_it_cannot_format_raw(trace_session, monkeypatch):
    me = os.getpid()
    ok, text, err = final(trace_session, json_mode=False)
    assert ok and err == "" and "(raw)" not in text
    count = trace_session.results()["@count"][(me,)]
    assert count >= CALLS and f"@count[{me}]: {count}\n" in text

    monkeypatch.setattr(formatting, "format_hist", planted_bug)
    ok, text, err = final(trace_session, json_mode=False)
    assert not ok
    assert err == WARNING.format(cmd="trace", name="@hist")
    assert f"@count[{me}]: {count}\n" in text              # the other map, as usual
    raw = [line for line in text.splitlines() if line.startswith("@hist (raw): ")]
    assert len(raw) == 1
    assert json.loads(raw[0].split(": ", 1)[1]) == {str(log2_bucket(me)): count}


def test_trace_json_gets_a_raw_object(trace_session, monkeypatch):
    me = os.getpid()
    count = trace_session.results()["@count"][(me,)]
    monkeypatch.setattr(formatting, "format_hist", planted_bug)    # (text only: JSON is fine)
    monkeypatch.setattr(formatting, "hist_json", planted_bug)
    ok, text, err = final(trace_session, json_mode=True)
    assert not ok and err == WARNING.format(cmd="trace", name="@hist")
    objs = [json.loads(line) for line in text.splitlines()]
    assert {"type": "map", "data": {"@count": {str(me): count}}} in objs
    raw = [o for o in objs if o["type"] == "raw"]
    assert raw == [{"type": "raw", "data": {"@hist": {str(log2_bucket(me)): count}},
                    "error": "ZeroDivisionError: a planted formatting bug"}]


def test_trace_results_that_cannot_be_decoded_are_printed_raw(trace_session, monkeypatch):
    """Reading and decoding the keys (symbols, strings) can fail too."""
    me = os.getpid()
    monkeypatch.setattr(type(trace_session), "results", planted_bug)
    ok, text, err = final(trace_session, json_mode=False)
    assert not ok and "could not read the results" in err
    raw = {line.split(" (raw): ")[0]: json.loads(line.split(" (raw): ")[1])
           for line in text.splitlines() if " (raw): " in line}
    count = raw["@count"][str(me)]                           # the map's own keys
    assert count >= CALLS and raw == {"@count": {str(me): count},
                                      "@hist": {str(log2_bucket(me)): count}}


def test_run_prints_a_map_it_cannot_format_raw(tmp_path, monkeypatch):
    path = tmp_path / "two_maps.s"
    path.write_text(TWO_MAPS)
    with AsmSession(parse_asm_file(TWO_MAPS, str(path))) as session:
        for _ in range(CALLS):
            os.getpid()
        session.detach()
        ok, text, err = final(session, json_mode=False, command="run")
        assert ok and err == ""
        calls = session.results()["calls"][0]
        assert calls >= CALLS and f"@calls[0]: {calls}\n" in text and "@buckets:" in text

        monkeypatch.setattr(render, "format_hist", planted_bug)
        ok, text, err = final(session, json_mode=False, command="run")
        assert not ok and err == WARNING.format(cmd="run", name="@buckets")
        assert f"@calls[0]: {calls}\n" in text
        assert f'@buckets (raw): {{"3": {calls}}}\n' in text


def test_interval_printing_survives_a_formatting_error(trace_session, monkeypatch):
    """--interval prints with the same care: a failing map is raw, the trace goes on."""
    from pyebpf.session.live import print_interval
    me = os.getpid()
    count = trace_session.results()["@count"][(me,)]
    monkeypatch.setattr(formatting, "format_hist", planted_bug)
    out, err = io.StringIO(), io.StringIO()
    assert print_interval(trace_session, out, False, False, err=err) is False
    assert err.getvalue() == WARNING.format(cmd="trace", name="@hist")
    text = out.getvalue()
    assert f"@count[{me}]: {count}\n" in text
    assert f'@hist (raw): {{"{log2_bucket(me)}": {count}}}\n' in text


def test_interval_clear_counts_every_hit_once(monkeypatch):
    """--interval with --clear: the values printed are the baseline of the
    next printing, so a hit that lands after the read (here: while the
    printing formats) is in the next one, never lost."""
    from pyebpf.session.live import print_interval
    me = os.getpid()
    t = Trace(TP, pid=me).count()
    with t.start(me) as session:
        format_text = session.format_text

        def hit_while_formatting(results=None):
            os.getpid()                    # a hit between the read and the next one
            return format_text(results)
        monkeypatch.setattr(session, "format_text", hit_while_formatting)
        printed = []
        for calls in (CALLS, 0, 2):
            for _ in range(calls):
                os.getpid()
            out = io.StringIO()
            assert print_interval(session, out, False, True) is True
            printed += [int(x.split(": ")[1]) for x in out.getvalue().splitlines()
                        if x.startswith("@: ")]
        assert printed == [CALLS, 1, 3]    # each formatting's own hit shows up next time
