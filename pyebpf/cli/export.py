"""``pyebpf export``: run a bpftrace program and serve its maps to Prometheus.

``pyebpf export -e 'PROGRAM'`` or ``pyebpf export FILE.bt`` with
``--listen HOST:PORT`` (default ``127.0.0.1:9435``), ``--prefix``,
``-p PID``, ``-c CMD``, ``--max-series N`` and ``--web.config.file F``
(TLS, basic authentication). The mapping of maps to metrics is
:mod:`pyebpf.export.metrics`'s; the serving :mod:`pyebpf.export.server`'s.
It runs until SIGTERM or Ctrl-C (or the program's ``exit()``), then detaches
and closes everything: nothing is left in the kernel. A ``-c`` command or
``-p`` process that ends leaves the maps served as they are (their final
values).
"""
from __future__ import annotations

import argparse
import sys

from . import positive_int

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

from .parser import Subparsers

DESCRIPTION = """\
Run a bpftrace program (as 'pyebpf bt' does) and serve its maps at /metrics
for Prometheus.  The maps are read when scraped (nothing runs between
scrapes).  count() maps are counters PREFIX NAME_total (gauges when the
program clears or deletes from them); sum/min/max/avg are gauges PREFIX NAME;
stats gives PREFIX NAME_count, _sum and the gauge PREFIX NAME_avg; hist and
lhist are histograms PREFIX NAME (_bucket{le=...}, _count).  Keys are the
labels key (one) or key0, key1... (several); stacks are folded a;b;c.
"""

EPILOG = """\
examples:
  pyebpf export -e 'uprobe:/bin/bash:readline { @lines[comm] = count(); }'
  pyebpf export latency.bt --listen 0.0.0.0:9435 --web.config.file /etc/pyebpf/web.yml
  pyebpf export -e 'usdt:./app:app:req { @lat = hist(arg0); }' -c ./app --prefix app_

web config file (as Prometheus exporters'):
  tls_server_config:
    cert_file: /etc/pyebpf/export.crt
    key_file: /etc/pyebpf/export.key
  basic_auth_users:
    prometheus: $2b$10$...      (a bcrypt hash: htpasswd -nBC 10 "")

connections: at most 64 at once (more are closed when accepted); each must
send its request (after its TLS handshake) within 10 s and be done within 60 s.

exit status: 0 stopped by SIGTERM, Ctrl-C or the program's exit(); 1 error (a
script error, a missing probe, the address in use, a bad web config); 2 usage
error.
"""

DEFAULT_LISTEN = "127.0.0.1:9435"


def listen_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[V6]:PORT`` for an IPv6 address) -> (host, port)."""
    host, sep, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT (e.g. {DEFAULT_LISTEN}), "
                                         f"not {text!r}")
    return host, int(port)


def metric_prefix(text: str) -> str:
    """A metric name prefix: letters, digits, ``_`` and ``:``, not a digit first."""
    from ..export.metrics import valid_prefix
    if not valid_prefix(text):
        raise argparse.ArgumentTypeError(f"{text!r} cannot start a metric name (letters, "
                                         "digits, '_' and ':', not a digit first)")
    return text


def register(subparsers: Subparsers) -> None:
    """Add the ``export`` sub-command to ``subparsers``."""
    from .parser import add_program_command
    p = add_program_command(
        subparsers, "export", "serve a bpftrace program's maps to Prometheus", DESCRIPTION,
        EPILOG, cmd_help="run CMD once attached (its pid is cpid); its maps stay served after",
        pid_help="attach uprobes/USDT for process PID only")
    p.add_argument("--listen", type=listen_address, default=DEFAULT_LISTEN,
                   metavar="HOST:PORT",
                   help=f"the address to serve /metrics on (default: {DEFAULT_LISTEN}; "
                        "any other address is explicit)")
    p.add_argument("--prefix", type=metric_prefix, default="pyebpf_",
                   help="the start of every metric name (default: pyebpf_)")
    p.add_argument("--max-series", type=positive_int, default=None, metavar="N",
                   help="the most keys a scrape exports, all maps together; the others "
                        "are folded into "
                        "key=\"__other__\" and counted in PREFIX dropped_series_total "
                        "(default: 10000)")
    p.add_argument("--web.config.file", dest="web_config", metavar="FILE",
                   help="TLS and basic authentication, as Prometheus exporters' web config")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """``pyebpf export``: the exit status."""
    from .runner import program_target, program_text, target_error
    got = program_text("export", args)
    if isinstance(got, int):
        return got
    text, filename, params = got
    status = program_target("export", args, exists=False)
    if status is not None:
        return status
    from ..export import require_client
    require_client()
    web = None
    if args.web_config is not None:
        from ..export import webconfig
        web = webconfig.load(args.web_config)
        if web.tls:
            web.ssl_context()                 # (a bad certificate fails now)
    status = target_error("export", args.pid, None)
    if status is not None:
        return status
    from ..lang.api import compile
    prog = compile(text, filename=filename, pid=args.pid, params=params)
    return _serve(prog, args, web)


def _serve(prog: Any, args: argparse.Namespace, web: Any) -> int:
    """Listen, attach, serve until a stop signal; detach and close."""
    from ..export.server import DEFAULT_MAX_SERIES, Exporter
    from ..session import live
    from . import StopSignals

    exporter = Exporter(prefix=args.prefix, max_series=args.max_series or DEFAULT_MAX_SERIES)
    host, port = args.listen
    stops = StopSignals()
    child = run = None
    try:
        try:
            bound = exporter.serve(host, port, web)
        except OSError as exc:
            print(f"pyebpf export: cannot listen on {host}:{port}: {exc.strerror or exc}",
                  file=sys.stderr)
            return 1
        if args.cmd:
            child = live.Child(args.cmd)
        stops.hold()
        run = prog.start(child=child, release=False)
        for notice in exporter.attach(run):
            print(f"pyebpf export: {notice}", file=sys.stderr)
        scheme = "https" if web is not None and web.tls else "http"
        shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
        print(f"pyebpf export: serving {len(exporter.exports)} map"
              f"{'s' if len(exporter.exports) != 1 else ''} at "
              f"{scheme}://{shown}:{bound[1]}/metrics", file=sys.stderr, flush=True)
        _loop(run, stops, child)
        return 0
    finally:
        stops.hold()
        exporter.detach()
        if run is not None:
            run.stop()
            run.close()
        exporter.close()
        stops.restore()
        if child is not None:
            if child.status is None:
                child.kill()
            child.close()


def _loop(run: Any, stops: Any, child: Any) -> None:
    """Read the program's events (its printf lines to stdout; clear() and
    zero() happen as they are read) until exit() or a stop signal."""
    out = sys.stdout

    def events() -> None:
        while not run.exited:
            for ev in run.poll(0.5):
                if ev.text:
                    out.write(ev.text)
            out.flush()
            if child is not None and child.status is None:
                child.poll()

    stops.run(events, child, run.child_started)
