"""Small BPF programs the attach tests load (DSL)."""
from __future__ import annotations

from pyebpf import ptregs
from pyebpf.program import R0, R1, R6, R7, Program


def counter(m, name: str = "count") -> Program:
    """``m[0] += 1`` (m: u32 -> u64)."""
    p = Program(name)
    key = p.stack_store(0, 4)
    p.map_increment(m, key)
    p.ret(0)
    return p


def counter_for_tgid(m, tgid: int, name: str = "count_tgid") -> Program:
    """``m[0] += 1`` when the current process is ``tgid``."""
    p = Program(name)
    p.call("get_current_pid_tgid")
    p.rsh(R0, 32)
    p.jne(R0, tgid, "out")
    key = p.stack_store(0, 4)
    p.map_increment(m, key)
    p.label("out")
    p.ret(0)
    return p


def cookie_counter(m, name: str = "cookies") -> Program:
    """``m[bpf_get_attach_cookie(ctx)] += 1`` (m: u64 -> u64)."""
    p = Program(name)
    p.call("get_attach_cookie")
    key = p.stack_store(R0, 8)
    p.map_increment(m, key)
    p.ret(0)
    return p


def return_values(values, total, name: str = "retvals") -> Program:
    """uretprobe: ``values[rax] += 1`` and ``total[0] += rax``."""
    p = Program(name)
    p.mov(R6, R1)
    ptregs.load_ret(p, R7, ctx=R6)
    key = p.stack_store(R7, 8)
    p.map_increment(values, key)
    key0 = p.stack_store(0, 4)
    p.map_increment(total, key0, amount=R7)
    p.ret(0)
    return p


def argument(values, n: int, name: str = "arg") -> Program:
    """uprobe at entry: ``values[arg n] += 1``."""
    p = Program(name)
    ptregs.load_arg(p, R7, n)
    key = p.stack_store(R7, 8)
    p.map_increment(values, key)
    p.ret(0)
    return p
