"""The exporter: a ``prometheus_client`` collector over a running program's
maps, and the HTTP(S) server that serves it.

Nothing runs between scrapes: each scrape takes the collector's lock, reads
every map once (the per-CPU maps' batch lookups: the probes are never
blocked, they keep counting while the map is read) and renders it
(:mod:`.metrics`). Before the program is attached and after it is detached
the maps are not there: a scrape then gets only ``PREFIX
dropped_series_total`` -- never an error -- so a Prometheus scraping while
the exporter starts or stops sees no failed scrape.

The server is ``prometheus_client``'s WSGI application (content negotiation:
the OpenMetrics format when the scraper asks for it, ``?name[]=`` filters,
gzip) wrapped with basic authentication when a web configuration asks for it
(:mod:`.webconfig`), on a threaded WSGI server of bounded connections that
does each TLS handshake in the connection's own thread
(:mod:`.connections`).
"""
from __future__ import annotations

import threading

from ..errors import PyebpfError
from .connections import Limits
from .metrics import MapExport, describe, families, resetting_maps

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable, Iterator

    from .webconfig import WebConfig

__all__ = ["Exporter", "DEFAULT_MAX_SERIES", "Limits"]

#: the most keys a scrape exports, all maps together (the others are folded
#: into ``__other__`` series)
DEFAULT_MAX_SERIES = 10_000

#: seconds :meth:`Exporter.close` waits for the scrapes being answered
CLOSE_GRACE = 5.0


class Exporter:
    """Serves the maps of one running program (see the module docs).

    ``prefix`` starts every metric name; ``max_series`` caps the keys a
    scrape exports, all maps together (see :mod:`.metrics`). :meth:`attach` a started :class:`~pyebpf.lang.runtime.BtRun`,
    :meth:`detach` it before closing it."""

    def __init__(self, *, prefix: str = "pyebpf_", max_series: int = DEFAULT_MAX_SERIES) -> None:
        from prometheus_client import CollectorRegistry
        self.prefix = prefix
        self.max_series = max_series
        self.exports: list[MapExport] = []
        self.dropped = 0
        #: the maps a scrape could not read or render (said once each)
        self.failed: set[str] = set()
        self._run: Any = None
        self._lock = threading.Lock()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)            # (collect() is called per scrape)
        self.httpd: Any = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------ the maps
    def attach(self, run: Any) -> list[str]:
        """Serve the maps of ``run`` from now on; the notices to print (maps
        exported unusually: see :meth:`MapExport.notice`)."""
        unit = run.unit
        maps = [(name, plan.kind, plan.key, plan.value) for name, plan in unit.maps.items()]
        exports = describe(maps, resetting_maps(unit.script), self.prefix)
        with self._lock:
            self.exports = exports
            self._run = run
        return [n for n in (e.notice() for e in exports) if n]

    def detach(self) -> None:
        """Stop reading the maps (scrapes go on, without them)."""
        with self._lock:
            self._run = None

    def collect(self) -> Iterator[Any]:
        """The metric families of one scrape (``prometheus_client``'s
        collector protocol)."""
        from prometheus_client.core import CounterMetricFamily
        with self._lock:
            out: list[Any] = []
            run = self._run
            if run is not None:
                stacks = run.stacks.formatter(4) if run.stacks is not None else None
                budget = self.max_series
                for exp in self.exports:
                    if not exp.exported:
                        continue
                    try:
                        entries = run.entries(exp.name)
                        fams, folded = families(exp, entries, max_series=budget,
                                                stacks=stacks)
                    except (PyebpfError, OSError, ValueError) as exc:
                        self._failed(exp, exc)        # (the other maps are still served)
                        continue
                    if exp.key is not None:
                        budget -= len(entries) - folded
                    self.dropped += folded
                    out.extend(fams)
            dropped = CounterMetricFamily(
                self.prefix + "dropped_series",
                "map keys folded into the __other__ series by --max-series, added per scrape",
                value=self.dropped)
        yield from out
        yield dropped

    def _failed(self, exp: MapExport, exc: Exception) -> None:
        """Say once (on stderr) that map ``exp`` could not be read or rendered."""
        if exp.name not in self.failed:
            self.failed.add(exp.name)
            import sys
            print(f"pyebpf export: {exp.name} cannot be exported, the other maps are: {exc}",
                  file=sys.stderr, flush=True)

    # ------------------------------------------------------------ serving
    def serve(self, host: str, port: int, web: WebConfig | None = None,
              limits: Limits | None = None) -> tuple[str, int]:
        """Listen on ``host:port`` (port 0: any) and serve ``/metrics`` in a
        daemon thread; the address bound. ``limits``: how many connections
        at once and for how long (:class:`~.connections.Limits`'s defaults
        when None). Raises OSError when the address cannot be bound,
        :class:`~pyebpf.errors.OptionError` for a bad certificate."""
        from prometheus_client.exposition import make_wsgi_app

        from .connections import make_server

        app: Callable[..., Any] = make_wsgi_app(self.registry)
        ctx = web.ssl_context() if web is not None and web.tls else None
        if web is not None and web.users:
            app = _authenticated(app, web)
        httpd = make_server(host, port, app, ctx, limits)
        self.httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, name="pyebpf-export",
                                        daemon=True)
        self._thread.start()
        bound = httpd.socket.getsockname()
        return str(bound[0]), int(bound[1])

    def close(self, grace: float = CLOSE_GRACE) -> None:
        """Stop serving (idempotent); the maps are detached first.

        Scrapes being answered are let finish (for ``grace`` seconds at
        most): the answering threads are daemons, and a process that exits
        right after closing would otherwise cut a response in the middle.
        Connections that have not sent their request yet are cut."""
        self.detach()
        httpd, self.httpd = self.httpd, None
        if httpd is not None:
            httpd.shutdown()                    # no new connection is accepted
            httpd.wait_answered(grace)
            httpd.cut_all()
            httpd.server_close()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None


def _authenticated(app: Callable[..., Any], web: WebConfig) -> Callable[..., Any]:
    """``app`` behind basic authentication (401 with a challenge otherwise)."""
    def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if web.allows(environ.get("HTTP_AUTHORIZATION")):
            result: Iterable[bytes] = app(environ, start_response)
            return result
        start_response("401 Unauthorized", [("WWW-Authenticate", 'Basic realm="pyebpf"'),
                                            ("Content-Type", "text/plain; charset=utf-8")])
        return [b"Unauthorized\n"]
    return guarded
