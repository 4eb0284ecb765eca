"""USDT: a Provider's path, and attaching a loaded program to a probe.

Only type-checked (``mypy --strict``), never run.  ``Provider.path`` is None
before ``load()`` (a tracer needs it loaded), the object's path after.
"""
from __future__ import annotations

import subprocess

from typing_extensions import assert_type

from pyebpf.attach import Link
from pyebpf.program import R1, R6, R7, Program
from pyebpf.usdt import Provider, Usdt, usdt

with Provider("myapp") as app:
    request = app.probe("request", "u64", "s32")
    assert_type(app.path, "str | None")              # None until loaded
    app.load()
    path = app.path
    if path is not None:                             # loaded: tell a tracer where to look
        subprocess.run(["bpftrace", "-e", f"usdt:{path}:myapp:request {{ @ = count(); }}"],
                       check=False)
    probe = usdt(app.path, "myapp:request")          # pyebpf takes it as it is
    assert_type(probe, Usdt)
    with probe.count() as hits:
        request.fire(1, -1)
        n: int = hits.value
    p = Program("requests")                          # a program of one's own
    p.mov(R6, R1)
    probe.read_arg(p, R7, 1, R6)                     # r7 = the s32
    p.ret(0)
    link = probe.attach(probe.load(p))               # loaded for this kernel, then attached
    assert_type(link, Link)
    with request.usdt().attach(p):                   # or loaded by attach (the link owns it)
        request.fire(2, -2)
    link.detach()
