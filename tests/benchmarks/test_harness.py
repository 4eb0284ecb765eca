"""The benchmark harness runs and its numbers are sane (not that they meet a goal).

Runs ``python -m benchmarks --quick --rounds 1 compare`` (the comparison
only, one round: ~15 s) into a temporary results directory and checks the
closing ``target`` lines and the JSON it wrote.

Peers: bpftrace is installed by ``make test``, so with
PYEBPF_REQUIRE_KERNEL=1 (CI) its absence fails the test.  BCC is not (it
needs python3-bpfcc plus kernel headers, ~100 MB, and ``make bench``'s set-up
step installs them), so its columns may be ``n/a (not installed)``: checked
as such, never a failure.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REQUIRE = os.environ.get("PYEBPF_REQUIRE_KERNEL") == "1"
TARGET = re.compile(r"^target ([\w-]+): (?:([\d.]+) \(goal (<=|>=|==) ([\d.]+)\) (met|missed)"
                    r"|n/a \(goal (?:<=|>=|==) [\d.]+\) not measured: .+)$")
NAMES = ["cold-start-wall", "cold-start-rss", "streaming-rate-vs-bcc", "streaming-lost",
         "streaming-added-us", "aggregation-count", "aggregation-hist"]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    if shutil.which("gcc") is None:
        pytest.fail("gcc is needed to build benchmarks/targets/loop.c") if REQUIRE \
            else pytest.skip("gcc is not installed")
    out = tmp_path_factory.mktemp("bench")
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--rounds", "1",
                           "--results", str(out), "compare"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    elapsed = time.monotonic() - t0
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    res = json.loads((out / "quick.json").read_text())
    return proc.stdout, res, (out / "quick.md").read_text(), elapsed


@pytest.mark.kernel
def test_ends_with_one_line_per_target(quick_run):
    stdout, res, _, elapsed = quick_run
    lines = stdout.rstrip("\n").splitlines()[-len(NAMES):]
    assert [TARGET.match(line) is not None for line in lines] == [True] * len(NAMES), lines
    assert [line.split(":")[0][len("target "):] for line in lines] == NAMES
    assert elapsed < 120, f"the quick comparison took {elapsed:.0f} s"


@pytest.mark.kernel
def test_peers_are_measured_or_marked_missing(quick_run):
    _, res, md, _ = quick_run
    tools = res["tools"]
    assert tools["pyebpf"]["available"], tools["pyebpf"]
    if REQUIRE:
        assert tools["bpftrace"]["available"], "make test installs bpftrace"
    for name, tool in tools.items():
        if not tool["available"]:
            assert "n/a" in md
            assert name not in res["stream"] or "error" in res["stream"][name]


@pytest.mark.kernel
def test_numbers_are_sane(quick_run):
    _, res, _, _ = quick_run
    P = res["params"]
    avail = [t for t, x in res["tools"].items() if x["available"]]
    for tool in avail:
        cold = res["cold"][tool]
        assert "error" not in cold, cold
        assert cold["count"] == P["cold_calls"]
        assert 0.01 < cold["wall_s"] < 60 and 1 < cold["rss_mb"] < 4096
        assert 0 < cold["result_s"] <= cold["wall_s"]
        st = res["stream"][tool]
        assert "error" not in st, st
        assert st["received"] + st["lost"] + st["missing"] == P["stream_events"]
        assert st["received"] > 0 and st["events_per_s"] > 0 and st["cpu_s"] >= 0
        assert st["traced_ns_per_call"] > 0
        for kind in ("count", "hist"):
            agg = res[f"agg_{kind}"][tool]
            assert "error" not in agg, agg
            assert agg["exact"], (tool, kind, agg)      # the aggregation counted every hit
    lib = res["library"]
    for key in ("dsl_insns_per_s", "text_lines_per_s_typical", "map_lookups_per_s",
                "batch_iteration_entries_per_s"):
        assert lib[key] and lib[key] > 0, (key, lib)
    for t in res["targets"]:
        if t["value"] is not None:
            assert 0 <= t["value"] < 1000, t
