"""Test helpers for ``pyebpf export``: the exporter as a subprocess, a real
Prometheus server (Debian's ``prometheus``) with a temporary configuration
and storage, and PromQL through its HTTP API. Every wait is on a condition
and bounded (tests/waiting.py)."""
from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import urllib.parse
import urllib.request

import pytest
from waiting import read_until, wait_until

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
_SERVING = re.compile(r"serving \d+ maps? at (https?)://([^/]+)/metrics")


def free_port() -> int:
    """A loopback TCP port nobody listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Exporter:
    """``python -m pyebpf export ARGS --listen 127.0.0.1:0`` as a child;
    :attr:`url` once it serves. A context manager: SIGTERM, then waits."""

    def __init__(self, *args: str, listen: str = "127.0.0.1:0") -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen([sys.executable, "-m", "pyebpf", "export", *args,
                                      "--listen", listen],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=env, cwd=str(ROOT))
        assert self.proc.stderr is not None
        try:
            self.lines = read_until(self.proc.stderr, "serving ", "pyebpf export to serve",
                                    timeout=60)
        except BaseException:
            self.stop()
            raise
        m = _SERVING.search(self.lines[-1])
        assert m, self.lines
        self.scheme, self.address = m.group(1), m.group(2)
        self.url = f"{self.scheme}://{self.address}/metrics"

    def stop(self, sig: int = signal.SIGTERM) -> tuple[int, str]:
        """Send ``sig``, wait; (exit status, the rest of stderr)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            _, err = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return self.proc.returncode, err

    def __enter__(self) -> Exporter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def self_signed_cert(tmp_path: pathlib.Path) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 and its key (files in
    ``tmp_path``), made with the ``openssl`` command."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed (Debian's openssl)")
    cert, key = tmp_path / "c.crt", tmp_path / "c.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return str(cert), str(key)


def scrape(url: str, **kw: object) -> str:
    """The body of one GET of ``url`` (raises for a non-200 status)."""
    with urllib.request.urlopen(url, timeout=30, **kw) as resp:   # type: ignore[arg-type]
        return str(resp.read().decode())


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """``{(sample name, sorted labels): value}`` of an exposition text."""
    from prometheus_client.parser import text_string_to_metric_families
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


class Prometheus:
    """A real Prometheus server on a loopback port, scraping ``jobs``
    (``scrape_configs`` entries as YAML text) every second, its storage in
    ``tmp``. A context manager; :meth:`query` runs PromQL."""

    def __init__(self, tmp: pathlib.Path, jobs: str) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            pytest.skip("prometheus is not installed (Debian's prometheus: make debs)")
        self.port = free_port()
        config = tmp / "prometheus.yml"
        config.write_text("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                          "scrape_configs:\n" + jobs)
        self.log = open(tmp / "prometheus.log", "w+")
        self.proc = subprocess.Popen([binary, f"--config.file={config}",
                                      f"--storage.tsdb.path={tmp / 'data'}",
                                      f"--web.listen-address=127.0.0.1:{self.port}"],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        self.base = f"http://127.0.0.1:{self.port}"
        try:
            wait_until(self._ready, "prometheus to be ready", timeout=60, detail=self.tail)
        except BaseException:
            self.close()
            raise

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"prometheus exited: {self.tail()}")
        try:
            with urllib.request.urlopen(self.base + "/-/ready", timeout=5) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    def tail(self) -> str:
        """The end of Prometheus's log."""
        self.log.seek(0)
        return self.log.read()[-3000:]

    def query(self, promql: str) -> dict[tuple[tuple[str, str], ...], float]:
        """An instant query's vector: ``{sorted labels without __name__, job and
        instance: value}``."""
        url = f"{self.base}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(url, timeout=30) as resp:
            body = json.loads(resp.read())
        assert body["status"] == "success", body
        out = {}
        for r in body["data"]["result"]:
            labels = tuple(sorted((k, v) for k, v in r["metric"].items()
                                  if k not in ("__name__", "job", "instance")))
            out[labels] = float(r["value"][1])
        return out

    def wait_for(self, promql: str, expected: dict, what: str,
                 timeout: float = 60) -> None:
        """Wait until ``promql`` returns exactly ``expected`` (bounded)."""
        got: list[dict] = [{}]

        def same() -> bool:
            got[0] = self.query(promql)
            return got[0] == expected
        wait_until(same, what, timeout=timeout,
                   detail=lambda: f"{promql} -> {got[0]}, expected {expected}; "
                                  f"log: {self.tail()[-800:]}")

    def close(self) -> None:
        """Stop the server."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()

    def __enter__(self) -> Prometheus:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def job(name: str, address: str, extra: str = "") -> str:
    """One ``scrape_configs`` entry scraping ``address``."""
    return (f"  - job_name: {name}\n    static_configs:\n      - targets: ['{address}']\n"
            + extra)
