"""docs/guide/tracing.md, "In your Python program": a bpftrace-like Trace, run as a session."""
from __future__ import annotations

import time

from pyebpf.trace import Trace

t = Trace("uprobe:libc:malloc").hist("arg0", name="bytes")
print(t.show())                       # the generated instructions
with t.start() as session:
    time.sleep(5)
    text: str = session.format_text()
    print(text)
