"""``pyebpf export`` scraped by a real Prometheus server: PromQL through
Prometheus's HTTP API returns exactly the workload's counts and histogram
buckets; TLS and basic authentication; the series cap; SIGTERM leaves
nothing in the kernel; scrapes while it attaches and detaches never fail.

The workload is tests/lang/btworkload.c (``btworkload N SLEEP_US``): N
``btw:request`` (host ``HOSTS[i % 3]``) and ``btw:delta(i, i % 7 - 3, ...)``
probes, i = 0..N-1 (see tests/lang/harness.py).
"""
from __future__ import annotations

import collections
import http.client
import signal
import ssl
import subprocess
import threading
import urllib.error
import urllib.request

import pytest
from kernel_objects import alive_ids, bpf_ids
from waiting import wait_until

from lang.harness import HOSTS, bt_workload
from .helpers import Exporter, Prometheus, job, samples, scrape, self_signed_cert

pytestmark = pytest.mark.kernel

N = 300


def _program(w: str) -> str:
    return (f"usdt:{w}:btw:request {{ @req[str(arg0)] = count(); }} "
            f"usdt:{w}:btw:delta {{ @d[arg1] = count(); @i = hist(arg0); "
            f"@l = lhist(arg0, 0, 100, 25); @s = stats(arg0); }}")


def _le_counts(values: list[int], bounds: list[str]) -> dict:
    return {(("le", le),): float(len(values) if le == "+Inf" else
                                 sum(1 for v in values if v <= int(le))) for le in bounds}


def test_promql_returns_the_workloads_counts_and_buckets(tmp_path) -> None:
    w = bt_workload()
    with Exporter("-e", _program(w), "-c", f"{w} {N} 10") as exp, \
            Prometheus(tmp_path, job("pyebpf", exp.address)) as prom:
        hosts = collections.Counter(HOSTS[i % 3] for i in range(N))
        prom.wait_for("pyebpf_req_total", {(("key", h),): float(c) for h, c in hosts.items()},
                      "the request counts in Prometheus")
        deltas = collections.Counter(i % 7 - 3 for i in range(N))
        prom.wait_for("pyebpf_d_total", {(("key", str(d)),): float(c) for d, c in deltas.items()},
                      "the delta counts")
        values = list(range(N))
        log2 = ["0", "1", "3", "7", "15", "31", "63", "127", "255", "511", "+Inf"]
        prom.wait_for("pyebpf_i_bucket", _le_counts(values, log2), "the log2 buckets")
        prom.wait_for("pyebpf_i_count", {(): float(N)}, "the histogram's count")
        linear = ["24", "49", "74", "99", "+Inf"]
        prom.wait_for("pyebpf_l_bucket", _le_counts(values, linear), "the linear buckets")
        prom.wait_for("pyebpf_s_sum", {(): float(sum(values))}, "the stats sum")
        prom.wait_for("pyebpf_s_count", {(): float(N)}, "the stats count")
        prom.wait_for("pyebpf_s_avg", {(): float(sum(values) // N)}, "the stats average")
        # PromQL over the histogram: the median of 0..N-1 lies in le=255's bucket
        q = prom.query("histogram_quantile(0.5, pyebpf_i_bucket)")
        assert 127 < q[()] <= 255, q
        # counters are counters: rate() over them is defined, and they are typed so
        meta = scrape(exp.url)
        assert "# TYPE pyebpf_req_total counter" in meta
        assert "# TYPE pyebpf_i histogram" in meta


def test_cleared_count_is_a_gauge_and_said_at_start() -> None:
    w = bt_workload()
    prog = (f"usdt:{w}:btw:delta {{ @n = count(); @k[arg1] = count(); }} "
            f"usdt:{w}:btw:request {{ if (arg1 == 0) {{ clear(@n); delete(@k[3]); }} }}")
    with Exporter("-e", prog) as exp:
        notices = "".join(exp.lines)
        assert "@n is cleared or deleted from by the program: exported as the gauge pyebpf_n" \
            in notices
        assert "@k is cleared" in notices
        text = scrape(exp.url)
        assert "# TYPE pyebpf_n gauge" in text and "pyebpf_n_total" not in text


def test_series_cap_folds_into_other_and_counts_the_dropped() -> None:
    """--max-series 60 over two maps of 50 keys each: @h (first by name)
    exports its 50, @i 10 of its 50 and one __other__ series for the 40
    others."""
    w = bt_workload()
    n = 50
    with Exporter("-e", f"usdt:{w}:btw:delta {{ @i[arg0] = count(); @h[arg0] = hist(arg0); }}",
                  "-c", f"{w} {n} 10", "--max-series", "60") as exp:
        def full() -> dict:
            got = samples(scrape(exp.url))
            counts = [v for (name, _), v in got.items()
                      if name in ("pyebpf_i_total", "pyebpf_h_count")]
            return got if sum(counts) == 2 * n else {}
        got = wait_until(full, "every call counted in both maps")
        series = {labels: v for (name, labels), v in got.items() if name == "pyebpf_i_total"}
        assert len(series) == 11
        assert series[(("key", "__other__"),)] == n - 10
        hist_counts = {labels: v for (name, labels), v in got.items() if name == "pyebpf_h_count"}
        assert len(hist_counts) == n and (("key", "__other__"),) not in hist_counts
        before = got[("pyebpf_dropped_series_total", ())]
        assert before >= n - 10         # (earlier scrapes, mid-workload, folded fewer)
        after = samples(scrape(exp.url))[("pyebpf_dropped_series_total", ())]
        assert after == before + (n - 10)          # a counter: it never goes down


def test_sigterm_stops_cleanly_with_nothing_left_in_the_kernel() -> None:
    w = bt_workload()
    with Exporter("-e", _program(w), "-c", f"{w} 1000000 1000") as exp:
        ids = bpf_ids(exp.proc.pid)
        assert ids["prog"] and ids["map"] and ids["link"], ids
        assert "pyebpf_req_total" in scrape(exp.url)
        status, err = exp.stop(signal.SIGTERM)
    assert status == 0, err
    assert "Traceback" not in err, err
    assert alive_ids(ids) == {}


def test_scrapes_during_attach_and_detach_never_fail() -> None:
    """A scraper hammers the port while the exporter starts (attaching
    uprobes on a running process) and while SIGTERM detaches: every answer
    is a 200 (a refused connection before it listens or after it closed is
    not an answer)."""
    w = bt_workload()
    port_box: list[str] = []
    statuses: list[object] = []
    done = threading.Event()
    from .helpers import free_port
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"

    def hammer() -> None:
        while not done.is_set():
            try:
                with urllib.request.urlopen(url, timeout=30) as resp:
                    resp.read()
                    statuses.append(resp.status)
            except urllib.error.HTTPError as exc:
                statuses.append(exc.code)
            except (ConnectionError, urllib.error.URLError):
                pass
            except http.client.HTTPException as exc:    # an answer cut short
                statuses.append(type(exc).__name__)
    thread = threading.Thread(target=hammer, daemon=True)
    thread.start()
    try:
        workload = subprocess.Popen([w, "100000000", "100"], stdout=subprocess.DEVNULL)
        try:
            prog = (f"uprobe:{w}:compute {{ @c[arg0] = count(); }} "
                    f"uretprobe:{w}:compute {{ @r = hist(retval); }} " + _program(w))
            exp = Exporter("-e", prog, "-p", str(workload.pid), listen=f"127.0.0.1:{port}")
            port_box.append(exp.url)
            wait_until(lambda: len(statuses) > 20, "scrapes while attached")
            status, err = exp.stop(signal.SIGTERM)
            assert status == 0, err
        finally:
            workload.kill()
            workload.wait()
    finally:
        done.set()
        thread.join(30)
    assert statuses and set(statuses) == {200}, collections.Counter(statuses)


def test_tls_and_basic_auth_with_prometheus(tmp_path) -> None:
    from pyebpf.export.webconfig import hash_password
    w = bt_workload()
    cert, key = self_signed_cert(tmp_path)
    web = tmp_path / "web.yml"
    web.write_text(f"# as the exporter-toolkit's\ntls_server_config:\n  cert_file: {cert}\n"
                   f"  key_file: {key}\nbasic_auth_users:\n"
                   f"  prom: '{hash_password('s3cret', cost=4)}'\n")
    with Exporter("-e", f"usdt:{w}:btw:delta {{ @d = count(); }}", "-c", f"{w} 77 10",
                  "--web.config.file", str(web)) as exp:
        assert exp.url.startswith("https://")
        ctx = ssl.create_default_context(cafile=cert)
        with pytest.raises(urllib.error.HTTPError) as no_auth:
            scrape(exp.url, context=ctx)
        assert no_auth.value.code == 401
        import base64

        def get(user: str, password: str) -> str:
            token = base64.b64encode(f"{user}:{password}".encode()).decode()
            req = urllib.request.Request(exp.url, headers={"Authorization": f"Basic {token}"})
            return scrape(req, context=ctx)    # type: ignore[arg-type]
        with pytest.raises(urllib.error.HTTPError) as wrong:
            get("prom", "wrong")
        assert wrong.value.code == 401
        with pytest.raises(OSError):       # plain HTTP is not served
            scrape(exp.url.replace("https:", "http:"))
        assert "pyebpf_d_total" in get("prom", "s3cret")
        extra = (f"    scheme: https\n    tls_config:\n      ca_file: {cert}\n"
                 f"    basic_auth:\n      username: prom\n      password: s3cret\n")
        with Prometheus(tmp_path, job("tls", exp.address, extra)) as prom:
            prom.wait_for("pyebpf_d_total", {(): 77.0}, "the count scraped over TLS")
            prom.wait_for("up", {(): 1.0}, "the target up")


def _hammer() -> str:
    """tests/export/hammer.c built (once, again when the source is newer)."""
    import os
    import shutil

    from .helpers import ROOT
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    src = ROOT / "tests" / "export" / "hammer.c"
    out = ROOT / "tests" / "build" / "export" / "hammer"
    out.parent.mkdir(parents=True, exist_ok=True)
    if not out.exists() or out.stat().st_mtime < src.stat().st_mtime:
        tmp = out.with_suffix(f".tmp{os.getpid()}")
        subprocess.run(["gcc", "-O2", "-o", str(tmp), str(src)], check=True)
        os.replace(tmp, out)
    return str(out)


def test_keeps_serving_under_a_flood_of_events() -> None:
    """Every CPU makes getppid() calls flat out while the exporter is scraped
    20 times: every scrape answers, and the count never goes down and grows.
    (How fast, and the scrape time, are measured and printed, not asserted:
    speed belongs to benchmarks/bench_export.py, not to a test on a loaded
    machine.)"""
    import os
    import time
    hammer = _hammer()
    with Exporter("-e", "tracepoint:syscalls:sys_enter_getppid { @n = count(); }") as exp:
        floods = [subprocess.Popen([hammer, "1000000000"]) for _ in range(os.cpu_count() or 2)]
        try:
            def count() -> float:
                return samples(scrape(exp.url)).get(("pyebpf_n_total", ()), 0.0)
            wait_until(lambda: count() > 0, "the first events")
            seen, slowest = [], 0.0
            t_start = time.monotonic()
            for _ in range(20):
                t0 = time.monotonic()
                seen.append(count())
                slowest = max(slowest, time.monotonic() - t0)
            wait_until(lambda: count() > seen[-1], "the count to grow past the last scrape")
            rate = (count() - seen[0]) / (time.monotonic() - t_start)
        finally:
            for f in floods:
                f.kill()
                f.wait()
    print(f"\n{rate:,.0f} events/s during {len(seen)} scrapes; the slowest took "
          f"{slowest * 1000:.1f} ms")
    assert all(b >= a for a, b in zip(seen, seen[1:])), seen


def test_pystack_of_a_command_names_its_python_functions() -> None:
    """``-c`` a CPython command: the exporter tells the run once it has
    exec'd (as bt does), so ``pystack`` keys read its frames."""
    import sys
    from pyworkloads import WORKLOAD
    program = "profile:hz:99 { @[pystack] = count(); }"
    with Exporter("-e", program, "-c", f"{sys.executable} {WORKLOAD} 3") as exp:
        def hot_seen() -> bool:
            return "hot (" in scrape(exp.url)
        wait_until(hot_seen, "a pystack label naming hot()", timeout=30)
