"""The Trace API used more fully: every builder, the shortcuts, a running
session's reads.  ``assert_type`` makes mypy fail if a type turns into ``Any``
or changes (this file is only type-checked, never run)."""
from __future__ import annotations

import json
import time

from typing_extensions import assert_type

from pyebpf.trace import Trace, TraceSession, count, events, histogram, latency, stacks, stats
from pyebpf.trace.recipes import AggResult, Event, FieldValue, KeyPart

t = (Trace("uprobe:libc:malloc", "uprobe:libc:calloc", pid=1234, strlen=32,
           filters=["arg0 > 16"])
     .filter('comm != "sshd"')
     .count(by="comm", name="calls")
     .sum("arg0", by=["pid", "str(arg1, 16)"])
     .min("arg0").max("arg0").avg("arg0", by="comm").stats("arg0")
     .stats("arg1", by="probe", name="per_probe")
     .hist("arg0", name="sizes")
     .lhist("arg0", 0, 4096, 256, by="probe", name="small")
     .print("%s asked %d bytes", "comm", "size=arg0"))
assert_type(t, Trace)
assert_type(t.show(), str)
assert_type(t.uses("latency"), bool)

shortcuts: list[Trace] = [
    count("uprobe:libc:malloc", by="ustack", ring=True),
    histogram("uprobe:libc:malloc", "arg0", linear=(0, 100, 10), buffer_size=1 << 16),
    latency("uprobe:libc:malloc", unit="us", unsafe=False),
    events("usdt:/usr/bin/python3:python:function__entry", "str(arg0)", "arg2",
           fmt="%s:%d"),
    stacks("uprobe:libc:free"),
    stats("tracepoint:syscalls:sys_enter_read", "args.count", by="comm"),
]

with t.start() as session:
    assert_type(session, TraceSession)
    time.sleep(1)
    for event in session.read_events(timeout=0.5):
        assert_type(event, Event)
        assert_type(event.fields["size"], FieldValue)
        line: str = event.line
        print(event.probe, line, json.dumps(event.to_json()))
    header: str | None = session.header()
    results = session.results()
    assert_type(results, dict[str, AggResult])
    # one aggregation each, in the shape its kind has: no isinstance, no cast
    calls = session.counts("@calls")            # keyed: {(comm,): count}
    assert_type(calls, dict[tuple[KeyPart, ...], int])
    for key, value in calls.items():
        part: KeyPart = key[0]
        print(part, value + 1)
    top = max(calls.values(), default=0)
    print(top * 2)
    per_comm: dict[tuple[KeyPart, ...], int] = session.counts("@avg")
    print(sorted(per_comm.items(), key=lambda kv: kv[1]))
    smallest = session.value("@min")            # unkeyed: int, None before any hit
    assert_type(smallest, int | None)
    print(0 if smallest is None else smallest + 1)
    sizes = session.histogram("@sizes")         # {bucket: count}
    assert_type(sizes, dict[int, int])
    print(sum(sizes.values()), max(sizes, default=0))
    small = session.histograms("@small")        # keyed: {(probe,): {bucket: count}}
    assert_type(small, dict[tuple[KeyPart, ...], dict[int, int]])
    for key, buckets in small.items():
        print(key, sum(buckets.values()))
    st = session.stats("@stats")
    assert_type(st, tuple[int, int, int] | None)
    if st is not None:
        count_, average, total = st
        print(count_ + average + total)
    by_probe = session.keyed_stats("@per_probe")
    assert_type(by_probe, dict[tuple[KeyPart, ...], tuple[int, int, int]])
    assert_type(session.format_text(), str)
    assert_type(session.format_table(results), str)
    for obj in session.json_objects():
        print(json.dumps(obj))
    session.clear()
    assert_type(session.stack(0), list[str])
    assert_type(session.attach_seconds, float)
    session.detach()
    lost: int = session.lost
