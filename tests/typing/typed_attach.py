"""Loading and attaching: every attach_* takes a typed program and gives a Link.

Only type-checked (``mypy --strict``), never run.  A program is passed as the
loader returns it (a ``LoadedProgram``) or as a source to load (a DSL
``Program``, assembly text); anything else is a type error.
"""
from __future__ import annotations

import os

from typing_extensions import assert_type

from pyebpf.attach import (Link, attach_perf_event, attach_raw_tracepoint, attach_tracepoint,
                           attach_uprobe, attach_uprobes, attach_uretprobe, load_uprobe_program)
from pyebpf.loader import LoadedProgram, load
from pyebpf.maps import HashMap
from pyebpf.program import R0, R1, R2, Program
from pyebpf.usdt import attach_usdt

calls = HashMap("u32", "u64", 64, name="calls")
p = Program("kills")
key = p.stack_store(0, size=4)
p.map_increment(calls, key)
p.ret(0)

prog = load_uprobe_program(p)                       # a LoadedProgram, loaded for this kernel
assert_type(prog, LoadedProgram)
with attach_uprobe(prog, "libc", "kill", pid=os.getpid()) as link:
    assert_type(link, Link)
    os.kill(os.getpid(), 0)
    ids: tuple[int, ...] = link.link_ids
print(calls[0] + 1)

returns = attach_uretprobe(p, "libc", "kill")       # a source: the link loads and owns it
many = attach_uprobes(prog, "libc", ["kill", "getpid"], cookies=[1, 2])
for lk in (returns, many):
    lk.detach()

tp = load("r0 = 0\nexit", "tracepoint")             # assembly text, loaded
with attach_tracepoint(tp, "syscalls:sys_enter_kill"):
    pass
raw = Program("raw").mov(R0, 0).exit()
attach_raw_tracepoint(raw, "sys_enter").detach()
sample = Program("sample").mov(R1, R2).mov(R0, 0).exit()
with attach_perf_event(load(sample, "perf_event"), 99) as sampling:
    fds = sampling.fds
usdt_link: Link = attach_usdt(prog, "/usr/bin/python3", "python", "gc__start")
usdt_link.detach()
