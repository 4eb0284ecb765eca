"""The mapping of maps to metrics (pyebpf.export.metrics) and the web
configuration (pyebpf.export.webconfig), without a kernel."""
from __future__ import annotations

import base64

import pytest
from budget import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

from pyebpf.errors import OptionError, PyebpfError
from pyebpf.export import metrics as M
from pyebpf.export import webconfig
from pyebpf.lang.types import Type, int_type, string_type

from .helpers import samples


def _text(exp: M.MapExport, entries: dict, max_series: int = 100) -> tuple[dict, int]:
    from prometheus_client import CollectorRegistry, generate_latest

    fams, folded = M.families(exp, entries, max_series=max_series)

    class One:
        def collect(self):
            return fams
    reg = CollectorRegistry(auto_describe=False)
    reg.register(One())
    return samples(generate_latest(reg).decode()), folded


def _exp(kind: str, key: Type | None = None, value: Type | None = None, name: str = "@x",
         resets: bool = False) -> M.MapExport:
    return M.MapExport(name, kind, key, value or Type(kind), M.metric_name("p_", name), resets)


def test_names() -> None:
    assert M.metric_name("pyebpf_", "@") == "pyebpf_map"
    assert M.metric_name("pyebpf_", "@reqs") == "pyebpf_reqs"
    assert M.metric_name("", "@a.b") == "a_b"
    assert M.valid_prefix("app_") and M.valid_prefix("") and M.valid_prefix("a:b_")
    assert not M.valid_prefix("1x") and not M.valid_prefix("a-b") and not M.valid_prefix("é")


def test_counter_and_reset_gauge() -> None:
    got, _ = _text(_exp("count", int_type(8, True)), {-1: 3, 5: 2})
    assert got == {("p_x_total", (("key", "-1"),)): 3.0, ("p_x_total", (("key", "5"),)): 2.0}
    got, _ = _text(_exp("count", resets=True), {None: 7})
    assert got == {("p_x", ()): 7.0}
    assert "not as a counter" in (_exp("count", resets=True).notice() or "")


def test_several_keys_and_strings() -> None:
    key = Type("tuple", elems=(string_type(16), int_type(4, True)))
    got, _ = _text(_exp("sum", key), {("beta", -2): -10})
    assert got == {("p_x", (("key0", "beta"), ("key1", "-2"))): -10.0}


def test_stats_and_avg() -> None:
    got, _ = _text(_exp("stats"), {None: (4, 10)})
    assert got == {("p_x_count", ()): 4.0, ("p_x_sum", ()): 10.0, ("p_x_avg", ()): 2.0}
    got, _ = _text(_exp("avg"), {None: (4, -10)})
    assert got == {("p_x", ()): -2.0}          # C division, as bpftrace


def test_log2_histogram_buckets_are_cumulative_at_integer_bounds() -> None:
    # values -5, 0, 1, 2, 3, 9: log2 buckets 0, 1, 2, 3, 3, 5
    got, _ = _text(_exp("hist", value=Type("hist")), {None: {0: 1, 1: 1, 2: 1, 3: 2, 5: 1}})
    buckets = {dict(labels)["le"]: v for (name, labels), v in got.items()
               if name == "p_x_bucket"}
    assert buckets == {"-1": 1, "0": 2, "1": 3, "3": 5, "7": 5, "15": 6, "+Inf": 6}
    assert got[("p_x_count", ())] == 6


def test_lhist_buckets() -> None:
    value = Type("lhist", lhist=(0, 10, 5))     # buckets: <0, [0,5), [5,10), >=10
    got, _ = _text(_exp("lhist", value=value), {None: {1: 2, 3: 4}})
    buckets = {dict(labels)["le"]: v for (name, labels), v in got.items()
               if name == "p_x_bucket"}
    assert buckets == {"4": 2, "9": 2, "+Inf": 6}


def test_cap_keeps_the_largest_and_folds_the_rest() -> None:
    entries = {k: k for k in range(1, 21)}
    got, folded = _text(_exp("count", int_type()), entries, max_series=5)
    assert folded == 15
    kept = {dict(labels)["key"]: v for (_, labels), v in got.items()}
    assert kept == {"20": 20, "19": 19, "18": 18, "17": 17, "16": 16,
                    "__other__": sum(range(1, 16))}


def test_plain_non_numbers_are_not_exported() -> None:
    exp = _exp("plain", int_type(), string_type())
    assert not exp.exported and "not exported" in (exp.notice() or "")
    assert M.families(exp, {1: "a"}, max_series=10) == ([], 0)


@fuzz_settings(200)
@given(st.dictionaries(st.integers(-2**63, 2**63 - 1), st.integers(0, 2**40), max_size=60),
       st.integers(1, 70))
def test_cap_never_loses_counts(entries: dict, cap: int) -> None:
    kept, other, folded = M.capped("count", entries, cap)
    assert len(kept) == min(cap, len(entries))
    assert sum(v for _, v in kept) + (other or 0) == sum(entries.values())
    assert folded == max(0, len(entries) - cap)


@fuzz_settings(200)
@given(st.dictionaries(st.integers(0, 70), st.integers(1, 1000), min_size=1, max_size=20))
def test_histogram_is_cumulative_and_ends_with_the_count(buckets: dict) -> None:
    got, _ = _text(_exp("hist", value=Type("hist")), {None: buckets})
    series = [(dict(labels)["le"], v) for (name, labels), v in got.items()
              if name == "p_x_bucket"]
    values = [v for _, v in series]
    assert values == sorted(values)
    assert series[-1] == ("+Inf", sum(buckets.values()))


# ---------------------------------------------------------------- web config
def test_web_config_parses_the_exporter_toolkit_format() -> None:
    cfg = webconfig.parse("# c\ntls_server_config:\n  cert_file: /a.crt\n  key_file: \"/a.key\"\n"
                          "basic_auth_users:\n  u: '$2b$04$abcdefghijklmnopqrstuu1234567890"
                          "1234567890123456789'\n")
    assert cfg.tls and cfg.cert_file == "/a.crt" and cfg.key_file == "/a.key"
    assert list(cfg.users) == ["u"]


@pytest.mark.parametrize("text, words", [
    ("tls_server_config:\n  cert_file: /a\n", "needs both cert_file and key_file"),
    ("tls_server_config:\n  client_ca_file: /a\n", "client_ca_file is not supported"),
    ("http_server_config:\n  http2: true\n", "'http_server_config' is not supported"),
    ("basic_auth_users:\n  u: plain\n", "not a bcrypt hash"),
    ("basic_auth_users:\n  u:\n", "u has no value"),
    ("  u: x\n", "outside a section"),
    ("basic_auth_users: [a]\n", "expected a plain value"),
    ("what\n", "expected 'name: value'"),
])
def test_web_config_errors(text: str, words: str) -> None:
    with pytest.raises(OptionError) as exc:
        webconfig.parse(text, "w.yml")
    assert words in str(exc.value)
    assert isinstance(exc.value, PyebpfError)


def test_missing_web_config_file() -> None:
    with pytest.raises(OptionError, match="No such file"):
        webconfig.load("/nonexistent/web.yml")


def test_basic_auth_checks_bcrypt_hashes() -> None:
    hashed = webconfig.hash_password("pw", cost=4)
    assert hashed.startswith("$2b$04$")
    assert webconfig.check_password("pw", hashed) and not webconfig.check_password("pW", hashed)
    cfg = webconfig.WebConfig(users={"u": hashed})

    def header(user: str, pw: str) -> str:
        return "Basic " + base64.b64encode(f"{user}:{pw}".encode()).decode()
    assert cfg.allows(header("u", "pw")) and cfg.allows(header("u", "pw"))    # (cached)
    assert not cfg.allows(header("u", "x")) and not cfg.allows(header("v", "pw"))
    assert not cfg.allows(None) and not cfg.allows("Basic !!!") and not cfg.allows("Bearer x")
    assert webconfig.WebConfig().allows(None)


def test_missing_client_library_names_the_extra() -> None:
    import subprocess
    import sys

    from .helpers import ROOT
    code = ("import sys; sys.modules['prometheus_client'] = None; "
            "sys.argv = ['pyebpf', 'export', '-e', 'BEGIN {}']; "
            "from pyebpf.cli import entry; entry()")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=str(ROOT), env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                          timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert "pyebpf export: the exporter needs the prometheus_client package: pip install " \
           "'pyebpf-toolkit[export]'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_map_without_keys_is_never_folded() -> None:
    got, folded = _text(_exp("count"), {None: 4}, max_series=0)
    assert got == {("p_x_total", ()): 4.0} and folded == 0


def test_integer_keys_print_as_bpftrace_prints_them() -> None:
    assert M.label_values(int_type(8, False), (1 << 64) - 1) == ["-1"]
    assert M.label_values(int_type(4, False), (1 << 32) - 1) == [str((1 << 32) - 1)]
    assert M.label_values(int_type(2, True), -7) == ["-7"]


def test_a_map_that_cannot_be_read_does_not_lose_the_others(capsys) -> None:
    from pyebpf.export.server import Exporter
    from prometheus_client import generate_latest

    class Run:
        stacks = None

        def entries(self, name: str) -> dict:
            if name == "@bad":
                raise OSError(9, "Bad file descriptor")
            return {None: 5}
    exporter = Exporter(prefix="p_")
    exporter.exports = [_exp("count", name="@bad"), _exp("count", name="@good")]
    exporter._run = Run()
    for _ in range(2):
        got = samples(generate_latest(exporter.registry).decode())
        assert got[("p_good_total", ())] == 5.0 and ("p_bad_total", ()) not in got
    err = capsys.readouterr().err
    assert err.count("pyebpf export: @bad cannot be exported") == 1, err


def test_close_lets_a_scrape_being_answered_finish() -> None:
    """A scrape in progress when the exporter closes gets its whole answer
    before close() returns (a process exiting right after close() used to
    cut it: the answering threads are daemons)."""
    import threading
    import time
    import urllib.request

    from pyebpf.export.server import Exporter

    class Slow:
        def collect(self):              # a collector that takes a while
            time.sleep(2)               # (longer than the server's 0.5 s poll)
            return iter(())

    exp = Exporter()
    exp.registry.register(Slow())
    host, port = exp.serve("127.0.0.1", 0)
    answers: list[tuple[int, bytes]] = []

    def scrape() -> None:
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=30) as resp:
            answers.append((resp.status, resp.read()))
    thread = threading.Thread(target=scrape, daemon=True)
    thread.start()
    time.sleep(0.2)                     # the scrape is being answered
    exp.close()
    thread.join(0.2)
    assert answers and answers[0][0] == 200 and b"pyebpf_dropped_series_total" in answers[0][1]
