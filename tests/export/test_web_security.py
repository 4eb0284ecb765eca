"""The exporter's authentication, TLS and connection limits against
concurrent, hostile, silent and slow clients (issue 24), without a kernel:
an in-process :class:`~pyebpf.export.server.Exporter` with no program
attached (its scrapes answer ``pyebpf_dropped_series_total`` only) serves
``/metrics`` on 127.0.0.1 over real HTTP and HTTPS, and real clients --
threads with ``http.client``, raw sockets that say nothing or dribble --
talk to it. Every loop is bounded in count and in time; every wait is on a
condition."""
from __future__ import annotations

import base64
import collections
import contextlib
import http.client
import socket
import ssl
import statistics
import threading
import time
from typing import Any, Iterator

import pytest
from waiting import wait_until

from pyebpf.errors import OptionError
from pyebpf.export.server import Exporter, Limits
from pyebpf.export.webconfig import WebConfig, check_password, hash_password

from .helpers import self_signed_cert


@pytest.fixture(scope="module")
def cert(tmp_path_factory: Any) -> tuple[str, str]:
    """A certificate for 127.0.0.1 and its key."""
    return self_signed_cert(tmp_path_factory.mktemp("tls"))


@contextlib.contextmanager
def serving(web: WebConfig | None = None, limits: Limits | None = None) -> Iterator[int]:
    """An exporter serving on a free loopback port (yielded), closed after."""
    exp = Exporter()
    _, port = exp.serve("127.0.0.1", 0, web, limits=limits)
    try:
        yield port
    finally:
        exp.close(grace=5)


def basic(user: str, password: str) -> str:
    """The ``Authorization`` header of ``user:password``."""
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def get(port: int, auth: str | bytes | None = None, ctx: ssl.SSLContext | None = None,
        timeout: float = 30) -> int:
    """The status of one ``GET /metrics`` (over TLS when ``ctx`` is given)."""
    conn: http.client.HTTPConnection
    if ctx is not None:
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=timeout)
    else:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", "/metrics", headers={"Authorization": auth} if auth else {})
        resp = conn.getresponse()
        body = resp.read()
        if resp.status == 200:
            assert b"pyebpf_dropped_series_total" in body
        return resp.status
    finally:
        conn.close()


def answer(port: int, **kw: Any) -> int | None:
    """:func:`get`'s status, or None when the connection is closed or reset
    before an answer."""
    try:
        return get(port, **kw)
    except (OSError, http.client.HTTPException):
        return None


def client_context(cert: tuple[str, str]) -> ssl.SSLContext:
    """A client's TLS context trusting ``cert``."""
    return ssl.create_default_context(cafile=cert[0])


def closed_by_peer(sock: socket.socket, within: float) -> bool:
    """True when the server closes ``sock`` (end of file or reset) within
    ``within`` seconds; False when it is still open then."""
    sock.settimeout(within)
    try:
        return sock.recv(1024) == b""
    except (ConnectionResetError, ssl.SSLError):
        return True
    except TimeoutError:
        return False


def closed_ones(socks: list[socket.socket]) -> list[socket.socket]:
    """Those of ``socks`` the server has closed (end of file or reset), now."""
    out = []
    for s in socks:
        try:
            if s.recv(1, socket.MSG_DONTWAIT | socket.MSG_PEEK) == b"":
                out.append(s)
        except BlockingIOError:
            pass
        except ConnectionResetError:
            out.append(s)
    return out


# ---------------------------------------------------------------- passwords
def test_password_checks_from_threads_are_independent() -> None:
    """Checks running at once in 8 threads, right and wrong passwords of two
    users interleaved: each answer is its own (libcrypt's crypt() shares one
    static buffer between all callers; the checks must not use it)."""
    hashes = {pw: hash_password(pw, cost=4) for pw in ("alpha-right", "beta-right")}
    wrong: collections.Counter[str] = collections.Counter()
    deadline = time.monotonic() + 30

    def check(k: int) -> None:
        for n in range(300):
            if time.monotonic() > deadline:
                return
            pw, hashed = list(hashes.items())[(k + n) % 2]
            right = (k * 3 + n) % 2 == 0
            if check_password(pw if right else pw + "x", hashed) != right:
                wrong["right refused" if right else "wrong accepted"] += 1
            wrong["checks"] += 1
    threads = [threading.Thread(target=check, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert wrong["checks"] >= 500 and set(wrong) == {"checks"}, wrong


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_concurrent_logins_over_http_accept_exactly_the_right_passwords(
        scheme: str, cert: tuple[str, str]) -> None:
    """16 scrapers log in at once as 24 users, right and wrong passwords
    interleaved (wrong ones differing from the right in their last
    character, or longer): no wrong password is accepted, no right one
    refused. bcrypt cost 7 (~10 ms a check), so that checks overlap."""
    users = {f"user{i}": f"secret-{i}" for i in range(24)}
    tls = scheme == "https"
    web = WebConfig(*(cert if tls else (None, None)),
                    users={u: hash_password(pw, cost=7) for u, pw in users.items()})
    ctx = client_context(cert) if tls else None
    tally: collections.Counter[str] = collections.Counter()
    lock = threading.Lock()
    deadline = time.monotonic() + 60
    with serving(web) as port:
        def scraper(k: int) -> None:
            for n in range(30):
                if time.monotonic() > deadline:
                    return
                user = f"user{(k + 5 * n) % 24}"
                right = (k + n) % 3 != 0
                pw = users[user] if right else (users[user][:-1] + "X", users[user] + "0")[n % 2]
                status = get(port, basic(user, pw), ctx)
                with lock:
                    tally["right" if right else "wrong"] += 1
                    if status != (200 if right else 401):
                        tally[f"{'right' if right else 'wrong'} answered {status}"] += 1
        threads = [threading.Thread(target=scraper, args=(k,)) for k in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(90)
    assert set(tally) == {"right", "wrong"}, tally
    assert tally["right"] >= 150 and tally["wrong"] >= 75, tally


def test_unknown_users_take_as_long_as_known_users_with_a_wrong_password() -> None:
    """The answer for an unknown user must not come sooner than for a known
    one with a wrong password (that would tell which users exist). Medians
    of 9 interleaved samples each, at bcrypt cost 10 (~50-100 ms a check);
    the bound (a factor 3) leaves room for a loaded machine, where a
    difference in kind (no bcrypt at all: ~1 ms) is a factor 30 or more."""
    web = WebConfig(users={"alice": hash_password("right", cost=10)})
    times: dict[str, list[float]] = {"alice": [], "mallory": []}
    with serving(web) as port:
        get(port, basic("alice", "warm-up"))
        for n in range(18):
            user = ("alice", "mallory")[n % 2]
            t0 = time.perf_counter()
            assert get(port, basic(user, f"wrong{n}")) == 401
            times[user].append(time.perf_counter() - t0)
    known, unknown = statistics.median(times["alice"]), statistics.median(times["mallory"])
    print(f"\nmedian refusal: known user {known * 1000:.1f} ms, unknown {unknown * 1000:.1f} ms")
    assert known / 3 < unknown < known * 3, {u: [round(t * 1000, 1) for t in ts]
                                             for u, ts in times.items()}


# ---------------------------------------------------------------- hostile headers
def test_a_non_ascii_authorization_header_is_refused_without_a_traceback(capfd: Any) -> None:
    """Bytes that are not ASCII where base64 is expected: 401 each time, and
    nothing on stderr beyond one line at most (each such request gave a 500
    and a traceback: log flooding by anyone)."""
    web = WebConfig(users={"alice": hash_password("right", cost=4)})
    headers = [b"Basic \xc3\xa9t\xc3\xa9",                  # UTF-8 bytes, not base64
               "Basic \u00ff\u00ff\u00ff\u00ff".encode("latin-1"),
               b"Basic " + base64.b64encode("\u00e9l\u00e8ve:mot".encode("latin-1")),
               b"\xff\xfe", b"Basic YWxp\x80Y2U6cmlnaHQ="]
    with serving(web) as port:
        statuses = [get(port, h) for h in headers for _ in range(3)]
        assert get(port, basic("alice", "right")) == 200
    err = capfd.readouterr().err
    assert statuses == [401] * len(statuses)
    assert "Traceback" not in err and len(err.splitlines()) <= 1, err


def test_credentials_with_a_nul_byte_are_refused() -> None:
    """libcrypt reads a C string: a password cut at its NUL would be checked
    as ``right``."""
    web = WebConfig(users={"alice": hash_password("right", cost=4)})
    cases = [("alice", "right\0junk"), ("alice", "right\0"), ("alice\0", "right"),
             ("alice\0bob", "right")]
    with serving(web) as port:
        assert [get(port, basic(u, pw)) for u, pw in cases] == [401] * len(cases)
        assert get(port, basic("alice", "right")) == 200
    assert not any(web.allows(basic(u, pw)) for u, pw in cases)
    with pytest.raises(OptionError, match="NUL"):
        hash_password("right\0junk", cost=4)


def test_the_scheme_is_case_insensitive_and_other_schemes_are_refused() -> None:
    web = WebConfig(users={"alice": hash_password("right", cost=4)})
    token = base64.b64encode(b"alice:right").decode()
    assert web.allows(f"basic {token}") and web.allows(f"BASIC  {token} ")
    for bad in (f"Bearer {token}", "Basic", "Basic ", f"Basic {token}=", "Basic YWxpY2U=",
                f"Basic\t{token}x", "Basic \u0100"):
        assert not web.allows(bad), bad


# ---------------------------------------------------------------- TLS, silent and slow clients
def test_a_silent_tls_client_does_not_stop_other_scrapes(cert: tuple[str, str]) -> None:
    """Clients that connect to the TLS port and send nothing (not even a
    handshake) hold only their own connection: scrapes meanwhile answer in
    seconds, not after the silent clients' timeout (60 s here)."""
    web = WebConfig(*cert, users={"alice": hash_password("right", cost=4)})
    ctx = client_context(cert)
    limits = Limits(request_timeout=60, connection_timeout=60)
    with serving(web, limits) as port:
        silent = [socket.create_connection(("127.0.0.1", port), timeout=15) for _ in range(3)]
        try:
            for _ in range(3):
                t0 = time.monotonic()
                assert get(port, basic("alice", "right"), ctx, timeout=15) == 200
                assert time.monotonic() - t0 < 10
            assert not any(closed_by_peer(s, 0.05) for s in silent)   # (still waited on)
        finally:
            for s in silent:
                s.close()


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_idle_and_slow_connections_are_closed_after_the_request_timeout(
        scheme: str, cert: tuple[str, str]) -> None:
    """With a request timeout of 1 s: a client that says nothing, one that
    sends half a request and stops, and one that dribbles a byte every 0.2 s
    (each byte before any read timeout) are all closed within a few seconds,
    while a normal scrape meanwhile is answered."""
    tls = scheme == "https"
    web = WebConfig(*cert) if tls else None
    ctx = client_context(cert) if tls else None
    limits = Limits(request_timeout=1.0, connection_timeout=30)
    with serving(web, limits) as port:
        idle = socket.create_connection(("127.0.0.1", port), timeout=15)
        half = socket.create_connection(("127.0.0.1", port), timeout=15)
        drip = socket.create_connection(("127.0.0.1", port), timeout=15)
        try:
            if tls:
                half = ctx.wrap_socket(half, server_hostname="127.0.0.1")  # type: ignore[union-attr]
                drip = ctx.wrap_socket(drip, server_hostname="127.0.0.1")  # type: ignore[union-attr]
            half.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            t0 = time.monotonic()
            assert get(port, None, ctx, timeout=15) == 200
            request = b"GET /metrics HTTP/1.1\r\n" + b"X-Slow: " + b"a" * 200
            cut = False
            for n in range(len(request)):            # (at most ~40 s)
                try:
                    drip.sendall(request[n:n + 1])
                except OSError:
                    cut = True
                    break
                if time.monotonic() - t0 > 15:
                    break
                time.sleep(0.2)
            if not cut:
                cut = closed_by_peer(drip, 5)
            took = time.monotonic() - t0
            assert cut, f"the dribbling client is still served after {took:.1f} s"
            assert took < 15
            assert closed_by_peer(idle, 5) and closed_by_peer(half, 5)
        finally:
            for s in (idle, half, drip):
                s.close()


def test_the_connection_cap_refuses_connections_beyond_it_and_bounds_the_threads() -> None:
    """With a cap of 4: 4 idle connections are held, every further one is
    closed at once (no thread is started for it), so 40 connections cost 4
    threads; once the idle ones time out, scrapes are answered again."""
    limits = Limits(max_connections=4, request_timeout=8.0, connection_timeout=30)
    with serving(None, limits) as port:
        before = threading.active_count()
        held = [socket.create_connection(("127.0.0.1", port), timeout=15) for _ in range(4)]
        try:
            wait_until(lambda: threading.active_count() >= before + 4,
                       "a thread for each held connection", timeout=10)
            extra = [socket.create_connection(("127.0.0.1", port), timeout=15) for _ in range(36)]
            try:
                assert all(closed_by_peer(s, 5) for s in extra)
                assert threading.active_count() <= before + 4
                assert not any(closed_by_peer(s, 0.05) for s in held)
            finally:
                for s in extra:
                    s.close()
            assert all(closed_by_peer(s, 20) for s in held)
            wait_until(lambda: answer(port, timeout=10) == 200, "a scrape after the idle ones left",
                       timeout=20)
        finally:
            for s in held:
                s.close()


def test_defaults_are_those_documented() -> None:
    """The defaults, as ``pyebpf export --help`` states them."""
    from pyebpf.cli.export import EPILOG
    limits = Limits()
    assert (limits.max_connections, limits.request_timeout, limits.connection_timeout) \
        == (64, 10.0, 60.0)
    text = " ".join(EPILOG.split())
    assert "at most 64 at once" in text and "within 10 s and be done within 60 s" in text


@pytest.mark.kernel
def test_pyebpf_export_bounds_idle_connections_with_the_default_limits() -> None:
    """``pyebpf export`` itself: 100 idle connections (each held a thread,
    for ever) cost at most 64 threads, the rest are closed at once, and the
    64 are closed after the 10 s request timeout; then scrapes are answered."""
    import os

    from .helpers import Exporter, scrape

    def threads(pid: int) -> int:
        return len(os.listdir(f"/proc/{pid}/task"))
    with Exporter("-e", "tracepoint:syscalls:sys_enter_getppid { @n = count(); }") as exp:
        host, port = exp.address.rsplit(":", 1)
        base = threads(exp.proc.pid)
        idle = [socket.create_connection((host, int(port)), timeout=15) for _ in range(100)]
        try:
            t0 = time.monotonic()
            wait_until(lambda: len(closed_ones(idle)) >= 36, "the connections beyond 64 closed",
                       timeout=10)
            assert threads(exp.proc.pid) <= base + 64
            wait_until(lambda: len(closed_ones(idle)) == 100, "the idle connections closed",
                       timeout=40, detail=lambda: len(closed_ones(idle)))
            took = time.monotonic() - t0
            assert took > 5, took
        finally:
            for s in idle:
                s.close()
        wait_until(lambda: answer(int(port)) == 200, "a scrape after the idle ones left")
