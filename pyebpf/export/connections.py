"""The exporter's HTTP(S) server: a WSGI server with one thread per
connection, bounded in number and in time, so that no client -- silent,
slow, or one of many -- can stop the others' scrapes.

- The accept loop only accepts: it never reads, writes or does a TLS
  handshake. Each connection's handshake (when serving TLS) and request run
  in the connection's own thread.
- At most :attr:`Limits.max_connections` connections are served at once;
  one beyond that is closed as soon as it is accepted, before anything is
  read from it (no thread is started for it).
- A connection must have finished its TLS handshake and sent its whole
  request head (request line and headers) within
  :attr:`Limits.request_timeout` seconds of being accepted, and be done
  within :attr:`Limits.connection_timeout`; past that it is cut (shut down
  under whatever its thread is blocked on). A client that says nothing and
  one that dribbles a byte at a time are treated alike.
- One request per connection (HTTP/1.0 answers, ``Connection: close``): no
  connection idles between requests.
- A client's misbehaviour (a reset, a failed handshake, a timeout) is
  never logged; an error of the exporter's own while answering prints one
  line on stderr, never a traceback.

Numbers, and why: 10 s to send a request is Prometheus's default
``scrape_timeout`` (a scraper that has not sent its request by then has
already given up); 60 s for the whole connection is the longest scrape
interval commonly used; 64 connections is enough for several Prometheus
servers and people with curl, while bounding the threads (and memory) that
idle clients can hold.
"""
from __future__ import annotations

import contextlib
import dataclasses
import socket
import sys
import threading
import time
from wsgiref.simple_server import ServerHandler, WSGIRequestHandler, WSGIServer

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterator

__all__ = ["Limits", "Server", "make_server"]

#: how often (seconds) the accept loop looks for connections past their time
POLL_INTERVAL = 0.25


@dataclasses.dataclass(frozen=True)
class Limits:
    """How many connections the server serves at once, and for how long
    (seconds; see the module docs)."""

    #: connections served at once; more are closed when accepted
    max_connections: int = 64
    #: from accept to the end of the request head (TLS handshake included)
    request_timeout: float = 10.0
    #: from accept to the end of the answer
    connection_timeout: float = 60.0


class _Connection:
    """One connection being served: its socket (the TLS one once wrapped)
    and its deadlines."""

    __slots__ = ("sock", "head_by", "done_by", "heard")

    def __init__(self, sock: socket.socket, limits: Limits) -> None:
        now = time.monotonic()
        self.sock = sock
        self.head_by = now + limits.request_timeout
        self.done_by = now + limits.connection_timeout
        self.heard = False          # the request head was read

    def overdue(self, now: float) -> bool:
        return now > self.done_by or (not self.heard and now > self.head_by)

    def cut(self) -> None:
        """Shut the socket down under its thread (which then sees an end of
        file or an error, and finishes)."""
        try:
            # (the plain socket's call, also for a TLS socket: its own would
            # drop the TLS state under the thread using it)
            socket.socket.shutdown(self.sock, socket.SHUT_RDWR)
        except OSError:
            pass


class _Answer(ServerHandler):
    """wsgiref's handler of one request, logging an error in one line."""

    def log_exception(self, exc_info: Any) -> None:
        """One line for an error of the application; nothing for the client's
        (a connection reset or cut while answering)."""
        if not isinstance(exc_info[1], OSError):
            _say(f"error answering a request: {exc_info[1]!r}")


class _Handler(WSGIRequestHandler):
    """Reads one request and answers it through the WSGI application;
    logs nothing (a scrape a second would fill the journal)."""

    server: Server

    def log_message(self, format: str, *args: Any) -> None:
        """Nothing."""

    def handle(self) -> None:
        """Read the request head, then answer it (marked busy meanwhile)."""
        try:
            self.raw_requestline = self.rfile.readline(65537)
            if len(self.raw_requestline) > 65536:
                self.requestline = self.request_version = self.command = ""
                self.send_error(414)
                return
            if not self.parse_request():
                return
        except OSError:                     # (reset, cut, TLS error: the client's)
            return
        with self.server.busy():
            answer = _Answer(self.rfile, self.wfile, sys.stderr,  # type: ignore[arg-type]
                             self.get_environ(), multithread=True)
            answer.request_handler = self   # type: ignore[attr-defined]
            answer.run(self.server.wsgi_app)


class Server(WSGIServer):
    """The WSGI server (see the module docs); ``serve_forever`` in one
    thread, each connection in a daemon thread of its own."""

    #: the listening socket's backlog (socketserver's 5 would make a burst of
    #: scrapers wait for SYN retries)
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], family: int, app: Callable[..., Any],
                 ssl_context: Any, limits: Limits) -> None:
        self.address_family = family
        self.ssl_context = ssl_context
        self.limits = limits
        self._conns: set[_Connection] = set()
        self._lock = threading.Condition()
        self._local = threading.local()                 # .conn: the thread's connection
        self._answering = 0
        #: connections closed at once because the cap was reached
        self.refused = 0
        super().__init__(address, _Handler)
        self.wsgi_app = app
        self.set_app(app)

    # ------------------------------------------------ the accept loop's side
    def process_request(self, request: Any, client_address: Any) -> None:
        """Start the connection's thread, or close it at once when the cap is
        reached."""
        conn = _Connection(request, self.limits)
        with self._lock:
            full = len(self._conns) >= self.limits.max_connections
            if full:
                self.refused += 1
            else:
                self._conns.add(conn)
        if full:
            self.shutdown_request(request)
            return
        try:
            threading.Thread(target=self._serve_connection, args=(conn, client_address),
                             name="pyebpf-export-conn", daemon=True).start()
        except RuntimeError:                        # (no thread to be had)
            self._forget(conn)
            self.shutdown_request(request)

    def service_actions(self) -> None:
        """Cut the connections past their time (called by ``serve_forever``
        between accepts, every :data:`POLL_INTERVAL` at the latest)."""
        now = time.monotonic()
        with self._lock:
            for conn in self._conns:
                if conn.overdue(now):
                    conn.cut()

    def serve_forever(self, poll_interval: float = POLL_INTERVAL) -> None:
        """Accept until :meth:`shutdown`."""
        super().serve_forever(poll_interval)

    # ------------------------------------------------ the connection's thread
    def _serve_connection(self, conn: _Connection, client_address: Any) -> None:
        self._local.conn = conn
        sock = request = conn.sock
        try:
            request.settimeout(self.limits.connection_timeout)      # (a backstop)
            if self.ssl_context is not None:
                sock = self.ssl_context.wrap_socket(request, server_side=True,
                                                    do_handshake_on_connect=False)
                with self._lock:
                    conn.sock = sock
                sock.do_handshake()
            self.finish_request(sock, client_address)
        except OSError:                 # (the client's: reset, cut, handshake failed)
            pass
        except Exception as exc:        # (ours)
            _say(f"error serving a connection: {exc!r}")
        finally:
            self._forget(conn)
            self.shutdown_request(sock)

    def _forget(self, conn: _Connection) -> None:
        """``conn`` is done (said before its socket is closed: a socket is
        never cut once its fd may be another connection's)."""
        with self._lock:
            self._conns.discard(conn)

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        """The request of this thread's connection was read and is being
        answered, in the ``with`` block (:meth:`wait_answered` waits for it)."""
        with self._lock:
            self._local.conn.heard = True
            self._answering += 1
        try:
            yield
        finally:
            with self._lock:
                self._answering -= 1
                self._lock.notify_all()

    # ------------------------------------------------ closing
    def wait_answered(self, timeout: float) -> None:
        """Wait (``timeout`` seconds at most) until no request is being
        answered."""
        with self._lock:
            self._lock.wait_for(lambda: self._answering == 0, timeout=timeout)

    def cut_all(self) -> None:
        """Cut every connection still open."""
        with self._lock:
            for conn in self._conns:
                conn.cut()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One line on stderr (never a traceback); nothing for the client's
        errors."""
        exc = sys.exc_info()[1]
        if not isinstance(exc, OSError):
            _say(f"error serving a connection: {exc!r}")


def _say(text: str) -> None:
    print(f"pyebpf export: {text}", file=sys.stderr, flush=True)


def make_server(host: str, port: int, app: Callable[..., Any], ssl_context: Any = None,
                limits: Limits | None = None) -> Server:
    """A :class:`Server` listening on ``host:port`` (IPv4 or IPv6 as ``host``
    is; port 0: any), serving ``app``, over TLS with ``ssl_context`` if
    given. Raises OSError when the address cannot be bound."""
    info = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, addr = info[0][0], str(info[0][4][0])
    return Server((addr, port), family, app, ssl_context, limits or Limits())
