"""docs/guide/tracing.md: USDT probes declared at run time, and probes of another program."""
from __future__ import annotations

from pyebpf.usdt import Provider, usdt

app = Provider("myapp")
request = app.probe("request", "u64", "s32")
app.load()
if request.enabled:
    request.fire(42, -1)

gc = usdt("/usr/bin/python3.11", "python:gc__start")
with gc.count() as hits:
    total: int = hits.value
    print(total)
