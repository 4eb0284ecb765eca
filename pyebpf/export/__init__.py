"""Serve a bpftrace-language program's maps to Prometheus (``pyebpf export``).

The maps stay in the kernel; each scrape of ``/metrics`` reads them (batch
lookups of the per-CPU maps, nothing read between scrapes) and renders them
through ``prometheus_client`` (the optional extra ``pyebpf-toolkit[export]``):

- :mod:`.metrics` -- how each map becomes metric families (names, types,
  labels, histogram buckets, the series cap); pure, no kernel;
- :mod:`.webconfig` -- the ``--web.config.file`` of Prometheus's exporters
  (TLS and basic authentication with bcrypt hashes), checked with
  :mod:`.passwords` (libcrypt's reentrant bcrypt);
- :mod:`.connections` -- the HTTP(S) server: one thread per connection, TLS
  handshakes in them, a cap on connections and deadlines on each;
- :mod:`.server` -- the collector over a running program, served.
"""
from __future__ import annotations

__all__ = ["EXTRA_HINT", "require_client"]

#: what a user installs to get the exporter's one dependency
EXTRA_HINT = "pip install 'pyebpf-toolkit[export]' (or: pip install prometheus_client)"


def require_client() -> None:
    """Raise :class:`~pyebpf.errors.OptionError` naming the extra when
    ``prometheus_client`` is not installed."""
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        from ..errors import OptionError
        raise OptionError(f"the exporter needs the prometheus_client package: {EXTRA_HINT}") \
            from None
