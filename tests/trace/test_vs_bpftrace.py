"""The same one-liner through `pyebpf trace` and through bpftrace, on the same
deterministic workload: the counts and histograms must print the same.

Counts of equal value come in hash order in bpftrace's output, so map lines
are compared sorted; histogram lines are compared in order.  `pyebpf trace
-c` traces only its command; the bpftrace scripts say so with /pid == cpid/
(other test runs may run the workload at the same time)."""
from __future__ import annotations

import json
import shutil

import pytest

from .conftest import bpftrace, cli, map_section

pytestmark = [pytest.mark.kernel,
              pytest.mark.skipif(shutil.which("bpftrace") is None,
                                 reason="bpftrace is not installed")]
N = "300"


def ours(*args: str) -> list[str]:
    proc = cli("trace", "-q", *args, check=True)
    return map_section(proc.stdout)


def theirs(script: str, command: str) -> list[str]:
    return map_section(bpftrace(script, "-c", command))


def test_count_by_argument(workload):
    a = ours(f"uprobe:{workload}:work", "--count", "arg0", "-c", f"{workload} {N}")
    b = theirs(f"uprobe:{workload}:work /pid == cpid/ {{ @[arg0] = count(); }}", f"{workload} {N}")
    assert len(a) == 10 and sorted(a) == sorted(b), (a, b)


def test_log2_histogram(workload):
    a = ours(f"uprobe:{workload}:work", "--hist", "arg1", "-c", f"{workload} {N}")
    b = theirs(f"uprobe:{workload}:work /pid == cpid/ {{ @ = hist(arg1); }}", f"{workload} {N}")
    assert a[0] == "@: " and len(a) > 5 and a == b, "\n".join(a + ["---"] + b)


def test_linear_and_keyed_histograms(workload):
    a = ours(f"uprobe:{workload}:work", "--lhist", "arg1", "0", "5000", "1000",
             "-c", f"{workload} {N}")
    b = theirs(f"uprobe:{workload}:work /pid == cpid/ {{ @ = lhist(arg1, 0, 5000, 1000); }}", f"{workload} {N}")
    assert a == b, "\n".join(a + ["---"] + b)
    a = ours(f"uprobe:{workload}:work", "--hist", "arg1", "--by", "arg0 % 2",
             "-c", f"{workload} {N}")
    b = theirs(f"uprobe:{workload}:work /pid == cpid/ {{ @[arg0 % 2] = hist(arg1); }}", f"{workload} {N}")
    assert sorted(a) == sorted(b) and "@[0]: " in a and "@[1]: " in a


def test_value_aggregations(workload):
    a = ours(f"uprobe:{workload}:work", "--sum", "arg1", "--min", "arg1", "--max", "arg1",
             "--avg", "arg1", "--stats", "arg1", "-c", f"{workload} {N}")
    b = theirs(f"uprobe:{workload}:work /pid == cpid/ {{ @sum = sum(arg1); @min = min(arg1); "
               f"@max = max(arg1); @avg = avg(arg1); @stats = stats(arg1); }}", f"{workload} {N}")
    assert a == b, (a, b)


def test_string_keys(workload):
    a = ours(f"uprobe:{workload}:greet", "--count", "str(arg0)", "-c", f"{workload} {N}")
    b = theirs(f"uprobe:{workload}:greet /pid == cpid/ {{ @[str(arg0)] = count(); }}", f"{workload} {N}")
    assert sorted(a) == sorted(b), (a, b)


def test_tracepoint_for_the_child(workload):
    a = ours("tracepoint:syscalls:sys_enter_openat", "--count", "comm", "--count",
             "str(args.filename)", "-c", f"{workload} {N}")
    b = theirs("tracepoint:syscalls:sys_enter_openat /pid == cpid/ { @count[comm] = count(); "
               "@count2[str(args->filename)] = count(); }", f"{workload} {N}")
    assert sorted(a) == sorted(b), (a, b)
    assert "@count2[/dev/null]: 19" in a


def test_usdt_arguments(workload):
    a = ours(f"usdt:{workload}:pyebpf_test:tick", "--count", "arg1", "-c", f"{workload} {N}")
    b = theirs(f"usdt:{workload}:pyebpf_test:tick /pid == cpid/ {{ @[arg1] = count(); }}", f"{workload} {N}")
    assert len(a) == 10 and sorted(a) == sorted(b), (a, b)
    a = ours(f"usdt:{workload}:pyebpf_test:tick", "--hist", "arg0", "-c", f"{workload} {N}")
    b = theirs(f"usdt:{workload}:pyebpf_test:tick /pid == cpid/ {{ @ = hist(arg0); }}", f"{workload} {N}")
    assert a == b


def test_json_maps_match(workload):
    proc = cli("trace", "-q", f"uprobe:{workload}:work", "--count", "arg0", "--hist", "arg1",
               "--json", "-c", f"{workload} {N}", check=True)
    objs = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    out = bpftrace(f"uprobe:{workload}:work /pid == cpid/ {{ @count[arg0] = count(); @hist = hist(arg1); }}",
                   "-f", "json", "-c", f"{workload} {N}")
    theirs_ = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    mine = {o["type"]: o["data"] for o in objs}
    other = {o["type"]: o["data"] for o in theirs_ if o["type"] in ("map", "hist")}
    assert mine == other


def test_expressions_as_the_language_reads_them(workload):
    """The flags' expressions are the language's: C precedence (the old
    hand-written parser applied operators left to right: (arg0 + 1) * 2)."""
    a = ours(f"uprobe:{workload}:work", "--count", "arg0 + 1 * 2", "-c", f"{workload} {N}")
    b = theirs(f"uprobe:{workload}:work /pid == cpid/ {{ @[arg0 + 1 * 2] = count(); }}",
               f"{workload} {N}")
    assert sorted(a) == sorted(b) and "@[2]: 30" in a, (a, b)


def test_signed_usdt_filter_as_bpftrace():
    """``--filter 'arg1 < -2'`` on a signed (-4@) USDT argument: accepted,
    and the same hits as bpftrace 0.17 (which compares it unsigned)."""
    from lang.harness import bt_workload
    w = bt_workload()
    a = ours(f"usdt:{w}:btw:delta", "--count", "arg1", "--filter", "arg1 < -2", "-c", f"{w} 14")
    b = theirs(f"usdt:{w}:btw:delta /pid == cpid && arg1 < -2/ {{ @[arg1] = count(); }}",
               f"{w} 14")
    assert sorted(a) == sorted(b) and "@[-3]: 2" in a, (a, b)
