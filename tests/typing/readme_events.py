"""docs/guide/assembly.md: events through a ring buffer, read in batches, from a uprobe."""
from __future__ import annotations

from pyebpf import ptregs
from pyebpf.attach import attach_uprobe
from pyebpf.events import BPF_RB_NO_WAKEUP, RingBufferReader
from pyebpf.program import R1, R6, R7, R8, Program

running = True
with RingBufferReader(size=1 << 22, drops=True, decode="<QQ") as events:
    p = Program("args")
    p.mov(R6, R1)
    ptregs.load_arg(p, R7, 0, ctx=R6)            # the first two arguments
    ptregs.load_arg(p, R8, 1, ctx=R6)
    p.output_record(events.ringbuf, [(R7, 8), (R8, 8)], drops=events.drops,
                    flags=BPF_RB_NO_WAKEUP)
    p.ret(0)
    with attach_uprobe(p, "./server", "handle"):
        while running:
            for a, b in events.read_batch(timeout=0.01):
                print(a, b)
            running = False
    lost: int = events.lost
    print(lost)
