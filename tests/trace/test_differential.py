"""The Trace API against ``pyebpf bt`` (issue 26): for each shortcut and a
table of filters and keys, the C workload traced through :class:`Trace` and
through the bpftrace program a user would write for it (run by ``python -m
pyebpf bt -f json -c``) gives the same maps and the same events.

Each row is one workload run on each side.  The bpftrace programs are
written here by hand (not the text the Trace generates), so that the
comparison covers what the Trace builds as well as how its results are read
and printed.  Latencies differ from run to run: their histograms are
compared by their number of calls."""
from __future__ import annotations

import json
from typing import Any, Callable

import pytest

from pyebpf.trace import Trace, count, events, histogram, latency, stacks, stats
from pyebpf.session.live import Child

from .conftest import cli

N = 40
#: workload arguments: N iterations, slow() sleeping 200 us
ARGV = [str(N), "200"]


def _key(k: str) -> str:
    """A printed key, the same on both sides: a stack as its frames folded
    outermost first (bpftrace's text is one frame a line), several parts
    joined by "," (bpftrace prints no space)."""
    if "\n" in k:
        frames = [line.strip() for line in k.splitlines() if line.strip()]
        return ";".join(reversed(frames))
    return k.replace(", ", ",")


def _norm(objects: list[dict[str, Any]], calls_only: set[str],
          func: bool = False) -> dict[str, Any]:
    """JSON map objects -> {name: data}, keys normalized (see :func:`_key`),
    empty maps left out;
    the histograms named in ``calls_only`` reduced to their number of calls;
    ``func``: probe names as the function's name (``uprobe:W:work`` -> ``work``)."""
    out: dict[str, Any] = {}
    for obj in objects:
        if obj.get("type") not in ("map", "hist", "stats"):
            continue
        for name, data in obj["data"].items():
            if data in ({}, []):                # (an entry/return pair's map, emptied)
                continue
            if isinstance(data, dict):
                data = {_key(k).rpartition(":")[2] if func else _key(k): v
                        for k, v in data.items()}
            if name in calls_only:
                data = sum(b["count"] for b in data) if isinstance(data, list) else \
                    {k: sum(b["count"] for b in v) for k, v in data.items()}
            out[name] = data
    return out


def _through_trace(trace: Trace, workload: str) -> tuple[list[dict[str, Any]], list[str]]:
    child = Child([workload, *ARGV])
    try:
        session = trace.start(child.pid)
    except BaseException:
        child.kill()
        child.close()
        raise
    with session:
        child.go()
        child.wait()
        child.close()
        lines = [e.line for e in session.read_events(0)]
        return session.json_objects(), lines


def _through_bt(program: str, workload: str) -> tuple[list[dict[str, Any]], list[str]]:
    proc = cli("bt", "-f", "json", "-e", program, "-c", " ".join([workload, *ARGV]),
               timeout=120)
    assert proc.returncode == 0, proc.stderr
    objects = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    lines = [o["data"] for o in objects if o["type"] == "printf"]
    return objects, lines


#: (id, the Trace (given the workload's path), the bpftrace program ("W": the
#: workload's path), the histograms compared by their number of calls
#: ("probe->func": the bt program's probe names compared as function names))
ROWS: list[tuple[str, Callable[[str], Trace], str, set[str]]] = [
    ("count-by-arg0", lambda w: count(f"uprobe:{w}:work", by="arg0"),
     "uprobe:W:work /pid == cpid/ { @[arg0] = count(); }", set()),
    ("count-two-keys-filtered", lambda w: Trace(f"uprobe:{w}:greet", filters=["arg1 >= 3"])
     .count(by="comm, arg1 % 2"),
     "uprobe:W:greet /pid == cpid && arg1 >= 3/ { @[comm, arg1 % 2] = count(); }", set()),
    ("count-string-key-filters", lambda w: Trace(f"uprobe:{w}:greet")
     .filter('str(arg0) != "bob"').filter("arg1 < 10 || arg1 > 30").count(by=["str(arg0)"]),
     'uprobe:W:greet /pid == cpid && str(arg0) != "bob" && (arg1 < 10 || arg1 > 30)/ '
     "{ @[str(arg0)] = count(); }", set()),
    ("count-by-probe", lambda w: Trace(f"uprobe:{w}:work", f"uprobe:{w}:greet").count(by="probe"),
     "uprobe:W:work, uprobe:W:greet /pid == cpid/ { @[probe] = count(); }", set()),
    # (func: the function's name, as the probe names it -- the printed form
    # of an address bpftrace cannot name once the process is gone is hex)
    ("count-by-func-glob", lambda w: count(f"uprobe:{w}:[gw]*", by="func"),
     "uprobe:W:[gw]* /pid == cpid/ { @[probe] = count(); }", {"probe->func"}),
    ("histogram", lambda w: histogram(f"uprobe:{w}:work", "arg1"),
     "uprobe:W:work /pid == cpid/ { @ = hist(arg1); }", set()),
    ("histogram-linear-keyed", lambda w: histogram(f"uprobe:{w}:work", "arg1",
                                                   linear=(0, 5000, 1000), by="arg0 % 2"),
     "uprobe:W:work /pid == cpid/ { @[arg0 % 2] = lhist(arg1, 0, 5000, 1000); }", set()),
    ("stats-shortcut", lambda w: stats(f"uprobe:{w}:work", "arg1", by="arg0 % 3"),
     "uprobe:W:work /pid == cpid/ { @count[arg0 % 3] = count(); @sum[arg0 % 3] = sum(arg1); "
     "@min[arg0 % 3] = min(arg1); @max[arg0 % 3] = max(arg1); @avg[arg0 % 3] = avg(arg1); }",
     set()),
    ("stats-aggregation", lambda w: Trace(f"uprobe:{w}:work").stats("arg1", by="arg0 > 4"),
     "uprobe:W:work /pid == cpid/ { @[arg0 > 4] = stats(arg1); }", set()),
    ("latency-shortcut", lambda w: latency(f"uprobe:{w}:slow", unit="us"),
     "uprobe:W:slow /pid == cpid/ { @start[tid] = nsecs; } "
     "uretprobe:W:slow /@start[tid]/ { @latency_us = hist((nsecs - @start[tid]) / 1000); "
     "delete(@start[tid]); }", {"@latency_us"}),
    ("retval-at-uprobe", lambda w: Trace(f"uprobe:{w}:slow").count(by="retval, arg0"),
     "uprobe:W:slow /pid == cpid/ { @arg[tid] = arg0; } "
     "uretprobe:W:slow /@arg[tid]/ { @[retval, @arg[tid]] = count(); delete(@arg[tid]); }",
     set()),
    ("stacks-shortcut", lambda w: stacks(f"uprobe:{w}:work"),
     "uprobe:W:work /pid == cpid/ { @[ustack] = count(); }", set()),
    ("tracepoint-fields", lambda w: Trace("tracepoint:syscalls:sys_enter_openat",
                                          filters=['str(args.filename) == "/dev/null"'])
     .count(by="args.dfd"),
     'tracepoint:syscalls:sys_enter_openat /pid == cpid && str(args.filename) == "/dev/null"/ '
     "{ @[args.dfd] = count(); }", set()),
    ("usdt-signed-arithmetic", lambda w: Trace(f"usdt:{w}:pyebpf_test:tick")
     .sum("arg1 - 7").min("(arg1 - 7) / 2").max("arg0 - 100").count(by="(arg1 - 5) / 2"),
     "usdt:W:pyebpf_test:tick /pid == cpid/ { @sum = sum(arg1 - 7); "
     "@min = min((arg1 - 7) / 2); @max = max(arg0 - 100); @count[(arg1 - 5) / 2] = count(); }",
     set()),
    ("events-shortcut", lambda w: events(f"uprobe:{w}:greet", "str(arg0)", "n=arg1",
                                         fmt="%s %d"),
     'uprobe:W:greet /pid == cpid/ { printf("%s %d\\n", str(arg0), arg1); }', set()),
    ("events-table", lambda w: Trace(f"uprobe:{w}:work", filters=["arg0 == 3"])
     .print(None, "arg0", "arg1"),
     'uprobe:W:work /pid == cpid && arg0 == 3/ { printf("%-7d %d\\n", arg0, arg1); }', set()),
]


@pytest.mark.kernel
@pytest.mark.parametrize("make, program, calls_only", [r[1:] for r in ROWS],
                         ids=[r[0] for r in ROWS])
def test_trace_equals_the_bt_program(workload, make, program, calls_only):
    trace_maps, trace_lines = _through_trace(make(workload), workload)
    bt_maps, bt_lines = _through_bt(program.replace("W", workload), workload)
    got = _norm(trace_maps, calls_only)
    want = _norm(bt_maps, calls_only, func="probe->func" in calls_only)
    assert got == want
    assert trace_lines == bt_lines
    assert got or trace_lines                   # (something was compared)
