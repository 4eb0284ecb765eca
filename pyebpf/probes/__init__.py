"""Probe specs and the sources behind them: what the language and the
recipes attach to.

:mod:`.sources` parses a probe spec (``uprobe:/bin/bash:readline``,
``tracepoint:sched:sched_switch``...) into a :class:`ProbeSpec` and resolves
it into a source (:class:`UprobeSource`, :class:`TracepointSource`) that
knows its program type, how to read its arguments and how to attach;
:mod:`.usdt_source` resolves a USDT probe (:class:`UsdtProbeSource`) through
:mod:`pyebpf.usdt`.  Names are imported on first use.
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:       # (what __getattr__ imports on first use, as type checkers see it)
    from .sources import (ProbeSpec as ProbeSpec, ProbeSpecError as ProbeSpecError,
                          ProbeSource as ProbeSource, parse_probe as parse_probe,
                          probe_source as probe_source, UprobeSource as UprobeSource,
                          TracepointSource as TracepointSource, FixedTypeSource as FixedTypeSource,
                          KINDS as KINDS)
    from .usdt_source import (UsdtProbeSource as UsdtProbeSource,
                              usdt_probe_source as usdt_probe_source)
else:
    from .._lazy import lazy_dir, lazy_getattr
    _LAZY = {"ProbeSpec": "sources", "ProbeSpecError": "sources", "ProbeSource": "sources",
             "parse_probe": "sources", "probe_source": "sources", "UprobeSource": "sources",
             "TracepointSource": "sources", "FixedTypeSource": "sources", "KINDS": "sources",
             "UsdtProbeSource": "usdt_source", "usdt_probe_source": "usdt_source"}
    __getattr__ = lazy_getattr(globals(), _LAZY)
    __dir__ = lazy_dir(globals(), _LAZY)

__all__ = ["ProbeSpec", "ProbeSpecError", "ProbeSource", "parse_probe", "probe_source",
           "UprobeSource", "TracepointSource", "FixedTypeSource", "KINDS", "UsdtProbeSource",
           "usdt_probe_source"]
